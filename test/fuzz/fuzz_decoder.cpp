// Fuzzes the decoder and the model with mutated PT bytes against a fixed
// image (the emu_calls test program at its ASLR-off load address). Oracles:
// decoding never crashes, serial and 2-thread PSB-parallel decoding give the
// same items, and the model built from them satisfies validateModel.
#include "magic_trace/Decoder.h"
#include "magic_trace/ModelBuilder.h"
#include "magic_trace/Symbolizer.h"
#include "magic_trace/TraceModel.h"
#include "magic_trace/VirtualClock.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace magic_trace;

namespace {

/// The image: emu_calls, loaded where a PIE lands with ASLR off (the
/// emulator disables ASLR, so seed traces from it use the same address).
Snapshot makeSnapshot() {
  Snapshot snapshot;
  snapshot.pid = 1;
  snapshot.cpu = emulatorCpu();
  snapshot.time = VirtualClock::conversion();
  snapshot.timing = VirtualClock::timing;
  Module module;
  module.path = MT_FUZZ_IMAGE;
  module.loadAddress = 0x555555554000ull;
  snapshot.modules.push_back(module);
  ThreadTrace thread;
  thread.tid = 1;
  snapshot.threads.push_back(thread);
  return snapshot;
}

bool sameItems(const ThreadDecode &a, const ThreadDecode &b) {
  if (a.items.size() != b.items.size() || a.errors.size() != b.errors.size())
    return false;
  for (size_t i = 0; i < a.items.size(); ++i) {
    const TraceItem &x = a.items[i], &y = b.items[i];
    if (x.ip != y.ip || x.lastIp != y.lastIp || x.timeNs != y.timeNs ||
        x.detail != y.detail || x.kind != y.kind || x.lastClass != y.lastClass)
      return false;
  }
  return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static Snapshot snapshot = makeSnapshot();
  snapshot.threads[0].bytes.assign(data, data + size);
  snapshot.threads[0].wrapped = size > 0 && data[0] & 1;

  DecodeOptions serialOptions;
  serialOptions.threads = 1;
  llvm::Expected<DecodeResult> serial = decodeSnapshot(snapshot, serialOptions);
  if (!serial) {
    llvm::consumeError(serial.takeError());
    return 0;
  }
  DecodeOptions parallelOptions;
  parallelOptions.threads = 2;
  parallelOptions.minChunkBytes = 1; // Split at every PSB.
  llvm::Expected<DecodeResult> parallel =
      decodeSnapshot(snapshot, parallelOptions);
  if (!parallel) {
    llvm::errs() << "parallel decode failed where serial succeeded: "
                 << llvm::toString(parallel.takeError()) << "\n";
    abort();
  }
  if (serial->threads.size() != parallel->threads.size() ||
      (!serial->threads.empty() &&
       !sameItems(serial->threads[0], parallel->threads[0]))) {
    llvm::errs() << "serial and parallel decodes differ\n";
    abort();
  }

  TraceModel model;
  Symbolizer symbolizer(snapshot.modules, model.strings);
  buildTraceModel(model, snapshot, serial->threads, symbolizer, ModelOptions());
  if (llvm::Error invalid = validateModel(model)) {
    llvm::errs() << "model from decoded PT is invalid: "
                 << llvm::toString(std::move(invalid)) << "\n";
    abort();
  }
  return 0;
}
