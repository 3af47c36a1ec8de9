#!/usr/bin/env python3
"""The layers of docs/architecture.md ("Layers"), checked on every .cpp and
.h of core/lib/, core/include/, core/tools/ and plugin/.

Each file belongs to a folder (a unit): core/lib/F/... to F; a public header
core/include/magic_trace/X.h to the folder that holds X.cpp, else to the one
HEADER_HOME names; core/tools/T/ to tool:T; plugin/P/ to plugin:P. Each
include of a project file is an edge from the includer's unit to the
included file's unit. ALLOWED is the table of edges a unit may have; every
edge of the code must be in it, and the table has no cycle, so the layers
only look down.

Usage: check-layers.py SRCROOT [--graph]
Prints one line per edge the table does not allow (file:line: unit -> unit,
and the include), and exits 1 if there is any; --graph prints the edges
found, with a count, instead.
"""
import os
import re
import sys

# The core's folders, from the bottom up (each may use those below it that
# ALLOWED lists).
CORE = ["base", "decode", "formats", "symbolize", "record", "model",
        "write", "pipeline", "session", "views"]

# Headers with no .cpp of the same name: the folder they belong to.
HEADER_HOME = {
    "CpuIdentity.h": "base",
    "Interpolation.h": "base",
    "Parallel.h": "base",
    "PodVector.h": "base",
    "PtTiming.h": "base",
    "Snapshot.h": "base",
    "StringTable.h": "base",
    "SymbolRange.h": "base",
    "TraceItems.h": "base",
    "VirtualClock.h": "base",
    "Decoder.h": "decode",
    "Libipt.h": "decode",
    "ModelWindow.h": "model",
    "TraceWriters.h": "write",
}

# The edges a unit may have (besides edges inside itself).
ALLOWED = {
    "base": set(),
    "decode": {"base"},
    "formats": {"base"},
    "symbolize": {"base", "formats"},
    # The doctor's facts (MachineFacts.cpp) name the decoder's libipt
    # version and the errata it applies.
    "record": {"base", "formats", "decode"},
    "model": {"base"},
    "write": {"base", "model", "formats"},
    "pipeline": {"base", "decode", "formats", "symbolize", "model", "write"},
    "session": {"base", "decode", "formats", "symbolize", "record", "model",
                "write", "pipeline"},
    "views": {"base", "decode", "formats", "symbolize", "model", "write",
              "pipeline", "session"},
}
# The hosts and tools sit on top: any core folder, no other host.
TOP = set(CORE)
# The QEMU plugin runs inside QEMU: it writes the recorder's files and
# packets, and needs nothing that decodes, symbolizes or models.
PLUGIN_ALLOWED = {
    "qemu": {"base", "formats", "record"},
    "perf": TOP,
    "lldb": TOP,
    "gdb": TOP,
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def unit_of(path, root, owners):
    rel = os.path.relpath(path, root)
    parts = rel.split(os.sep)
    if parts[:2] == ["core", "lib"]:
        return parts[2] if len(parts) > 3 else None
    if parts[:2] == ["core", "include"]:
        return owners.get(parts[-1])
    if parts[:2] == ["core", "tools"]:
        return "tool:" + parts[2]
    if parts[0] == "plugin":
        return "plugin:" + parts[1]
    return None


def header_owners(root):
    owners = {}
    for folder, _, files in os.walk(os.path.join(root, "core", "lib")):
        for name in files:
            if name.endswith(".cpp"):
                unit = os.path.relpath(folder, os.path.join(
                    root, "core", "lib")).split(os.sep)[0]
                owners.setdefault(name[:-4] + ".h", set()).add(unit)
    result = {}
    problems = []
    include = os.path.join(root, "core", "include", "magic_trace")
    for name in sorted(os.listdir(include)):
        found = owners.get(name, set())
        if name in HEADER_HOME:
            if found and found != {HEADER_HOME[name]}:
                problems.append("%s: HEADER_HOME says %s, but %s.cpp is in %s"
                                % (name, HEADER_HOME[name], name[:-2],
                                   ", ".join(sorted(found))))
            result[name] = HEADER_HOME[name]
        elif len(found) == 1:
            result[name] = next(iter(found))
        else:
            problems.append(
                "core/include/magic_trace/%s: no folder holds %s.cpp (or "
                "several do): name its folder in HEADER_HOME" % (name,
                                                                 name[:-2]))
    return result, problems


def resolve(include, includer, root):
    if include.startswith("magic_trace/"):
        path = os.path.join(root, "core", "include", include)
        return path if os.path.exists(path) else None
    path = os.path.normpath(os.path.join(os.path.dirname(includer), include))
    return path if os.path.exists(path) else None


def allowed(source, target):
    if source == target:
        return True
    if source.startswith("tool:"):
        return target in TOP
    if source.startswith("plugin:"):
        return target in PLUGIN_ALLOWED.get(source[len("plugin:"):], set())
    return target in ALLOWED.get(source, set())


def table_cycle():
    """A cycle in ALLOWED, as a list of folders, or None."""
    state = {}

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(ALLOWED[node]):
            if state.get(nxt) == 1:
                return path + [node, nxt]
            if nxt not in state:
                found = visit(nxt, path + [node])
                if found:
                    return found
        state[node] = 2
        return None

    for node in CORE:
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[-4], file=sys.stderr)
        return 2
    root = os.path.abspath(sys.argv[1])
    graph = "--graph" in sys.argv[2:]
    owners, problems = header_owners(root)
    cycle = table_cycle()
    if cycle:
        problems.append("the table has a cycle: " + " -> ".join(cycle))
    unknown = sorted(set(ALLOWED) ^ set(CORE))
    if unknown:
        problems.append("ALLOWED and CORE differ: " + ", ".join(unknown))
    folders = sorted(os.listdir(os.path.join(root, "core", "lib")))
    if folders != sorted(CORE):
        problems.append("core/lib holds %s; the layers are %s" %
                        (", ".join(folders), ", ".join(sorted(CORE))))
    edges = {}
    files = 0
    for top in ("core", "plugin"):
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith((".cpp", ".h")):
                    continue
                path = os.path.join(folder, name)
                source = unit_of(path, root, owners)
                if source is None:
                    continue
                files += 1
                with open(path, encoding="utf-8", errors="replace") as text:
                    for number, line in enumerate(text, 1):
                        match = INCLUDE.match(line)
                        if not match:
                            continue
                        target_path = resolve(match.group(1), path, root)
                        if target_path is None:
                            continue
                        target = unit_of(target_path, root, owners)
                        if target is None:
                            continue
                        edges.setdefault((source, target), []).append(
                            "%s:%d: %s" % (os.path.relpath(path, root),
                                           number, match.group(1)))
                        if not allowed(source, target):
                            problems.append(
                                "%s:%d: %s -> %s (#include \"%s\") is not "
                                "an allowed edge" % (
                                    os.path.relpath(path, root), number,
                                    source, target, match.group(1)))
    if graph:
        for (source, target), places in sorted(edges.items()):
            if source != target:
                print("%-16s -> %-12s %4d  e.g. %s" % (source, target,
                                                      len(places), places[0]))
        return 0
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print("ok: %d files, %d edges between folders, all allowed" %
          (files, sum(1 for s, t in edges if s != t)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
