# magic-trace for GDB: `(gdb) source build/lib/magic-trace-gdb.py` (or
# `gdb -x`). GDB's side of the host — commands, breakpoints, threads and
# their stacks, the module list from the dynamic linker's r_map — is here;
# the recorder's rings, decode, symbols, model and writers are the core's,
# through the magic_trace_gdb extension module beside this file
# (plugin/gdb/GdbModule.cpp). docs/gdb.md.
#
# The recorder is magic-trace's QEMU plugin: `magic-trace run` starts the
# program under qemu-x86_64 with it and connects to QEMU's gdbstub.
import atexit
import os
import shutil
import subprocess
import sys

import gdb

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# The target: QEMU, its gdbstub, the program's modules and stacks.
from magic_trace_gdb_target import (SOCKET_DEADLINE_S, connect, fail,  # noqa
                                    find_qemu, find_recorder, link_map,
                                    socket_dir, target_description,
                                    thread_stacks, wait_for_socket)
# report --annotate, report --top and diff: their options to the core's views.
import magic_trace_gdb_views as views  # noqa

# The core module, and the options every command parses.
from magic_trace_gdb_options import (TIMERS, WINDOW_HELP,  # noqa
                                     WINDOW_OPTIONS, Options, core,
                                     doctor_lines, need_core, parse_memory,
                                     parse_size, window_of)


class State:
    session = None  # core.Session of the current `run`
    qemu = None  # the QEMU process
    ring_dir = None
    socket_dir = None  # the sockets' directory when ring_dir's is too long
    program = None
    keep_truth = False
    exited = None  # exit code once the process exited
    stop_tid = 0  # the thread GDB's last stop was about
    triggers = {}  # breakpoint number -> Trigger


state = State()


def cleanup():
    if state.qemu is not None and state.qemu.poll() is None:
        state.qemu.kill()
        try:
            state.qemu.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    for directory in (state.ring_dir, state.socket_dir):
        if directory:
            shutil.rmtree(directory, ignore_errors=True)
    state.socket_dir = None


atexit.register(cleanup)


def read_inferior_memory(address, size):
    """The stopped process's bytes at [address, address + size), or none
    when GDB cannot read them all (the code there stays a gap)."""
    try:
        return bytes(gdb.selected_inferior().read_memory(address, size))
    except gdb.MemoryError:
        return b""


def take_snapshot(reason, path, triggered_tid=0, window=("", "", "")):
    need_core()
    if state.session is None:
        fail("nothing is being recorded (start with 'magic-trace run' or "
             "'magic-trace attach')")
    alive = state.exited is None and gdb.selected_inferior().pid != 0
    pcs, stops = thread_stacks(triggered_tid) if alive else ([], [])
    if state.qemu is not None and state.stop_tid:
        # QEMU's gdbstub holds only the thread GDB's stop is about; the
        # others ran on while GDB read their PCs and stacks (docs/qemu.md,
        # "Snapshots: the stop flush"): the recorder ends each where it
        # comes to its next block, and their stacks are not taken.
        pcs = [pc for pc in pcs if pc[0] == state.stop_tid]
        stops = [stop for stop in stops if stop[0] == state.stop_tid]
    try:
        result = state.session.snapshot(
            pcs, alive, link_map(state.program) if alive else [], stops, reason, path,
            os.path.basename(state.program or ""), *window,
            read_inferior_memory if alive else None)
    except RuntimeError as error:
        fail(str(error))
    print(result["line"])
    for note in result["notes"]:
        print("magic-trace: note: " + note)
    return result


def arm_in_recorder(options):
    """--continue: a trigger inside the QEMU recorder, not a breakpoint
    (a breakpoint that resumes itself crashes GDB 13 in a multi-threaded
    QEMU guest, and a breakpoint slows QEMU on its whole page). It fires
    where a block starts: a function's entry or *ADDRESS."""
    location = options.positional[0]
    try:
        if location.startswith("*"):
            address = int(gdb.parse_and_eval(location[1:]))
        else:
            address = int(gdb.parse_and_eval("(long)&" + location))
    except gdb.error:
        fail("--continue needs a function that is loaded, or *ADDRESS "
             "('%s' is neither; without --continue a breakpoint waits "
             "for its library)" % location)
    pattern = options.get("output", "magic-trace-%N.fxt")
    count = options.number("count", 0)
    window = window_of(options)
    try:
        for note in state.session.set_modules(
                link_map(state.program), os.path.basename(state.program or "")):
            print("magic-trace: note: " + note)
        state.session.arm_trigger(address, count, pattern, *window)
    except RuntimeError as error:
        fail(str(error))
    print("magic-trace: the recorder takes a snapshot each time %s "
          "(0x%x) starts%s, and the program runs on (no breakpoint) -> %s"
          % (location, address, ", %d times" % count if count else "",
             pattern))


class Trigger:
    def __init__(self, breakpoint, pattern, count, window):
        self.breakpoint = breakpoint
        self.pattern = pattern
        self.count = count
        self.window = window  # (--window, --max-slices, --max-trace)
        self.hits = 0


class TriggerBreakpoint(gdb.Breakpoint):
    """A snapshot-on breakpoint. It always stops the process: the snapshot
    is taken by the stop event, where every thread is stopped and may be
    read (stop() must not switch threads or resume)."""

    def stop(self):
        return True


def collect_triggered():
    """Decodes and prints the snapshots the recorder's own triggers took
    since the last look (snapshot-on --continue)."""
    if state.session is None:
        return
    try:
        lines = state.session.collect_triggered()
    except RuntimeError as error:
        lines = ["error: magic-trace: " + str(error)]
    for line in lines:
        print(line)


def on_stop(event):
    thread = gdb.selected_thread()
    state.stop_tid = thread.ptid[1] if thread is not None else 0
    if state.session is not None and state.exited is None:
        try:
            state.session.set_modules(link_map(state.program),
                                      os.path.basename(state.program or ""))
        except (gdb.error, RuntimeError):
            pass
    collect_triggered()
    if not isinstance(event, gdb.BreakpointEvent):
        return
    for breakpoint in event.breakpoints:
        trigger = state.triggers.get(breakpoint.number)
        if trigger is None or (trigger.count and trigger.hits >= trigger.count):
            continue
        trigger.hits += 1
        number = (state.session.status()["snapshots"]
                  if state.session is not None else 0) + 1
        path = trigger.pattern.replace("%N", str(number))
        tid = gdb.selected_thread().ptid[1]
        try:
            take_snapshot("breakpoint %d" % breakpoint.number, path, tid,
                          trigger.window)
        except gdb.GdbError as error:
            print("error: %s (snapshot at breakpoint %d)"
                  % (error, breakpoint.number))
        if trigger.count and trigger.hits >= trigger.count:
            breakpoint.enabled = False


def on_exit(event):
    state.exited = getattr(event, "exit_code", 0)
    collect_triggered()


gdb.events.stop.connect(on_stop)
gdb.events.exited.connect(on_exit)


class MagicTrace(gdb.Command):
    """magic-trace: record the program under QEMU with magic-trace's Intel PT
recorder and snapshot the last moments before a breakpoint, for Perfetto
(ui.perfetto.dev) and in the terminal.

  (gdb) file PROGRAM
  (gdb) magic-trace run --start main
  (gdb) magic-trace snapshot-on stop_here
  (gdb) continue
  (gdb) magic-trace report --last 20us"""

    def __init__(self):
        super().__init__("magic-trace", gdb.COMMAND_USER, prefix=True)


class RunCommand(gdb.Command):
    """Start the loaded program under qemu-x86_64 with magic-trace's recorder.

magic-trace run [--start FUNCTION] [--snapshot-size BYTES]
                [--timer-resolution low|normal|high] [--ground-truth]
                [--keep-snapshots N] [--keep-memory SIZE]
                [--trigger-wait MS] [-- ARGS]

--start FUNCTION: record from this function of the program (default: the
  first instruction) and stop there.
--snapshot-size: PT ring per thread, a power of two (default 4M).
--timer-resolution: timing packets, as magic-trace's option (default normal).
--ground-truth: also keep every executed address (for tests).
--keep-snapshots N: decoded snapshots kept in memory for report and save
  (default 8; older ones keep their line and file).
--keep-memory SIZE: memory for them (default a 32nd of the machine's; the
  newest that fit stay).
--trigger-wait MS: how long a recorder trigger waits while 4 snapshots wait
  to be decoded, before it is skipped (default 5000; 0: skip at once)."""

    def __init__(self):
        super().__init__("magic-trace run", gdb.COMMAND_RUNNING)

    def invoke(self, argument, from_tty):
        need_core()
        options = Options(argument, {"start", "snapshot-size",
                                     "timer-resolution", "keep-snapshots",
                                     "keep-memory", "trigger-wait"},
                          {"ground-truth"}, "run")
        program = gdb.current_progspace().filename
        if not program:
            fail("no program: load one with 'file PROGRAM' first")
        if state.qemu is not None and state.qemu.poll() is None:
            fail("the program already runs under QEMU (kill it first)")
        try:
            core.check_program(program)
        except RuntimeError as error:
            fail(str(error))
        size = parse_size(options.get("snapshot-size", "4M"))
        timer = options.get("timer-resolution", "normal")
        if timer not in TIMERS:
            fail("--timer-resolution takes low, normal or high, got '%s'"
                 % timer)
        keep = options.get("keep-snapshots", "8")
        if not keep.isdigit() or int(keep) < 1:
            fail("--keep-snapshots takes a number of at least 1, got '%s'"
                 % keep)
        keep_memory = parse_memory(options.get("keep-memory")) \
            if "keep-memory" in options.values else 0
        wait = options.get("trigger-wait", "5000")
        if not wait.isdigit():
            fail("--trigger-wait takes milliseconds, got '%s'" % wait)
        start = options.get("start")
        start_address = ""
        if start:
            try:
                start_address = "0x%x" % core.find_symbol(program, start)
            except RuntimeError:
                fail("--start %s matches no function of %s (check the "
                     "spelling)" % (start, os.path.basename(program)))
        qemu = find_qemu()
        recorder = find_recorder()
        cleanup()
        # Rings of sessions killed with their debugger go; this one's are in
        # a directory of its own (0700) that names GDB as its owner.
        core.remove_stale_temp_dirs()
        state.ring_dir = core.make_private_temp_dir("magic-trace-qemu")
        tdesc = target_description(qemu, program, state.ring_dir)
        arguments = "%s,dir=%s,size=%d,timer=%s,start=%s" % (
            recorder, state.ring_dir, size, timer, start_address)
        if timer == "high":
            arguments += ",noretcomp=on"
        keep_truth = "ground-truth" in options.flags
        if keep_truth:
            arguments += ",ground-truth=on"
        # GDB connects to the recorder, which relays to QEMU's gdbstub and
        # holds the other threads while GDB has the program stopped
        # (QEMU's user mode runs them on: docs/qemu.md "GDB's all-stop").
        sockets = socket_dir(state.ring_dir, "gdbstub.sock",
                             "magic-trace-gdb")
        if sockets != state.ring_dir:
            state.socket_dir = sockets
        sock = os.path.join(sockets, "gdb.sock")
        stub = os.path.join(sockets, "gdbstub.sock")
        arguments += ",relay=%s,stub=%s" % (sock, stub)
        state.qemu = subprocess.Popen(
            [qemu, "-plugin", arguments, "-g", stub, program] +
            options.positional, stdin=subprocess.DEVNULL)
        wait_for_socket(sock, state.qemu, SOCKET_DEADLINE_S)
        state.program = program
        state.keep_truth = keep_truth
        state.exited = None
        state.triggers = {}
        state.session = core.Session(state.ring_dir, keep_truth, int(keep),
                                     int(wait), keep_memory)
        gdb.execute("set sysroot /", to_string=True)
        gdb.execute("set tdesc filename " + tdesc, to_string=True)
        connect(sock, state.qemu)
        line = ("magic-trace: launched %s under %s with the magic-trace "
                "recorder (rings in %s)" % (os.path.basename(program), qemu,
                                           state.ring_dir))
        if start:
            gdb.execute("tbreak " + start, to_string=True)
            gdb.execute("continue", to_string=True)
            line += ", stopped at %s (recording from there)" % start
        else:
            line += ", stopped at its first instruction (recording)"
        print(line)
        print("magic-trace: recording process %d with backend qemu, %d KiB "
              "per thread, timer %s, threads all"
              % (state.qemu.pid, size // 1024, timer))


class AttachCommand(gdb.Command):
    """Start recording the process GDB is debugging with Intel PT (the perf
backend: perf_event_open, per-CPU rings, every thread from its first
instruction). Without Intel PT use 'magic-trace run', which relaunches the
program under magic-trace's QEMU recorder.

magic-trace attach [--backend perf] [--snapshot-size BYTES]
                   [--timer-resolution low|normal|high] [--keep-snapshots N]
                   [--keep-memory SIZE]

--backend: perf, the one backend that attaches to a running process here
  (auto means perf).
--snapshot-size: the AUX ring per CPU, a power of two (default 4M).
--timer-resolution: timing packets, as magic-trace's option (default normal).
--keep-snapshots N: decoded snapshots kept in memory (default 8).
--keep-memory SIZE: memory for them (default a 32nd of the machine's)."""

    def __init__(self):
        super().__init__("magic-trace attach", gdb.COMMAND_RUNNING)

    def invoke(self, argument, from_tty):
        need_core()
        options = Options(argument, {"backend", "snapshot-size",
                                     "timer-resolution", "keep-snapshots",
                                     "keep-memory"},
                          set(), "attach")
        backend = options.get("backend", "auto")
        if backend not in ("auto", "perf"):
            fail("--backend takes perf (or auto) here; the QEMU recorder "
                 "starts with 'magic-trace run', which attaches by itself")
        inferior = gdb.selected_inferior()
        if inferior.pid == 0:
            fail("no process to trace (start one first, e.g. 'break main' "
                 "and 'run')")
        if state.qemu is not None and state.qemu.poll() is None:
            fail("the program runs under magic-trace's QEMU recorder, which "
                 "records it already")
        size = parse_size(options.get("snapshot-size", "4M"))
        timer = options.get("timer-resolution", "normal")
        if timer not in TIMERS:
            fail("--timer-resolution takes low, normal or high, got '%s'"
                 % timer)
        keep = options.number("keep-snapshots", 8)
        keep_memory = parse_memory(options.get("keep-memory")) \
            if "keep-memory" in options.values else 0
        session = core.Session("", False, max(1, keep),
                               keep_memory=keep_memory)
        tids = [thread.ptid[1] for thread in inferior.threads()]
        try:
            session.attach_perf(inferior.pid, tids, timer, size)
        except RuntimeError as error:
            fail(str(error))
        state.session = session
        state.program = gdb.current_progspace().filename
        state.exited = None
        state.triggers = {}
        print("magic-trace: recording process %d with backend perf, %d KiB "
              "per CPU, timer %s; the hardware records while the process "
              "runs" % (inferior.pid, size >> 10, timer))


class DetachCommand(gdb.Command):
    """Stop recording (the snapshots stay for save and report).

magic-trace detach"""

    def __init__(self):
        super().__init__("magic-trace detach", gdb.COMMAND_RUNNING)

    def invoke(self, argument, from_tty):
        need_core()
        if state.session is None:
            fail("nothing is being recorded (start with 'magic-trace run' or "
                 "'magic-trace attach')")
        collect_triggered()
        if state.qemu is not None and state.qemu.poll() is None:
            print("magic-trace: the program runs on under the QEMU recorder "
                  "until it exits; snapshots stay available to save and "
                  "report")
        else:
            state.session.detach_perf()
            print("magic-trace: stopped recording (snapshots stay available "
                  "to save and report)")
        for number in list(state.triggers):
            for breakpoint in gdb.breakpoints():
                if breakpoint.number == number:
                    breakpoint.delete()
        state.triggers = {}


class SnapshotOnCommand(gdb.Command):
    __doc__ = """Take a snapshot every time a breakpoint is hit.

magic-trace snapshot-on LOCATION [-o PATTERN] [--count N] [--continue]
                        [--window DURATION|all] [--max-slices N]
                   [--max-trace SIZE]

LOCATION: as GDB's 'break' takes it (FUNCTION, FILE:LINE, *ADDRESS).
-o PATTERN: output file; %N is the snapshot number (default
  magic-trace-%N.fxt).
--count N: stop triggering after N hits (default: every hit).
Without --continue the process stops at each hit ('continue' resumes it).
--continue: the QEMU recorder itself snapshots at each hit of FUNCTION's
  entry (or *ADDRESS) and the program runs on; the snapshots are decoded
  and listed at the next stop or exit.
""" + WINDOW_HELP

    def __init__(self):
        super().__init__("magic-trace snapshot-on", gdb.COMMAND_BREAKPOINTS)

    def invoke(self, argument, from_tty):
        need_core()
        options = Options(argument, {"output", "count"} | WINDOW_OPTIONS,
                          {"continue"}, "snapshot-on")
        if len(options.positional) != 1:
            fail("snapshot-on takes one location, e.g. 'magic-trace "
                 "snapshot-on handle_order'")
        if state.session is None:
            fail("nothing is being recorded (start with 'magic-trace run')")
        if "continue" in options.flags:
            return arm_in_recorder(options)
        window = window_of(options)
        breakpoint = TriggerBreakpoint(options.positional[0])
        pattern = options.get("output", "magic-trace-%N.fxt")
        state.triggers[breakpoint.number] = Trigger(
            breakpoint, pattern, options.number("count", 0), window)
        print("magic-trace: breakpoint %d takes a snapshot at each hit -> %s"
              % (breakpoint.number, pattern))


class ContinueCommand(gdb.Command):
    """Resume the program (GDB's 'continue'); the recorder records while it
runs and snapshot-on breakpoints take their snapshots when hit."""

    def __init__(self):
        super().__init__("magic-trace continue", gdb.COMMAND_RUNNING)

    def invoke(self, argument, from_tty):
        if state.session is None:
            fail("nothing is being recorded (start with 'magic-trace run')")
        gdb.execute("continue " + argument, from_tty)


class SnapshotCommand(gdb.Command):
    __doc__ = """Take a snapshot now (the process must be stopped, or have exited).

magic-trace snapshot [-o FILE] [--window DURATION|all] [--max-slices N]
                     [--max-trace SIZE]

""" + WINDOW_HELP

    def __init__(self):
        super().__init__("magic-trace snapshot", gdb.COMMAND_DATA)

    def invoke(self, argument, from_tty):
        need_core()
        options = Options(argument, {"output"} | WINDOW_OPTIONS, set(),
                          "snapshot")
        take_snapshot("command", options.get("output", ""),
                      window=window_of(options))


class ReportCommand(gdb.Command):
    __doc__ = """Print a snapshot's call tree: total and self time per frame.

magic-trace report [--last DURATION] [--thread TID] [--depth N] [--snapshot K]
                   [--window DURATION|all] [--max-slices N]
                   [--max-trace SIZE]
""" + views.REPORT_HELP + WINDOW_HELP

    def __init__(self):
        super().__init__("magic-trace report", gdb.COMMAND_DATA)

    def invoke(self, argument, from_tty):
        need_core()
        options = Options(argument, {"last", "thread", "depth", "snapshot"} |
                          WINDOW_OPTIONS | views.VIEW_VALUES, views.VIEW_FLAGS,
                          "report")
        collect_triggered()
        if state.session is None:
            fail("no snapshot yet (take one with 'magic-trace snapshot' or "
                 "'magic-trace snapshot-on')")
        try:
            if views.is_view(options):
                text = views.report_view(state.session, options,
                                         window_of(options))
            else:
                if options.positional:
                    fail("unexpected argument '%s' (see 'help magic-trace "
                         "report')" % options.positional[0])
                text = state.session.report(
                    options.number("snapshot", 0), options.get("last", ""),
                    options.number("depth", 0), options.number("thread", -1),
                    *window_of(options))
        except RuntimeError as error:
            fail(str(error))
        gdb.write(text)


class DiffCommand(gdb.Command):
    __doc__ = views.DIFF_HELP

    def __init__(self):
        super().__init__("magic-trace diff", gdb.COMMAND_DATA)

    def invoke(self, argument, from_tty):
        need_core()
        options = Options(argument, {"rows"}, {"json"}, "diff")
        collect_triggered()
        if state.session is None:
            fail("no snapshot yet (take one with 'magic-trace snapshot' or "
                 "'magic-trace snapshot-on')")
        try:
            gdb.write(views.diff_view(state.session, options))
        except RuntimeError as error:
            fail(str(error))


class SaveCommand(gdb.Command):
    __doc__ = """Write a snapshot again.

magic-trace save -o FILE [--format fxt|json|folded|bundle|perf] [--snapshot K]
                 [--window DURATION|all] [--max-slices N]
                 [--max-trace SIZE]

""" + WINDOW_HELP

    def __init__(self):
        super().__init__("magic-trace save", gdb.COMMAND_DATA)

    def invoke(self, argument, from_tty):
        need_core()
        options = Options(argument, {"output", "format", "snapshot"} |
                          WINDOW_OPTIONS, set(), "save")
        collect_triggered()
        if "output" not in options.values:
            fail("save needs -o FILE (see 'help magic-trace save')")
        if state.session is None:
            fail("no snapshot yet (take one with 'magic-trace snapshot')")
        try:
            print(state.session.save(options.number("snapshot", 0),
                                     options.get("output"),
                                     options.get("format", ""),
                                     *window_of(options)))
        except RuntimeError as error:
            fail(str(error))


class StatusCommand(gdb.Command):
    """What is being recorded: instructions, threads, snapshots. --json:
one object, each snapshot as LLDB's status --json has it (decodeSeconds)."""

    def __init__(self):
        super().__init__("magic-trace status", gdb.COMMAND_STATUS)

    def invoke(self, argument, from_tty):
        need_core()
        options = Options(argument, set(), {"json"}, "status")
        if state.session is None:
            print("magic-trace: not recording (start with 'magic-trace run')")
            return
        collect_triggered()
        try:
            if "json" in options.flags:
                return print(state.session.status_json())
            status = state.session.status()
        except RuntimeError as error:
            fail(str(error))
        for line in views.status_lines(status, state.exited is not None):
            print(line)


class DoctorCommand(gdb.Command):
    """What magic-trace can record here, and what is missing."""

    def __init__(self):
        super().__init__("magic-trace doctor", gdb.COMMAND_SUPPORT)

    def invoke(self, argument, from_tty):
        for line in doctor_lines(HERE):
            print(line)


MagicTrace()
RunCommand()
AttachCommand()
DetachCommand()
SnapshotOnCommand()
ContinueCommand()
SnapshotCommand()
ReportCommand()
DiffCommand()
SaveCommand()
StatusCommand()
DoctorCommand()
