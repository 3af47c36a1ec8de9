# The views of GDB's magic-trace (magic-trace-gdb.py imports it): report
# --annotate, report --top and diff, their options as magic-trace-gdb.py's
# Options parses them, handed to the core's views (Views.h through the
# magic_trace_gdb module), which print what LLDB's commands print.
from magic_trace_gdb_target import fail

# report's view options: --annotate FUNCTION, --by ORDER, --rows N; flags.
VIEW_VALUES = {"annotate", "by", "rows"}
VIEW_FLAGS = {"insns", "top", "json"}
# The core's defaults (Views.h: kDefaultTopRows, kDefaultViewRows).
TOP_ROWS = 20
VIEW_ROWS = 50

REPORT_HELP = """magic-trace report --annotate FUNCTION [--insns] [--rows N] [--thread TID]
                   [--snapshot K] [--json]
magic-trace report --top [N] [--by self|total|calls|instructions]
                   [--thread TID] [--snapshot K] [--json]

--annotate FUNCTION: per source line of FUNCTION, the instructions executed
  there (exact), the times it was entered and its self time; --insns adds
  each instruction with its count and disassembly.
--top [N]: the first N functions (default 20) by self time (or --by), with
  their calls, instructions and total time, across threads and per thread.
"""

DIFF_HELP = """Compare two snapshots of one program.

magic-trace diff K1 K2 [--rows N] [--json]

Per function: calls, instructions, self and total time in each snapshot and
the difference, the largest change first; then the call paths that ran in
one snapshot only. --rows N: rows per list (default 50)."""


def is_view(options):
    """Whether report's options ask for a view, not the call tree."""
    return bool(options.flags & VIEW_FLAGS or
                VIEW_VALUES & set(options.values))


def report_view(session, options, window):
    """The view's text; RuntimeError with the core's line."""
    top_rows = TOP_ROWS
    if options.positional:
        if "top" not in options.flags or len(options.positional) > 1:
            fail("unexpected argument '%s' (see 'help magic-trace report')"
                 % options.positional[-1])
        try:
            top_rows = int(options.positional[0], 0)
        except ValueError:
            top_rows = -1
        if top_rows < 0:
            fail("--top takes a count, got '%s'" % options.positional[0])
    for option in ("last", "depth"):
        if option in options.values:
            fail("--%s shapes the call tree, not --annotate or --top (leave "
                 "it out)" % option)
    return session.view(
        options.number("snapshot", 0), options.get("annotate", ""),
        "insns" in options.flags, "top" in options.flags, top_rows,
        options.get("by", ""), options.number("rows", VIEW_ROWS),
        options.number("thread", 0), "json" in options.flags, *window)


def diff_view(session, options):
    """diff K1 K2's text; RuntimeError with the core's line."""
    if len(options.positional) != 2:
        fail("diff takes two snapshot numbers, e.g. 'magic-trace diff 1 2'")
    numbers = []
    for word in options.positional:
        try:
            numbers.append(int(word, 0))
        except ValueError:
            fail("bad snapshot number '%s'" % word)
    return session.diff(numbers[0], numbers[1],
                        options.number("rows", VIEW_ROWS),
                        "json" in options.flags)


def status_lines(status, exited):
    """`magic-trace status`'s lines from the core's status dictionary."""
    lines = []
    exited = ", process exited" if exited else ""
    if status["backend"] == "qemu":
        lines.append("magic-trace: backend qemu, %d instructions recorded in "
                     "%d threads, %d snapshots%s" % (
                         status["instructions"], status["threads"],
                         status["snapshots"], exited))
    else:
        lines.append("magic-trace: backend %s, %d threads, %d snapshots%s" % (
            status["backend"] or "none (detached)", status["threads"],
            status["snapshots"], exited))
    lines += status["lines"]
    if status["recorder_written"]:
        lines.append(
            "magic-trace: recorder snapshots: %d written, %d decoded, %d "
            "waiting (at most %d), %d skipped, %.1f s waited for the decoder"
            % (status["recorder_written"], status["recorder_decoded"],
               status["recorder_waiting"], status["recorder_max_pending"],
               status["recorder_skipped"], status["recorder_waited_s"]))
    if status["kept_line"]:
        lines.append("magic-trace: " + status["kept_line"])
    if status["note"]:
        lines.append("magic-trace: " + status["note"])
    return lines
