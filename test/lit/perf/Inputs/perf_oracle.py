#!/usr/bin/env python3
"""Linux perf's Intel PT decoder as an oracle for the PT our recorders write.

  perf_oracle.py insns PERF_SCRIPT_OUT BUNDLE
      PERF_SCRIPT_OUT is `perf script --itrace=i0ns -F tid,ip`: every
      instruction perf decoded, per thread. Compared with the emulator's
      ground truth (BUNDLE/groundtruth/<tid>.insns) minus the ranges it
      marks lost (<tid>.lost: overflows). Prints
      "OK tid T N insns" per thread (", suffix" when the ring wrapped and
      perf's sequence is the truth's tail), else "MISMATCH ...".
  perf_oracle.py decoded PERF_SCRIPT_OUT OUR_INSNS
      As insns, but against `magic-trace-decode --dump insns` of the same
      recording (a perf.data nobody here wrote has no ground truth): the
      sequences per thread must be equal. Prints "OK tid T N insns".
  perf_oracle.py calls PERF_SCRIPT_OUT OUR_CALLS
      PERF_SCRIPT_OUT is `perf script --itrace=cr -F tid,flags,ip,addr`;
      OUR_CALLS is `magic-trace-decode --dump calls`. The sequences of
      (call|return, from, to) per thread must be equal. Prints
      "OK tid T N calls and returns", else "MISMATCH ...".
"""
import os
import re
import struct
import sys

PERF_CALL = re.compile(r"^\s*(\d+)\s+(call|return)\s+([0-9a-f]+) =>\s+([0-9a-f]+)")
OUR_CALL = re.compile(r"^\d+ \+\d+ (call|return) (0x[0-9a-f]+)\b.* -> (0x[0-9a-f]+|\?)")


def read_truth(bundle, tid):
    """The ground truth minus the ranges a recorder marked lost (an overflow:
    no decoder can see those instructions)."""
    with open(os.path.join(bundle, "groundtruth", "%d.insns" % tid), "rb") as f:
        data = f.read()
    insns = list(struct.unpack("<%dQ" % (len(data) // 8), data))
    lost_path = os.path.join(bundle, "groundtruth", "%d.lost" % tid)
    if not os.path.exists(lost_path):
        return insns, 0
    keep = [True] * len(insns)
    ranges = 0
    with open(lost_path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                first, count = int(parts[0]), int(parts[1])
                ranges += 1
                for i in range(first, min(first + count, len(insns))):
                    keep[i] = False
    return [a for a, k in zip(insns, keep) if k], ranges


def insns(perf_out, bundle):
    threads = {}
    with open(perf_out) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                threads.setdefault(int(parts[0]), []).append(int(parts[1], 16))
    truth_dir = os.path.join(bundle, "groundtruth")
    tids = sorted(int(n.split(".")[0]) for n in os.listdir(truth_dir)
                  if n.endswith(".insns"))
    ok = bool(tids)
    for tid in tids:
        want, lost = read_truth(bundle, tid)
        got = threads.get(tid, [])
        note = " (%d lost ranges)" % lost if lost else ""
        if got == want:
            print("OK tid %d %d insns%s" % (tid, len(got), note))
            continue
        if got and len(got) < len(want) and want[-len(got):] == got:
            print("OK tid %d %d insns, suffix%s" % (tid, len(got), note))
            continue
        ok = False
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                     min(len(got), len(want)))
        print("MISMATCH tid %d at insn %d: perf %s, truth %s (perf %d, truth %d)"
              % (tid, first,
                 hex(got[first]) if first < len(got) else "end",
                 hex(want[first]) if first < len(want) else "end",
                 len(got), len(want)))
    return 0 if ok else 1


def decoded(perf_out, ours):
    perf = {}
    with open(perf_out) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                perf.setdefault(int(parts[0]), []).append(int(parts[1], 16))
    mine = {}
    tid = None
    with open(ours) as f:
        for line in f:
            if line.startswith("# thread "):
                tid = int(line.split()[2])
                mine.setdefault(tid, [])
            elif line.startswith("0x") and tid is not None:
                mine[tid].append(int(line, 16))
    ok = bool(mine)
    for tid in sorted(set(mine) | set(perf)):
        got, want = perf.get(tid, []), mine.get(tid, [])
        if got == want and got:
            print("OK tid %d %d insns" % (tid, len(got)))
            continue
        ok = False
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                     min(len(got), len(want)))
        print("MISMATCH tid %d at insn %d: perf %s, ours %s (perf %d, ours %d)"
              % (tid, first,
                 hex(got[first]) if first < len(got) else "end",
                 hex(want[first]) if first < len(want) else "end",
                 len(got), len(want)))
    return 0 if ok else 1


def calls(perf_out, ours):
    perf = {}
    with open(perf_out) as f:
        for line in f:
            m = PERF_CALL.match(line)
            if m:
                perf.setdefault(int(m.group(1)), []).append(
                    (m.group(2), int(m.group(3), 16), int(m.group(4), 16)))
    mine = {}
    tid = None
    with open(ours) as f:
        for line in f:
            if line.startswith("# thread "):
                tid = int(line.split()[2])
                mine.setdefault(tid, [])
                continue
            m = OUR_CALL.match(line)
            if m and tid is not None:
                to = int(m.group(3), 16) if m.group(3) != "?" else None
                mine[tid].append((m.group(1), int(m.group(2), 16), to))
    ok = bool(mine)
    for tid in sorted(set(mine) | set(perf)):
        got, want = perf.get(tid, []), mine.get(tid, [])
        # A transfer whose target the trace does not show (the last before
        # tracing stops, or one before an overflow) has "?" in our dump;
        # perf computes a direct call's target from the instruction. Such an
        # entry matches perf's on kind and source alone.
        unknown = 0
        if len(got) == len(want):
            for i, (kind, source, target) in enumerate(want):
                if target is None and got[i][:2] == (kind, source):
                    want[i] = got[i]
                    unknown += 1
        if got == want and got:
            print("OK tid %d %d calls and returns%s" % (
                tid, len(got),
                " (%d targets only perf knows)" % unknown if unknown else ""))
            continue
        ok = False
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                     min(len(got), len(want)))
        print("MISMATCH tid %d at %d: perf %s, ours %s (perf %d, ours %d)"
              % (tid, first, got[first] if first < len(got) else "end",
                 want[first] if first < len(want) else "end",
                 len(got), len(want)))
    return 0 if ok else 1


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("insns", "decoded", "calls"):
        print(__doc__)
        return 2
    if sys.argv[1] == "insns":
        return insns(sys.argv[2], sys.argv[3])
    if sys.argv[1] == "decoded":
        return decoded(sys.argv[2], sys.argv[3])
    return calls(sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    sys.exit(main())
