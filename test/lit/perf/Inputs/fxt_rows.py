#!/usr/bin/env python3
"""Compares two .fxt files row for row as Perfetto nests them.

usage: fxt_rows.py FILTER.fxt DECODE.fxt

Each file is dumped with `magic-trace-fxt-check --dump` (every event, one a
line, indented by the depth Perfetto's slice tracker gives it; the check
fails when Perfetto would nest or drop a slice otherwise than the file
means). A row is an event without its timestamps: thread, type, depth, name
and arguments. Rows are compared per thread, in the file's order; threads in
tid order (Perfetto shows each thread as its own track, so the order of the
threads in a file means nothing). Prints "OK N rows, T threads" or the first
MISMATCH with the rows around it.

The one row the two decoders cannot share (each is listed here, and the
comparison is otherwise exact):
- "[times estimated from instruction counts]": libipt's decode times the
  instructions before the first timing packet (and after the last) from
  instruction counts and says so with this instant; perf's decoder times
  them its own way and does not say which times it estimated, so the
  filter's trace cannot carry the mark. Only the decoder's side may have it.
"""
import re
import subprocess
import sys

ESTIMATED = "[times estimated from instruction counts]"
ROW = re.compile(r"^tid (\d+) ([a-z]+) [0-9.]+ (.*)$")


def rows(path, drop_estimated):
    out = subprocess.run(["magic-trace-fxt-check", "--dump", path],
                         check=True, capture_output=True, text=True).stdout
    threads = {}
    for line in out.splitlines():
        match = ROW.match(line)
        if not match:
            continue
        tid, kind, rest = match.groups()
        if drop_estimated and kind == "instant" and \
                rest.strip().startswith(ESTIMATED):
            continue
        threads.setdefault(int(tid), []).append(kind + " " + rest)
    return threads


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ours = rows(sys.argv[1], drop_estimated=False)
    reference = rows(sys.argv[2], drop_estimated=True)
    if sorted(ours) != sorted(reference):
        print("MISMATCH threads: filter %s, decode %s"
              % (sorted(ours), sorted(reference)))
        return
    total = 0
    for tid in sorted(ours):
        a, b = ours[tid], reference[tid]
        for i in range(max(len(a), len(b))):
            left = a[i] if i < len(a) else "<none>"
            right = b[i] if i < len(b) else "<none>"
            if left != right:
                print("MISMATCH tid %d row %d" % (tid, i + 1))
                for j in range(max(0, i - 3), min(i + 3, max(len(a), len(b)))):
                    print("  filter: %s" % (a[j] if j < len(a) else "<none>"))
                    print("  decode: %s" % (b[j] if j < len(b) else "<none>"))
                return
        total += len(a)
    print("OK %d rows, %d threads" % (total, len(ours)))


if __name__ == "__main__":
    main()
