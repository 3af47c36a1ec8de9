"""One traced run of the emulate stepper, attached wherever the process is
when interrupted, as a script would drive it.

  stepper_session.py SCRIPTS PLUGIN PROGRAM --blocked-in FUNCTION...
                     --trigger FUNCTION --bundle DIR [--bound SECONDS]

Launches PROGRAM, interrupts it (SBProcess.Stop, what `process interrupt`
does) every 50 ms until its main thread is inside the first FUNCTION (a
blocking call: read, pause, pthread_join, ...) and another thread inside
each further one, attaches with --ground-truth, sets the
trigger and runs `magic-trace continue`. Prints, for the test to check: each
thread's innermost function at the attach, the output of continue and of
report; saves the snapshot as a bundle in DIR (with groundtruth/). A
continue still running after --bound seconds is a hang: "HANG" and exit 1.
"""
import argparse
import os
import sys
import threading
import time

parser = argparse.ArgumentParser()
parser.add_argument("scripts")
parser.add_argument("plugin")
parser.add_argument("program")
parser.add_argument("--blocked-in", required=True, action="append")
parser.add_argument("--trigger", required=True)
parser.add_argument("--bundle", required=True)
parser.add_argument("--bound", type=float, default=60)
args = parser.parse_args()

sys.path.insert(0, args.scripts)
import lldb  # noqa: E402
import magic_trace_lldb as mt  # noqa: E402


def frames(thread):
    return [thread.GetFrameAtIndex(i).GetFunctionName() or "?"
            for i in range(thread.GetNumFrames())]


def wait_for(debugger, process, states):
    """Pumps the debugger's events until the process is in one of `states`
    (in asynchronous mode its state changes as its events are read)."""
    listener = debugger.GetListener()
    event = lldb.SBEvent()
    for _ in range(100):
        if process.GetState() in states:
            return
        if process.GetState() in (lldb.eStateExited, lldb.eStateCrashed):
            sys.exit("the program ended before it blocked")
        listener.WaitForEvent(1, event)
    sys.exit("the process never reached state {}".format(states))


def blocked(process, functions):
    """Whether the main thread's stack has functions[0], and each other one
    is in the stack of another thread."""
    stacks = [frames(thread) for thread in process]

    def has(stack, function):
        return any(function in name for name in stack)

    return has(stacks[0], functions[0]) and all(
        any(has(stack, f) for stack in stacks[1:]) for f in functions[1:])


def stop_inside(debugger, functions):
    """Interrupts the process until its threads are in `functions`."""
    target = debugger.GetSelectedTarget()
    error = lldb.SBError()
    info = lldb.SBLaunchInfo([])
    info.SetWorkingDirectory(os.getcwd())
    debugger.SetAsync(True)
    process = target.Launch(info, error)
    if error.Fail():
        sys.exit("cannot launch: {}".format(error))
    for _ in range(200):
        wait_for(debugger, process, [lldb.eStateRunning])
        time.sleep(0.05)
        process.Stop()
        wait_for(debugger, process, [lldb.eStateStopped])
        if blocked(process, functions):
            break
        process.Continue()
    else:
        sys.exit("the threads never were in " + ", ".join(functions))
    debugger.SetAsync(False)
    return process


with mt.Session(plugin=args.plugin) as session:
    if not session.debugger.CreateTarget(args.program).IsValid():
        sys.exit("cannot create a target for " + args.program)
    process = stop_inside(session.debugger, args.blocked_in)
    for thread in process:
        print("attach: thread #{} in {}".format(thread.GetIndexID(),
                                                 frames(thread)[0]))
    session.run("magic-trace attach --backend emulate --ground-truth")
    session.snapshot_on(function=args.trigger)
    outputs = {}

    def run():
        try:
            outputs["continue"] = session.run("magic-trace continue")
        except mt.MagicTraceError as failure:
            outputs["continue"] = "error: {}\n".format(failure)

    started = time.time()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=args.bound)
    if worker.is_alive():
        print("HANG: magic-trace continue still running after {} s".format(
            args.bound))
        sys.stdout.flush()
        os._exit(1)
    print("(lldb) magic-trace continue")
    sys.stdout.write(outputs["continue"])
    print("(lldb) magic-trace report")
    sys.stdout.write(session.report())
    session.save(args.bundle, format="bundle")
    sys.stdout.flush()
