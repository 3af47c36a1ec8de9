//===- PipelineTest.cpp - runPipeline / writeTrace on emulated snapshots --===//
#include "magic_trace/Pipeline.h"
#include "magic_trace/PtraceStepper.h"
#include "magic_trace/TraceWriters.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "gtest/gtest.h"

#include <algorithm>

using namespace magic_trace;

namespace {

std::string inputPath(const char *name) {
  return std::string(MT_TEST_BINARY_DIR) + "/inputs/" + name;
}

/// emu_calls traced from main to stop_here by the ptrace emulator.
EmulateResult recordCalls() {
  EmulateOptions options;
  options.argv = {inputPath("emu_calls")};
  options.stop = "stop_here";
  llvm::Expected<EmulateResult> result = emulateProgram(options);
  if (!result) {
    ADD_FAILURE() << llvm::toString(result.takeError());
    return {};
  }
  return std::move(*result);
}

uint64_t truthCalls(const ThreadTruth &truth) {
  return std::count_if(truth.events.begin(), truth.events.end(),
                       [](const TruthEvent &event) {
                         return event.kind == TruthEventKind::Call;
                       });
}

TEST(PipelineTest, SummaryMatchesGroundTruth) {
  EmulateResult recorded = recordCalls();
  ASSERT_EQ(recorded.snapshot.threads.size(), 1u);
  llvm::Expected<PipelineResult> result =
      runPipeline(recorded.snapshot, PipelineOptions());
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  EXPECT_FALSE(bool(validateModel(result->model)));
  ASSERT_EQ(result->threads.size(), 1u);
  const ThreadSummary *main = result->mainThread();
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->tid, recorded.snapshot.threads[0].tid);
  EXPECT_EQ(main->errors, 0u);
  // Every instruction the emulator executed was decoded, and every call.
  EXPECT_EQ(main->instructions, recorded.truth[0].insns.size());
  EXPECT_EQ(main->calls, truthCalls(recorded.truth[0]));
  EXPECT_GT(main->endNs, main->beginNs);
  EXPECT_EQ(main->traceBytes, recorded.snapshot.threads[0].bytes.size());
}

TEST(PipelineTest, StreamedAndOverlappedModelsAreTheSame) {
  // --threads 1 streams decode into the model on one thread; 2 threads
  // overlap a one-thread trace's decode and model through a queue. Tiny
  // batches put a batch boundary between every two items.
  EmulateResult recorded = recordCalls();
  std::string expected;
  for (unsigned threads : {1u, 2u}) {
    for (size_t batch : {size_t(1), size_t(7), size_t(65536)}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + ", batch " +
                   std::to_string(batch));
      PipelineOptions options;
      options.decode.threads = threads;
      options.decode.batchItems = batch;
      llvm::Expected<PipelineResult> result =
          runPipeline(recorded.snapshot, options);
      ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
      EXPECT_EQ(result->threads[0].instructions,
                recorded.truth[0].insns.size());
      std::string tree = renderTree(result->model);
      if (expected.empty())
        expected = tree;
      EXPECT_EQ(tree, expected);
    }
  }
  EXPECT_FALSE(expected.empty());
}

TEST(PipelineTest, WritesEveryFormat) {
  EmulateResult recorded = recordCalls();
  llvm::Expected<PipelineResult> result =
      runPipeline(recorded.snapshot, PipelineOptions());
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("pipeline-test", dir));
  for (const OutputFormat &format : outputFormats()) {
    std::string name = format.name.str();
    llvm::SmallString<128> path(dir);
    llvm::sys::path::append(path, "out" + format.suffix);
    ASSERT_FALSE(bool(writeTrace(result->model, path, format))) << name;
    auto buffer = llvm::MemoryBuffer::getFile(path);
    ASSERT_TRUE(bool(buffer));
    EXPECT_GT((*buffer)->getBufferSize(), 0u) << name;
    if (format.gzip) // RFC 1952's magic bytes.
      EXPECT_TRUE((*buffer)->getBuffer().starts_with("\x1f\x8b")) << name;
    if (name == "folded")
      EXPECT_NE((*buffer)->getBuffer().find("fib(int);fib(int)"),
                llvm::StringRef::npos);
    llvm::sys::fs::remove(path);
  }
  llvm::sys::fs::remove(dir);
}

TEST(PipelineTest, BadFormatAndUnwritablePath) {
  llvm::Expected<OutputFormat> bad = outputFormatNamed("svg");
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "unknown output format 'svg' (use fxt, fxt.gz, json, json.gz, "
            "folded or text)");
  llvm::Expected<OutputFormat> fxt = outputFormatNamed("fxt");
  ASSERT_TRUE(bool(fxt));
  PipelineResult empty;
  llvm::Error error = writeTrace(empty.model, "/nonexistent-dir/x.fxt", *fxt);
  ASSERT_TRUE(bool(error));
  EXPECT_NE(llvm::toString(std::move(error)).find("cannot write"),
            std::string::npos);
}

} // namespace
