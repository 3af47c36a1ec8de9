//===- Symbolizer.cpp - Addresses to inline-aware frames, cached ----------===//
//
// A lookup goes runtime address -> mapping (a loaded segment of a module) ->
// file address -> chain. The chains and their file-address ranges come from
// ObjectInfo (ObjectInfo.h); this file is the cache in runtime addresses:
// per loaded mapping, a direct-mapped table of recent ranges in front of a
// tree, and SymbolCache's object files shared across snapshots.
//
//===----------------------------------------------------------------------===//

#include "magic_trace/Symbolizer.h"

#include "ObjectInfo.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <array>
#include <deque>
#include <map>

using namespace llvm;

namespace magic_trace {
namespace {

/// A stretch of runtime addresses mapped linearly onto file addresses.
struct Mapping {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t fileBegin = 0;       ///< File address of `begin`.
  size_t module = 0;            ///< Index into the module list.
  ObjectInfo *object = nullptr; ///< Null when the module is unusable.
};

} // namespace

using ObjectMap = std::map<std::string, std::unique_ptr<ObjectInfo>>;

struct SymbolCache::Objects {
  ObjectMap map;
};

class Symbolizer::Impl {
public:
  /// With `shared` null the symbolizer keeps its own object files.
  Impl(std::vector<Module> moduleList, StringTable &strings, Options options,
       ObjectMap *shared = nullptr)
      : modules(std::move(moduleList)), strings(strings), options(options),
        objects(shared ? *shared : ownObjects), cached(shared != nullptr) {
    for (size_t index = 0; index < modules.size(); ++index)
      addModule(index);
    std::sort(
        mappings.begin(), mappings.end(),
        [](const Mapping &a, const Mapping &b) { return a.begin < b.begin; });
  }

  void keepRanges() {
    for (auto &[key, object] : objects)
      if (object)
        object->keepRanges();
  }

  const SymbolRange &lookup(uint64_t address) {
    ++stats.lookups;
    if (last && last->begin <= address && address < last->end) {
      ++stats.hits;
      return *last;
    }
    // Block addresses repeat (loops, calls to the same functions): a small
    // direct-mapped table answers most lookups without the tree.
    const SymbolRange *&recent =
        recentRanges[(address * 0x9e3779b97f4a7c15ull) >> (64 - RecentBits)];
    if (recent && recent->begin <= address && address < recent->end) {
      ++stats.hits;
      last = recent;
      return *last;
    }
    auto next = byBegin.upper_bound(address);
    if (next != byBegin.begin() && address < std::prev(next)->second->end) {
      ++stats.hits;
      last = recent = std::prev(next)->second;
      return *last;
    }
    SymbolRange range = place(address);
    // Keep runtime ranges disjoint whatever the module list says.
    if (next != byBegin.end())
      range.end = std::min(range.end, next->first);
    if (next != byBegin.begin())
      range.begin = std::max(range.begin, std::prev(next)->second->end);
    stored.push_back(std::move(range));
    last = recent = &stored.back();
    byBegin.emplace_hint(next, last->begin, last);
    return *last;
  }

  SymbolizerStats stats;
  std::vector<std::string> problems;

private:
  void addModule(size_t index) {
    const Module &module = modules[index];
    ObjectInfo *object = objectFor(module);
    if (!object->usable())
      problems.push_back(object->problemText());
    for (const std::string &warning : object->warningTexts())
      if (std::find(problems.begin(), problems.end(), warning) ==
          problems.end())
        problems.push_back(warning);
    ObjectInfo *usable = object->usable() ? object : nullptr;
    const auto &loads = object->loadHeaders();
    if (!module.segments.empty()) {
      for (const LoadedSegment &segment : module.segments)
        addSegment(index, usable, loads, segment,
                   module.loadAddress - preferredBase(loads));
      return;
    }
    // No segments: the loader placed the PT_LOADs at one bias from the
    // lowest one, page-aligned, which is at the module's load address.
    uint64_t bias = module.loadAddress - preferredBase(loads);
    for (const LoadSegmentHeader &load : loads)
      if (load.memSize != 0)
        mappings.push_back({load.vaddr + bias, load.vaddr + bias + load.memSize,
                            load.vaddr, index, usable});
  }

  /// A debugger-reported segment: its file offset and address say which
  /// PT_LOAD (and so which file addresses) it shows. The offset alone does
  /// not: lld maps file offset 0 twice (`LOAD 0x0 vaddr 0x0 R` and `LOAD
  /// 0x620 vaddr 0x1620 R E`, whose page starts at offset 0), so the PT_LOAD
  /// the module's bias puts at the segment's address wins, and the first
  /// that holds the offset is the fallback.
  void addSegment(size_t index, ObjectInfo *object,
                  const std::vector<LoadSegmentHeader> &loads,
                  const LoadedSegment &segment, uint64_t bias) {
    if (segment.size == 0)
      return;
    Mapping mapping{segment.address, segment.address + segment.size, 0, index,
                    nullptr};
    auto holdsOffset = [&](const LoadSegmentHeader &load) {
      return (load.offset & ~(LoaderPageSize - 1)) <= segment.fileOffset &&
             segment.fileOffset <
                 load.offset + std::max(load.fileSize, uint64_t(1));
    };
    auto atAddress = [&](const LoadSegmentHeader &load) {
      uint64_t linked = segment.address - bias;
      return holdsOffset(load) &&
             (load.vaddr & ~(LoaderPageSize - 1)) <= linked &&
             linked < load.vaddr + load.memSize;
    };
    const LoadSegmentHeader *chosen = nullptr;
    for (const LoadSegmentHeader &load : loads)
      if (!chosen && atAddress(load))
        chosen = &load;
    for (const LoadSegmentHeader &load : loads)
      if (!chosen && holdsOffset(load))
        chosen = &load;
    if (chosen) {
      // Modular: a segment may start at the page below the PT_LOAD's offset.
      mapping.fileBegin = chosen->vaddr + (segment.fileOffset - chosen->offset);
      mapping.end = std::min(mapping.end,
                             mapping.begin + (chosen->vaddr + chosen->memSize -
                                              mapping.fileBegin));
      mapping.object = object;
    }
    mappings.push_back(mapping);
  }

  ObjectInfo *objectFor(const Module &module) {
    // A module without a build-id whose file this snapshot has read for
    // another module shares its tables: the QEMU recorder lists a program's
    // own read-only mapping of its file (node maps /usr/bin/node) beside
    // its code, and a second copy of a big file's symbols costs its time
    // and memory again.
    std::pair<std::string, std::string> file{module.path, module.fileToRead()};
    if (module.buildId.empty()) {
      auto same = objectsByFile.find(file);
      if (same != objectsByFile.end())
        return same->second;
    }
    ObjectInfo *result = objectForKey(module);
    if (result->usable())
      objectsByFile.emplace(std::move(file), result);
    return result;
  }

  ObjectInfo *objectForKey(const Module &module) {
    std::string key = module.buildId.empty() ? "path:" + module.fileToRead()
                                             : "id:" + module.buildId;
    if (cached && module.buildId.empty()) {
      // Across snapshots a path may name a rebuilt file.
      sys::fs::file_status status;
      if (!sys::fs::status(module.fileToRead(), status))
        key += ":" + std::to_string(status.getSize()) + ":" +
               std::to_string(
                   status.getLastModificationTime().time_since_epoch().count());
    }
    auto found = objects.find(key);
    // A file that could not be used may have been fixed since.
    if (found != objects.end() && (found->second->usable() || !cached))
      return found->second.get();
    auto object = std::make_unique<ObjectInfo>(module, options, strings);
    ObjectInfo *result = object.get();
    objects[key] = std::move(object);
    return result;
  }

  /// Computes the runtime range of `address` (a cache miss here).
  SymbolRange place(uint64_t address) {
    auto next = std::upper_bound(
        mappings.begin(), mappings.end(), address,
        [](uint64_t a, const Mapping &m) { return a < m.begin; });
    const Mapping *mapping = nullptr;
    if (next != mappings.begin() && address < std::prev(next)->end)
      mapping = &*std::prev(next);
    if (!mapping)
      return placeUnmapped(address, next);
    const Module &module = modules[mapping->module];
    SymbolRange range;
    range.module = strings.intern(module.path);
    range.begin = mapping->begin;
    range.end = mapping->end;
    range.fileBias = mapping->object ? mapping->begin - mapping->fileBegin
                                     : module.loadAddress;
    if (!mapping->object) {
      ++stats.distinctRanges;
      range.frames.push_back(unknownFrame(range.begin, module.path));
      range.unknown = true;
      return range;
    }
    uint64_t fileAddress = mapping->fileBegin + (address - mapping->begin);
    const FileRange &file = mapping->object->rangeFor(fileAddress, stats);
    // Clip in file addresses, where the mapping is [fileBegin, +size).
    uint64_t size = mapping->end - mapping->begin;
    uint64_t fileBegin = std::max(file.interval.begin, mapping->fileBegin);
    uint64_t fileEnd = std::min(file.interval.end, mapping->fileBegin + size);
    range.begin = mapping->begin + (fileBegin - mapping->fileBegin);
    range.end = mapping->begin + (fileEnd - mapping->fileBegin);
    range.fromDebugInfo = file.fromDebugInfo;
    range.frames = file.frames;
    if (file.noFunction) {
      range.frames.front().function =
          unknownFrame(range.begin, module.path).function;
      range.unknown = true;
    }
    if (file.functionEntry != 0)
      range.functionEntry =
          file.functionEntry - mapping->fileBegin + mapping->begin;
    if (range.frames.empty()) {
      range.frames.push_back(unknownFrame(range.begin, module.path));
      range.unknown = true;
    }
    return range;
  }

  /// The JIT symbol holding `address` (the latest of those that do), or
  /// null.
  const JitSymbol *jitSymbolAt(uint64_t address) const {
    const JitSymbol *best = nullptr;
    size_t bestIndex = 0;
    auto next = std::upper_bound(
        jitOrder.begin(), jitOrder.end(), address,
        [&](uint64_t a, size_t i) { return a < jitSymbols[i].address; });
    for (auto it = next; it != jitOrder.begin();) {
      --it;
      const JitSymbol &symbol = jitSymbols[*it];
      if (address - symbol.address >= jitMaxSize)
        break;
      if (address < symbol.address + symbol.size &&
          (!best || *it > bestIndex)) {
        best = &symbol;
        bestIndex = *it;
      }
    }
    return best;
  }

  /// Code no module covers (JIT, or a module without an extent): the JIT
  /// symbol there, else one range per page, within the gap between
  /// mappings.
  SymbolRange placeUnmapped(uint64_t address,
                            std::vector<Mapping>::const_iterator next) {
    ++stats.distinctRanges;
    SymbolRange range;
    if (const JitSymbol *symbol = jitSymbolAt(address)) {
      range.begin = symbol->address;
      range.end = symbol->address + symbol->size;
      range.functionEntry = symbol->address;
      range.module = strings.intern(JitModuleName);
      range.fileBias = 0;
      range.frames.push_back({strings.intern(symbol->name),
                              strings.intern(symbol->file), symbol->line,
                              false});
      return range;
    }
    range.begin = address & ~(LoaderPageSize - 1);
    range.end = range.begin + LoaderPageSize;
    if (range.end < range.begin)
      range.end = NoEnd;
    if (next != mappings.begin() && std::prev(next)->end <= address)
      range.begin = std::max(range.begin, std::prev(next)->end);
    if (next != mappings.end())
      range.end = std::min(range.end, next->begin);
    if (inJitCode(address)) {
      range.module = strings.intern(JitModuleName);
      range.frames.push_back(
          {strings.intern("[jit " + hex(range.begin) + "]"), 0, 0, false});
    } else {
      range.frames.push_back(unknownFrame(range.begin, ""));
    }
    range.unknown = true;
    return range;
  }

  bool inJitCode(uint64_t address) const {
    auto next = std::upper_bound(
        jitCode.begin(), jitCode.end(), address,
        [](uint64_t a, const std::pair<uint64_t, uint64_t> &r) {
          return a < r.first;
        });
    return next != jitCode.begin() && address < std::prev(next)->second;
  }

  SymbolFrame unknownFrame(uint64_t address, StringRef modulePath) {
    std::string name = "[unknown @ " + hex(address);
    if (!modulePath.empty())
      name += " (" + sys::path::filename(modulePath).str() + ")";
    name += "]";
    return {strings.intern(name), 0, 0, false};
  }

public:
  void setJitSymbols(std::vector<JitSymbol> symbols) {
    jitSymbols = std::move(symbols);
    jitOrder.resize(jitSymbols.size());
    jitMaxSize = 1;
    for (size_t i = 0; i < jitSymbols.size(); ++i) {
      jitOrder[i] = i;
      jitMaxSize = std::max(jitMaxSize, jitSymbols[i].size);
    }
    std::sort(jitOrder.begin(), jitOrder.end(), [&](size_t a, size_t b) {
      return jitSymbols[a].address != jitSymbols[b].address
                 ? jitSymbols[a].address < jitSymbols[b].address
                 : a < b;
    });
  }

  void setJitCode(const CodeHistory &history) {
    for (const CodeChange &change : history.changes)
      if (change.kind == CodeChange::Kind::Bytes && change.size)
        jitCode.emplace_back(change.address, change.end());
    std::sort(jitCode.begin(), jitCode.end());
    // Merged, so that one binary search answers.
    std::vector<std::pair<uint64_t, uint64_t>> merged;
    for (const auto &range : jitCode)
      if (!merged.empty() && range.first <= merged.back().second)
        merged.back().second = std::max(merged.back().second, range.second);
      else
        merged.push_back(range);
    jitCode = std::move(merged);
  }

private:
  static constexpr const char *JitModuleName = "[jit]";
  std::vector<Module> modules;
  StringTable &strings;
  Options options;
  /// Names of code outside modules, and their indices by address.
  std::vector<JitSymbol> jitSymbols;
  std::vector<size_t> jitOrder;
  uint64_t jitMaxSize = 1;
  /// Code outside files the history holds, merged, by address.
  std::vector<std::pair<uint64_t, uint64_t>> jitCode;
  ObjectMap ownObjects;
  ObjectMap &objects; ///< ownObjects or a SymbolCache's.
  /// This snapshot's usable objects by (module path, file read).
  std::map<std::pair<std::string, std::string>, ObjectInfo *> objectsByFile;
  bool cached;
  std::vector<Mapping> mappings;  ///< Sorted by begin.
  std::deque<SymbolRange> stored; ///< Stable addresses for returned refs.
  std::map<uint64_t, const SymbolRange *> byBegin;
  const SymbolRange *last = nullptr;
  static constexpr unsigned RecentBits = 12;
  std::array<const SymbolRange *, 1u << RecentBits> recentRanges = {};
};

Symbolizer::Symbolizer(std::vector<Module> modules, StringTable &strings,
                       Options options)
    : impl(std::make_unique<Impl>(std::move(modules), strings, options)) {}

Symbolizer::Symbolizer(std::vector<Module> modules, StringTable &strings)
    : Symbolizer(std::move(modules), strings, Options()) {}

Symbolizer::Symbolizer(std::vector<Module> modules, SymbolCache &cache)
    : impl(std::make_unique<Impl>(std::move(modules), cache.table,
                                  cache.options, &cache.objects->map)) {}

Symbolizer::Symbolizer(const std::vector<Module> &atStop,
                       const CodeHistory &history, StringTable &strings)
    : Symbolizer(modulesOverTime(atStop, history), strings) {
  setJitSymbols(history.symbols);
  setJitCode(history);
}

Symbolizer::Symbolizer(const std::vector<Module> &atStop,
                       const CodeHistory &history, SymbolCache &cache)
    : Symbolizer(modulesOverTime(atStop, history), cache) {
  setJitSymbols(history.symbols);
  setJitCode(history);
}

SymbolCache::SymbolCache(Symbolizer::Options options)
    : options(options), objects(std::make_unique<Objects>()) {}

SymbolCache::~SymbolCache() = default;

size_t SymbolCache::objectCount() const { return objects->map.size(); }

Symbolizer::~Symbolizer() = default;

void Symbolizer::keepRanges() { impl->keepRanges(); }

void Symbolizer::setJitSymbols(std::vector<JitSymbol> symbols) {
  impl->setJitSymbols(std::move(symbols));
}

void Symbolizer::setJitCode(const CodeHistory &history) {
  impl->setJitCode(history);
}

const SymbolRange &Symbolizer::lookup(uint64_t address) {
  return impl->lookup(address);
}

const SymbolizerStats &Symbolizer::stats() const { return impl->stats; }

std::vector<std::string> Symbolizer::moduleProblems() const {
  return impl->problems;
}

Expected<uint64_t> Symbolizer::preferredLoadAddress(StringRef path) {
  Expected<object::OwningBinary<object::ObjectFile>> binary =
      object::ObjectFile::createObjectFile(path);
  if (!binary)
    return createStringError("cannot read " + path + ": " +
                             toString(binary.takeError()) +
                             " (check the path)");
  Expected<std::vector<LoadSegmentHeader>> loads =
      readLoadHeaders(*binary->getBinary());
  if (!loads)
    return createStringError(path + ": " + toString(loads.takeError()) +
                             " (only ELF files can be symbolized)");
  return preferredBase(*loads);
}

} // namespace magic_trace