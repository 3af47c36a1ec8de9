#!/usr/bin/env python3
"""Symbolizes every instruction address of an ELF file's .text with
magic-trace-symbolize and with llvm-symbolizer --inlining, and compares the
chains (function names, files and lines; llvm-symbolizer's columns are
ignored, our tool prints none). Addresses come from llvm-objdump -d.

Where llvm-symbolizer knows no function ("??"), ours may name the FDE that
covers the address, FILE+0xSTART with START at or below the address
(compare_fdes_with_readelf.py checks those names against readelf). With
--debug-file-symbols, llvm-symbolizer is given the file's separate debug file
from /usr/lib/debug/.build-id (build-id read by readelf) when there is one:
it reads that file's .symtab as we do for a stripped file, while on the
stripped file itself it would use only the debug file's DWARF;
--reference-obj FILE gives it FILE (a debug file found through
.gnu_debuglink).

Prints one summary line, then 'mismatches: N'; exits 1 on any mismatch, or
(when every instruction is checked) if the cache computed more ranges than
there are runs of equal chains."""
import argparse
import os
import re
import subprocess
import sys


def text_addresses(objdump, path, section):
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", "-j", section, path],
                         check=True, capture_output=True, text=True).stdout
    return [int(m.group(1), 16) for m in re.finditer(r"^\s*([0-9a-f]+):\s", out, re.M)]


def dynsym_addresses(nm, path, every):
    """Start, middle and last byte of every Nth defined function of .dynsym:
    for large shared libraries (llvm-objdump skips some of them)."""
    out = subprocess.run([nm, "-D", "-S", "--defined-only", path],
                         check=True, capture_output=True, text=True).stdout
    functions = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[2] in ("T", "t", "W", "i"):
            functions.add((int(fields[0], 16), int(fields[1], 16)))
    addresses = []
    for start, size in sorted(functions)[::every]:
        addresses += sorted({start, start + size // 2, start + max(size, 1) - 1})
    return addresses


def build_id_debug_file(path):
    notes = subprocess.run(["readelf", "-n", path], check=True,
                           capture_output=True, text=True).stdout
    match = re.search(r"Build ID: ([0-9a-f]+)", notes)
    if not match:
        return None
    build_id = match.group(1)
    candidate = "/usr/lib/debug/.build-id/%s/%s.debug" % (build_id[:2], build_id[2:])
    return candidate if os.path.exists(candidate) else None


def accept_fde_names(path, addresses, ours_blocks, ref_blocks):
    """Ours "FILE+0xSTART" where llvm-symbolizer has "??": taken as agreeing
    when START is at or below the address. Returns how many."""
    pattern = re.compile(re.escape(os.path.basename(path)) + r"\+0x([0-9a-f]+)$")
    accepted = 0
    for index, (address, mine, theirs) in enumerate(zip(addresses, ours_blocks, ref_blocks)):
        if len(mine) != 1 or len(theirs) != 1 or theirs[0][0] != "??":
            continue
        match = pattern.match(mine[0][0])
        if match and int(match.group(1), 16) <= address and mine[0][1:3] == theirs[0][1:3]:
            ref_blocks[index] = [mine[0] + theirs[0][3:]]
            accepted += 1
    return accepted


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
    parser.add_argument("--llvm-nm", default="llvm-nm")
    parser.add_argument("--every", type=int, default=1,
                        help="check every Nth instruction only (large files)")
    parser.add_argument("--dynsym-every", type=int, default=0,
                        help="instead of .text's instructions, check three bytes "
                        "of every Nth .dynsym function")
    parser.add_argument("--debug-file-symbols", action="store_true",
                        help="give llvm-symbolizer the build-id debug file")
    parser.add_argument("--reference-obj",
                        help="the file llvm-symbolizer reads instead of --obj")
    args = parser.parse_args()

    if args.dynsym_every:
        addresses = dynsym_addresses(args.llvm_nm, args.obj, args.dynsym_every)
    else:
        addresses = text_addresses(args.llvm_objdump, args.obj,
                                   args.section)[::args.every]
    if not addresses:
        raise SystemExit("no instructions found in %s" % args.obj)
    stdin = "".join("0x%x\n" % a for a in addresses)
    ours_cmd = [args.ours, "--obj", args.obj, "--stats"]
    reference_obj = args.reference_obj or args.obj
    if args.debug_file_symbols:
        reference_obj = build_id_debug_file(args.obj) or args.obj
        print("reference symbols: %s" % ("debug file" if reference_obj != args.obj
                                         else "the file itself"))
    ref_cmd = [args.llvm_symbolizer, "--inlining", "--obj=" + reference_obj]
    ours = subprocess.run(ours_cmd, input=stdin, check=True, capture_output=True, text=True)
    ref = subprocess.run(ref_cmd, input=stdin, check=True, capture_output=True, text=True)
    ours_blocks = parse_blocks(ours.stdout)
    ref_blocks = parse_blocks(ref.stdout)
    if len(ours_blocks) != len(addresses) or len(ref_blocks) != len(addresses):
        raise SystemExit("expected %d answers, got %d (ours) and %d (llvm-symbolizer)"
                         % (len(addresses), len(ours_blocks), len(ref_blocks)))

    col_blocks = parse_blocks(ref.stdout, keep_columns=True)
    fde_names = accept_fde_names(args.obj, addresses, ours_blocks, ref_blocks)
    accept_fde_names(args.obj, addresses, ours_blocks, col_blocks)
    mismatches = 0
    for address, mine, theirs in zip(addresses, ours_blocks, ref_blocks):
        if mine != theirs:
            mismatches += 1
            if mismatches <= 10:
                print("mismatch at 0x%x:\n  ours: %s\n  llvm: %s" % (address, mine, theirs))

    # Runs of consecutive checked instructions with one chain, columns
    # included (two adjacent inlined calls on one line are two scopes): the
    # cache may not compute more ranges than there are runs.
    runs = 1 + sum(1 for a, b in zip(col_blocks, col_blocks[1:]) if a != b)
    stats = re.search(r"lookups: (\d+), hits: (\d+), distinct ranges: (\d+)", ours.stderr)
    if not stats:
        raise SystemExit("no stats from %s: %s" % (args.ours, ours.stderr))
    lookups, hits, ranges = (int(x) for x in stats.groups())
    max_frames = max(len(b) for b in ref_blocks)
    print("addresses: %d, chain runs: %d, deepest chain: %d, computed ranges: %d, "
          "FDE names where llvm-symbolizer has none: %d"
          % (len(addresses), runs, max_frames, ranges, fde_names))
    if lookups != len(addresses) or hits + ranges != lookups:
        print("bad counters: lookups %d hits %d ranges %d" % (lookups, hits, ranges))
        mismatches += 1
    # Only every instruction in order makes runs comparable with ranges.
    if args.every == 1 and not args.dynsym_every and ranges > runs:
        print("the cache computed %d ranges for %d chain runs" % (ranges, runs))
        mismatches += 1
    print("mismatches: %d" % mismatches)
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
