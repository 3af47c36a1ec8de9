//===- StringTable.h - Interned strings -------------------------*- C++ -*-===//
//
// One interning table shared by the symbolizer, the model and the writers.
// Id 0 is always the empty string.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_STRINGTABLE_H
#define MAGIC_TRACE_STRINGTABLE_H

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <deque>
#include <string>

namespace magic_trace {

using StringId = uint32_t;

class StringTable {
public:
  StringTable() { intern(""); }
  // Copies would point into the other table's storage.
  StringTable(const StringTable &) = delete;
  StringTable &operator=(const StringTable &) = delete;
  // Moving keeps the map's entries (and so the views) where they are.
  StringTable(StringTable &&) = default;
  StringTable &operator=(StringTable &&) = default;

  StringId intern(llvm::StringRef text) {
    auto [it, inserted] = ids.try_emplace(text, uint32_t(strings.size()));
    if (inserted)
      strings.push_back(it->getKey());
    return it->second;
  }

  llvm::StringRef get(StringId id) const { return strings[id]; }

  /// A separate table with the same strings under the same ids.
  StringTable clone() const {
    StringTable copy;
    for (size_t id = 1; id < strings.size(); ++id)
      copy.intern(strings[id]);
    return copy;
  }
  size_t size() const { return strings.size(); }

private:
  llvm::StringMap<StringId> ids;
  std::deque<llvm::StringRef> strings; ///< Views into the map's keys.
};

} // namespace magic_trace

#endif
