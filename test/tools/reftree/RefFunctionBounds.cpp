//===- RefFunctionBounds.cpp - The reference's stripped functions ---------===//
#include "RefFunctionBounds.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/DebugInfo/DWARF/DWARFContext.h"
#include "llvm/DebugInfo/DWARF/DWARFDebugFrame.h"

#include <algorithm>

using namespace llvm;

namespace magic_trace {
namespace reftree {

void addFdeFunctions(const object::ObjectFile &file, StringRef moduleName,
                     uint64_t bias, size_t first,
                     std::vector<RefFunction> &out) {
  std::unique_ptr<DWARFContext> context = DWARFContext::create(file);
  Expected<const DWARFDebugFrame *> frames = context->getEHFrame();
  if (!frames) {
    consumeError(frames.takeError());
    return;
  }
  // Begins of the module's functions, to find the one at or before an FDE.
  std::vector<RefFunction> added;
  auto begin = out.begin() + first, end = out.end();
  for (const dwarf::FrameEntry &entry : (*frames)->entries()) {
    const auto *fde = dyn_cast<dwarf::FDE>(&entry);
    if (!fde || fde->getAddressRange() == 0 || fde->getInitialLocation() == 0)
      continue;
    uint64_t low = fde->getInitialLocation() + bias;
    uint64_t high = low + fde->getAddressRange();
    auto next =
        std::upper_bound(begin, end, low, [](uint64_t a, const RefFunction &f) {
          return a < f.begin;
        });
    if (next != begin && low < std::prev(next)->end)
      continue; // A symbol covers it: symbols win.
    if (next != end)
      high = std::min(high, next->begin);
    std::string name = moduleName.str() + "+0x" +
                       utohexstr(fde->getInitialLocation(), /*LowerCase=*/true);
    added.push_back({low, high, name, {name}, false});
  }
  out.insert(out.end(), added.begin(), added.end());
}

} // namespace reftree
} // namespace magic_trace
