# The GDB host's side of the target (magic-trace-gdb.py imports it): QEMU
# and its gdbstub (starting, connecting, the target description GDB needs to
# follow shared libraries), and what GDB knows of the program: its modules
# from the dynamic linker's r_map and each thread's stack. docs/gdb.md.
import hashlib
import os
import shutil
import subprocess
import tempfile
import time

import gdb

HERE = os.path.dirname(os.path.abspath(__file__))
# Every wait has a deadline.
SOCKET_DEADLINE_S = 10.0
# A Unix socket's path: sockaddr_un's sun_path, less its NUL.
SOCKET_PATH_MAX = 107
TDESC_DEADLINE_S = 30


def fail(message):
    raise gdb.GdbError("magic-trace: " + message)


def find_qemu():
    qemu = os.environ.get("MT_QEMU") or shutil.which("qemu-x86_64")
    if not qemu:
        fail("qemu-x86_64 is not installed: install Debian's qemu-user "
             "package (apt-get install qemu-user)")
    return qemu


def find_recorder():
    plugin = os.environ.get("MT_QEMU_PLUGIN") or os.path.join(
        HERE, "libmagic-trace-qemu.so")
    if not os.path.exists(plugin):
        fail("%s is missing (build it: scripts/build.sh builds it beside "
             "this file)" % plugin)
    return plugin


def wait_for_socket(path, process, deadline):
    end = time.monotonic() + deadline
    while not os.path.exists(path):
        if process.poll() is not None:
            fail("qemu-x86_64 exited (status %d) before it listened for "
                 "GDB (see its message above)" % process.returncode)
        if time.monotonic() > end:
            fail("qemu-x86_64 did not listen for GDB within %g s"
                 % deadline)
        time.sleep(0.02)


def connect(sock, process):
    """`target remote SOCK`, again while QEMU has bound its socket but not
    yet listens (the connection is refused then, and QEMU still waits)."""
    end = time.monotonic() + SOCKET_DEADLINE_S
    while True:
        try:
            gdb.execute("target remote " + sock, to_string=True)
            return
        except gdb.error as error:
            if "refused" not in str(error) or time.monotonic() > end:
                fail("cannot connect to qemu-x86_64's gdbstub: %s" % error)
            if process.poll() is not None:
                fail("qemu-x86_64 exited (status %d) before GDB connected"
                     % process.returncode)
            time.sleep(0.05)


def trusted_description(path):
    """Whether PATH is a target description this session may load: this
    user's regular file that others cannot write, and whole."""
    import magic_trace_gdb as core
    if not os.path.lexists(path) or core.check_private(path, False):
        return False
    try:
        with open(path) as cached:
            text = cached.read()
    except OSError:
        return False
    return ("<osabi>GNU/Linux</osabi>" in text and "orig_rax" in text and
            text.rstrip().endswith("</target>"))


def socket_dir(directory, name, prefix):
    """`directory` when a socket `name` in it has a path that fits a
    sockaddr_un; under a long TMPDIR, a new private directory PREFIX-XXXXXX
    of its own in /tmp, which the caller removes."""
    if len(os.path.join(directory, name)) <= SOCKET_PATH_MAX:
        return directory
    import magic_trace_gdb as core
    return core.make_private_temp_dir(prefix, "/tmp")


def target_description(qemu, program, scratch_dir):
    """QEMU's x86-64 target description, as its gdbstub sends it, with
    osabi GNU/Linux and orig_rax (GDB's amd64 Linux ABI needs both) so that
    GDB follows the dynamic linker (shared libraries, dlopen). Asked once
    per QEMU binary, of a QEMU that runs nothing, by a batch GDB; cached in
    the user's cache directory (~/.cache/magic-trace), never in a shared
    one: a cached file is trusted only when it is this user's, nobody else
    can write it, and it reads as a description with GNU/Linux's osabi;
    otherwise it is made again. Where the user has no usable cache
    directory, it goes to the session's private directory `scratch_dir`."""
    import magic_trace_gdb as core
    info = os.stat(qemu)
    key = hashlib.sha1(("%s:%d:%d" % (qemu, info.st_size, info.st_mtime_ns))
                       .encode()).hexdigest()[:16]
    try:
        cache = core.user_cache_dir()
    except RuntimeError as error:
        print("magic-trace: not caching QEMU's target description (%s)"
              % error)
        cache = scratch_dir
    path = os.path.join(cache, "gdb-tdesc-%s.xml" % key)
    if trusted_description(path):
        return path
    scratch = core.make_private_temp_dir("magic-trace-tdesc")
    sockets = socket_dir(scratch, "sock", "magic-trace-tdesc")
    sock = os.path.join(sockets, "sock")
    process = subprocess.Popen([qemu, "-g", sock, program],
                               stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        wait_for_socket(sock, process, SOCKET_DEADLINE_S)
        # The socket file exists from bind(); until QEMU listens a connect
        # is refused, and the batch GDB is tried again.
        end = time.monotonic() + SOCKET_DEADLINE_S
        while True:
            dump = subprocess.run(
                ["gdb", "-nx", "-batch", "-ex", "target remote " + sock,
                 "-ex", "maint print xml-tdesc"],
                stdin=subprocess.DEVNULL, capture_output=True, text=True,
                timeout=TDESC_DEADLINE_S).stdout
            if "<?xml" in dump or time.monotonic() > end:
                break
            time.sleep(0.1)
    except subprocess.TimeoutExpired:
        fail("asking qemu-x86_64 for its target description took over %d s"
             % TDESC_DEADLINE_S)
    finally:
        process.kill()
        process.wait(timeout=5)
        for directory in {scratch, sockets}:
            shutil.rmtree(directory, ignore_errors=True)
    begin, end = dump.find("<?xml"), dump.find("</target>")
    if begin < 0 or end < 0 or "</architecture>" not in dump:
        fail("qemu-x86_64's gdbstub gave no target description (check "
             "that it is QEMU 7.2 or later)")
    xml = dump[begin:end]
    registers = xml.count("<reg ")
    xml = xml.replace("</architecture>",
                      "</architecture>\n  <osabi>GNU/Linux</osabi>", 1)
    xml += ('  <feature name="org.gnu.gdb.i386.linux">\n'
            '    <reg name="orig_rax" bitsize="64" type="int" regnum="%d"/>\n'
            '  </feature>\n</target>\n' % registers)
    # Sessions that start together each write their own file, and the
    # rename makes the shared one appear whole.
    handle, scratch_path = tempfile.mkstemp(dir=os.path.dirname(path),
                                            suffix=".xml")
    with os.fdopen(handle, "w") as out:
        out.write(xml)
    os.replace(scratch_path, path)
    return path


def read_u64(inferior, address):
    return int.from_bytes(bytes(inferior.read_memory(address, 8)), "little")


def read_string(inferior, address, limit=4096):
    data = b""
    while len(data) < limit:
        try:
            chunk = bytes(inferior.read_memory(address + len(data), 64))
        except gdb.MemoryError:
            break
        if b"\0" in chunk:
            return (data + chunk[:chunk.index(b"\0")]).decode(errors="replace")
        data += chunk
    return data.decode(errors="replace")


def link_map(program):
    """(path, load bias) of every module, from the dynamic linker's r_map
    (GDB 13's Python gives no load address per objfile). The program is
    the entry with an empty name; a static program has no r_map."""
    inferior = gdb.selected_inferior()
    entries = []
    try:
        r_debug = int(gdb.parse_and_eval("(long)&_r_debug"))
        entry = read_u64(inferior, r_debug + 8)  # r_map
        seen = 0
        while entry and seen < 4096:
            bias = read_u64(inferior, entry)  # l_addr
            name = read_string(inferior, read_u64(inferior, entry + 8))
            entries.append((name or program, bias))
            entry = read_u64(inferior, entry + 24)  # l_next
            seen += 1
    except (gdb.error, gdb.MemoryError):
        entries = []
    if not any(path == program for path, _ in entries):
        entries.insert(0, (program, 0))
    return entries


def thread_stacks(triggered_tid):
    """Every thread's PC (for the recorder's stop flush) and its physical
    frames: PC, then return addresses, with their function names. Inlined
    frames share their physical frame's PC and tail-call frames have no
    return address on the stack, so neither is listed (the symbolizer and
    the trace show them)."""
    selected = gdb.selected_thread()
    try:
        frame = gdb.selected_frame()
    except gdb.error:
        frame = None
    pcs, stops = [], []
    for thread in gdb.selected_inferior().threads():
        tid = thread.ptid[1]
        thread.switch()
        current = gdb.newest_frame()
        pcs.append((tid, current.pc()))
        frames, names = [], []
        while current is not None and len(frames) < 4096:
            if current.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):
                if current.pc() == 0:
                    break
                frames.append(current.pc())
                names.append(current.name() or "")
            try:
                current = current.older()
            except gdb.error:
                break
        stops.append((tid, frames, names, tid == triggered_tid))
    if selected is not None and selected.is_valid():
        selected.switch()
        if frame is not None and frame.is_valid():
            frame.select()
    return pcs, stops
