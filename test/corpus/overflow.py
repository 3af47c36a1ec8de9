#!/usr/bin/env python3
"""Frames right with overflows injected (issue 15, docs/model.md).

Records the corpus programs of run.py (Debian-packaged programs no one here
wrote, and corpus_throw) with an overflow injected every N instructions and
the recorder's ground truth, then lets magic-trace-reftree compare the model
built from the trace alone (stitching on and off) with the reference tree
derived from the ground truth. Reports, for each program:

- the fraction of all reference frames the model has right (function, begin
  and end within one MTC period, 320 ns);
- the same over the frames that had an instruction outside the injected
  losses (a frame whose every instruction ran inside one loss, such as a
  one-instruction PLT stub, is in no trace: no decoder can see it);
- the losses, and that each is a marked gap (segments = losses + 1).

The QEMU engine records where it is installed (millions of instructions a
second, its own ground truth); --engine=ptrace takes the stepper.

  test/corpus/overflow.py [--build build] [--out /tmp/mt-overflow]
                          [--every 300] [--insns 2000000]
                          [--engine qemu|ptrace] [--only gzip,python3,...]

Exits 1 unless every program's visible frames are >= --goal percent right
(default 99) and every loss is a marked gap.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
import run  # noqa: E402  (the corpus: programs, starts, environments)


def measure(bindir, bundle):
    out = subprocess.run([os.path.join(bindir, "magic-trace-reftree"),
                          "--bundle", bundle], capture_output=True,
                         text=True).stdout
    fact = {"output": out}
    m = re.search(r": (\d+) instructions, (\d+) decoded.*?, (\d+) errors/"
                  r"overflows, (\d+) segments \((\d+) stitched\)", out)
    if not m:
        return None
    (fact["insns"], fact["decoded"], fact["losses"], fact["segments"],
     fact["stitched"]) = map(int, m.groups())
    m = re.search(r"stitching on (\d+)/(\d+) \S+, off (\d+)/", out)
    fact["all"] = (int(m.group(1)), int(m.group(3)), int(m.group(2)))
    m = re.search(r"outside the injected losses: (\d+) .*?stitching on "
                  r"(\d+)/\d+ \S+, off (\d+)/", out)
    fact["visible"] = ((int(m.group(2)), int(m.group(3)), int(m.group(1)))
                       if m else fact["all"])
    return fact


def pct(part, whole):
    return "%.1f %%" % (100.0 * part / whole if whole else 100.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.path.join(HERE, "..", "..",
                                                        "build"))
    parser.add_argument("--out", default="/tmp/mt-overflow")
    parser.add_argument("--every", type=int, default=300)
    parser.add_argument("--insns", type=int, default=2000000)
    parser.add_argument("--engine", choices=["qemu", "ptrace"])
    parser.add_argument("--only", default="")
    parser.add_argument("--goal", type=float, default=99.0)
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    bindir = os.path.join(build, "bin")
    inputs = os.path.join(build, "test", "inputs")
    engine = args.engine or ("qemu" if shutil.which("qemu-x86_64")
                             else "ptrace")
    os.makedirs(args.out, exist_ok=True)
    chosen = [p for p in args.only.split(",") if p]
    ok = True
    rows = []
    for name, (argv, start, _) in run.programs(inputs, args.out).items():
        if (chosen and name not in chosen) or name == "throw-dbgbuild":
            continue
        bundle = os.path.join(args.out, name, "bundle")
        shutil.rmtree(bundle, ignore_errors=True)
        os.makedirs(os.path.join(args.out, name), exist_ok=True)
        env = dict(os.environ, **run.PROGRAM_ENV.get(name, {}))
        with open(os.devnull, "w") as sink:
            subprocess.run([os.path.join(bindir, "magic-trace-emulate"),
                            "--engine=" + engine,
                            # The QEMU engine writes ground truth on request.
                            *(["--ground-truth"] if engine == "qemu" else []),
                            "--inject-overflow-every=%d" % args.every,
                            "--start=" + start, "--max-insns=%d" % args.insns,
                            "-o", bundle, "--"] + argv, check=True,
                           stdout=sink, cwd=os.path.join(args.out, name),
                           env=env)
        fact = measure(bindir, bundle)
        if fact is None:
            print("%s: magic-trace-reftree printed no thread line" % name)
            ok = False
            continue
        on, off, visible = fact["visible"]
        all_on, all_off, total = fact["all"]
        marked = fact["segments"] == fact["losses"] + 1
        good = marked and 100.0 * on >= args.goal * visible
        ok = ok and good
        print("%s: %d instructions, %d decoded, %d losses (%s), %d segments "
              "(%d stitched); all %d frames: %s / %s; visible %d: %s / %s%s"
              % (name, fact["insns"], fact["decoded"], fact["losses"],
                 "each a marked gap" if marked else "NOT each a gap",
                 fact["segments"], fact["stitched"], total,
                 pct(all_on, total), pct(all_off, total), visible,
                 pct(on, visible), pct(off, visible),
                 "" if good else "  <-- below the goal"))
        rows.append("| %s | %d | %d | %d | %s / %s | %d | %s / %s |" % (
            name, fact["insns"], fact["losses"], total, pct(all_on, total),
            pct(all_off, total), visible, pct(on, visible),
            pct(off, visible)))
    print()
    print("| program | instructions | losses (each a gap) | reference frames "
          "| right: stitching on / off | frames with an instruction outside "
          "the losses | right: on / off |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
