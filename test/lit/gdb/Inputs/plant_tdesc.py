#!/usr/bin/env python3
"""Plants, as user nobody, a target description where GDB's host would look
for its cached one (the name is computed from qemu-x86_64's path, size and
mtime, as anyone could), with an extra register planted_by_nobody.
With OLD-TMP, it also plants one at the name an earlier version used in the
temp directory. Usage: plant_tdesc.py CACHE-DIR [OLD-TMP]"""
import hashlib
import os
import shutil
import sys

cache = sys.argv[1]
qemu = os.environ.get("MT_QEMU") or shutil.which("qemu-x86_64")
info = os.stat(qemu)
key = hashlib.sha1(("%s:%d:%d" % (qemu, info.st_size, info.st_mtime_ns))
                   .encode()).hexdigest()[:16]
os.makedirs(cache, mode=0o700, exist_ok=True)
paths = [os.path.join(cache, "gdb-tdesc-%s.xml" % key)]
if len(sys.argv) > 2:
    paths.append(os.path.join(sys.argv[2], "magic-trace-gdb-tdesc-%s.xml" % key))
for path in paths:
    with open(path, "w") as out:
        out.write('<?xml version="1.0"?>\n<!DOCTYPE target SYSTEM "gdb-target.dtd">\n'
                  '<target>\n  <architecture>i386:x86-64</architecture>\n'
                  '  <osabi>GNU/Linux</osabi>\n'
                  '  <feature name="org.gnu.gdb.i386.core">\n'
                  '    <reg name="planted_by_nobody" bitsize="64" type="int"/>\n'
                  '  </feature>\n'
                  '  <feature name="org.gnu.gdb.i386.linux">\n'
                  '    <reg name="orig_rax" bitsize="64" type="int"/>\n'
                  '  </feature>\n</target>\n')
    os.chown(path, 65534, 65534)
    os.chmod(path, 0o644)
    print("planted", os.path.basename(path))
