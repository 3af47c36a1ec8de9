//===- GdbPacketsTest.cpp - The relay's reading of GDB's protocol ---------===//
//
// The packets are GDB's manual's ("Remote Protocol") and what QEMU 7.2's
// gdbstub sent in a GDB session's debug log (set debug remote 1): a stop
// reply "T05thread:p7cd9.7cdd;", GDB's step over a breakpoint
// "vCont;s:p1.7cdd", its acknowledgements between packets.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/GdbPackets.h"

#include <gtest/gtest.h>

using namespace magic_trace;

namespace {

std::vector<GdbStreamPiece> split(GdbStreamSplitter &splitter,
                                  llvm::StringRef bytes) {
  std::vector<GdbStreamPiece> pieces;
  splitter.feed(bytes, pieces);
  return pieces;
}

TEST(GdbPackets, SplitsPacketsFromAcknowledgements) {
  GdbStreamSplitter splitter;
  auto pieces = split(splitter, "+$m4002839ae8,8#39+$g#67");
  ASSERT_EQ(pieces.size(), 4u);
  EXPECT_FALSE(pieces[0].isPacket);
  EXPECT_EQ(pieces[0].bytes, "+");
  EXPECT_TRUE(pieces[1].isPacket);
  EXPECT_EQ(pieces[1].data(), "m4002839ae8,8");
  EXPECT_EQ(pieces[1].bytes, "$m4002839ae8,8#39");
  EXPECT_EQ(pieces[2].bytes, "+");
  EXPECT_EQ(pieces[3].data(), "g");
  EXPECT_EQ(pieces[3].bytes, "$g#67");
  EXPECT_FALSE(splitter.inPacket());
  // GDB's interrupt byte after the last packet: kept, in order.
  auto interrupt = split(splitter, "\x03");
  ASSERT_EQ(interrupt.size(), 1u);
  EXPECT_EQ(interrupt[0].bytes, "\x03");
}

TEST(GdbPackets, HoldsAPacketSplitAcrossReads) {
  GdbStreamSplitter splitter;
  EXPECT_TRUE(split(splitter, "$T05thread:p7cd9.7").empty());
  EXPECT_TRUE(splitter.inPacket());
  EXPECT_TRUE(split(splitter, "cdd;#").empty());
  EXPECT_TRUE(split(splitter, "a").empty());
  auto pieces = split(splitter, "1+");
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].bytes, "$T05thread:p7cd9.7cdd;#a1");
  EXPECT_EQ(pieces[0].data(), "T05thread:p7cd9.7cdd;");
  EXPECT_EQ(pieces[1].bytes, "+");
}

TEST(GdbPackets, EscapedBinaryDataDoesNotEndAPacket) {
  // "X" writes binary data; '#' is sent as '}' then '#' ^ 0x20 ('\x03').
  GdbStreamSplitter splitter;
  auto pieces = split(splitter, "$X4000,2:}\x03}]#5e");
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].data(), "X4000,2:}\x03}]");
}

TEST(GdbPackets, ReadsStopRepliesAndTheirThread) {
  auto stopped = [](llvm::StringRef data, uint64_t thread) {
    StubReply reply = readStubReply(data);
    return reply.kind == StubReply::Stopped && reply.thread == thread;
  };
  EXPECT_TRUE(stopped("T05thread:p7cd9.7cdd;", 0x7cdd));
  EXPECT_TRUE(stopped("T0bthread:1a2b;", 0x1a2b));
  EXPECT_TRUE(stopped("T0506:0000000000000000;thread:p1.2;", 2));
  EXPECT_TRUE(stopped("S05", 0));
  EXPECT_EQ(readStubReply("W00").kind, StubReply::Exited);
  EXPECT_EQ(readStubReply("X09;process:7cd9").kind, StubReply::Exited);
}

TEST(GdbPackets, AnswersToQueriesAreNotStops) {
  // Register and memory contents are lower-case hex; these begin with the
  // stop letters but not with two hex digits after them.
  for (llvm::StringRef answer :
       {"OK", "E01", "", "Text=0;Data=0", "T0;tnotrun:0", "l", "mp1.7cdd",
        "QCp1.7cdd", "PacketSize=1000;qXfer:features:read+", "vCont;c;C;s;S",
        "0000000000000000"})
    EXPECT_EQ(readStubReply(answer).kind, StubReply::Other) << answer.str();
}

TEST(GdbPackets, ResumePacketsFromGdb) {
  for (llvm::StringRef resume :
       {"c", "c4000001260", "C05", "s", "S05", "vCont;c", "vCont;s:p1.7cdd",
        "vCont;s:p1.7cdd;c", "D", "D;7cd9", "k", "vKill;7cd9"})
    EXPECT_TRUE(resumesProgram(resume)) << resume.str();
  for (llvm::StringRef query :
       {"", "vCont?", "?", "g", "m4000001260,1", "Z0,4000001260,1",
        "z0,4000001260,1", "qSupported:multiprocess+", "Hgp1.7cdd", "T7cdd",
        "QStartNoAckMode", "qfThreadInfo", "vMustReplyEmpty"})
    EXPECT_FALSE(resumesProgram(query)) << query.str();
}

} // namespace
