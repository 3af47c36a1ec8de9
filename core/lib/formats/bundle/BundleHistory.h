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

#include "magic_trace/Snapshot.h"

namespace magic_trace::bundle_detail {

/// Adds "codeHistory" (or, for a recorder's own bundle, "codeLog") to the
/// extras `root`, writing DIR/code.bin. Errors: code.bin cannot be written.
Error writeCodeHistory(const CodeHistory &history, StringRef dir,
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

} // namespace magic_trace::bundle_detail

#endif
