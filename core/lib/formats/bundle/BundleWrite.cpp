//===- BundleWrite.cpp - LLDB intel-pt trace bundles, written -------------===//
//
// writeBundle: trace.json for LLDB (LldbView.h), magic-trace.json with our
// extras and the code history (BundleHistory.h), into a directory no other
// user can redirect (OutputFiles.h). Reading is Bundle.cpp.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/Bundle.h"
#include "magic_trace/InputFiles.h"
#include "magic_trace/OutputFiles.h"

#include "BundleFields.h"
#include "BundleHistory.h"
#include "LldbView.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

using namespace llvm;

namespace magic_trace {

using namespace bundle_detail;

namespace {

std::string toJsonText(json::Value value) {
  std::string text;
  raw_string_ostream os(text);
  os << formatv("{0:2}", value) << "\n";
  return text;
}

/// The modules magic-trace.json gives segments for: with a code history,
/// every module the trace ran code in, also those unloaded before the stop.
std::vector<Module> bundleModules(const Snapshot &snapshot) {
  if (snapshot.code.changes.empty())
    return snapshot.modules;
  return modulesOverTime(snapshot.modules, snapshot.code);
}

json::Object extrasJson(const Snapshot &snapshot) {
  json::Array modules;
  for (const Module &module : bundleModules(snapshot)) {
    json::Array segments;
    for (const LoadedSegment &segment : module.segments)
      segments.push_back(json::Object{{"address", hex(segment.address)},
                                      {"size", hex(segment.size)},
                                      {"fileOffset", hex(segment.fileOffset)},
                                      {"executable", segment.executable}});
    modules.push_back(json::Object{{"systemPath", module.path},
                                   {"loadAddress", hex(module.loadAddress)},
                                   {"segments", std::move(segments)}});
  }
  json::Array threads;
  for (const ThreadTrace &thread : snapshot.threads) {
    json::Object entry{{"tid", int64_t(thread.tid)},
                       {"wrapped", thread.wrapped}};
    if (!thread.imageMarks.empty())
      entry["imageMarks"] = marksJson(thread.imageMarks);
    threads.push_back(std::move(entry));
  }
  json::Array stop;
  for (const ThreadStop &thread : snapshot.stop) {
    json::Array frames, names;
    for (uint64_t frame : thread.frames)
      frames.push_back(hex(frame));
    for (const std::string &name : thread.functionNames)
      names.push_back(name);
    stop.push_back(json::Object{{"tid", int64_t(thread.tid)},
                                {"triggered", thread.triggered},
                                {"frames", std::move(frames)},
                                {"functionNames", std::move(names)}});
  }
  const PtTimingConfig &timing = snapshot.timing;
  return json::Object{
      {"formatVersion", extrasFormatVersion},
      {"processName", snapshot.processName},
      {"ptTiming", json::Object{{"mtcFreq", int64_t(timing.mtcFreq)},
                                {"nomFreq", int64_t(timing.nomFreq)},
                                {"cpuid15Eax", int64_t(timing.cpuid15Eax)},
                                {"cpuid15Ebx", int64_t(timing.cpuid15Ebx)}}},
      {"modules", std::move(modules)},
      {"threads", std::move(threads)},
      {"stop", std::move(stop)}};
}

/// LLDB reads a module's "file" relative to the bundle: copies made outside
/// it (the vdso, in the debugger's private directory) go into modules/.
Expected<std::optional<Snapshot>> copiesInside(const Snapshot &snapshot,
                                               OutputDir &dir) {
  std::optional<Snapshot> copy;
  for (size_t i = 0; i < snapshot.modules.size(); ++i) {
    const std::string &source = snapshot.modules[i].fileCopy;
    if (source.empty() || !sys::path::is_absolute(source))
      continue;
    Expected<std::unique_ptr<MemoryBuffer>> bytes =
        readInputFile(source, InputPlace::Named);
    if (!bytes)
      return bytes.takeError();
    if (!*bytes)
      continue; // Gone: the module is read from its path, as without a copy.
    std::string name = "modules/" + sys::path::filename(source).str();
    if (Error error = dir.writeFile(name, (*bytes)->getBuffer()))
      return std::move(error);
    if (!copy)
      copy = snapshot;
    copy->modules[i].fileCopy = name;
  }
  return std::move(copy);
}

} // namespace

Error writeBundle(const Snapshot &snapshot, StringRef path) {
  // Bundles hold copies of binaries and memory: private, as perf keeps
  // perf.data, and made so that no other user can redirect them
  // (OutputFiles.h).
  Expected<std::unique_ptr<OutputDir>> made = OutputDir::create(path);
  if (!made)
    return made.takeError();
  OutputDir &dir = **made;
  // An older bundle's trace.json must not survive a failed rewrite.
  if (Error error = dir.removeFile(traceJsonName))
    return error;
  Expected<std::optional<Snapshot>> copied = copiesInside(snapshot, dir);
  if (!copied)
    return copied.takeError();
  const Snapshot &bundled = *copied ? **copied : snapshot;
  Expected<json::Object> lldbView = writeLldbView(bundled, dir);
  if (!lldbView)
    return lldbView.takeError();
  json::Object extras = extrasJson(bundled);
  if (Error error = writeCodeHistory(bundled.code, dir, extras))
    return error;
  if (Error error =
          dir.writeFile(extrasJsonName, toJsonText(std::move(extras))))
    return error;
  if (Error error =
          dir.writeFile(traceJsonName, toJsonText(std::move(*lldbView))))
    return error;
  return dir.commit();
}

} // namespace magic_trace
