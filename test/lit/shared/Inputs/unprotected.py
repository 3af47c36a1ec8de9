#!/usr/bin/env python3
"""unprotected.py CMD...: runs CMD with the kernel's fs.protected_symlinks,
fs.protected_fifos and fs.protected_regular at 0, as on a machine without
them (issue 50's attacks worked there), and restores them after. Those
sysctls are the whole machine's, so runs are serialised by a lock and each
restores what it found."""
import fcntl
import subprocess
import sys

KEYS = ["protected_symlinks", "protected_fifos", "protected_regular"]


def path(key):
    return "/proc/sys/fs/" + key


def main():
    with open("/tmp/.magic-trace-lit-sysctl.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        saved = {key: open(path(key)).read().strip() for key in KEYS}
        try:
            for key in KEYS:
                with open(path(key), "w") as f:
                    f.write("0")
            return subprocess.call(sys.argv[1:])
        finally:
            for key, value in saved.items():
                with open(path(key), "w") as f:
                    f.write(value)


if __name__ == "__main__":
    sys.exit(main())
