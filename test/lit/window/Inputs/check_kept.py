#!/usr/bin/env python3
"""Reads an LLDB transcript with `magic-trace status --json` and two
VmRSS lines (printed with `script`) around the snapshots, and checks the
memory budget: the kept snapshots hold at most the budget (the newest always
stays, so one alone may exceed it), and the debugger grew by at most the
budget plus one decode's working set (LARGEST_DECODE_MB, what a 300,000-slice
window of 4 threads takes while it is decoded: its model, its raw trace and
the allocator's slack). Prints "kept N of M snapshots in X MB, within the B
MB budget; the session grew by G MB" or what is wrong, and fails then."""
import json
import re
import sys

LARGEST_DECODE_MB = 160

text = open(sys.argv[1]).read()
start = text.index('{"attached"')
status, _ = json.JSONDecoder().raw_decode(text[start:])
kept = status["kept"]
count, held, budget = kept["snapshots"], kept["bytes"], kept["budgetBytes"]
total = len(status["snapshots"])
rss = [int(kib) for kib in re.findall(r"VmRSS:(?:\\t|\s)+(\d+) kB", text)]
mb = 1 << 20
if count < 1:
    sys.exit("no snapshot kept")
if count > 1 and held > budget:
    sys.exit("%d snapshots hold %d bytes, over the %d budget" % (count, held, budget))
if len(rss) < 2:
    sys.exit("no VmRSS before and after")
grew = (rss[-1] - rss[0]) * 1024
if grew > budget + LARGEST_DECODE_MB * mb:
    sys.exit("the session grew by %d MB, over the %d MB budget and %d MB of "
             "decoding" % (grew // mb, budget // mb, LARGEST_DECODE_MB))
print("kept %d of %d snapshots in %d MB, within the %d MB budget; the session "
      "grew by %d MB" % (count, total, held // mb, budget // mb, max(grew, 0) // mb))
