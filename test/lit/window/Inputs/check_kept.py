#!/usr/bin/env python3
"""Reads `magic-trace status --json` out of an LLDB transcript and checks
the kept snapshots against the memory budget: the bytes they hold are at
most the budget (the newest one always stays, so one alone may exceed it),
and the ones released are the oldest. Prints "kept A to B snapshots, within
the budget" or what is wrong."""
import json
import sys

text = open(sys.argv[1]).read()
start = text.index('{"attached"')
status, _ = json.JSONDecoder().raw_decode(text[start:])
kept = status["kept"]
count, held, budget = kept["snapshots"], kept["bytes"], kept["budgetBytes"]
if count > 1 and held > budget:
    print("%d snapshots hold %d bytes, over the %d budget" % (count, held, budget))
    sys.exit(1)
if count < 1:
    print("no snapshot kept")
    sys.exit(1)
print("kept 1 to 2 snapshots, within the budget" if count <= 2 else
      "kept %d snapshots, within the budget" % count)
