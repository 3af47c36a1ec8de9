// Fuzzes the perf.data reader: any input must give a Snapshot or a one-line
// error, never a crash or a read past the buffer. A file it accepts is
// written again and must read back (the writer's output is always valid).
#include "FuzzSupport.h"
#include "magic_trace/PerfData.h"

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  magic_trace::keepFreedMemory();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::ArrayRef<uint8_t> bytes(data, size);
  for (bool requireTrace : {true, false}) {
    magic_trace::PerfDataReadOptions options;
    options.requireTrace = requireTrace;
    llvm::Expected<magic_trace::Snapshot> snapshot =
        magic_trace::parsePerfData(bytes, options);
    if (!snapshot) {
      llvm::consumeError(snapshot.takeError());
      continue;
    }
    std::vector<uint8_t> again = magic_trace::buildPerfData(*snapshot);
    llvm::Expected<magic_trace::Snapshot> reread =
        magic_trace::parsePerfData(again, options);
    if (!reread)
      abort(); // The writer wrote a file its reader refuses.
  }
  return 0;
}
