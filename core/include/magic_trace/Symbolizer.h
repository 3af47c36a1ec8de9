//===- Symbolizer.h - Addresses to inline-aware frames ----------*- C++ -*-===//
//
// Address -> [physical function, inlined callee, ...] with file and line,
// from LLVM DebugInfo (DWARF inlining), falling back to .symtab/.dynsym (or a
// separate debug file's .symtab), then to the function's .eh_frame FDE
// ("module+0xENTRY", docs/symbolizer.md), then to
// "[unknown @ 0xADDR (module)]". Results are cached per module (keyed by
// build-id, not pid) by address range: one lookup answers every address
// inside the same range, where a range is a stretch of code whose whole chain
// (every frame's function, file and line) is the same.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_SYMBOLIZER_H
#define MAGIC_TRACE_SYMBOLIZER_H

#include "magic_trace/Snapshot.h"
#include "magic_trace/StringTable.h"
#include "magic_trace/SymbolRange.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace magic_trace {

struct SymbolizerStats {
  uint64_t lookups = 0;        ///< Calls to lookup().
  uint64_t hits = 0;           ///< Answered from the range cache.
  uint64_t distinctRanges = 0; ///< Ranges computed (DWARF/symtab queries).
};

class SymbolCache;

class Symbolizer {
public:
  struct Options {
    bool demangle = true;
    bool useDebugInfo = true; ///< False: symbol tables only.
  };

  /// Modules whose file is missing or whose build-id differs are reported by
  /// moduleProblems() and symbolize as unknown; construction never fails.
  Symbolizer(std::vector<Module> modules, StringTable &strings,
             Options options);
  Symbolizer(std::vector<Module> modules, StringTable &strings);
  /// Reuses (and adds to) `cache`'s object files; strings are interned in
  /// cache.strings(). The cache must outlive the symbolizer.
  Symbolizer(std::vector<Module> modules, SymbolCache &cache);
  /// A snapshot's code over its time, named as every writer, view and text
  /// dump names it (one path, so that they agree): the modules of the whole
  /// history (modulesOverTime, with `atStop`), the names of code outside
  /// files (perf maps, jitdump: setJitSymbols) and where the history holds
  /// such code (setJitCode).
  Symbolizer(const std::vector<Module> &atStop, const CodeHistory &history,
             StringTable &strings);
  Symbolizer(const std::vector<Module> &atStop, const CodeHistory &history,
             SymbolCache &cache);
  ~Symbolizer();

  /// Names for code outside modules (JIT code: perf maps, jitdump; later
  /// ones win where two overlap). Call before the first lookup.
  void setJitSymbols(std::vector<JitSymbol> symbols);
  /// Where the code history holds code outside files (its Bytes changes):
  /// unnamed code there is JIT code, "[jit 0xADDR]" in module "[jit]" (the
  /// model names a function a call enters by its entry). Call before the
  /// first lookup.
  void setJitCode(const CodeHistory &history);

  /// The range containing runtime `address`. Never fails: unknown code gets a
  /// one-frame "[unknown @ 0xADDR (module)]" range. The reference stays valid
  /// for the symbolizer's lifetime.
  const SymbolRange &lookup(uint64_t address);

  const SymbolizerStats &stats() const;

  /// Keeps the ranges computed so far in the user's cache directory, one
  /// file per object's build-id, for later runs and sessions to find
  /// without reading DWARF (docs/symbolizer.md, "Ranges kept across runs").
  /// Call while the string table is alive; failures are ignored.
  void keepRanges();
  /// One line per module that could not be used, e.g.
  /// "libfoo.so: build-id 1234 differs from the module's 5678".
  std::vector<std::string> moduleProblems() const;

  /// The lowest address `path`'s PT_LOAD segments ask for, page-aligned as
  /// the loader maps it: a Module with this loadAddress and no segments maps
  /// runtime addresses 1:1 onto file addresses (what llvm-symbolizer --obj
  /// takes). Fails if the file cannot be read or is not ELF.
  static llvm::Expected<uint64_t> preferredLoadAddress(llvm::StringRef path);

private:
  class Impl;
  std::unique_ptr<Impl> impl;
};

/// Object files (symbol tables, DWARF, the ranges computed so far) kept
/// across symbolizers, with the string table their names live in. A debugger
/// session keeps one, so that each snapshot after the first reuses what the
/// earlier ones read. Files are keyed by build-id, or by path, size and
/// modification time when they have none, so a rebuilt file is read again;
/// files that could not be used are retried by the next symbolizer.
class SymbolCache {
public:
  explicit SymbolCache(Symbolizer::Options options = Symbolizer::Options());
  ~SymbolCache();
  SymbolCache(const SymbolCache &) = delete;
  SymbolCache &operator=(const SymbolCache &) = delete;

  StringTable &strings() { return table; }
  /// Object files held.
  size_t objectCount() const;

private:
  friend class Symbolizer;
  struct Objects;
  Symbolizer::Options options;
  StringTable table;
  std::unique_ptr<Objects> objects;
};

} // namespace magic_trace

#endif
