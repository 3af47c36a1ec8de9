//===- LibiptError.cpp - libipt status codes as llvm::Error ---------------===//
//
// The decoder's one place where a libipt status becomes text or an error
// (Libipt.h's LibiptError); Image.cpp and PieceDecoder.cpp call the makers
// in LibiptError.h, which say what the user can do about each failure.
//
//===----------------------------------------------------------------------===//
#include "LibiptError.h"

#include "llvm/Support/Format.h"

#include <intel-pt.h>

namespace magic_trace {

char LibiptError::ID = 0;

std::string libiptStatusText(int status) {
  return pt_errstr(pt_errcode(status));
}

void LibiptError::log(llvm::raw_ostream &os) const {
  os << what << ": " << libiptStatusText(statusCode) << ", status "
     << statusCode;
  if (traceOffset != NoOffset)
    os << " at trace offset " << llvm::format_hex(traceOffset, 0);
  if (lastIp)
    os << ", ip " << llvm::format_hex(lastIp, 0);
  if (!hint.empty())
    os << " (" << hint << ")";
}

namespace decode_detail {

// libipt's allocators return null without a status; the only cause that is
// not our bug is memory, so they report -pte_nomem (as LLDB's decoder does).
llvm::Error allocationFailed(llvm::StringRef what) {
  return llvm::make_error<LibiptError>(
      -pte_nomem, "libipt could not allocate " + what.str(),
      "free some memory and try again");
}

llvm::Error libiptBug(int status, llvm::StringRef what) {
  return llvm::make_error<LibiptError>(
      status, what,
      "a magic-trace bug: please report it with the trace that shows it");
}

} // namespace decode_detail
} // namespace magic_trace
