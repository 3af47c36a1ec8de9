#!/usr/bin/env python3
"""Checks that a bundle's first traced instruction is the executable's ELF
entry point, read with llvm-readelf (not our ELF reader).

  check_entry.py BUNDLE EXECUTABLE
"""
import json
import os
import re
import struct
import subprocess
import sys


def main():
    bundle, exe = sys.argv[1], sys.argv[2]
    header = subprocess.run(["llvm-readelf", "-h", "-l", exe],
                            capture_output=True, text=True, check=True).stdout
    entry = int(re.search(r"Entry point address:\s+(0x[0-9a-f]+)", header).group(1), 16)
    loads = [int(m.group(1), 16) for m in
             re.finditer(r"^\s+LOAD\s+0x[0-9a-f]+\s+(0x[0-9a-f]+)", header, re.M)]
    with open(os.path.join(bundle, "trace.json")) as f:
        trace = json.load(f)
    real = os.path.realpath(exe)
    module = next(m for m in trace["processes"][0]["modules"]
                  if os.path.realpath(m["systemPath"]) == real)
    load = int(module["loadAddress"], 0)
    expected = load + entry - (min(loads) & ~0xfff)
    tid = trace["processes"][0]["threads"][0]["tid"]
    with open(os.path.join(bundle, "groundtruth", f"{tid}.insns"), "rb") as f:
        first = struct.unpack("<Q", f.read(8))[0]
    verdict = "OK" if first == expected else "MISMATCH"
    print(f"{verdict} first 0x{first:x} entry 0x{expected:x}")


if __name__ == "__main__":
    main()
