#!/usr/bin/env python3
"""Edits every range cache file in DIR (RangeDiskCache.cpp's format):
`rename OLD NEW` changes a function's name in the frames; `damage` leaves
only the header and a line no reader accepts."""
import glob
import os
import sys

directory, action = sys.argv[1], sys.argv[2]
for path in glob.glob(os.path.join(directory, "*")):
    with open(path) as f:
        text = f.read()
    if action == "damage":
        text = "magic-trace ranges 1\nR\tzz\n"
    else:
        old, new = sys.argv[3], sys.argv[4]
        text = text.replace("\t%s\t" % old, "\t%s\t" % new)
    with open(path, "w") as f:
        f.write(text)
