#!/usr/bin/env python3
"""Writes damaged copies of a good Intel PT perf.data, one per kind of bad
file the reader must refuse with a one-line error:

  damage_perf_data.py GOOD.data OUTDIR

  truncated.data    cut in the middle of the data section
  header-only.data  only the first 60 bytes of the file header
  magic.data        "PERFILE2" became "PERFILE1"
  no-info.data      the AUXTRACE_INFO record retyped to FINISHED_ROUND (68)
                    and every AUXTRACE to 68 as well: no PT at all
  aux-no-info.data  only the AUXTRACE_INFO retyped: AUX data without info
  attr-type.data    the attr's type no longer the PMU type AUXTRACE_INFO says
  per-cpu.data      AUXTRACE_INFO says per-CPU mmaps
  not-pt.data       AUXTRACE_INFO of type 3 (CoreSight ETM)
  short-info.data   AUXTRACE_INFO with nine private words
  record-size.data  a record whose size runs past the data section
"""
import os
import struct
import sys


def records(data):
    offset, size = struct.unpack_from("<QQ", data, 40)
    at = offset
    while at < offset + size:
        rtype, misc, rsize = struct.unpack_from("<IHH", data, at)
        yield at, rtype, rsize
        at += rsize
        if rtype == 71:  # AUXTRACE: its trace follows the record
            at += struct.unpack_from("<Q", data, at - rsize + 8)[0]


def main():
    good = open(sys.argv[1], "rb").read()
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)

    def write(name, data):
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes(data))

    recs = list(records(good))
    info = next(at for at, t, _ in recs if t == 70)
    aux = [at for at, t, _ in recs if t == 71]
    data_offset, data_size = struct.unpack_from("<QQ", good, 40)

    write("truncated.data", good[:data_offset + data_size // 2])
    write("header-only.data", good[:60])
    bad = bytearray(good)
    bad[7] = ord("1")
    write("magic.data", bad)

    bad = bytearray(good)
    struct.pack_into("<I", bad, info, 68)
    write("aux-no-info.data", bad)
    for at in aux:
        # Retype the AUXTRACE record and cover its trace with the size: the
        # framing stays valid (a FINISHED_ROUND of the same total length
        # cannot be longer than 64 KiB, so only small traces are used).
        total = struct.unpack_from("<H", bad, at + 6)[0] + struct.unpack_from("<Q", bad, at + 8)[0]
        assert total < 65536, "use a small recording"
        struct.pack_into("<IHH", bad, at, 68, 0, total)
    write("no-info.data", bad)

    attrs = struct.unpack_from("<Q", good, 24)[0]
    bad = bytearray(good)
    struct.pack_into("<I", bad, attrs, 99)
    write("attr-type.data", bad)

    priv = info + 16  # header, type, reserved
    bad = bytearray(good)
    struct.pack_into("<Q", bad, priv + 9 * 8, 1)
    write("per-cpu.data", bad)
    bad = bytearray(good)
    struct.pack_into("<I", bad, info + 8, 3)
    write("not-pt.data", bad)

    # Nine private words, one fewer than perf accepts; the rest of the record
    # becomes a FINISHED_ROUND so the framing stays valid.
    bad = bytearray(good)
    size = struct.unpack_from("<H", bad, info + 6)[0]
    short = 16 + 9 * 8
    struct.pack_into("<H", bad, info + 6, short)
    struct.pack_into("<IHH", bad, info + short, 68, 0, size - short)
    write("short-info.data", bad)

    bad = bytearray(good)
    last = recs[-1][0]
    struct.pack_into("<H", bad, last + 6, 0xfff8)
    write("record-size.data", bad)


if __name__ == "__main__":
    main()
