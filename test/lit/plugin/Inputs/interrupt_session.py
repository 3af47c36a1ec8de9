"""Interrupts a long `magic-trace continue` from another thread, then checks
that what was recorded snapshots and that the session goes on.

  interrupt_session.py SCRIPTS PLUGIN EMU_BENCH STEPPER_SLEEP

1. emu_bench (one busy thread): SBDebugger.RequestInterrupt after 8 s (what
   an IDE, or Ctrl-C in the lldb driver, asks for), then a snapshot of what
   was recorded.
2. stepper_sleep, stopped before the worker's sleep(2) with main in
   pthread_join: once every thread is blocked in the kernel (the stepper
   waits for a step's deadline), the same request, which must end
   `magic-trace continue` within a second; then, in a second launch,
   SBProcess's SendAsyncInterrupt (what `process interrupt` sends), every
   100 ms, which must end it before the worker's sleep does. The run after
   it still reaches after_sleep and snapshots.
"""
import sys
import threading
import time

sys.path.insert(0, sys.argv[1])
import magic_trace_lldb as mt  # noqa: E402

# Stopping within a second is the promise (issue 16): a step's deadline is
# 150-500 ms, and a script's request is passed on within 50 ms.
BOUND = 1.0


# Set when the run in progress returned, for an interrupter that repeats.
returned = threading.Event()


def interrupted_run(session, after, interrupt):
    """Runs `magic-trace continue`, starts `interrupt` (on its own thread)
    after `after` seconds; returns the output and the seconds from then until
    the run returned."""

    def run():
        outputs["continue"] = session.run("magic-trace continue")

    outputs = {}
    returned.clear()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=after)
    asked = time.time()
    interrupter = threading.Thread(target=interrupt, daemon=True)
    interrupter.start()
    worker.join(timeout=30)
    if worker.is_alive():
        print("HANG: magic-trace continue ignored the interrupt")
        sys.exit(1)
    seconds = time.time() - asked
    returned.set()
    interrupter.join()
    return outputs["continue"], seconds


with mt.Session(plugin=sys.argv[2]) as session:
    session.launch(sys.argv[3], args=["100000"], stop_at="main")
    session.attach(backend="emulate", snapshot_size="64K")
    debugger = session.debugger
    output, _ = interrupted_run(session, 8, debugger.RequestInterrupt)
    debugger.CancelInterruptRequest()
    print(output.strip().splitlines()[-2])
    status = session.status()
    thread = status["threads"][0]
    print("instructions > 1000:", thread["instructions"] > 1000,
          "bytes > 0:", thread["bytes"] > 0)
    snapshot = session.snapshot(output="interrupted.fxt")
    print("snapshot errors:", snapshot["errors"], "path:", snapshot["path"])


def blocked_session():
    """stepper_sleep stopped before the worker's sleep, recording: a fresh
    session per case, so that each interrupt has the whole sleep to land in
    (the sleep goes on while the process is stopped: one case's stop ate
    into the next case's window, and on a loaded machine closed it)."""
    session = mt.Session(plugin=sys.argv[2])
    session.launch(sys.argv[4], stop_at="before_sleep")
    session.attach(backend="emulate")
    session.snapshot_on(function="after_sleep", output="slept.fxt")
    return session


with blocked_session() as session:
    debugger = session.debugger
    output, seconds = interrupted_run(session, 0.5, debugger.RequestInterrupt)
    debugger.CancelInterruptRequest()
    print("blocked, RequestInterrupt:", output.strip().splitlines()[-2],
          "within {} s: {}".format(BOUND, seconds < BOUND))

with blocked_session() as session:
    debugger = session.debugger
    process = debugger.GetSelectedTarget().GetProcess()
    # LLDB drops an interrupt that arrives between two steps (the process is
    # stopped then), and the steps before the threads block are short and
    # many (on a loaded machine the worker takes a second or two to reach its
    # sleep): a script sends it every 100 ms until the run ends, as a user
    # repeats `process interrupt`. Once both threads block, every step runs
    # up to its deadline, and an interrupt that lands in it must end the run:
    # the stepper's own stop is a SIGSTOP of its own, never taken for the
    # script's (before, LLDB merged the two and the run went on to
    # after_sleep, 2 runs in 3 of the full suite).
    def keep_interrupting():
        for _ in range(100):
            if returned.is_set():
                return
            process.SendAsyncInterrupt()
            time.sleep(0.1)

    output, seconds = interrupted_run(session, 0.3, keep_interrupting)
    print("blocked, SendAsyncInterrupt:", output.strip().splitlines()[-2],
          "before the sleep ended:",
          "after_sleep" not in session.run("bt"))
    snapshots = session.continue_traced()
    print("then: snapshot at after_sleep:", snapshots[0]["path"],
          "errors:", snapshots[0]["errors"])
    print("the worker's tree has after_sleep:",
          "after_sleep" in session.report())
