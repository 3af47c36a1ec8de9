#!/usr/bin/env python3
"""The reference for the ARCUS `_start` quirk: a copy of a bundle whose PT
has each "TIP.PGE X, TIP.PGD without IP, TIP.PGE X" pair padded out, so that
libipt's continuous decode (magic-trace-ref-decode) reads it to the end.

Usage: pad_start_quirk.py BUNDLE OUT_DIR

Written from the packet layouts in the Intel SDM (vol. 3C, "Packet
Definitions"), by byte pattern, independently of the decoder's own padding:
TIP.PGE with a 6-byte sign-extended IP is 0x71 + 6 bytes (as every IP of these
traces is), TIP.PGD without IP is 0x01; between them only PAD (0x00), CBR
(02 03 + 2 bytes) and MODE (0x99 + 1 byte) may come. Prints the number of
pairs padded.
"""
import os
import re
import shutil
import sys

NEUTRAL = rb"(?:\x00|\x02\x03..|\x99.)*"
PAIR = re.compile(rb"(\x71(.{6}))" + NEUTRAL + rb"(\x01)" + NEUTRAL + rb"\x71\2",
                  re.DOTALL)

bundle, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
for name in os.listdir(bundle):
    if name != "1.trace":
        shutil.copy(os.path.join(bundle, name), os.path.join(out, name))
data = bytearray(open(os.path.join(bundle, "1.trace"), "rb").read())
pairs = 0
at = 0
while True:
    m = PAIR.search(bytes(data), at)
    if not m:
        break
    data[m.start(1):m.end(1)] = b"\x00" * (m.end(1) - m.start(1))
    data[m.start(3):m.end(3)] = b"\x00"
    pairs += 1
    at = m.start(3) + 1
open(os.path.join(out, "1.trace"), "wb").write(data)
print("padded %d pairs" % pairs)
