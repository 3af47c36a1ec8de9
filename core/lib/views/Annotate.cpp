//===- Annotate.cpp - Exact counts per source line of a function ----------===//
#include "magic_trace/Annotate.h"

#include "ExecutedCode.h"
#include "ViewSupport.h"

#include "magic_trace/InsnClassifier.h"
#include "magic_trace/TraceWriters.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

using namespace llvm;

namespace magic_trace {

namespace {

using views::CodeRun;
using views::ExecutedCode;

/// What a row of the annotation is: a file and line, or (file 0) the
/// address of an instruction without one.
struct RowKey {
  StringId file = 0;
  uint32_t line = 0;
  uint64_t address = 0;
  bool operator==(const RowKey &other) const {
    return file == other.file && line == other.line && address == other.address;
  }
  bool operator<(const RowKey &other) const {
    return std::tie(file, line, address) <
           std::tie(other.file, other.line, other.address);
  }
};

/// Walks the window and counts the function's instructions per row.
class LineCounter : public views::RunVisitor {
public:
  LineCounter(ExecutedCode &code, StringRef function, bool perInstruction)
      : code(code), function(function), perInstruction(perInstruction) {}

  void beginThread(uint64_t tid) override {
    last.reset();
    thread = tid;
  }
  void gap() override { last.reset(); }

  void run(const CodeRun &run, InstructionWalker &walker) override {
    std::optional<size_t> frame = frameOf(*run.range);
    if (!frame) {
      last.reset();
      return;
    }
    threads.insert(thread);
    const SymbolFrame &inner = run.range->frames.back();
    StringRef inlined = run.range->frames.size() - 1 != *frame
                            ? code.text(inner.function)
                            : StringRef();
    if (inner.file != 0) {
      RowKey key{inner.file, inner.line, 0};
      AnnotatedLine &row = rowFor(key, inlined);
      add(row, key, run.count, run.selfNs, run.estimated, run.ip);
      if (perInstruction)
        countEach(run, walker, [&](uint64_t ip, uint64_t, uint64_t) {
          insnRow(row, ip, walker, run.mode).count += 1;
        });
      return;
    }
    // No line: each instruction is a row of its own.
    countEach(run, walker, [&](uint64_t ip, uint64_t ns, uint64_t) {
      RowKey key{0, 0, ip};
      AnnotatedLine &row = rowFor(key, inlined);
      add(row, key, 1, ns, run.estimated, ip);
      insnRow(row, ip, walker, run.mode).count += 1;
    });
  }

  std::map<RowKey, AnnotatedLine> rows;
  std::set<uint64_t> threads;

private:
  /// The index in `range`'s chain of the function's frame (the outermost
  /// one that is it), cached per range.
  std::optional<size_t> frameOf(const SymbolRange &range) {
    auto [slot, inserted] = frames.try_emplace(&range, -1);
    if (inserted)
      for (size_t i = 0; i < range.frames.size(); ++i)
        if (code.text(range.frames[i].function) == function) {
          slot->second = int(i);
          break;
        }
    if (slot->second < 0)
      return std::nullopt;
    return size_t(slot->second);
  }

  AnnotatedLine &rowFor(const RowKey &key, StringRef inlined) {
    auto [slot, inserted] = rows.try_emplace(key);
    AnnotatedLine &row = slot->second;
    if (inserted) {
      row.file = code.text(key.file).str();
      row.line = key.line;
      row.address = key.address;
      row.inlined = inlined.str();
    }
    return row;
  }

  /// Adds a run of `count` instructions of `key` starting at `ip`.
  void add(AnnotatedLine &row, const RowKey &key, uint64_t count, uint64_t ns,
           bool estimated, uint64_t ip) {
    if (!last || !(*last == key))
      ++row.entries;
    last = key;
    row.instructions += count;
    row.selfNs += ns;
    row.estimated |= estimated;
    if (row.address == 0 || ip < row.address)
      row.address = ip;
  }

  /// Calls `each(ip, ns, index)` for every instruction of `run`, its
  /// share of the run's time with it.
  template <typename Each>
  void countEach(const CodeRun &run, InstructionWalker &walker, Each each) {
    uint64_t ip = run.ip;
    for (uint32_t i = 0; i < run.count; ++i) {
      uint64_t ns = views::shareUpTo(run.selfNs, i + 1, run.count) -
                    views::shareUpTo(run.selfNs, i, run.count);
      each(ip, ns, i);
      if (i + 1 == run.count)
        break;
      Expected<uint8_t> size = walker.sizeAt(ip, run.mode);
      if (!size) {
        consumeError(size.takeError());
        return;
      }
      ip += *size;
    }
  }

  AnnotatedInstruction &insnRow(AnnotatedLine &row, uint64_t ip,
                                InstructionWalker &walker, ExecMode mode) {
    auto [slot, inserted] = insnIndex.try_emplace(ip, 0);
    if (!inserted && slot->second < row.insns.size() &&
        row.insns[slot->second].address == ip)
      return row.insns[slot->second];
    slot->second = row.insns.size();
    AnnotatedInstruction insn;
    insn.address = ip;
    insn.text = disassemble(ip, walker, mode);
    row.insns.push_back(std::move(insn));
    return row.insns.back();
  }

  /// The instruction at `ip` as it was when it ran.
  std::string disassemble(uint64_t ip, InstructionWalker &walker,
                          ExecMode mode) {
    std::unique_ptr<InsnClassifier> &slot = classifiers[size_t(mode)];
    if (!slot) {
      Expected<std::unique_ptr<InsnClassifier>> made =
          InsnClassifier::create(mode);
      if (!made) {
        consumeError(made.takeError());
        return "";
      }
      slot = std::move(*made);
    }
    uint8_t bytes[16] = {};
    size_t got = walker.read(ip, bytes, 15);
    Expected<std::string> text =
        slot->disassemble(ArrayRef<uint8_t>(bytes, got), ip);
    if (!text) {
      consumeError(text.takeError());
      return "";
    }
    return *text;
  }

  ExecutedCode &code;
  StringRef function;
  bool perInstruction;
  uint64_t thread = 0;
  std::optional<RowKey> last;
  DenseMap<const SymbolRange *, int> frames;
  DenseMap<uint64_t, size_t> insnIndex; ///< Into its row's insns.
  std::unique_ptr<InsnClassifier> classifiers[3];
};

/// The full name FUNCTION means among the functions that ran in `model`
/// (only thread `tid`'s when not 0). Errors: none or several ran.
Expected<std::string> functionThatRan(const Snapshot &snapshot,
                                      const TraceModel &model, uint64_t tid,
                                      StringRef query, ExecutedCode &code) {
  std::set<std::string> names;
  if (query.starts_with("0x")) {
    uint64_t address = 0;
    if (query.getAsInteger(0, address))
      return createStringError("bad address '%s' (write FUNCTION as a name "
                               "or as 0x followed by hex digits)",
                               query.str().c_str());
    const SymbolRange &range = code.symbols().lookup(address);
    if (range.unknown || range.frames.empty())
      return createStringError("no function of the snapshot's modules is at "
                               "%s (give the address of code that ran, or "
                               "the function's name)",
                               query.str().c_str());
    query = code.text(range.frames.front().function);
  }
  for (const ThreadModel &thread : model.threads) {
    if (tid && thread.tid != tid)
      continue;
    for (size_t site = 1; site < thread.sites.size(); ++site) {
      const FrameSite &frameSite = thread.sites[SiteId(site)];
      StringRef name = model.strings.get(frameSite.name);
      if (views::isCodeKind(frameSite.kind) &&
          views::namesFunction(query, name))
        names.insert(name.str());
    }
  }
  if (names.size() == 1)
    return *names.begin();
  if (names.size() > 1)
    return createStringError(
        "'%s' names %zu functions that ran: %s (give one in full, in "
        "quotes)",
        query.str().c_str(), names.size(), views::joinNames(names, 5).c_str());
  return views::notRunError(snapshot, query,
                            tid ? formatv(" in thread {0}", tid).str() : "");
}

/// The text of each line of `path`, when it is readable.
class SourceFiles {
public:
  std::string line(StringRef path, uint32_t number) {
    auto [slot, inserted] = files.try_emplace(path.str());
    if (inserted)
      if (ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
              MemoryBuffer::getFile(path, /*IsText=*/true))
        slot->second = std::move(*buffer);
    if (!slot->second || number == 0)
      return "";
    StringRef text = slot->second->getBuffer();
    for (uint32_t i = 1; i < number && !text.empty(); ++i)
      text = text.split('\n').second;
    return text.split('\n').first.rtrim().str();
  }

private:
  std::map<std::string, std::unique_ptr<MemoryBuffer>> files;
};

} // namespace

Expected<Annotation> annotateFunction(const Snapshot &snapshot,
                                      const TraceModel &model,
                                      SymbolCache *cache,
                                      const AnnotateOptions &options) {
  if (Error error = views::checkThread(model, options.tid))
    return std::move(error);
  Expected<std::unique_ptr<ExecutedCode>> code =
      ExecutedCode::create(snapshot, cache);
  if (!code)
    return code.takeError();
  Expected<std::string> function =
      functionThatRan(snapshot, model, options.tid, options.function, **code);
  if (!function)
    return function.takeError();

  LineCounter counter(**code, *function, options.instructions);
  if (Error error = (*code)->walk(model, options.tid, counter))
    return std::move(error);

  if (counter.rows.empty())
    return createStringError(
        "'%s' ran no instruction in the snapshot's window (its frame there "
        "is where the snapshot stopped, at its entry; annotate it in a "
        "later snapshot)",
        function->c_str());
  Annotation annotation;
  annotation.function = *function;
  annotation.unwalked = (*code)->unwalked();
  std::map<std::string, views::FrameTotals> frames =
      views::frameTotals(model, options.tid);
  if (auto found = frames.find(*function); found != frames.end()) {
    annotation.calls = found->second.calls;
    annotation.file = found->second.file;
    annotation.line = found->second.line;
  }
  annotation.threads = counter.threads.size();
  SourceFiles sources;
  for (auto &[key, row] : counter.rows) {
    annotation.instructions += row.instructions;
    annotation.selfNs += row.selfNs;
    annotation.estimated |= row.estimated;
    if (!options.instructions && key.file != 0)
      row.insns.clear();
    std::sort(row.insns.begin(), row.insns.end(),
              [](const AnnotatedInstruction &a, const AnnotatedInstruction &b) {
                return a.address < b.address;
              });
    row.source = sources.line(row.file, row.line);
    annotation.lines.push_back(std::move(row));
  }
  // Source order: the function's own file first.
  auto rank = [&](const AnnotatedLine &row) {
    return row.file.empty() ? 2 : row.file == annotation.file ? 0 : 1;
  };
  std::sort(
      annotation.lines.begin(), annotation.lines.end(),
      [&](const AnnotatedLine &a, const AnnotatedLine &b) {
        return std::make_tuple(rank(a), StringRef(a.file), a.line, a.address) <
               std::make_tuple(rank(b), StringRef(b.file), b.line, b.address);
      });
  return annotation;
}

/// "emu_calls.cpp:14", or the address of a row without a line.
static std::string placeOf(const AnnotatedLine &row) {
  if (row.file.empty())
    return formatv("{0:x}", row.address).str();
  return (sys::path::filename(row.file) + ":" + Twine(row.line)).str();
}

std::string renderAnnotation(const Annotation &annotation, unsigned snapshot,
                             size_t rows) {
  std::string out;
  raw_string_ostream os(out);
  os << "snapshot " << snapshot << ": " << annotation.function;
  if (!annotation.file.empty()) {
    os << "  (" << sys::path::filename(annotation.file);
    if (annotation.line)
      os << ':' << annotation.line;
    os << ')';
  }
  os << ": " << withCommas(annotation.instructions) << " instructions, "
     << withCommas(annotation.calls) << " call"
     << (annotation.calls == 1 ? "" : "s") << ", self "
     << views::timeText(annotation.selfNs, annotation.estimated) << ", "
     << annotation.threads << " thread" << (annotation.threads == 1 ? "" : "s")
     << '\n';
  views::TextTable table;
  table.add({"instructions", "entries", "self", "line"});
  // `rows` bounds the table: lines and, with --insns, their instructions.
  size_t printed = 0, shown = 0, hiddenInsns = 0;
  for (; shown < annotation.lines.size() && printed < rows; ++shown) {
    const AnnotatedLine &row = annotation.lines[shown];
    std::string place = placeOf(row);
    if (!row.inlined.empty())
      place += " [inlined " + row.inlined + "]";
    if (!row.source.empty())
      place += "    " + row.source;
    // A row without a line is one instruction: its text is the source.
    if (row.file.empty() && !row.insns.empty())
      place += "  " + row.insns.front().text;
    table.add({withCommas(row.instructions), withCommas(row.entries),
               views::timeText(row.selfNs, row.estimated), place});
    ++printed;
    if (row.file.empty())
      continue;
    for (const AnnotatedInstruction &insn : row.insns) {
      if (printed == rows) {
        ++hiddenInsns;
        continue;
      }
      table.add({withCommas(insn.count), "", "",
                 formatv("    {0:x}  {1}", insn.address, insn.text).str()});
      ++printed;
    }
  }
  os << table.render("  ");
  size_t hiddenLines = annotation.lines.size() - shown;
  if (hiddenLines || hiddenInsns) {
    os << "  ... ";
    if (hiddenLines)
      os << withCommas(hiddenLines) << " more line"
         << (hiddenLines == 1 ? "" : "s");
    if (hiddenLines && hiddenInsns)
      os << " and ";
    if (hiddenInsns)
      os << withCommas(hiddenInsns) << " more instruction"
         << (hiddenInsns == 1 ? "" : "s");
    os << " (--rows N shows more)\n";
  }
  if (annotation.estimated)
    os << views::kEstimatedNote;
  os << views::unwalkedNote(annotation.unwalked);
  return out;
}

json::Value annotationJson(const Annotation &annotation, unsigned snapshot,
                           size_t rows) {
  json::Array lines;
  size_t shown = std::min(rows, annotation.lines.size());
  for (size_t i = 0; i < shown; ++i) {
    const AnnotatedLine &row = annotation.lines[i];
    json::Object line{{"file", row.file},
                      {"line", row.line},
                      {"address", row.address},
                      {"inlined", row.inlined},
                      {"instructions", row.instructions},
                      {"entries", row.entries},
                      {"self_ns", row.selfNs},
                      {"estimated", row.estimated}};
    if (!row.insns.empty()) {
      json::Array insns;
      for (const AnnotatedInstruction &insn : row.insns)
        insns.push_back(json::Object{{"address", insn.address},
                                     {"count", insn.count},
                                     {"text", insn.text}});
      line["insns"] = std::move(insns);
    }
    lines.push_back(std::move(line));
  }
  return json::Object{{"snapshot", snapshot},
                      {"function", annotation.function},
                      {"file", annotation.file},
                      {"line", annotation.line},
                      {"calls", annotation.calls},
                      {"threads", annotation.threads},
                      {"instructions", annotation.instructions},
                      {"self_ns", annotation.selfNs},
                      {"estimated", annotation.estimated},
                      {"lines", std::move(lines)},
                      {"more", uint64_t(annotation.lines.size() - shown)}};
}

} // namespace magic_trace
