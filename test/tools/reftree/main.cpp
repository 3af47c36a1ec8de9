//===- main.cpp - magic-trace-reftree: the model against ground truth -----===//
//
// Runs a program under the emulator (in-process), decodes and symbolizes its
// PT, builds the model, derives the reference call tree from the ground
// truth (RefTree.h, no decoder/symbolizer/model code), and compares them:
// tree equality on error-free threads, the fraction of matching frames with
// stitching on and off, and the anchored final stack against the stop.
//
//===----------------------------------------------------------------------===//

#include "RefCode.h"
#include "RefTree.h"

#include "magic_trace/Bundle.h"
#include "magic_trace/Decoder.h"
#include "magic_trace/ModelBuilder.h"
#include "magic_trace/PtraceStepper.h"
#include "magic_trace/Symbolizer.h"
#include "magic_trace/VirtualClock.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <optional>

using namespace llvm;
using namespace magic_trace;
using namespace magic_trace::reftree;

static cl::OptionCategory category("magic-trace-reftree options");
static cl::opt<std::string> startOption("start", cl::desc("Start tracing here"),
                                        cl::init("main"), cl::cat(category));
static cl::opt<std::string> stopOption("stop",
                                       cl::desc("Snapshot when a thread gets "
                                                "here (default stop_here)"),
                                       cl::init("stop_here"),
                                       cl::cat(category));
static cl::opt<uint64_t> maxInsns("max-insns",
                                  cl::desc("Stop after N instructions"),
                                  cl::init(2'000'000), cl::cat(category));
static cl::opt<uint64_t>
    overflowEvery("inject-overflow-every",
                  cl::desc("Inject an overflow every N instructions"),
                  cl::init(0), cl::cat(category));
static cl::opt<uint64_t> bufferSize(
    "buffer-size",
    cl::desc("PT ring buffer per thread (a power of two >= 4096); a small "
             "one wraps and keeps only the end of the execution"),
    cl::init(4 << 20), cl::cat(category));
static cl::opt<uint64_t> tolerance(
    "tolerance",
    cl::desc("Time tolerance in ns (default 320: one MTC period of the "
             "emulator's clock)"),
    cl::init(320), cl::cat(category));
static cl::opt<bool> check("check",
                           cl::desc("Exit 1 unless every error-free thread's "
                                    "tree equals the reference and the "
                                    "anchored stack equals the stop context"),
                           cl::cat(category));
static cl::opt<bool> dump("dump", cl::desc("Print both trees"),
                          cl::cat(category));
static cl::opt<bool> dumpItems("items", cl::desc("Print the decoded items"),
                               cl::cat(category));
static cl::opt<std::string> bundleOption(
    "bundle",
    cl::desc("Compare a saved bundle with the ground truth in its "
             "groundtruth/ directory (the LLDB plugin's 'save --format "
             "bundle' after 'attach --ground-truth') instead of running a "
             "program"),
    cl::value_desc("DIR"), cl::cat(category));
static cl::list<std::string> programArgs(cl::Positional, cl::ZeroOrMore,
                                         cl::desc("-- PROGRAM ARGS..."),
                                         cl::cat(category));

static int fail(const Twine &message) {
  WithColor::error(errs(), "magic-trace-reftree") << message << "\n";
  return 2;
}

static void printTree(StringRef title, const std::vector<TreeFrame> &tree) {
  outs() << title << "\n";
  for (const TreeFrame &frame : tree)
    outs() << std::string(2 * frame.depth + 2, ' ') << frame.name << " "
           << frame.begin << "-" << frame.end << "\n";
}

static std::string percent(size_t part, size_t whole) {
  return formatv("{0}/{1} ({2:F1}%)", part, whole,
                 whole ? 100.0 * double(part) / double(whole) : 100.0)
      .str();
}

/// Entry addresses of the last segment's open code frames, outermost first.
static std::vector<uint64_t> finalStack(const ThreadModel &model) {
  std::vector<uint64_t> keys;
  if (model.segments.empty())
    return keys;
  const Segment &segment = model.segments.back();
  for (const Frame &frame : segment.frames) {
    const FrameSite &site = model.sites[frame.site];
    if (frame.open &&
        (site.kind == FrameKind::Physical || site.kind == FrameKind::Unknown))
      keys.push_back(site.kind == FrameKind::Unknown ? 0 : site.address);
  }
  return keys;
}

/// The stop context as entry addresses from the symbol tables, outermost
/// first (a return address is looked up at the call before it).
static std::vector<uint64_t> stopStack(const ThreadStop &stop,
                                       const RefSymbols &symbols) {
  std::vector<uint64_t> keys;
  for (size_t i = stop.frames.size(); i-- > 0;) {
    if (i + 1 < stop.frames.size() && stop.frames[i] == stop.frames[i + 1])
      continue;
    RefFunction function =
        symbols.lookup(i == 0 ? stop.frames[i] : stop.frames[i] - 1);
    keys.push_back(function.unknown ? 0 : function.begin);
  }
  return keys;
}

/// Frames from the root to the deepest leaf (a root has depth 0).
static unsigned maxDepth(const std::vector<TreeFrame> &tree) {
  unsigned depth = 0;
  for (const TreeFrame &frame : tree)
    depth = std::max(depth, frame.depth + 1);
  return depth;
}

static Expected<EmulateResult> runProgram() {
  if (programArgs.empty())
    return createStringError("no program to run (give -- PROGRAM ARGS..., or "
                             "--bundle DIR)");
  EmulateOptions emulate;
  emulate.argv.assign(programArgs.begin(), programArgs.end());
  emulate.start = startOption;
  emulate.stop = stopOption;
  emulate.maxInsns = maxInsns;
  emulate.writer.overflowEvery = overflowEvery;
  emulate.writer.bufferSize = bufferSize;
  return emulateProgram(emulate);
}

/// A bundle and the ground truth of the recorder that wrote it, as if the
/// emulator had just run.
static Expected<EmulateResult> readBundle(StringRef dir) {
  EmulateResult result;
  Expected<Snapshot> snapshot = loadBundle(dir);
  if (!snapshot)
    return snapshot.takeError();
  result.snapshot = std::move(*snapshot);
  for (const ThreadTrace &thread : result.snapshot.threads) {
    Expected<ThreadTruth> truth = readGroundTruth(dir, thread.tid);
    if (!truth)
      return truth.takeError();
    result.truth.push_back(std::move(*truth));
  }
  return result;
}

/// Where a wrapped ring's decode starts in the ground truth: the index of
/// its first decoded instruction (the decode runs to the stop, as the truth
/// does). None unless the first decoded blocks (up to 1000) begin at the
/// truth's instructions their counts place them at.
static std::optional<uint64_t> wrappedStart(const ThreadTruth &truth,
                                            const ThreadDecode &decode) {
  if (decode.instructions > truth.insns.size())
    return std::nullopt;
  uint64_t first = truth.insns.size() - decode.instructions;
  uint64_t at = first;
  unsigned checked = 0;
  for (const TraceItem &item : decode.items) {
    if (item.kind != ItemKind::Block || !item.detail)
      continue;
    if (at >= truth.insns.size() || item.ip != truth.insns[at])
      return std::nullopt;
    at += item.detail;
    if (++checked == 1000)
      break;
  }
  return checked ? std::optional<uint64_t>(first) : std::nullopt;
}

/// `truth` from instruction `first` on: what a ring that starts there
/// holds, for a reference built by the same rules from that instruction
/// (callers it never saw called are inferred from returns and landing
/// pads, as in a trace that starts mid-program).
static ThreadTruth truthFrom(const ThreadTruth &truth, uint64_t first) {
  ThreadTruth suffix;
  suffix.tid = truth.tid;
  suffix.insns.assign(truth.insns.begin() + first, truth.insns.end());
  for (TruthEvent event : truth.events) {
    if (event.index < first)
      continue;
    event.index -= first;
    suffix.events.push_back(event);
  }
  for (auto [begin, count] : truth.lost) {
    uint64_t end = begin + count;
    if (end <= first)
      continue;
    begin = std::max(begin, first);
    suffix.lost.push_back({begin - first, end - begin});
  }
  return suffix;
}

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "magic-trace-reftree: compare the model with the emulator's ground "
      "truth\n\n  magic-trace-reftree [options] -- PROGRAM ARGS...\n"
      "  magic-trace-reftree [options] --bundle DIR\n");

  Expected<EmulateResult> run =
      bundleOption.empty() ? runProgram() : readBundle(bundleOption);
  if (!run)
    return fail(toString(run.takeError()));
  const Snapshot &snapshot = run->snapshot;

  DecodeOptions decodeOptions;
  decodeOptions.threads = 1;
  Expected<DecodeResult> decoded = decodeSnapshot(snapshot, decodeOptions);
  if (!decoded)
    return fail(toString(decoded.takeError()));

  TraceModel trace; ///< Owns the strings; validateModel checks the ids.
  StringTable &strings = trace.strings;
  Symbolizer symbolizer(snapshot.modules, snapshot.code, strings);
  auto lookup = [&](uint64_t address) -> const SymbolRange & {
    return symbolizer.lookup(address);
  };
  RefSymbols symbols(snapshot.modules);
  RefCode code(snapshot.modules);

  bool ok = true;
  // The summary line: threads compared, with decode errors (their trees are
  // not compared), whose tree (plain or anchored) differs from the
  // reference, and whose final stack differs from the stop context.
  size_t withErrors = 0, differing = 0, unanchored = 0;
  for (const ThreadTruth &truth : run->truth) {
    bool wasOk = ok;
    ok = true;
    bool treesOk = true;
    const ThreadDecode *decode = nullptr;
    for (const ThreadDecode &candidate : decoded->threads)
      if (candidate.tid == truth.tid)
        decode = &candidate;
    const ThreadStop *stop = nullptr;
    for (const ThreadStop &candidate : snapshot.stop)
      if (candidate.tid == truth.tid)
        stop = &candidate;
    if (!decode) {
      outs() << "thread " << truth.tid << ": not decoded\n";
      ok = false;
      ++differing;
      continue;
    }
    bool wrapped = false;
    for (const ThreadTrace &trace : snapshot.threads)
      wrapped = wrapped || (trace.tid == truth.tid && trace.wrapped);
    // A wrapped ring holds the end of the execution: the reference is built
    // from the instruction its decode starts at.
    std::optional<uint64_t> firstIndex;
    if (wrapped)
      firstIndex = wrappedStart(truth, *decode);
    ThreadTruth suffix;
    if (firstIndex)
      suffix = truthFrom(truth, *firstIndex);
    // The full reference ends with the function the thread stopped at the
    // entry of (atStop), which only anchoring to the stop context can know:
    // the models built without the stop are compared with the rest.
    std::vector<TreeFrame> full =
        referenceTree(firstIndex ? suffix : truth, symbols, snapshot.time,
                      VirtualClock::startTsc + firstIndex.value_or(0), &code);
    std::vector<TreeFrame> reference;
    for (const TreeFrame &frame : full)
      if (!frame.atStop)
        reference.push_back(frame);
    ModelStats stats, anchorStats;
    ThreadModel stitched = buildThreadModel(*decode, lookup, nullptr, strings,
                                            {true, false}, &stats);
    ThreadModel apart =
        buildThreadModel(*decode, lookup, nullptr, strings, {false, false});
    ThreadModel anchored = buildThreadModel(*decode, lookup, stop, strings,
                                            {true, true}, &anchorStats);
    // The invariants every writer relies on (TraceModel.h).
    for (const ThreadModel *built : {&stitched, &apart, &anchored}) {
      trace.threads.assign(1, *built);
      if (Error err = validateModel(trace)) {
        outs() << "  invalid model: " << toString(std::move(err)) << "\n";
        ok = false;
      }
    }
    std::vector<TreeFrame> model = modelTree(stitched, strings, true);
    std::vector<TreeFrame> unstitched = modelTree(apart, strings, false);

    outs() << "thread " << truth.tid << ": " << truth.insns.size()
           << " instructions, " << decode->instructions << " decoded"
           << (wrapped ? " (ring wrapped), " : ", ") << stitched.errors
           << " errors/overflows, " << stitched.segments.size() << " segments ("
           << stats.stitchedJoins << " stitched); reference "
           << reference.size() << " frames, model " << model.size() << "; "
           << formatv("{0:F2}",
                      double(stats.modelBytes) /
                          double(std::max<uint64_t>(decode->instructions, 1)))
           << " model bytes/instruction\n";
    if (dumpItems)
      for (const TraceItem &item : decode->items)
        outs() << "  item " << unsigned(item.kind) << " 0x"
               << utohexstr(item.ip) << "..0x" << utohexstr(item.lastIp)
               << " t=" << item.timeNs << " n=" << item.detail << " class "
               << unsigned(item.lastClass) << "\n";
    if (wrapped) {
      if (firstIndex)
        outs() << "  ring wrapped: the reference is built from the truth's "
                  "instruction "
               << *firstIndex << " on, where the decode starts\n";
      else
        outs() << "  ring wrapped: its first decoded blocks are not at the "
                  "truth's instructions from the "
               << truth.insns.size() - std::min<uint64_t>(decode->instructions,
                                                          truth.insns.size())
               << "th on: nothing to compare\n";
      ok = ok && firstIndex.has_value();
    }
    if (dump) {
      printTree("  reference:", reference);
      printTree("  model:", model);
    }
    bool errorFree = stitched.errors == 0;
    withErrors += !errorFree;
    if (errorFree) {
      std::string difference = firstDifference(reference, model, tolerance);
      outs() << "  tree: "
             << (difference.empty() ? "equal to the reference (times within " +
                                          std::to_string(tolerance) + " ns)"
                                    : "differs: " + difference)
             << "\n";
      ok = ok && difference.empty();
      treesOk = treesOk && difference.empty();
    }
    size_t withStitching = matchingFrames(reference, model, tolerance);
    size_t without = matchingFrames(reference, unstitched, tolerance);
    outs() << "  frames matching (function, begin and end within " << tolerance
           << " ns): stitching on " << percent(withStitching, reference.size())
           << ", off " << percent(without, reference.size()) << "\n";
    std::vector<TreeFrame> visible;
    for (const TreeFrame &frame : reference)
      if (!frame.lost)
        visible.push_back(frame);
    if (visible.size() < reference.size())
      outs() << "  frames with an instruction outside the injected losses: "
             << visible.size() << " (" << reference.size() - visible.size()
             << " ran entirely inside one); matching: stitching on "
             << percent(matchingFrames(visible, model, tolerance),
                        visible.size())
             << ", off "
             << percent(matchingFrames(visible, unstitched, tolerance),
                        visible.size())
             << "\n";
    if (!errorFree)
      outs() << "  stitching gain: " << (withStitching >= without ? "+" : "-")
             << (withStitching >= without ? withStitching - without
                                          : without - withStitching)
             << " frames\n";
    if (stop && !stop->frames.empty()) {
      std::vector<uint64_t> expected = stopStack(*stop, symbols);
      std::vector<uint64_t> actual = finalStack(anchored);
      // Innermost included: when the stop is at the entry of a function
      // the last instruction called, anchoring opens that function too;
      // when the last instruction returned, it takes the returning frame
      // off (docs/model.md, "Anchoring").
      bool equal = actual == expected;
      outs() << "  anchoring: the final stack (" << actual.size() << " frames) "
             << (equal ? "equals" : "differs from") << " the stop context ("
             << expected.size() << " frames)\n";
      if (!equal || dump) {
        outs() << "    stop context:";
        for (uint64_t key : expected)
          outs() << " " << symbols.lookup(key).name << "@" << utohexstr(key);
        outs() << "\n    final stack: ";
        for (uint64_t key : actual)
          outs() << " " << symbols.lookup(key).name << "@" << utohexstr(key);
        outs() << "\n";
      }
      ok = ok && (equal || !errorFree);
      unanchored += !equal && errorFree;
    }
    if (errorFree && stop && !stop->frames.empty()) {
      // The anchored model without the outer frames anchoring added (the
      // callers above the trace's start, which the reference cannot know)
      // has the full reference tree, the frames opened at the stop too.
      std::vector<TreeFrame> tree = modelTree(anchored, strings, true);
      size_t added = std::min<size_t>(anchorStats.anchorAdded, tree.size());
      tree.erase(tree.begin(), tree.begin() + added);
      for (TreeFrame &frame : tree)
        frame.depth = frame.depth >= added ? frame.depth - added : 0;
      size_t atStop = full.size() - reference.size();
      std::string difference = firstDifference(full, tree, tolerance);
      outs() << "  anchored tree: "
             << (difference.empty()
                     ? "equal to the reference (" + std::to_string(atStop) +
                           " frame" + (atStop == 1 ? "" : "s") +
                           " opened at the stop)"
                     : "differs: " + difference)
             << "\n";
      // The corpus table (docs/model.md): frames and depth with the stop
      // context, against the full reference.
      outs() << "  anchored frames matching: "
             << percent(matchingFrames(full, tree, tolerance), full.size())
             << "; max depth reference " << maxDepth(full) << ", model "
             << maxDepth(model) << ", anchored " << maxDepth(tree) << "\n";
      if (dump)
        printTree("  anchored model:", tree);
      ok = ok && difference.empty();
      treesOk = treesOk && difference.empty();
    }
    differing += !treesOk;
    ok = ok && wasOk;
  }
  outs() << "summary: " << run->truth.size() << " threads, " << withErrors
         << " with decode errors, " << differing
         << " with a tree unlike the reference, " << unanchored
         << " with a final stack unlike the stop context\n";
  return check && !ok ? 1 : 0;
}
