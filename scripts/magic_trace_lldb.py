"""Drive magic-trace from LLDB Python scripts.

A small wrapper over SBDebugger.HandleCommand: load the plugin, launch a
program, attach, set snapshot triggers, run traced, and read the results as
dicts (from the commands' --json forms).

    import magic_trace_lldb as mt
    session = mt.Session()
    session.launch("build/test/inputs/hello", stop_at="main")
    session.attach(backend="emulate")   # or, under QEMU at emulator speed:
    # session.launch_recorded("build/test/inputs/hello", start="main")
    session.snapshot_on(function="leaf", count=1, output="leaf-%N.fxt")
    snapshots = session.continue_traced()   # [{"number": 1, "path": ...}]
    print(session.report(depth=6))

LLDB's Python module must be importable: on Debian, PYTHONPATH=
/usr/lib/llvm-22/lib/python3.11/site-packages and LLDB_DEBUGSERVER_PATH=
/usr/lib/llvm-22/bin/lldb-server.
"""

import json
import os
import shlex
import sys

import lldb

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PLUGIN = os.path.join(
    _ROOT, os.environ.get("BUILD_DIR", "build"), "lib", "libmagic-trace-lldb.so"
)


class MagicTraceError(RuntimeError):
    """A command failed; the message is LLDB's error text."""


class Session:
    """One debugger with the magic-trace plugin loaded."""

    def __init__(self, debugger=None, plugin=DEFAULT_PLUGIN):
        self.owns_debugger = debugger is None
        if debugger is None:
            lldb.SBDebugger.Initialize()
            debugger = lldb.SBDebugger.Create(False)
        self.debugger = debugger
        self.debugger.SetAsync(False)
        if self.owns_debugger:
            # What LLDB prints on its own (process events, the lines of
            # snapshots that triggers take as they are hit) goes to stderr:
            # stdout is the script's.
            self.debugger.SetOutputFileHandle(sys.stderr, False)
        self.run("plugin load " + shlex.quote(plugin))

    def close(self):
        if self.owns_debugger:
            process = self.debugger.GetSelectedTarget().GetProcess()
            if process.IsValid() and process.GetState() != lldb.eStateExited:
                process.Kill()
            lldb.SBDebugger.Destroy(self.debugger)
            self.owns_debugger = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def run(self, command):
        """Runs one LLDB command; returns its output, raises on failure."""
        result = lldb.SBCommandReturnObject()
        self.debugger.GetCommandInterpreter().HandleCommand(command, result)
        if not result.Succeeded():
            raise MagicTraceError((result.GetError() or "failed").strip())
        return result.GetOutput() or ""

    def launch(self, program, args=(), stop_at="main"):
        """Creates a target, breaks at `stop_at` and runs to it."""
        target = self.debugger.CreateTarget(program)
        if not target.IsValid():
            raise MagicTraceError("cannot create a target for " + program)
        if stop_at:
            target.BreakpointCreateByName(stop_at)
        error = lldb.SBError()
        info = lldb.SBLaunchInfo(list(args))
        info.SetWorkingDirectory(os.getcwd())
        process = target.Launch(info, error)
        if error.Fail() or process.GetState() != lldb.eStateStopped:
            raise MagicTraceError("cannot launch {}: {}".format(program, error))
        return process

    def launch_recorded(self, program, args=(), start=None,
                        snapshot_size=None, timer=None, threads=None,
                        ground_truth=False):
        """`magic-trace run`: launches `program` under QEMU with the
        recorder (every thread, at emulator speed) and stops at its first
        instruction, or at `start`, with recording on."""
        target = self.debugger.CreateTarget(program)
        if not target.IsValid():
            raise MagicTraceError("cannot create a target for " + program)
        command = "magic-trace run" + _recording_options(
            snapshot_size, timer, threads)
        if start:
            command += " --start " + shlex.quote(start)
        if ground_truth:
            command += " --ground-truth"
        if args:
            command += " -- " + " ".join(shlex.quote(a) for a in args)
        return self.run(command)

    def attach(self, backend="auto", snapshot_size=None, timer=None, threads=None):
        return self.run("magic-trace attach --backend " + backend +
                        _recording_options(snapshot_size, timer, threads))

    def snapshot_on(self, function=None, file=None, line=None, address=None,
                    breakpoint=None, count=None, continue_after=False,
                    output=None, window=None, max_slices=None, max_trace=None):
        command = "magic-trace snapshot-on"
        if function:
            command += " -n " + shlex.quote(function)
        if file:
            command += " -f {} -l {}".format(shlex.quote(file), int(line))
        if address is not None:
            command += " -a " + hex(address)
        if breakpoint is not None:
            command += " " + str(int(breakpoint))
        if count:
            command += " --count " + str(int(count))
        if continue_after:
            command += " --continue"
        if output:
            command += " -o " + shlex.quote(output)
        return self.run(command + _window_options(window, max_slices, max_trace))

    def continue_traced(self):
        """Runs traced; returns the snapshots taken on the way, as dicts."""
        return _json_lines(self.run("magic-trace continue --json"))

    def snapshot(self, output=None, window=None, max_slices=None,
                 max_trace=None):
        command = "magic-trace snapshot --json"
        if output:
            command += " -o " + shlex.quote(output)
        command += _window_options(window, max_slices, max_trace)
        return _json_lines(self.run(command))[0]

    def status(self):
        return json.loads(self.run("magic-trace status --json"))

    def report(self, last=None, thread=None, depth=None, snapshot=None,
               window=None, max_slices=None, max_trace=None):
        command = "magic-trace report"
        if last:
            command += " --last " + last
        if thread:
            command += " --thread " + str(thread)
        if depth:
            command += " --depth " + str(depth)
        if snapshot:
            command += " --snapshot " + str(snapshot)
        return self.run(command + _window_options(window, max_slices, max_trace))

    def save(self, output, format=None, snapshot=None, window=None,
             max_slices=None, max_trace=None):
        command = "magic-trace save -o " + shlex.quote(output)
        if format:
            command += " --format " + format
        if snapshot:
            command += " --snapshot " + str(snapshot)
        return self.run(command + _window_options(window, max_slices, max_trace))

    def detach(self):
        return self.run("magic-trace detach")


def _window_options(window, max_slices, max_trace):
    """--window DURATION|all, --max-slices N and --max-trace SIZE, as the
    commands that decode take them (docs/user-guide.md, "Big snapshots"),
    as command-line text."""
    text = ""
    if window:
        text += " --window " + shlex.quote(str(window))
    if max_slices:
        text += " --max-slices " + shlex.quote(str(max_slices))
    if max_trace:
        text += " --max-trace " + shlex.quote(str(max_trace))
    return text


def _recording_options(snapshot_size, timer, threads):
    """The options 'run' and 'attach' share, as command-line text."""
    text = ""
    if snapshot_size:
        text += " --snapshot-size " + str(snapshot_size)
    if timer:
        text += " --timer-resolution " + timer
    if threads:
        text += " --threads " + str(threads)
    return text


def _json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]
