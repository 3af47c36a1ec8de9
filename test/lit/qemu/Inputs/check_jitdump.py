#!/usr/bin/env python3
"""Checks the JIT code a bundle's code history captured against the JIT's own
record of it, a jitdump (perf's jitdump-specification.txt, read here with a
parser of its own): every CODE_LOAD whose bytes lie inside captured code must
equal, byte for byte, one captured version of that code.

  check_jitdump.py BUNDLE JIT-PID.DUMP NAME-SUBSTRING

Prints "captured N of M code loads, all equal" and whether a load whose name
contains NAME-SUBSTRING is among them; "MISMATCH ..." otherwise.
"""
import json
import os
import struct
import sys


def loads(path):
    data = open(path, "rb").read()
    magic, _, header_size = struct.unpack_from("<III", data, 0)
    if magic != 0x4A695444:
        sys.exit("not a jitdump: " + path)
    at = header_size
    while at + 16 <= len(data):
        kind, size, _ = struct.unpack_from("<IIQ", data, at)
        if size < 16 or at + size > len(data):
            break
        if kind == 0:  # JIT_CODE_LOAD
            _, _, _, address, code_size, _ = struct.unpack_from(
                "<IIQQQQ", data, at + 16)
            name_end = data.index(b"\0", at + 56)
            name = data[at + 56:name_end].decode(errors="replace")
            code = data[name_end + 1:name_end + 1 + code_size]
            yield address, code, name
        at += size


def main():
    bundle, dump, wanted = sys.argv[1:4]
    extras = json.load(open(os.path.join(bundle, "magic-trace.json")))
    blob = open(os.path.join(bundle, "code.bin"), "rb").read()
    versions = []
    for change in extras["codeHistory"]["changes"]:
        if change["kind"] == "bytes":
            start = int(change["address"], 16)
            offset = int(change["codeOffset"], 16)
            size = int(change["size"], 16)
            versions.append((start, blob[offset:offset + size]))
    total = captured = 0
    found = False
    for address, code, name in loads(dump):
        total += 1
        inside = [bytes_[address - start:address - start + len(code)]
                  for start, bytes_ in versions
                  if start <= address and address + len(code) <= start + len(bytes_)]
        if not inside or not code:
            continue
        captured += 1
        if code not in inside:
            print("MISMATCH %s at %#x: no captured version equals the "
                  "jitdump's %d bytes" % (name, address, len(code)))
            return 1
        found |= wanted in name
    print("captured %d of %d code loads, all equal" % (captured, total))
    print("%s: %s" % (wanted, "captured" if found else "NOT captured"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
