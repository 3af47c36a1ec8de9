#!/usr/bin/env python3
"""Compares `magic-trace-decode --dump insns` output with the emulator's
ground truth (BUNDLE/groundtruth/<tid>.insns, <tid>.lost).

The expected sequence is the ground truth minus the instruction ranges an
injected overflow lost. A thread whose ring buffer did not wrap must match it
exactly; a wrapped one (magic-trace.json says so) must match a suffix of it,
since decoding starts at the first PSB the ring kept.

Prints "OK tid <tid> <n> instructions[ (<k> lost ranges)][ wrapped]" per
thread, or "MISMATCH ..." with context and exits 1.
"""
import argparse
import array
import json
import os
import sys


def read_decoded(path):
    threads = {}
    current = None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("# thread "):
                current = int(line.split()[2])
                threads[current] = []
            elif line.startswith("0x") and current is not None:
                threads[current].append(int(line, 16))
    return threads


def read_addresses(path):
    """An array('Q') of the 8-byte little-endian addresses in `path` (the
    ground truth's <tid>.insns, magic-trace-ref-decode --binary's)."""
    insns = array.array("Q")
    with open(path, "rb") as f:
        insns.frombytes(f.read())
    if sys.byteorder != "little":
        insns.byteswap()
    return insns


def read_truth_array(bundle, tid):
    """The thread's ground truth as an array('Q') with the ranges in
    <tid>.lost taken out, and those ranges."""
    base = os.path.join(bundle, "groundtruth", str(tid))
    insns = read_addresses(base + ".insns")
    lost = []
    if os.path.exists(base + ".lost"):
        with open(base + ".lost") as f:
            for line in f:
                if line.strip():
                    first, count = map(int, line.split())
                    lost.append((first, count))
    # The union of the lost ranges, taken out from the last.
    merged = []
    for first, count in sorted(lost):
        end = min(first + count, len(insns))
        if merged and first <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        elif first < end:
            merged.append([first, end])
    for first, end in reversed(merged):
        del insns[first:end]
    return insns, lost


def read_truth(bundle, tid):
    insns, lost = read_truth_array(bundle, tid)
    return insns.tolist(), lost


def wrapped_threads(bundle):
    path = os.path.join(bundle, "magic-trace.json")
    if not os.path.exists(path):
        return set()
    with open(path) as f:
        meta = json.load(f)
    result = set()
    for thread in meta.get("threads", []):
        if thread.get("wrapped"):
            result.add(int(thread["tid"]))
    return result


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("decoded")
    parser.add_argument("bundle")
    parser.add_argument("--wrapped", action="store_true",
                        help="accept a suffix of the ground truth")
    args = parser.parse_args()

    decoded = read_decoded(args.decoded)
    wrapped = wrapped_threads(args.bundle)
    ok = True
    for tid in sorted(decoded):
        got = decoded[tid]
        want, lost = read_truth(args.bundle, tid)
        is_wrapped = args.wrapped or tid in wrapped
        if is_wrapped:
            if len(got) > len(want):
                print("MISMATCH tid %d: %d decoded > %d executed" %
                      (tid, len(got), len(want)))
                ok = False
                continue
            want = want[len(want) - len(got):]
        if got == want:
            print("OK tid %d %d instructions%s%s" %
                  (tid, len(got), " (%d lost ranges)" % len(lost) if lost else "",
                   " wrapped" if is_wrapped else ""))
            continue
        ok = False
        i = first_difference(got, want)
        print("MISMATCH tid %d at %d: decoded %d, truth %d" %
              (tid, i, len(got), len(want)))
        for j in range(max(0, i - 3), min(i + 4, max(len(got), len(want)))):
            g = "0x%x" % got[j] if j < len(got) else "-"
            w = "0x%x" % want[j] if j < len(want) else "-"
            print("  %d: decoded %s truth %s" % (j, g, w))
    if not decoded:
        print("MISMATCH: no thread in the decoded output")
        ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
