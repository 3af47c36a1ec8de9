//===- ProcessModules.h - Modules of a live process from /proc --*- C++ -*-===//
//
// The emulator's module list: /proc/PID/maps grouped by file into Module /
// LoadedSegment, with each file's GNU build-id read from its ELF note, plus
// the ELF facts the stepper needs (architecture check, symbol lookup, load
// bias). Linux only; no LLDB.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PROCESSMODULES_H
#define MAGIC_TRACE_PROCESSMODULES_H

#include "magic_trace/Snapshot.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace llvm::object {
class ObjectFile;
} // namespace llvm::object

namespace magic_trace {

/// One line of /proc/PID/maps.
struct MapsEntry {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t fileOffset = 0;
  bool executable = false;
  std::string path; ///< Empty for anonymous mappings.

  /// Code here is code outside files: the mapping is anonymous, or has a
  /// kernel name other than the vdso's (a module) and vsyscall's and
  /// vvar's (no code a debugger reads): [heap], [stack], [anon:NAME].
  bool holdsNoFile() const {
    llvm::StringRef name = path;
    return name.empty() || (name.starts_with("[") && name != "[vdso]" &&
                            name != "[vsyscall]" && name != "[vvar]");
  }
};

/// Parses the text of /proc/PID/maps. Lines that do not parse are skipped.
std::vector<MapsEntry> parseProcMaps(llvm::StringRef text);

/// Groups file-backed mappings (absolute paths only: no [vdso], [heap]) into
/// modules, in order of first address. loadAddress is the mapping at file
/// offset 0 (the lowest one when none is). Build-ids come from `buildIds`
/// (path -> build-id) when it has the path, else from the files.
std::vector<Module>
modulesFromMaps(const std::vector<MapsEntry> &maps,
                const std::map<std::string, std::string> &buildIds = {});

/// Reads /proc/`pid`/maps and returns modulesFromMaps of it.
/// Fails when the file cannot be read (process gone).
llvm::Expected<std::vector<MapsEntry>> readProcMaps(int pid);

/// Lower-case hex GNU build-id of an object file (its NT_GNU_BUILD_ID note,
/// as LLVM's object::getBuildID finds it); empty if it has none. The one
/// build-id reader: modules, the decoder's images and perf.data's files.
std::string buildIdOf(const llvm::object::ObjectFile &object);

/// buildIdOf the file at `path`; empty if it has none or is not a regular
/// file that reads as an object file.
std::string readBuildId(llvm::StringRef path);

/// Checks that `path` is an x86-64 ELF executable or shared object.
/// Errors: the file cannot be read, is not ELF, or is for another machine.
llvm::Error checkX86_64Elf(llvm::StringRef path);

/// The link-time address of function/object symbol `name` in ELF `path`
/// (.symtab, then .dynsym). Errors: unreadable file, symbol not found.
llvm::Expected<uint64_t> findElfSymbol(llvm::StringRef path,
                                       llvm::StringRef name);

/// The lowest link-time address of the PT_LOAD segments, page aligned, and
/// whether the file is position independent (ET_DYN).
struct ElfLoadInfo {
  uint64_t firstLoadVaddr = 0;
  bool positionIndependent = false;
  uint64_t entry = 0; ///< e_entry, link-time.
};
llvm::Expected<ElfLoadInfo> readElfLoadInfo(llvm::StringRef path);

/// Where ELF `path` lies in a process, from some of its mappings
/// (`mappings`: address, file offset, size, as /proc/PID/maps or perf's
/// MMAP2 give them) that hold code. The bias comes from the program
/// headers' address and offset both: lld maps file offset 0 twice (`LOAD
/// 0x0 vaddr 0x0 R`, `LOAD 0x620 vaddr 0x1620 R E`, whose page is offset 0
/// at 0x1000), so an offset alone does not say which segment a mapping
/// shows; an executable PT_LOAD that the bias puts over the mapping does.
struct PlacedElf {
  uint64_t bias = 0;
  /// Runtime address of the first PT_LOAD's file offset 0 (LLDB's
  /// ObjectFileELF::GetBaseAddress; Module::loadAddress).
  uint64_t loadAddress = 0;
  /// Every PT_LOAD, page-aligned, at the bias.
  std::vector<LoadedSegment> segments;
};
/// Errors: the file is not a readable ELF, or no mapping shows an
/// executable segment of it (a different file than the one mapped).
llvm::Expected<PlacedElf>
placeElfByMappings(llvm::StringRef path,
                   const std::vector<LoadedSegment> &mappings);

/// ELF `path` at load bias `bias` (the dynamic linker's l_addr): its PT_LOAD
/// segments and load address. Errors: the file is not a readable ELF.
llvm::Expected<PlacedElf> placeElfAtBias(llvm::StringRef path, uint64_t bias);

} // namespace magic_trace

#endif
