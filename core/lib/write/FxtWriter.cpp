//===- FxtWriter.cpp - Fuchsia trace format writer ------------------------===//
//
// The model walked into Fuchsia trace format records (FxtEncoder.h has the
// records): a thread record and kernel objects per thread, a slice per
// frame at its display times (DisplayClock.h), instants for gaps, errors and
// the window's start.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/FxtWriter.h"

#include "DisplayClock.h"
#include "FxtEncoder.h"
#include "ValidatedWriters.h"

#include "llvm/Support/CRC.h"
#include "llvm/Support/Compression.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace magic_trace {
namespace {

using namespace fxt_encoding;

/// Writes the whole model; the encoder owns the tables.
class ModelWriter {
public:
  ModelWriter(const TraceModel &model, llvm::raw_ostream &os,
              const FxtOptions &options)
      : model(model), enc(os, model.strings, own), options(options) {}

  void write() {
    enc.magicNumber();
    enc.initialization(TicksPerSecond);
    category = {enc.pin(options.category), {}};
    argAddress = {enc.pin("address"), {}};
    argFile = {enc.pin("file"), {}};
    argLine = {enc.pin("line"), {}};
    argInlined = {enc.pin("inlined"), {}};
    argProcess = {enc.pin("process"), {}};
    argReason = {enc.pin("reason"), {}};
    gapName = {enc.pin("[gap]"), {}};
    stitchedGapName = {enc.pin("[gap, stitched]"), {}};
    argSite = {enc.pin("site"), {}};
    argClock = {enc.pin("clock"), {}};
    estimatedName = {enc.pin(EstimatedTimesName), {}};
    // Only a cut model's file has them: a whole trace's file is as it was
    // before windows.
    if (!model.windowNote.empty()) {
      argWindow = {enc.pin("window"), {}};
      windowStartName = {enc.pin(WindowStartName), {}};
    }
    kindCategory[size_t(FrameKind::Physical)] = category;
    for (FrameKind kind :
         {FrameKind::Inlined, FrameKind::Untraced, FrameKind::Syscall,
          FrameKind::DecodeError, FrameKind::Unknown})
      kindCategory[size_t(kind)] = {
          enc.pin(options.category + "," + frameKindName(kind)), {}};

    std::string storage;
    enc.kernelObject(ProcessObject, model.pid,
                     FxtEncoder::inlineString(model.processName, storage), {});
    // Each thread's displayed times are placed a thread ahead, on another
    // core while the thread before is written, when the model is big.
    bool ahead = frameWorkers(model) > 1;
    size_t count = model.threads.size();
    Placed placed[2];
    if (count)
      place(model.threads[0], placed[0]);
    for (size_t i = 0; i < count; ++i) {
      Placed &following = placed[(i + 1) % 2];
      std::thread helper;
      if (ahead && i + 1 < count)
        helper = std::thread(
            [&, next = i + 1] { place(model.threads[next], following); });
      writeThread(model.threads[i], i, placed[i % 2]);
      if (helper.joinable())
        helper.join();
      else if (i + 1 < count)
        place(model.threads[i + 1], following);
    }
  }

private:
  /// A thread's displayed times: a clock per segment (DisplayClock.h).
  using Placed = std::vector<writers::DisplayClock>;

  /// Places each of `thread`'s segments on its clock in `clocks` (whose
  /// buffers are reused from thread to thread).
  static void place(const ThreadModel &thread, Placed &clocks) {
    if (clocks.size() < thread.segments.size())
      clocks.resize(thread.segments.size());
    for (size_t s = 0; s < thread.segments.size(); ++s) {
      if (s == 0)
        clocks[s].reset();
      else
        clocks[s].resume(clocks[s - 1]);
      clocks[s].place(thread.segments[s]);
    }
  }

  void writeThread(const ThreadModel &thread, size_t index, Placed &clocks) {
    // More than 255 threads: thread slots are re-bound. Each thread's events
    // are written together right after its thread record, so a slot always
    // names the thread being written.
    uint8_t slot = uint8_t(index % fxt::MaxThreadIndex + 1);
    enc.threadRecord(slot, model.pid, thread.tid);
    std::string storage, clockStorage;
    llvm::SmallVector<Arg, 2> args;
    args.push_back({KoidArg, argProcess, model.pid, {}});
    std::string clockText = clockNote(thread);
    if (!clockText.empty())
      args.push_back({StringArg, argClock, 0,
                      FxtEncoder::inlineString(clockText, clockStorage)});
    enc.kernelObject(ThreadObject, thread.tid,
                     FxtEncoder::inlineString(thread.name, storage), args);
    records.assign(thread.sites.size(), CachedRecord());
    // Times estimated from instruction counts say so where the thread's
    // timeline starts, with the share in an argument.
    if (!clockText.empty() && !thread.segments.empty()) {
      std::string noteStorage;
      Arg note{StringArg, argClock, 0,
               FxtEncoder::inlineString(clockText, noteStorage)};
      enc.event(InstantEvent, slot, category, estimatedName,
                thread.segments.front().begin, note);
    }
    // Where the snapshot's window cut the thread, and what it holds.
    if (thread.windowStart != 0 && !thread.segments.empty()) {
      std::string noteStorage;
      Arg note{StringArg, argWindow, 0,
               FxtEncoder::inlineString(model.windowNote, noteStorage)};
      enc.event(InstantEvent, slot, category, windowStartName,
                thread.windowStart, note);
    }
    for (size_t s = 0; s < thread.segments.size(); ++s)
      writeSegment(thread, thread.segments[s], s, slot, clocks[s]);
  }

  /// `clock`: the segment's, placed.
  void writeSegment(const ThreadModel &thread, const Segment &segment,
                    size_t index, uint8_t slot, writers::DisplayClock &clock) {
    if (index > 0 || !segment.gapReason.empty()) {
      std::string storage;
      llvm::SmallVector<Arg, 1> args;
      if (!segment.gapReason.empty())
        args.push_back({StringArg, argReason, 0,
                        FxtEncoder::inlineString(segment.gapReason, storage)});
      enc.event(InstantEvent, slot, category,
                segment.stitchedToPrevious ? stitchedGapName : gapName,
                clock.segmentBegin(), args);
    }
    clock.forEachFrame(segment, [&](uint32_t i, uint64_t begin, uint64_t end) {
      SiteId site = segment.frames.siteOf(i);
      writeFrame(thread.sites[site], begin, end, slot, records[site]);
    });
  }

  /// A site's last event record, written again with new times while the
  /// string slots it refers to still hold its strings.
  struct CachedRecord {
    llvm::SmallVector<uint64_t, 8> words;
    uint16_t nameSlot = 0, textSlot = 0;
    StringId textId = 0; ///< The file (full) or site string (compact).
  };

  void writeFrame(const FrameSite &site, uint64_t begin, uint64_t end,
                  uint8_t slot, CachedRecord &cached) {
    if (!cached.words.empty() && enc.owns(cached.nameSlot, site.name) &&
        enc.owns(cached.textSlot, cached.textId)) {
      enc.replay(cached.words, begin, end);
      if (site.kind == FrameKind::DecodeError)
        enc.event(InstantEvent, slot, category, {cached.nameSlot, {}}, begin,
                  {});
      return;
    }
    StrRef name = enc.string(site.name);
    StrRef text;
    StringId textId = 0;
    llvm::SmallVector<Arg, 4> args;
    StrRef eventCategory = category;
    if (options.sliceArgs == FxtSliceArgs::Full) {
      bool code = site.kind == FrameKind::Physical ||
                  site.kind == FrameKind::Inlined ||
                  site.kind == FrameKind::Unknown;
      if (site.address != 0)
        args.push_back({PointerArg, argAddress, site.address, {}});
      if (site.file != 0 && !model.strings.get(site.file).empty()) {
        textId = site.file;
        text = enc.string(textId);
        args.push_back({StringArg, argFile, 0, text});
      }
      if (site.line != 0)
        args.push_back({UInt32Arg, argLine, site.line, {}});
      if (code)
        args.push_back(
            {BoolArg, argInlined, site.kind == FrameKind::Inlined, {}});
    } else {
      eventCategory = kindCategory[size_t(site.kind)];
      textId = siteString(site);
      if (textId != 0) {
        text = enc.string(textId);
        args.push_back({StringArg, argSite, 0, text});
      }
    }
    enc.event(DurationCompleteEvent, slot, eventCategory, name, begin, args,
              end, &cached.words);
    cached.nameSlot = name.ref;
    cached.textSlot = text.ref;
    cached.textId = textId;
    // Errors also show as instants, so they stand out in the timeline.
    if (site.kind == FrameKind::DecodeError)
      enc.event(InstantEvent, slot, category, name, begin, {});
  }

  /// The compact mode's one argument, "FILE:LINE 0xADDRESS" (either part
  /// may be missing), as an id past the model's strings; 0 when empty.
  StringId siteString(const FrameSite &site) {
    std::string text;
    llvm::raw_string_ostream os(text);
    llvm::StringRef file =
        site.file != 0 ? model.strings.get(site.file) : llvm::StringRef();
    if (!file.empty()) {
      os << file;
      if (site.line != 0)
        os << ':' << site.line;
    }
    if (site.address != 0)
      os << (file.empty() ? "" : " ") << llvm::format_hex(site.address, 0);
    if (text.empty())
      return 0;
    return StringId(model.strings.size() + own.intern(text));
  }

  const TraceModel &model;
  StringTable own; ///< The site strings (compact mode).
  FxtEncoder enc;
  const FxtOptions &options;
  StrRef category, argAddress, argFile, argLine, argInlined, argProcess,
      argReason, argSite, argClock, gapName, stitchedGapName, estimatedName,
      argWindow, windowStartName;
  StrRef kindCategory[6];
  std::vector<CachedRecord> records; ///< Per site of the thread written.
};

} // namespace

std::string truncateUtf8(llvm::StringRef text, size_t limit) {
  if (text.size() <= limit)
    return text.str();
  llvm::StringRef ellipsis = "...";
  size_t cut = limit > ellipsis.size() ? limit - ellipsis.size() : 0;
  // Back up over UTF-8 continuation bytes (10xxxxxx) so that no sequence is
  // split.
  while (cut > 0 && (uint8_t(text[cut]) & 0xc0) == 0x80)
    --cut;
  return (text.take_front(cut) + ellipsis).str();
}

llvm::Expected<FxtSliceArgs> parseFxtSliceArgs(llvm::StringRef text) {
  if (text == "compact")
    return FxtSliceArgs::Compact;
  if (text == "full")
    return FxtSliceArgs::Full;
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "unknown slice arguments '" + text +
                                     "' (use compact or full)");
}

llvm::Error writeFxt(const TraceModel &model, llvm::raw_ostream &os,
                     const FxtOptions &options) {
  if (llvm::Error err = validateModel(model))
    return err;
  return writers::writeValidatedFxt(model, os, options);
}

llvm::Error writers::writeValidatedFxt(const TraceModel &model,
                                       llvm::raw_ostream &os,
                                       const FxtOptions &options) {
  if (!options.gzip) {
    ModelWriter(model, os, options).write();
    return llvm::Error::success();
  }
  if (!fxtGzipAvailable())
    return gzipUnavailableError();
  std::string plain;
  {
    llvm::raw_string_ostream plainStream(plain);
    ModelWriter(model, plainStream, options).write();
  }
  llvm::SmallVector<uint8_t, 0> compressed;
  if (llvm::Error err = gzipCompress(
          llvm::ArrayRef<uint8_t>(
              reinterpret_cast<const uint8_t *>(plain.data()), plain.size()),
          compressed))
    return err;
  os.write(reinterpret_cast<const char *>(compressed.data()),
           compressed.size());
  return llvm::Error::success();
}

} // namespace magic_trace
