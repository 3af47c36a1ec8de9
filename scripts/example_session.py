#!/usr/bin/env python3
"""An example scripted session: trace a program from main until FUNCTION is
hit, write the trace, and print the result as one JSON object (--qemu:
record under QEMU with 'magic-trace run').

    PYTHONPATH=/usr/lib/llvm-22/lib/python3.11/site-packages \\
    LLDB_DEBUGSERVER_PATH=/usr/lib/llvm-22/bin/lldb-server \\
      scripts/example_session.py build/test/inputs/hello leaf
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import magic_trace_lldb as mt  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("program")
    parser.add_argument("function", help="snapshot when this function is hit")
    parser.add_argument("-o", "--output", default="example-%N.fxt")
    parser.add_argument("--plugin", default=mt.DEFAULT_PLUGIN)
    parser.add_argument("--qemu", action="store_true",
                        help="record under QEMU ('magic-trace run') instead "
                             "of the emulate backend's stepper")
    options = parser.parse_args()

    with mt.Session(plugin=options.plugin) as session:
        if options.qemu:
            session.launch_recorded(options.program, start="main",
                                    snapshot_size="1M")
        else:
            session.launch(options.program, stop_at="main")
            session.attach(backend="emulate", snapshot_size="1M")
        session.snapshot_on(function=options.function, count=1,
                            output=options.output)
        snapshots = session.continue_traced()
        if not snapshots:
            print(json.dumps({"error": "no snapshot was taken"}))
            return 1
        tree = session.report(depth=8)
        status = session.status()
        print(json.dumps({
            "snapshot": snapshots[0],
            "report": tree,
            "backend": status["backend"],
            "instructionsPerSecond": status["stepper"]["instructionsPerSecond"],
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
