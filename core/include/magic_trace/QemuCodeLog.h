//===- QemuCodeLog.h - The QEMU recorder's directory and code log -*- C++
//-*-===//
//
// The one definition of the QEMU recorder's directory (docs/qemu.md has the
// layout; QemuRings.h the shared-memory rings in it): the names of its
// files, and the code log's records, written by the recorder
// (plugin/qemu/QemuCode.cpp, with the format* functions below) and read by
// everyone else (parseQemuCodeLog, readQemuMarks):
//
//   DIR/header        QemuRingHeader (QemuRings.h)
//   DIR/ring.<tid>    a thread's ring (QemuRings.h)
//   DIR/maps          /proc/self/maps lines of the mappings code ran in
//   DIR/code.log      the code log (CodeHistory.h), one record a line, each
//                     with the next seq, appended as code first runs:
//                       L SEQ START END FILE-OFFSET PATH  a file mapping
//                       B SEQ PAGE SIZE BIN-OFFSET        a page of code
//                         outside files, as it is now: SIZE bytes of code.bin
//                       U SEQ START END                   a range unmapped
//                     (numbers in hex with 0x, but SEQ in decimal)
//   DIR/code.bin      the pages `B` records name
//   DIR/marks.<tid>   where the thread's code changed, a line each:
//                     RING-OFFSET SEQ (a PSB+ starts at that ring offset)
//   DIR/snap-<N>/     the bundle of trigger snapshot N; its file `trigger`
//                     holds the trigger's address
//   DIR/groundtruth/  optional, as the ptrace recorder writes it
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_QEMUCODELOG_H
#define MAGIC_TRACE_QEMUCODELOG_H

#include "magic_trace/CodeHistory.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace magic_trace {

/// DIR/name, with one separator.
std::string joinPath(llvm::StringRef dir, const llvm::Twine &name);

/// The paths of the recorder's files in `dir`.
namespace qemu_dir {
std::string header(llvm::StringRef dir);
std::string ring(llvm::StringRef dir, uint64_t tid);
std::string maps(llvm::StringRef dir);
std::string codeLog(llvm::StringRef dir);
std::string codeBin(llvm::StringRef dir);
std::string marks(llvm::StringRef dir, uint64_t tid);
std::string snapshot(llvm::StringRef dir, uint32_t number);
/// The trigger's address, in a snapshot's directory.
std::string trigger(llvm::StringRef snapshotDir);
} // namespace qemu_dir

/// The code log's records and the marks' lines, each with its newline, as
/// the recorder appends them.
std::string formatLoadRecord(uint64_t seq, uint64_t start, uint64_t end,
                             uint64_t fileOffset, llvm::StringRef path);
std::string formatBytesRecord(uint64_t seq, uint64_t page, uint64_t size,
                              uint64_t binOffset);
std::string formatUnmapRecord(uint64_t seq, uint64_t start, uint64_t end);
std::string formatMark(uint64_t ringOffset, uint64_t seq);

/// DIR/code.log's records up to seq `lastSeq` (0: all) as changes of
/// `history` (a file mapping becomes a Load of its module, its segments
/// placed from the ELF headers). Errors: those of parseQemuCodeLog, and a
/// log or code.bin that is not the user's own regular file or is too large
/// (one line, naming it). A missing log is an empty history.
llvm::Error readQemuCodeLog(llvm::StringRef dir, uint64_t lastSeq,
                            CodeHistory &history);

/// readQemuCodeLog's parser, on the log's and code.bin's bytes (`dir`
/// names them in messages): what the fuzz target drives. Errors: a record
/// that does not parse, a seq that does not ascend, a range that wraps or
/// is larger than a process can map, bytes beyond code.bin or reused, more
/// file mappings than kMaxHistoryLoads (one line, with the record's offset).
llvm::Error parseQemuCodeLog(llvm::StringRef log, llvm::StringRef bin,
                             llvm::StringRef dir, uint64_t lastSeq,
                             CodeHistory &history);

/// Marks at ring offsets as marks of a copy of the ring whose first byte is
/// at ring offset `firstOffset`: a mark before it is the copy's first (it
/// says what the copy starts with), and of two at one offset the later
/// wins.
std::vector<ImageMark> marksOfCopy(const std::vector<ImageMark> &ringMarks,
                                   uint64_t firstOffset);

/// DIR/marks.<tid> as marks of a copy of the thread's ring whose first byte
/// is at ring offset `firstOffset` (marksOfCopy).
std::vector<ImageMark> readQemuMarks(llvm::StringRef dir, uint64_t tid,
                                     uint64_t firstOffset);

} // namespace magic_trace

#endif
