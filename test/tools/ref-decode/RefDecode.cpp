//===- RefDecode.cpp - magic-trace-ref-decode: reference PT decode --------===//
//
// The test suite's oracle: decodes every thread of an LLDB intel-pt bundle
// with libipt's instruction decoder in ptxed's loop (InsnLoop.h), sharing no
// code with magic-trace-core, and prints the instruction addresses in
// `magic-trace-decode --dump insns` format so the two can be diffed:
//   # thread <tid> instructions <count>
//   0x<address>                          one per instruction, in order
//   # error offset <offset>: <text>      where a decode error happened
//   summary: N threads, N instructions, N errors
// Each decode error also goes to stderr as one line. With --binary DIR the
// addresses go to DIR/<tid>.insns instead, 8 bytes each (little-endian), as
// the recorders' ground truth has them, for scripts that compare millions.
//
//===----------------------------------------------------------------------===//
#include "InsnLoop.h"
#include "RefBundle.h"
#include "RefImage.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/NativeFormatting.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace ref_decode;

namespace {

const char *const kUsage =
    "usage: magic-trace-ref-decode BUNDLE_DIR_OR_JSON [--tid T] [--cpu CPU]\n"
    "                              [--count-only] [--no-errors-in-stream]\n"
    "                              [--binary DIR]\n"
    "  --tid T                only this thread\n"
    "  --cpu V/F/M/S          decode for this CPU instead of cpuInfo (vendor\n"
    "                         GenuineIntel or intel, family, model, "
    "stepping);\n"
    "                         --cpu none: no CPU, so no errata\n"
    "  --count-only           print only the '# thread' lines and the summary\n"
    "  --no-errors-in-stream  leave the '# error' lines out of stdout\n"
    "  --binary DIR           each thread's addresses to DIR/<tid>.insns\n"
    "                         (8 bytes each, little-endian), not stdout\n";

struct Args {
  std::string input;
  std::optional<uint64_t> tid;
  std::optional<pt_cpu> cpu; ///< --cpu; unset: the bundle's cpuInfo.
  bool countOnly = false;
  bool errorsInStream = true;
  std::string binaryDir; ///< --binary: the addresses' directory.
};

/// libipt's vendor for a cpuInfo or --cpu vendor name.
pt_cpu_vendor vendorOf(StringRef name) {
  if (name.equals_insensitive("GenuineIntel") ||
      name.equals_insensitive("intel"))
    return pcv_intel;
  return pcv_unknown;
}

/// Parses --cpu: "none" or VENDOR/FAMILY/MODEL/STEPPING.
Expected<pt_cpu> parseCpu(StringRef text) {
  pt_cpu cpu = {};
  if (text == "none")
    return cpu;
  SmallVector<StringRef, 4> parts;
  text.split(parts, '/');
  unsigned family = 0, model = 0, stepping = 0;
  if (parts.size() != 4 || parts[1].getAsInteger(0, family) ||
      parts[2].getAsInteger(0, model) || parts[3].getAsInteger(0, stepping))
    return createStringError("--cpu wants none or VENDOR/FAMILY/MODEL/"
                             "STEPPING, not '" +
                             text.str() + "'");
  cpu.vendor = vendorOf(parts[0]);
  cpu.family = static_cast<uint16_t>(family);
  cpu.model = static_cast<uint8_t>(model);
  cpu.stepping = static_cast<uint8_t>(stepping);
  return cpu;
}

/// Applies option `name` (with `value` when it takes one) to `args`.
Error applyOption(StringRef name, StringRef value, Args &args) {
  if (name == "binary") {
    if (value.empty())
      return createStringError("--binary wants a directory");
    args.binaryDir = value.str();
    return Error::success();
  }
  if (name == "tid") {
    uint64_t tid = 0;
    if (value.getAsInteger(0, tid))
      return createStringError("--tid wants a number, not '" + value.str() +
                               "'");
    args.tid = tid;
    return Error::success();
  }
  auto cpu = parseCpu(value);
  if (!cpu)
    return cpu.takeError();
  args.cpu = *cpu;
  return Error::success();
}

/// Parses the command line by hand, as magic-trace-decode does.
Expected<Args> parseArgs(int argc, char **argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    StringRef arg = argv[i];
    if (!arg.starts_with("-")) {
      if (!args.input.empty())
        return createStringError("more than one bundle given (" + arg.str() +
                                 ")");
      args.input = arg.str();
      continue;
    }
    auto [name, value] = arg.ltrim('-').split('=');
    if (name == "help" || name == "h")
      return createStringError("help");
    if (name == "count-only") {
      args.countOnly = true;
      continue;
    }
    if (name == "no-errors-in-stream") {
      args.errorsInStream = false;
      continue;
    }
    if (name != "tid" && name != "cpu" && name != "binary")
      return createStringError("unknown option '" + arg.str() +
                               "' (see --help)");
    if (!arg.contains('=')) {
      if (i + 1 >= argc)
        return createStringError("--" + name.str() + " needs a value");
      value = argv[++i];
    }
    if (Error error = applyOption(name, value, args))
      return std::move(error);
  }
  if (args.input.empty())
    return createStringError("no bundle given (pass BUNDLE_DIR_OR_JSON)");
  return args;
}

/// The pt_config for `cpu`, with libipt's errata for it.
pt_config configFor(const pt_cpu &cpu) {
  pt_config config;
  pt_config_init(&config);
  config.cpu = cpu;
  // pt_cpu_errata zeroes the errata, then sets those of the Intel models it
  // knows; for any other CPU it returns -pte_bad_cpu, and the decode simply
  // runs without errata (as ptxed does).
  if (cpu.vendor == pcv_intel)
    (void)pt_cpu_errata(&config.errata, &config.cpu);
  return config;
}

pt_cpu bundleCpu(const RefCpu &info) {
  pt_cpu cpu = {};
  cpu.vendor = vendorOf(info.vendor);
  cpu.family = static_cast<uint16_t>(info.family);
  cpu.model = static_cast<uint8_t>(info.model);
  cpu.stepping = static_cast<uint8_t>(info.stepping);
  return cpu;
}

void printError(raw_ostream &out, const LoopError &error) {
  out << "offset ";
  if (error.offset)
    out << *error.offset;
  else
    out << "?";
  out << ": " << error.message << "\n";
}

/// Prints one thread: its header, then (unless --count-only) each address
/// with the errors at their positions.
void printThread(raw_ostream &out, uint64_t tid, const LoopResult &result,
                 const Args &args) {
  for (const LoopError &error : result.errors) {
    errs() << "ref-decode: thread " << tid << " ";
    printError(errs(), error);
  }
  out << "# thread " << tid << " instructions " << result.instructions << "\n";
  if (args.countOnly || !args.binaryDir.empty())
    return;
  auto error = result.errors.begin(), errorsEnd = result.errors.end();
  if (!args.errorsInStream)
    error = errorsEnd;
  for (size_t i = 0; i <= result.addresses.size(); ++i) {
    for (; error != errorsEnd && error->position == i; ++error) {
      out << "# error ";
      printError(out, *error);
    }
    if (i == result.addresses.size())
      break;
    write_hex(out, result.addresses[i], HexPrintStyle::PrefixLower);
    out << '\n';
  }
}

/// --binary: the thread's addresses to DIR/<tid>.insns, 8 bytes each.
Error writeBinary(StringRef dir, uint64_t tid, const LoopResult &result) {
  std::string path = (dir + "/" + Twine(tid) + ".insns").str();
  std::error_code ec;
  raw_fd_ostream file(path, ec);
  if (ec)
    return createStringError("cannot write " + path + ": " + ec.message());
  for (uint64_t address : result.addresses) {
    char bytes[8];
    support::endian::write64le(bytes, address);
    file.write(bytes, sizeof bytes);
  }
  file.close();
  if (file.has_error())
    return createStringError("cannot write " + path + ": " +
                             file.error().message());
  return Error::success();
}

/// Decodes one thread's trace file against `image`.
Expected<LoopResult> decodeThread(const RefThread &thread,
                                  const pt_config &config, pt_image *image,
                                  bool keepAddresses) {
  if (!thread.tracePath)
    return LoopResult();
  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer = MemoryBuffer::getFile(
      *thread.tracePath, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer)
    return createStringError("cannot read " + *thread.tracePath + ": " +
                             buffer.getError().message());
  ArrayRef<uint8_t> bytes(
      reinterpret_cast<const uint8_t *>((*buffer)->getBufferStart()),
      (*buffer)->getBufferSize());
  return decodeInstructions(bytes, config, image, keepAddresses);
}

int fail(const Twine &message) {
  WithColor::error() << message << "\n";
  return 1;
}

struct Totals {
  uint64_t threads = 0;
  uint64_t instructions = 0;
  uint64_t errors = 0;
};

/// Decodes and prints the selected threads of `process`.
Error decodeProcess(const RefProcess &process, const pt_config &config,
                    const Args &args, Totals &totals) {
  bool wanted = !args.tid;
  for (const RefThread &thread : process.threads)
    wanted |= args.tid && thread.tid == *args.tid;
  if (!wanted)
    return Error::success();
  auto image = buildImage(process.modules);
  if (!image)
    return image.takeError();
  for (const RefThread &thread : process.threads) {
    if (args.tid && thread.tid != *args.tid)
      continue;
    auto result = decodeThread(thread, config, image->get(), !args.countOnly);
    if (!result)
      return result.takeError();
    printThread(outs(), thread.tid, *result, args);
    if (!args.binaryDir.empty())
      if (Error error = writeBinary(args.binaryDir, thread.tid, *result))
        return error;
    ++totals.threads;
    totals.instructions += result->instructions;
    totals.errors += result->errors.size();
  }
  return Error::success();
}

} // namespace

int main(int argc, char **argv) {
  Expected<Args> args = parseArgs(argc, argv);
  if (!args) {
    std::string message = toString(args.takeError());
    if (message == "help") {
      outs() << kUsage;
      return 0;
    }
    return fail(message);
  }
  Expected<RefBundle> bundle = readRefBundle(args->input);
  if (!bundle)
    return fail(toString(bundle.takeError()));
  pt_config config = configFor(args->cpu ? *args->cpu : bundleCpu(bundle->cpu));
  Totals totals;
  for (const RefProcess &process : bundle->processes)
    if (Error error = decodeProcess(process, config, *args, totals))
      return fail(toString(std::move(error)));
  if (args->tid && !totals.threads)
    return fail("no thread " + Twine(*args->tid) + " in the bundle");
  outs() << "summary: " << totals.threads << " threads, " << totals.instructions
         << " instructions, " << totals.errors << " errors\n";
  return 0;
}
