#!/usr/bin/env python3
"""Decodes each bundle whole (--window all) and in windows that small slice
budgets force (and small decode budgets, --max-trace), and checks every
window against the whole trace: the windowed .fxt is valid and nests as
Perfetto draws it (magic-trace-fxt-check), each of its slices is the whole
trace's slice cut at the window's start (magic-trace-fxt-check --cut-of),
and it holds no more slices than the slice budget. A decode budget's window
says so on its line, and a smaller decode budget never gives more slices.
Prints one line per case: "ok NAME BUDGET cut|whole" ("ok NAME trace=BYTES
cut|whole" for a decode budget), or "FAIL ..." with what differed.

  check_windows.py OUTDIR BUNDLE ... --budgets N,N,... [--trace-budgets B,B,...]
"""
import os
import re
import subprocess
import sys


def run(args):
    return subprocess.run(args, capture_output=True, text=True)


def main():
    args = sys.argv[1:]
    trace_budgets = []
    if "--trace-budgets" in args:
        at = args.index("--trace-budgets")
        trace_budgets = [int(b) for b in args[at + 1].split(",")]
        args = args[:at] + args[at + 2:]
    budgets = [int(b) for b in args[args.index("--budgets") + 1].split(",")]
    args = args[:args.index("--budgets")]
    out, bundles = args[0], args[1:]
    failed = 0
    for bundle in bundles:
        name = os.path.basename(bundle.rstrip("/"))
        whole = os.path.join(out, name + "-all.fxt")
        done = run(["magic-trace-decode", bundle, "--window", "all", "-o", whole])
        if done.returncode != 0:
            print("FAIL %s whole: %s" % (name, done.stderr.strip()))
            failed += 1
            continue
        for budget in budgets:
            cut = os.path.join(out, "%s-%d.fxt" % (name, budget))
            done = run(["magic-trace-decode", bundle, "--max-slices", str(budget),
                        "-o", cut])
            problems = []
            if done.returncode != 0:
                problems.append(done.stderr.strip())
            summary = done.stdout.strip()
            window = re.search(r"window: the last \S+ of \S+, ([\d,]+) slices",
                               summary)
            if window and int(window.group(1).replace(",", "")) > budget:
                problems.append("over the budget: " + summary)
            valid = run(["magic-trace-fxt-check", cut])
            if valid.returncode != 0:
                problems.append(valid.stderr.strip())
            events = re.search(r"(\d+) events", valid.stdout)
            if events and int(events.group(1)) > budget:
                problems.append("%s events over the budget" % events.group(1))
            same = run(["magic-trace-fxt-check", "--cut-of", whole, cut])
            if same.returncode != 0:
                problems.append(same.stderr.strip())
            if problems:
                failed += 1
                print("FAIL %s %d: %s" % (name, budget, "; ".join(problems)))
            else:
                print("ok %s %d %s" % (name, budget, "cut" if window else "whole"))
        previous = None
        for budget in sorted(trace_budgets, reverse=True):
            cut = os.path.join(out, "%s-trace%d.fxt" % (name, budget))
            done = run(["magic-trace-decode", bundle, "--max-trace", str(budget),
                        "-o", cut])
            problems = []
            if done.returncode != 0:
                problems.append(done.stderr.strip())
            summary = done.stdout.strip()
            window = re.search(r"window: the last \S+ of \S+, ([\d,]+) slices "
                               r"\(the (\d+) (bytes|KiB|MiB) decode budget",
                               summary)
            slices = None
            valid = run(["magic-trace-fxt-check", cut])
            if valid.returncode != 0:
                problems.append(valid.stderr.strip())
            events = re.search(r"(\d+) events", valid.stdout)
            if events:
                slices = int(events.group(1))
            if previous is not None and slices is not None and slices > previous:
                problems.append("%d events, more than the larger budget's %d"
                                % (slices, previous))
            previous = slices
            same = run(["magic-trace-fxt-check", "--cut-of", whole, cut])
            if same.returncode != 0:
                problems.append(same.stderr.strip())
            if problems:
                failed += 1
                print("FAIL %s trace=%d: %s" % (name, budget, "; ".join(problems)))
            else:
                print("ok %s trace=%d %s" % (name, budget,
                                             "cut" if window else "whole"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
