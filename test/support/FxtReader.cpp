//===- FxtReader.cpp - Validating Fuchsia trace reader for tests ----------===//
//
// Written from the spec text, section by section; it shares no code or
// constants with core/lib/write/FxtWriter.cpp on purpose, so that a misreading
// of the spec in one is caught by the other.
//
//===----------------------------------------------------------------------===//
#include "FxtReader.h"

#include "llvm/ADT/DenseMap.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <optional>

namespace magic_trace::fxt_test {

const FxtArg *FxtEvent::arg(llvm::StringRef argName) const {
  for (const FxtArg &candidate : args)
    if (candidate.name == argName)
      return &candidate;
  return nullptr;
}

namespace {

/// Bits [lo, hi] of a word, inclusive, as the spec's tables number them.
struct BitRange {
  unsigned lo, hi;
};

/// The value of `range` in `word`.
uint64_t bits(uint64_t word, BitRange range) {
  unsigned width = range.hi - range.lo + 1;
  uint64_t mask = width == 64 ? ~uint64_t(0) : (uint64_t(1) << width) - 1;
  return (word >> range.lo) & mask;
}

// The header fields this reader reads, one namespace per table of the spec
// (reserved ranges included: they must be zero).

/// "Record header": every record's first word.
namespace record_header {
constexpr BitRange Type{0, 3};
constexpr BitRange SizeWords{4, 15};
} // namespace record_header

/// "Metadata record" and its kinds.
namespace metadata {
constexpr BitRange Type{16, 19};
constexpr BitRange TraceInfoType{20, 23};      // Trace info metadata.
constexpr BitRange ProviderNameLength{52, 59}; // Provider info metadata.
} // namespace metadata

/// "Initialization record".
namespace initialization {
constexpr BitRange Reserved{16, 63};
} // namespace initialization

/// "String record".
namespace string_record {
constexpr BitRange Index{16, 30};
constexpr BitRange Reserved31{31, 31};
constexpr BitRange Length{32, 46};
constexpr BitRange Reserved47{47, 63};
} // namespace string_record

/// "Thread record".
namespace thread_record {
constexpr BitRange Index{16, 23};
constexpr BitRange Reserved{24, 63};
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
constexpr BitRange Reserved{44, 63};
} // namespace kernel_object

/// "Argument header" and each argument type's use of bits 32-63.
namespace argument {
constexpr BitRange Type{0, 3};
constexpr BitRange SizeWords{4, 15};
constexpr BitRange NameRef{16, 31};
constexpr BitRange Value32{32, 63}; // Int32, UInt32; reserved for others.
constexpr BitRange StringValueRef{32, 47};
constexpr BitRange StringReserved{48, 63};
constexpr BitRange BoolValue{32, 32};
constexpr BitRange BoolReserved{33, 63};
} // namespace argument

/// "String references": 0 empty; bit 15 set: inline, of the length in bits
/// 0-14; else a string table index.
namespace string_ref {
constexpr BitRange InlineLength{0, 14};
constexpr BitRange InlineFlag{15, 15};
} // namespace string_ref

/// One open duration on a thread: a complete event (end known) or a
/// duration-begin event (end not yet seen).
struct OpenDuration {
  uint64_t end;
  bool fromBegin;
  std::string name;
};

struct ThreadState {
  uint64_t lastTimestamp = 0;
  std::vector<OpenDuration> stack;
};

class Reader {
public:
  explicit Reader(llvm::ArrayRef<uint8_t> bytes) : bytes(bytes) {}

  llvm::Expected<FxtTrace> read() {
    if (bytes.size() % 8 != 0)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("trace is {0} bytes, not a whole number of 64-bit "
                        "words",
                        bytes.size()));
    size_t totalWords = bytes.size() / 8;
    trace.words = totalWords;
    size_t pos = 0;
    while (pos < totalWords) {
      recordOffset = pos * 8;
      uint64_t header = word(pos);
      uint64_t size = bits(header, record_header::SizeWords);
      if (size == 0)
        return fail("record size is 0 words");
      if (pos + size > totalWords)
        return fail(llvm::formatv("record claims {0} words, only {1} remain",
                                  size, totalWords - pos));
      recordBegin = pos;
      recordEnd = pos + size;
      cursor = pos + 1;
      if (trace.records == 0 && header != MagicWord)
        return fail("the trace does not start with the magic number record");
      if (llvm::Error err = readRecord(header))
        return std::move(err);
      if (cursor != recordEnd)
        return fail(llvm::formatv("record size is {0} words but its fields "
                                  "take {1}",
                                  size, cursor - recordBegin));
      ++trace.records;
      pos = recordEnd;
    }
    if (trace.records == 0)
      return fail("empty trace");
    perfettoNesting();
    for (auto &[thread, state] : threads)
      for (const OpenDuration &open : state.stack)
        if (open.fromBegin)
          return fail(llvm::formatv("duration '{0}' on thread {1}/{2} never "
                                    "ends",
                                    open.name, thread.first, thread.second));
    trace.threadsWithEvents = threads.size();
    return std::move(trace);
  }

private:
  // The magic number record: metadata (0), size 1, trace info (4), magic
  // number info (0), magic 0x16547846 in bits 24-55.
  static constexpr uint64_t MagicWord = 0x0016547846040010;

  uint64_t word(size_t index) const {
    return llvm::support::endian::read64le(bytes.data() + index * 8);
  }

  llvm::Error fail(const llvm::Twine &what) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "record " + llvm::Twine(trace.records) +
                                       " at byte " + llvm::Twine(recordOffset) +
                                       ": " + what);
  }

  llvm::Error next(uint64_t &out, llvm::StringRef what) {
    if (cursor >= recordEnd)
      return fail(llvm::Twine(what) + " lies past the record's end");
    out = word(cursor++);
    return llvm::Error::success();
  }

  /// `length` bytes padded to whole words; the padding must be zero.
  llvm::Error text(size_t length, std::string &out, llvm::StringRef what) {
    size_t words = (length + 7) / 8;
    if (cursor + words > recordEnd)
      return fail(llvm::Twine(what) + " (" + llvm::Twine(length) +
                  " bytes) lies past the record's end");
    const char *data =
        reinterpret_cast<const char *>(bytes.data()) + cursor * 8;
    out.assign(data, length);
    for (size_t i = length; i < words * 8; ++i)
      if (data[i] != 0)
        return fail(llvm::Twine(what) + " has non-zero padding");
    cursor += words;
    return llvm::Error::success();
  }

  /// A 16-bit string reference: 0 empty, bit 15 set inline, else an index
  /// that a string record must have bound.
  llvm::Error string(uint64_t ref, std::string &out, llvm::StringRef what) {
    if (ref == 0) {
      out.clear();
      return llvm::Error::success();
    }
    if (bits(ref, string_ref::InlineFlag))
      return text(bits(ref, string_ref::InlineLength), out, what);
    auto bound = strings.find(ref);
    if (bound == strings.end())
      return fail(llvm::formatv("{0} refers to string index {1}, which no "
                                "string record bound",
                                what, ref));
    out = bound->second;
    return llvm::Error::success();
  }

  llvm::Error reserved(uint64_t header, BitRange range) {
    if (bits(header, range) != 0)
      return fail(llvm::formatv("reserved bits {0}-{1} are not zero", range.lo,
                                range.hi));
    return llvm::Error::success();
  }

  llvm::Error readRecord(uint64_t header) {
    switch (bits(header, record_header::Type)) {
    case 0:
      return metadata(header);
    case 1:
      return initialization(header);
    case 2:
      return stringRecord(header);
    case 3:
      return threadRecord(header);
    case 4:
      return event(header);
    case 7:
      return kernelObject(header);
    default:
      return fail(llvm::formatv("record type {0} is not one a magic-trace "
                                "file contains",
                                bits(header, record_header::Type)));
    }
  }

  llvm::Error metadata(uint64_t header) {
    uint64_t type = bits(header, metadata::Type);
    if (type == 4 && bits(header, metadata::TraceInfoType) == 0) {
      if (header != MagicWord)
        return fail("malformed magic number record");
      return llvm::Error::success();
    }
    if (type == 1) { // Provider info: id 20-51, name length 52-59.
      std::string name;
      return text(bits(header, metadata::ProviderNameLength), name,
                  "provider name");
    }
    if (type == 2 || type == 3) // Provider section / event: header only.
      return llvm::Error::success();
    return fail(llvm::formatv("unknown metadata type {0}", type));
  }

  llvm::Error initialization(uint64_t header) {
    if (llvm::Error err = reserved(header, initialization::Reserved))
      return err;
    if (llvm::Error err = next(trace.ticksPerSecond, "ticks per second"))
      return err;
    if (trace.ticksPerSecond == 0)
      return fail("ticks per second is 0");
    return llvm::Error::success();
  }

  llvm::Error stringRecord(uint64_t header) {
    uint64_t index = bits(header, string_record::Index);
    uint64_t length = bits(header, string_record::Length);
    if (index == 0)
      return fail("string record binds index 0, which is reserved");
    if (length > 32000)
      return fail(llvm::formatv("string of {0} bytes exceeds the 32000-byte "
                                "limit",
                                length));
    if (llvm::Error err = reserved(header, string_record::Reserved31))
      return err;
    if (llvm::Error err = reserved(header, string_record::Reserved47))
      return err;
    std::string value;
    if (llvm::Error err = text(length, value, "string data"))
      return err;
    strings[index] = std::move(value);
    ++trace.stringRecords;
    trace.stringWords += recordEnd - recordBegin;
    return llvm::Error::success();
  }

  llvm::Error threadRecord(uint64_t header) {
    uint64_t index = bits(header, thread_record::Index);
    if (index == 0)
      return fail("thread record binds index 0, which means inline");
    if (llvm::Error err = reserved(header, thread_record::Reserved))
      return err;
    std::pair<uint64_t, uint64_t> thread;
    if (llvm::Error err = next(thread.first, "process koid"))
      return err;
    if (llvm::Error err = next(thread.second, "thread koid"))
      return err;
    threadTable[index] = thread;
    ++trace.threadRecords;
    return llvm::Error::success();
  }

  llvm::Error arguments(unsigned count, std::vector<FxtArg> &out) {
    for (unsigned i = 0; i < count; ++i) {
      size_t argBegin = cursor;
      uint64_t header;
      if (llvm::Error err = next(header, "argument header"))
        return err;
      uint64_t size = bits(header, argument::SizeWords);
      if (size == 0 || argBegin + size > recordEnd)
        return fail(llvm::formatv("argument {0} has size {1} words, which does "
                                  "not fit the record",
                                  i, size));
      FxtArg arg;
      arg.type = ArgType(bits(header, argument::Type));
      if (llvm::Error err = string(bits(header, argument::NameRef), arg.name,
                                   "argument name"))
        return err;
      if (arg.name.empty())
        return fail(llvm::formatv("argument {0} has an empty name", i));
      llvm::Error err = llvm::Error::success();
      switch (arg.type) {
      case ArgType::Null:
        err = reserved(header, argument::Value32);
        break;
      case ArgType::Int32:
      case ArgType::UInt32:
        arg.value = bits(header, argument::Value32);
        break;
      case ArgType::Int64:
      case ArgType::UInt64:
      case ArgType::Double:
      case ArgType::Pointer:
      case ArgType::Koid:
        if (!(err = reserved(header, argument::Value32)))
          err = next(arg.value, "argument value");
        break;
      case ArgType::String:
        if (!(err = reserved(header, argument::StringReserved)))
          err = string(bits(header, argument::StringValueRef), arg.text,
                       "string argument");
        break;
      case ArgType::Bool:
        arg.value = bits(header, argument::BoolValue);
        err = reserved(header, argument::BoolReserved);
        break;
      default:
        err = fail(llvm::formatv("argument {0} has unknown type {1}", i,
                                 unsigned(arg.type)));
      }
      if (err)
        return err;
      if (cursor != argBegin + size)
        return fail(llvm::formatv("argument '{0}' has size {1} words but its "
                                  "fields take {2}",
                                  arg.name, size, cursor - argBegin));
      out.push_back(std::move(arg));
    }
    return llvm::Error::success();
  }

  llvm::Error event(uint64_t header) {
    if (trace.ticksPerSecond == 0)
      return fail("event before the initialization record");
    FxtEvent event;
    uint64_t type = bits(header, event_record::Type);
    unsigned argCount = bits(header, event_record::ArgCount);
    uint64_t threadRef = bits(header, event_record::ThreadRef);
    if (type > 10)
      return fail(llvm::formatv("unknown event type {0}", type));
    event.type = EventType(type);
    if (llvm::Error err = next(event.timestamp, "timestamp"))
      return err;
    if (threadRef == 0) {
      if (llvm::Error err = next(event.pid, "inline process koid"))
        return err;
      if (llvm::Error err = next(event.tid, "inline thread koid"))
        return err;
    } else {
      if (!threadTable[threadRef])
        return fail(llvm::formatv("event refers to thread index {0}, which no "
                                  "thread record bound",
                                  threadRef));
      std::tie(event.pid, event.tid) = *threadTable[threadRef];
    }
    if (llvm::Error err = string(bits(header, event_record::CategoryRef),
                                 event.category, "category"))
      return err;
    if (llvm::Error err =
            string(bits(header, event_record::NameRef), event.name, "name"))
      return err;
    if (llvm::Error err = arguments(argCount, event.args))
      return err;
    // Payload by type: counter id, end time, async/flow correlation id.
    if (type == 1 || type >= 4) {
      uint64_t extra;
      if (llvm::Error err = next(extra, "event payload"))
        return err;
      if (type == 4)
        event.endTimestamp = extra;
    }
    if (llvm::Error err = checkThreadTimeline(event))
      return err;
    trace.events.push_back(std::move(event));
    return llvm::Error::success();
  }

  /// Each thread's complete and instant events as Perfetto nests them.
  void perfettoNesting() {
    std::map<std::pair<uint64_t, uint64_t>, std::vector<size_t>> byThread;
    for (size_t i = 0; i < trace.events.size(); ++i) {
      EventType type = trace.events[i].type;
      if (type == EventType::DurationComplete || type == EventType::Instant)
        byThread[{trace.events[i].pid, trace.events[i].tid}].push_back(i);
    }
    for (auto &[thread, indices] : byThread) {
      std::vector<SliceSpan> spans;
      for (size_t i : indices) {
        const FxtEvent &event = trace.events[i];
        uint64_t duration = event.type == EventType::DurationComplete
                                ? event.endTimestamp - event.timestamp
                                : 0;
        spans.push_back({event.timestamp, duration});
      }
      std::vector<int> depths = perfettoDepths(spans);
      for (size_t k = 0; k < indices.size(); ++k) {
        FxtEvent &event = trace.events[indices[k]];
        event.perfettoDepth = depths[k];
        trace.perfettoDropped += depths[k] < 0;
        trace.perfettoMisnested += event.type == EventType::DurationComplete &&
                                   depths[k] != int(event.depth);
      }
    }
  }

  /// Monotonic time and proper nesting of durations on one thread.
  llvm::Error checkThreadTimeline(FxtEvent &event) {
    ThreadState &state = threads[{event.pid, event.tid}];
    if (event.timestamp < state.lastTimestamp)
      return fail(llvm::formatv("time goes backwards on thread {0}/{1}: {2} "
                                "after {3}",
                                event.pid, event.tid, event.timestamp,
                                state.lastTimestamp));
    state.lastTimestamp = event.timestamp;
    // Complete events that ended by now are closed.
    while (!state.stack.empty() && !state.stack.back().fromBegin &&
           state.stack.back().end <= event.timestamp)
      state.stack.pop_back();
    switch (event.type) {
    case EventType::DurationComplete:
      if (event.endTimestamp < event.timestamp)
        return fail(llvm::formatv("'{0}' ends at {1}, before it begins at {2}",
                                  event.name, event.endTimestamp,
                                  event.timestamp));
      if (!state.stack.empty() && state.stack.back().end < event.endTimestamp)
        return fail(llvm::formatv("'{0}' [{1}, {2}] overlaps the end of "
                                  "enclosing '{3}' at {4}",
                                  event.name, event.timestamp,
                                  event.endTimestamp, state.stack.back().name,
                                  state.stack.back().end));
      event.depth = state.stack.size();
      state.stack.push_back({event.endTimestamp, false, event.name});
      break;
    case EventType::DurationBegin:
      event.depth = state.stack.size();
      state.stack.push_back({UINT64_MAX, true, event.name});
      break;
    case EventType::DurationEnd:
      if (state.stack.empty() || !state.stack.back().fromBegin)
        return fail(llvm::formatv("duration end '{0}' at {1} has no open "
                                  "duration begin on thread {2}/{3}",
                                  event.name, event.timestamp, event.pid,
                                  event.tid));
      state.stack.pop_back();
      break;
    default:
      event.depth = state.stack.size();
      break;
    }
    return llvm::Error::success();
  }

  llvm::Error kernelObject(uint64_t header) {
    FxtKernelObject object;
    object.objectType = bits(header, kernel_object::ObjectType);
    unsigned argCount = bits(header, kernel_object::ArgCount);
    if (llvm::Error err = reserved(header, kernel_object::Reserved))
      return err;
    if (llvm::Error err = next(object.koid, "koid"))
      return err;
    if (llvm::Error err =
            string(bits(header, kernel_object::NameRef), object.name, "name"))
      return err;
    if (llvm::Error err = arguments(argCount, object.args))
      return err;
    if (object.objectType == 2) {
      bool hasProcess = false;
      for (const FxtArg &arg : object.args)
        hasProcess |= arg.name == "process" && arg.type == ArgType::Koid;
      if (!hasProcess)
        return fail("thread object without a 'process' koid argument");
    }
    trace.objects.push_back(std::move(object));
    return llvm::Error::success();
  }

  llvm::ArrayRef<uint8_t> bytes;
  FxtTrace trace;
  size_t recordOffset = 0, recordBegin = 0, recordEnd = 0, cursor = 0;
  /// The string table (index -> text); a map, since traces bind few of the
  /// 32767 slots and a full array made every small read pay for all of them.
  llvm::DenseMap<uint16_t, std::string> strings;
  std::optional<std::pair<uint64_t, uint64_t>> threadTable[0x100];
  std::map<std::pair<uint64_t, uint64_t>, ThreadState> threads;
};

} // namespace

llvm::Expected<FxtTrace> readFxt(llvm::ArrayRef<uint8_t> bytes) {
  auto reader = std::make_unique<Reader>(bytes);
  return reader->read();
}

} // namespace magic_trace::fxt_test
