#!/usr/bin/env python3
"""Writes the jitdump a JIT would have written on the CPU whose trace the
replaying kernel plays (test/support/ReplayKernel.cpp), for jitdump.test.

  replay_jitdump.py RECORDING PID DIR [--monotonic]

On real hardware a JIT run with JITDUMP_USE_ARCH_TIMESTAMP=1 stamps each
CODE_LOAD with the TSC as it writes the code, and the PT's timing packets
carry the same TSC. Under the replaying kernel the PT is the QEMU
recording's, on the recording's virtual clock, which a native run cannot
read; so the loads are taken from the recording's own log of each version
of the code (magic-trace.json's codeHistory, code.bin) and stamped on its
clock: a version the thread first ran after a mark (its imageMarks) a cycle
before the PSB the recorder wrote there, a first version without a mark
just before the thread's first PSB (the code was written before the trace
began).

Each version's functions are its runs of bytes other than the 0xcc fill; a
later version loads only the functions whose bytes changed. A function at
page offset O is named "jit_fn_O" in every version. Writes DIR/jit-PID.dump
(perf's tools/perf/Documentation/jitdump-specification.txt: a 40-byte
header with JITDUMP_FLAGS_ARCH_TIMESTAMP, then one CODE_LOAD record per
function) and prints one line per load: "load NAME ADDRESS SIZE TSC".
With --monotonic the header says the times are the monotonic clock (flags
0), as a JIT writes them without JITDUMP_USE_ARCH_TIMESTAMP.
"""
import json
import os
import struct
import sys

MAGIC = 0x4A695444
ARCH_TIMESTAMP = 1
CODE_LOAD = 0
EM_X86_64 = 62
PSB = b"\x02\x82" * 8


def psb_tsc(trace, offset):
    """The TSC in the PSB+ at `offset` (Intel SDM vol. 3C, 32.4.2)."""
    if trace[offset:offset + 16] != PSB:
        sys.exit(f"no PSB at offset {offset}")
    at = offset + 16
    while at < len(trace):
        b = trace[at]
        if b == 0x00:  # PAD
            at += 1
        elif b == 0x19:  # TSC: 7 bytes
            return int.from_bytes(trace[at + 1:at + 8], "little")
        elif trace[at:at + 2] == b"\x02\x23":  # PSBEND
            break
        elif trace[at:at + 2] == b"\x02\x73":  # TMA
            at += 7
        elif trace[at:at + 2] == b"\x02\x03":  # CBR
            at += 4
        elif b == 0x99:  # MODE
            at += 2
        elif b & 0x1F == 0x1D:  # FUP
            at += 1 + [0, 2, 4, 6, 6, 0, 8, 0][b >> 5]
        else:
            break
    sys.exit(f"no TSC packet in the PSB+ at offset {offset}")


def functions(page):
    """(offset, bytes) of each run of bytes other than the 0xcc fill."""
    runs, start = [], None
    for i, b in enumerate(page + b"\xcc"):
        if b != 0xCC and start is None:
            start = i
        elif b == 0xCC and start is not None:
            runs.append((start, page[start:i]))
            start = None
    return runs


def main():
    recording, pid, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    flags = 0 if "--monotonic" in sys.argv[4:] else ARCH_TIMESTAMP
    meta = json.load(open(os.path.join(recording, "magic-trace.json")))
    code = open(os.path.join(recording, "code.bin"), "rb").read()
    layout = json.load(open(os.path.join(recording, "trace.json")))
    threads = meta["threads"]
    if len(threads) != 1:
        sys.exit(f"{len(threads)} threads: this tool reads one")
    tid = threads[0]["tid"]
    first = layout["processes"][0]["threads"][0]
    trace = open(os.path.join(recording, first["iptTrace"]), "rb").read()
    marks = {seq: offset for offset, seq in threads[0].get("imageMarks", [])}

    loads, previous = [], {}
    for change in meta["codeHistory"]["changes"]:
        if change["kind"] != "bytes":
            continue
        address = int(change["address"], 16)
        at, size = int(change["codeOffset"], 16), int(change["size"], 16)
        page = code[at:at + size]
        if change["seq"] in marks:
            tsc = psb_tsc(trace, marks[change["seq"]]) - 1
        elif address not in previous:
            tsc = psb_tsc(trace, 0) - 1
        else:
            sys.exit(f"version {change['seq']} at {address:#x} never ran")
        old = dict(functions(previous.get(address, b"")))
        for offset, body in functions(page):
            if old.get(offset) != body:
                loads.append((tsc, f"jit_fn_{offset}", address + offset, body))
        previous[address] = page

    with open(os.path.join(out, f"jit-{pid}.dump"), "wb") as f:
        f.write(
            struct.pack("<IIIIIIQQ", MAGIC, 1, 40, EM_X86_64, 0, pid, 0,
                        flags))
        for index, (tsc, name, address, body) in enumerate(loads):
            name_bytes = name.encode() + b"\0"
            size = 16 + 40 + len(name_bytes) + len(body)
            f.write(struct.pack("<IIQ", CODE_LOAD, size, tsc))
            f.write(
                struct.pack("<IIQQQQ", pid, pid, address, address, len(body),
                            index))
            f.write(name_bytes + body)
            print(f"load {name} {address:#x} {len(body)} {tsc}")


if __name__ == "__main__":
    main()
