#!/usr/bin/env python3
"""Checks magic-trace-symbolize's names of PLT stubs against binutils.

For every `<NAME@plt>` label `objdump -d` prints in .plt, .plt.sec and
.plt.got of --obj, the stub's address must symbolize to NAME@plt. objdump
names a stub whose GOT slot has an IRELATIVE relocation `*ABS*+0xA@plt`; for
those the expected name is the IFUNC symbol `readelf --dyn-syms` lists at A
(the resolver glibc's stub ends up calling), or objdump's text when none.
objdump's names are demangled with llvm-cxxfilt (demangling is LLVM's in
both, so only the stub -> target mapping is compared). Section starts objdump labels with the section's name must have that name.
A static executable's IFUNC PLT (GNU ld: .plt of bare 8-byte `jmp *slot`
stubs, no PLT0, sh_entsize 0) gets no labels from objdump: there each `jmp`
objdump disassembles in .plt is a stub, and its name is the IFUNC symbol
(`readelf --syms`) at the addend of the R_X86_64_IRELATIVE relocation
(`readelf -r`) of the slot objdump shows it jumping through.
Prints the count of stubs, the sections labelled and of mismatches (each mismatch on its own line).
"""
import argparse
import re
import subprocess
import sys


def run(args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def static_iplt_stubs(obj, disassembly):
    """{stub address: IFUNC name} of a static executable's unlabelled .plt."""
    ifuncs = {}
    for line in run(["readelf", "-W", "--syms", obj]).splitlines():
        fields = line.split()
        if len(fields) >= 8 and fields[3] == "IFUNC":
            ifuncs.setdefault(int(fields[1], 16), fields[7].split("@")[0])
    slots = {}
    for line in run(["readelf", "-W", "-r", obj]).splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "R_X86_64_IRELATIVE":
            slots[int(fields[0], 16)] = int(fields[3], 16)
    stubs = {}
    for match in re.finditer(
            r"^\s+([0-9a-f]+):\s+jmp\s+\*0x[0-9a-f]+\(%rip\)\s+# ([0-9a-f]+)",
            disassembly, re.M):
        slot = int(match.group(2), 16)
        if slot in slots and slots[slot] in ifuncs:
            stubs[int(match.group(1), 16)] = ifuncs[slots[slot]]
    return stubs


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--obj", required=True)
    args = parser.parse_args()

    ifuncs = {}
    for line in run(["readelf", "-W", "--dyn-syms", args.obj]).splitlines():
        fields = line.split()
        if len(fields) >= 8 and fields[3] == "IFUNC":
            ifuncs.setdefault(int(fields[1], 16), fields[7].split("@")[0])

    expected = {}
    disassembly = run(["objdump", "-d", "--no-show-raw-insn", "-j", ".plt",
                       "-j", ".plt.sec", "-j", ".plt.got", args.obj])
    for match in re.finditer(r"^([0-9a-f]+) <(.*)@plt>:$", disassembly, re.M):
        address, name = int(match.group(1), 16), match.group(2)
        absolute = re.fullmatch(r"\*ABS\*\+0x([0-9a-f]+)", name)
        if absolute and int(absolute.group(1), 16) in ifuncs:
            name = ifuncs[int(absolute.group(1), 16)]
        expected[address] = name
    if not expected:
        expected = static_iplt_stubs(args.obj, disassembly)
    if not expected:
        print("error: objdump found no PLT stub in " + args.obj)
        return 1
    # objdump labels the start of a section with nothing else there (PLT0,
    # IBT's lazy-binding .plt) with the section's name: so do we.
    sections = {}
    for match in re.finditer(r"^([0-9a-f]+) <(\.plt[.a-z]*)>:$", disassembly,
                             re.M):
        sections[int(match.group(1), 16)] = match.group(2)

    addresses = sorted(expected)
    demangled = subprocess.run(["llvm-cxxfilt"], input="\n".join(
        expected[a] for a in addresses) + "\n", check=True,
        capture_output=True, text=True).stdout.splitlines()
    for address, name in zip(addresses, demangled):
        expected[address] = name + "@plt"
    stub_count = len(expected)
    # A section start that is a stub (a static IFUNC PLT has no PLT0) keeps
    # the stub's name.
    for address, section in sections.items():
        expected.setdefault(address, section)
    addresses = sorted(expected)
    output = run(["magic-trace-symbolize", "--obj", args.obj] +
                 [hex(a) for a in addresses])
    # llvm-symbolizer's layout: per address a block of lines (function, then
    # file:line, for each frame) and an empty line; no inlining in PLTs.
    names = [block.splitlines()[0] for block in output.split("\n\n")
             if block.strip()]
    mismatches = 0
    for address, name in zip(addresses, names):
        if name != expected[address]:
            mismatches += 1
            print("mismatch at %#x: objdump %s, magic-trace %s" %
                  (address, expected[address], name))
    if len(names) != len(addresses):
        mismatches += 1
        print("mismatch: %d names for %d addresses" % (len(names), len(addresses)))
    print("plt sections: %s" % " ".join(sorted(set(sections.values()))))
    print("plt stubs: %d" % stub_count)
    print("mismatches: %d" % mismatches)
    return 0


if __name__ == "__main__":
    sys.exit(main())
