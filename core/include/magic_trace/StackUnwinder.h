//===- StackUnwinder.h - CFI unwinding of a stopped thread ------*- C++ -*-===//
//
// The emulator's stop context: a stopped thread's stack, innermost first,
// unwound with each module's .eh_frame (DWARF call frame information), so it
// does not depend on frame pointers.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_STACKUNWINDER_H
#define MAGIC_TRACE_STACKUNWINDER_H

#include "magic_trace/Snapshot.h"

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace magic_trace {

/// frames[0] = `pc`, then the return address of each caller, as far as
/// .eh_frame describes the code (it ends at _start, at code without CFI, or
/// after 256 frames). Memory is read from thread `tid` (stopped, ptraced).
/// Never fails: an unwind that cannot continue just ends the list.
std::vector<uint64_t> unwindStack(pid_t tid, uint64_t pc, uint64_t sp,
                                  uint64_t fp,
                                  const std::vector<Module> &modules);

} // namespace magic_trace

#endif
