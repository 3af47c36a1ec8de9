//===- PtraceStepper.h - Emulated PT recording of a launched program -*- C++
//-*-===//
//
// The `emulate` backend's driver: launches a program under ptrace (Linux
// x86-64), runs it untraced to a start point, then single-steps every thread,
// classifying each instruction and feeding one PacketWriter per thread, until
// a stop point, exit, or an instruction limit. It returns the Snapshot (PT
// bytes, modules, stop context) and the ground truth of what ran.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PTRACESTEPPER_H
#define MAGIC_TRACE_PTRACESTEPPER_H

#include "magic_trace/GroundTruth.h"
#include "magic_trace/PacketWriter.h"
#include "magic_trace/Snapshot.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace magic_trace {

struct EmulateOptions {
  /// The program and its arguments; argv[0] is searched in PATH when it has
  /// no slash.
  std::vector<std::string> argv;
  /// Where tracing starts and stops: a symbol of the main executable, or a
  /// hex link-time address in it ("0x1139"), relocated by its load bias.
  /// An empty `stop` means: trace until exit or `maxInsns`. A `start` of
  /// "main" that the executable does not have (stripped) starts at the ELF
  /// entry point instead, and EmulateResult::startNote says so.
  std::string start = "main";
  std::string stop;
  /// Stop after this many traced instructions (all threads); 0: no limit.
  uint64_t maxInsns = 0;
  PacketWriter::Options writer;
  /// Makes each thread's writer; empty means PacketWriter::create.
  std::function<llvm::Expected<std::unique_ptr<PacketWriter>>(
      const PacketWriter::Options &)>
      makeWriter;
};

enum class EmulateEnd {
  StopHit,  ///< A thread reached the stop point.
  Exited,   ///< Every thread exited.
  MaxInsns, ///< The instruction limit was reached.
};

struct EmulateResult {
  Snapshot snapshot;
  std::vector<ThreadTruth> truth; ///< Parallel to snapshot.threads.
  EmulateEnd end = EmulateEnd::Exited;
  int exitStatus = 0;        ///< When Exited: the main thread's status.
  uint64_t instructions = 0; ///< Traced instructions, all threads.
  uint64_t singleSteps = 0;  ///< ptrace single-steps (rep iterations too).
  double tracedSeconds = 0;  ///< Wall time from start point to stop.
  /// Set when `start` fell back to the entry point: one line for the user.
  std::string startNote;
  /// The bytes of the process's "[vdso]" module (snapshot.modules has it,
  /// with no file on disk), or empty: a bundle writer stores them as the
  /// module's file so decoders can follow code that runs there.
  std::vector<uint8_t> vdsoImage;
  /// Losses the recorder had to mark (signals it could not follow).
  uint64_t lostInstructions = 0;
  /// A line the recorder left for the user (empty when none).
  std::string recorderNote;
};

/// Runs the program as described above. Errors (one line, with what to do):
/// the program cannot be found or run, is not an x86-64 ELF, a start/stop
/// symbol is not found, the program exits before the start point, ptrace
/// fails, or an instruction cannot be read or decoded. The target is killed
/// before returning in every case.
llvm::Expected<EmulateResult> emulateProgram(const EmulateOptions &options);

} // namespace magic_trace

#endif
