//===- FxtReader.h - Validating Fuchsia trace reader for tests --*- C++ -*-===//
//
// A reader written from the spec, word by word, independent of FxtWriter:
// https://fuchsia.dev/fuchsia-src/reference/tracing/trace-format
// It rejects anything a careful consumer could trip over: bad sizes, header
// fields out of range, string/thread references that do not resolve,
// duration events that do not nest per thread, time going backwards on a
// thread. Test-only: the product never reads FXT.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_TEST_FXTREADER_H
#define MAGIC_TRACE_TEST_FXTREADER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace magic_trace::fxt_test {

enum class ArgType : uint8_t {
  Null = 0,
  Int32 = 1,
  UInt32 = 2,
  Int64 = 3,
  UInt64 = 4,
  Double = 5,
  String = 6,
  Pointer = 7,
  Koid = 8,
  Bool = 9,
};

struct FxtArg {
  std::string name;
  ArgType type = ArgType::Null;
  uint64_t value = 0; ///< Integers, pointer, koid, bool, double bits.
  std::string text;   ///< String value.
};

enum class EventType : uint8_t {
  Instant = 0,
  Counter = 1,
  DurationBegin = 2,
  DurationEnd = 3,
  DurationComplete = 4,
};

struct FxtEvent {
  EventType type = EventType::Instant;
  uint64_t pid = 0;
  uint64_t tid = 0;
  std::string category;
  std::string name;
  uint64_t timestamp = 0;    ///< In ticks.
  uint64_t endTimestamp = 0; ///< Duration-complete events only.
  /// Nesting depth on its thread (complete/begin events), from the reader's
  /// own stack.
  unsigned depth = 0;
  /// Where Perfetto's slice tracker puts this event (complete and instant
  /// events): its depth, or -1 when Perfetto drops it (perfettoDepths).
  int perfettoDepth = -1;
  std::vector<FxtArg> args;

  /// The argument named `name`, or null.
  const FxtArg *arg(llvm::StringRef name) const;
};

struct FxtKernelObject {
  uint8_t objectType = 0; ///< 1 process, 2 thread.
  uint64_t koid = 0;
  std::string name;
  std::vector<FxtArg> args;
};

struct FxtTrace {
  uint64_t ticksPerSecond = 0;
  size_t records = 0;
  size_t stringRecords = 0;
  size_t stringWords = 0; ///< Words of all string records.
  size_t threadRecords = 0;
  size_t words = 0;
  std::vector<FxtEvent> events;
  std::vector<FxtKernelObject> objects;
  /// Distinct (pid, tid) pairs that have events.
  size_t threadsWithEvents = 0;
  /// Complete and instant events Perfetto's slice tracker drops.
  size_t perfettoDropped = 0;
  /// Complete events whose Perfetto depth differs from `depth` (the nesting
  /// the file means, with a slice closed once its end is reached).
  size_t perfettoMisnested = 0;
};

/// One slice as Perfetto's slice tracker sees it: a begin and a duration
/// (0 for an instant event, which Perfetto's Fuchsia importer also makes a
/// slice of).
struct SliceSpan {
  uint64_t begin = 0;
  uint64_t duration = 0;
};

/// The depth Perfetto gives each slice of one thread, in timestamp order,
/// or -1 for a slice it drops. Written from the rule of Perfetto's
/// SliceTracker::MaybeCloseStack (src/trace_processor/importers/common/
/// slice_tracker.cc): before a new slice, walk the open slices from the top
/// down; each ends before the new one begins, or exactly when it begins
/// unless both last zero time, pops the top of the stack; a new slice that
/// begins inside an open one and ends after it is dropped. Zero-length
/// slices that share a timestamp therefore stack on each other.
std::vector<int> perfettoDepths(llvm::ArrayRef<SliceSpan> slices);

/// Reads and validates a whole trace. The error names the record's byte
/// offset and what is wrong; it never crashes on malformed input.
llvm::Expected<FxtTrace> readFxt(llvm::ArrayRef<uint8_t> bytes);

/// Inflates a gzip file (RFC 1952) with the system zlib.
llvm::Expected<std::vector<uint8_t>> gunzip(llvm::ArrayRef<uint8_t> bytes);

} // namespace magic_trace::fxt_test

#endif
