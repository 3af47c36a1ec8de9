#!/usr/bin/env python3
"""Copies a trace bundle and edits its trace.json, for schema tests.

  edit_json.py SRC DST [--set PATH JSON]... [--rename PATH NEWKEY]...

PATH is dotted, with list indexes: cpuInfo.family, processes.0.threads.0.
--set stores the JSON value (a string needs quotes: '"6"'); --rename moves a
key to a new name in the same object.
"""
import argparse
import json
import os
import shutil


def walk(root, path):
    *parents, last = path.split(".")
    node = root
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node, (int(last) if isinstance(node, list) else last)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("src")
    parser.add_argument("dst")
    parser.add_argument("--set", nargs=2, action="append", default=[])
    parser.add_argument("--rename", nargs=2, action="append", default=[])
    args = parser.parse_args()
    shutil.rmtree(args.dst, ignore_errors=True)
    shutil.copytree(args.src, args.dst)
    path = os.path.join(args.dst, "trace.json")
    with open(path) as f:
        trace = json.load(f)
    for key, value in args.set:
        node, last = walk(trace, key)
        node[last] = json.loads(value)
    for key, new in args.rename:
        node, last = walk(trace, key)
        node[new] = node.pop(last)
    with open(path, "w") as f:
        json.dump(trace, f, indent=2)


if __name__ == "__main__":
    main()
