#!/usr/bin/env python3
"""Checks the views of one session against what we did not write.

  check_views.py OUTPUT [--bundle DIR] [--objdump] [--tid TID]
                 [--largest NAME] [--calls NAME=N ...]

OUTPUT is the session's output (LLDB's or GDB's). Every JSON line in it is
checked; DIR is what 'magic-trace save --format bundle' wrote of the
snapshot the views read (trace.json: the modules and where they were
loaded; groundtruth/<tid>.insns: every instruction that ran, in order).

- report --annotate FUNCTION --json (a line starting '{"calls"'): per row,
  its instructions and entries equal the ground truth's. Each ground-truth
  address is placed in its module (the PT_LOAD segments llvm-readelf-22
  lists, at the bundle's load address) and symbolized by llvm-symbolizer-22
  --inlines. An instruction is FUNCTION's when a frame of its chain is
  FUNCTION (its own code and what is inlined into it, in every copy); its
  row is the innermost frame's file and line. Code outside every module is
  JIT code: its name comes from the program's /tmp/perf-PID.map and its
  rows are addresses. Entries are the runs of consecutive instructions on
  a row. With --objdump, the text of each instruction --insns lists equals
  llvm-objdump-22's.
- report --top N --json (a line starting '{"all"'): every function's calls
  equal the frames the call tree lists under its name (the lines after a
  line ending in 'magic-trace report'), every name of the tree is in it,
  and its instructions add up to the ground truth's.
- diff K1 K2 --json (a line starting '{"first"'): NAME (--largest) is its
  first function, and each NAME of --calls changed its calls by N (counts
  the test program fixes).
Prints one "ok ..." line per check, or what differs (exit 1).
"""
import argparse
import glob
import json
import os
import re
import struct
import subprocess
import sys


def load_segments(path):
    out = subprocess.run(["llvm-readelf-22", "--program-headers", "--wide", path],
                         check=True, capture_output=True, text=True).stdout
    segments = []
    for line in out.splitlines():
        fields = line.split()
        if fields and fields[0] == "LOAD":
            vaddr, memsz = int(fields[2], 16), int(fields[5], 16)
            segments.append((vaddr, vaddr + memsz))
    return segments


def modules_of(bundle):
    with open(os.path.join(bundle, "trace.json")) as f:
        trace = json.load(f)
    process = trace["processes"][0]
    modules = []
    for module in process["modules"]:
        # Code outside files, as the bundle writer made it an ELF file: ours,
        # so not an oracle; the perf map names that code instead.
        if module.get("magicTraceCode"):
            continue
        path = module.get("file") or module["systemPath"]
        if not os.path.isabs(path):
            path = os.path.join(bundle, path)
        if not os.path.exists(path):
            continue
        segments = load_segments(path)
        if not segments:
            continue
        base = min(begin for begin, _ in segments) & ~0xfff
        bias = int(module["loadAddress"], 16) - base
        modules.append((path, bias, [(b + bias, e + bias) for b, e in segments]))
    return process["pid"], [t["tid"] for t in process["threads"]], modules


def jit_symbols(pid):
    symbols = []
    try:
        with open("/tmp/perf-%d.map" % pid) as f:
            for line in f:
                start, size, name = line.rstrip("\n").split(" ", 2)
                symbols.append((int(start, 16), int(start, 16) + int(size, 16), name))
    except OSError:
        pass
    return symbols


def symbolize(path, addresses):
    """{file address: [(function, file, line)] innermost first}."""
    if not addresses:
        return {}
    text = "\n".join("0x%x" % a for a in addresses) + "\n"
    out = subprocess.run(["llvm-symbolizer-22", "--obj=" + path, "--inlines",
                          "--output-style=JSON"], input=text, check=True,
                         capture_output=True, text=True).stdout
    chains = {}
    for line in out.splitlines():
        entry = json.loads(line)
        chains[int(entry["Address"], 16)] = [
            (s["FunctionName"], s["FileName"], s["Line"]) for s in entry["Symbol"]]
    return chains


def objdump_texts(path):
    """{file address: instruction text} as llvm-objdump-22 prints it, a
    prefix it prints alone ("lock") joined to the instruction after it."""
    out = subprocess.run(["llvm-objdump-22", "-d", "--no-show-raw-insn", path],
                         check=True, capture_output=True, text=True).stdout
    texts, prefix = {}, None
    for line in out.splitlines():
        match = re.match(r"^\s*([0-9a-f]+):\s+(.*)$", line)
        if not match:
            continue
        address, text = int(match.group(1), 16), match.group(2)
        text = re.sub(r"\s+#.*$", "", text)
        text = " ".join(text.replace("\t", " ").split())
        if text in ("lock", "rep", "repne"):
            prefix = (address, text)
            continue
        if prefix:
            texts[prefix[0]] = prefix[1] + " " + text
            prefix = None
        texts[address] = text
    return texts


def check_texts(ours, modules):
    """--insns' disassembly against llvm-objdump-22's: the same text, or,
    where objdump names a branch target (<symbol>, at a file address), the
    same mnemonic. Returns the mismatches."""
    rows = [(i["address"], i["text"]) for line in ours["lines"]
            for i in line.get("insns", [])]
    problems, checked = [], 0
    for path, bias, segments in modules:
        mine = [(a, t) for a, t in rows if any(b <= a < e for b, e in segments)]
        if not mine:
            continue
        texts = objdump_texts(path)
        for address, text in mine:
            theirs = texts.get(address - bias)
            if theirs is None:
                problems.append("0x%x: objdump has no instruction there" % address)
                continue
            checked += 1
            if "<" in theirs:
                if theirs.split()[0] != text.split()[0]:
                    problems.append("0x%x: %r, objdump %r" % (address, text, theirs))
            elif theirs != text:
                problems.append("0x%x: %r, objdump %r" % (address, text, theirs))
    return problems, checked


def names(query, name):
    """A function name as report names it: exactly, or without its
    parameter list."""
    if name == query:
        return True
    if name.startswith("[") or "(" not in name:
        return False
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        if name[i] == ")":
            depth += 1
        elif name[i] == "(":
            depth -= 1
            if depth == 0:
                return name[:i] == query
    return False


# A frame line of the tree: total, self, the name indented by depth.
FRAME = re.compile(r"^ +\S+ +\S+  (.*)$")
MARKER = re.compile(r" \[(inlined|inferred|clipped|\+\d+ deeper)\]$")


def tree_calls(lines):
    calls = {}
    for line in lines:
        match = FRAME.match(line)
        if not match or line.lstrip().startswith("total"):
            continue
        name = match.group(1).strip()
        while MARKER.search(name):
            name = MARKER.sub("", name)
        if "  (" in name:
            name = name[:name.index("  (")]
        calls[name] = calls.get(name, 0) + 1
    return calls


def section_after(text, command):
    """The output lines of the first `command` (a line ending with it)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.rstrip().endswith(command):
            out = []
            for rest in lines[i + 1:]:
                if rest.startswith("(lldb) ") or rest.startswith("(gdb) "):
                    break
                out.append(rest)
            return out
    sys.exit("error: no output of '%s'" % command)


def json_line(text, prefix):
    found = [line for line in text.splitlines() if line.startswith(prefix)]
    if not found:
        sys.exit("error: no JSON line starting %s" % prefix)
    return json.loads(found[-1])


def check_top(text, truth):
    tree = tree_calls(section_after(text, "magic-trace report"))
    top = json_line(text, '{"all"')
    if top["all"]["more"]:
        return ["--top left %d functions out" % top["all"]["more"]], None
    problems = []
    listed = {f["name"]: f for f in top["all"]["functions"]}
    for name, calls in sorted(tree.items()):
        got = listed.get(name, {}).get("calls", 0)
        if got != calls:
            problems.append("%s: the tree lists %d frames, --top %d calls"
                            % (name, calls, got))
    for name, function in sorted(listed.items()):
        if function["calls"] and name not in tree:
            problems.append("%s: %d calls in --top, none in the tree"
                            % (name, function["calls"]))
    instructions = sum(f["instructions"] for f in listed.values())
    if truth and truth.instructions() != instructions:
        problems.append("instructions: ground truth %d, --top %d"
                        % (truth.instructions(), instructions))
    return problems, ("ok top: %d functions, calls equal the tree's, %d "
                      "instructions" % (len(listed), instructions))


def check_diff(args, text):
    diff = json_line(text, '{"first"')
    functions = diff["functions"]
    problems = []
    if not functions or functions[0]["name"] != args.largest:
        problems.append("the first function is %s, not %s"
                        % (functions[0]["name"] if functions else None,
                           args.largest))
    by_name = {f["name"]: f for f in functions}
    for expectation in args.calls:
        name, count = expectation.rsplit("=", 1)
        got = by_name.get(name, {}).get("delta", {}).get("calls")
        if got != int(count):
            problems.append("%s: calls changed by %s, not %s" % (name, got, count))
    return problems, "ok diff: %s first, %s" % (args.largest, ", ".join(args.calls))


class Truth:
    """The bundle's ground truth: each thread's instructions, and the chain
    of every distinct address (llvm-symbolizer-22's, innermost first; JIT
    code: [(name, "", 0)] from the perf map)."""

    def __init__(self, bundle, tid):
        pid, tids, self.modules = modules_of(bundle)
        self.sequences = {}
        for thread in tids:
            if tid and thread != tid:
                continue
            path = os.path.join(bundle, "groundtruth", "%d.insns" % thread)
            with open(path, "rb") as f:
                data = f.read()
            self.sequences[thread] = struct.unpack("<%dQ" % (len(data) // 8), data)
        self.chains = {}
        by_module = {}
        jit = jit_symbols(pid)
        for address in set(a for seq in self.sequences.values() for a in seq):
            for path, bias, segments in self.modules:
                if any(b <= address < e for b, e in segments):
                    by_module.setdefault((path, bias), []).append(address)
                    break
            else:
                self.chains[address] = [(name, "", 0) for begin, end, name in jit
                                        if begin <= address < end]
        for (path, bias), addresses in by_module.items():
            chains = symbolize(path, [a - bias for a in addresses])
            for address in addresses:
                self.chains[address] = chains.get(address - bias, [])

    def rows(self, function):
        """{row: (instructions, entries)} of FUNCTION's code."""
        row_of = {}
        for address, chain in self.chains.items():
            if any(names(function, f) for f, _, _ in chain):
                _, file, line = chain[0]
                # No line information: the row is the instruction.
                known = file and file != "??"
                row_of[address] = (file, line) if known else ("", address)
        counts, entries = {}, {}
        for seq in self.sequences.values():
            last = None
            for address in seq:
                row = row_of.get(address)
                if row is not None:
                    counts[row] = counts.get(row, 0) + 1
                    if row != last:
                        entries[row] = entries.get(row, 0) + 1
                last = row
        return {row: (counts[row], entries[row]) for row in counts}

    def instructions(self):
        return sum(len(seq) for seq in self.sequences.values())


def check_annotation(ours, truth, objdump):
    function = ours["function"]
    if ours.get("more"):
        return ["%s: the annotation left %d rows out (give --rows)"
                % (function, ours["more"])], None
    theirs = {}
    for line in ours["lines"]:
        key = (line["file"], line["line"]) if line["file"] else ("", line["address"])
        theirs[key] = (line["instructions"], line["entries"])
    expected = truth.rows(function)
    problems = []
    for row in sorted(set(expected) | set(theirs), key=str):
        want, got = expected.get(row, (0, 0)), theirs.get(row, (0, 0))
        if want != got:
            problems.append("%s %s: ground truth %d instructions %d entries, "
                            "report %d instructions %d entries"
                            % (function, row, want[0], want[1], got[0], got[1]))
    texts = ""
    if objdump and any("insns" in line for line in ours["lines"]):
        wrong, checked = check_texts(ours, truth.modules)
        problems += ["%s text %s" % (function, problem) for problem in wrong]
        texts = ", %d texts as objdump's" % checked
    return problems, "ok %s: %d rows, %d instructions%s" % (
        function, len(expected), sum(c for c, _ in expected.values()), texts)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("output")
    parser.add_argument("--bundle")
    parser.add_argument("--objdump", action="store_true")
    parser.add_argument("--tid", type=int, default=0)
    parser.add_argument("--largest")
    parser.add_argument("--calls", nargs="*", default=[])
    args = parser.parse_args()
    with open(args.output) as f:
        text = f.read()
    truth = Truth(args.bundle, args.tid) if args.bundle else None
    problems, lines = [], []
    # lldb-dap's console indents what a command printed.
    text = "\n".join(line.strip() if line.strip().startswith("{") else line
                     for line in text.splitlines())
    for line in text.splitlines():
        if line.startswith('{"calls"'):
            if truth is None:
                sys.exit("error: checking --annotate needs --bundle")
            wrong, ok = check_annotation(json.loads(line), truth, args.objdump)
            problems += wrong
            lines.append(ok)
    if any(line.startswith('{"all"') for line in text.splitlines()):
        wrong, ok = check_top(text, truth)
        problems += wrong
        lines.append(ok)
    if args.largest:
        wrong, ok = check_diff(args, text)
        problems += wrong
        lines.append(ok)
    for problem in problems:
        print("MISMATCH " + problem)
    if problems:
        sys.exit(1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
