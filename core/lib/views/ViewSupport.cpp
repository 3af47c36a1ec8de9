//===- ViewSupport.cpp - What the views share -----------------------------===//
#include "ViewSupport.h"

#include "ExecutedCode.h"

#include "magic_trace/TraceWriters.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Demangle/Demangle.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace llvm;

namespace magic_trace::views {

bool isCodeKind(FrameKind kind) {
  return kind == FrameKind::Physical || kind == FrameKind::Inlined ||
         kind == FrameKind::Unknown;
}

Error checkThread(const TraceModel &model, uint64_t tid) {
  if (tid == 0 ||
      std::any_of(model.threads.begin(), model.threads.end(),
                  [&](const ThreadModel &thread) { return thread.tid == tid; }))
    return Error::success();
  return createStringError("the snapshot has no thread %llu in its window "
                           "(see 'magic-trace report' for its threads)",
                           (unsigned long long)tid);
}

namespace {

/// One site's frames in one thread.
struct SiteTotals {
  uint64_t calls = 0, selfNs = 0, totalNs = 0;
};

/// Sums the frames of `segment` per site. A frame's total counts only
/// when no frame of the same function is open above it: the open frames
/// are a stack (pre-order, parents before children), with a count per
/// name of the frames on it.
void addSegment(const ThreadModel &thread, const Segment &segment,
                std::vector<SiteTotals> &sites) {
  const FrameList &frames = segment.frames;
  std::vector<uint64_t> childNs(frames.size(), 0);
  for (size_t i = 0; i < frames.size(); ++i)
    if (frames[i].parent != Frame::NoParent)
      childNs[frames[i].parent] += frames[i].end - frames[i].begin;
  std::vector<uint32_t> open;
  DenseMap<StringId, uint32_t> openByName;
  uint32_t continued = segment.stitchedToPrevious ? segment.continuedFrames : 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    const Frame &frame = frames[i];
    while (!open.empty() && open.back() != frame.parent) {
      --openByName[thread.sites[frames[open.back()].site].name];
      open.pop_back();
    }
    StringId name = thread.sites[frame.site].name;
    SiteTotals &totals = sites[frame.site];
    uint64_t ns = frame.end - frame.begin;
    if (i >= continued)
      ++totals.calls;
    totals.selfNs += ns - std::min(ns, childNs[i]);
    uint32_t &above = openByName[name];
    if (above == 0)
      totals.totalNs += ns;
    ++above;
    open.push_back(uint32_t(i));
  }
}

} // namespace

std::map<std::string, FrameTotals> frameTotals(const TraceModel &model,
                                               uint64_t tid) {
  std::map<std::string, FrameTotals> byName;
  for (const ThreadModel &thread : model.threads) {
    if (tid && thread.tid != tid)
      continue;
    std::vector<SiteTotals> sites(thread.sites.size());
    for (const Segment &segment : thread.segments)
      addSegment(thread, segment, sites);
    for (size_t id = 0; id < sites.size(); ++id) {
      const SiteTotals &site = sites[id];
      const FrameSite &frameSite = thread.sites[SiteId(id)];
      if (site.calls == 0 && site.selfNs == 0 && site.totalNs == 0)
        continue;
      if (frameSite.kind == FrameKind::DecodeError)
        continue;
      auto [slot, inserted] =
          byName.try_emplace(model.strings.get(frameSite.name).str());
      FrameTotals &totals = slot->second;
      if (inserted) {
        totals.kind = frameSite.kind;
        totals.file = model.strings.get(frameSite.file).str();
        totals.line = frameSite.line;
      }
      totals.calls += site.calls;
      totals.selfNs += site.selfNs;
      totals.totalNs += site.totalNs;
    }
  }
  return byName;
}

/// Whether a function symbol of the ELF file `path` is `query` (as it is,
/// or demangled and without its parameter list).
static bool fileNamesFunction(StringRef path, StringRef query) {
  Expected<object::OwningBinary<object::ObjectFile>> file =
      object::ObjectFile::createObjectFile(path);
  if (!file) {
    consumeError(file.takeError());
    return false;
  }
  for (const object::SymbolRef &symbol : file->getBinary()->symbols()) {
    Expected<object::SymbolRef::Type> type = symbol.getType();
    Expected<StringRef> name = symbol.getName();
    if (!type || !name || *type != object::SymbolRef::ST_Function) {
      if (!type)
        consumeError(type.takeError());
      if (!name)
        consumeError(name.takeError());
      continue;
    }
    if (*name == query || namesFunction(query, demangle(*name)))
      return true;
  }
  return false;
}

Error notRunError(const Snapshot &snapshot, StringRef query, StringRef where) {
  for (const JitSymbol &symbol : snapshot.code.symbols)
    if (namesFunction(query, symbol.name))
      return createStringError(
          "'%s' did not run in the snapshot's window%s (it is JIT code the "
          "program named; 'magic-trace report --top' lists what ran)",
          query.str().c_str(), where.str().c_str());
  for (const Module &module : snapshot.modules)
    if (fileNamesFunction(module.fileToRead(), query))
      return createStringError(
          "'%s' did not run in the snapshot's window%s (it is in %s; "
          "'magic-trace report --top' lists what ran, and --window all "
          "reads the whole trace)",
          query.str().c_str(), where.str().c_str(),
          sys::path::filename(module.path).str().c_str());
  return createStringError(
      "no function '%s' in the snapshot's modules (check the name; "
      "'magic-trace report --top' lists the functions that ran)",
      query.str().c_str());
}

std::string joinNames(const std::set<std::string> &names, size_t most) {
  std::string text;
  size_t shown = 0;
  for (const std::string &name : names) {
    if (shown == most)
      break;
    text += (shown++ ? ", " : "") + name;
  }
  if (names.size() > shown)
    text += " and " + std::to_string(names.size() - shown) + " more";
  return text;
}

std::string unwalkedNote(uint64_t count) {
  if (count == 0)
    return "";
  return "  note: " + withCommas(count) +
         " instructions whose code could not be read again are counted on "
         "the line and function where reading it stopped\n";
}

std::string timeText(uint64_t ns, bool estimated) {
  return (estimated ? "~" : "") + formatDuration(ns);
}

std::string TextTable::render(StringRef indent) const {
  std::vector<size_t> widths;
  for (const auto &row : rows)
    for (size_t i = 0; i < row.size(); ++i) {
      if (widths.size() <= i)
        widths.push_back(0);
      widths[i] = std::max(widths[i], row[i].size());
    }
  std::string out;
  raw_string_ostream os(out);
  for (const auto &row : rows) {
    os << indent;
    for (size_t i = 0; i < row.size(); ++i) {
      if (i + 1 == row.size()) {
        os << row[i];
        break;
      }
      os.indent(widths[i] - row[i].size()) << row[i] << "  ";
    }
    os << '\n';
  }
  return out;
}

} // namespace magic_trace::views
