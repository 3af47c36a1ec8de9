// Fuzzes the QEMU recorder's code log reader (QemuRings.h, "the code log";
// issue 50): the input is split at its first NUL byte into code.log and
// code.bin. Any input must give a history or one error line, never a crash,
// a read outside code.bin (ASan) or a history that breaks the limits
// CodeHistory.h promises.
#include "FuzzSupport.h"
#include "magic_trace/QemuRings.h"

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  magic_trace::keepFreedMemory();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef input(reinterpret_cast<const char *>(data), size);
  auto [log, bin] = input.split('\0');
  magic_trace::CodeHistory history;
  llvm::Error error =
      magic_trace::parseQemuCodeLog(log, bin, "fuzz", /*lastSeq=*/0, history);
  if (error) {
    llvm::consumeError(std::move(error));
    return 0;
  }
  // What the parser accepted is a consistent history.
  if (!magic_trace::historyProblem(history).empty())
    abort();
  return 0;
}
