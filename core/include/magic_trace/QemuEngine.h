//===- QemuEngine.h - Recording a program under the QEMU plugin -*- C++ -*-===//
//
// magic-trace-emulate --engine qemu: runs the program under qemu-x86_64 with
// libmagic-trace-qemu.so, waits for it to exit (or for the plugin to reach
// the stop point or the instruction limit, then ends it), and reads the
// rings into the same EmulateResult the ptrace stepper returns.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_QEMUENGINE_H
#define MAGIC_TRACE_QEMUENGINE_H

#include "magic_trace/PtraceStepper.h"

#include "llvm/Support/Error.h"

#include <chrono>
#include <string>

namespace magic_trace {

struct QemuEngineOptions {
  std::string qemuPath;   ///< Empty: qemu-x86_64 from PATH.
  std::string pluginPath; ///< libmagic-trace-qemu.so.
  /// Where the rings go; empty: a fresh directory under /dev/shm (else the
  /// temporary directory), removed after reading.
  std::string ringDir;
  /// Keep every executed address (the plugin's ground-truth=on): memory
  /// grows ~40 bytes an instruction, so the CLI asks for a bounded run.
  bool groundTruth = false;
  /// The plugin's log= (blocks per thread log); 0: its default.
  uint64_t logBlocks = 0;
  /// After the recording ends (stop point, instruction limit), let the
  /// program run to its end untraced, for at most this long, instead of
  /// ending QEMU: what it writes at exit (a JIT's buffered jitdump) is then
  /// there to read. 0: end QEMU at once.
  std::chrono::seconds runOn{0};
};

/// qemu-x86_64's path: `explicitPath` if given, else from PATH. Error (one
/// line): not found, naming Debian's qemu-user package.
llvm::Expected<std::string> findQemu(llvm::StringRef explicitPath = "");

/// Records `options.argv` under QEMU. Errors (one line): QEMU or the plugin
/// missing, the program not found or not x86-64, the ring directory not
/// creatable, a ring size that is not a power of two, QEMU refusing the
/// plugin (its message is on stderr), or nothing recorded.
llvm::Expected<EmulateResult> emulateUnderQemu(const EmulateOptions &options,
                                               const QemuEngineOptions &engine);

} // namespace magic_trace

#endif
