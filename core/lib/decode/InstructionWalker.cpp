//===- InstructionWalker.cpp - A block's instructions, one by one ---------===//
//
// The lengths and bytes of the instructions a Block item covers, read with
// the code of the block's moment (ImageTimeline): what expandInstructions
// and the views (per-line counts, disassembly) need beyond the items.
//
//===----------------------------------------------------------------------===//
#include "Image.h"
#include "ImageTimeline.h"
#include "PieceDecoder.h"

#include "magic_trace/Decoder.h"
#include "magic_trace/InsnClassifier.h"

#include "llvm/ADT/DenseMap.h"

using namespace llvm;

namespace magic_trace {

struct InstructionWalker::Impl {
  std::unique_ptr<decode_detail::ImageTimeline> timeline;
  /// The code of the items' seq (the last Image item followed).
  uint64_t seq = 0;
  const PtImage *image = nullptr;
  /// Code outside files, as it was at `seq` (a timeline with a history).
  ReadMemoryFn reader;
  decode_detail::ImageTimeline::ReadCache readCache;
  decode_detail::ModeClassifiers classifiers;
  /// Instruction lengths at `seq`, one cache per execution mode.
  DenseMap<uint64_t, uint8_t> sizes[3];
};

InstructionWalker::InstructionWalker(std::unique_ptr<Impl> impl)
    : impl(std::move(impl)) {}
InstructionWalker::~InstructionWalker() = default;

Expected<std::unique_ptr<InstructionWalker>>
InstructionWalker::create(const Snapshot &snapshot,
                          const DecodeOptions &options) {
  auto impl = std::make_unique<Impl>();
  std::vector<ModuleImageStatus> ignored;
  auto timeline = decode_detail::ImageTimeline::build(
      snapshot, options.readMemory, ignored);
  if (!timeline)
    return timeline.takeError();
  impl->timeline = std::move(*timeline);
  Expected<const PtImage *> image = impl->timeline->imageAt(0);
  if (!image)
    return image.takeError();
  impl->image = *image;
  if (impl->timeline->versioned()) {
    Impl *state = impl.get();
    impl->reader = [state](uint64_t address, uint8_t *buffer, size_t size) {
      return state->timeline->read(address, state->seq, buffer, size,
                                   &state->readCache);
    };
  }
  return std::unique_ptr<InstructionWalker>(
      new InstructionWalker(std::move(impl)));
}

Error InstructionWalker::follow(const TraceItem &item) {
  if (item.kind != ItemKind::Image || item.ip == impl->seq)
    return Error::success();
  impl->seq = item.ip;
  Expected<const PtImage *> image = impl->timeline->imageAt(impl->seq);
  if (!image)
    return image.takeError();
  impl->image = *image;
  for (auto &cache : impl->sizes)
    cache.clear();
  return Error::success();
}

size_t InstructionWalker::read(uint64_t ip, uint8_t *buffer, size_t size) {
  return impl->image->read(ip, 0, buffer, size,
                           impl->reader ? &impl->reader : nullptr);
}

Expected<uint8_t> InstructionWalker::sizeAt(uint64_t ip, ExecMode mode) {
  uint8_t &size = impl->sizes[size_t(mode)][ip];
  if (size)
    return size;
  Expected<const InsnClassifier *> classifier = impl->classifiers.forMode(mode);
  if (!classifier)
    return classifier.takeError();
  uint8_t bytes[16] = {};
  size_t got = read(ip, bytes, 15);
  auto insn = (*classifier)->classify(ArrayRef<uint8_t>(bytes, got), ip);
  if (!insn)
    return insn.takeError();
  size = insn->size;
  return size;
}

Expected<std::vector<uint64_t>>
expandInstructions(const Snapshot &snapshot, const ThreadDecode &decode,
                   const DecodeOptions &options) {
  auto walker = InstructionWalker::create(snapshot, options);
  if (!walker)
    return walker.takeError();
  std::vector<uint64_t> addresses;
  addresses.reserve(decode.instructions);
  for (const TraceItem &item : decode.items) {
    if (Error error = (*walker)->follow(item))
      return std::move(error);
    if (item.kind != ItemKind::Block)
      continue;
    uint64_t ip = item.ip;
    for (uint32_t i = 0; i < item.detail; ++i) {
      addresses.push_back(ip);
      if (i + 1 == item.detail)
        break;
      Expected<uint8_t> size = (*walker)->sizeAt(ip, item.mode);
      if (!size)
        return size.takeError();
      ip += *size;
    }
  }
  return addresses;
}

} // namespace magic_trace
