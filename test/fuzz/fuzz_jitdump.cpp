// Fuzzes the jitdump reader (JitRecords.h; perf's
// tools/perf/Documentation/jitdump-specification.txt; issue 50): node
// --perf-prof's binary records. Any input must give loads whose bytes are
// their records' and whose ranges are real, or one error line; never a
// crash or a read past the input (ASan).
#include "FuzzSupport.h"
#include "magic_trace/JitRecords.h"

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  magic_trace::keepFreedMemory();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::Expected<magic_trace::JitDump> dump =
      magic_trace::parseJitDump(llvm::ArrayRef<uint8_t>(data, size), "fuzz");
  if (!dump) {
    llvm::consumeError(dump.takeError());
    return 0;
  }
  uint64_t bytes = 0;
  for (const magic_trace::JitCodeLoad &load : dump->loads) {
    bytes += load.bytes.size();
    if (load.symbol.size != load.bytes.size() ||
        !magic_trace::badCodeRange(load.address, load.bytes.size()).empty())
      abort();
  }
  if (bytes > magic_trace::kMaxHistoryCodeBytes)
    abort();
  return 0;
}
