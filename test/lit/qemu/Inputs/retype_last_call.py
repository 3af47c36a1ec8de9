"""Makes the last 'call' event of a ground truth's events file a 'jump'.

Usage: retype_last_call.py GROUNDTRUTH_DIR (the one thread's .events file in
it is rewritten). A test's way to break a truth on purpose and see that
magic-trace-reftree notices.
"""
import glob
import sys

(path,) = glob.glob(sys.argv[1] + "/*.events")
with open(path) as f:
    lines = f.readlines()
for i in range(len(lines) - 1, -1, -1):
    fields = lines[i].split()
    if len(fields) == 4 and fields[1] == "call":
        fields[1] = "jump"
        lines[i] = " ".join(fields) + "\n"
        break
else:
    sys.exit("no call event in " + path)
with open(path, "w") as f:
    f.writelines(lines)
