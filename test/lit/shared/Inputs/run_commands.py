"""LLDB command 'run_commands FILE': runs each line of FILE as an LLDB
command, going on after one that fails (lldb -b stops at the first error,
and these tests check that a refused output leaves the session usable).
$T in a line is the environment's T (the test's %t)."""
import os

import lldb


def run_commands(debugger, path, result, internal_dict):
    for line in open(path.strip()):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        line = line.replace("$T", os.environ["T"])
        print("(lldb) " + line, flush=True)
        ret = lldb.SBCommandReturnObject()
        debugger.GetCommandInterpreter().HandleCommand(line, ret)
        if ret.GetOutput():
            print(ret.GetOutput(), end="", flush=True)
        if ret.GetError():
            print(ret.GetError(), end="", flush=True)


def __lldb_init_module(debugger, internal_dict):
    debugger.HandleCommand(
        "command script add -f run_commands.run_commands run_commands")
