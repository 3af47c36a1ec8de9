//===- ElfSymbolTable.h - ELF function symbols and PLT stubs ----*- C++ -*-===//
//
// The symbol-table half of symbolization: .symtab (or .dynsym) function
// symbols with llvm-symbolizer's containment rule, PLT stubs named
// <target>@plt as objdump names them, and the ELF program headers that place
// a file in memory. Internal to core/lib/symbolize/.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_SYMBOLIZE_ELFSYMBOLTABLE_H
#define MAGIC_TRACE_SYMBOLIZE_ELFSYMBOLTABLE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/Allocator.h"
#include "llvm/Support/StringSaver.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace magic_trace {

/// Page size the loader aligns the first PT_LOAD to (x86-64).
constexpr uint64_t LoaderPageSize = 4096;
constexpr uint64_t NoEnd = UINT64_MAX;

/// A half-open interval of addresses that lookups narrow down.
struct Interval {
  uint64_t begin = 0;
  uint64_t end = NoEnd;

  void clipBelow(uint64_t address) { begin = std::max(begin, address); }
  void clipAbove(uint64_t address) { end = std::min(end, address); }
  /// Keeps only `address` itself: always correct, used when the debug info is
  /// too odd to reason about.
  void collapseTo(uint64_t address) {
    begin = address;
    end = address + 1;
  }
  /// Narrows to the part of [low, high) containing `address`, seen from
  /// `address`: a range below it raises begin, one above it lowers end.
  void excludeOther(uint64_t low, uint64_t high, uint64_t address) {
    if (low >= high)
      return;
    if (high <= address)
      clipBelow(high);
    else if (low > address)
      clipAbove(low);
    else
      collapseTo(address);
  }
};

/// One PT_LOAD program header.
struct LoadSegmentHeader {
  uint64_t vaddr = 0;
  uint64_t memSize = 0;
  uint64_t offset = 0;
  uint64_t fileSize = 0;
};

/// `value` as 0x-prefixed hex.
std::string hex(uint64_t value);

/// `bytes` as lower-case hex digits (a build-id's usual spelling).
std::string lowerHex(llvm::ArrayRef<uint8_t> bytes);

/// One symbol of .symtab (or .dynsym when there is no .symtab).
struct TableSymbol {
  uint64_t address = 0;
  uint64_t size = 0;
  llvm::StringRef name;
  size_t order = 0; ///< Position in the symbol table.
  /// For a local ELF symbol, the STT_FILE symbol before it: the source file
  /// when there is no debug info (ELF's rule for local symbols).
  llvm::StringRef file;
  uint32_t localIndex = 0; ///< ELF symbol index if local, else 0.
};

/// The symbol-table half of a lookup: the symbol naming `address` (or none)
/// and the interval over which that answer is the same.
struct SymbolMatch {
  const TableSymbol *symbol = nullptr;
  Interval interval;
};

/// Function symbols sorted by address, one per address (the largest), with
/// the containment rule of llvm-symbolizer: a symbol of size 0 covers every
/// address up to the next symbol.
class SymbolTable {
public:
  /// Reads the function symbols of `symbolObject` and the PLT stubs of
  /// `codeObject` (the same file, or a stripped file whose symbols come from
  /// its separate debug file, which has no PLT bytes).
  void build(const llvm::object::ObjectFile &symbolObject,
             const llvm::object::ObjectFile &codeObject);
  /// The symbol naming `address`, and where that answer holds.
  SymbolMatch find(uint64_t address) const;
  bool empty() const;

private:
  void addSymbol(const llvm::object::SymbolRef &symbol, uint64_t size);
  void addPltStubs(const llvm::object::ELFFile<llvm::object::ELF64LE> &elf);
  static std::optional<uint64_t> pltJumpSlot(llvm::ArrayRef<uint8_t> stub,
                                             uint64_t address);
  static std::unordered_map<uint64_t, std::string>
  pltSlotTargets(const llvm::object::ELFFile<llvm::object::ELF64LE> &elf);

  std::vector<TableSymbol> symbols;
  std::vector<std::pair<uint32_t, llvm::StringRef>> fileSymbols; ///< By index.
  llvm::BumpPtrAllocator names;
  llvm::UniqueStringSaver saver{names};
};

/// True if `object` has a .symtab with a symbol in it (not just .dynsym).
bool hasFullSymbolTable(const llvm::object::ObjectFile &object);

/// The PT_LOAD headers of an ELF file; an error for anything else.
llvm::Expected<std::vector<LoadSegmentHeader>>
readLoadHeaders(const llvm::object::ObjectFile &object);

/// llvm::object's symbol accessors call report_fatal_error (abort) on a
/// symbol table whose header points outside the file: checks each symbol
/// table and its string table with the calls that return errors instead.
llvm::Error checkSymbolTables(const llvm::object::ObjectFile &object);

/// The lowest address the file asks to be mapped at: its first PT_LOAD's
/// vaddr, page-aligned down as the loader maps it.
uint64_t preferredBase(const std::vector<LoadSegmentHeader> &loads);

} // namespace magic_trace

#endif
