#!/usr/bin/env python3
"""Damages a copy of a trace bundle for bad-input tests.

  edit_bundle.py SRC DST --module-path OLD_SUFFIX NEW   point a module elsewhere
  edit_bundle.py SRC DST --module-uuid OLD_SUFFIX UUID  give it another build-id
  edit_bundle.py SRC DST --random-trace SEED            PT bytes -> random
  edit_bundle.py SRC DST --zero-trace N                 PT bytes -> N zero bytes
  edit_bundle.py SRC DST --truncate-trace FRACTION      keep the first part
"""
import argparse
import glob
import json
import os
import random
import shutil


def edit_modules(dst, suffix, key, value):
    path = os.path.join(dst, "trace.json")
    with open(path) as f:
        trace = json.load(f)
    found = False
    for process in trace["processes"]:
        for module in process.get("modules", []):
            if module["systemPath"].endswith(suffix):
                module[key] = value
                found = True
    if not found:
        raise SystemExit("no module ends with " + suffix)
    with open(path, "w") as f:
        json.dump(trace, f, indent=2)
    # Our side file repeats the path next to the segments.
    side = os.path.join(dst, "magic-trace.json")
    if key == "systemPath" and os.path.exists(side):
        with open(side) as f:
            meta = json.load(f)
        for module in meta.get("modules", []):
            for field in ("path", "systemPath"):
                if module.get(field, "").endswith(suffix):
                    module[field] = value
        with open(side, "w") as f:
            json.dump(meta, f, indent=2)


def edit_traces(dst, make):
    for path in glob.glob(os.path.join(dst, "threads", "*.intelpt_trace")):
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(make(data))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("src")
    parser.add_argument("dst")
    parser.add_argument("--module-path", nargs=2)
    parser.add_argument("--module-uuid", nargs=2)
    parser.add_argument("--random-trace", type=int)
    parser.add_argument("--zero-trace", type=int)
    parser.add_argument("--truncate-trace", type=float)
    args = parser.parse_args()
    shutil.rmtree(args.dst, ignore_errors=True)
    shutil.copytree(args.src, args.dst)
    if args.module_path:
        edit_modules(args.dst, args.module_path[0], "systemPath",
                     args.module_path[1])
    if args.module_uuid:
        edit_modules(args.dst, args.module_uuid[0], "uuid",
                     args.module_uuid[1])
    if args.random_trace is not None:
        rng = random.Random(args.random_trace)
        edit_traces(args.dst,
                    lambda d: bytes(rng.randrange(256) for _ in range(len(d))))
    if args.zero_trace is not None:
        edit_traces(args.dst, lambda d: bytes(args.zero_trace))
    if args.truncate_trace is not None:
        edit_traces(args.dst,
                    lambda d: d[:int(len(d) * args.truncate_trace)])


if __name__ == "__main__":
    main()
