"""Ctrl-C in an interactive lldb (on a pty, as a user types it) stops a long
`magic-trace continue` within a second, what was recorded snapshots, and the
next commands work: once with one busy thread (emu_bench), once with every
thread blocked in the kernel (stepper_sleep: a worker in sleep(2), main in
pthread_join), where the next continue goes on to after_sleep.

  ctrl_c_session.py LLDB [--no-lldbinit] PLUGIN EMU_BENCH STEPPER_SLEEP
"""
import sys
import time

import pexpect

# lit's %lldb is the path and --no-lldbinit, which the sessions pass anyway.
lldb, plugin, bench, sleeper = [a for a in sys.argv[1:] if a != "--no-lldbinit"]
PROMPT = r"\(lldb\) "


def session(program, args, stop_at, wait, label, then_trigger=None):
    # No colors and no status line: plain text to match.
    child = pexpect.spawn(lldb, ["--no-lldbinit", "--no-use-colors", "-o",
                                 "settings set show-statusline false", "--",
                                 program] + args, encoding="utf-8", timeout=60)
    child.expect(PROMPT)
    for command in ["plugin load " + plugin, "b " + stop_at, "run",
                    "magic-trace attach --backend emulate"]:
        child.sendline(command)
        if command == "run":
            # run returns at once; the stop is printed later.
            child.expect("stop reason = breakpoint")
        child.expect(PROMPT)
    child.sendline("magic-trace continue")
    time.sleep(wait)
    asked = time.time()
    child.sendintr()
    child.expect(r"magic-trace: interrupted")
    seconds = time.time() - asked
    child.expect(PROMPT)
    print("{}: interrupted within 1 s: {}".format(label, seconds < 1.0))
    child.sendline("magic-trace status --json")
    child.expect(r'"instructions":(\d+)')
    print("{}: instructions recorded > 0: {}".format(
        label, int(child.match.group(1)) > 0))
    child.expect(PROMPT)
    child.sendline("magic-trace snapshot -o {}.fxt".format(label))
    child.expect(r"magic-trace: snapshot 1: thread \d+, .*, (\d+) errors")
    print("{}: snapshot errors: {}".format(label, child.match.group(1)))
    child.expect(PROMPT)
    if then_trigger:
        child.sendline("magic-trace snapshot-on -n " + then_trigger)
        child.expect(PROMPT)
        child.sendline("magic-trace continue")
        child.expect(r"magic-trace: snapshot 2: thread \d+, .*, (\d+) errors")
        print("{}: then continue to {}: snapshot 2, errors: {}".format(
            label, then_trigger, child.match.group(1)))
        child.expect(PROMPT)
    child.sendline("process kill")
    child.expect(PROMPT)
    child.sendline("quit")
    child.expect(pexpect.EOF)


session(bench, ["100000"], "main", 3, "busy")
# Every thread blocked in the kernel: a worker in sleep(2), main joining it.
session(sleeper, [], "before_sleep", 0.5, "blocked", "after_sleep")
