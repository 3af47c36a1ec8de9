//===- Sanitizers.h - Whether this test build is sanitized ------*- C++ -*-===//
//
// Test-only. Timing expectations hold in the normal build only: ASan and
// UBSan make the same work several times slower, and test.sh's stage 2
// still runs the cases for what they check besides time.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_TEST_SUPPORT_SANITIZERS_H
#define MAGIC_TRACE_TEST_SUPPORT_SANITIZERS_H

namespace magic_trace {

#if defined(__has_feature)
#if __has_feature(address_sanitizer) ||                                        \
    __has_feature(undefined_behavior_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#elif defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

} // namespace magic_trace

#endif
