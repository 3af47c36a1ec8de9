"""Adds 1 to instruction INDEX of every groundtruth/*.insns (checker.test)."""
import glob
import struct
import sys

directory, index = sys.argv[1], int(sys.argv[2])
for path in glob.glob(directory + "/*.insns"):
    with open(path, "r+b") as f:
        f.seek(index * 8)
        (address,) = struct.unpack("<Q", f.read(8))
        f.seek(index * 8)
        f.write(struct.pack("<Q", address + 1))
