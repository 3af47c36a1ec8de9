#!/usr/bin/env python3
"""Compares LLDB's decode of an emulated bundle with the emulator's ground truth.

  check-insns.py DIR... [--lldb lldb-22] [--wrapped] [--last N] [--dump FILE]

For every thread in DIR/trace.json, runs LLDB's own intel-pt decoder
(`trace load DIR/trace.json`, then `thread trace dump instructions -a -r -f -e
N` for each thread N of each process; one LLDB session for all the DIRs
given; the processes a code history's epochs make are one process, and
a later epoch's piece of thread T, listed as thread T + k * 10,000,000
with "magicTraceTid" T, is T's, in process order) and
checks that the instruction addresses it lists are exactly those in
DIR/groundtruth/<tid>.insns, with the ranges in <tid>.lost taken out (an
injected overflow; LLDB may mark it with an error).

With --last N, LLDB lists only each thread's newest N entries (`-c N`,
newest first, turned back into time order here) and they must be the
ground truth's end: a big trace's tail checked in seconds, not its whole
in minutes (LLDB prints about 100,000 instructions a second).

The comparison runs backwards from the last instruction, so when the ring
buffer wrapped (the oldest bytes were overwritten: "wrapped" in
DIR/magic-trace.json, or --wrapped) LLDB may list a suffix of the ground
truth: what follows the first PSB it syncs to.

Forgiven, by name and count, and only next to a "trace synchronization point"
(a PSB) in LLDB's list — LLDB decodes each PSB block on its own (issue 3,
"Known facts"):
  psb-repeat   LLDB lists the instruction before a PSB again after it.
  psb-end      LLDB reports a spurious "end of trace stream" error at a PSB.
  ovf-psb-repeat  where an OVF's FUP is followed at once by a PSB+, LLDB
               lists the instruction before the OVF again after its
               "overflow" error, right before syncing (libipt's own block
               decoder, magic-trace's, lists it once).
Everything else is a divergence: the first one is printed with context and
the exit status is 1.
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

HEADER = re.compile(r"^thread #(\d+): tid = (\d+)")
INSN = re.compile(r"^\s+(\d+): (0x[0-9a-fA-F]+)\s*$")
ERROR = re.compile(r"^\s+(\d+): \(error\) (.*)$")
EVENT = re.compile(r"^\s+(\d+): \(event\) (.*)$")
SYNC = "trace synchronization point"
# A later epoch's piece of a thread: tid + k * this (LldbView.h).
EPOCH_TID_STEP = 10000000
CONTEXT = 6


class Item:
    """One entry of LLDB's list: kind is insn, error or sync."""

    __slots__ = ("kind", "value", "line")

    def __init__(self, kind, value, line):
        self.kind, self.value, self.line = kind, value, line

    def __repr__(self):
        if self.kind == "insn":
            return f"{self.value:#x}"
        return f"({self.kind}) {self.value}"


def run_lldb(lldb, bundles, last=None):
    """One LLDB session: each `trace load` makes a target per process of its
    trace.json (several for the epochs of a code history, one pid: each
    thread's pieces in process order), numbered on from the last."""
    cmd = [lldb, "--no-lldbinit", "-b"]
    target = 0
    for trace_json, process_threads in bundles:
        cmd += ["-o", f"trace load {trace_json}"]
        for thread_count in process_threads:
            cmd += ["-o", f"target select {target}"]
            target += 1
            for index in range(1, thread_count + 1):
                scope = f"-c {last}" if last else "-a -f"
                cmd += ["-o",
                        f"thread trace dump instructions {scope} -r -e {index}"]
    # To a file, not a pipe: LLDB writes its list a line at a time, and a
    # pipe's reader woke for each (700,000 reads for 2 M instructions).
    with tempfile.TemporaryFile("w+") as out:
        run = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE,
                             text=True)
        if run.returncode != 0:
            sys.exit(f"error: lldb failed ({run.returncode}): "
                     f"{run.stderr.strip()}")
        out.seek(0)
        return out.read()


def parse_dump(text):
    """Returns {tid: [Item]} from LLDB's output."""
    threads, items = {}, None
    for number, line in enumerate(text.splitlines(), 1):
        match = HEADER.match(line)
        if match:
            items = threads.setdefault(int(match.group(2)), [])
            continue
        if items is None:
            continue
        match = INSN.match(line)
        if match:
            items.append(Item("insn", int(match.group(2), 16), number))
            continue
        match = ERROR.match(line)
        if match:
            items.append(Item("error", match.group(2), number))
            continue
        match = EVENT.match(line)
        if match and match.group(2).startswith(SYNC):
            items.append(Item("sync", match.group(2), number))
    return threads


def load_truth(directory, tid):
    base = os.path.join(directory, "groundtruth", str(tid))
    with open(base + ".insns", "rb") as f:
        data = f.read()
    insns = list(struct.unpack(f"<{len(data) // 8}Q", data))
    lost = []
    if os.path.exists(base + ".lost"):
        with open(base + ".lost") as f:
            for line in f:
                if line.strip():
                    first, count = map(int, line.split())
                    lost.append((first, count))
    # Expected list: addresses, with a None marker where instructions were
    # lost (a gap LLDB may or may not mark with an error).
    # A range of 0 instructions marks where a recorder wrote OVF with nothing
    # lost that a decoder could have listed (the QEMU recorder's signals).
    lost_at = {first: count for first, count in lost}
    expected, index, marked = [], 0, set()
    while index < len(insns):
        if index in lost_at and index not in marked:
            marked.add(index)
            expected.append(None)
            index += lost_at[index]
            continue
        expected.append((index, insns[index]))
        index += 1
    return expected, len(insns)


def near_sync(items, position):
    """A sync point within two entries of `position` in LLDB's list."""
    for other in range(max(0, position - 2), min(len(items), position + 3)):
        if items[other].kind == "sync":
            return True
    return False


def show_divergence(tid, items, expected, i, j, why):
    print(f"thread {tid}: DIVERGENCE: {why}")
    print(f"  LLDB list around entry {i} (newest last):")
    for k in range(max(0, i - CONTEXT), min(len(items), i + CONTEXT)):
        mark = ">>" if k == i else "  "
        print(f"  {mark} lldb[{k}] {items[k]!r}  (dump line {items[k].line})")
    print(f"  ground truth around expected entry {j}:")
    for k in range(max(0, j - CONTEXT), min(len(expected), j + CONTEXT)):
        mark = ">>" if k == j else "  "
        entry = expected[k]
        text = "(lost)" if entry is None else f"insn #{entry[0]} {entry[1]:#x}"
        print(f"  {mark} truth[{k}] {text}")


def compare(tid, items, expected, total, wrapped, forgiven, last=False):
    """Walks both lists from the end; returns True when they agree."""
    i, j = len(items) - 1, len(expected) - 1
    while i >= 0:
        item = items[i]
        if item.kind == "sync":
            i -= 1
            continue
        want = expected[j] if j >= 0 else None
        if j >= 0 and want is None:
            # ovf-psb-repeat: a PSB+ right after an OVF's FUP; LLDB lists the
            # instruction before the OVF again after its error, then syncs
            # at the PSB (libipt's own decoder lists it once).
            if (item.kind == "insn" and i >= 2
                    and items[i - 1].kind == "error"
                    and items[i - 1].value == "overflow"
                    and items[i - 2].kind == "insn"
                    and items[i - 2].value == item.value
                    and i + 1 < len(items) and items[i + 1].kind == "sync"):
                forgiven.append(("ovf-psb-repeat", tid, item.line))
                i -= 2
                j -= 1
                continue
            # An injected overflow: LLDB may show it as one error.
            if item.kind == "error":
                i -= 1
            j -= 1
            continue
        if want is not None and item.kind == "insn" and item.value == want[1]:
            i -= 1
            j -= 1
            continue
        # psb-repeat: the entry after this one (already matched) is the same
        # address: LLDB listed an instruction twice across a PSB.
        if (item.kind == "insn" and j + 1 < len(expected)
                and expected[j + 1] is not None
                and item.value == expected[j + 1][1] and near_sync(items, i)):
            forgiven.append(("psb-repeat", tid, item.line))
            i -= 1
            continue
        if (item.kind == "error" and "end of trace stream" in item.value
                and near_sync(items, i)):
            forgiven.append(("psb-end", tid, item.line))
            i -= 1
            continue
        if j < 0:
            break
        show_divergence(tid, items, expected, i, j,
                        f"LLDB has {item!r}, ground truth has "
                        f"insn #{want[0]} {want[1]:#x}")
        return False
    # What is left is older than what the other side has.
    leftover = [item for item in items[: i + 1] if item.kind != "sync"]
    if wrapped:
        # Bytes before the first PSB of a wrapped ring cannot be decoded.
        leftover = [item for item in leftover if item.kind != "error"]
    if leftover:
        show_divergence(tid, items, expected, i, 0,
                        f"LLDB lists {len(leftover)} more entries than the "
                        f"ground truth at the start")
        return False
    missing = [want for want in expected[: j + 1] if want is not None]
    if missing and not wrapped:
        show_divergence(tid, items, expected, 0, j,
                        f"LLDB misses the first {len(missing)} instructions "
                        f"of {total}")
        return False
    decoded = total - len(missing)
    if wrapped and decoded == 0:
        print(f"thread {tid}: DIVERGENCE: LLDB decoded nothing of a wrapped "
              f"trace of {total} instructions")
        return False
    print(f"thread {tid}: ok, {decoded} of {total} instructions match"
          + (" (the newest, as --last asked)" if last and missing else
             " (suffix after the first PSB)" if missing else ""))
    return True


def read_tids(bundle):
    trace_json = os.path.join(bundle, "trace.json")
    try:
        with open(trace_json) as f:
            description = json.load(f)
        # Each thread once, whose first piece may be in a later epoch.
        tids = {}
        for process in description["processes"]:
            for t in process["threads"]:
                tids.setdefault(t.get("magicTraceTid", t["tid"]), None)
        tids = list(tids)
        return (trace_json, [len(p["threads"])
                             for p in description["processes"]], tids)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"error: cannot read the threads of {trace_json}: {e} "
                 f"(is it a bundle written by magic-trace-emulate?)")


def read_wrapped(bundle):
    """{tid: wrapped} from magic-trace.json; empty when it is absent."""
    try:
        with open(os.path.join(bundle, "magic-trace.json")) as f:
            extra = json.load(f)
        return {t["tid"]: bool(t.get("wrapped")) for t in extra.get("threads", [])}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def main():
    parser = argparse.ArgumentParser(
        description="compare LLDB's decode of bundles with the ground truth")
    parser.add_argument("bundles", nargs="+",
                        help="bundle directories (with trace.json)")
    parser.add_argument("--lldb", default="lldb-22")
    parser.add_argument("--wrapped", action="store_true",
                        help="treat every ring as wrapped: LLDB may list a "
                        "suffix")
    parser.add_argument("--last", type=int, metavar="N",
                        help="check only each thread's newest N entries")
    parser.add_argument("--dump", help="use this saved LLDB dump instead of "
                        "running LLDB")
    args = parser.parse_args()

    described = [read_tids(bundle) for bundle in args.bundles]
    if args.last is not None:
        if args.last <= 0 or args.dump:
            sys.exit("error: --last takes a count above 0, without --dump")
        if any(len(counts) != 1 for _, counts, _ in described):
            sys.exit("error: --last needs bundles of one process each (a code "
                     "history's epochs split a thread; check it whole)")
    if args.dump:
        with open(args.dump) as f:
            text = f.read()
    else:
        text = run_lldb(args.lldb, [(trace_json, counts)
                                    for trace_json, counts, _ in described],
                        args.last)
    # Thread ids are unique across the bundles: each run is a new process.
    decoded = parse_dump(text)
    if args.last:
        # Newest first: back into time order, a suffix of the truth.
        for items in decoded.values():
            items.reverse()
    for tid in list(decoded):
        if tid >= EPOCH_TID_STEP:
            decoded.setdefault(tid % EPOCH_TID_STEP, []).extend(decoded.pop(tid))

    ok, forgiven = True, []
    for bundle, (_, _, tids) in zip(args.bundles, described):
        print(f"bundle {bundle}:")
        wrapped = read_wrapped(bundle)
        if not tids:
            print(f"DIVERGENCE: {bundle} lists no thread to check")
            ok = False
        for tid in tids:
            expected, total = load_truth(bundle, tid)
            if tid not in decoded:
                print(f"thread {tid}: DIVERGENCE: LLDB printed no dump for it")
                ok = False
                continue
            ok &= compare(tid, decoded[tid], expected, total,
                          args.wrapped or bool(args.last) or
                          wrapped.get(tid, False), forgiven, bool(args.last))
    for name, tid, line in forgiven:
        print(f"forgiven: {name} (thread {tid}, dump line {line})")
    counts = {}
    for name, _, _ in forgiven:
        counts[name] = counts.get(name, 0) + 1
    summary = ", ".join(f"{n} {name}" for name, n in sorted(counts.items()))
    print(f"forgiven total: {len(forgiven)}" + (f" ({summary})" if summary else ""))
    print("result: " + ("MATCH" if ok else "MISMATCH"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
