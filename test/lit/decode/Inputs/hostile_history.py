#!/usr/bin/env python3
"""hostile_history.py KIND DIR: a bundle DIR whose code history has one of
issue 50's hostile sizes (KIND), around one thread's trace of a PSB+:

  versions  a code log of 1,000,000 versions of one page (16 bytes each)
  loads     a code log of 100,000 'L' records of one file
  loads-max the 4,096 of them a history may have
  zero      a code log whose code.bin is a link to /dev/zero
  fifo      a code log that is a FIFO
  symbols   1,000,000 JIT symbols in magic-trace.json

bounded.py then runs the decoder on it."""
import json
import os
import sys

PSB = bytes([0x02, 0x82] * 8) + bytes([0x02, 0x23])


def bundle(dir, extras):
    os.makedirs(os.path.join(dir, "threads"), exist_ok=True)
    open(os.path.join(dir, "threads", "1.intelpt_trace"), "wb").write(PSB)
    json.dump({"type": "intel-pt",
               "cpuInfo": {"vendor": "GenuineIntel", "family": 6,
                           "model": 85, "stepping": 4},
               "processes": [{"pid": 1, "triple": "x86_64-unknown-linux-gnu",
                              "threads": [{"tid": 1, "iptTrace":
                                           "threads/1.intelpt_trace"}],
                              "modules": []}],
               "tscPerfZeroConversion": {"timeMult": 1, "timeShift": 0,
                                         "timeZero": 0}},
              open(os.path.join(dir, "trace.json"), "w"))
    base = {"formatVersion": 1, "modules": [], "stop": [],
            "threads": [{"tid": 1, "wrapped": False}]}
    base.update(extras)
    with open(os.path.join(dir, "magic-trace.json"), "w") as f:
        json.dump(base, f)


def code_log(dir, records):
    log = os.path.join(dir, "log")
    os.makedirs(log, exist_ok=True)
    with open(os.path.join(log, "code.log"), "w") as f:
        f.writelines(records)
    bundle(dir, {"codeLog": {"dir": "log", "lastSeq": 0x7fffffff}})
    return log


def main():
    kind, dir = sys.argv[1], sys.argv[2]
    if kind == "versions":
        log = code_log(dir, ("B %d 0x4002a2e000 0x10 0x%x\n" % (i + 1, i * 16)
                             for i in range(1000000)))
        open(os.path.join(log, "code.bin"), "wb").write(b"\xc3" * 16000000)
    elif kind in ("loads", "loads-max"):
        count = 100000 if kind == "loads" else 4096
        code_log(dir, ("L %d 0x%x 0x%x 0x0 %s\n" % (i + 1, 0x10000000 + i * 0x10000,
                                                 0x10001000 + i * 0x10000, sys.executable)
                       for i in range(count)))
    elif kind == "zero":
        log = code_log(dir, ["B 1 0x4002a2e000 0x1000 0x0\n"])
        os.symlink("/dev/zero", os.path.join(log, "code.bin"))
    elif kind == "fifo":
        log = code_log(dir, [])
        os.remove(os.path.join(log, "code.log"))
        os.mkfifo(os.path.join(log, "code.log"))
    elif kind == "symbols":
        bundle(dir, {"codeHistory": {"changes": [], "symbols": []}})
        # Written as text: a million dicts through json.dump take seconds.
        path = os.path.join(dir, "magic-trace.json")
        text = open(path).read()
        symbols = ",".join('{"address":"0x%x","size":"0x10","name":"f%d"}'
                           % (0x1000 + 16 * i, i) for i in range(1000000))
        open(path, "w").write(text.replace('"symbols": []',
                                           '"symbols": [' + symbols + ']'))
    else:
        sys.exit("unknown kind " + kind)


if __name__ == "__main__":
    main()
