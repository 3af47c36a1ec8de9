#!/usr/bin/env python3
"""Reads a session's output: the VmHWM lines printed at its two milestones
(after 100 and after 1,000 recorder snapshots) and prints their ratio, e.g.
"peak RSS after 1000 / after 100: 1.014 (within 10%)"."""
import re
import sys

text = open(sys.argv[1]).read()
peaks = [int(value) for value in re.findall(r"VmHWM:\\t\s*(\d+) kB", text)]
if len(peaks) != 2:
    sys.exit("expected two VmHWM readings, found %d" % len(peaks))
ratio = peaks[1] / peaks[0]
print("peak RSS after 1000 / after 100: %.3f (%s)" % (
    ratio, "within 10%" if ratio <= 1.10 else "MORE than 10%"))
