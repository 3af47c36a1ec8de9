// Fuzzes the model builder with arbitrary item streams (blocks, calls,
// returns, jumps, enable/disable, overflows, errors) over fake symbols and an
// arbitrary stop context. Oracle: the model always satisfies validateModel
// (every begin has an end, children nest in parents, segments are ordered).
#include "FuzzSupport.h"
#include "magic_trace/ModelBuilder.h"
#include "magic_trace/TraceModel.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <map>

using namespace magic_trace;

namespace {

/// Fake symbols: 16 functions of 0x100 bytes at 0x1000..0x2000, the middle
/// of each an inlined callee; everything else is unknown, 0x100 at a time.
class FakeSymbols {
public:
  explicit FakeSymbols(StringTable &strings) : strings(strings) {}

  const SymbolRange &lookup(uint64_t address) {
    bool inlined = (address & 0xff) >= 0x40 && (address & 0xff) < 0x80;
    uint64_t key = (address & ~uint64_t(0x3f)) | inlined;
    auto [it, inserted] = cache.try_emplace(key);
    SymbolRange &range = it->second;
    if (!inserted)
      return range;
    uint64_t function = address & ~uint64_t(0xff);
    range.begin = address & ~uint64_t(0x3f);
    range.end = range.begin + 0x40;
    bool known = address >= 0x1000 && address < 0x2000;
    range.functionEntry = known ? function : 0;
    range.module = strings.intern("fake");
    SymbolFrame outer;
    outer.function = strings.intern((known ? "f" : "[unknown] ") +
                                    std::to_string(function >> 8));
    range.frames.push_back(outer);
    range.unknown = !known;
    if (known && inlined) {
      SymbolFrame inner;
      inner.function = strings.intern("inl" + std::to_string(function >> 8));
      inner.inlined = true;
      range.frames.push_back(inner);
    }
    return range;
  }

private:
  StringTable &strings;
  std::map<uint64_t, SymbolRange> cache;
};

uint64_t address(InputStream &in) {
  // Mostly inside the known functions, sometimes outside.
  uint8_t high = in.byte();
  uint8_t low = in.byte();
  if (high >= 0xf0)
    return 0x9000 + low;
  return 0x1000 + ((high & 0x0f) << 8) + low;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  keepFreedMemory();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  InputStream in{data, size};
  ThreadDecode decode;
  decode.tid = 7;
  uint64_t now = 1000;
  unsigned count = in.byte();
  for (unsigned i = 0; i < count && in.size; ++i) {
    uint8_t op = in.byte();
    TraceItem item;
    item.timeNs = now += op % 13;
    switch (op % 8) {
    case 0:
    case 1:
    case 2:
    case 3: {
      item.kind = ItemKind::Block;
      item.ip = address(in);
      item.lastIp = item.ip + in.byte() % 0x30;
      item.detail = 1 + (item.lastIp - item.ip) / 4;
      item.lastClass = static_cast<BranchClass>(in.byte() % 10);
      decode.instructions += item.detail;
      break;
    }
    case 4:
      item.kind = ItemKind::Enable;
      item.ip = address(in);
      break;
    case 5:
      item.kind = ItemKind::Disable;
      item.ip = in.byte() & 1 ? address(in) : 0;
      break;
    case 6:
      item.kind = ItemKind::Overflow;
      item.ip = address(in);
      break;
    default: {
      item.kind = ItemKind::Error;
      item.ip = address(in);
      item.detail = uint32_t(decode.errors.size());
      DecodeError error;
      error.offset = i;
      error.code = -int(in.byte() % 30);
      error.message = "fuzzed error";
      decode.errors.push_back(error);
      break;
    }
    }
    decode.items.push_back(item);
  }
  ThreadStop stop;
  stop.tid = 7;
  unsigned frames = in.byte() % 6;
  for (unsigned i = 0; i < frames; ++i)
    stop.frames.push_back(address(in));

  TraceModel model;
  FakeSymbols symbols(model.strings);
  ModelOptions options;
  options.stitch = in.byte() & 1;
  options.anchor = in.byte() & 1;
  ThreadModel thread = buildThreadModel(
      decode,
      [&](uint64_t a) -> const SymbolRange & { return symbols.lookup(a); },
      frames ? &stop : nullptr, model.strings, options);
  model.threads.push_back(std::move(thread));
  if (llvm::Error invalid = validateModel(model)) {
    llvm::errs() << "invalid model: " << llvm::toString(std::move(invalid))
                 << "\n";
    abort();
  }
  return 0;
}
