#!/usr/bin/env python3
"""Counts how many distinct call targets get distinct slice names.

Usage: names_per_target.py CALLS PERFETTO_TREE

CALLS is `magic-trace-decode --dump calls` (lines "... call FROM ... -> TO
..."); PERFETTO_TREE is `magic-trace-fxt-check --perfetto-tree` of the same
trace. A target's name is that of the slices whose name ends with its
address (as "module+0xENTRY" does when the module is loaded at its link
address, as the real-hardware images are). Prints the number of distinct
targets and of distinct names among them.
"""
import re
import sys

targets = set()
with open(sys.argv[1]) as f:
    for line in f:
        match = re.search(r" call 0x[0-9a-f]+ .* -> (0x[0-9a-f]+)", line)
        if match:
            targets.add(int(match.group(1), 16))

names = set()
with open(sys.argv[2], encoding="utf-8", errors="replace") as f:
    for line in f:
        name = line.rstrip("\n").split(" ", 2)[2]
        match = re.search(r"\+0x([0-9a-fA-F]+)$", name)
        if match and int(match.group(1), 16) in targets:
            names.add(name)

print(f"distinct call targets {len(targets)}, distinct names of them "
      f"{len(names)}")
