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
import array
import os
import subprocess
import sys
import tempfile

# The ground-truth and dump readers the decoder tests use.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "decode", "Inputs"))
from compare_insns import (read_addresses, read_decoded,  # noqa
                           read_truth_array, wrapped_threads)


def decode(bundle, decoder):
    """tid -> array('Q') of the decoded instruction addresses."""
    if decoder == "ref":
        # Binary addresses: millions of text lines take Python seconds.
        with tempfile.TemporaryDirectory() as out:
            subprocess.run(["magic-trace-ref-decode", bundle,
                            "--no-errors-in-stream", "--binary", out],
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=600)
            return {int(name.split(".")[0]):
                    read_addresses(os.path.join(out, name))
                    for name in os.listdir(out)}
    command = ["magic-trace-decode", bundle, "--dump", "insns"]
    with tempfile.NamedTemporaryFile("w+") as out:
        subprocess.run(command, stdout=out, stderr=subprocess.DEVNULL,
                       timeout=600)
        return {tid: array.array("Q", insns)
                for tid, insns in read_decoded(out.name).items()}


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
        wrapped = wrapped_threads(bundle)
        for tid in tids:
            expected, lost = read_truth_array(bundle, tid)
            got = decoded.get(tid, array.array("Q"))
            lost_total += sum(count for _, count in lost)
            total += len(got)
            if ((args.wrapped or tid in wrapped)
                    and len(got) < len(expected)):
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
