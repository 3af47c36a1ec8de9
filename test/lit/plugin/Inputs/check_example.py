"""Checks example_session.py's JSON on hello.c: leaf is first called from
middle, called from main (hello.c), so the snapshot holds one call into
middle, its trace file validates, and the report names main and middle."""
import json
import subprocess
import sys

result = json.load(open(sys.argv[1]))
snapshot = result["snapshot"]
assert snapshot["number"] == 1, snapshot
assert snapshot["errors"] == 0, snapshot
assert snapshot["calls"] >= 1, snapshot
assert snapshot["path"] == "example-1.fxt", snapshot
assert "main" in result["report"] and "middle" in result["report"], result["report"]
assert result["instructionsPerSecond"] > 0
check = subprocess.run(["magic-trace-fxt-check", snapshot["path"]],
                       capture_output=True, text=True)
assert check.returncode == 0, check.stderr
print("example session ok:", check.stdout.strip())
