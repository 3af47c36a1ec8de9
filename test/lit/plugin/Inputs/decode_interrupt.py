"""Ctrl-C during a long decode in an interactive lldb (on a pty, as a user
types it): `magic-trace snapshot` of a 16 MiB ring (emu_bench 20000 under the QEMU
recorder: ~140 M instructions to decode, about 2 s) stops within a second of
the first Ctrl-C, says so, and the session goes on (status answers, the next
command works).

  decode_interrupt.py LLDB [--no-lldbinit] PLUGIN EMU_BENCH
"""
import sys
import time

import pexpect

lldb, plugin, bench = [a for a in sys.argv[1:] if a != "--no-lldbinit"]
PROMPT = r"\(lldb\) "
child = pexpect.spawn(lldb, ["--no-lldbinit", "--no-use-colors", "-o",
                             "settings set show-statusline false"],
                      encoding="utf-8", timeout=120)
child.expect(PROMPT)
for command in ["plugin load " + plugin, "file " + bench,
                "magic-trace run --start main --snapshot-size 16M -- 20000",
                "b stop_here", "continue"]:
    child.sendline(command)
    if command == "continue":
        child.expect("stop reason = breakpoint")
    child.expect(PROMPT)
child.sendline("magic-trace snapshot -o big.fxt")
# The snapshot takes about 2 s here, of which the decode is most: Ctrl-C
# half a second in, when the decode has begun (at a fixed 1.5 s it came
# after the end on an idle machine), and again every 250 ms, as a user
# presses it until something happens; the bound is from the first press.
time.sleep(0.5)
asked = time.time()
index = None
while index is None:
    child.sendintr()
    try:
        index = child.expect([r"interrupted: the snapshot was not made",
                              r"magic-trace: snapshot 1:"], timeout=0.25)
    except pexpect.TIMEOUT:
        if time.time() - asked > 60:
            raise
seconds = time.time() - asked
child.expect(PROMPT)
print("interrupted: {}".format(index == 0))
print("within 1 s: {}".format(seconds < 1.0))
child.sendline("magic-trace status")
child.expect(r"magic-trace: recording process \d+ \(qemu")
child.expect(PROMPT)
print("status answers: True")
child.sendline("magic-trace report")
child.expect(r"no snapshot yet")
child.expect(PROMPT)
print("no snapshot was made: True")
child.sendline("kill")
child.expect(PROMPT)
child.sendline("quit")
child.expect(pexpect.EOF)
