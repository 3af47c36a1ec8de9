"""Writes a small Fuchsia trace word by word from the spec, good or broken.

usage: make_fxt.py good|dangling|truncated|stair OUT
"""
import struct
import sys


def text_words(text):
    data = text.encode()
    data += b"\0" * (-len(data) % 8)
    return [struct.unpack_from("<Q", data, i)[0] for i in range(0, len(data), 8)]


def trace(kind):
    w = [0x0016547846040010]                 # Magic number record.
    w += [1 | 2 << 4, 1000000000]            # Initialization: 1e9 ticks/s.
    w += [2 | 2 << 4 | 1 << 16 | 4 << 32]    # String record: index 1, 4 bytes.
    w += text_words("main")
    w += [3 | 3 << 4 | 1 << 16, 10, 11]      # Thread record 1: pid 10, tid 11.
    name = 9 if kind == "dangling" else 1    # Index 9 is never bound.
    # Duration complete event (4), 3 words, thread 1, no category, name ref.
    w += [4 | 3 << 4 | 4 << 16 | 1 << 24 | name << 48, 100, 250]
    if kind == "truncated":
        w = w[:-1]                           # The event claims 3 words, 2 remain.
    if kind == "stair":
        # Two zero-length slices at 250, where main ends: the file nests
        # them side by side, Perfetto stacks the second on the first.
        w += [4 | 3 << 4 | 4 << 16 | 1 << 24 | 1 << 48, 250, 250]
        w += [4 | 3 << 4 | 4 << 16 | 1 << 24 | 1 << 48, 250, 250]
    return b"".join(struct.pack("<Q", x) for x in w)


with open(sys.argv[2], "wb") as out:
    out.write(trace(sys.argv[1]))
