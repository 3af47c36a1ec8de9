#!/usr/bin/env python3
"""Runs a command while watching a directory tree: every 5 ms, how many
recorder snapshot directories (snap-N) wait in it and how many bytes it holds.
Prints the command's output, then "disk: at most N snapshot directories, B
bytes" and its exit status (the tests check the output: a session that
ends with an expected error still passes). Usage: watch_disk.py DIR --
COMMAND..."""
import os
import subprocess
import sys
import threading
import time

root = sys.argv[1]
command = sys.argv[sys.argv.index("--") + 1:]
most_snaps = most_bytes = 0
done = threading.Event()


def watch():
    global most_snaps, most_bytes
    while not done.is_set():
        snaps = size = 0
        for dirpath, dirnames, filenames in os.walk(root):
            snaps += sum(1 for d in dirnames if d.startswith("snap-"))
            for name in filenames:
                try:
                    size += os.path.getsize(os.path.join(dirpath, name))
                except OSError:
                    pass
        most_snaps = max(most_snaps, snaps)
        most_bytes = max(most_bytes, size)
        time.sleep(0.005)


thread = threading.Thread(target=watch)
thread.start()
result = subprocess.run(command, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, timeout=900)
done.set()
thread.join()
sys.stdout.write(result.stdout.decode(errors="replace"))
print("disk: at most %d snapshot directories, %d bytes" % (most_snaps,
                                                          most_bytes))
print("exit status %d" % result.returncode)
