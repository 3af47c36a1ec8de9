#!/usr/bin/env python3
"""Checks that JIT code whose older version was not captured is a gap, not
other code (jitdump.test): our decode of BUNDLE (`magic-trace-decode --dump
insns`) against the recorder's ground truth (BUNDLE/groundtruth/<tid>.insns).

  check_jit_gap.py BUNDLE LOW HIGH NEW

[LOW, HIGH) is the JIT region and NEW an address only the newer version
has. From the first instruction in the region that our decode lists on,
its list must be exactly the ground truth's last instructions, and those
must start at or after the run of JIT instructions that holds the truth's
first one at NEW (the first run of the newer code): every JIT
instruction decoded ran with the newer code, and none of the older
version's runs was decoded with it. Prints "ok TID: D of T instructions,
JIT code from truth #I (the newer code from #N)" or "WRONG ..." and exits 1.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "decode", "Inputs"))
from compare_insns import read_decoded, read_truth_array  # noqa


def main():
    bundle = sys.argv[1]
    low, high, new = (int(x, 16) for x in sys.argv[2:5])
    with tempfile.NamedTemporaryFile("w+") as out:
        subprocess.run(["magic-trace-decode", bundle, "--dump", "insns"],
                       stdout=out, stderr=subprocess.DEVNULL, check=True)
        decoded = read_decoded(out.name)
    ok = True
    for tid, insns in decoded.items():
        truth = read_truth_array(bundle, tid)[0].tolist()
        first = next((j for j, a in enumerate(insns) if low <= a < high), None)
        newer = truth.index(new) if new in truth else None
        # The run of JIT instructions NEW's first one is in began there.
        while newer and low <= truth[newer - 1] < high:
            newer -= 1
        if first is None or newer is None:
            print(f"WRONG {tid}: no JIT code decoded or none ran at {new:#x}")
            ok = False
            continue
        tail = insns[first:]
        start = len(truth) - len(tail)
        if tail != truth[start:]:
            print(f"WRONG {tid}: from its first JIT instruction (#{first}) "
                  f"the decode is not the ground truth's last {len(tail)}")
            ok = False
        elif start < newer:
            print(f"WRONG {tid}: JIT code decoded from truth #{start}, before "
                  f"the newer code first ran (#{newer})")
            ok = False
        else:
            print(f"ok {tid}: {len(insns)} of {len(truth)} instructions, JIT "
                  f"code from truth #{start} (the newer code from #{newer})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
