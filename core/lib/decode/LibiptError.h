//===- LibiptError.h - The decoder's libipt errors --------------*- C++ -*-===//
//
// Internal to core/lib/decode/: the makers of LibiptError (Libipt.h) for the
// ways a libipt call of the decoder fails, each with what to do about it.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_DECODE_LIBIPTERROR_H
#define MAGIC_TRACE_DECODE_LIBIPTERROR_H

#include "magic_trace/Libipt.h"

namespace magic_trace::decode_detail {

/// A libipt allocator (pt_image_alloc, pt_blk_alloc_decoder, ...) returned
/// null: status -pte_nomem, "libipt could not allocate `what`".
llvm::Error allocationFailed(llvm::StringRef what);

/// A libipt call on objects we built (setting or copying an image) failed
/// with `status`: nothing the user did causes it, so the hint asks for a
/// report with the trace.
llvm::Error libiptBug(int status, llvm::StringRef what);

} // namespace magic_trace::decode_detail

#endif
