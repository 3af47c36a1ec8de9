#!/usr/bin/env python3
"""For each bundle, decodes it with the reference decoder (magic-trace-ref-decode)
and with magic-trace-decode (serial, and in small PSB pieces on two threads),
and prints "same NAME N" or where the instruction sequences first differ.

  compare_with_reference.py BUNDLE...
"""
import os
import subprocess
import sys


def insns(command):
    out = subprocess.run(command, capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if not line.startswith("summary")]


def main():
    for bundle in sys.argv[1:]:
        name = os.path.basename(bundle)
        ref = insns(["magic-trace-ref-decode", bundle, "--no-errors-in-stream"])
        runs = {
            "serial": ["--threads", "1"],
            "pieces": ["--threads", "2", "--chunk-bytes", "4096"],
        }
        same = True
        for run, flags in runs.items():
            ours = insns(["magic-trace-decode", bundle, "--dump", "insns"] + flags)
            if ours != ref:
                at = next((i for i, (a, b) in enumerate(zip(ref, ours)) if a != b),
                          min(len(ref), len(ours)))
                print(f"DIFFERENT {name} {run}: line {at} of {len(ref)} (ours {len(ours)})")
                same = False
        if same:
            print(f"same {name} {sum(1 for l in ref if not l.startswith('#'))}")


if __name__ == "__main__":
    main()
