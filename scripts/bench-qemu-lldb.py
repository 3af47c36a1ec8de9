#!/usr/bin/env python3
"""From 'continue' to the snapshot line, in LLDB: the QEMU recorder
('magic-trace run') against the emulate backend's stepper ('magic-trace
attach', the SB-API stepper), on the same CPU-bound program
(test/inputs/emu_bench.c: calls, returns, branches, a little libc).

QEMU runs enough rounds that the 4 MiB ring wraps (a full ring, what a user
gets at every breakpoint of a long run); the stepper runs a bounded number of
rounds (it records ~2 k instructions a second). Each line gives the
instructions recorded, the ones the snapshot decoded, the wall time from the
command that resumed the process to its return (snapshot taken and written)
and the rate, and the time of the snapshot alone (taken again at the same
stop); the last line the ratio of the rates.

    PYTHONPATH=/usr/lib/llvm-22/lib/python3.11/site-packages \\
    LLDB_DEBUGSERVER_PATH=/usr/lib/llvm-22/bin/lldb-server \\
      scripts/bench-qemu-lldb.py [--build build] [--rounds 20000]
                                 [--stepper-rounds 20]
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
import magic_trace_lldb as mt  # noqa: E402


def measure(build, rounds, qemu, out):
    program = os.path.join(build, "test", "inputs", "emu_bench")
    plugin = os.path.join(build, "lib", "libmagic-trace-lldb.so")
    with mt.Session(plugin=plugin) as session:
        if qemu:
            session.launch_recorded(program, args=[str(rounds)], start="main")
        else:
            session.launch(program, args=[str(rounds)], stop_at="main")
            session.attach(backend="emulate")
        session.snapshot_on(function="stop_here", count=1,
                            output=os.path.join(out, "bench-%N.fxt"))
        began = time.monotonic()
        snapshots = session.continue_traced()
        seconds = time.monotonic() - began
        if not snapshots:
            raise SystemExit("no snapshot was taken")
        # The snapshot alone, again at the same stop (the rings are as the
        # trigger read them).
        began = time.monotonic()
        session.snapshot(output=os.path.join(out, "again.fxt"))
        again = time.monotonic() - began
        status = session.status()
        recorded = (status["recorderInstructions"] if qemu
                    else status["stepper"]["instructions"])
        return recorded, snapshots[0]["instructions"], seconds, again


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--rounds", type=int, default=20000)
    parser.add_argument("--stepper-rounds", type=int, default=20)
    options = parser.parse_args()
    out = tempfile.mkdtemp(prefix="mt-bench-qemu-lldb-")
    rows = []
    for name, qemu, rounds in (("qemu", True, options.rounds),
                               ("stepper", False, options.stepper_rounds)):
        recorded, decoded, seconds, again = measure(options.build, rounds,
                                                    qemu, out)
        rate = recorded / seconds
        rows.append(rate)
        print("%-8s %8d rounds: %12s instructions recorded, %10s in the "
              "snapshot, continue -> snapshot %.2f s (%.0f instructions/s; "
              "the snapshot alone %.2f s)" % (
                  name, rounds, "{:,}".format(recorded),
                  "{:,}".format(decoded), seconds, rate, again), flush=True)
    print("qemu / stepper: %.0fx the instructions per second" %
          (rows[0] / rows[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
