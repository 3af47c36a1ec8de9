#!/usr/bin/env python3
"""Checks magic-trace-symbolize's function bounds against binutils' FDE list.

`readelf --debug-dump=frames` lists every FDE of --obj (pc=BEGIN..END). For
each one (not empty, not at 0) the first, middle and last byte are looked up
with `magic-trace-symbolize --show-range`:
- in a PLT section (readelf -S), the PLT's own names win (plt.test checks
  them against objdump); the FDE is only counted;
- where llvm-symbolizer-22 --obj names the address (a symbol of .symtab or
  .dynsym, or DWARF), our outermost name must be its outermost name: a real
  symbol wins over the FDE;
- elsewhere all three bytes must be one frame named BASENAME+0xBEGIN, with
  range BEGIN-END and entry BEGIN.
An FDE is "its own frame" when its three bytes gave one name and entry that
no other FDE's bytes gave. Prints the counts, the percentage of own frames
over all FDEs outside the PLT, each mismatch, and 'mismatches: N'. With
--expect-symbols (an unstripped file) any FDE-named answer is a mismatch.
With --lldb LLDB, each FDE name's number must also be that of the symbol
LLDB synthesizes for the function (___lldb_unnamed_symbol_HEX in
`image dump symtab`), which a user would see in LLDB.
"""
import argparse
import os
import re
import subprocess
import sys


def run(args, stdin=None):
    return subprocess.run(args, input=stdin, check=True, capture_output=True,
                          text=True).stdout


def fdes(path):
    """(begin, end) of every FDE readelf lists, without empty ones."""
    out = run(["readelf", "--debug-dump=frames", "-W", path])
    found = set()
    for match in re.finditer(r"\bFDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.([0-9a-f]+)",
                             out):
        begin, end = int(match.group(1), 16), int(match.group(2), 16)
        if begin != 0 and end > begin:
            found.add((begin, end))
    return sorted(found)


def plt_sections(path):
    out = run(["readelf", "-S", "-W", path])
    sections = []
    for match in re.finditer(r"\]\s+(\.plt\S*)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)",
                             out):
        address, size = int(match.group(2), 16), int(match.group(3), 16)
        sections.append((address, address + size))
    return sections


def blocks(text):
    return [block.splitlines() for block in text.split("\n\n") if block.strip()]


def ours(path, addresses):
    """Per address: (outermost name, range begin, range end, entry)."""
    out = run(["magic-trace-symbolize", "--obj", path, "--show-range"],
              "".join("%#x\n" % a for a in addresses))
    answers = []
    for lines in blocks(out):
        match = re.match(r"range: (0x[0-9a-f]+)-(0x[0-9a-f]+) entry (0x[0-9a-f]+)$",
                         lines[-1])
        if not match:
            raise SystemExit("no range line in %r" % lines)
        # Innermost first, like llvm-symbolizer: the outermost is last.
        answers.append((lines[-3],) + tuple(int(g, 16) for g in match.groups()))
    return answers


def llvm_names(path, addresses):
    out = run(["llvm-symbolizer", "--inlining", "--obj=" + path],
              "".join("%#x\n" % a for a in addresses))
    return [lines[-2] for lines in blocks(out)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--obj", required=True)
    parser.add_argument("--expect-symbols", action="store_true")
    parser.add_argument("--lldb")
    args = parser.parse_args()

    functions = fdes(args.obj)
    if not functions:
        print("error: readelf lists no FDE in " + args.obj)
        return 1
    plts = plt_sections(args.obj)
    in_plt = [any(lo <= begin < hi for lo, hi in plts) for begin, _ in functions]
    addresses = []
    for begin, end in functions:
        addresses += [begin, begin + (end - begin) // 2, end - 1]
    mine = ours(args.obj, addresses)
    theirs = llvm_names(args.obj, addresses)
    if len(mine) != len(addresses) or len(theirs) != len(addresses):
        print("error: %d answers (ours) and %d (llvm-symbolizer) for %d addresses"
              % (len(mine), len(theirs), len(addresses)))
        return 1

    fde_name = re.compile(re.escape(os.path.basename(args.obj)) + r"\+0x[0-9a-f]+$")
    mismatches = 0
    by_symbol = by_fde = 0
    frames = {}  # (name, entry) -> indices of the FDEs whose bytes gave it

    def mismatch(text):
        nonlocal mismatches
        mismatches += 1
        if mismatches <= 20:
            print("mismatch: " + text)

    for index, (begin, end) in enumerate(functions):
        answers = mine[3 * index:3 * index + 3]
        names = theirs[3 * index:3 * index + 3]
        for answer in answers:
            frames.setdefault((answer[0], answer[3]), set()).add(index)
        if in_plt[index]:
            continue
        for address, answer, name in zip(addresses[3 * index:3 * index + 3],
                                         answers, names):
            if name != "??":
                by_symbol += 1
                if answer[0] != name:
                    mismatch("%#x: llvm-symbolizer %s, ours %s" % (address, name, answer[0]))
                continue
            by_fde += 1
            expected = ("%s+%#x" % (os.path.basename(args.obj), begin), begin, end, begin)
            if args.expect_symbols or answer != expected:
                mismatch("%#x in FDE %#x..%#x: ours %s range %#x-%#x entry %#x"
                         % ((address, begin, end) + answer))
        if any(fde_name.match(answer[0]) for answer in answers) and \
                any(name != "??" for name in names):
            mismatch("FDE %#x..%#x: both a symbol and an FDE name" % (begin, end))

    lldb_line = None
    if args.lldb:
        dump = run([args.lldb, "--no-lldbinit", "-b", "-o",
                    "image dump symtab " + os.path.basename(args.obj), args.obj])
        synthesized = {int(h, 16) for h in
                       re.findall(r"___lldb_unnamed_symbol_([0-9a-f]+)\b", dump)}
        named = {int(a[0].rsplit("+", 1)[1], 16) for a in mine if fde_name.match(a[0])}
        for number in sorted(named - synthesized):
            mismatch("FDE name %#x has no ___lldb_unnamed_symbol_%x" % (number, number))
        lldb_line = ("lldb synthesized symbols: %d, FDE names among them: %d of %d"
                     % (len(synthesized), len(named & synthesized), len(named)))

    own = 0
    for index in range(len(functions)):
        if in_plt[index]:
            continue
        keys = {(a[0], a[3]) for a in mine[3 * index:3 * index + 3]}
        if len(keys) == 1 and frames[keys.pop()] == {index}:
            own += 1
    counted = len(functions) - sum(in_plt)
    print("fdes: %d, in plt: %d, bytes named by a symbol: %d, by their FDE: %d"
          % (len(functions), sum(in_plt), by_symbol, by_fde))
    if lldb_line:
        print(lldb_line)
    print("own frames: %d of %d (%.1f%%)" % (own, counted, 100.0 * own / max(counted, 1)))
    print("mismatches: %d" % mismatches)
    return 0


if __name__ == "__main__":
    sys.exit(main())
