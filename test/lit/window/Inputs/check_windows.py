#!/usr/bin/env python3
"""Decodes each bundle whole (--window all) and in windows that small slice
budgets force (and small decode budgets, --max-trace), and checks every
window against the whole trace: the windowed .fxt is valid and nests as
Perfetto draws it (magic-trace-fxt-check), each of its slices is the whole
trace's slice cut at the window's start (magic-trace-fxt-check --cut-of),
and it holds no more slices than the slice budget, and at least one. A
slice budget that leaves no window, or an empty one (its start moved to the
trace's end for the displayed times), is one error line naming a budget;
the budgets named are followed until one gives a window, checked the same
way, within its budget and not empty. A decode budget's window
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


def check_cut(bundle, whole, cut, option, value, line_pattern):
    """Decodes `bundle` into `cut` with `option value`; returns (problems,
    the summary's window match, the .fxt's events)."""
    done = run(["magic-trace-decode", bundle, option, str(value), "-o", cut])
    problems = []
    if done.returncode != 0:
        problems.append(done.stderr.strip())
    window = re.search(line_pattern, done.stdout.strip())
    valid = run(["magic-trace-fxt-check", cut])
    if valid.returncode != 0:
        problems.append(valid.stderr.strip())
    events = re.search(r"(\d+) events", valid.stdout)
    events = int(events.group(1)) if events else None
    same = run(["magic-trace-fxt-check", "--cut-of", whole, cut])
    if same.returncode != 0:
        problems.append(same.stderr.strip())
    return problems, window, events


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

    def report(name, label, problems, window):
        nonlocal failed
        if problems:
            failed += 1
            print("FAIL %s %s: %s" % (name, label, "; ".join(problems)))
        else:
            print("ok %s %s %s" % (name, label, "cut" if window else "whole"))

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
            label = str(budget)
            for _ in range(4):
                problems, window, events = check_cut(
                    bundle, whole, cut, "--max-slices", budget,
                    r"window: the last (\S+) of \S+, ([\d,]+) slices")
                named = re.search(r"leaves (no|an empty) window: .*"
                                  r"\(give --max-slices (\d+) or more",
                                  problems[0] if problems else "")
                if not named:
                    break
                if int(named.group(2)) <= budget:
                    problems.append("names %s, not above %d"
                                    % (named.group(2), budget))
                    break
                budget = int(named.group(2))
                label = "%s (%d fits)" % (label.split(" ")[0], budget)
            if window and int(window.group(2).replace(",", "")) > budget:
                problems.append("over the budget: " + window.group(0))
            if window and window.group(1) == "0ns":
                problems.append("an empty window: " + window.group(0))
            if events is not None and events > budget:
                problems.append("%d events over the budget" % events)
            if events == 0:
                problems.append("no events")
            report(name, label, problems, window)
        previous = None
        for budget in sorted(trace_budgets, reverse=True):
            cut = os.path.join(out, "%s-trace%d.fxt" % (name, budget))
            problems, window, events = check_cut(
                bundle, whole, cut, "--max-trace", budget,
                r"window: the last \S+ of \S+, [\d,]+ slices "
                r"\(the \d+ (bytes|KiB|MiB) decode budget")
            if None not in (previous, events) and events > previous:
                problems.append("%d events, more than the larger budget's %d"
                                % (events, previous))
            previous = events
            report(name, "trace=%d" % budget, problems, window)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
