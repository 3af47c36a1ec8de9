#!/usr/bin/env python3
"""The sysfs tree of the machine a QEMU recording describes, for the
replaying kernel (test/support/ReplayKernel.cpp).

  replay_machine.py FIXTURE RECORDING OUT

Copies the unit tests' intel_pt PMU (FIXTURE, e.g. test/unit/fixtures/
sysfs-skylake) to OUT and gives it the recording's timing
(RECORDING/magic-trace.json, "ptTiming"): max_nonturbo_ratio is its
nominal ratio, tsc_art_ratio its CPUID.15H EBX:EAX (as the kernel prints
them, arch/x86/events/intel/pt.c), and caps/mtc_periods offers only the MTC
period the recording was written with, so the perf backend configures the
period whose packets the replayed PT has (and says so in a note).
"""
import json
import os
import shutil
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    fixture, recording, out = sys.argv[1:]
    with open(os.path.join(recording, "magic-trace.json")) as f:
        timing = json.load(f)["ptTiming"]
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(fixture, out)
    pmu = os.path.join(out, "bus", "event_source", "devices", "intel_pt")
    with open(os.path.join(pmu, "max_nonturbo_ratio"), "w") as f:
        f.write(f"{timing['nomFreq']}\n")
    with open(os.path.join(pmu, "tsc_art_ratio"), "w") as f:
        f.write(f"{timing['cpuid15Ebx']}:{timing['cpuid15Eax']}\n")
    with open(os.path.join(pmu, "caps", "mtc_periods"), "w") as f:
        f.write(f"{1 << timing['mtcFreq']:x}\n")
    print(f"machine: nominal ratio {timing['nomFreq']}, TSC:CTC "
          f"{timing['cpuid15Ebx']}:{timing['cpuid15Eax']}, MTC period "
          f"{timing['mtcFreq']}")


if __name__ == "__main__":
    main()
