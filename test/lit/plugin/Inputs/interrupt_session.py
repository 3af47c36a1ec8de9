"""Interrupts a long `magic-trace continue` from another thread (what Ctrl-C
does in the lldb driver: SBDebugger.RequestInterrupt), then snapshots what
was recorded."""
import sys
import threading
import time

sys.path.insert(0, sys.argv[1])
import magic_trace_lldb as mt  # noqa: E402

with mt.Session(plugin=sys.argv[2]) as session:
    session.launch(sys.argv[3], args=["100000"], stop_at="main")
    session.attach(backend="emulate", snapshot_size="64K")
    outputs = {}

    def run():
        outputs["continue"] = session.run("magic-trace continue")

    worker = threading.Thread(target=run)
    started = time.time()
    worker.start()
    worker.join(timeout=8)
    session.debugger.RequestInterrupt()
    worker.join()
    session.debugger.CancelInterruptRequest()
    print(outputs["continue"].strip().splitlines()[-2])
    status = session.status()
    thread = status["threads"][0]
    print("instructions > 1000:", thread["instructions"] > 1000,
          "bytes > 0:", thread["bytes"] > 0)
    snapshot = session.snapshot(output="interrupted.fxt")
    print("snapshot errors:", snapshot["errors"], "path:", snapshot["path"])
