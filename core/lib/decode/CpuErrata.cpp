//===- CpuErrata.cpp - Which CPU a trace came from, and its errata --------===//
//
// libipt works around CPU errata (pt_cpu_errata) for the CPU that recorded a
// trace; decoding a Skylake trace without them reports "unexpected packet
// context" at every FUP-in-PSB+ then TIP.PGE (BDM70). So an unknown CPU is an
// error, as in LLDB's decoder, unless the user names one (--cpu).
//
//===----------------------------------------------------------------------===//
#include "magic_trace/Decoder.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <intel-pt.h>

using namespace llvm;

namespace magic_trace {

Error checkCpu(const CpuIdentity &cpu) {
  if (cpu.vendor == kNoErrataVendor)
    return Error::success();
  if (cpu.vendor != "GenuineIntel")
    return createStringError(
        formatv("unknown cpu: vendor '{0}' (Intel PT comes from Intel CPUs; "
                "name the recording CPU with --cpu "
                "intel/FAMILY/MODEL/STEPPING, or --cpu none for no errata)",
                cpu.vendor)
            .str());
  if (cpu.family == 0 || cpu.model == 0)
    return createStringError(
        formatv("unknown cpu: family {0}, model {1} (name the recording CPU "
                "with --cpu intel/FAMILY/MODEL/STEPPING, or --cpu none for no "
                "errata)",
                cpu.family, cpu.model)
            .str());
  return Error::success();
}

std::vector<std::string> cpuErrata(const CpuIdentity &cpu) {
  std::vector<std::string> names;
  if (cpu.vendor != "GenuineIntel")
    return names;
  pt_cpu id = {};
  id.vendor = pcv_intel;
  id.family = static_cast<uint16_t>(cpu.family);
  id.model = static_cast<uint8_t>(cpu.model);
  id.stepping = static_cast<uint8_t>(cpu.stepping);
  pt_errata errata = {};
  if (pt_cpu_errata(&errata, &id) < 0)
    return names;
  // Named as libipt names them (Intel's specification-update numbers).
  const std::pair<bool, const char *> all[] = {
      {bool(errata.bdm70), "bdm70"},   {bool(errata.bdm64), "bdm64"},
      {bool(errata.skd007), "skd007"}, {bool(errata.skd022), "skd022"},
      {bool(errata.skd010), "skd010"}, {bool(errata.skl014), "skl014"},
      {bool(errata.apl12), "apl12"},   {bool(errata.apl11), "apl11"},
      {bool(errata.skl168), "skl168"}, {bool(errata.skz84), "skz84"},
  };
  for (const auto &[on, name] : all)
    if (on)
      names.push_back(name);
  return names;
}

Expected<CpuIdentity> parseCpu(StringRef text) {
  if (text == "none") {
    CpuIdentity none;
    none.vendor = kNoErrataVendor;
    return none;
  }
  SmallVector<StringRef, 4> parts;
  text.split(parts, '/');
  CpuIdentity cpu;
  if (parts.size() == 4 && parts[0].equals_insensitive("intel"))
    parts[0] = "GenuineIntel";
  if (parts.size() != 4 || parts[0] != "GenuineIntel" ||
      parts[1].getAsInteger(0, cpu.family) ||
      parts[2].getAsInteger(0, cpu.model) ||
      parts[3].getAsInteger(0, cpu.stepping))
    return createStringError(
        formatv("bad --cpu '{0}' (give intel/FAMILY/MODEL/STEPPING, e.g. "
                "intel/6/158/9, or none)",
                text)
            .str());
  cpu.vendor = parts[0].str();
  return cpu;
}

} // namespace magic_trace
