"""Compares `magic-trace doctor --json` with /proc and /sys, read here."""
import json
import os
import sys


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def first_cpu():
    cpu = {}
    for line in (read("/proc/cpuinfo") or "").splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        cpu[key.strip()] = value.strip()
    return cpu


def main():
    with open(sys.argv[1]) as f:
        facts = json.load(f)
    cpu = first_cpu()
    problems = []
    if facts["cpu"]["vendor"] != cpu.get("vendor_id", "unknown"):
        problems.append("vendor")
    if facts["cpu"]["family"] != int(cpu.get("cpu family", 0)):
        problems.append("family")
    if facts["cpu"]["model"] != int(cpu.get("model", 0)):
        problems.append("model")
    pmu = "/sys/bus/event_source/devices/intel_pt"
    if facts["intel_pt"]["present"] != os.path.isdir(pmu):
        problems.append("intel_pt.present")
    paranoid = read("/proc/sys/kernel/perf_event_paranoid")
    if facts["perf_event_paranoid"] != (int(paranoid) if paranoid else None):
        problems.append("perf_event_paranoid")
    backends = {b["name"]: b["available"] for b in facts["backends"]}
    if backends.get("emulate") is not True:
        problems.append("emulate backend")
    if not os.path.isdir(pmu) and backends.get("perf") is not False:
        problems.append("perf backend without a PMU")
    if problems:
        print("doctor json disagrees on: " + ", ".join(problems))
        sys.exit(1)
    print("doctor json agrees with /proc and /sys")


main()
