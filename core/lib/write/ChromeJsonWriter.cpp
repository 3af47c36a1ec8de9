//===- ChromeJsonWriter.cpp - Chrome trace-event JSON ---------------------===//
//
// Format: "Trace Event Format" (Google doc linked from catapult). Perfetto UI
// and chrome://tracing both open it.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/TraceWriters.h"

#include "DisplayClock.h"
#include "ValidatedWriters.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

namespace magic_trace {
namespace {

/// JSON strings must be UTF-8; symbol names from binaries need not be.
std::string validUtf8(llvm::StringRef text) {
  if (llvm::json::isUTF8(text))
    return text.str();
  return llvm::json::fixUTF8(text);
}

/// Microseconds with all nanosecond digits, without going through a double
/// (which would lose digits of large timestamps).
void microseconds(llvm::json::OStream &json, uint64_t ns) {
  json.rawValue([ns](llvm::raw_ostream &os) {
    os << ns / 1000 << '.' << llvm::format("%03u", unsigned(ns % 1000));
  });
}

class ChromeWriter {
public:
  ChromeWriter(const TraceModel &model, llvm::raw_ostream &os,
               const ChromeJsonOptions &options)
      : model(model), json(os), options(options) {}

  void write() {
    json.object([&] {
      json.attribute("displayTimeUnit", "ns");
      json.attributeArray("traceEvents", [&] {
        metadata("process_name", 0, model.processName);
        for (const ThreadModel &thread : model.threads) {
          metadata("thread_name", thread.tid, thread.name);
          clock.reset();
          std::string note = clockNote(thread);
          if (!note.empty() && !thread.segments.empty())
            instant(thread, EstimatedTimesName, thread.segments.front().begin,
                    "clock", note);
          // Where the snapshot's window cut the thread, and what it holds.
          if (thread.windowStart != 0 && !thread.segments.empty())
            instant(thread, WindowStartName, thread.windowStart, "window",
                    model.windowNote);
          for (size_t s = 0; s < thread.segments.size(); ++s)
            writeSegment(thread, s);
        }
      });
    });
  }

private:
  void metadata(llvm::StringRef kind, uint64_t tid, llvm::StringRef name) {
    json.object([&] {
      json.attribute("name", kind);
      json.attribute("ph", "M");
      json.attribute("pid", int64_t(model.pid));
      json.attribute("tid", int64_t(tid));
      json.attributeObject("args",
                           [&] { json.attribute("name", validUtf8(name)); });
    });
  }

  void instant(const ThreadModel &thread, llvm::StringRef name, uint64_t ns,
               llvm::StringRef argName, llvm::StringRef argText) {
    json.object([&] {
      json.attribute("name", validUtf8(name));
      json.attribute("cat", options.category);
      json.attribute("ph", "i");
      json.attribute("s", "t");
      json.attribute("pid", int64_t(model.pid));
      json.attribute("tid", int64_t(thread.tid));
      json.attributeBegin("ts");
      microseconds(json, ns);
      json.attributeEnd();
      if (!argText.empty())
        json.attributeObject(
            "args", [&] { json.attribute(argName, validUtf8(argText)); });
    });
  }

  void writeSegment(const ThreadModel &thread, size_t index) {
    const Segment &segment = thread.segments[index];
    // Perfetto nests these times as the model (DisplayClock.h).
    clock.place(segment);
    if (index > 0 || !segment.gapReason.empty())
      instant(thread, segment.stitchedToPrevious ? "[gap, stitched]" : "[gap]",
              clock.segmentBegin(), "reason", segment.gapReason);
    clock.forEachFrame(segment, [&](uint32_t i, uint64_t begin, uint64_t end) {
      const Frame &frame = segment.frames[i];
      writeFrame(thread, frame, begin, end);
      const FrameSite &site = thread.sites[frame.site];
      if (site.kind == FrameKind::DecodeError)
        instant(thread, model.strings.get(site.name), begin, "", "");
    });
  }

  void writeFrame(const ThreadModel &thread, const Frame &frame, uint64_t begin,
                  uint64_t end) {
    const FrameSite &site = thread.sites[frame.site];
    json.object([&] {
      json.attribute("name", validUtf8(model.strings.get(site.name)));
      json.attribute("cat", options.category);
      json.attribute("ph", "X");
      json.attribute("pid", int64_t(model.pid));
      json.attribute("tid", int64_t(thread.tid));
      json.attributeBegin("ts");
      microseconds(json, begin);
      json.attributeEnd();
      json.attributeBegin("dur");
      microseconds(json, end - begin);
      json.attributeEnd();
      json.attributeObject("args", [&] {
        if (site.address != 0)
          json.attribute("address", llvm::formatv("{0:x}", site.address).str());
        llvm::StringRef file = model.strings.get(site.file);
        if (!file.empty())
          json.attribute("file", validUtf8(file));
        if (site.line != 0)
          json.attribute("line", int64_t(site.line));
        json.attribute("inlined", site.kind == FrameKind::Inlined);
        json.attribute("kind", frameKindName(site.kind));
        if (frame.inferred)
          json.attribute("inferred", true);
      });
    });
  }

  const TraceModel &model;
  llvm::json::OStream json;
  const ChromeJsonOptions &options;
  writers::DisplayClock clock;
};

} // namespace

llvm::Error writeChromeJson(const TraceModel &model, llvm::raw_ostream &os,
                            const ChromeJsonOptions &options) {
  if (llvm::Error err = validateModel(model))
    return err;
  writers::writeValidatedChromeJson(model, os, options);
  return llvm::Error::success();
}

void writers::writeValidatedChromeJson(const TraceModel &model,
                                       llvm::raw_ostream &os,
                                       const ChromeJsonOptions &options) {
  ChromeWriter(model, os, options).write();
  os << '\n';
}

} // namespace magic_trace
