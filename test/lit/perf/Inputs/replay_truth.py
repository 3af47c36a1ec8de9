#!/usr/bin/env python3
"""Gives a snapshot the perf backend took on the replaying kernel the ground
truth of the QEMU recording it replayed (test/support/ReplayKernel.cpp).

  replay_truth.py RECORDING BUNDLE MAP [--lldb lldb-22]

MAP is the kernel's "<recording tid> <process tid>" lines and its
"lost <process tid> <stretch>" line. Each recording thread's
groundtruth/<tid>.{insns,events} goes into BUNDLE/groundtruth/ under the
process's tid. For the thread with the lost stretch, where its instructions
went missing is read off LLDB's own decoder (`trace load BUNDLE`, `thread
trace dump instructions`), not ours: its list must be the ground truth's
first A instructions, one error (the OVF the kernel's TRUNCATED flag
became), and the ground truth's last instructions from B on, with
0 < A < B; the range [A, B) goes into <tid>.lost (one line "A B-A"), and
check-insns.py and magic-trace-reftree then compare with it. Prints one
line per thread, "lost: tid T, instructions A to B (N of TOTAL): ERROR", and
exits 1 with the reason when LLDB's list is not of that shape.
"""
import argparse
import importlib.util
import os
import shutil
import sys


def load_check_insns():
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tools",
                        "check-insns.py")
    spec = importlib.util.spec_from_file_location("check_insns", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def find_hole(check, items, truth):
    """(A, B, error) when items = truth[:A] + [error] + truth[B:]."""
    # LLDB's known quirks next to a PSB (check-insns.py): a spurious "end
    # of trace stream" error (psb-end), an instruction listed again after
    # the PSB (psb-repeat).
    listed = []
    for i, item in enumerate(items):
        if item.kind == "sync":
            continue
        if not check.near_sync(items, i):
            listed.append(item)
        elif item.kind == "error" and "end of trace stream" in item.value:
            continue
        elif (item.kind == "insn" and listed and listed[-1].kind == "insn"
              and listed[-1].value == item.value):
            continue
        else:
            listed.append(item)
    errors = [i for i, item in enumerate(listed) if item.kind == "error"]
    if len(errors) != 1:
        return None, f"LLDB lists {len(errors)} errors, not the one loss"
    at = errors[0]
    before = [item.value for item in listed[:at]]
    after = [item.value for item in listed[at + 1:]]
    if before != truth[:len(before)]:
        first = next(i for i, (a, b) in enumerate(zip(before, truth))
                     if a != b) if any(
            a != b for a, b in zip(before, truth)) else len(truth)
        return None, (f"before the error LLDB's list is not the ground "
                      f"truth's start (they differ at instruction {first})")
    if after and after != truth[len(truth) - len(after):]:
        return None, "after the error LLDB's list is not the ground truth's end"
    a, b = len(before), len(truth) - len(after)
    if not 0 < a < b:
        return None, (f"the hole [{a}, {b}) is not inside the thread's "
                      f"{len(truth)} instructions")
    return (a, b, listed[at].value), None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recording")
    parser.add_argument("bundle")
    parser.add_argument("map")
    parser.add_argument("--lldb", default="lldb-22")
    args = parser.parse_args()

    check = load_check_insns()
    pairs, lost = [], {}
    with open(args.map) as f:
        for line in f:
            words = line.split()
            if words and words[0] == "lost":
                lost[int(words[1])] = int(words[2])
            elif len(words) == 2:
                pairs.append((int(words[0]), int(words[1])))
    if not pairs:
        sys.exit(f"error: {args.map} maps no thread (did the replay run?)")
    out = os.path.join(args.bundle, "groundtruth")
    os.makedirs(out, exist_ok=True)
    for recorded, tid in pairs:
        for ext in ("insns", "events"):
            shutil.copyfile(
                os.path.join(args.recording, "groundtruth", f"{recorded}.{ext}"),
                os.path.join(out, f"{tid}.{ext}"))
        lost_file = os.path.join(out, f"{tid}.lost")
        if os.path.exists(lost_file):
            os.remove(lost_file)
    print(f"truth: {len(pairs)} threads")
    if not lost:
        return 0

    trace_json, counts, _ = check.read_tids(args.bundle)
    decoded = check.parse_dump(check.run_lldb(args.lldb,
                                              [(trace_json, counts)]))
    ok = True
    for tid, stretch in sorted(lost.items()):
        expected, total = check.load_truth(args.bundle, tid)
        truth = [address for _, address in expected]
        hole, why = find_hole(check, decoded.get(tid, []), truth)
        if not hole:
            print(f"tid {tid}: NOT A HOLE: {why}")
            ok = False
            continue
        a, b, error = hole
        with open(os.path.join(out, f"{tid}.lost"), "w") as f:
            f.write(f"{a} {b - a}\n")
        print(f"lost: tid {tid}, stretch {stretch}, instructions {a} to {b} "
              f"({b - a} of {total}): {error}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
