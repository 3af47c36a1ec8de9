#!/usr/bin/env python3
"""Kills a debugger with SIGKILL while the program it started under QEMU
(magic-trace run) runs, and reports whether QEMU, with the program, ended
within a second, and which magic-trace directories the temp directory still
holds. Usage: kill_debugger.py TMPDIR -- DEBUGGER-COMMAND...

The command must start the program and leave it running (e.g. magic-trace
run, then continue). Every wait has a deadline."""
import os
import signal
import subprocess
import sys
import time

tmp = sys.argv[1]
command = sys.argv[sys.argv.index("--") + 1:]


def recorders_of(parent):
    """QEMUs the debugger started with the recorder (not, say, the QEMU
    GDB's host asks for its target description)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as stat:
                text = stat.read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        ppid = int(text[text.rindex(")") + 2:].split()[1])
        if ppid != parent or "qemu" not in name:
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as cmdline:
                if b"libmagic-trace-qemu" in cmdline.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def running(pid):
    """Alive and not a zombie (a container's init may never reap it)."""
    try:
        with open("/proc/%d/stat" % pid) as stat:
            text = stat.read()
    except OSError:
        return False
    return text[text.rindex(")") + 2] != "Z"


debugger = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
qemu = []
deadline = time.monotonic() + 60
while not qemu and time.monotonic() < deadline:
    if debugger.poll() is not None:
        break
    qemu = recorders_of(debugger.pid)
    time.sleep(0.05)
if not qemu:
    debugger.kill()
    print(debugger.communicate(timeout=30)[0].decode(errors="replace"))
    sys.exit("no QEMU started by the debugger")
# Let the program run a moment, as a user would before the debugger dies.
time.sleep(1.0)
print("qemu running:", all(running(pid) for pid in qemu))
print("dirs while running:", sorted(
    name for name in os.listdir(tmp) if name.startswith("magic-trace-")))
os.kill(debugger.pid, signal.SIGKILL)
killed = time.monotonic()
debugger.wait(timeout=30)
while any(running(pid) for pid in qemu) and time.monotonic() - killed < 10:
    time.sleep(0.01)
elapsed = time.monotonic() - killed
if any(running(pid) for pid in qemu):
    print("qemu still running 10 s after the debugger was killed")
    for pid in qemu:
        os.kill(pid, signal.SIGKILL)
elif elapsed < 1.0:
    print("qemu gone within a second")
else:
    print("qemu gone after %.2f s" % elapsed)
