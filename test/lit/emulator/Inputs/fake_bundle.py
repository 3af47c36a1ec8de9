"""Writes a tiny bundle description and ground truth for checker.test.

  fake_bundle.py DIR [LOST]: thread 7 ran 0x1000, 0x1004, 0x1008, 0x100c;
  LOST ("FIRST COUNT", as in a recorder's <tid>.lost) marks a loss.
"""
import json
import os
import struct
import sys

directory = sys.argv[1]
os.makedirs(os.path.join(directory, "groundtruth"), exist_ok=True)
with open(os.path.join(directory, "trace.json"), "w") as f:
    json.dump({"type": "intel-pt", "processes": [{"pid": 7, "threads": [{"tid": 7}],
                                                  "modules": []}]}, f)
with open(os.path.join(directory, "groundtruth", "7.insns"), "wb") as f:
    f.write(struct.pack("<4Q", 0x1000, 0x1004, 0x1008, 0x100C))
with open(os.path.join(directory, "groundtruth", "7.lost"), "w") as f:
    if len(sys.argv) > 2:
        f.write(sys.argv[2] + "\n")
