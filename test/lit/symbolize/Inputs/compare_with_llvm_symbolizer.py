#!/usr/bin/env python3
"""Symbolizes every instruction address of an ELF file's .text with
magic-trace-symbolize and with llvm-symbolizer --inlining, and compares the
chains (function names, files and lines; llvm-symbolizer's columns are
ignored, our tool prints none). Addresses come from llvm-objdump -d.

Prints one summary line, then 'mismatches: N'; exits 1 on any mismatch, or if
the cache cost more than one computed range per distinct chain run."""
import argparse
import re
import subprocess
import sys


def text_addresses(objdump, path, section):
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", "-j", section, path],
                         check=True, capture_output=True, text=True).stdout
    return [int(m.group(1), 16) for m in re.finditer(r"^\s*([0-9a-f]+):\s", out, re.M)]


def parse_blocks(text, keep_columns=False):
    """Blocks of 'name / file:line[:col]' pairs separated by empty lines."""
    blocks = []
    for block in text.split("\n\n"):
        lines = [l for l in block.split("\n") if l != ""]
        if not lines:
            continue
        frames = []
        for name, loc in zip(lines[0::2], lines[1::2]):
            m = re.match(r"^(.*?):(\d+)(:\d+)?$", loc)
            if not m:
                raise SystemExit("cannot parse location line %r" % loc)
            if name.startswith("[unknown @ "):
                name = "??"
            frame = (name, m.group(1), int(m.group(2)))
            if keep_columns:
                frame += (m.group(3),)
            frames.append(frame)
        blocks.append(frames)
    return blocks


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--obj", required=True)
    parser.add_argument("--ours", default="magic-trace-symbolize")
    parser.add_argument("--llvm-symbolizer", default="llvm-symbolizer")
    parser.add_argument("--llvm-objdump", default="llvm-objdump")
    parser.add_argument("--section", default=".text")
    args = parser.parse_args()

    addresses = text_addresses(args.llvm_objdump, args.obj, args.section)
    if not addresses:
        raise SystemExit("no instructions found in %s" % args.obj)
    stdin = "".join("0x%x\n" % a for a in addresses)
    ours_cmd = [args.ours, "--obj", args.obj, "--stats"]
    ref_cmd = [args.llvm_symbolizer, "--inlining", "--obj=" + args.obj]
    ours = subprocess.run(ours_cmd, input=stdin, check=True, capture_output=True, text=True)
    ref = subprocess.run(ref_cmd, input=stdin, check=True, capture_output=True, text=True)
    ours_blocks = parse_blocks(ours.stdout)
    ref_blocks = parse_blocks(ref.stdout)
    if len(ours_blocks) != len(addresses) or len(ref_blocks) != len(addresses):
        raise SystemExit("expected %d answers, got %d (ours) and %d (llvm-symbolizer)"
                         % (len(addresses), len(ours_blocks), len(ref_blocks)))

    mismatches = 0
    for address, mine, theirs in zip(addresses, ours_blocks, ref_blocks):
        if mine != theirs:
            mismatches += 1
            if mismatches <= 10:
                print("mismatch at 0x%x:\n  ours: %s\n  llvm: %s" % (address, mine, theirs))

    # Runs of consecutive instructions with one chain, columns included (two
    # adjacent inlined calls on one line are two scopes): the cache may not
    # compute more ranges than there are runs.
    col_blocks = parse_blocks(ref.stdout, keep_columns=True)
    runs = 1 + sum(1 for a, b in zip(col_blocks, col_blocks[1:]) if a != b)
    stats = re.search(r"lookups: (\d+), hits: (\d+), distinct ranges: (\d+)", ours.stderr)
    if not stats:
        raise SystemExit("no stats from %s: %s" % (args.ours, ours.stderr))
    lookups, hits, ranges = (int(x) for x in stats.groups())
    max_frames = max(len(b) for b in ref_blocks)
    print("addresses: %d, chain runs: %d, deepest chain: %d, computed ranges: %d"
          % (len(addresses), runs, max_frames, ranges))
    if lookups != len(addresses) or hits + ranges != lookups:
        print("bad counters: lookups %d hits %d ranges %d" % (lookups, hits, ranges))
        mismatches += 1
    if ranges > runs:
        print("the cache computed %d ranges for %d chain runs" % (ranges, runs))
        mismatches += 1
    print("mismatches: %d" % mismatches)
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
