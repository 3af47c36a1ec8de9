// Unit tests for the ptrace stepper on the test programs, with a writer that
// records what it is told: the writer must see exactly the ground truth, REP
// iterations fold into one instruction, threads are followed, dlopen'ed
// libraries join the module list, and the stop context unwinds to main.
#include "magic_trace/PtraceStepper.h"
#include "magic_trace/Bundle.h"
#include "magic_trace/ProcessModules.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <string>

using namespace magic_trace;

namespace {

std::string inputPath(const std::string &name) {
  return std::string(MT_TEST_BINARY_DIR) + "/inputs/" + name;
}

/// Remembers every call; packet encoding is PacketWriter's own tests' job.
class RecordingWriter : public PacketWriter {
public:
  struct Log {
    std::vector<std::string> calls; ///< "enable 0x..", "step 0x..", ...
    std::vector<uint64_t> steps;
  };
  explicit RecordingWriter(Log &log)
      : PacketWriter(Options()), log(log),
        ring(llvm::cantFail(RingBuffer::create(4096))) {}

  llvm::Error enable(uint64_t ip) override {
    log.calls.push_back("enable " + llvm::utohexstr(ip));
    return llvm::Error::success();
  }
  llvm::Error step(const ExecutedInsn &insn) override {
    log.steps.push_back(insn.ip);
    if (insn.branch == BranchClass::Syscall)
      log.calls.push_back("syscall " + llvm::utohexstr(insn.ip));
    return llvm::Error::success();
  }
  llvm::Error stepRunWithPackets(uint64_t, uint64_t,
                                 const ExecutedInsn &) override {
    return llvm::createStringError("the stepper steps one instruction");
  }
  llvm::Error markLoss(uint64_t, uint64_t) override {
    return llvm::createStringError("the stepper never loses instructions");
  }
  llvm::Error interrupt(uint64_t ip) override {
    log.calls.push_back("interrupt " + llvm::utohexstr(ip));
    return llvm::Error::success();
  }
  llvm::Error disable(uint64_t ip) override {
    log.calls.push_back("disable " + llvm::utohexstr(ip));
    return llvm::Error::success();
  }
  llvm::Expected<uint64_t> sync() override {
    log.calls.push_back("sync");
    return 0;
  }
  const RingBuffer &buffer() const override { return ring; }
  TimeConversion timeConversion() const override { return {}; }
  uint64_t instructions() const override { return log.steps.size(); }
  std::vector<std::pair<uint64_t, uint64_t>> lostInstructions() const override {
    return {};
  }

private:
  Log &log;
  RingBuffer ring;
};

struct EmulatedRun {
  EmulateResult result;
  std::deque<RecordingWriter::Log> logs; ///< In thread creation order.
};

EmulatedRun emulate(std::vector<std::string> argv,
                    std::string stop = "stop_here") {
  EmulatedRun run;
  EmulateOptions options;
  options.argv = std::move(argv);
  options.stop = stop;
  options.maxInsns = 200000;
  options.makeWriter = [&run](const PacketWriter::Options &)
      -> llvm::Expected<std::unique_ptr<PacketWriter>> {
    run.logs.emplace_back();
    return std::make_unique<RecordingWriter>(run.logs.back());
  };
  llvm::Expected<EmulateResult> result = emulateProgram(options);
  if (!result) {
    ADD_FAILURE() << llvm::toString(result.takeError());
    return run;
  }
  run.result = std::move(*result);
  return run;
}

uint64_t exeBias(const EmulateResult &result, const std::string &path) {
  for (const Module &module : result.snapshot.modules)
    if (llvm::StringRef(module.path).ends_with(path))
      return module.loadAddress;
  return 0;
}

TEST(PtraceStepper, WriterSeesExactlyTheGroundTruth) {
  EmulatedRun run = emulate({inputPath("emu_calls")});
  ASSERT_EQ(run.result.end, EmulateEnd::StopHit);
  ASSERT_EQ(run.result.truth.size(), 1u);
  const ThreadTruth &truth = run.result.truth[0];
  EXPECT_EQ(run.logs[0].steps, truth.insns);
  uint64_t bias = exeBias(run.result, "/emu_calls");
  uint64_t mainAddress =
      llvm::cantFail(findElfSymbol(inputPath("emu_calls"), "main")) + bias;
  uint64_t stopAddress =
      llvm::cantFail(findElfSymbol(inputPath("emu_calls"), "stop_here")) + bias;
  ASSERT_FALSE(truth.insns.empty());
  EXPECT_EQ(truth.insns.front(), mainAddress);
  // The trace starts at main and ends with the call into stop_here, which
  // has not run yet.
  EXPECT_EQ(run.logs[0].calls.front(),
            "enable " + llvm::utohexstr(mainAddress));
  EXPECT_EQ(run.logs[0].calls.back(),
            "disable " + llvm::utohexstr(stopAddress));
  ASSERT_GE(truth.events.size(), 2u);
  const TruthEvent &lastCall = truth.events[truth.events.size() - 2];
  EXPECT_EQ(lastCall.kind, TruthEventKind::Call);
  EXPECT_EQ(lastCall.to, stopAddress);
  EXPECT_EQ(truth.events.back().kind, TruthEventKind::Disable);
  EXPECT_EQ(truth.events.back().index, truth.insns.size());
  EXPECT_EQ(run.result.instructions, truth.insns.size());
}

TEST(PtraceStepper, HexAddressesAreLinkTimeAddressesOfTheExecutable) {
  std::string exe = inputPath("emu_calls");
  EmulatedRun bySymbol = emulate({exe});
  EmulateOptions options;
  options.argv = {exe};
  options.start =
      "0x" + llvm::utohexstr(llvm::cantFail(findElfSymbol(exe, "main")));
  options.stop =
      "0x" + llvm::utohexstr(llvm::cantFail(findElfSymbol(exe, "stop_here")));
  llvm::Expected<EmulateResult> byAddress = emulateProgram(options);
  ASSERT_TRUE(bool(byAddress)) << llvm::toString(byAddress.takeError());
  ASSERT_EQ(byAddress->truth.size(), 1u);
  ASSERT_EQ(bySymbol.result.truth.size(), 1u);
  EXPECT_EQ(byAddress->truth[0].insns, bySymbol.result.truth[0].insns);
}

TEST(PtraceStepper, RepIterationsFoldIntoOneInstruction) {
  EmulatedRun run = emulate({inputPath("emu_rep")});
  ASSERT_EQ(run.result.truth.size(), 1u);
  const std::vector<uint64_t> &insns = run.result.truth[0].insns;
  // rep movsb of 64 bytes traps 64 times at one IP: the program has no
  // instruction that jumps to itself, so no IP may repeat back to back.
  EXPECT_EQ(std::adjacent_find(insns.begin(), insns.end()), insns.end());
  EXPECT_GE(run.result.singleSteps, insns.size() + 63);
}

TEST(PtraceStepper, FollowsTheSecondThreadToItsExit) {
  EmulatedRun run = emulate({inputPath("emu_thread")});
  ASSERT_EQ(run.result.end, EmulateEnd::StopHit);
  ASSERT_EQ(run.result.truth.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(run.logs[i].steps, run.result.truth[i].insns);
  const ThreadTruth &worker = run.result.truth[1];
  EXPECT_NE(worker.tid, run.result.truth[0].tid);
  // The worker ends in the exit syscall; tracing was never re-enabled.
  ASSERT_FALSE(worker.events.empty());
  EXPECT_EQ(worker.events.back().kind, TruthEventKind::Syscall);
  EXPECT_EQ(worker.events.back().index + 1, worker.insns.size());
  EXPECT_EQ(run.result.snapshot.stop.size(), 1u); // The worker is gone.
}

TEST(PtraceStepper, DlopenedLibraryJoinsTheModuleList) {
  std::string library = inputPath("libemu_plugin.so");
  EmulatedRun run = emulate({inputPath("emu_dlopen"), library});
  ASSERT_EQ(run.result.end, EmulateEnd::StopHit);
  const Module *plugin = nullptr;
  for (const Module &module : run.result.snapshot.modules)
    if (llvm::StringRef(module.path).ends_with("/libemu_plugin.so"))
      plugin = &module;
  ASSERT_NE(plugin, nullptr);
  EXPECT_EQ(plugin->buildId, readBuildId(library));
  EXPECT_FALSE(plugin->buildId.empty());
  EXPECT_TRUE(std::any_of(plugin->segments.begin(), plugin->segments.end(),
                          [](const LoadedSegment &s) { return s.executable; }));
}

TEST(PtraceStepper, StopContextUnwindsThroughMainToStart) {
  EmulatedRun run = emulate({inputPath("emu_calls")});
  ASSERT_EQ(run.result.snapshot.stop.size(), 1u);
  const ThreadStop &stop = run.result.snapshot.stop[0];
  EXPECT_TRUE(stop.triggered);
  uint64_t bias = exeBias(run.result, "/emu_calls");
  std::string exe = inputPath("emu_calls");
  ASSERT_GE(stop.frames.size(), 3u);
  EXPECT_EQ(stop.frames[0],
            llvm::cantFail(findElfSymbol(exe, "stop_here")) + bias);
  // frames[1] is the return address in main (stop_here is called from
  // main, which is longer than 16 bytes); the outermost frame is in _start.
  uint64_t mainAddress = llvm::cantFail(findElfSymbol(exe, "main")) + bias;
  EXPECT_GT(stop.frames[1], mainAddress + 16);
  EXPECT_LT(stop.frames[1], mainAddress + 0x400);
  uint64_t startAddress = llvm::cantFail(findElfSymbol(exe, "_start")) + bias;
  EXPECT_GT(stop.frames.back(), startAddress);
  EXPECT_LT(stop.frames.back(), startAddress + 0x40);
}

TEST(PtraceStepper, RealPacketsRoundTripThroughTheBundle) {
  // The real PacketWriter this time: the snapshot the CLI writes must load
  // back unchanged (PT bytes, modules, stop context).
  EmulateOptions options;
  options.argv = {inputPath("emu_thread")};
  options.stop = "late_start";
  llvm::Expected<EmulateResult> result = emulateProgram(options);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  const Snapshot &written = result->snapshot;
  ASSERT_EQ(written.threads.size(), 2u);
  for (const ThreadTrace &thread : written.threads)
    EXPECT_FALSE(thread.bytes.empty());

  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("mt-emulate", dir));
  ASSERT_FALSE(bool(writeBundle(written, dir)));
  llvm::Expected<Snapshot> loaded = loadBundle(dir);
  ASSERT_TRUE(bool(loaded)) << llvm::toString(loaded.takeError());
  ASSERT_EQ(loaded->threads.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(loaded->threads[i].tid, written.threads[i].tid);
    EXPECT_EQ(loaded->threads[i].bytes, written.threads[i].bytes);
  }
  ASSERT_EQ(loaded->stop.size(), written.stop.size());
  for (size_t i = 0; i < written.stop.size(); ++i) {
    EXPECT_EQ(loaded->stop[i].frames, written.stop[i].frames);
    EXPECT_EQ(loaded->stop[i].triggered, written.stop[i].triggered);
  }
  ASSERT_EQ(loaded->modules.size(), written.modules.size());
  for (size_t i = 0; i < written.modules.size(); ++i) {
    EXPECT_EQ(loaded->modules[i].buildId, written.modules[i].buildId);
    EXPECT_EQ(loaded->modules[i].loadAddress, written.modules[i].loadAddress);
    EXPECT_EQ(loaded->modules[i].segments.size(),
              written.modules[i].segments.size());
  }
  llvm::sys::fs::remove_directories(dir);
}

TEST(PtraceStepper, ErrorsSayWhatToDo) {
  EmulateOptions options;
  options.argv = {"/nonexistent/program"};
  llvm::Expected<EmulateResult> missing = emulateProgram(options);
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("does not exist"),
            std::string::npos);

  options.argv = {inputPath("emu_calls")};
  options.start = "no_such_function";
  llvm::Expected<EmulateResult> noSymbol = emulateProgram(options);
  ASSERT_FALSE(bool(noSymbol));
  EXPECT_NE(llvm::toString(noSymbol.takeError()).find("not found"),
            std::string::npos);

  // emu_dlopen without its argument returns from main before stop_here.
  options.argv = {inputPath("emu_dlopen")};
  options.start = "stop_here";
  llvm::Expected<EmulateResult> exited = emulateProgram(options);
  ASSERT_FALSE(bool(exited));
  EXPECT_NE(llvm::toString(exited.takeError()).find("before reaching"),
            std::string::npos);
}

} // namespace
