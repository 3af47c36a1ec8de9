//===- TreeRenderer.cpp - Call tree for the terminal ----------------------===//
#include "magic_trace/TraceWriters.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <iterator>
#include <vector>

namespace magic_trace {

std::string withCommas(uint64_t value) {
  std::string digits = std::to_string(value);
  std::string text;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      text += ',';
    text += digits[i];
  }
  return text;
}

std::string formatSize(uint64_t bytes) {
  static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  size_t unit = 0;
  uint64_t scale = 1;
  while (unit + 1 < std::size(units) && bytes >= scale * 1024) {
    scale *= 1024;
    ++unit;
  }
  if (bytes % scale == 0)
    return std::to_string(bytes / scale) + " " + units[unit];
  return llvm::formatv("{0:f1} {1}", double(bytes) / double(scale), units[unit])
      .str();
}

std::string formatDuration(uint64_t ns) {
  std::string out;
  llvm::raw_string_ostream os(out);
  auto scaled = [&](uint64_t unit, const char *suffix) {
    os << ns / unit << '.'
       << llvm::format("%03u", unsigned(ns % unit * 1000 / unit)) << suffix;
  };
  if (ns < 1000)
    os << ns << "ns";
  else if (ns < 1000000)
    scaled(1000, "us");
  else if (ns < 1000000000)
    scaled(1000000, "ms");
  else
    scaled(1000000000, "s");
  return out;
}

llvm::Expected<uint64_t> parseDuration(llvm::StringRef text) {
  auto invalid = [&](llvm::StringRef why) {
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "invalid duration '" + text + "': " + why +
            " (write a number and a unit, e.g. 20us, 1.5ms; units: ns, us, "
            "ms, s)");
  };
  llvm::StringRef rest = text.trim();
  size_t digits = rest.find_first_not_of("0123456789.");
  llvm::StringRef number = rest.take_front(digits);
  llvm::StringRef unit = rest.drop_front(number.size()).trim();
  if (number.empty() || number.count('.') > 1 || number == ".")
    return invalid("no number");
  uint64_t scale;
  if (unit == "ns")
    scale = 1;
  else if (unit == "us" || unit == "\xc2\xb5s") // µs
    scale = 1000;
  else if (unit == "ms")
    scale = 1000000;
  else if (unit == "s")
    scale = 1000000000;
  else
    return invalid(unit.empty() ? "no unit" : "unknown unit");
  auto [whole, fraction] = number.split('.');
  uint64_t value = 0;
  if (!whole.empty() && whole.getAsInteger(10, value))
    return invalid("number too large");
  if (value > UINT64_MAX / scale)
    return invalid("too large");
  value *= scale;
  // Fractional digits below 1 ns are dropped.
  uint64_t place = scale;
  for (char c : fraction) {
    place /= 10;
    value += uint64_t(c - '0') * place;
  }
  return value;
}

namespace {

class TreePrinter {
public:
  TreePrinter(const TraceModel &model, const TreeOptions &options,
              llvm::raw_ostream &os)
      : model(model), options(options), os(os) {}

  void print() {
    uint64_t traceEnd = 0;
    for (const ThreadModel &thread : model.threads)
      if (!thread.segments.empty())
        traceEnd = std::max(traceEnd, thread.segments.back().end);
    windowBegin = options.lastNs != 0 && traceEnd > options.lastNs
                      ? traceEnd - options.lastNs
                      : 0;
    os << "process " << model.pid;
    if (!model.processName.empty())
      os << " \"" << model.processName << '"';
    if (options.lastNs != 0)
      os << ", last " << formatDuration(options.lastNs);
    os << '\n';
    for (const ThreadModel &thread : model.threads)
      printThread(thread);
  }

private:
  void printThread(const ThreadModel &thread) {
    os << "thread " << thread.tid;
    if (!thread.name.empty())
      os << " \"" << thread.name << '"';
    uint64_t span =
        thread.segments.empty()
            ? 0
            : thread.segments.back().end -
                  std::max(thread.segments.front().begin, windowBegin);
    os << ": " << thread.segments.size() << " segment"
       << (thread.segments.size() == 1 ? "" : "s") << ", "
       << formatDuration(span) << ", " << thread.errors << " error"
       << (thread.errors == 1 ? "" : "s");
    std::string note = clockNote(thread);
    if (!note.empty())
      os << ", " << note;
    os << '\n';
    os << llvm::format("%12s %12s  %s\n", "total", "self", "frame");
    for (size_t s = 0; s < thread.segments.size(); ++s) {
      const Segment &segment = thread.segments[s];
      if (segment.end < windowBegin ||
          (segment.end == windowBegin && segment.begin < windowBegin))
        continue;
      if (s > 0 || !segment.gapReason.empty())
        printGap(thread, s);
      printSegment(thread, segment);
    }
  }

  void printGap(const ThreadModel &thread, size_t index) {
    const Segment &segment = thread.segments[index];
    os << "  -- " << (segment.stitchedToPrevious ? "stitched gap" : "gap");
    if (index > 0)
      os << " of "
         << formatDuration(segment.begin - thread.segments[index - 1].end);
    if (!segment.gapReason.empty())
      os << ": " << segment.gapReason;
    os << " --\n";
  }

  void printSegment(const ThreadModel &thread, const Segment &segment) {
    const FrameList &frames = segment.frames;
    std::vector<uint64_t> total(frames.size()), self(frames.size());
    std::vector<unsigned> depth(frames.size());
    for (size_t i = 0; i < frames.size(); ++i) {
      const Frame &frame = frames[i];
      uint64_t begin = std::max(frame.begin, windowBegin);
      total[i] = frame.end > begin ? frame.end - begin : 0;
      self[i] = total[i];
      depth[i] = 1;
      if (frame.parent != Frame::NoParent) {
        self[frame.parent] -= total[i];
        depth[i] = depth[frame.parent] + 1;
      }
    }
    // Frames that end before the window are hidden, except zero-length ones
    // exactly at its start.
    std::vector<bool> inWindow(frames.size());
    for (size_t i = 0; i < frames.size(); ++i)
      inWindow[i] = windowBegin == 0 || frames[i].end > windowBegin ||
                    frames[i].begin >= windowBegin;
    // Descendants in the window, so a depth-limited line can say what it
    // hides. Children follow parents, so a reverse pass sums them up.
    std::vector<size_t> hidden(frames.size());
    if (options.maxDepth != 0)
      for (size_t i = frames.size(); i-- > 0;)
        if (frames[i].parent != Frame::NoParent && inWindow[i])
          hidden[frames[i].parent] += 1 + hidden[i];
    for (size_t i = 0; i < frames.size(); ++i) {
      if (!inWindow[i] ||
          (options.maxDepth != 0 && depth[i] > options.maxDepth))
        continue;
      bool atLimit = options.maxDepth != 0 && depth[i] == options.maxDepth;
      printFrame(thread.sites[frames[i].site], frames[i], total[i], self[i],
                 depth[i], atLimit ? hidden[i] : 0);
    }
  }

  void printFrame(const FrameSite &site, const Frame &frame, uint64_t total,
                  uint64_t self, unsigned depth, size_t hiddenFrames) {
    os << llvm::format("%12s %12s  ", formatDuration(total).c_str(),
                       formatDuration(self).c_str());
    os.indent(2 * (depth - 1));
    llvm::StringRef name = model.strings.get(site.name);
    os << (name.empty() ? "[unnamed]" : name);
    llvm::StringRef file = model.strings.get(site.file);
    if (!file.empty()) {
      os << "  (" << file;
      if (site.line != 0)
        os << ':' << site.line;
      os << ')';
    }
    if (site.kind == FrameKind::Inlined)
      os << " [inlined]";
    if (frame.inferred)
      os << " [inferred]";
    if (frame.begin < windowBegin)
      os << " [clipped]";
    if (hiddenFrames != 0)
      os << " [+" << hiddenFrames << " deeper]";
    os << '\n';
  }

  const TraceModel &model;
  const TreeOptions &options;
  llvm::raw_ostream &os;
  uint64_t windowBegin = 0;
};

} // namespace

std::string renderTree(const TraceModel &model, const TreeOptions &options) {
  std::string out;
  llvm::raw_string_ostream os(out);
  TreePrinter(model, options, os).print();
  return out;
}

} // namespace magic_trace
