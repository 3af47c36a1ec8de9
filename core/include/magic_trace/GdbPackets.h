//===- GdbPackets.h - Framing GDB's remote protocol ------------*- C++ -*-===//
//
// The QEMU recorder relays GDB's connection to QEMU's gdbstub
// (plugin/qemu/QemuDebugger.cpp, docs/qemu.md "GDB's all-stop") so that it
// can hold the program's other threads while GDB has it stopped. It needs
// to see two things in the byte streams: a stop reply from the stub, and a
// packet from GDB that resumes the program. This is the framing
// ("$data#cs", acknowledgements and the interrupt byte pass as they are)
// and those two readings, per GDB's manual, "Remote Protocol": "Packets",
// "Stop Reply Packets" and the resume packets of "Packets" and "vCont".
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_GDBPACKETS_H
#define MAGIC_TRACE_GDBPACKETS_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace magic_trace {

/// A piece of one direction's byte stream: either a whole packet ("$" to
/// the two checksum digits) or the bytes between packets (acknowledgements,
/// GDB's interrupt byte).
struct GdbStreamPiece {
  bool isPacket = false;
  std::string bytes;
  /// The packet's data, between "$" and "#" (empty for other bytes).
  llvm::StringRef data() const;
};

/// Splits one direction's stream into pieces as bytes arrive; a packet
/// split across reads is held until its checksum has come. Inside a
/// packet, '#' cannot occur unescaped (binary data escapes it with '}'),
/// so the first '#' ends the data.
class GdbStreamSplitter {
public:
  /// Appends the pieces `bytes` completes to `pieces`.
  void feed(llvm::StringRef bytes, std::vector<GdbStreamPiece> &pieces);
  /// Whether a packet has begun and not ended.
  bool inPacket() const { return state != State::Between; }

private:
  enum class State { Between, Data, Checksum1, Checksum2 };
  State state = State::Between;
  std::string packet;
};

/// What a packet from the stub says about the program.
struct StubReply {
  enum Kind {
    Other,   ///< An answer to a query.
    Stopped, ///< A stop reply: "T" or "S" and a signal number.
    Exited,  ///< "W" or "X" and a status: the process is gone.
  };
  Kind kind = Other;
  /// For a stop reply, the host thread id of its "thread:" field
  /// ("pPID.TID" or "TID", in hex); 0 when it has none.
  uint64_t thread = 0;
};

/// Reads a packet's data from the stub.
StubReply readStubReply(llvm::StringRef data);

/// Whether a packet's data from GDB lets the program run or ends the
/// session: continue and step ("c", "C", "s", "S", "vCont;..."), detach
/// ("D") and kill ("k", "vKill"). "vCont?" only asks.
bool resumesProgram(llvm::StringRef data);

} // namespace magic_trace

#endif
