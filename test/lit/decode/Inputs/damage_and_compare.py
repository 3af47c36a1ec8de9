#!/usr/bin/env python3
"""Damages copies of a bundle's PT (random bytes overwritten, sometimes cut
short; fixed seeds) and checks that magic-trace-decode prints the same events,
times included, serially and cut at every PSB on two threads.

  damage_and_compare.py BUNDLE WORKDIR COUNT
Prints "seed N: same (E errors)" per copy, or "seed N: DIFFERENT" and exits 1.
"""
import glob
import os
import random
import shutil
import subprocess
import sys


def decode(bundle, *extra):
    out = subprocess.run(["magic-trace-decode", bundle, "--dump", "events"] +
                         list(extra), capture_output=True, text=True)
    # Exit 1 with "nothing was decoded" is the one-line verdict on a trace
    # damaged past decoding; anything else (a crash, another error) fails.
    nothing = out.returncode == 1 and "nothing was decoded" in out.stderr
    if out.returncode != 0 and not nothing:
        raise SystemExit("decode failed: " + out.stderr)
    lines = out.stdout.splitlines()
    summary = [l for l in lines if l.startswith("summary:")]
    return [l for l in lines if not l.startswith("summary:")], summary[0]


def main():
    bundle, work, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ok = True
    for seed in range(1, count + 1):
        rng = random.Random(seed)
        copy = os.path.join(work, "damaged-%d" % seed)
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(bundle, copy)
        for path in glob.glob(os.path.join(copy, "threads", "*.intelpt_trace")):
            data = bytearray(open(path, "rb").read())
            for _ in range(rng.randrange(1, 40)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            if rng.random() < 0.3:
                data = data[:rng.randrange(len(data))]
            open(path, "wb").write(bytes(data))
        serial, summary = decode(copy, "--threads", "1")
        parallel, _ = decode(copy, "--threads", "2", "--chunk-bytes", "1")
        errors = summary.split(" errors")[0].split()[-1]
        if serial == parallel:
            print("seed %d: same (%s errors)" % (seed, errors))
        else:
            ok = False
            print("seed %d: DIFFERENT" % seed)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
