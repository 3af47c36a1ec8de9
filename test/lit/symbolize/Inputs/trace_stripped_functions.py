#!/usr/bin/env python3
"""Traces a stripped program and counts the functions it enters that the
model shows as distinct frames.

Records --obj (a stripped executable, here Debian's gzip compressing a file)
with magic-trace-emulate from its ELF entry point (readelf -h) for
--max-insns instructions, and writes the model as a call tree (.txt) with
magic-trace-decode. Ground truth: the recorder's log of every executed
instruction (DIR/groundtruth/<tid>.insns, docs/emulator-cli.md), each mapped
to the FDE readelf --debug-dump=frames lists around it. Each FDE outside the
PLT that the trace enters must be a frame of its own in the model, named
BASENAME+0xBEGIN (docs/symbolizer.md). Prints the counts and the percentage.
"""
import argparse
import bisect
import glob
import json
import os
import re
import struct
import subprocess
import sys


def run(args, **kwargs):
    return subprocess.run(args, check=True, capture_output=True, text=True,
                          **kwargs).stdout


def tree_names(tree):
    """The first word of every frame of a call tree (.txt): all of a name
    like gzip+0x10dd0. The tree, not folded stacks, which leave out frames
    that took no time (a one-jump thunk FDE tail-calling on)."""
    names = set()
    for line in open(tree):
        m = re.match(r"^ *\S+ +\S+  +(\S+)", line)
        if m and not line.lstrip().startswith("total"):
            names.add(m.group(1))
    return names


def fde_counts(obj, bundle, names):
    """Maps the ground truth of BUNDLE to OBJ's FDEs (readelf) and finds
    each entered FDE outside the PLT among the model's frame NAMES. Returns
    (instructions in FDEs, outside them, FDEs entered, those outside the
    PLT, those that are frames of their own)."""
    modules = json.load(open(os.path.join(bundle, "trace.json")))["processes"][0]["modules"]
    base = [int(m["loadAddress"], 16) for m in modules
            if os.path.realpath(m["systemPath"]) == os.path.realpath(obj)][0]
    frames = run(["readelf", "--debug-dump=frames", "-W", obj])
    fdes = sorted({(int(a, 16), int(b, 16)) for a, b in re.findall(
        r"\bFDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", frames) if int(b, 16) > int(a, 16)})
    plts = [(int(a, 16), int(a, 16) + int(s, 16)) for a, s in re.findall(
        r"\]\s+\.plt\S*\s+\S+\s+([0-9a-f]+)\s+\S+\s+([0-9a-f]+)",
        run(["readelf", "-SW", obj]))]
    end = max(e for _, e in fdes)
    begins = [b for b, _ in fdes]

    data = open(glob.glob(os.path.join(bundle, "groundtruth", "*.insns"))[0], "rb").read()
    entered, inside, outside = set(), 0, 0
    for (address,) in struct.iter_unpack("<Q", data[:len(data) // 8 * 8]):
        offset = address - base
        if not 0 <= offset < end:
            continue
        index = bisect.bisect_right(begins, offset) - 1
        if index >= 0 and offset < fdes[index][1]:
            entered.add(fdes[index])
            inside += 1
        else:
            outside += 1
    code = [f for f in entered if not any(lo <= f[0] < hi for lo, hi in plts)]
    basename = os.path.basename(obj)
    own = [f for f in code if "%s+%#x" % (basename, f[0]) in names]
    return inside, outside, entered, code, own


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--obj", required=True)
    parser.add_argument("--input", required=True, help="the file to compress")
    parser.add_argument("--max-insns", type=int, default=100000)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()

    entry = re.search(r"Entry point address:\s+(0x[0-9a-f]+)",
                      run(["readelf", "-hW", args.obj])).group(1)
    bundle = os.path.join(args.workdir, "bundle")
    tree = os.path.join(args.workdir, "trace.txt")
    os.makedirs(args.workdir, exist_ok=True)
    with open(os.devnull, "w") as sink:
        subprocess.run(["magic-trace-emulate", "--engine=ptrace", "--start=" + entry,
                        "--max-insns=%d" % args.max_insns, "-o", bundle, "--",
                        args.obj, "-c", args.input],
                       check=True, stdout=sink, stderr=subprocess.PIPE)
    run(["magic-trace-decode", bundle, "-o", tree])
    inside, outside, entered, code, own = fde_counts(args.obj, bundle,
                                                     tree_names(tree))
    basename = os.path.basename(args.obj)
    missing = sorted(set(code) - set(own))
    print("instructions in %s: %d in FDEs, %d outside" % (basename, inside, outside))
    print("FDEs entered: %d, outside the PLT: %d" % (len(entered), len(code)))
    print("distinct frames: %d of %d (%.1f%%)" % (len(own), len(code),
                                                  100.0 * len(own) / max(len(code), 1)))
    for begin, finish in missing[:10]:
        print("no frame for FDE %#x..%#x" % (begin, finish))
    return 0


if __name__ == "__main__":
    sys.exit(main())
