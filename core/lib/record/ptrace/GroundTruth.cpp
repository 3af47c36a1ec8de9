//===- GroundTruth.cpp - What the emulated thread really executed ---------===//
#include "magic_trace/GroundTruth.h"
#include "magic_trace/PrivateFiles.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <charconv>

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

void appendTruthEvent(std::string &out, const TruthEvent &event) {
  // By hand: llvm::format's snprintf made writing a busy thread's events
  // (tens of millions of lines) take most of a minute.
  char text[96];
  char *at = text, *end = text + sizeof(text);
  at = std::to_chars(at, end, event.index).ptr;
  *at++ = ' ';
  StringRef name = truthEventName(event.kind);
  at = std::copy(name.begin(), name.end(), at);
  for (uint64_t address : {event.from, event.to}) {
    *at++ = ' ';
    *at++ = '0';
    *at++ = 'x';
    at = std::to_chars(at, end, address, 16).ptr;
  }
  *at++ = '\n';
  out.append(text, at);
}

Error writeGroundTruth(const std::vector<ThreadTruth> &threads, StringRef dir) {
  SmallString<256> truthDir(dir);
  sys::path::append(truthDir, "groundtruth");
  if (std::error_code ec = createOutputDirectories(truthDir))
    return createStringError(ec, "cannot create %s: %s (check permissions)",
                             truthDir.c_str(), ec.message().c_str());
  for (const ThreadTruth &thread : threads) {
    std::string base = (truthDir + "/" + Twine(thread.tid)).str();
    std::string insns;
    insns.resize(thread.insns.size() * 8);
    for (size_t i = 0; i < thread.insns.size(); ++i)
      support::endian::write64le(&insns[i * 8], thread.insns[i]);
    if (Error err = writeOutputFile(base + ".insns", insns))
      return err;
    std::string events;
    events.reserve(thread.events.size() * 40);
    for (const TruthEvent &event : thread.events)
      appendTruthEvent(events, event);
    if (Error err = writeOutputFile(base + ".events", events))
      return err;
    std::string lost;
    raw_string_ostream lostOut(lost);
    for (auto [first, count] : thread.lost)
      lostOut << first << ' ' << count << '\n';
    if (Error err = writeOutputFile(base + ".lost", lost))
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

static Expected<TruthEventKind> eventKind(StringRef name) {
  for (TruthEventKind kind :
       {TruthEventKind::Call, TruthEventKind::Return, TruthEventKind::Jump,
        TruthEventKind::Syscall, TruthEventKind::Interrupt,
        TruthEventKind::Enable, TruthEventKind::Disable})
    if (truthEventName(kind) == name)
      return kind;
  return createStringError(inconvertibleErrorCode(), "unknown event '%s'",
                           name.str().c_str());
}

/// Each line of `path` split at spaces, `fields` of them; a missing file is
/// empty when `optional`.
static Expected<std::vector<SmallVector<StringRef, 4>>>
readLines(StringRef path, size_t fields, bool optional,
          std::unique_ptr<MemoryBuffer> &storage) {
  auto buffer = MemoryBuffer::getFile(path);
  if (!buffer && optional &&
      buffer.getError() == std::errc::no_such_file_or_directory)
    return std::vector<SmallVector<StringRef, 4>>();
  if (!buffer)
    return createStringError(buffer.getError(), "cannot read %s: %s",
                             path.str().c_str(),
                             buffer.getError().message().c_str());
  storage = std::move(*buffer);
  std::vector<SmallVector<StringRef, 4>> lines;
  SmallVector<StringRef> rows;
  storage->getBuffer().split(rows, '\n', -1, false);
  for (StringRef row : rows) {
    SmallVector<StringRef, 4> parts;
    row.split(parts, ' ', -1, false);
    if (parts.size() != fields)
      return createStringError(inconvertibleErrorCode(),
                               "%s: malformed line '%s' (expected %zu fields)",
                               path.str().c_str(), row.str().c_str(), fields);
    lines.push_back(std::move(parts));
  }
  return lines;
}

Expected<ThreadTruth> readGroundTruth(StringRef dir, uint64_t tid) {
  std::string base = (dir + "/groundtruth/" + Twine(tid)).str();
  ThreadTruth truth;
  truth.tid = tid;
  Expected<std::vector<uint64_t>> insns = readTruthInsns(base + ".insns");
  if (!insns)
    return insns.takeError();
  truth.insns = std::move(*insns);

  std::unique_ptr<MemoryBuffer> storage;
  auto events = readLines(base + ".events", 4, false, storage);
  if (!events)
    return events.takeError();
  for (const auto &parts : *events) {
    TruthEvent event;
    Expected<TruthEventKind> kind = eventKind(parts[1]);
    if (!kind)
      return kind.takeError();
    event.kind = *kind;
    if (parts[0].getAsInteger(10, event.index) ||
        parts[2].getAsInteger(0, event.from) ||
        parts[3].getAsInteger(0, event.to))
      return createStringError(inconvertibleErrorCode(),
                               "%s.events: malformed numbers in '%s %s %s'",
                               base.c_str(), parts[0].str().c_str(),
                               parts[2].str().c_str(), parts[3].str().c_str());
    truth.events.push_back(event);
  }

  auto lost = readLines(base + ".lost", 2, true, storage);
  if (!lost)
    return lost.takeError();
  for (const auto &parts : *lost) {
    uint64_t first, count;
    if (parts[0].getAsInteger(10, first) || parts[1].getAsInteger(10, count))
      return createStringError(inconvertibleErrorCode(),
                               "%s.lost: malformed line '%s %s'", base.c_str(),
                               parts[0].str().c_str(), parts[1].str().c_str());
    truth.lost.emplace_back(first, count);
  }
  return truth;
}

std::vector<ThreadTruth> readGroundTruthOf(llvm::StringRef dir,
                                           const std::vector<uint64_t> &tids) {
  std::vector<ThreadTruth> truths;
  for (uint64_t tid : tids) {
    llvm::SmallString<256> insns(dir);
    llvm::sys::path::append(insns, "groundtruth",
                            std::to_string(tid) + ".insns");
    if (!llvm::sys::fs::exists(insns))
      continue;
    llvm::Expected<ThreadTruth> truth = readGroundTruth(dir, tid);
    if (!truth) {
      llvm::consumeError(truth.takeError());
      continue;
    }
    truths.push_back(std::move(*truth));
  }
  return truths;
}

} // namespace magic_trace
