#!/usr/bin/env python3
"""Compares Perfetto's nesting of a .fxt with the text call tree.

Usage: perfetto_vs_tree.py PERFETTO_TREE TREE_TXT

PERFETTO_TREE is `magic-trace-fxt-check --perfetto-tree FILE.fxt` (one line
per complete event, "TID DEPTH NAME", DEPTH as Perfetto's slice tracker nests
it); TREE_TXT is the same model written as a text tree (`-o FILE.txt`). Every
frame row of the tree must be the next slice of its thread, at the same depth
(two spaces of indentation a level) and with the same name; nothing may be
left over. Prints "same tree: N rows, depth D" or the first difference.
"""
import re
import sys

ROW = re.compile(r"^ *\S+ +\S+  ( *)(.*)$")


def tree_rows(path):
    rows = {}
    tid = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            header = re.match(r"^thread (\d+)", line)
            if header:
                tid = int(header.group(1))
                rows.setdefault(tid, [])
                continue
            if tid is None or line.startswith("  -- "):
                continue
            if line.split() == ["total", "self", "frame"]:
                continue
            match = ROW.match(line)
            if not match:
                continue
            rows[tid].append((len(match.group(1)) // 2, match.group(2)))
    return rows


def slices(path):
    rows = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            tid, depth, name = line.rstrip("\n").split(" ", 2)
            rows.setdefault(int(tid), []).append((int(depth), name))
    return rows


def main():
    perfetto = slices(sys.argv[1])
    tree = tree_rows(sys.argv[2])
    total = 0
    deepest = 0
    for tid in sorted(set(perfetto) | set(tree)):
        got = perfetto.get(tid, [])
        want = tree.get(tid, [])
        for i, (depth, text) in enumerate(want):
            if i >= len(got):
                print(f"thread {tid}: the tree has row {i + 1} ({text!r}), "
                      f"Perfetto has only {len(got)} slices")
                return 1
            pdepth, pname = got[i]
            named = text == pname or text.startswith((pname + "  (",
                                                      pname + " ["))
            if pdepth != depth or not named:
                print(f"thread {tid} row {i + 1}: tree depth {depth} {text!r}, "
                      f"Perfetto depth {pdepth} {pname!r}")
                return 1
            deepest = max(deepest, depth)
        if len(got) != len(want):
            print(f"thread {tid}: Perfetto has {len(got)} slices, the tree "
                  f"{len(want)} rows")
            return 1
        total += len(want)
    print(f"same tree: {total} rows, depth {deepest + 1 if total else 0}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
