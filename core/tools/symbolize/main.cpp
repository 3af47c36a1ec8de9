//===- main.cpp - magic-trace-symbolize: the symbolizer on one file -------===//
//
// Usage: magic-trace-symbolize --obj FILE [--load ADDR] [--symtab-only]
//                              [--stats] [--show-range] [ADDR...]
//
// Prints each address's chain in llvm-symbolizer's --inlining order
// (innermost frame first): the function name, then FILE:LINE ("??:0" when
// unknown), then an empty line. Without ADDRs, reads addresses from standard
// input, one a line. Without --load the addresses are file addresses, as
// llvm-symbolizer --obj takes them; with --load ADDR they are runtime
// addresses of the file loaded at ADDR (its lowest mapped byte).
// --show-range adds "range: BEGIN-END entry ENTRY" after each chain: the
// cached range that answered, and the physical function's entry.
//
//===----------------------------------------------------------------------===//

#include "magic_trace/Symbolizer.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <iostream>
#include <string>
#include <vector>

using namespace magic_trace;

namespace {

void printRange(const SymbolRange &range, const StringTable &strings,
                bool showRange) {
  for (auto frame = range.frames.rbegin(); frame != range.frames.rend();
       ++frame) {
    llvm::outs() << strings.get(frame->function) << "\n";
    llvm::StringRef file = strings.get(frame->file);
    llvm::outs() << (file.empty() ? llvm::StringRef("??") : file) << ":"
                 << frame->line << "\n";
  }
  if (showRange)
    llvm::outs() << "range: " << llvm::format_hex(range.begin, 0) << "-"
                 << llvm::format_hex(range.end, 0) << " entry "
                 << llvm::format_hex(range.functionEntry, 0) << "\n";
  llvm::outs() << "\n";
}

int usage() {
  llvm::errs() << "usage: magic-trace-symbolize --obj FILE [--load ADDR] "
                  "[--symtab-only] [--stats] [--show-range] [ADDR...]\n";
  return 2;
}

bool parseAddress(llvm::StringRef text, uint64_t &address) {
  return !text.trim().getAsInteger(0, address);
}

} // namespace

int main(int argc, char **argv) {
  std::string object;
  std::optional<uint64_t> load;
  bool stats = false;
  bool showRange = false;
  Symbolizer::Options options;
  std::vector<uint64_t> addresses;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    if (arg == "--obj" && i + 1 < argc) {
      object = argv[++i];
    } else if (arg.consume_front("--obj=")) {
      object = arg.str();
    } else if (arg == "--load" && i + 1 < argc) {
      uint64_t value;
      if (!parseAddress(argv[++i], value))
        return usage();
      load = value;
    } else if (arg == "--symtab-only") {
      options.useDebugInfo = false;
    } else if (arg == "--show-range") {
      showRange = true;
    } else if (arg == "--stats") {
      stats = true;
    } else {
      uint64_t address;
      if (!parseAddress(arg, address)) {
        llvm::errs() << "error: bad address '" << arg
                     << "' (give hex with 0x or decimal)\n";
        return usage();
      }
      addresses.push_back(address);
    }
  }
  if (object.empty())
    return usage();

  Module module;
  module.path = object;
  if (load) {
    module.loadAddress = *load;
  } else {
    llvm::Expected<uint64_t> base = Symbolizer::preferredLoadAddress(object);
    if (!base) {
      llvm::errs() << "error: " << llvm::toString(base.takeError()) << "\n";
      return 1;
    }
    module.loadAddress = *base;
  }

  StringTable strings;
  Symbolizer symbolizer({module}, strings, options);
  for (const std::string &problem : symbolizer.moduleProblems())
    llvm::errs() << "warning: " << problem << "\n";

  if (addresses.empty()) {
    std::string line;
    while (std::getline(std::cin, line)) {
      if (llvm::StringRef(line).trim().empty())
        continue;
      uint64_t address;
      if (!parseAddress(line, address)) {
        llvm::errs() << "error: bad address '" << line
                     << "' (give hex with 0x or decimal)\n";
        return 1;
      }
      printRange(symbolizer.lookup(address), strings, showRange);
    }
  } else {
    for (uint64_t address : addresses)
      printRange(symbolizer.lookup(address), strings, showRange);
  }
  if (stats) {
    const SymbolizerStats &s = symbolizer.stats();
    llvm::errs() << "lookups: " << s.lookups << ", hits: " << s.hits
                 << ", distinct ranges: " << s.distinctRanges << "\n";
  }
  return 0;
}
