//===- CpuIdentity.h - CPU identity for libipt errata -----------*- C++ -*-===//
#ifndef MAGIC_TRACE_CPUIDENTITY_H
#define MAGIC_TRACE_CPUIDENTITY_H

#include <string>

namespace magic_trace {

/// CPU identity as libipt wants it for errata (family/model/stepping), and as
/// LLDB's trace bundle records it in "cpuInfo".
struct CpuIdentity {
  std::string vendor = "unknown"; ///< "GenuineIntel", "AuthenticAMD", ...
  unsigned family = 0;
  unsigned model = 0;
  unsigned stepping = 0;
};

} // namespace magic_trace

#endif
