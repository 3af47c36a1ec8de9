// Fuzzes the decoder and the model with mutated PT bytes against a fixed
// image (the emu_calls test program at its ASLR-off load address). Oracles:
// decoding never crashes, serial and 2-thread PSB-parallel decoding give the
// same items, and the model built from them satisfies validateModel.
//
// Only the PT bytes change from one input to the next, so everything derived
// from the image is built once: its code is read into memory at start-up and
// served through the decoder's read-memory callback (decodeSnapshot would
// otherwise map and parse the ELF file twice per input), and one symbolizer
// lives across inputs (rebuilt when its tables grow large). The file-backed
// image path is covered by the unit and lit tests instead (docs/fuzzing.md).
#include "FuzzSupport.h"
#include "magic_trace/Decoder.h"
#include "magic_trace/ModelBuilder.h"
#include "magic_trace/Symbolizer.h"
#include "magic_trace/TraceModel.h"
#include "magic_trace/VirtualClock.h"

#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <cstring>
#include <memory>

using namespace magic_trace;

namespace {

/// Where a PIE lands with ASLR off (the emulator disables ASLR, so seed
/// traces from it use the same address).
constexpr uint64_t LoadAddress = 0x555555554000ull;

[[noreturn]] void fail(const llvm::Twine &message) {
  llvm::errs() << "fuzz-decoder: " << message << "\n";
  abort();
}

/// The executable PT_LOAD segments of the image, copied into memory at their
/// runtime addresses.
class CodeImage {
public:
  explicit CodeImage(llvm::StringRef path) {
    auto binary = llvm::object::ObjectFile::createObjectFile(path);
    if (!binary)
      fail(path + ": " + llvm::toString(binary.takeError()) +
           " (build the emu_calls test input)");
    auto *elf =
        llvm::dyn_cast<llvm::object::ELF64LEObjectFile>(binary->getBinary());
    if (!elf)
      fail(path + ": not an x86-64 ELF file");
    auto headers = elf->getELFFile().program_headers();
    if (!headers)
      fail(path + ": " + llvm::toString(headers.takeError()));
    llvm::StringRef file = elf->getData();
    bool haveBias = false;
    uint64_t bias = 0;
    for (const auto &phdr : *headers) {
      if (phdr.p_type != llvm::ELF::PT_LOAD)
        continue;
      if (!haveBias) {
        bias = LoadAddress - (phdr.p_vaddr - phdr.p_offset);
        haveBias = true;
      }
      if (!(phdr.p_flags & llvm::ELF::PF_X) || !phdr.p_filesz ||
          phdr.p_offset + phdr.p_filesz > file.size())
        continue;
      llvm::StringRef bytes = file.substr(phdr.p_offset, phdr.p_filesz);
      segments.push_back({phdr.p_vaddr + bias, bytes.str()});
    }
    if (segments.empty())
      fail(path + ": no executable segment");
  }

  /// ReadMemoryFn over the copied segments; thread-safe (read-only). The
  /// decoder calls it for every instruction: not instrumented for coverage
  /// (it is the harness, and its comparisons were a fifth of the run time).
  __attribute__((no_sanitize("coverage"))) size_t read(uint64_t address,
                                                       uint8_t *buffer,
                                                       size_t size) const {
    for (const Segment &segment : segments) {
      if (address < segment.address ||
          address - segment.address >= segment.bytes.size())
        continue;
      size_t offset = address - segment.address;
      size_t count = std::min(size, segment.bytes.size() - offset);
      memcpy(buffer, segment.bytes.data() + offset, count);
      return count;
    }
    return 0;
  }

private:
  struct Segment {
    uint64_t address;
    std::string bytes;
  };
  std::vector<Segment> segments;
};

const CodeImage &codeImage() {
  static CodeImage image(MT_FUZZ_IMAGE);
  return image;
}

std::vector<Module> imageModules() {
  Module module;
  module.path = MT_FUZZ_IMAGE;
  module.loadAddress = LoadAddress;
  return {module};
}

/// A symbolizer of the image and the model whose string table it interns
/// into; kept across inputs so DWARF is parsed once, not per input.
struct Symbols {
  TraceModel model;
  Symbolizer symbolizer{imageModules(), model.strings};
};

/// The shared symbols, fresh once their tables have grown past a bound
/// (unknown addresses intern one string each).
Symbols &symbols() {
  static std::unique_ptr<Symbols> current;
  if (!current || current->model.strings.size() > 100000)
    current = std::make_unique<Symbols>();
  return *current;
}

/// A one-thread snapshot without modules: the code comes through the
/// read-memory callback.
Snapshot makeSnapshot() {
  Snapshot snapshot;
  snapshot.pid = 1;
  snapshot.cpu = emulatorCpu();
  snapshot.time = VirtualClock::conversion();
  snapshot.timing = VirtualClock::timing;
  ThreadTrace thread;
  thread.tid = 1;
  snapshot.threads.push_back(thread);
  return snapshot;
}

__attribute__((no_sanitize("coverage"))) size_t readImage(uint64_t address,
                                                          uint8_t *buffer,
                                                          size_t size) {
  return codeImage().read(address, buffer, size);
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

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  keepFreedMemory();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static Snapshot snapshot = makeSnapshot();
  snapshot.threads[0].bytes.assign(data, data + size);
  snapshot.threads[0].wrapped = size > 0 && data[0] & 1;

  DecodeOptions serialOptions;
  serialOptions.threads = 1;
  serialOptions.readMemory = readImage;
  llvm::Expected<DecodeResult> serial = decodeSnapshot(snapshot, serialOptions);
  if (!serial) {
    llvm::consumeError(serial.takeError());
    return 0;
  }
  DecodeOptions parallelOptions = serialOptions;
  parallelOptions.threads = 2;
  parallelOptions.minChunkBytes = 1; // Split at every PSB.
  llvm::Expected<DecodeResult> parallel =
      decodeSnapshot(snapshot, parallelOptions);
  if (!parallel)
    fail("parallel decode failed where serial succeeded: " +
         llvm::toString(parallel.takeError()));
  if (serial->threads.size() != parallel->threads.size() ||
      (!serial->threads.empty() &&
       !sameItems(serial->threads[0], parallel->threads[0])))
    fail("serial and parallel decodes differ");

  Symbols &shared = symbols();
  TraceModel &model = shared.model;
  model.threads.clear();
  buildTraceModel(
      model, snapshot, serial->threads,
      [&](uint64_t address) -> const SymbolRange & {
        return shared.symbolizer.lookup(address);
      },
      ModelOptions());
  if (llvm::Error invalid = validateModel(model))
    fail("model from decoded PT is invalid: " +
         llvm::toString(std::move(invalid)));
  return 0;
}
