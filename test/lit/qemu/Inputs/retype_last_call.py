"""Makes a late 'call' event of a ground truth's events file a 'jump'.

Usage: retype_last_call.py GROUNDTRUTH_DIR (the one thread's .events file in
it is rewritten). The call retyped is the last one at least 1000
instructions before the truth's end: a call that is the last instruction
only opens the frame at the stop, which the plain tree leaves out. A test's
way to break a truth on purpose and see that magic-trace-reftree notices.
"""
import glob
import os
import sys

(path,) = glob.glob(sys.argv[1] + "/*.events")
(insns,) = glob.glob(sys.argv[1] + "/*.insns")
last = os.path.getsize(insns) // 8 - 1000
with open(path) as f:
    lines = f.readlines()
for i in range(len(lines) - 1, -1, -1):
    fields = lines[i].split()
    if len(fields) == 4 and fields[1] == "call" and int(fields[0]) <= last:
        fields[1] = "jump"
        lines[i] = " ".join(fields) + "\n"
        break
else:
    sys.exit("no call event early enough in " + path)
with open(path, "w") as f:
    f.writelines(lines)
