"""Run inside LLDB (script import socket_dir; socket_dir.show(TMPDIR)):
finds the QEMU gdb socket of this LLDB process, made by LLDB's qemu-user
platform under the session's private directory (in TMPDIR, or in /tmp when
TMPDIR is too long for a socket's path), and says whether every directory
from that private one down to the socket is this user's and not writable by
others."""
import glob
import os


def show(tmpdir):
    pid = os.getpid()
    found = []
    for root in (tmpdir, "/tmp"):
        found += glob.glob("%s/magic-trace-lldb-*/lldb/%d/qemu-*.socket"
                           % (root, pid))
    print("socket:", " ".join(found) or "none")
    if len(found) != 1:
        return
    path = os.path.dirname(found[0])
    safe = True
    while True:
        info = os.lstat(path)
        safe = safe and info.st_uid == os.geteuid() and not info.st_mode & 0o022
        if os.path.basename(path).startswith("magic-trace-lldb-"):
            break
        path = os.path.dirname(path)
    print("every directory above it is %s's and not writable by others: %s"
          % ("root" if os.geteuid() == 0 else "the user's", safe))
