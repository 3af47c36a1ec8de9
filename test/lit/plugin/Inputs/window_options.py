"""The window options of scripts/magic_trace_lldb.py's Session methods reach
the commands as the user guide spells them ("Big snapshots"): each method's
command line, recorded instead of run, printed one a line."""
import json
import sys

sys.path.insert(0, sys.argv[1])
import magic_trace_lldb as mt  # noqa: E402

commands = []
session = mt.Session.__new__(mt.Session)


def record(command):
    commands.append(command)
    return json.dumps({"number": 1}) + "\n"


session.run = record
session.snapshot_on(function="leaf", count=2, output="w-%N.fxt",
                    max_trace="16M")
session.snapshot(output="now.fxt", window="5ms", max_slices="2M")
session.report(depth=3, snapshot=1, window="all")
session.save("out.fxt", snapshot=1, max_slices=1000, max_trace="64K")
session.save("plain.fxt")
for command in commands:
    print(command)
