#!/usr/bin/env python3
"""scaled_summary.py ONE MANY FACTOR THREADS: the `--dump none` summary MANY
must count FACTOR times the instructions and events of ONE, in THREADS
threads, with no errors."""
import re
import sys


def summary(path):
    text = open(path).read()
    match = re.search(r"summary: (\d+) threads, (\d+) instructions, (\d+) events, "
                      r"(\d+) errors", text)
    if not match:
        sys.exit("no summary in " + path + ": " + text)
    return [int(group) for group in match.groups()]


one, many = summary(sys.argv[1]), summary(sys.argv[2])
factor, threads = int(sys.argv[3]), int(sys.argv[4])
expected = [threads, one[1] * factor, one[2] * factor, 0]
if many != expected:
    sys.exit("summary of %s is %s, expected %s (threads, instructions, events, "
             "errors)" % (sys.argv[2], many, expected))
print("ok: %d threads, %d instructions, %d events" % tuple(many[:3]))
