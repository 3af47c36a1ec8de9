//===- ObjectInfo.h - One object file's symbols, DWARF and ranges -*- C++
//-*-===//
//
// One object file (by build-id): the binary, its DWARF, its symbols, and
// the chains computed so far, each for the largest range of file addresses
// in which it cannot change (the DWARF inline-range intersection,
// docs/symbolizer.md). Internal to core/lib/symbolize/; its .cpp is the only
// core file that includes LLVM DebugInfo headers for symbols.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_SYMBOLIZE_OBJECTINFO_H
#define MAGIC_TRACE_SYMBOLIZE_OBJECTINFO_H

#include "EhFrameBounds.h"
#include "ElfSymbolTable.h"

#include "magic_trace/Symbolizer.h"

#include "llvm/Object/ObjectFile.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class DWARFContext;
} // namespace llvm

namespace magic_trace {

/// A chain computed for a range of file addresses. Unknown ranges have no
/// frames: their one frame names the runtime address, so it is made when the
/// range is placed at a runtime address.
struct FileRange {
  Interval interval;
  uint64_t functionEntry = 0; ///< File address; 0 if unknown.
  std::vector<SymbolFrame> frames;
  bool fromDebugInfo = false;
  /// DWARF has a line here but no function, nor has any symbol or FDE: the
  /// one frame keeps its file and line and is named as unknown code.
  bool noFunction = false;
  /// Read from the cache across runs and not looked up yet: its first
  /// lookup counts as the range a run without the cache would compute, so
  /// that the statistics do not depend on what earlier runs left.
  bool fromCache = false;
};

/// One object file (by build-id): the binary, its DWARF, its symbols, and the
/// ranges computed so far in file addresses.
class ObjectInfo {
public:
  ObjectInfo(const Module &module, const Symbolizer::Options &options,
             StringTable &strings);
  ~ObjectInfo();

  bool usable() const { return problem.empty(); }
  /// Problems that leave the module usable (damaged DWARF).
  const std::vector<std::string> &warningTexts() const { return warnings; }
  const std::string &problemText() const { return problem; }
  const std::vector<LoadSegmentHeader> &loadHeaders() const { return loads; }

  /// The cached range containing `address`, computing it on a miss.
  const FileRange &rangeFor(uint64_t address, SymbolizerStats &stats);

  /// Writes the ranges computed so far to the cache across runs
  /// (RangeDiskCache.h) when there are new ones. Call while the string
  /// table is alive.
  void keepRanges();

private:
  FileRange compute(uint64_t address);
  void readSymbols(const llvm::object::ObjectFile &object,
                   const llvm::object::ObjectFile *debugFile,
                   const std::string &debugPath);
  void addFunctionBounds(uint64_t address, FileRange &range);
  void loadDebugInfo();
  /// Fills `range` from DWARF; false if DWARF knows nothing of `address`.
  bool addDebugInfo(uint64_t address, const SymbolMatch &match,
                    FileRange &range);
  /// Narrows a symbol-table range to the code no compile unit covers, so that
  /// it never spans code DWARF describes; inside a unit (DWARF that knows
  /// nothing of this address) it keeps the address alone.
  void clipToCodeWithoutDwarf(uint64_t address, Interval &interval);
  StringId internName(llvm::StringRef name);

  StringTable &strings;
  std::string moduleName; ///< File name of the module's path.
  bool demangle;
  std::string problem;
  std::vector<std::string> warnings;
  llvm::object::OwningBinary<llvm::object::ObjectFile> owner;
  llvm::object::OwningBinary<llvm::object::ObjectFile>
      debugOwner; ///< Separate DWARF.
  std::vector<LoadSegmentHeader> loads;
  SymbolTable symbols;
  EhFrameBounds functions; ///< For code no symbol covers.
  std::unique_ptr<llvm::DWARFContext> dwarf;
  /// The object whose DWARF loadDebugInfo reads, until it has.
  const llvm::object::ObjectFile *pendingDebugObject = nullptr;
  bool unitRangesBuilt = false;
  std::vector<std::pair<uint64_t, uint64_t>> unitRanges; ///< Sorted.
  std::vector<uint64_t> highestEnd;     ///< Max end of unitRanges[0..i].
  std::map<uint64_t, FileRange> ranges; ///< Keyed by begin.
  /// Where the ranges are kept across runs (RangeDiskCache.h), or "", and
  /// how many came from there: more are written back when it goes.
  std::string cachePath;
  size_t cachedRanges = 0;
};

} // namespace magic_trace

#endif
