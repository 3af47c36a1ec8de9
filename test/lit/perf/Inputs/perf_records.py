#!/usr/bin/env python3
"""What `perf script -D` shows of a perf.data, in magic-trace-perfdata
--records' form: "records NAME COUNT" per record type (sorted by name), then
"cpu N aux BYTES" per CPU, the sizes of its AUXTRACE records added up.

Usage: perf_records.py PERF_SCRIPT_D_OUTPUT
"""
import re
import sys

records = {}
aux = {}
with open(sys.argv[1], errors="replace") as f:
    for line in f:
        m = re.search(r"\]: (PERF_RECORD_[A-Z_0-9]+)", line)
        if not m:
            continue
        records[m.group(1)] = records.get(m.group(1), 0) + 1
        t = re.search(r"PERF_RECORD_AUXTRACE size: (0x[0-9a-f]+) .* cpu: (-?\d+)", line)
        if t:
            cpu = int(t.group(2))
            aux[cpu] = aux.get(cpu, 0) + int(t.group(1), 16)
for name in sorted(records):
    print("records %s %d" % (name, records[name]))
for cpu in sorted(aux):
    print("cpu %d aux %d bytes" % (cpu, aux[cpu]))
