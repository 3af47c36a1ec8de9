#!/usr/bin/env python3
"""Checks our perf.data reader against perf's own view of the same file.

  compare_sideband.py PERF_SCRIPT_OUT BUILDID_LIST OURS
      PERF_SCRIPT_OUT: `perf script --show-mmap-events` (its MMAP2 and COMM
      lines); BUILDID_LIST: `perf buildid-list`; OURS: `magic-trace-perfdata
      FILE --sideband`. Every executable MMAP2 of the process must be a
      segment of our module of that path (address, size, offset), every
      build-id perf lists for a module must be ours, and our process name
      must be the last COMM perf shows for the process. Prints "OK ..."
      lines, or "MISMATCH ...".
"""
import re
import sys

MMAP2 = re.compile(r"PERF_RECORD_MMAP2 (\d+)/(\d+): \[(0x[0-9a-f]+)\((0x[0-9a-f]+)\) @ (0x[0-9a-f]+|0) .*\]: (\S+) (.*)$")
COMM = re.compile(r"PERF_RECORD_COMM(?: exec)?: (.*):(\d+)/(\d+)$")


def main():
    perf_script, buildids, ours = sys.argv[1:4]
    mine = {"modules": {}, "process": None, "pid": None}
    module = None
    for line in open(ours):
        parts = line.split()
        if parts[0] == "process":
            mine["pid"] = int(parts[1])
            mine["process"] = line.split('"')[1]
        elif parts[0] == "module":
            module = parts[1]
            mine["modules"][module] = {"build-id": parts[3], "segments": set()}
        elif parts[0] == "segment":
            mine["modules"][module]["segments"].add(
                (int(parts[1], 16), int(parts[3], 16), int(parts[5], 16)))
    ok = True
    mmaps = 0
    last_comm = None
    for line in open(perf_script):
        m = MMAP2.search(line)
        if m and int(m.group(1)) == mine["pid"] and "x" in m.group(6):
            mmaps += 1
            seg = (int(m.group(3), 16), int(m.group(4), 16), int(m.group(5), 16))
            path = m.group(7).strip()
            if seg not in mine["modules"].get(path, {}).get("segments", ()):
                ok = False
                print("MISMATCH mmap %s %s not ours" % (path, seg))
        m = COMM.search(line.strip())
        if m and int(m.group(2)) == mine["pid"]:
            last_comm = m.group(1)
    print("OK %d executable mmaps" % mmaps if ok and mmaps else "MISMATCH no mmaps")
    ids = 0
    for line in open(buildids):
        parts = line.split(None, 1)
        if len(parts) != 2 or parts[1].strip() not in mine["modules"]:
            continue
        ids += 1
        if mine["modules"][parts[1].strip()]["build-id"] != parts[0]:
            print("MISMATCH build-id of %s" % parts[1].strip())
            ok = False
    print("OK %d build-ids" % ids if ids else "MISMATCH no build-ids")
    if last_comm == mine["process"]:
        print("OK process %s" % last_comm)
    else:
        print("MISMATCH process: perf %s, ours %s" % (last_comm, mine["process"]))


if __name__ == "__main__":
    main()
