//===- PtraceEmulator.h - The ptrace stepper's emulator -------*- C++ -*-===//
//
// Private to record/ptrace/: the Emulator that emulateProgram runs. Its
// methods are in two files: PtraceStepper.cpp launches the program, runs
// it to the start, loops over the threads' stops, stops everything and
// assembles the snapshot; PtraceSteps.cpp steps one thread one instruction:
// classify, log the code outside files it runs, write its packets, and what
// a stop (a step, a syscall, a signal, a new thread, an exit) means.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_RECORD_PTRACE_PTRACEEMULATOR_H
#define MAGIC_TRACE_LIB_RECORD_PTRACE_PTRACEEMULATOR_H

#include "PtraceSupport.h"

#include "magic_trace/GroundTruth.h"
#include "magic_trace/InsnClassifier.h"
#include "magic_trace/PacketWriter.h"
#include "magic_trace/PtraceStepper.h"
#include "magic_trace/SteppedCode.h"

#include "llvm/ADT/DenseMap.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace magic_trace::ptrace_detail {

struct TracedThread {
  pid_t tid = 0;
  std::unique_ptr<PacketWriter> writer; ///< Null until tracing starts.
  ThreadTruth truth;
  /// Where its trace moved to newer versions of the code (SteppedCode.h).
  SteppedMarks marks;
  bool stepping = false; ///< A PTRACE_SINGLESTEP is outstanding.
  bool enabled = false;  ///< The writer is enabled (not in a syscall).
  /// Back from a syscall: enable the writer before the next instruction
  /// runs, wherever that is (a signal handler may come first).
  bool pendingEnable = false;
  bool alive = true;
  uint64_t ip = 0; ///< The instruction being (or about to be) stepped.
  ClassifiedInsn insn;
  int signalToDeliver = 0;
  bool deliveringToHandler = false; ///< The pending step enters a handler.
};

class Emulator {
public:
  Emulator(const EmulateOptions &options, std::unique_ptr<InsnClassifier> c)
      : options(options), classifier(std::move(c)) {}

  llvm::Expected<EmulateResult> run();

private:
  llvm::Expected<pid_t> launch(llvm::StringRef path);
  llvm::Error runToStart(Tracee &tracee, uint64_t startAddress);
  llvm::Error traceLoop(Tracee &tracee);
  llvm::Error handleStop(TracedThread &thread, int status);
  llvm::Error finishStep(TracedThread &thread, uint64_t nextIp);
  llvm::Error startThread(TracedThread &thread);
  llvm::Error stepThread(TracedThread &thread);
  llvm::Error stopEverything(Tracee &tracee, TracedThread *trigger);
  llvm::Error refreshModules();
  void assembleSnapshot(llvm::StringRef path);
  void addVdso(const std::vector<MapsEntry> &entries);
  /// A vdso larger than this is not one (it is a few pages).
  static constexpr uint64_t MaxVdsoBytes = 1 << 20;
  llvm::Expected<ClassifiedInsn> classifyAt(pid_t tid, uint64_t ip);
  llvm::Error logCode(TracedThread &thread);
  TracedThread &threadFor(pid_t tid);

  const EmulateOptions &options;
  std::unique_ptr<InsnClassifier> classifier;
  llvm::DenseMap<uint64_t, ClassifiedInsn> classified;
  /// The code outside files the threads ran, each version of it.
  SteppedCodeLog codeLog;
  std::map<std::string, std::string> buildIds;
  std::vector<std::unique_ptr<TracedThread>> threads;
  llvm::DenseMap<pid_t, TracedThread *> threadByTid;
  pid_t pid = 0;
  uint64_t stopAddress = 0;
  bool hasStop = false;
  bool stopRequested = false;
  TracedThread *trigger = nullptr;
  EmulateResult result;
};

} // namespace magic_trace::ptrace_detail

#endif
