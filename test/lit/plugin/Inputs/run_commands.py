"""Runs LLDB commands one after another through SBDebugger.HandleCommand, as
a scripted session would, printing each command, its output and its error.
Unlike `lldb -b`, a failing command does not end the session.
Usage: run_commands.py PLUGIN PROGRAM COMMAND..."""
import sys

import lldb

lldb.SBDebugger.Initialize()
debugger = lldb.SBDebugger.Create(False)
debugger.SetAsync(False)
interpreter = debugger.GetCommandInterpreter()
commands = ["plugin load " + sys.argv[1], "target create " + sys.argv[2]]
for command in commands + sys.argv[3:]:
    result = lldb.SBCommandReturnObject()
    interpreter.HandleCommand(command, result)
    print("(lldb) " + command)
    sys.stdout.write(result.GetOutput() or "")
    sys.stdout.write(result.GetError() or "")
    sys.stdout.flush()
lldb.SBDebugger.Destroy(debugger)
