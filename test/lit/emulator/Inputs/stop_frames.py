"""Prints a thread's stop frames of a bundle as llvm-symbolizer input lines:
"<module path> 0x<file address>" (stop.test).

  stop_frames.py DIR [triggered|other]: the thread that hit --stop (default)
  or the first other live thread.

Return addresses (every frame but the PC) point after their call, so the
address looked up is one byte earlier, inside the call.
"""
import json
import sys

with open(sys.argv[1] + "/magic-trace.json") as f:
    extra = json.load(f)
want_triggered = len(sys.argv) < 3 or sys.argv[2] == "triggered"
stop = next(s for s in extra["stop"] if s["triggered"] == want_triggered)
for depth, frame in enumerate(int(a, 16) for a in stop["frames"]):
    address = frame - (1 if depth else 0)
    for module in extra["modules"]:
        load = int(module["loadAddress"], 16)
        if any(int(s["address"], 16) <= address < int(s["address"], 16) +
               int(s["size"], 16) for s in module["segments"]):
            # The test programs and libc link at address 0 (PIE / DSO).
            print(f"{module['systemPath']} {address - load:#x}")
            break
    else:
        print(f"unmapped {frame:#x}")
