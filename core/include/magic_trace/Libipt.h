//===- Libipt.h - Facts about the libipt library we link ---------*- C++
//-*-===//
//
// libipt (intel-pt.h) is included only under core/lib/decode/ (and the packet
// writer); the rest of the core sees it through small headers like this one:
// the library's version and the error a failed libipt call becomes.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIBIPT_H
#define MAGIC_TRACE_LIBIPT_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace magic_trace {

/// "2.0.5" style version of the libipt loaded at run time.
std::string libiptVersion();

/// A libipt call that failed, as an llvm::Error: its status code (a negative
/// pte_* value), where in the trace and at which IP when known, what failed,
/// and what the user can do. Each layer that calls libipt makes these in one
/// place (the decoder: core/lib/decode/LibiptError.cpp's makers), as LLDB's
/// IntelPTError does. A decode error inside a trace is data, not this: a
/// DecodeError item with the same status, offset and IP.
class LibiptError : public llvm::ErrorInfo<LibiptError> {
public:
  static char ID;
  static constexpr uint64_t NoOffset = UINT64_MAX;

  /// `what` failed with `status`; `hint` says what to do.
  LibiptError(int status, llvm::StringRef what, llvm::StringRef hint,
              uint64_t offset = NoOffset, uint64_t ip = 0)
      : statusCode(status), what(what.str()), hint(hint.str()),
        traceOffset(offset), lastIp(ip) {}

  int status() const { return statusCode; }
  uint64_t offset() const { return traceOffset; }
  uint64_t ip() const { return lastIp; }

  /// "WHAT: libipt's text, status N[ at trace offset 0x.., ip 0x..] (HINT)".
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }

private:
  int statusCode;
  std::string what;
  std::string hint;
  uint64_t traceOffset;
  uint64_t lastIp;
};

/// libipt's text for a status code ("decoder out of sync" etc).
std::string libiptStatusText(int status);

} // namespace magic_trace

#endif
