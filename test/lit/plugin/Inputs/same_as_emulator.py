"""Compares what the plugin's stepper saw the triggered thread execute with
what the ptrace emulator (magic-trace-emulate, an independent stepper) saw
the triggered thread of its own run execute: the same addresses in the same
order (both run the program with ASLR off).

  same_as_emulator.py PLUGIN_BUNDLE EMULATOR_BUNDLE

Each bundle's magic-trace.json names the triggered thread (stop context);
its groundtruth/<tid>.insns lists every executed address. Prints one line,
"triggered thread: N instructions, the same as the emulator's", or the first
difference, and exits 1 on a difference.
"""
import json
import os
import struct
import sys


def triggered_insns(bundle):
    with open(os.path.join(bundle, "magic-trace.json")) as f:
        facts = json.load(f)
    tids = [stop["tid"] for stop in facts["stop"] if stop.get("triggered")]
    if len(tids) != 1:
        sys.exit("{}: {} triggered threads".format(bundle, len(tids)))
    path = os.path.join(bundle, "groundtruth", "{}.insns".format(tids[0]))
    with open(path, "rb") as f:
        data = f.read()
    return list(struct.unpack("<{}Q".format(len(data) // 8), data))


plugin = triggered_insns(sys.argv[1])
emulator = triggered_insns(sys.argv[2])
for index, (ours, theirs) in enumerate(zip(plugin, emulator)):
    if ours != theirs:
        print("triggered thread: instruction {} is {:#x}, the emulator's "
              "{:#x}".format(index, ours, theirs))
        sys.exit(1)
if len(plugin) != len(emulator):
    print("triggered thread: {} instructions, the emulator's {}".format(
        len(plugin), len(emulator)))
    sys.exit(1)
print("triggered thread: {} instructions, the same as the emulator's".format(
    len(plugin)))
