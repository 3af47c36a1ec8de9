//===- FxtEncoder.h - Fuchsia trace format records -------------*- C++ -*-===//
//
// The Fuchsia trace format's records as words (private to write/): the
// header fields of each of the spec's tables, string and argument
// references, a word sink, and the encoder that keeps the string and thread
// tables. FxtWriter.cpp walks the model through it. Word layouts follow the
// spec sections of the same names:
// https://fuchsia.dev/fuchsia-src/reference/tracing/trace-format
// Every record is a little-endian 64-bit header word (type in bits 0-3, size
// in words in bits 4-15) followed by its payload words.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_WRITE_FXTENCODER_H
#define MAGIC_TRACE_LIB_WRITE_FXTENCODER_H

#include "magic_trace/FxtWriter.h"
#include "magic_trace/StringTable.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace magic_trace::fxt_encoding {

/// Bits [lo, hi] of a 64-bit word, both inclusive, as the spec's tables
/// number them.
struct BitRange {
  unsigned lo, hi;
};

/// `value` placed in `range` of a word (bits of `value` past the range's
/// width are dropped; every caller's value fits).
constexpr uint64_t field(uint64_t value, BitRange range) {
  unsigned width = range.hi - range.lo + 1;
  uint64_t mask = width == 64 ? ~uint64_t(0) : (uint64_t(1) << width) - 1;
  return (value & mask) << range.lo;
}

// Header fields, one namespace per table of the spec.

/// "Record header": every record's first word.
namespace record_header {
constexpr BitRange Type{0, 3};
constexpr BitRange SizeWords{4, 15};
} // namespace record_header

/// "Metadata record", "Trace info metadata", "Magic number record".
namespace metadata {
constexpr BitRange Type{16, 19};
constexpr BitRange TraceInfoType{20, 23};
constexpr BitRange Magic{24, 55};
} // namespace metadata

/// "String record".
namespace string_record {
constexpr BitRange Index{16, 30};
constexpr BitRange Length{32, 46};
} // namespace string_record

/// "Thread record".
namespace thread_record {
constexpr BitRange Index{16, 23};
} // namespace thread_record

/// "Event record".
namespace event_record {
constexpr BitRange Type{16, 19};
constexpr BitRange ArgCount{20, 23};
constexpr BitRange ThreadRef{24, 31};
constexpr BitRange CategoryRef{32, 47};
constexpr BitRange NameRef{48, 63};
} // namespace event_record

/// "Kernel object record".
namespace kernel_object {
constexpr BitRange ObjectType{16, 23};
constexpr BitRange NameRef{24, 39};
constexpr BitRange ArgCount{40, 43};
} // namespace kernel_object

/// "Argument header" and the value fields of the argument types we write.
namespace argument {
constexpr BitRange Type{0, 3};
constexpr BitRange SizeWords{4, 15};
constexpr BitRange NameRef{16, 31};
constexpr BitRange UInt32Value{32, 63};
constexpr BitRange BoolValue{32, 32};
constexpr BitRange StringValueRef{32, 47};
} // namespace argument

/// "String references": inline when bit 15 is set, of the length in bits
/// 0-14.
namespace string_ref {
constexpr BitRange InlineLength{0, 14};
constexpr BitRange InlineFlag{15, 15};
} // namespace string_ref

/// A record's header word: its type and size, the fields of its own table.
constexpr uint64_t recordHeader(uint64_t type, uint64_t sizeWords) {
  return field(type, record_header::Type) |
         field(sizeWords, record_header::SizeWords);
}

// Record types ("Record types" table).
constexpr uint64_t MetadataRecord = 0;
constexpr uint64_t InitializationRecord = 1;
constexpr uint64_t StringRecord = 2;
constexpr uint64_t ThreadRecord = 3;
constexpr uint64_t EventRecord = 4;
constexpr uint64_t KernelObjectRecord = 7;

// Metadata record: trace info (type 4), magic number record (info type 0).
constexpr uint64_t TraceInfoMetadata = 4;
constexpr uint64_t MagicNumberTraceInfo = 0;
constexpr uint64_t FxtMagic = 0x16547846;

// Event types.
constexpr uint64_t InstantEvent = 0;
constexpr uint64_t DurationCompleteEvent = 4;

// Argument types.
constexpr uint64_t UInt32Arg = 2;
constexpr uint64_t StringArg = 6;
constexpr uint64_t PointerArg = 7;
constexpr uint64_t KoidArg = 8;
constexpr uint64_t BoolArg = 9;

// Zircon object types of kernel object records.
constexpr uint64_t ProcessObject = 1;
constexpr uint64_t ThreadObject = 2;

constexpr uint64_t TicksPerSecond = 1000000000; // Model times are ns.

inline size_t paddedWords(size_t bytes) { return (bytes + 7) / 8; }

/// A string reference as it goes into a header field, plus the text that
/// follows in the record when the reference is inline.
struct StrRef {
  uint16_t ref = 0;
  llvm::StringRef inlineText;
  size_t words() const { return paddedWords(inlineText.size()); }
};

/// One argument record. Only the kinds we write are supported.
struct Arg {
  uint64_t type;
  StrRef name;
  uint64_t value = 0; // uint32/bool in the header, pointer/koid in a word.
  StrRef text;        // String value.

  bool hasValueWord() const { return type == PointerArg || type == KoidArg; }
  size_t words() const {
    return 1 + name.words() + (hasValueWord() ? 1 : 0) +
           (type == StringArg ? text.words() : 0);
  }
};

/// Buffers words and flushes them to the stream in large chunks.
class WordSink {
public:
  // The buffer is allocated on the first write and grows on demand: small
  // traces (and every fuzzer run) do not pay for the whole flush size.
  explicit WordSink(llvm::raw_ostream &os) : os(os) {}
  ~WordSink() { flush(); }

  void word(uint64_t value) {
    if (size_t(limit - cursor) < 8)
      makeRoom(8);
    llvm::support::endian::write64le(cursor, value);
    cursor += 8;
  }
  /// Text padded with zero bytes to a whole number of words.
  void text(llvm::StringRef text) {
    size_t padded = paddedWords(text.size()) * 8;
    if (size_t(limit - cursor) < padded)
      makeRoom(padded);
    std::memcpy(cursor, text.data(), text.size());
    std::memset(cursor + text.size(), 0, padded - text.size());
    cursor += padded;
  }
  /// Room for `count` words, claimed: the caller writes every one of them.
  char *claim(size_t count) {
    size_t bytes = count * 8;
    if (size_t(limit - cursor) < bytes)
      makeRoom(bytes);
    char *at = cursor;
    cursor += bytes;
    return at;
  }
  /// Where the next word goes, for copyFrom.
  size_t mark() const { return size_t(cursor - start); }
  /// The words written since `from` (a mark in the current record).
  void copyFrom(size_t from, llvm::SmallVectorImpl<uint64_t> &out) const {
    out.clear();
    for (const char *at = start + from; at < cursor; at += 8)
      out.push_back(llvm::support::endian::read64le(at));
  }
  /// Called after each record so a record is never split across flushes.
  void endRecord() {
    if (size_t(cursor - start) >= FlushBytes)
      flush();
  }
  void flush() {
    if (cursor != start)
      os.write(start, size_t(cursor - start));
    cursor = start;
  }

private:
  static constexpr size_t FlushBytes = 1 << 20;

  /// Grows the buffer (keeping what it holds) to fit `bytes` more.
  void makeRoom(size_t bytes) {
    size_t used = size_t(cursor - start);
    size_t size = std::max<size_t>(
        {size_t(limit - start) * 2, used + bytes, size_t(4096)});
    std::unique_ptr<char[]> grown(new char[size]);
    if (used)
      std::memcpy(grown.get(), start, used);
    storage = std::move(grown);
    start = storage.get();
    cursor = start + used;
    limit = start + size;
  }

  llvm::raw_ostream &os;
  std::unique_ptr<char[]> storage;
  char *start = nullptr;
  char *cursor = nullptr;
  char *limit = nullptr;
};

/// Writes records and keeps the string and thread tables.
class FxtEncoder {
public:
  /// Strings are the model's `strings`, then the writer's own `extra`
  /// (ids from strings.size() on).
  FxtEncoder(llvm::raw_ostream &os, const StringTable &strings,
             const StringTable &extra)
      : sink(os), strings(strings), extra(extra), slotOf(strings.size(), 0),
        owner(fxt::MaxStringIndex + 1, NoOwner) {}

  /// The text of model string `id`, or of the writer's own.
  llvm::StringRef text(StringId id) const {
    return id < strings.size() ? strings.get(id)
                               : extra.get(StringId(id - strings.size()));
  }

  void magicNumber() {
    sink.word(recordHeader(MetadataRecord, 1) |
              field(TraceInfoMetadata, metadata::Type) |
              field(MagicNumberTraceInfo, metadata::TraceInfoType) |
              field(FxtMagic, metadata::Magic));
    sink.endRecord();
  }

  void initialization(uint64_t ticksPerSecond) {
    sink.word(recordHeader(InitializationRecord, 2));
    sink.word(ticksPerSecond);
    sink.endRecord();
  }

  /// Binds a table slot that is never re-bound (category, argument names).
  uint16_t pin(llvm::StringRef text) {
    uint16_t slot = nextSlot++;
    firstDynamicSlot = nextSlot;
    stringRecord(slot, text);
    return slot;
  }

  /// The table slot of a model string, writing a string record if the string
  /// is not bound. When the table is full, slots are re-bound round-robin; a
  /// record uses at most two dynamic strings, so it never evicts its own.
  StrRef string(StringId id) {
    llvm::StringRef text = this->text(id);
    if (text.empty())
      return {};
    if (id >= slotOf.size())
      slotOf.resize(id + 1, 0);
    uint16_t slot = slotOf[id];
    if (slot != 0 && owner[slot] == id)
      return {slot, {}};
    slot = nextSlot;
    nextSlot =
        nextSlot == fxt::MaxStringIndex ? firstDynamicSlot : nextSlot + 1;
    owner[slot] = id;
    slotOf[id] = slot;
    stringRecord(slot, text);
    return {slot, {}};
  }

  /// An inline reference; `storage` keeps a truncated copy alive.
  static StrRef inlineString(llvm::StringRef text, std::string &storage) {
    if (text.empty())
      return {};
    if (text.size() > fxt::MaxInlineStringLength) {
      storage = truncateUtf8(text, fxt::MaxInlineStringLength);
      text = storage;
    }
    return {uint16_t(field(1, string_ref::InlineFlag) |
                     field(text.size(), string_ref::InlineLength)),
            text};
  }

  void threadRecord(uint8_t slot, uint64_t pid, uint64_t tid) {
    sink.word(recordHeader(ThreadRecord, 3) |
              field(slot, thread_record::Index));
    sink.word(pid);
    sink.word(tid);
    sink.endRecord();
  }

  void kernelObject(uint64_t objectType, uint64_t koid, StrRef name,
                    llvm::ArrayRef<Arg> args) {
    size_t words = 2 + name.words() + argWords(args);
    sink.word(recordHeader(KernelObjectRecord, words) |
              field(objectType, kernel_object::ObjectType) |
              field(name.ref, kernel_object::NameRef) |
              field(args.size(), kernel_object::ArgCount));
    sink.word(koid);
    if (!name.inlineText.empty())
      sink.text(name.inlineText);
    writeArgs(args);
    sink.endRecord();
  }

  /// True if a reference to `slot` still names string `id` (slot 0, the
  /// empty string, always does): no string record is needed to use it.
  bool owns(uint16_t slot, StringId id) const {
    return slot == 0 || owner[slot] == id;
  }

  /// Writes `words` (a whole event record captured by event()) with its
  /// timestamp (word 1) and, for a complete event, end time (last word).
  void replay(llvm::ArrayRef<uint64_t> words, uint64_t timestamp,
              uint64_t endTime) {
    // Most frames are replays (a site's record with new times): one bounds
    // check for the record, then plain stores.
    // The words are in host order: on a little-endian host, one copy.
    char *at = sink.claim(words.size());
    if (llvm::sys::IsLittleEndianHost) {
      // A compact slice's 4 words: a copy of known size, not a call.
      if (words.size() == 4)
        std::memcpy(at, words.data(), 4 * 8);
      else
        std::memcpy(at, words.data(), words.size() * 8);
      at += words.size() * 8;
    } else {
      for (uint64_t word : words) {
        llvm::support::endian::write64le(at, word);
        at += 8;
      }
    }
    llvm::support::endian::write64le(at - 8 * (words.size() - 1), timestamp);
    llvm::support::endian::write64le(at - 8, endTime);
    sink.endRecord();
  }

  /// An event record on an indexed thread; `endTime` is written for
  /// duration-complete events only. With `captured`, its words are copied
  /// there (for replay).
  void event(uint64_t eventType, uint8_t threadSlot, StrRef category,
             StrRef name, uint64_t timestamp, llvm::ArrayRef<Arg> args,
             uint64_t endTime = 0,
             llvm::SmallVectorImpl<uint64_t> *captured = nullptr) {
    size_t start = sink.mark();
    bool complete = eventType == DurationCompleteEvent;
    size_t words = 2 + category.words() + name.words() + argWords(args) +
                   (complete ? 1 : 0);
    sink.word(recordHeader(EventRecord, words) |
              field(eventType, event_record::Type) |
              field(args.size(), event_record::ArgCount) |
              field(threadSlot, event_record::ThreadRef) |
              field(category.ref, event_record::CategoryRef) |
              field(name.ref, event_record::NameRef));
    sink.word(timestamp);
    if (!category.inlineText.empty())
      sink.text(category.inlineText);
    if (!name.inlineText.empty())
      sink.text(name.inlineText);
    writeArgs(args);
    if (complete)
      sink.word(endTime);
    if (captured)
      sink.copyFrom(start, *captured);
    sink.endRecord();
  }

private:
  static constexpr StringId NoOwner = UINT32_MAX;

  void stringRecord(uint16_t slot, llvm::StringRef text) {
    std::string storage;
    if (text.size() > fxt::MaxStringLength) {
      // magic-trace issue #286: an 805 KB symbol name crashed the writer.
      storage = truncateUtf8(text, fxt::MaxStringLength);
      text = storage;
    }
    sink.word(recordHeader(StringRecord, 1 + paddedWords(text.size())) |
              field(slot, string_record::Index) |
              field(text.size(), string_record::Length));
    sink.text(text);
    sink.endRecord();
  }

  static size_t argWords(llvm::ArrayRef<Arg> args) {
    size_t words = 0;
    for (const Arg &arg : args)
      words += arg.words();
    return words;
  }

  void writeArgs(llvm::ArrayRef<Arg> args) {
    for (const Arg &arg : args) {
      uint64_t header = field(arg.type, argument::Type) |
                        field(arg.words(), argument::SizeWords) |
                        field(arg.name.ref, argument::NameRef);
      if (arg.type == UInt32Arg)
        header |= field(arg.value, argument::UInt32Value);
      if (arg.type == BoolArg)
        header |= field(arg.value, argument::BoolValue);
      if (arg.type == StringArg)
        header |= field(arg.text.ref, argument::StringValueRef);
      sink.word(header);
      if (!arg.name.inlineText.empty())
        sink.text(arg.name.inlineText);
      if (arg.hasValueWord())
        sink.word(arg.value);
      if (arg.type == StringArg && !arg.text.inlineText.empty())
        sink.text(arg.text.inlineText);
    }
  }

  WordSink sink;
  const StringTable &strings;
  const StringTable &extra;
  std::vector<uint16_t> slotOf; ///< Per StringId; valid if owner agrees.
  std::vector<StringId> owner;  ///< Per slot: the model string bound there.
  uint16_t nextSlot = 1;
  uint16_t firstDynamicSlot = 1;
};

} // namespace magic_trace::fxt_encoding

#endif
