# Sourced at a GDB stop: reads every thread's registers, waits 0.3 s, drops
# GDB's register cache and reads them again. In GDB's all-stop mode no
# thread runs while the program is stopped, so both reads are the same;
# under QEMU's user-mode gdbstub alone the other threads run on, and their
# registers change (gdb/all-stop.test).
import time

import gdb


def registers():
    selected = gdb.selected_thread()
    values = []
    for thread in gdb.selected_inferior().threads():
        thread.switch()
        values.append((thread.ptid[1], int(gdb.newest_frame().pc()),
                       int(gdb.parse_and_eval("$rdi")) & 0xffffffff))
    selected.switch()
    return values


before = registers()
time.sleep(0.3)
gdb.execute("maintenance flush register-cache", to_string=True)
after = registers()
print("threads: %d, %s" % (len(before), "held" if before == after else
                           "ran while stopped: %s -> %s" % (before, after)))
