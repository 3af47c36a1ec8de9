#!/usr/bin/env python3
"""Compares `magic-trace-decode --dump calls` with the emulator's ground-truth
events (BUNDLE/groundtruth/<tid>.events, "<index> <kind> 0x<from> 0x<to>"):
the sequence of (call|return, from, to) must be the same. For bundles whose
ring did not wrap and that lost nothing to overflows.

Prints "OK tid <tid> <n> calls and returns" per thread, or "MISMATCH ...".
"""
import os
import re
import sys

LINE = re.compile(r"^\d+ \+\d+ (call|return) (0x[0-9a-f]+)\b.* -> (0x[0-9a-f]+|\?)")


def main():
    decoded, bundle = sys.argv[1], sys.argv[2]
    threads = {}
    tid = None
    with open(decoded) as f:
        for line in f:
            if line.startswith("# thread "):
                tid = int(line.split()[2])
                threads[tid] = []
                continue
            m = LINE.match(line)
            if m and tid is not None:
                to = int(m.group(3), 16) if m.group(3) != "?" else None
                threads[tid].append((m.group(1), int(m.group(2), 16), to))
    ok = bool(threads)
    for tid, got in sorted(threads.items()):
        want = []
        with open(os.path.join(bundle, "groundtruth", "%d.events" % tid)) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4 and parts[1] in ("call", "return"):
                    want.append((parts[1], int(parts[2], 16), int(parts[3], 16)))
        # The last transfer before tracing stops has no decoded target.
        if got and got[-1][2] is None and len(got) == len(want):
            got[-1] = (got[-1][0], got[-1][1], want[-1][2])
        if got == want:
            print("OK tid %d %d calls and returns" % (tid, len(got)))
            continue
        ok = False
        i = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                 min(len(got), len(want)))
        print("MISMATCH tid %d at %d: decoded %d, truth %d" %
              (tid, i, len(got), len(want)))
        for j in range(max(0, i - 2), min(i + 3, max(len(got), len(want)))):
            g = got[j] if j < len(got) else "-"
            w = want[j] if j < len(want) else "-"
            print("  %d: decoded %s truth %s" % (j, g, w))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
