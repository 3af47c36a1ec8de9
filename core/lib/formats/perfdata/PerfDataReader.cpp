//===- PerfDataReader.cpp - A per-thread Intel PT perf.data -> Snapshot ---===//
//
// The reader's last stage (PerfDataContents.h has the first two): what the
// records said becomes a Snapshot: the intel_pt event found, modules from
// the mappings, threads and their streams (per-CPU ones split), CPU and
// clock.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/PerfData.h"
#include "magic_trace/ProcessModules.h"

#include "KernelRecords.h"
#include "PerCpuTrace.h"
#include "PerfDataContents.h"
#include "PerfDataFormat.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/MemoryBuffer.h"

#include <map>
#include <optional>

using namespace llvm;

namespace magic_trace {
namespace {

using namespace perfdata;

/// Whether a mapping names a module: a file or the vdso, not anonymous or
/// kernel-provided memory.
bool isModulePath(StringRef path) {
  if (path == "[vdso]")
    return true;
  return !path.empty() && !path.starts_with("[") && !path.starts_with("//");
}

std::vector<Module> buildModules(const Contents &contents, uint64_t pid,
                                 StringRef symfs) {
  std::vector<Module> modules;
  std::map<std::string, size_t> byPath;
  for (const Mapping &mapping : contents.mappings) {
    if (mapping.pid != pid || !isModulePath(mapping.path))
      continue;
    auto [it, inserted] = byPath.try_emplace(mapping.path, modules.size());
    if (inserted) {
      Module module;
      module.path = mapping.path;
      module.buildId = mapping.buildId;
      auto known = contents.buildIds.find(mapping.path);
      if (module.buildId.empty() && known != contents.buildIds.end())
        module.buildId = known->second;
      // File offset 0 sits pgoff bytes below the mapping (segments keep
      // their file layout).
      module.loadAddress = mapping.segment.address - mapping.segment.fileOffset;
      std::string file = lookUpModuleFile(module.path, module.buildId, symfs);
      if (file != module.path)
        module.fileCopy = file;
      modules.push_back(std::move(module));
    }
    modules[it->second].segments.push_back(mapping.segment);
  }
  // "pgoff bytes below the mapping" is file offset 0 only where the code
  // segment's offset equals its address; lld's (`LOAD 0x620 vaddr 0x1620`)
  // maps offset 0 again at 0x1000, so the ELF headers place the module.
  for (Module &module : modules) {
    Expected<PlacedElf> placed =
        placeElfByMappings(module.fileToRead(), module.segments);
    if (placed)
      module.loadAddress = placed->loadAddress;
    else
      consumeError(placed.takeError());
  }
  return modules;
}

/// The intel_pt attr: the one whose type AUXTRACE_INFO names.
Expected<const Attr *> findPtAttr(const Contents &contents) {
  uint64_t pmuType = (*contents.ptPriv)[kPtPmuType];
  for (const Attr &attr : contents.attrs)
    if (attr.type == pmuType)
      return &attr;
  return malformed(contents.ptPrivOffset,
                   "no attr has the Intel PT PMU type " + Twine(pmuType) +
                       " that AUXTRACE_INFO names (unknown attr type)");
}

Expected<Snapshot> buildSnapshot(Contents contents,
                                 const PerfDataReadOptions &options) {
  Snapshot snapshot;
  if (contents.ptPriv) {
    const std::vector<uint64_t> &priv = *contents.ptPriv;
    Expected<const Attr *> attr = findPtAttr(contents);
    if (!attr)
      return attr.takeError();
    snapshot.time.timeShift = uint16_t(priv[kPtTimeShift]);
    snapshot.time.timeMult = uint32_t(priv[kPtTimeMult]);
    snapshot.time.timeZero = priv[kPtTimeZero];
    if (priv.size() > kPtCycBit && priv[kPtMtcFreqBits]) {
      uint64_t bits = priv[kPtMtcFreqBits];
      snapshot.timing.mtcFreq =
          uint8_t(((*attr)->config & bits) >> countr_zero(bits));
      snapshot.timing.cpuid15Ebx = uint32_t(priv[kPtTscCtcN]);
      snapshot.timing.cpuid15Eax = uint32_t(priv[kPtTscCtcD]);
    }
    if (priv.size() > kPtMaxNonTurboRatio)
      snapshot.timing.nomFreq = uint8_t(priv[kPtMaxNonTurboRatio]);
    for (ThreadTrace &thread : contents.threads)
      thread.wrapped = priv[kPtSnapshotMode] != 0;
    if (contents.perCpu) {
      PerCpuStats split;
      Expected<std::vector<ThreadTrace>> threads =
          splitPerCpu(contents.cpus, std::move(contents.auxPieces),
                      priv[kPtSnapshotMode] != 0, &split);
      if (options.stats) {
        options.stats->piecesUsed = split.pieces;
        options.stats->piecesLost = split.lostPieces;
        options.stats->wholeStreams = split.wholeStreams;
        for (const auto &[cpu, stream] : contents.cpus)
          options.stats->auxBytesByCpu[cpu] = stream.bytes.size();
      }
      if (!threads)
        return threads.takeError();
      contents.threads = std::move(*threads);
    }
  } else if (options.requireTrace) {
    return createStringError("perf.data: no AUXTRACE_INFO record (not an "
                             "Intel PT recording: record with perf record -e "
                             "intel_pt//u --per-thread)");
  }
  if (options.requireTrace && contents.threads.empty())
    return createStringError("perf.data: no AUXTRACE data (the recording has "
                             "no Intel PT bytes)");
  if (contents.cpu)
    snapshot.cpu = *contents.cpu;
  // The process: the one whose thread was traced, else the first COMM.
  std::optional<uint32_t> firstTid;
  if (!contents.threads.empty())
    firstTid = uint32_t(contents.threads.front().tid);
  else if (!contents.pidOfTid.empty())
    firstTid = contents.pidOfTid.begin()->first;
  if (firstTid) {
    auto pid = contents.pidOfTid.find(*firstTid);
    snapshot.pid = pid != contents.pidOfTid.end() ? pid->second : *firstTid;
    auto comm = contents.commOfTid.find(uint32_t(snapshot.pid));
    if (comm == contents.commOfTid.end())
      comm = contents.commOfTid.find(*firstTid);
    if (comm != contents.commOfTid.end())
      snapshot.processName = comm->second;
  }
  snapshot.modules = buildModules(contents, snapshot.pid, options.symfs);
  snapshot.threads = std::move(contents.threads);
  return snapshot;
}

} // namespace

std::string perfRecordName(uint32_t type) {
  // include/uapi/linux/perf_event.h and tools/perf/util/event.h.
  static const char *const kernel[] = {nullptr,        "MMAP",
                                       "LOST",         "COMM",
                                       "EXIT",         "THROTTLE",
                                       "UNTHROTTLE",   "FORK",
                                       "READ",         "SAMPLE",
                                       "MMAP2",        "AUX",
                                       "ITRACE_START", "LOST_SAMPLES",
                                       "SWITCH",       "SWITCH_CPU_WIDE",
                                       "NAMESPACES",   "KSYMBOL",
                                       "BPF_EVENT",    "CGROUP",
                                       "TEXT_POKE",    "AUX_OUTPUT_HW_ID"};
  static const char *const user[] = {"HEADER_ATTR",
                                     "HEADER_EVENT_TYPE",
                                     "HEADER_TRACING_DATA",
                                     "HEADER_BUILD_ID",
                                     "FINISHED_ROUND",
                                     "ID_INDEX",
                                     "AUXTRACE_INFO",
                                     "AUXTRACE",
                                     "AUXTRACE_ERROR",
                                     "THREAD_MAP",
                                     "CPU_MAP",
                                     "STAT_CONFIG",
                                     "STAT",
                                     "STAT_ROUND",
                                     "EVENT_UPDATE",
                                     "TIME_CONV",
                                     "HEADER_FEATURE",
                                     "COMPRESSED",
                                     "FINISHED_INIT"};
  const char *name = nullptr;
  if (type < std::size(kernel))
    name = kernel[type];
  else if (type >= kRecordUserTypeStart &&
           type - kRecordUserTypeStart < std::size(user))
    name = user[type - kRecordUserTypeStart];
  if (!name)
    return "type " + std::to_string(type);
  return std::string("PERF_RECORD_") + name;
}

Expected<Snapshot> parsePerfData(ArrayRef<uint8_t> bytes,
                                 const PerfDataReadOptions &options) {
  Expected<Contents> contents = readContents(bytes, options.stats);
  if (!contents)
    return contents.takeError();
  return buildSnapshot(std::move(*contents), options);
}

Expected<Snapshot> readPerfData(StringRef path,
                                const PerfDataReadOptions &options) {
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/false,
                                      /*RequiresNullTerminator=*/false);
  if (!buffer)
    return createStringError("cannot read " + path + ": " +
                             buffer.getError().message());
  return parsePerfData(arrayRefFromStringRef((*buffer)->getBuffer()), options);
}

} // namespace magic_trace
