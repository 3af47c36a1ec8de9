//===- GdbPackets.cpp - Framing GDB's remote protocol ---------------------===//
//
// GdbPackets.h: the relay's view of GDB's remote protocol.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/GdbPackets.h"

#include "llvm/ADT/StringExtras.h"

namespace magic_trace {

llvm::StringRef GdbStreamPiece::data() const {
  if (!isPacket || bytes.size() < 4)
    return {};
  return llvm::StringRef(bytes).drop_front(1).drop_back(3);
}

void GdbStreamSplitter::feed(llvm::StringRef bytes,
                             std::vector<GdbStreamPiece> &pieces) {
  // Bytes between packets join the last piece when it is also between.
  auto between = [&](char byte) {
    if (pieces.empty() || pieces.back().isPacket)
      pieces.push_back({false, {}});
    pieces.back().bytes += byte;
  };
  for (char byte : bytes) {
    switch (state) {
    case State::Between:
      if (byte != '$') {
        between(byte);
        continue;
      }
      packet.assign(1, byte);
      state = State::Data;
      continue;
    case State::Data:
      packet += byte;
      if (byte == '#')
        state = State::Checksum1;
      continue;
    case State::Checksum1:
      packet += byte;
      state = State::Checksum2;
      continue;
    case State::Checksum2:
      packet += byte;
      pieces.push_back({true, std::move(packet)});
      packet.clear();
      state = State::Between;
      continue;
    }
  }
}

/// Whether `data` begins with `letter` and two hex digits (a signal number
/// or an exit status).
static bool letterAndHexByte(llvm::StringRef data, char letter) {
  return data.size() >= 3 && data[0] == letter && llvm::isHexDigit(data[1]) &&
         llvm::isHexDigit(data[2]);
}

StubReply readStubReply(llvm::StringRef data) {
  if (letterAndHexByte(data, 'W') || letterAndHexByte(data, 'X'))
    return {StubReply::Exited, 0};
  if (letterAndHexByte(data, 'S'))
    return {StubReply::Stopped, 0};
  if (!letterAndHexByte(data, 'T'))
    return {StubReply::Other, 0};
  StubReply reply{StubReply::Stopped, 0};
  // "Tss" then "n:r;" pairs, one of them "thread:[pPID.]TID".
  llvm::StringRef fields = data.drop_front(3);
  while (!fields.empty()) {
    auto [field, rest] = fields.split(';');
    fields = rest;
    auto [name, value] = field.split(':');
    if (name != "thread")
      continue;
    if (value.consume_front("p"))
      value = value.split('.').second;
    uint64_t tid = 0;
    if (!value.getAsInteger(16, tid))
      reply.thread = tid;
  }
  return reply;
}

bool resumesProgram(llvm::StringRef data) {
  if (data.empty())
    return false;
  if (data.starts_with("vCont"))
    return data.starts_with("vCont;");
  if (data.starts_with("vKill"))
    return true;
  switch (data[0]) {
  case 'c':
  case 'C':
  case 's':
  case 'S':
  case 'D':
  case 'k':
    return true;
  default:
    return false;
  }
}

} // namespace magic_trace
