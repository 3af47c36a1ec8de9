// Fuzzes the code history of a bundle (magic-trace.json's codeHistory,
// threads[].imageMarks and code.bin; BundleHistory.h; issue 50): the input
// is split at its first NUL byte into magic-trace.json and code.bin, loaded
// beside a fixed trace.json of one thread (tid 1) with a small PT file. Any
// input must give a snapshot whose history and marks are consistent, or one
// error line; never a crash or a read outside code.bin (ASan).
#include "FuzzSupport.h"
#include "magic_trace/Bundle.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <string>

namespace {

void writeFile(const std::string &path, llvm::StringRef contents) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (!ec)
    os << contents;
}

/// A scratch bundle on tmpfs when there is one (the fuzz_bundle target's
/// reason), removed at exit.
std::string bundleDir() {
  static std::string dir = [] {
    llvm::SmallString<128> path;
    std::error_code failed = std::make_error_code(std::errc::io_error);
    if (llvm::sys::fs::is_directory("/dev/shm")) {
      llvm::sys::fs::createUniquePath("/dev/shm/mt-fuzz-history-%%%%%%", path,
                                      /*MakeAbsolute=*/false);
      failed = llvm::sys::fs::create_directory(path, /*IgnoreExisting=*/false);
    }
    if (failed && llvm::sys::fs::createUniqueDirectory("mt-fuzz-history", path))
      abort();
    static std::string created = path.str().str();
    atexit([] { llvm::sys::fs::remove_directories(created); });
    llvm::sys::fs::create_directories(path + "/threads");
    // A PSB and PSBEND: a minimal valid PT buffer of 18 bytes.
    writeFile((path + "/threads/1.intelpt_trace").str(),
              llvm::StringRef("\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02"
                              "\x82\x02\x82\x02\x82\x02\x23",
                              18));
    writeFile((path + "/trace.json").str(), R"({
  "type": "intel-pt",
  "cpuInfo": {"vendor": "GenuineIntel", "family": 6, "model": 85,
              "stepping": 4},
  "processes": [{"pid": 1, "triple": "x86_64-unknown-linux-gnu",
                 "threads": [{"tid": 1,
                              "iptTrace": "threads/1.intelpt_trace"}],
                 "modules": []}],
  "tscPerfZeroConversion": {"timeMult": 1, "timeShift": 0, "timeZero": 0}
})");
    return path.str().str();
  }();
  return dir;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  magic_trace::keepFreedMemory();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef input(reinterpret_cast<const char *>(data), size);
  auto [extras, bin] = input.split('\0');
  std::string dir = bundleDir();
  writeFile(dir + "/magic-trace.json", extras);
  writeFile(dir + "/code.bin", bin);
  llvm::Expected<magic_trace::Snapshot> snapshot = magic_trace::loadBundle(dir);
  if (!snapshot) {
    llvm::consumeError(snapshot.takeError());
    return 0;
  }
  // What the loader accepted is a consistent history, and each mark names
  // a byte of its thread's trace and a seq up to the last change.
  if (!magic_trace::historyProblem(snapshot->code).empty())
    abort();
  for (const magic_trace::ThreadTrace &thread : snapshot->threads)
    for (const magic_trace::ImageMark &mark : thread.imageMarks)
      if (mark.offset > thread.bytes.size() ||
          mark.seq >
              std::max(snapshot->code.lastSeq(), snapshot->code.logLastSeq))
        abort();
  return 0;
}
