//===- CodeElf.h - Code outside files, as an ELF file others load -*- C++
//-*-===//
//
// Internal to core/lib/formats/. Code that ran outside any file (JIT code,
// code rewritten in place: CodeHistory's Bytes changes) has to be a file for
// the decoders others wrote: LLDB's `trace load` reads a bundle's modules
// from files, and perf reads code through a mapping's file and pgoff (what
// `perf inject --jit` makes of a jitdump: one small ELF per function). This
// writes one version of such code as a minimal ELF64 executable: one
// PT_LOAD segment (read, execute) whose virtual address is the code's own,
// a .text section over the same bytes and a function symbol for each name
// known inside them (System V gABI, "ELF Header", "Program Header",
// "Sections", "Symbol Table").
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_FORMATS_CODEELF_H
#define MAGIC_TRACE_FORMATS_CODEELF_H

#include "magic_trace/CodeHistory.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace magic_trace {

/// Where the code's first byte is in a file writeCodeElf writes: a mapping
/// of the file at the code's address has this page offset (perf's pgoff is
/// this rounded down to a page: CodeElfPageOffset).
constexpr uint64_t codeElfFileOffset(uint64_t address) {
  return 0x1000 + (address & 0xfff);
}
/// The file offset a page-aligned mapping of the code starts at.
constexpr uint64_t CodeElfPageOffset = 0x1000;

/// The bytes of an ELF file holding `code` at `address`, with a function
/// symbol for each of `symbols` that starts inside it (its size cut at the
/// code's end).
std::string codeElf(uint64_t address, llvm::ArrayRef<uint8_t> code,
                    llvm::ArrayRef<JitSymbol> symbols);

/// Writes codeElf(address, code, symbols) to `path`, replacing a file
/// there. Errors: the file cannot be written (what to check).
llvm::Error writeCodeElf(llvm::StringRef path, uint64_t address,
                         llvm::ArrayRef<uint8_t> code,
                         llvm::ArrayRef<JitSymbol> symbols);

} // namespace magic_trace

#endif
