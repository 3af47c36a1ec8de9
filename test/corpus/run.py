#!/usr/bin/env python3
"""Real programs, measured (issue 15, docs/model.md).

Records Debian-packaged programs no one here wrote with the ptrace recorder
(magic-trace-emulate, ~15-28 k instructions/s) in a window of --insns
instructions that starts at a function deep in the work, and compares our
model with the reference tree magic-trace-reftree derives from the
recorder's ground truth:

- frames equal to the reference without the stop context (the model built
  from the trace alone) and with it (anchored to the debugger's backtrace);
- max depth, ours and the reference's;
- the model decoded from the bundle without DIR/magic-trace.json (what an
  LLDB `trace save` bundle looks like) against the model with it: equal
  below the oldest traced frame (frames marked [inferred] may differ);
- functions without a name: named by module and FDE entry (MODULE+0x...)
  and unknown code ([unknown @ ...]);
- for stripped gzip, the functions the trace enters (ground truth mapped
  to the FDEs `readelf --debug-dump=frames` lists) that are frames of
  their own.

Each is measured with the debug packages (libc6-dbg, libstdc++6-12-dbg
under /usr/lib/debug) and without them, by MT_DEBUG_FILE_DIRS= (empty:
no global debug-file directory; docs/symbolizer.md), which the symbolizer
and magic-trace-reftree both honour; nothing is uninstalled.

  test/corpus/run.py [--build build | --bin DIR --inputs DIR]
                     [--out /tmp/mt-corpus] [--insns 1000000]
                     [--only gzip,python3,sqlite3,throw] [--reuse]

Prints one line per program and debug setting, then the table for
docs/model.md. Exits 1 if any comparison is not equal.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # No __pycache__ in the source tree.
sys.path.insert(0, os.path.join(HERE, "..", "lit", "symbolize", "Inputs"))
import trace_stripped_functions  # noqa: E402  (the FDE count, shared)

PYTHON_SCRIPT = os.path.join(HERE, "work.py")
SQL = ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
       "WHERE i < 20000) SELECT i % 97 AS k, count(*), sum(i), "
       "group_concat(i % 7, '') FROM n GROUP BY k ORDER BY 3 DESC LIMIT 5;")


def plt_stub(binary, function):
    """Link-time address of FUNCTION@plt in BINARY (objdump's name)."""
    out = subprocess.run(["objdump", "-d", "-j", ".plt", "-j", ".plt.sec",
                          binary], check=True, capture_output=True,
                         text=True).stdout
    found = re.search(r"^([0-9a-f]+) <%s@plt>:" % re.escape(function), out,
                      re.M)
    if not found:
        raise SystemExit("no %s@plt in %s" % (function, binary))
    return "0x" + found.group(1)


# gzip's deflate() by build-id (the binary is stripped): Debian 12's gzip
# 1.12-1. Found in a trace from the entry point: the function zip() calls
# last, which runs the compression loop (fill_window and the read() below
# it, flush_block and the write() below it); its FDE is 0x4710..0x501d.
GZIP_DEFLATE = {"5dc767c02e183bb92c91cd56be96c493d8255f86": "0x4710"}


def elf_entry(path):
    return re.search(r"Entry point address:\s+(0x[0-9a-f]+)",
                     subprocess.run(["readelf", "-hW", path], check=True,
                                    capture_output=True,
                                    text=True).stdout).group(1)


def gzip_deflate():
    """deflate() of /usr/bin/gzip, or its ELF entry point (with a note) for
    a gzip not in GZIP_DEFLATE."""
    notes = subprocess.run(["readelf", "-nW", "/usr/bin/gzip"], check=True,
                           capture_output=True, text=True).stdout
    found = re.search(r"Build ID: ([0-9a-f]+)", notes)
    if found and found.group(1) in GZIP_DEFLATE:
        return GZIP_DEFLATE[found.group(1)]
    print("note: unknown gzip build, tracing from its entry point",
          file=sys.stderr)
    return elf_entry("/usr/bin/gzip")


def programs(inputs, work):
    """name -> (argv, start, stripped executable for the FDE count)."""
    data = os.path.join(work, "input.bin")
    if not os.path.exists(data):
        # 4 MB of a real binary: more than any window compresses.
        with open("/usr/bin/python3", "rb") as src, open(data, "wb") as dst:
            dst.write(src.read(4 << 20))
    return {
        # Stripped C: the window starts at deflate().
        "gzip": (["/usr/bin/gzip", "-c", data], gzip_deflate(),
                 "/usr/bin/gzip"),
        # The same from its entry point: start-up, options, the file, then
        # the compression; more of gzip's functions for the FDE count.
        "gzip-entry": (["/usr/bin/gzip", "-c", data],
                       elf_entry("/usr/bin/gzip"), "/usr/bin/gzip"),
        # Stripped but with a large .dynsym: the window starts where the
        # script runs (compile, then evaluation).
        "python3": (["/usr/bin/python3", "-S", PYTHON_SCRIPT],
                    "_PyRun_SimpleFileObject", None),
        # The shell (stripped) calls libsqlite3: the window starts at the
        # first sqlite3_prepare_v2 call, through its PLT stub.
        "sqlite3": (["/usr/bin/sqlite3", ":memory:", SQL],
                    plt_stub("/usr/bin/sqlite3", "sqlite3_prepare_v2"), None),
        # Ours, -O2 -g, throwing through libstdc++ and libgcc_s.
        "throw": ([os.path.join(inputs, "corpus_throw"),
                   "100000"], "work", None),
        # The same against libstdc++6-12-dbg, which is no separate debug
        # file of Debian's libstdc++ (nothing under /usr/lib/debug) but a
        # debug build of it, with its own .symtab and DWARF, that a program
        # uses through LD_LIBRARY_PATH.
        "throw-dbgbuild": ([os.path.join(inputs, "corpus_throw"), "100000"],
                           "work", None),
    }


# Environment of the recorded program, by name.
PROGRAM_ENV = {
    "throw-dbgbuild": {"LD_LIBRARY_PATH": "/usr/lib/x86_64-linux-gnu/debug"},
}


def emulate_command(bindir):
    tool = os.path.join(bindir, "magic-trace-emulate")
    help_text = subprocess.run([tool, "--help"], capture_output=True,
                               text=True).stdout
    # The ptrace stepper writes the ground truth this is all about.
    return [tool] + (["--engine=ptrace"] if "--engine" in help_text else [])


def record(bindir, name, argv, start, insns, out):
    bundle = os.path.join(out, name, "bundle")
    os.makedirs(os.path.join(out, name), exist_ok=True)
    began = time.time()
    env = dict(os.environ, **PROGRAM_ENV.get(name, {}))
    with open(os.devnull, "w") as sink:
        subprocess.run(emulate_command(bindir) + [
            "--start=" + start, "--max-insns=%d" % insns, "-o", bundle, "--"]
            + argv, check=True, stdout=sink, cwd=os.path.join(out, name),
            env=env)
    return bundle, time.time() - began


def reftree(bindir, bundle, env):
    out = subprocess.run([os.path.join(bindir, "magic-trace-reftree"),
                          "--bundle", bundle], capture_output=True, text=True,
                         env=env).stdout
    fact = {}
    m = re.search(r": (\d+) instructions, (\d+) decoded.*?, (\d+) errors/"
                  r"overflows, (\d+) segments", out)
    fact["insns"], fact["decoded"], fact["errors"], fact["segments"] = map(
        int, m.groups())
    fact["tree"] = re.search(r"  tree: (.*)", out).group(1)
    m = re.search(r"stitching on (\d+)/(\d+)", out)
    fact["plain"] = (int(m.group(1)), int(m.group(2)))
    m = re.search(r"anchored frames matching: (\d+)/(\d+).*max depth "
                  r"reference (\d+), model (\d+), anchored (\d+)", out)
    fact["anchored"] = (int(m.group(1)), int(m.group(2)))
    fact["depth"] = tuple(int(m.group(i)) for i in (3, 4, 5))
    fact["anchored_tree"] = re.search(r"  anchored tree: (.*)", out).group(1)
    fact["stack"] = re.search(r"  anchoring: (.*)", out).group(1)
    return fact, out


def tree_frames(path):
    """The call tree of a .txt rendering as (depth, name, inferred, total)."""
    frames = []
    for line in open(path):
        m = re.match(r"^ *(\S+) +\S+  ( *)(\S.*)$", line)
        if not m or line.lstrip().startswith("total"):
            continue
        text = m.group(3)
        inferred = text.endswith(" [inferred]")
        text = re.sub(r"( \[(inferred|inlined|clipped)\])+$", "", text)
        frames.append((len(m.group(2)) // 2, text, inferred, m.group(1)))
    return frames


def traced_part(frames):
    """Frames the trace ran in: without the inferred ones (the roots above
    the oldest traced frame), depths counted among the rest; and the
    total time of each."""
    out, kept = [], []
    for depth, name, inferred, total in frames:
        del kept[depth:]
        kept.append(not inferred)
        if not inferred:
            out.append((sum(kept[:-1]), name, total))
    return out


def first_difference(full, alone):
    """Index of the first frame where the model with the stop context
    differs from the one without, or None. Times are not compared (without
    magic-trace.json the timing facts are LLDB's defaults). Allowed: frames
    the stop context opens at the end (the last instruction called a
    function that never ran: zero-length leaves, docs/model.md
    "Anchoring")."""
    for i, (a, b) in enumerate(zip(full, alone)):
        if a[:2] != b[:2]:
            return i
    if len(full) == len(alone):
        return None
    if len(full) > len(alone) and all(f[2] == "0ns"
                                      for f in full[len(alone):]):
        return None
    return min(len(full), len(alone))


def decode_tree(bindir, bundle, path, env):
    subprocess.run([os.path.join(bindir, "magic-trace-decode"), bundle,
                    "-o", path], check=True, capture_output=True, env=env)
    return tree_frames(path)


def without_stop(bindir, bundle, work, env):
    """The model with and without magic-trace.json, below the roots."""
    bare = os.path.join(work, "bundle-no-stop")
    shutil.rmtree(bare, ignore_errors=True)
    shutil.copytree(bundle, bare)
    os.remove(os.path.join(bare, "magic-trace.json"))
    full = decode_tree(bindir, bundle, os.path.join(work, "with.txt"), env)
    alone = decode_tree(bindir, bare, os.path.join(work, "without.txt"), env)
    a, b = traced_part(full), traced_part(alone)
    first = first_difference(a, b)
    names = {name for _, name, _, _ in full}
    return {
        "equal": first is None,
        "frames": len(a),
        "first_difference": None if first is None else
        (a[first:first + 1], b[first:first + 1]),
        "fde_named": len({n for n in names
                          if re.match(r"^\S+\+0x[0-9a-f]+$", n)}),
        "unknown": len({n for n in names if n.startswith("[unknown @ ")}),
        "functions": len(names),
        "names": names,
    }


def percent(pair):
    return "%s of %s (%.1f %%)" % ("{:,}".format(pair[0]),
                                   "{:,}".format(pair[1]),
                                   100.0 * pair[0] / pair[1] if pair[1]
                                   else 100.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build",
                        help="the build directory (tools in bin/, "
                        "corpus_throw in test/inputs/; default: the one "
                        "whose magic-trace-emulate is first in PATH, else "
                        "build/)")
    parser.add_argument("--bin", help="the tools (default BUILD/bin)")
    parser.add_argument("--inputs",
                        help="corpus_throw's folder (default "
                        "BUILD/test/inputs)")
    parser.add_argument("--out", default="/tmp/mt-corpus")
    parser.add_argument("--insns", type=int, default=1000000)
    parser.add_argument("--only", default="")
    parser.add_argument("--reuse", action="store_true",
                        help="decode bundles already recorded in --out")
    args = parser.parse_args()
    build = args.build
    if not build:
        found = shutil.which("magic-trace-emulate")
        build = (os.path.dirname(os.path.dirname(found)) if found else
                 os.path.join(HERE, "..", "..", "build"))
    build = os.path.abspath(build)
    bindir = os.path.abspath(args.bin or os.path.join(build, "bin"))
    inputs = os.path.abspath(args.inputs or
                             os.path.join(build, "test", "inputs"))
    os.makedirs(args.out, exist_ok=True)
    chosen = [p for p in args.only.split(",") if p]
    rows, ok, results = [], True, {}
    for name, (argv, start, stripped) in programs(inputs, args.out).items():
        if chosen and name not in chosen:
            continue
        bundle = os.path.join(args.out, name, "bundle")
        seconds = 0.0
        if not (args.reuse and os.path.exists(os.path.join(bundle,
                                                           "trace.json"))):
            bundle, seconds = record(bindir, name, argv, start, args.insns,
                                     args.out)
        for debug in ("with", "without"):
            env = dict(os.environ)
            if debug == "without":
                env["MT_DEBUG_FILE_DIRS"] = ""
            else:
                env.pop("MT_DEBUG_FILE_DIRS", None)
            work = os.path.join(args.out, name, debug)
            os.makedirs(work, exist_ok=True)
            fact, text = reftree(bindir, bundle, env)
            open(os.path.join(work, "reftree.txt"), "w").write(text)
            stop = without_stop(bindir, bundle, work, env)
            fdes = None
            if stripped:
                # From the call tree: folded stacks leave out frames that
                # took no time (a one-jump thunk FDE tail-calling on).
                _, _, _, code, own = trace_stripped_functions.fde_counts(
                    stripped, bundle, stop["names"])
                fdes = (len(own), len(code))
            equal = (fact["errors"] == 0 and fact["tree"].startswith("equal")
                     and fact["anchored_tree"].startswith("equal")
                     and stop["equal"])
            ok = ok and equal
            results["%s/%s" % (name, debug)] = {
                "start": start, "record_seconds": seconds, "reftree": fact,
                "no_stop_context": stop, "fdes": fdes}
            print("%s, %s debug info: %d instructions (recorded in %.0f s), "
                  "%d errors; tree %s; anchored %s; %s; without "
                  "magic-trace.json %s (%d traced frames)%s" % (
                      name, debug, fact["insns"], seconds, fact["errors"],
                      fact["tree"], fact["anchored_tree"], fact["stack"],
                      "equal" if stop["equal"] else
                      "differs at %s" % (stop["first_difference"],),
                      stop["frames"],
                      "; FDEs %d of %d distinct frames" % fdes if fdes
                      else ""), flush=True)
            rows.append("| %s | %s | %s | %s / %s | %s | %d / %d | %d / %d "
                        "| %s |" % (
                            name, "{:,}".format(fact["insns"]), debug,
                            percent(fact["plain"]), percent(fact["anchored"]),
                            "equal" if stop["equal"] else "differs",
                            fact["depth"][1], fact["depth"][0],
                            stop["fde_named"], stop["unknown"],
                            "%d / %d" % fdes if fdes else "-"))
    for result in results.values():
        result["no_stop_context"].pop("names")
    json.dump(results, open(os.path.join(args.out, "results.json"), "w"),
              indent=1)
    print()
    print("| program | window (instructions) | debug info | frames equal to "
          "the reference, without / with stop context | model without "
          "magic-trace.json | max depth ours / reference | unnamed "
          "functions: FDE-named / unknown | FDEs entered that are own "
          "frames |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
