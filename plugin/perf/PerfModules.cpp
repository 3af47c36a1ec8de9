//===- PerfModules.cpp - Modules from perf's maps -------------------------===//
#include "PerfModules.h"

#include "magic_trace/PerfData.h"
#include "magic_trace/ProcessModules.h"

#include "llvm/ADT/StringExtras.h"

using namespace llvm;

namespace magic_trace {

void PerfModules::note(StringRef dso, ArrayRef<uint8_t> buildId,
                       uint64_t address, uint64_t fileOffset) {
  // Kernel code ("[kernel.kallsyms]") and anonymous memory are no files we
  // can read; the vdso is (perf's build-id cache or our own copy).
  if (dso.empty() || (dso.starts_with("[") && dso != "[vdso]") ||
      dso.starts_with("//"))
    return;
  auto [it, inserted] = byPath.try_emplace(dso.str());
  if (!inserted)
    return;
  constexpr uint64_t PageMask = ~uint64_t(0xfff);
  it->second.buildId = toHex(buildId, /*LowerCase=*/true);
  it->second.page.address = address & PageMask;
  it->second.page.fileOffset = fileOffset & PageMask;
  it->second.page.size = 0x1000;
  it->second.page.executable = true;
}

std::vector<Module> PerfModules::modules(StringRef symfs) const {
  std::vector<Module> modules;
  for (const auto &[path, seen] : byPath) {
    Module module;
    module.path = path;
    module.buildId = seen.buildId;
    std::string file = lookUpModuleFile(path, seen.buildId, symfs);
    if (file != path)
      module.fileCopy = file;
    // The page perf mapped the address from: file offset 0 is that far
    // below it unless the ELF headers say otherwise (lld maps offset 0
    // twice).
    module.loadAddress = seen.page.address - seen.page.fileOffset;
    Expected<PlacedElf> placed =
        placeElfByMappings(module.fileToRead(), {seen.page});
    // No segments: the symbolizer places them from the ELF headers.
    if (placed) {
      module.loadAddress = placed->loadAddress;
    } else {
      // The symbolizer names the module's problem (no file, another
      // build-id); its code is named [unknown @ ...].
      consumeError(placed.takeError());
    }
    modules.push_back(std::move(module));
  }
  return modules;
}

} // namespace magic_trace
