#!/usr/bin/env python3
"""Makes the committed seed corpora of the code-history fuzz targets
(docs/fuzzing.md) from real recordings:

  make_seeds.py OUT RECORDING...

Each RECORDING is a directory: a QEMU ring directory (code.log, code.bin;
from `magic-trace-emulate --engine qemu --ring-dir DIR`), a bundle
(magic-trace.json, code.bin), or a JIT's files (perf-*.map, jit-*.dump).
Seeds go to OUT/<target>/seed-<recording>-<n>, cut to the target's largest
input (scripts/fuzz.sh's max_len)."""
import json
import os
import struct
import sys

MAX = {"qemu-code-log": 131072, "bundle-history": 65536,
       "perf-map": 16384, "jitdump": 65536}


def write(out, target, name, data):
    os.makedirs(os.path.join(out, target), exist_ok=True)
    with open(os.path.join(out, target, "seed-" + name), "wb") as f:
        f.write(data[:MAX[target]])


def lines_within(text, limit):
    """Whole lines of text, at most limit bytes."""
    cut = text[:limit]
    return cut[:cut.rfind(b"\n") + 1] if b"\n" in cut else cut


def jitdump_within(data, limit):
    """The header and the whole records that fit in limit bytes."""
    header = struct.unpack_from("<I", data, 8)[0]
    at = header
    while at + 16 <= len(data):
        total = struct.unpack_from("<I", data, at + 4)[0]
        if at + total > limit:
            break
        at += total
    return data[:at]


def bundle_seed(path):
    """magic-trace.json for the fuzz target's one thread (tid 1), NUL,
    code.bin."""
    extras = json.load(open(os.path.join(path, "magic-trace.json")))
    for thread in extras.get("threads", [])[:1]:
        thread["tid"] = 1
        # Marks within the target's 18-byte trace.
        thread["imageMarks"] = [[0, m[1]] for m in thread.get("imageMarks", [])][-1:]
    extras["threads"] = extras.get("threads", [])[:1]
    for stop in extras.get("stop", [])[:1]:
        stop["tid"] = 1
    extras["stop"] = extras.get("stop", [])[:1]
    history = extras.get("codeHistory", {})
    history["symbols"] = history.get("symbols", [])[:64]
    text = json.dumps(extras, separators=(",", ":")).encode()
    binary = open(os.path.join(path, "code.bin"), "rb").read()
    return text + b"\0" + binary[:MAX["bundle-history"] - len(text) - 1]


def main():
    out = sys.argv[1]
    for path in sys.argv[2:]:
        name = os.path.basename(os.path.normpath(path))
        files = os.listdir(path)
        if "code.log" in files:
            log = open(os.path.join(path, "code.log"), "rb").read()
            binary = open(os.path.join(path, "code.bin"), "rb").read()
            log = lines_within(log, MAX["qemu-code-log"] // 4)
            write(out, "qemu-code-log", name,
                  log + b"\0" + binary[:MAX["qemu-code-log"] - len(log) - 1])
        if "magic-trace.json" in files and "code.bin" in files:
            write(out, "bundle-history", name, bundle_seed(path))
        for n, file in enumerate(sorted(f for f in files if f.startswith("perf-"))):
            text = open(os.path.join(path, file), "rb").read()
            write(out, "perf-map", "%s-%d" % (name, n),
                  lines_within(text, MAX["perf-map"]))
        for n, file in enumerate(sorted(f for f in files if f.startswith("jit-"))):
            data = open(os.path.join(path, file), "rb").read()
            write(out, "jitdump", "%s-%d" % (name, n),
                  jitdump_within(data, MAX["jitdump"]))


if __name__ == "__main__":
    main()
