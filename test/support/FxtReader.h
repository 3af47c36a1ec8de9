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
  size_t threadRecords = 0;
  size_t words = 0;
  std::vector<FxtEvent> events;
  std::vector<FxtKernelObject> objects;
  /// Distinct (pid, tid) pairs that have events.
  size_t threadsWithEvents = 0;
};

/// Reads and validates a whole trace. The error names the record's byte
/// offset and what is wrong; it never crashes on malformed input.
llvm::Expected<FxtTrace> readFxt(llvm::ArrayRef<uint8_t> bytes);

/// Inflates a gzip file (RFC 1952) with the system zlib.
llvm::Expected<std::vector<uint8_t>> gunzip(llvm::ArrayRef<uint8_t> bytes);

} // namespace magic_trace::fxt_test

#endif
