//===- GroundTruth.cpp - What the emulated thread really executed ---------===//
#include "magic_trace/GroundTruth.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace magic_trace {

StringRef truthEventName(TruthEventKind kind) {
  switch (kind) {
  case TruthEventKind::Call:
    return "call";
  case TruthEventKind::Return:
    return "return";
  case TruthEventKind::Jump:
    return "jump";
  case TruthEventKind::Syscall:
    return "syscall";
  case TruthEventKind::Interrupt:
    return "interrupt";
  case TruthEventKind::Enable:
    return "enable";
  case TruthEventKind::Disable:
    return "disable";
  }
  return "unknown";
}

void ThreadTruth::addInstruction(uint64_t ip, uint8_t size, BranchClass branch,
                                 uint64_t nextIp) {
  uint64_t index = insns.size();
  insns.push_back(ip);
  auto add = [&](TruthEventKind kind) {
    events.push_back({index, kind, ip, nextIp});
  };
  switch (branch) {
  case BranchClass::CondBranch:
    if (nextIp != ip + size)
      add(TruthEventKind::Jump);
    return;
  case BranchClass::DirectJump:
  case BranchClass::IndirectJump:
  case BranchClass::FarTransfer:
    add(TruthEventKind::Jump);
    return;
  case BranchClass::DirectCall:
  case BranchClass::IndirectCall:
    add(TruthEventKind::Call);
    return;
  case BranchClass::Return:
    add(TruthEventKind::Return);
    return;
  case BranchClass::Syscall:
    add(TruthEventKind::Syscall);
    return;
  case BranchClass::Other:
  case BranchClass::Unknown:
    return;
  }
}

static Error writeFile(StringRef path, StringRef contents) {
  std::error_code ec;
  raw_fd_ostream out(path, ec);
  if (ec)
    return createStringError(ec, "cannot write %s: %s (check the directory)",
                             path.str().c_str(), ec.message().c_str());
  out << contents;
  out.close();
  if (out.has_error())
    return createStringError(out.error(), "cannot write %s: %s",
                             path.str().c_str(), out.error().message().c_str());
  return Error::success();
}

Error writeGroundTruth(const std::vector<ThreadTruth> &threads, StringRef dir) {
  SmallString<256> truthDir(dir);
  sys::path::append(truthDir, "groundtruth");
  if (std::error_code ec = sys::fs::create_directories(truthDir))
    return createStringError(ec, "cannot create %s: %s (check permissions)",
                             truthDir.c_str(), ec.message().c_str());
  for (const ThreadTruth &thread : threads) {
    std::string base = (truthDir + "/" + Twine(thread.tid)).str();
    std::string insns;
    insns.resize(thread.insns.size() * 8);
    for (size_t i = 0; i < thread.insns.size(); ++i)
      support::endian::write64le(&insns[i * 8], thread.insns[i]);
    if (Error err = writeFile(base + ".insns", insns))
      return err;
    std::string events;
    raw_string_ostream eventsOut(events);
    for (const TruthEvent &event : thread.events)
      eventsOut << event.index << ' ' << truthEventName(event.kind) << ' '
                << format("0x%" PRIx64, event.from) << ' '
                << format("0x%" PRIx64, event.to) << '\n';
    if (Error err = writeFile(base + ".events", events))
      return err;
    std::string lost;
    raw_string_ostream lostOut(lost);
    for (auto [first, count] : thread.lost)
      lostOut << first << ' ' << count << '\n';
    if (Error err = writeFile(base + ".lost", lost))
      return err;
  }
  return Error::success();
}

Expected<std::vector<uint64_t>> readTruthInsns(StringRef path) {
  auto buffer = MemoryBuffer::getFile(path);
  if (!buffer)
    return createStringError(buffer.getError(), "cannot read %s: %s",
                             path.str().c_str(),
                             buffer.getError().message().c_str());
  StringRef bytes = (*buffer)->getBuffer();
  if (bytes.size() % 8)
    return createStringError(inconvertibleErrorCode(),
                             "%s: size %zu is not a multiple of 8 (the file "
                             "is truncated)",
                             path.str().c_str(), bytes.size());
  std::vector<uint64_t> insns(bytes.size() / 8);
  for (size_t i = 0; i < insns.size(); ++i)
    insns[i] = support::endian::read64le(bytes.data() + i * 8);
  return insns;
}

} // namespace magic_trace
