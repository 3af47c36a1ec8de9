# magic-trace for GDB: the core module (magic_trace_gdb, the core's Python
# extension, plugin/gdb/GdbModule.cpp), what `doctor` says of it, and the
# options of `magic-trace CMD` as every command of magic-trace-gdb.py parses
# them: --name VALUE, --flag and positionals, sizes and the window read by
# the core as LLDB reads them.
import os
import shlex
import shutil
import sys

import gdb

from magic_trace_gdb_target import fail

try:
    import magic_trace_gdb as core

    IMPORT_ERROR = None
except ImportError as error:  # doctor says why; every command fails in one line
    core = None
    IMPORT_ERROR = str(error)

TIMERS = ("low", "normal", "high")
SHORT_OPTIONS = {"o": "output", "c": "count", "k": "snapshot", "F": "format",
                 "d": "depth", "t": "thread", "l": "last", "w": "window",
                 "m": "max-slices", "B": "max-trace",
                 "M": "keep-memory"}
# --window, --max-slices and --max-trace, which every command that decodes
# takes.
WINDOW_OPTIONS = {"window", "max-slices", "max-trace"}
WINDOW_HELP = """--window DURATION|all: write the last DURATION of the trace at most
  (e.g. 5ms), or all of it (default: the longest window that fits
  --max-slices and --max-trace).
--max-slices N: the output's budget in slices (default 10000000, what
  Perfetto's UI opens; 2M = 2000000).
--max-trace SIZE: without --window, decode at most SIZE bytes of trace,
  every thread's together (default 5M, about a second on 2 cores; K, M,
  G)."""


def need_core():
    if core is None:
        fail("the magic_trace_gdb module did not load (%s): build it "
             "(scripts/build.sh) and source build/lib/magic-trace-gdb.py"
             % IMPORT_ERROR)


def window_of(options):
    """(window, max_slices, max_trace) as given ("" when not), checked by
    the core."""
    window = options.get("window", "")
    max_slices = options.get("max-slices", "")
    max_trace = options.get("max-trace", "")
    try:
        core.check_window(window, max_slices, max_trace)
    except RuntimeError as error:
        fail(str(error))
    return window, max_slices, max_trace


def parse_memory(text):
    """A --keep-memory value in bytes (the core reads it as LLDB does)."""
    need_core()
    try:
        return core.parse_memory_size(text)
    except RuntimeError as error:
        fail(str(error))


def parse_size(text):
    """A --snapshot-size value in bytes (the core reads it as LLDB does)."""
    need_core()
    try:
        return core.parse_snapshot_size(text)
    except RuntimeError as error:
        fail(str(error))


class Options:
    """`magic-trace CMD` options: --name VALUE, --flag, and positionals
    (everything after `--` is positional)."""

    def __init__(self, argument, values, flags, command):
        self.values = {}
        self.flags = set()
        self.positional = []
        words = shlex.split(argument)
        i = 0
        while i < len(words):
            word = words[i]
            if word == "--":
                self.positional += words[i + 1:]
                break
            if word.startswith("--"):
                short = word[2:]
            elif word.startswith("-"):
                short = SHORT_OPTIONS.get(word[1:], word[1:])
            else:
                short = word
            if word.startswith("-") and short in values:
                if i + 1 >= len(words):
                    fail("%s needs a value (see 'help magic-trace %s')"
                         % (word, command))
                self.values[short] = words[i + 1]
                i += 2
                continue
            if word.startswith("-") and short in flags:
                self.flags.add(short)
                i += 1
                continue
            if word.startswith("-"):
                fail("unknown option '%s' (see 'help magic-trace %s')"
                     % (word, command))
            self.positional.append(word)
            i += 1

    def get(self, name, default=None):
        return self.values.get(name, default)

    def number(self, name, default):
        if name not in self.values:
            return default
        try:
            value = int(self.values[name], 0)
        except ValueError:
            value = -1
        if value < 0:
            fail("--%s takes a number, got '%s'" % (name, self.values[name]))
        return value


def doctor_lines(here):
    """`magic-trace doctor`'s lines: GDB, the core module, QEMU and the
    recorder plugin beside this file (in `here`), Intel PT, and the machine
    as the LLDB host's doctor shows it."""
    lines = ["magic-trace doctor (GDB %s, Python %d.%d)"
             % (gdb.VERSION, sys.version_info[0], sys.version_info[1])]
    if core is None:
        lines.append("  core module: missing (%s)" % IMPORT_ERROR)
    else:
        lines.append("  core module: %s (libipt %s)"
                     % (core.__file__, core.libipt_version()))
    qemu = os.environ.get("MT_QEMU") or shutil.which("qemu-x86_64")
    lines.append("  qemu recorder: %s" % (
        "qemu-x86_64 at %s, 'magic-trace run' records" % qemu if qemu
        else "qemu-x86_64 missing (apt-get install qemu-user)"))
    plugin = os.path.join(here, "libmagic-trace-qemu.so")
    lines.append("  recorder plugin: %s" % (
        plugin if os.path.exists(plugin) else "missing (" + plugin + ")"))
    lines.append("  intel_pt: %s" % (
        "present ('magic-trace attach' records with the perf backend)"
        if os.path.exists("/sys/bus/event_source/devices/intel_pt")
        else "absent (no Intel PT on this machine; use 'magic-trace run')"))
    if core is not None:
        lines += ["  " + line for line in core.machine_facts().splitlines()]
    return lines
