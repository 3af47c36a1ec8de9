#!/usr/bin/env python3
"""Benchmark of the emulated PT recorder (magic-trace-emulate).

Reports, per configuration: traced instructions per second of the ptrace
stepper (wall time from --start to the stop point, PT encoding included), the
same per CPU second (user + system time of the emulator and the target, from
the whole run including startup; less sensitive to a busy machine), and bytes
of PT per instruction (the ring buffer is made large enough not to wrap, so
every byte written is kept).

  test/bench/emulate_bench.py [--build build] [--insns 300000]
"""
import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile

CONFIGS = [
    ("normal", []),
    ("low", ["--timer-resolution", "low"]),
    ("high", ["--timer-resolution", "high"]),
    ("noretcomp", ["--noretcomp"]),
    ("ovf/1000", ["--inject-overflow-every", "1000"]),
]

SUMMARY = re.compile(r"magic-trace-emulate: (\d+) instructions, (\d+) threads, "
                     r"ended at [^;]+; ([\d.]+) s, (\d+) insns/s; (\d+) bytes")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--insns", type=int, default=300000,
                        help="instructions to trace per run (--max-insns)")
    args = parser.parse_args()
    tool = os.path.join(args.build, "bin", "magic-trace-emulate")
    program = os.path.join(args.build, "test", "inputs", "emu_bench")
    print(f"{'config':<10} {'insns':>9} {'seconds':>8} {'insns/s':>9} "
          f"{'insns/cpu-s':>11} {'PT bytes':>9} {'bytes/insn':>10}")
    for name, extra in CONFIGS:
        with tempfile.TemporaryDirectory() as out:
            cmd = [tool, "--engine", "ptrace", "--max-insns", str(args.insns), "--buffer-size",
                   str(64 << 20), *extra, "-o", out, "--", program, "100000"]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            run = subprocess.run(cmd, capture_output=True, text=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime -
                                                         before.ru_stime)
            match = SUMMARY.search(run.stdout)
            if run.returncode != 0 or not match:
                sys.exit(f"error: {' '.join(cmd)} failed: {run.stderr.strip()}")
            insns, _, seconds, rate, pt_bytes = match.groups()
            insns, pt_bytes = int(insns), int(pt_bytes)
            print(f"{name:<10} {insns:>9} {float(seconds):>8.2f} {int(rate):>9} "
                  f"{insns / cpu:>11.0f} {pt_bytes:>9} {pt_bytes / insns:>10.3f}")


if __name__ == "__main__":
    main()
