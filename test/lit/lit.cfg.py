# lit configuration for magic-trace's end-to-end tests.
import atexit
import glob
import os
import stat
import time

import lit.formats

config.name = "magic-trace"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".test"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mt_obj_root, "test", "lit")

# FileCheck, not, count come from LLVM 22; our tools from the build.
config.environment["PATH"] = os.pathsep.join(
    [config.llvm_tools_dir, config.mt_tools_dir, config.environment.get("PATH", "/usr/bin:/bin")])
# Python scripts driving LLDB need its module and its server (Debian quirk).
config.environment["PYTHONPATH"] = "/usr/lib/llvm-22/lib/python3.11/site-packages"
# The user's cache directory (the symbolizer's ranges kept across runs,
# GDB's target description) is the suite's own, not the user's; tests that
# are about it set XDG_CACHE_HOME themselves.
config.environment["XDG_CACHE_HOME"] = os.path.join(config.test_exec_root,
                                                    "xdg-cache")
config.environment["LLDB_DEBUGSERVER_PATH"] = "/usr/lib/llvm-22/bin/lldb-server"
for var in ["HOME", "TMPDIR", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LD_PRELOAD"]:
    if var in os.environ:
        config.environment[var] = os.environ[var]

plugin = os.path.join(config.mt_lib_dir, "libmagic-trace-lldb.so")
lldb = os.path.join(config.llvm_tools_dir, "lldb")
# --no-lldbinit keeps a user's ~/.lldbinit out of the tests.
config.substitutions.append(("%lldb", lldb + " --no-lldbinit"))
config.substitutions.append(("%plugin", plugin))
# The perf dlfilter (plugin/perf), built where perf's header is installed;
# not in the ASan build (an instrumented filter cannot be loaded into perf).
dlfilter = os.path.join(config.mt_lib_dir, "libmagic-trace-perf.so")
config.substitutions.append(
    ("%qemu_recorder", os.path.join(config.mt_lib_dir, "libmagic-trace-qemu.so")))
config.substitutions.append(("%dlfilter", dlfilter))
if os.path.exists(dlfilter) and config.mt_sanitize.upper() not in (
        "ON", "1", "TRUE", "YES"):
    config.available_features.add("dlfilter")
# The replaying fake kernel (test/support/ReplayKernel.cpp) that the perf
# backend talks to in test/lit/perf/replay*.test.
config.substitutions.append(
    ("%replay_kernel", os.path.join(config.mt_lib_dir,
                                    "libmagic-trace-replay-kernel.so")))
config.substitutions.append(("%inputs", config.mt_inputs_dir))
config.substitutions.append(("%srcroot", config.mt_src_root))
config.substitutions.append(("%python", "python3"))
config.substitutions.append(("%mt_tools", config.mt_tools_dir))
# Recordings made on real CPUs, kept beside the checkout as CI lays it out
# (../shared/<name>; MT_REALPT overrides realpt's path): Intel PT bundles
# (realpt), perf.data files perf recorded (realpt-perf), ARCUS raw traces
# (realpt-arcus). A test that needs one says REQUIRES: <name>; without the
# folder it is unsupported, and the run says once which folder is missing.
shared = os.path.join(config.mt_src_root, "..", "shared")
# Longer names first: lit substitutes in order, and %realpt is a prefix of
# %realpt_perf.
corpora = {
    "realpt-perf": os.path.join(shared, "realpt-perf"),
    "realpt-arcus": os.path.join(shared, "realpt-arcus"),
    "realpt": os.environ.get("MT_REALPT", os.path.join(shared, "realpt")),
}
for name, path in corpora.items():
    path = os.path.abspath(path)
    config.substitutions.append(("%" + name.replace("-", "_"), path))
    if os.path.isdir(path):
        config.available_features.add(name)
    else:
        lit_config.note("%s is absent: the tests that need it (REQUIRES: %s) "
                        "are unsupported (scripts/rebuild-corpora.py %s "
                        "rebuilds it from its public sources)"
                        % (path, name, name))

# Features describing this machine's truth, for tests whose expectation
# depends on the hardware (REQUIRES: intel-pt / no-intel-pt).
if os.path.isdir("/sys/bus/event_source/devices/intel_pt"):
    config.available_features.add("intel-pt")
else:
    config.available_features.add("no-intel-pt")

# The CPU's vendor, for the rare test whose expectation really differs by
# vendor (REQUIRES: intel-cpu / amd-cpu). Nothing we record or decode does:
# the emulators' CPU is fixed, and a machine without the intel_pt PMU is
# advised the same on every vendor.
try:
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("vendor_id"):
                vendor = line.partition(":")[2].strip()
                if vendor == "GenuineIntel":
                    config.available_features.add("intel-cpu")
                elif vendor == "AuthenticAMD":
                    config.available_features.add("amd-cpu")
                break
except OSError:
    pass

# Root with setpriv, for the tests that act as a second, unprivileged user
# (nobody) on a machine other people share (REQUIRES: root).
import shutil as _shutil
if os.geteuid() == 0 and _shutil.which("setpriv"):
    config.available_features.add("root")
config.substitutions.append(
    ("%as_nobody", "setpriv --reuid=nobody --regid=nogroup --clear-groups"))

# An ASan+UBSan build (MT_SANITIZE=ON): the plugin cannot be loaded into an
# uninstrumented lldb-22, so tests that load it are unsupported there.
if config.mt_sanitize.upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("asan")

# Linux perf (Debian's linux-perf) decodes our perf.data with its own Intel PT
# decoder; tests that use it as an oracle say REQUIRES: perf.
import subprocess
try:
    if subprocess.run(["perf", "version"], capture_output=True, timeout=30).returncode == 0:
        config.available_features.add("perf")
except (OSError, subprocess.TimeoutExpired):
    pass
# QEMU's user-mode emulator, for magic-trace-emulate --engine qemu. Not in
# the ASan build: an instrumented libmagic-trace-qemu.so cannot be loaded
# into the uninstrumented qemu-x86_64 (the ASan runtime must come first).
import shutil
if shutil.which("qemu-x86_64") and "asan" not in config.available_features:
    config.available_features.add("qemu")
# node (a real JIT: V8) for the code-history tests; not in the ASan build
# (the QEMU recorder is not either).
if shutil.which("node") and "asan" not in config.available_features:
    config.available_features.add("node")
# OpenJDK (a JIT with an interpreter, two compilers and safepoint faults)
# under the QEMU recorder, with javac for its test class. %java is the real
# launcher, not /usr/bin's alternatives link, for LLDB's `file`.
if (shutil.which("java") and shutil.which("javac")
        and "asan" not in config.available_features):
    config.available_features.add("java")
    config.substitutions.append(
        ("%java", os.path.realpath(shutil.which("java"))))
# LuaJIT (a JIT rewriting its code in place) under the QEMU recorder.
if shutil.which("luajit") and "asan" not in config.available_features:
    config.available_features.add("luajit")
# The GDB host (plugin/gdb): gdb 13 sourcing build/lib/magic-trace-gdb.py,
# which imports the magic_trace_gdb module beside it. Not built in the ASan
# build (gdb cannot load an instrumented module), nor without pybind11.
gdb_script = os.path.join(config.mt_lib_dir, "magic-trace-gdb.py")
gdb_module = [name for name in (os.listdir(config.mt_lib_dir)
                                if os.path.isdir(config.mt_lib_dir) else [])
              if name.startswith("magic_trace_gdb.") and name.endswith(".so")]
if shutil.which("gdb") and os.path.exists(gdb_script) and gdb_module:
    config.available_features.add("gdb")
elif "asan" not in config.available_features:
    lit_config.note("the GDB host is not built or gdb is missing: the tests "
                    "that need it (REQUIRES: gdb) are unsupported")
# -nx keeps a user's ~/.gdbinit out of the tests.
config.substitutions.append(("%gdb", "gdb -nx -batch -x " + gdb_script))


# The JIT programs the tests run (emu_jit, node, the JVM) name their code in
# /tmp/perf-PID.map as real JITs do, and leave it there for a decode after
# they exit. Once the whole run is over, the suite removes the ones it made:
# its user's, written since it started, of a process that is gone. Another
# process's, or an older one, stays.
_started = time.time()


def _remove_perf_maps():
    for path in glob.glob("/tmp/perf-*.map"):
        try:
            pid = int(os.path.basename(path)[len("perf-"):-len(".map")])
            # lstat: another user's symlink there is theirs, not followed.
            info = os.lstat(path)
            if (stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()
                    and info.st_mtime >= _started
                    and not os.path.exists("/proc/%d" % pid)):
                os.remove(path)
        except (OSError, ValueError):
            continue


atexit.register(_remove_perf_maps)
