#!/usr/bin/env python3
"""perf_inject_jit.py DIR PID: lists, as magic-trace-jitdump-list does
("ADDRESS SIZE SHA1-OF-CODE NAME"), the code loads perf inject --jit made of
DIR/jit-PID.dump: each DIR/jitted-PID-N.so (tools/perf/util/genelf.c: the
code as .text, the function's name as a symbol) at the address of the MMAP2
record perf inject wrote for it (perf script --show-mmap-events). perf's
own reader of the file, independent of ours."""
import hashlib
import os
import re
import struct
import subprocess
import sys


def sections(data):
    """{name: (offset, size, address)} of an ELF64 little-endian file."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3a)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
               for i in range(shnum)]
    names = headers[shstrndx]
    def name(at):
        start = names[4] + at
        return data[start:data.index(b"\0", start)].decode()
    return {name(h[0]): h for h in headers}


def function_name(data, found):
    """The name of the one function symbol in .symtab."""
    symtab, strtab = found[".symtab"], found[".strtab"]
    for at in range(symtab[4], symtab[4] + symtab[5], 24):
        st_name, st_info = struct.unpack_from("<IB", data, at)
        if st_info & 0xf == 2:  # STT_FUNC
            start = strtab[4] + st_name
            return data[start:data.index(b"\0", start)].decode()
    return "?"


def main():
    dir, pid = sys.argv[1], sys.argv[2]
    events = subprocess.run(
        ["perf", "script", "-i", os.path.join(dir, "perf.jit.data"),
         "--show-mmap-events", "-F", "comm"],
        capture_output=True, text=True).stdout
    addresses = {}
    for match in re.finditer(r"PERF_RECORD_MMAP2 \S+: \[0x([0-9a-f]+)\(0x[0-9a-f]+\) @ \S+ .*?(jitted-%s-\d+\.so)" % pid, events):
        addresses[match.group(2)] = int(match.group(1), 16)
    for file in sorted(os.listdir(dir)):
        if not re.match(r"jitted-%s-\d+\.so$" % pid, file):
            continue
        data = open(os.path.join(dir, file), "rb").read()
        found = sections(data)
        text = found[".text"]
        code = data[text[4]:text[4] + text[5]]
        print("%x %d %s %s" % (addresses.get(file, 0), len(code),
                               hashlib.sha1(code).hexdigest(),
                               function_name(data, found)))


if __name__ == "__main__":
    main()
