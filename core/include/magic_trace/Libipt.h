//===- Libipt.h - Facts about the libipt library we link ---------*- C++
//-*-===//
//
// libipt (intel-pt.h) is included only under core/lib/decode/ (and the packet
// writer); the rest of the core sees it through small headers like this one.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIBIPT_H
#define MAGIC_TRACE_LIBIPT_H

#include <string>

namespace magic_trace {

/// "2.0.5" style version of the libipt loaded at run time.
std::string libiptVersion();

} // namespace magic_trace

#endif
