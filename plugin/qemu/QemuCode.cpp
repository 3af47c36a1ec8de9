//===- QemuCode.cpp - The code as it ran: the recorder's code log ---------===//
//
// docs/architecture.md, "Image over time": a snapshot is decoded with the code
// each stretch of it ran, not the code at the stop. The recorder sees every
// block QEMU translates, before it first runs, so it logs (QemuRings.h has
// the format):
//  - a file mapping, the first time a block runs in it (DIR/code.log `L`);
//  - for code outside files (JIT, the vdso), each page as it is when a
//    block in it is translated and the log has no version of the page, or
//    one whose bytes differ where the block is (`B`, the page in code.bin);
//  - a range unmapped where code ran (`U`).
// Each record has the next seq. A change that replaces code (a new page
// version over an old one, a file where other code was) marks every block
// translated from it (BlockInfo::seq), also those translated after the log
// took the version; before such a block's instructions a
// thread whose trace has not marked that seq writes a PSB+ and a mark
// (DIR/marks.<tid>: the PSB's ring offset, the seq). So a decoder that
// resyncs at each PSB reads every stretch with the code it ran. A change
// that replaces nothing needs no mark: the code was there before the
// recorder first saw it.
//
//===----------------------------------------------------------------------===//
#include "Recorder.h"

#include "magic_trace/ProcessModules.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstring>
#include <fcntl.h>
#include <map>
#include <sys/uio.h>
#include <unistd.h>
#include <unordered_map>

namespace magic_trace::qemu_plugin {
namespace {

constexpr uint64_t kPage = 4096;

struct FileMapping {
  uint64_t end = 0;
  std::string path;
  uint64_t fileOffset = 0;
  /// The seq its blocks mark, when it replaced code; else 0.
  uint32_t markSeq = 0;
};

/// The latest version of a page of code outside files.
struct PageVersion {
  std::unique_ptr<uint8_t[]> bytes;
  /// The seq its blocks mark, when it replaced code; else 0. Every block
  /// translated from this version carries it, not only the block that
  /// made the log take the version: a thread may run another block of the
  /// new version first.
  uint32_t markSeq = 0;
};

/// What the log knows, with Recorder::mutex held.
struct CodeLog {
  int logFd = -1; ///< DIR/code.log
  int binFd = -1; ///< DIR/code.bin
  uint64_t binSize = 0;
  bool failed = false;
  uint64_t seq = 0;
  /// File mappings code ran in that are still mapped, by start.
  std::map<uint64_t, FileMapping> files;
  /// Every file mapping ever logged, by start (to tell a replacement).
  std::multimap<uint64_t, FileMapping> everFiles;
  /// The latest version of each page of code outside files.
  std::unordered_map<uint64_t, PageVersion> pages;
};

CodeLog &codeLog() {
  static CodeLog log;
  return log;
}

bool writeAll(int fd, const void *data, size_t size) {
  const auto *bytes = static_cast<const char *>(data);
  while (size) {
    ssize_t wrote = ::write(fd, bytes, size);
    if (wrote <= 0)
      return false;
    bytes += wrote;
    size -= size_t(wrote);
  }
  return true;
}

/// Opens DIR/code.log and code.bin on first use; false when it cannot.
bool openLog(CodeLog &log) {
  if (log.logFd >= 0)
    return true;
  if (log.failed)
    return false;
  const std::string &dir = recorder->options.dir;
  log.logFd = ::open(qemu_dir::codeLog(dir).c_str(),
                     O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  log.binFd = ::open(qemu_dir::codeBin(dir).c_str(),
                     O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (log.logFd < 0 || log.binFd < 0) {
    log.failed = true;
    warn("cannot write the code log in " + dir +
         ": code that changes or goes away before a snapshot will not "
         "decode (check the directory)");
    return false;
  }
  return true;
}

/// Appends one record line (its seq is the next one) and returns the seq.
uint64_t logRecord(CodeLog &log, const std::string &line) {
  if (!openLog(log))
    return 0;
  if (!writeAll(log.logFd, line.data(), line.size())) {
    log.failed = true;
    warn("the code log stopped: cannot write " + recorder->options.dir +
         "/code.log (check free space)");
    return 0;
  }
  return log.seq;
}

bool isFile(llvm::StringRef path) {
  return path.starts_with("/") && !path.starts_with("/memfd:") &&
         !path.ends_with(" (deleted)");
}

/// Whether a file mapping [start, end) lies where other code was.
bool replacesCode(const CodeLog &log, uint64_t start, uint64_t end,
                  const FileMapping &mapping) {
  for (const auto &[begin, earlier] : log.everFiles)
    if (begin < end && start < earlier.end &&
        (earlier.path != mapping.path || begin != start ||
         earlier.fileOffset != mapping.fileOffset))
      return true;
  for (uint64_t page = start; page < end; page += kPage)
    if (log.pages.count(page))
      return true;
  return false;
}

/// The file mapping holding `address`, read from /proc/self/maps, logged.
/// Returns the seq to mark blocks in it with, 0 for none; false in
/// `isFileCode` when `address` is not in a file mapping.
uint32_t noteFileMapping(CodeLog &log, uint64_t address, bool &isFileCode) {
  isFileCode = false;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> maps =
      llvm::MemoryBuffer::getFileAsStream("/proc/self/maps");
  if (!maps)
    return 0;
  for (const MapsEntry &entry : parseProcMaps((*maps)->getBuffer())) {
    if (address < entry.start || address >= entry.end)
      continue;
    if (!isFile(entry.path))
      return 0;
    isFileCode = true;
    FileMapping mapping{entry.end, entry.path, entry.fileOffset};
    bool replaces = replacesCode(log, entry.start, entry.end, mapping);
    ++log.seq;
    if (!logRecord(log, formatLoadRecord(log.seq, entry.start, entry.end,
                                         entry.fileOffset, entry.path)))
      return 0;
    mapping.markSeq = replaces ? uint32_t(log.seq) : 0;
    log.files[entry.start] = mapping;
    log.everFiles.emplace(entry.start, mapping);
    return mapping.markSeq;
  }
  return 0;
}

/// Logs the page at `page` as it is now when its version in the log
/// differs from it in [from, to); returns the seq to mark with, 0 for none.
uint32_t notePage(CodeLog &log, uint64_t page, uint64_t from, uint64_t to) {
  // Guest memory is host memory in qemu-user; read through the kernel, so
  // that a page the host cannot read is an error, not a fault in QEMU.
  uint8_t now[kPage];
  iovec local{now, kPage};
  iovec remote{reinterpret_cast<void *>(page), kPage};
  if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != ssize_t(kPage))
    return 0;
  auto known = log.pages.find(page);
  bool replaces = known != log.pages.end();
  if (replaces && std::memcmp(known->second.bytes.get() + (from - page),
                              now + (from - page), to - from) == 0)
    return known->second.markSeq;
  if (!replaces) {
    for (const auto &[begin, earlier] : log.everFiles)
      replaces |= begin < page + kPage && page < earlier.end;
    known = log.pages.emplace(page, PageVersion()).first;
    known->second.bytes = std::make_unique<uint8_t[]>(kPage);
  }
  std::memcpy(known->second.bytes.get(), now, kPage);
  if (!openLog(log) || !writeAll(log.binFd, now, kPage)) {
    log.failed = true;
    return 0;
  }
  uint64_t at = log.binSize;
  log.binSize += kPage;
  ++log.seq;
  known->second.markSeq = replaces ? uint32_t(log.seq) : 0;
  if (!logRecord(log, formatBytesRecord(log.seq, page, kPage, at)))
    return 0;
  return known->second.markSeq;
}

} // namespace

uint32_t noteTranslatedCode(const BlockInfo &block) {
  CodeLog &log = codeLog();
  if (log.failed || block.count == 0)
    return 0;
  uint64_t start = block.start;
  uint64_t end = block.last().ip + std::max<uint8_t>(block.last().size, 1);
  auto file = log.files.upper_bound(start);
  if (file != log.files.begin() && start < std::prev(file)->second.end)
    return std::prev(file)->second.markSeq; // A file mapping the log knows.
  bool isFileCode = false;
  uint32_t seq = noteFileMapping(log, start, isFileCode);
  if (isFileCode)
    return seq;
  // Code outside files: its pages, read from guest memory (host memory in
  // qemu-user; verified at the first block).
  if (!guestMemoryDirect)
    return 0;
  for (uint64_t page = start & ~(kPage - 1); page < end; page += kPage)
    seq = std::max(seq, notePage(log, page, std::max(start, page),
                                 std::min(end, page + kPage)));
  return seq;
}

void noteUnmap(uint64_t address, uint64_t length) {
  CodeLog &log = codeLog();
  uint64_t end = address + length;
  if (log.failed || end <= address)
    return;
  bool held = false;
  for (auto file = log.files.begin(); file != log.files.end();) {
    if (file->first < end && address < file->second.end) {
      held = true;
      file = log.files.erase(file);
    } else {
      ++file;
    }
  }
  for (uint64_t page = address & ~(kPage - 1); !held && page < end;
       page += kPage)
    held = log.pages.count(page);
  if (!held)
    return;
  ++log.seq;
  logRecord(log, formatUnmapRecord(log.seq, address, end));
}

void markCodeChange(ThreadRecorder &thread, const BlockInfo &block) {
  if (block.seq <= thread.markSeq || thread.flags.failed)
    return;
  llvm::Expected<uint64_t> at = thread.writer->sync();
  if (!at)
    return fail(thread, at.takeError());
  thread.markSeq = block.seq;
  {
    // A trigger's copy reads the marks (QemuTriggers.cpp).
    std::lock_guard<std::mutex> lock(recorder->mutex);
    thread.marks.push_back({*at, block.seq});
  }
  if (thread.marksFd < 0)
    thread.marksFd =
        ::open(qemu_dir::marks(recorder->options.dir, thread.tid).c_str(),
               O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  std::string line = formatMark(*at, block.seq);
  if (thread.marksFd < 0 || !writeAll(thread.marksFd, line.data(), line.size()))
    warn(llvm::formatv("cannot write the image marks of thread {0}: its "
                       "trace may decode with code of the wrong moment",
                       thread.tid)
             .str());
}

std::vector<ImageMark> marksFor(const ThreadRecorder &thread,
                                uint64_t bytesCopied) {
  uint64_t written = thread.writer->buffer().written();
  return marksOfCopy(thread.marks, written - std::min(written, bytesCopied));
}

uint64_t lastCodeSeq() { return codeLog().seq; }

} // namespace magic_trace::qemu_plugin
