// Fuzzes the perf map parser (JitRecords.h; issue 50): /tmp/perf-PID.map's
// text, which any JIT, or another user, may have written. Any input must
// give symbols whose ranges are real and whose names are bounded, never a
// crash.
#include "FuzzSupport.h"
#include "magic_trace/JitRecords.h"

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  magic_trace::keepFreedMemory();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  for (const magic_trace::JitSymbol &symbol : magic_trace::parsePerfMap(text))
    if (symbol.name.empty() ||
        symbol.name.size() > magic_trace::kMaxJitNameLength ||
        !magic_trace::badCodeRange(symbol.address, symbol.size).empty())
      abort();
  return 0;
}
