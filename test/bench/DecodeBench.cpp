//===- DecodeBench.cpp - Decoder throughput against raw libipt ------------===//
//
// magic-trace-decode-bench BUNDLE [--repeat N] [--threads T]
//
// Builds a large trace from an emulator bundle by repeating the biggest
// thread's PT stream N times (a bundle whose ring did not wrap starts with
// PSB+ and ends with TIP.PGD, so copies join into a valid stream: genuine PT
// of real code), then times, on the same bytes and image:
//   raw       the bare libipt block-decoder loop (baseline)
//   decode    decodeSnapshot, serial
//   decode+sym  serial decode, then one symbolizer lookup per Block
//   parallel  decodeSnapshot with T threads (default 2)
// and prints each as instructions/s and as a ratio to the baseline.
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

using namespace llvm;
using namespace magic_trace;

static cl::opt<std::string> input(cl::Positional, cl::Required,
                                  cl::desc("BUNDLE_DIR_OR_JSON"));
static cl::opt<unsigned> repeat("repeat", cl::desc("Copies of the stream"),
                                cl::init(20));
static cl::opt<unsigned>
    threads("threads", cl::desc("Threads of the parallel run"), cl::init(2));

static int fail(const Twine &message) {
  WithColor::error(errs(), "magic-trace-decode-bench") << message << "\n";
  return 1;
}

template <class F> static double seconds(F &&run) {
  auto start = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
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
  ThreadTrace big = *biggest;
  big.bytes.clear();
  for (unsigned i = 0; i < repeat; ++i)
    big.bytes.insert(big.bytes.end(), biggest->bytes.begin(),
                     biggest->bytes.end());
  snapshot.threads = {big};

  DecodeOptions options;

  uint64_t rawInsns = 0;
  double raw = seconds([&] {
    auto counted = rawBlockDecodeLoop(snapshot, 0, options);
    if (counted)
      rawInsns = *counted;
    else
      consumeError(counted.takeError());
  });

  options.threads = 1;
  Expected<DecodeResult> serial = createStringError("not run");
  double decode = seconds([&] { serial = decodeSnapshot(snapshot, options); });
  if (!serial)
    return fail(toString(serial.takeError()));

  StringTable strings;
  Symbolizer symbolizer(snapshot.modules, strings);
  double symbolize = seconds([&] {
    for (const TraceItem &item : serial->threads[0].items)
      if (item.kind == ItemKind::Block)
        symbolizer.lookup(item.ip);
  });

  options.threads = threads;
  Expected<DecodeResult> parallel = createStringError("not run");
  double par = seconds([&] { parallel = decodeSnapshot(snapshot, options); });
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
      << biggest->bytes.size() << "), " << s.instructions << " instructions, "
      << s.items.size() << " items, " << s.errors.size()
      << " errors; raw loop saw " << rawInsns << " instructions\n";
  auto row = [&](StringRef name, double time) {
    out << format("%-22s %8.3f s %8.1f M insn/s %6.2fx of raw\n",
                  name.str().c_str(), time, s.instructions / time / 1e6,
                  raw / time);
  };
  row("raw libipt loop", raw);
  row("decode (serial)", decode);
  row("decode + symbolize", decode + symbolize);
  row(("parallel (" + Twine(threads) + " threads)").str(), par);
  out << "symbolizer: " << symbolizer.stats().lookups << " lookups, "
      << symbolizer.stats().hits << " hits, "
      << symbolizer.stats().distinctRanges << " ranges\n";
  out << "parallel == serial: " << (same ? "yes" : "NO") << "\n";
  return same ? 0 : 1;
}
