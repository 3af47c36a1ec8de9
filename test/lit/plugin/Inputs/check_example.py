"""Checks example_session.py's JSON on hello.c: leaf is first called from
middle, called from main (hello.c), so the snapshot holds one call into
middle, its trace file validates, and the report names main and middle and
ends with leaf, innermost under middle: the thread stopped at leaf's entry
(the trigger), right after middle's call into it."""
import json
import re
import subprocess
import sys

result = json.load(open(sys.argv[1]))
snapshot = result["snapshot"]
assert snapshot["number"] == 1, snapshot
assert snapshot["errors"] == 0, snapshot
assert snapshot["calls"] >= 1, snapshot
assert snapshot["path"] == "example-1.fxt", snapshot
assert "main" in result["report"] and "middle" in result["report"], result["report"]
# Report lines: "TOTAL SELF <indentation>NAME ...", two columns per level.
frames = []
for line in result["report"].splitlines():
    match = re.match(r"^\s*[0-9.]+[mun]?s\s+[0-9.]+[mun]?s(\s+)(\S+)", line)
    if match:
        frames.append((len(match.group(1)), match.group(2)))
assert frames and frames[-1][1] == "leaf", frames
middle = [depth for depth, name in frames if name == "middle"]
assert middle and middle[-1] + 2 == frames[-1][0], frames
# The stepper's speed (the QEMU recorder is not the stepper).
assert result["backend"] == "qemu" or result["instructionsPerSecond"] > 0
check = subprocess.run(["magic-trace-fxt-check", snapshot["path"]],
                       capture_output=True, text=True)
assert check.returncode == 0, check.stderr
print("example session ok:", check.stdout.strip())
