//===- DwarfLineCheck.h - Sanity check of .debug_line prologues -*- C++ -*-===//
//
// LLVM 22's line-table parser crashes on some damaged prologues (a unit or
// header length past the section, a string offset past .debug_line_str:
// llvm-symbolizer-22 and llvm-dwarfdump-22 crash on the same files), and a
// crash in the symbolizer takes the debugger down with it. The symbolizer
// runs this bounds check first and, when it fails, does not hand the file's
// DWARF to LLVM. Internal to core/lib/symbolize/; includes no DebugInfo header.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_DWARFLINECHECK_H
#define MAGIC_TRACE_LIB_DWARFLINECHECK_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace magic_trace {

/// The raw sections a line-table prologue refers to.
struct DwarfLineSections {
  llvm::StringRef line;    ///< .debug_line
  llvm::StringRef lineStr; ///< .debug_line_str
  llvm::StringRef str;     ///< .debug_str
  bool littleEndian = true;
};

/// Walks every line table of `sections.line` and checks that its lengths
/// stay inside the section, its version is 2-5, and every prologue field
/// (standard opcode lengths, directory and file entries with their forms and
/// string offsets) lies inside its header. Fails with the first problem, e.g.
/// "line table at offset 0x10: header ends past its unit".
llvm::Error checkDwarfLineTables(const DwarfLineSections &sections);

} // namespace magic_trace

#endif
