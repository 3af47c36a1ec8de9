//===- Decoder.h - Intel PT -> per-thread control flow ----------*- C++ -*-===//
//
// Decodes every thread of a Snapshot with libipt's block decoder into the
// compact TraceItems stream. The module list (and, over time, the code
// history's files) becomes libipt images through a shared image section
// cache; code outside files is read from the code history, else through a
// caller-provided callback. Buffers are split at PSB packets and the pieces
// decoded on a thread pool; the stitched result is identical to a serial
// decode (docs/decoder.md explains why). Decode errors never fail the call:
// they become Error items and decoding resyncs at the next PSB.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_DECODER_H
#define MAGIC_TRACE_DECODER_H

#include "magic_trace/Snapshot.h"
#include "magic_trace/TraceItems.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace magic_trace {

/// Reads up to `size` bytes of process memory at `address` into `buffer`;
/// returns the number of bytes read (0 when unreadable). It may be called
/// from several decode threads at once, so it must be thread-safe.
using ReadMemoryFn =
    std::function<size_t(uint64_t address, uint8_t *buffer, size_t size)>;

struct DecodeOptions {
  /// Decode threads; 0 = the cores available, 1 = serial.
  unsigned threads = 0;
  /// Memory not backed by a module file (JIT, vdso); may be empty.
  ReadMemoryFn readMemory;
  /// Only this thread (0 = all).
  uint64_t onlyTid = 0;
  /// Smallest piece of a buffer handed to one decode task, in bytes. Pieces
  /// always start at a PSB; smaller pieces mean more parallelism and more
  /// (cheap) resyncs. Tests set it low to exercise every boundary.
  uint64_t minChunkBytes = 64 * 1024;
  /// Items per batch handed to an ItemSink (SnapshotDecoder::decodeThread).
  /// Tests set it low to exercise every batch boundary.
  size_t batchItems = 64 * 1024;
  /// When set and true, decoding stops at the next PSB or within a few
  /// thousand blocks (a user interrupted a long decode).
  const std::atomic<bool> *cancel = nullptr;
};

/// What became of one module when building the image.
struct ModuleImageStatus {
  std::string path;
  unsigned sections = 0; ///< Executable sections added to the image.
  std::string problem;   ///< Empty when the module is usable.
};

struct DecodeStats {
  uint64_t psbs = 0;     ///< PSB packets found, over all threads.
  uint64_t chunks = 0;   ///< Pieces decoded (by the pool or serially).
  uint64_t handoffs = 0; ///< Pieces whose decode was used up to a PSB.
};

/// Where and when one thread's trace can be entered: each PSB's byte offset
/// and, when its PSB+ holds a TSC, its time. The window planner (Pipeline.h)
/// picks the PSB to decode from with it.
struct PsbTimes {
  std::vector<uint64_t> offsets; ///< Byte offsets into the buffer, ascending.
  /// Per PSB: nanoseconds on the snapshot's clock, 0 when its PSB+ holds no
  /// TSC packet.
  std::vector<uint64_t> ns;
  uint64_t bytes = 0; ///< The thread's buffer size.
};

struct DecodeResult {
  std::vector<ThreadDecode> threads;
  std::vector<ModuleImageStatus> modules;
  DecodeStats stats;
};

/// The vendor of a CpuIdentity that asks for no errata at all (`--cpu none`).
constexpr const char *kNoErrataVendor = "none";

/// Succeeds when libipt can be set up for `cpu`: an Intel CPU with a family
/// and model, or kNoErrataVendor. Otherwise "unknown cpu: ..." saying how to
/// name one (LLDB's decoder refuses such a trace too).
llvm::Error checkCpu(const CpuIdentity &cpu);

/// libipt's errata workarounds for `cpu`, by libipt's names ("bdm70", ...).
std::vector<std::string> cpuErrata(const CpuIdentity &cpu);

/// Parses a --cpu value: "none", or VENDOR/FAMILY/MODEL/STEPPING with vendor
/// "intel" or "GenuineIntel" ("intel/6/158/9").
llvm::Expected<CpuIdentity> parseCpu(llvm::StringRef text);

namespace decode_detail {
class ImageTimeline;
struct PsbTable;
} // namespace decode_detail

/// One snapshot's decoder: the CPU checked and the image built once, then
/// each thread decoded into an ItemSink as it goes (decodeSnapshot collects
/// the items instead). decodeThread may run on several threads at once, for
/// different sinks.
class SnapshotDecoder {
public:
  /// Fails as decodeSnapshot does (checkCpu, libipt, onlyTid).
  static llvm::Expected<std::unique_ptr<SnapshotDecoder>>
  create(const Snapshot &snapshot, const DecodeOptions &options);
  ~SnapshotDecoder();

  const std::vector<ModuleImageStatus> &modules() const { return moduleStatus; }
  /// Indices into snapshot.threads of the threads to decode (options.onlyTid).
  const std::vector<size_t> &selected() const { return selectedThreads; }

  /// The PSBs of snapshot.threads[index] (a selected thread) and their
  /// times, found once when the decoder was made.
  const PsbTimes &psbTimes(size_t index) const { return times[index]; }
  /// The code history's seq in force at PSB `psb` of snapshot.threads[index]
  /// (a selected thread): what an InstructionWalker follows before the
  /// items of a decode from that PSB, which begin with an Image item only
  /// where the seq changed (0 without a history).
  uint64_t seqAtPsb(size_t index, size_t psb) const;

  /// Decodes snapshot.threads[index] into `sink`, in batches, from its PSB
  /// `fromPsb` (an index into psbTimes(index); 0: the whole buffer) to the
  /// end; returns its instructions. Every PSB segment is decoded from its
  /// own PSB+, so the items from PSB k on are those a decode of the whole
  /// buffer gives from there (but for the join of a block that runs across
  /// PSB k, and the instruction clock's rate where the trace has no
  /// timing). With options.threads == 1 (or one PSB piece) the items
  /// stream through a bounded buffer; PSB-parallel pieces are held until
  /// they are joined. Fails only when libipt cannot allocate a decoder.
  llvm::Expected<uint64_t> decodeThread(size_t index, ItemSink &sink,
                                        DecodeStats &stats,
                                        size_t fromPsb = 0) const;

  /// decodeThread with libipt's block decoder on a thread of its own: the
  /// buffer is decoded in one run there, while the caller's thread joins
  /// the blocks, converts their times and feeds `sink`, so the sink's work
  /// overlaps the decode. The batches move between the threads without a
  /// copy, and at most four wait. The items and the order of the sink's
  /// calls are decodeThread's with options.threads == 1.
  llvm::Expected<uint64_t> decodeThreadOverlapped(size_t index, ItemSink &sink,
                                                  DecodeStats &stats,
                                                  size_t fromPsb = 0) const;

private:
  SnapshotDecoder(const Snapshot &snapshot, const DecodeOptions &options);
  llvm::Expected<uint64_t> decode(size_t index, ItemSink &sink,
                                  DecodeStats &stats, bool overlap,
                                  size_t fromPsb) const;
  /// Fills tables[index] and times[index].
  void findPsbTimes(size_t index);

  const Snapshot &snapshot;
  DecodeOptions options;
  /// The code of each moment of the trace (its modules and code history).
  std::unique_ptr<decode_detail::ImageTimeline> timeline;
  std::vector<ModuleImageStatus> moduleStatus;
  std::vector<size_t> selectedThreads;
  /// Per thread (selected ones only): its PSB table and their times.
  std::vector<decode_detail::PsbTable> tables;
  std::vector<PsbTimes> times;
};

/// Decodes every thread of `snapshot` (or only options.onlyTid). Fails when
/// nothing can be decoded at all (checkCpu rejects the CPU, libipt cannot
/// allocate, or onlyTid names no thread); bad trace bytes and missing
/// modules are data in the result.
llvm::Expected<DecodeResult> decodeSnapshot(const Snapshot &snapshot,
                                            const DecodeOptions &options);

/// The code a trace ran, instruction by instruction: the length and bytes
/// of each instruction of a Block item, read through the snapshot's images
/// with the code of the item's moment (the seq of the last Image item
/// followed). expandInstructions and the views (report --annotate) walk
/// blocks with it. Not thread-safe: one per thread of work.
class InstructionWalker {
public:
  /// Builds the snapshot's images (as SnapshotDecoder::create does).
  /// Errors: libipt cannot allocate an image.
  static llvm::Expected<std::unique_ptr<InstructionWalker>>
  create(const Snapshot &snapshot, const DecodeOptions &options);
  ~InstructionWalker();

  /// Follows `item` in its thread's stream: an Image item switches the
  /// code read from then on; other items change nothing. Errors: libipt
  /// cannot make the image of that moment.
  llvm::Error follow(const TraceItem &item);
  /// The length of the instruction at `ip`, code of `mode` (cached per
  /// moment). Errors: no code is known at `ip`, or it is not a valid
  /// instruction (InsnClassifier's).
  llvm::Expected<uint8_t> sizeAt(uint64_t ip, ExecMode mode);
  /// Up to `size` bytes of code at `ip` at the current moment; returns how
  /// many were read (0: no code known there).
  size_t read(uint64_t ip, uint8_t *buffer, size_t size);

private:
  struct Impl;
  explicit InstructionWalker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

/// Addresses of every instruction of `decode`'s blocks, in execution order,
/// read through the same images (the code of each Image item's seq). Blocks
/// are runs of sequential instructions, so this walks each one by
/// instruction length. For comparing with ground truth; slow compared to
/// decoding.
llvm::Expected<std::vector<uint64_t>>
expandInstructions(const Snapshot &snapshot, const ThreadDecode &decode,
                   const DecodeOptions &options);

/// Benchmark baseline: the decoder's own libipt loop (sync at each PSB,
/// drain events, next block, resync on error) over one thread's bytes with
/// the same image, but with no output: no items, no classification, no
/// time. Returns the instructions it saw.
llvm::Expected<uint64_t> rawBlockDecodeLoop(const Snapshot &snapshot,
                                            size_t threadIndex,
                                            const DecodeOptions &options);

} // namespace magic_trace

#endif
