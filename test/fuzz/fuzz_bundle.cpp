// Fuzzes the bundle loader: the input is split at the first NUL byte into
// trace.json and magic-trace.json (our extras), written next to a small PT
// file, and loaded. Any input must give a Snapshot or an error, never a crash.
#include "FuzzSupport.h"
#include "magic_trace/Bundle.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace {

/// A scratch bundle directory, on tmpfs (/dev/shm) when there is one: each
/// input rewrites its files, and on a disk file system the truncations cost
/// far more than the loader does. Removed at exit.
std::string bundleDir() {
  static std::string dir = [] {
    llvm::SmallString<128> path;
    std::error_code failed = std::make_error_code(std::errc::io_error);
    if (llvm::sys::fs::is_directory("/dev/shm")) {
      llvm::sys::fs::createUniquePath("/dev/shm/mt-fuzz-bundle-%%%%%%", path,
                                      /*MakeAbsolute=*/false);
      failed = llvm::sys::fs::create_directory(path, /*IgnoreExisting=*/false);
    }
    if (failed && llvm::sys::fs::createUniqueDirectory("mt-fuzz-bundle", path))
      return std::string("/tmp");
    static std::string created = path.str().str();
    atexit([] { llvm::sys::fs::remove_directories(created); });
    llvm::sys::fs::create_directories(path + "/threads");
    std::error_code ec;
    llvm::raw_fd_ostream pt((path + "/threads/1.intelpt_trace").str(), ec);
    // A PSB and PSBEND: a minimal valid PT buffer.
    const char psb[] = "\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02"
                       "\x82\x02\x82\x02\x23";
    pt.write(psb, sizeof(psb) - 1);
    return path.str().str();
  }();
  return dir;
}

void writeFile(const std::string &path, llvm::StringRef contents) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (!ec)
    os << contents;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  magic_trace::keepFreedMemory();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef input(reinterpret_cast<const char *>(data), size);
  auto [traceJson, extras] = input.split('\0');
  std::string dir = bundleDir();
  writeFile(dir + "/trace.json", traceJson);
  if (input.contains('\0'))
    writeFile(dir + "/magic-trace.json", extras);
  else
    llvm::sys::fs::remove(dir + "/magic-trace.json");
  llvm::Expected<magic_trace::Snapshot> snapshot = magic_trace::loadBundle(dir);
  if (!snapshot)
    llvm::consumeError(snapshot.takeError());
  return 0;
}
