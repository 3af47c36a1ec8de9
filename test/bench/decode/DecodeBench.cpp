//===- DecodeBench.cpp - Decoder throughput against raw libipt ------------===//
//
// magic-trace-decode-bench BUNDLE [--repeat N] [--jobs T]
//                          [--save DIR [--wrap-bytes B] [--thread-copies K]]
//
// Builds a large trace from an emulator bundle by repeating the biggest
// thread's PT stream N times (a bundle whose ring did not wrap starts with
// PSB+ and ends with TIP.PGD, so copies join into a valid stream: genuine PT
// of real code), then times, on the same bytes and image:
//   raw       the bare libipt block-decoder loop (baseline)
//   decode    decodeSnapshot, serial
//   decode+sym  serial decode, then one symbolizer lookup per Block
//   parallel  decodeSnapshot with T threads (--jobs, default 2; libLLVM
//             owns a global "threads" option)
// and prints each as instructions/s and as a ratio to the baseline.
// --save DIR writes the repeated trace as a bundle instead (for timing whole
// processes on it, scripts/bench.sh); with --wrap-bytes B it keeps only the
// last B bytes, marked wrapped: what a ring of B bytes holds after it
// wrapped, starting mid-packet; with --thread-copies K the bundle holds K
// threads (tids tid, tid+1, ...), each with that trace: a multi-threaded
// trace of real code, for the pipeline's parallel thread models.
// docs/decoder.md has the numbers measured on the team's machine.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/Bundle.h"
#include "magic_trace/Decoder.h"
#include "magic_trace/Symbolizer.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

#include <sys/resource.h>

using namespace llvm;
using namespace magic_trace;

static cl::opt<std::string> input(cl::Positional, cl::Required,
                                  cl::desc("BUNDLE_DIR_OR_JSON"));
static cl::opt<unsigned> threadCopies(
    "thread-copies",
    cl::desc("With --save: threads in the bundle, each with the trace"),
    cl::init(1));
static cl::opt<unsigned> repeat("repeat", cl::desc("Copies of the stream"),
                                cl::init(20));
static cl::opt<unsigned>
    threads("jobs", cl::desc("Threads of the parallel run"), cl::init(2));
static cl::opt<std::string>
    saveDir("save",
            cl::desc("Write the repeated trace as a bundle to DIR "
                     "and exit (no timing)"),
            cl::value_desc("DIR"));
static cl::opt<uint64_t>
    wrapBytes("wrap-bytes",
              cl::desc("With --save: keep only the last B bytes, marked as "
                       "a wrapped ring (0: keep all)"),
              cl::value_desc("B"), cl::init(0));

static int fail(const Twine &message) {
  WithColor::error(errs(), "magic-trace-decode-bench") << message << "\n";
  return 1;
}

/// Wall and CPU (all threads of the process) seconds of one run. The
/// machine may be shared: CPU time is the cost, wall time shows the
/// parallel speed-up when cores are free.
struct Timing {
  double wall = 0;
  double cpu = 0;
};

static double cpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

template <class F> static Timing measure(F &&run) {
  double cpuStart = cpuSeconds();
  auto start = std::chrono::steady_clock::now();
  run();
  Timing timing;
  timing.wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  timing.cpu = cpuSeconds() - cpuStart;
  return timing;
}

int main(int argc, char **argv) {
  cl::ParseCommandLineOptions(argc, argv, "decoder benchmark\n");
  Expected<Snapshot> loaded = loadBundle(input);
  if (!loaded)
    return fail(toString(loaded.takeError()));
  Snapshot snapshot = std::move(*loaded);
  if (snapshot.threads.empty())
    return fail("the bundle has no thread");
  auto biggest =
      std::max_element(snapshot.threads.begin(), snapshot.threads.end(),
                       [](const ThreadTrace &a, const ThreadTrace &b) {
                         return a.bytes.size() < b.bytes.size();
                       });
  if (biggest->wrapped)
    return fail("the biggest thread's ring wrapped (record a bundle whose "
                "buffer holds the whole run)");
  size_t originalBytes = biggest->bytes.size();
  ThreadTrace big = *biggest;
  big.bytes.clear();
  for (unsigned i = 0; i < repeat; ++i)
    big.bytes.insert(big.bytes.end(), biggest->bytes.begin(),
                     biggest->bytes.end());
  snapshot.threads = {big};

  if (!saveDir.empty()) {
    ThreadTrace &saved = snapshot.threads.front();
    if (wrapBytes) {
      if (wrapBytes >= saved.bytes.size())
        return fail("--wrap-bytes " + Twine(wrapBytes) + " is not below the " +
                    Twine(saved.bytes.size()) +
                    " bytes of the repeated trace (raise --repeat)");
      saved.bytes.erase(saved.bytes.begin(),
                        saved.bytes.end() - static_cast<ptrdiff_t>(wrapBytes));
      saved.wrapped = true;
    }
    if (threadCopies == 0)
      return fail("--thread-copies must be at least 1");
    size_t savedBytes = saved.bytes.size();
    bool savedWrapped = saved.wrapped;
    for (unsigned i = 1; i < threadCopies; ++i) {
      ThreadTrace copy = snapshot.threads.front();
      copy.tid += i;
      snapshot.threads.push_back(std::move(copy));
    }
    // Only the last copy's stop context is true; the last bytes end there.
    // The other threads have none (as threads the debugger did not stop).
    if (Error error = writeBundle(snapshot, saveDir))
      return fail(toString(std::move(error)));
    outs() << "saved " << savedBytes << " bytes of PT (" << repeat << " x "
           << originalBytes << (savedWrapped ? ", wrapped" : "") << ")";
    if (threadCopies > 1)
      outs() << " in each of " << threadCopies << " threads";
    outs() << " -> " << saveDir << "\n";
    return 0;
  }

  DecodeOptions options;

  uint64_t rawInsns = 0;
  Timing raw = measure([&] {
    auto counted = rawBlockDecodeLoop(snapshot, 0, options);
    if (counted)
      rawInsns = *counted;
    else
      consumeError(counted.takeError());
  });

  options.threads = 1;
  Expected<DecodeResult> serial = createStringError("not run");
  Timing decode = measure([&] { serial = decodeSnapshot(snapshot, options); });
  if (!serial)
    return fail(toString(serial.takeError()));

  StringTable strings;
  Symbolizer symbolizer(snapshot.modules, strings);
  Timing symbolize = measure([&] {
    for (const TraceItem &item : serial->threads[0].items)
      if (item.kind == ItemKind::Block)
        symbolizer.lookup(item.ip);
  });

  options.threads = threads;
  Expected<DecodeResult> parallel = createStringError("not run");
  Timing par = measure([&] { parallel = decodeSnapshot(snapshot, options); });
  if (!parallel)
    return fail(toString(parallel.takeError()));

  const ThreadDecode &s = serial->threads[0];
  const ThreadDecode &p = parallel->threads[0];
  bool same = s.items.size() == p.items.size() &&
              std::equal(s.items.begin(), s.items.end(), p.items.begin(),
                         [](const TraceItem &a, const TraceItem &b) {
                           return a.ip == b.ip && a.lastIp == b.lastIp &&
                                  a.detail == b.detail && a.kind == b.kind &&
                                  a.timeNs == b.timeNs &&
                                  a.lastClass == b.lastClass;
                         });

  raw_ostream &out = outs();
  out << "trace: " << big.bytes.size() << " bytes of PT (" << repeat << " x "
      << originalBytes << "), " << s.instructions << " instructions, "
      << s.items.size() << " items, " << s.errors.size()
      << " errors; raw loop saw " << rawInsns << " instructions\n";
  out << format("%-22s %9s %9s %12s %10s\n", "", "wall s", "cpu s",
                "M insn/cpu-s", "cpu vs raw");
  auto row = [&](StringRef name, Timing time) {
    out << format("%-22s %9.3f %9.3f %12.1f %9.2fx\n", name.str().c_str(),
                  time.wall, time.cpu, s.instructions / time.cpu / 1e6,
                  time.cpu / raw.cpu);
  };
  row("raw libipt loop", raw);
  row("decode (serial)", decode);
  row("decode + symbolize",
      {decode.wall + symbolize.wall, decode.cpu + symbolize.cpu});
  row(("parallel (" + Twine(threads) + " threads)").str(), par);
  out << "parallel wall speed-up over serial: "
      << format("%.2fx", decode.wall / par.wall) << "\n";
  out << "symbolizer: " << symbolizer.stats().lookups << " lookups, "
      << symbolizer.stats().hits << " hits, "
      << symbolizer.stats().distinctRanges << " ranges\n";
  out << "parallel == serial: " << (same ? "yes" : "NO") << "\n";
  return same ? 0 : 1;
}
