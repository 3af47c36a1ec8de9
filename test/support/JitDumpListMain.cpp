//===- JitDumpListMain.cpp - magic-trace-jitdump-list ---------------------===//
//
// Test-only: prints what our jitdump reader (JitRecords.h) finds in a
// jit-PID.dump, one code load a line, "ADDRESS SIZE SHA1-OF-CODE NAME", for
// test/lit/perf/jitdump-perf-inject.test to compare with what perf inject
// --jit makes of the same file. Exit 1 with the reader's error line.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/JitRecords.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA1.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    llvm::errs() << "usage: magic-trace-jitdump-list JITDUMP\n";
    return 2;
  }
  llvm::Expected<magic_trace::JitDump> dump = magic_trace::readJitDump(argv[1]);
  if (!dump) {
    llvm::errs() << "error: " << llvm::toString(dump.takeError()) << "\n";
    return 1;
  }
  for (const magic_trace::JitCodeLoad &load : dump->loads)
    llvm::outs() << llvm::format_hex_no_prefix(load.address, 1) << ' '
                 << load.bytes.size() << ' '
                 << llvm::toHex(llvm::SHA1::hash(load.bytes), true) << ' '
                 << load.symbol.name << '\n';
  return 0;
}
