#!/usr/bin/env python3
"""Checks a bundle's decode against the recorder's ground truth, per thread.

  check_truth.py [--decoder ref|ours] [--wrapped] BUNDLE...

The decoder is magic-trace-ref-decode (libipt's instruction decoder in
ptxed's loop, not our decoder) or magic-trace-decode --dump insns. For each
thread, its instruction addresses must equal DIR/groundtruth/<tid>.insns with
the ranges in <tid>.lost taken out; with --wrapped (a ring that overwrote its
oldest bytes), a suffix of it that starts at a PSB. Prints one line per
bundle: "ok NAME THREADS INSNS LOST" or "MISMATCH NAME ..." with the first
difference.
"""
import argparse
import os
import struct
import subprocess
import sys


def truth(bundle, tid):
    base = os.path.join(bundle, "groundtruth", str(tid))
    with open(base + ".insns", "rb") as f:
        data = f.read()
    insns = list(struct.unpack("<%dQ" % (len(data) // 8), data))
    lost = set()
    if os.path.exists(base + ".lost"):
        with open(base + ".lost") as f:
            for line in f:
                first, count = map(int, line.split())
                lost.update(range(first, first + count))
    return [ip for i, ip in enumerate(insns) if i not in lost], len(lost)


def decode(bundle, decoder):
    if decoder == "ref":
        command = ["magic-trace-ref-decode", bundle, "--no-errors-in-stream"]
    else:
        command = ["magic-trace-decode", bundle, "--dump", "insns"]
    out = subprocess.run(command, capture_output=True, text=True,
                         timeout=600).stdout
    threads = {}
    current = None
    for line in out.splitlines():
        if line.startswith("# thread"):
            current = int(line.split()[2])
            threads[current] = []
        elif line.startswith("0x") and current is not None:
            threads[current].append(int(line.split()[0], 16))
    return threads


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--decoder", choices=["ref", "ours"], default="ref")
    parser.add_argument("--wrapped", action="store_true")
    parser.add_argument("bundles", nargs="+")
    args = parser.parse_args()
    status = 0
    for bundle in args.bundles:
        name = os.path.basename(bundle.rstrip("/"))
        decoded = decode(bundle, args.decoder)
        tids = sorted(int(f.split(".")[0])
                      for f in os.listdir(os.path.join(bundle, "groundtruth"))
                      if f.endswith(".insns"))
        total = lost_total = 0
        problem = None
        for tid in tids:
            expected, lost = truth(bundle, tid)
            got = decoded.get(tid, [])
            lost_total += lost
            total += len(got)
            if args.wrapped and len(got) < len(expected):
                expected = expected[len(expected) - len(got):]
            if got != expected:
                at = next((i for i, (a, b) in enumerate(zip(expected, got))
                           if a != b), min(len(expected), len(got)))
                problem = ("thread %d: insn %d of %d (decoded %d): truth %s, "
                           "decoded %s" % (
                               tid, at, len(expected), len(got),
                               hex(expected[at]) if at < len(expected) else "end",
                               hex(got[at]) if at < len(got) else "end"))
                break
            if not got:
                problem = "thread %d: nothing decoded" % tid
                break
        if problem:
            print("MISMATCH %s %s" % (name, problem))
            status = 1
        else:
            print("ok %s %d %d %d" % (name, len(tids), total, lost_total))
    return status


if __name__ == "__main__":
    sys.exit(main())
