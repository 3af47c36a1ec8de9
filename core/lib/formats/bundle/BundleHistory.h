//===- BundleHistory.h - A snapshot's code history in a bundle --*- C++ -*-===//
//
// Internal to core/lib/formats/bundle/. The code history (CodeHistory.h) and
// each thread's image marks, in magic-trace.json ("codeHistory", "codeLog",
// threads[].imageMarks; docs/formats.md), with the bytes of code outside
// files in DIR/code.bin.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_RECORD_BUNDLE_BUNDLEHISTORY_H
#define MAGIC_TRACE_RECORD_BUNDLE_BUNDLEHISTORY_H

#include "BundleFields.h"

#include "magic_trace/OutputFiles.h"
#include "magic_trace/Snapshot.h"

namespace magic_trace::bundle_detail {

/// Adds "codeHistory" (or, for a recorder's own bundle, "codeLog") to the
/// extras `root`, writing DIR/code.bin. Errors: code.bin cannot be written.
Error writeCodeHistory(const CodeHistory &history, OutputDir &dir,
                       json::Object &root);

/// Reads "codeHistory" or "codeLog" from the extras `root` (neither: an
/// empty history). Errors name the field that is wrong.
Error readCodeHistory(const FieldReader &reader, const json::Object &root,
                      StringRef dir, CodeHistory &history);

/// A thread's image marks as [[offset, seq], ...].
json::Array marksJson(const std::vector<ImageMark> &marks);

/// threads[i].imageMarks, if there.
Error readMarks(const FieldReader &reader, const json::Object &thread,
                StringRef at, std::vector<ImageMark> &marks);

/// Fails when the JSON text at PATH has more objects than a bundle's JSON
/// may (kMaxJsonObjects): LLVM's JSON parser gives each object a hash table
/// of about 4 KiB, so a million small objects take gigabytes before any
/// field is read (issue 50: 1,000,000 symbols ran out of memory).
Error checkJsonObjectCount(StringRef path, StringRef text);

/// Bundle JSON objects at most: ~0.4 GiB in LLVM's parser. A JIT's names
/// (one object each) are the bulk of a large bundle.
constexpr size_t kMaxJsonObjects = 100000;

/// Fails when the snapshot's code history or image marks are inconsistent
/// (historyProblem; a mark past its thread's trace or out of order; a mark
/// naming a seq after every change): the input's error, not a guess. PATH
/// is the file they came from.
Error checkHistory(StringRef path, const Snapshot &snapshot);

} // namespace magic_trace::bundle_detail

#endif
