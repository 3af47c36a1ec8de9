//===- ReplayKernel.cpp - A fake kernel that replays a QEMU recording -----===//
//
// The perf backend end to end, in a debugger, on a machine without Intel PT
// (docs/perf-backend.md): built as build/lib/libmagic-trace-replay-kernel.so
// and named by MAGIC_TRACE_TEST_KERNEL, it is the kernel the perf backend talks
// to (PerfSession.cpp's test hook). Underneath is the unit tests' FakeKernel
// (its perf_event_open, mmap, inherit, AUX and sideband rules); on top, the
// PT its CPUs write is what the QEMU recorder recorded of the same static,
// non-PIE program the debugger runs natively (test/inputs/perf_replay.c),
// whose code has the same addresses in both.
//
// The debugger runs the real process; the hardware's part is played at the
// recorder's first PERF_EVENT_IOC_DISABLE (its first snapshot), before the
// kernel disables anything: the recording's threads are matched to the
// process's threads (the ones traced at attach first, then the others, each
// in tid order; a new thread is created through clone(), so it is traced by
// inherit as a thread made after attach is), and each thread's PT, cut at
// its PSBs into the stretches a thread runs between two switches, runs on
// the CPUs in turn. One stretch can be lost as the kernel marks it: only
// its PSB+ written and its AUX record flagged TRUNCATED.
//
// MAGIC_TRACE_TEST_KERNEL_ARGS, comma-separated:
//   recording=DIR  the magic-trace-emulate bundle (trace.json, threads/)
//   sys=DIR        the sysfs tree with the intel_pt PMU (a unit fixture)
//   cpus=N         CPUs (default 2)
//   lose=T:S       lose stretch S of the recording's thread T (both from 0,
//                  threads in tid order)
//   map=FILE       written at the replay: "<recording tid> <process tid>"
//                  per thread, then "lost <process tid> <stretch>"
//
//===----------------------------------------------------------------------===//
#include "../unit/FakeKernel.h"

#include "../../core/lib/base/PtBytes.h"

#include "magic_trace/Snapshot.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>
#include <set>

using namespace magic_trace;
using magic_trace::testing::FakeKernel;

namespace {

using pt_bytes::kPsbEnd;
constexpr uint64_t kAuxFlagTruncated = 0x01; // PERF_AUX_FLAG_TRUNCATED

/// Anonymous memory the recorded thread made executable: the recording's
/// code log has a version of it that the thread first ran at a mark.
struct ExecMap {
  uint64_t timeNs = 0, address = 0, size = 0;
};

struct RecordedThread {
  uint64_t tid = 0;
  std::vector<std::vector<uint8_t>> stretches;
  /// Per stretch, the mappings the kernel reports before it runs.
  std::vector<std::vector<ExecMap>> mapsBefore;
};

struct Recording {
  CpuIdentity cpu; ///< trace.json's cpuInfo: the CPU the recorder wrote for.
  TimeConversion time; ///< Its tscPerfZeroConversion: the perf page's.
  std::vector<RecordedThread> threads;
};

struct ReplayOptions {
  std::string recording, sys, map;
  unsigned cpus = 2;
  std::optional<std::pair<size_t, size_t>> lose;
};

llvm::Expected<Recording> readRecording(llvm::StringRef dir) {
  std::string path = (dir + "/trace.json").str();
  auto text = llvm::MemoryBuffer::getFile(path);
  if (!text)
    return llvm::createStringError("cannot read %s: %s", path.c_str(),
                                   text.getError().message().c_str());
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*text)->getBuffer());
  if (!json)
    return json.takeError();
  const llvm::json::Array *processes =
      json->getAsObject() ? json->getAsObject()->getArray("processes")
                          : nullptr;
  if (!processes || processes->empty())
    return llvm::createStringError("%s: expected a process", path.c_str());
  Recording result;
  if (const llvm::json::Object *cpu =
          json->getAsObject()->getObject("cpuInfo")) {
    result.cpu.vendor = cpu->getString("vendor").value_or("unknown").str();
    result.cpu.family = unsigned(cpu->getInteger("family").value_or(0));
    result.cpu.model = unsigned(cpu->getInteger("model").value_or(0));
    result.cpu.stepping = unsigned(cpu->getInteger("stepping").value_or(0));
  }
  if (const llvm::json::Object *time =
          json->getAsObject()->getObject("tscPerfZeroConversion")) {
    result.time.timeMult = uint32_t(time->getInteger("timeMult").value_or(1));
    result.time.timeShift = uint16_t(time->getInteger("timeShift").value_or(0));
    llvm::StringRef zero = time->getString("timeZero").value_or("0");
    if (!zero.consume_front("0x") ||
        zero.getAsInteger(16, result.time.timeZero))
      result.time.timeZero = 0;
  }
  // A recording whose code changed is one process per epoch for LLDB
  // (LldbView.h): a thread's later pieces name it (magicTraceTid), and a
  // piece carries the next one's PSB+ (magicTraceTail), dropped here.
  std::map<uint64_t, std::vector<uint8_t>> traces;
  for (const llvm::json::Value &process : *processes) {
    const llvm::json::Array *threads =
        process.getAsObject() ? process.getAsObject()->getArray("threads")
                              : nullptr;
    if (!threads || threads->empty())
      return llvm::createStringError("%s: a process has no threads",
                                     path.c_str());
    for (const llvm::json::Value &value : *threads) {
      const llvm::json::Object *thread = value.getAsObject();
      std::optional<int64_t> tid =
          thread ? thread->getInteger("tid") : std::nullopt;
      std::optional<llvm::StringRef> trace =
          thread ? thread->getString("iptTrace") : std::nullopt;
      if (!tid || !trace)
        return llvm::createStringError("%s: a thread without tid or iptTrace",
                                       path.c_str());
      if (std::optional<int64_t> owner = thread->getInteger("magicTraceTid"))
        tid = owner;
      std::string tracePath = (dir + "/" + *trace).str();
      auto bytes = llvm::MemoryBuffer::getFile(
          tracePath, /*IsText=*/false, /*RequiresNullTerminator=*/false);
      if (!bytes)
        return llvm::createStringError("cannot read %s: %s", tracePath.c_str(),
                                       bytes.getError().message().c_str());
      llvm::StringRef data = (*bytes)->getBuffer();
      data = data.drop_back(std::min<uint64_t>(
          thread->getInteger("magicTraceTail").value_or(0), data.size()));
      std::vector<uint8_t> &joined = traces[uint64_t(*tid)];
      joined.insert(joined.end(), data.begin(), data.end());
    }
  }
  // A version of code outside files that a thread first ran at a mark (a
  // PSB) replaced code there: the program made that memory executable again
  // before it (mprotect), and the kernel reported it with PERF_RECORD_MMAP2
  // (mm/mprotect.c, mprotect_fixup: perf_event_mmap). It is reported at the
  // mark's time less 1 ns, before the stretch that starts there.
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> rangeOfSeq;
  std::map<uint64_t, std::vector<std::pair<uint64_t, uint64_t>>> marksOf;
  std::string metaPath = (dir + "/magic-trace.json").str();
  if (auto metaText = llvm::MemoryBuffer::getFile(metaPath)) {
    llvm::Expected<llvm::json::Value> meta =
        llvm::json::parse((*metaText)->getBuffer());
    if (!meta)
      return meta.takeError();
    auto hex = [](const llvm::json::Object &object, llvm::StringRef key) {
      uint64_t value = 0;
      llvm::StringRef text = object.getString(key).value_or("");
      text.consume_front("0x");
      return text.getAsInteger(16, value) ? 0 : value;
    };
    const llvm::json::Object *root = meta->getAsObject();
    const llvm::json::Object *history =
        root ? root->getObject("codeHistory") : nullptr;
    if (const llvm::json::Array *changes =
            history ? history->getArray("changes") : nullptr)
      for (const llvm::json::Value &value : *changes)
        if (const llvm::json::Object *change = value.getAsObject();
            change && change->getString("kind") == "bytes")
          rangeOfSeq[uint64_t(change->getInteger("seq").value_or(0))] = {
              hex(*change, "address"), hex(*change, "size")};
    if (const llvm::json::Array *threads =
            root ? root->getArray("threads") : nullptr)
      for (const llvm::json::Value &value : *threads)
        if (const llvm::json::Object *thread = value.getAsObject())
          if (const llvm::json::Array *marks = thread->getArray("imageMarks"))
            for (const llvm::json::Value &mark : *marks)
              if (const llvm::json::Array *pair = mark.getAsArray();
                  pair && pair->size() == 2)
                marksOf[uint64_t(thread->getInteger("tid").value_or(0))]
                    .emplace_back(
                        uint64_t((*pair)[0].getAsInteger().value_or(0)),
                        uint64_t((*pair)[1].getAsInteger().value_or(0)));
  }
  for (auto &[tid, bytes] : traces) {
    RecordedThread recorded;
    recorded.tid = tid;
    recorded.stretches = magic_trace::testing::psbStretches(bytes);
    recorded.mapsBefore.resize(recorded.stretches.size());
    // The stretches' offsets: psbStretches cuts at each PSB.
    std::vector<uint64_t> starts;
    for (uint64_t at = 0, i = 0; i < recorded.stretches.size(); ++i) {
      auto found =
          std::search(bytes.begin() + at, bytes.end(),
                      std::begin(pt_bytes::kPsb), std::end(pt_bytes::kPsb));
      starts.push_back(found - bytes.begin());
      at = starts.back() + sizeof(pt_bytes::kPsb);
    }
    for (auto [offset, seq] : marksOf[tid]) {
      auto range = rangeOfSeq.find(seq);
      auto stretch = llvm::find(starts, offset);
      uint64_t tsc = pt_bytes::psbTsc(bytes.data(), bytes.size(), offset);
      if (range == rangeOfSeq.end() || stretch == starts.end() || !tsc)
        continue;
      uint64_t ns = result.time.tscToNs(tsc);
      recorded.mapsBefore[stretch - starts.begin()].push_back(
          {ns > 1 ? ns - 1 : 1, range->second.first, range->second.second});
    }
    result.threads.push_back(std::move(recorded));
  }
  llvm::sort(result.threads,
             [](const RecordedThread &a, const RecordedThread &b) {
               return a.tid < b.tid;
             });
  return result;
}

llvm::Expected<ReplayOptions> parseArgs(llvm::StringRef args) {
  ReplayOptions options;
  llvm::SmallVector<llvm::StringRef> parts;
  args.split(parts, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef part : parts) {
    auto [key, value] = part.split('=');
    if (key == "recording")
      options.recording = value.str();
    else if (key == "sys")
      options.sys = value.str();
    else if (key == "map")
      options.map = value.str();
    else if (key == "cpus") {
      if (value.getAsInteger(10, options.cpus) || !options.cpus)
        return llvm::createStringError("cpus=%s is not a count",
                                       value.str().c_str());
    } else if (key == "lose") {
      auto [thread, stretch] = value.split(':');
      size_t t, s;
      if (thread.getAsInteger(10, t) || stretch.getAsInteger(10, s))
        return llvm::createStringError("lose=%s is not THREAD:STRETCH",
                                       value.str().c_str());
      options.lose = {t, s};
    } else
      return llvm::createStringError(
          "unknown argument '%s' (recording=, sys=, cpus=, lose=, map=)",
          part.str().c_str());
  }
  if (options.recording.empty() || options.sys.empty())
    return llvm::createStringError("recording= and sys= are required");
  return options;
}

/// The threads of process `pid` now, in tid order.
std::vector<uint32_t> threadsOf(uint32_t pid) {
  std::vector<uint32_t> tids;
  std::error_code error;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  for (llvm::sys::fs::directory_iterator it(dir, error), end;
       it != end && !error; it.increment(error)) {
    uint32_t tid;
    if (!llvm::StringRef(llvm::sys::path::filename(it->path()))
             .getAsInteger(10, tid))
      tids.push_back(tid);
  }
  llvm::sort(tids);
  return tids;
}

/// The process thread `tid` belongs to (Tgid in /proc/TID/status).
uint32_t processOf(uint32_t tid) {
  auto status = llvm::MemoryBuffer::getFileAsStream(
      "/proc/" + std::to_string(tid) + "/status");
  if (status) {
    llvm::SmallVector<llvm::StringRef> lines;
    (*status)->getBuffer().split(lines, '\n');
    for (llvm::StringRef line : lines) {
      uint32_t pid;
      if (line.consume_front("Tgid:") && !line.trim().getAsInteger(10, pid))
        return pid;
    }
  }
  return tid;
}

class ReplayKernel final : public KernelInterface {
public:
  ReplayKernel(ReplayOptions options, Recording recorded)
      : options(std::move(options)), recording(std::move(recorded.threads)),
        fake(fakeOptions(this->options, recorded)) {}

  llvm::ErrorOr<int> perfEventOpen(const perf_event_attr &attr, int pid,
                                   int cpu) override {
    // The recorder opens one event per thread and CPU: the threads traced
    // at attach.
    if (pid > 0 && !attachThreads.count(uint32_t(pid))) {
      process = processOf(uint32_t(pid));
      fake.addThread(process, uint32_t(pid));
      attachThreads.insert(uint32_t(pid));
    }
    return fake.perfEventOpen(attr, pid, cpu);
  }
  llvm::ErrorOr<void *> mmap(int fd, size_t length, bool writable,
                             uint64_t offset) override {
    return fake.mmap(fd, length, writable, offset);
  }
  void munmap(void *address, size_t length) override {
    fake.munmap(address, length);
  }
  std::error_code ioctl(int fd, unsigned long request,
                        unsigned long argument) override {
    if (request == PERF_EVENT_IOC_DISABLE && !played) {
      played = true;
      play();
    }
    return fake.ioctl(fd, request, argument);
  }
  void close(int fd) override { fake.close(fd); }
  llvm::ErrorOr<unsigned> poll(llvm::MutableArrayRef<pollfd> fds,
                               int timeoutMs) override {
    return fake.poll(fds, timeoutMs);
  }
  std::string sysRoot() const override { return fake.sysRoot(); }
  std::string procRoot() const override { return fake.procRoot(); }
  uint64_t pageSize() const override { return fake.pageSize(); }
  std::vector<unsigned> onlineCpus() const override {
    return fake.onlineCpus();
  }
  std::optional<uint64_t> perfMlockKb() const override {
    return fake.perfMlockKb();
  }
  std::optional<uint64_t> memlockLimit() const override {
    return fake.memlockLimit();
  }
  bool lockLimitExempt() const override { return fake.lockLimitExempt(); }
  uint64_t readTsc() const override { return fake.readTsc(); }
  CpuIdentity cpu() const override { return fake.cpu(); }

private:
  /// The recorded machine: its CPU and its clock.
  static FakeKernel::Options fakeOptions(const ReplayOptions &options,
                                         const Recording &recorded) {
    FakeKernel::Options fake;
    fake.cpu = recorded.cpu;
    fake.timeZero = recorded.time.timeZero;
    fake.timeMult = recorded.time.timeMult;
    fake.timeShift = recorded.time.timeShift;
    fake.sysRoot = options.sys;
    fake.procRoot = "/proc";
    fake.cpus = options.cpus;
    return fake;
  }

  void fail(const llvm::Twine &message) {
    // An ioctl has no message to give: the test reads this line.
    llvm::errs() << "magic-trace replay kernel: " << message << "\n";
  }

  /// The hardware's part, all of it, before the first snapshot.
  void play() {
    std::vector<uint32_t> atAttach(attachThreads.begin(), attachThreads.end());
    std::vector<uint32_t> tids = atAttach;
    for (uint32_t tid : threadsOf(process))
      if (!attachThreads.count(tid))
        tids.push_back(tid);
    if (tids.size() != recording.size())
      return fail("the process has " + llvm::Twine(tids.size()) +
                  " threads, the recording " + llvm::Twine(recording.size()) +
                  ": it is not a recording of this program's run");
    if (atAttach.empty())
      return fail("no thread was traced at attach");
    for (size_t i = atAttach.size(); i < tids.size(); ++i)
      fake.clone(atAttach.front(), tids[i]);
    std::string map;
    llvm::raw_string_ostream mapOs(map);
    for (size_t i = 0; i < tids.size(); ++i)
      mapOs << recording[i].tid << " " << tids[i] << "\n";
    // Each thread runs its next stretch in turn, on the next CPU.
    std::vector<size_t> next(recording.size(), 0);
    unsigned cpu = 0;
    for (bool ran = true; ran;) {
      ran = false;
      for (size_t t = 0; t < recording.size(); ++t) {
        size_t s = next[t];
        if (s >= recording[t].stretches.size())
          continue;
        ++next[t];
        ran = true;
        llvm::ArrayRef<uint8_t> bytes = recording[t].stretches[s];
        uint64_t flags = 0;
        if (options.lose && options.lose->first == t &&
            options.lose->second == s) {
          // The hardware wrote the PSB+ and nothing after it.
          auto end = std::search(bytes.begin(), bytes.end(),
                                 std::begin(kPsbEnd), std::end(kPsbEnd));
          if (end != bytes.end())
            bytes = bytes.take_front(end - bytes.begin() + sizeof(kPsbEnd));
          flags = kAuxFlagTruncated;
          mapOs << "lost " << tids[t] << " " << s << "\n";
        }
        for (const ExecMap &map : recording[t].mapsBefore[s])
          fake.mapExecutable(tids[t], cpu, map.timeNs, map.address, map.size,
                             "//anon");
        fake.run(tids[t], cpu, bytes, flags);
        cpu = (cpu + 1) % options.cpus;
      }
    }
    if (options.lose && (options.lose->first >= recording.size() ||
                         options.lose->second >=
                             recording[options.lose->first].stretches.size()))
      fail("lose=" + llvm::Twine(options.lose->first) + ":" +
           llvm::Twine(options.lose->second) + " is not in the recording");
    if (options.map.empty())
      return;
    std::error_code error;
    llvm::raw_fd_ostream out(options.map, error);
    if (error)
      return fail("cannot write " + options.map + ": " + error.message());
    out << map;
  }

  ReplayOptions options;
  std::vector<RecordedThread> recording;
  FakeKernel fake;
  std::set<uint32_t> attachThreads;
  uint32_t process = 0;
  bool played = false;
};

} // namespace

/// The factory PerfSession.cpp's test hook looks up.
extern "C" __attribute__((visibility("default"))) KernelInterface *
magic_trace_test_kernel(const char *args, std::string *error) {
  llvm::Expected<ReplayOptions> options = parseArgs(args);
  if (!options) {
    *error = "replay kernel: " + llvm::toString(options.takeError());
    return nullptr;
  }
  llvm::Expected<Recording> recording = readRecording(options->recording);
  if (!recording) {
    *error = "replay kernel: " + llvm::toString(recording.takeError());
    return nullptr;
  }
  return new ReplayKernel(std::move(*options), std::move(*recording));
}
