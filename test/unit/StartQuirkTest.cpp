//===- StartQuirkTest.cpp - Padding out PGE/PGD pairs in which nothing ran ===//
//
// Streams built byte by byte from the SDM's packet layouts (vol. 3C, "Packet
// Definitions"): only TIP.PGE X, IP-less TIP.PGD, TIP.PGE X with status
// packets between is padded out; anything that could mean an instruction
// ran keeps the pair.
//
//===----------------------------------------------------------------------===//
#include "../../core/lib/decode/StartQuirk.h"

#include <gtest/gtest.h>

using namespace magic_trace::decode_detail;

namespace {

using Bytes = std::vector<uint8_t>;

const Bytes kPsb = {0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                    0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82};
const Bytes kPsbEnd = {0x02, 0x23};
/// TIP.PGE, 6-byte sign-extended IP 0x401000.
const Bytes kPgeA = {0x71, 0x00, 0x10, 0x40, 0x00, 0x00, 0x00};
const Bytes kPgeB = {0x71, 0x00, 0x20, 0x40, 0x00, 0x00, 0x00};
const Bytes kPgdNoIp = {0x01};
const Bytes kModeExec64 = {0x99, 0x01};
const Bytes kCbr = {0x02, 0x03, 0x21, 0x00};
const Bytes kTntTaken = {0x06}; // Short TNT, one bit: taken.

Bytes join(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes &part : parts)
    out.insert(out.end(), part.begin(), part.end());
  return out;
}

TEST(StartQuirk, PadsAPairInWhichNothingRan) {
  Bytes stream = join({kPsb, kPsbEnd, kModeExec64, kPgeA, kPgdNoIp, kCbr,
                       kModeExec64, kPgeA, kTntTaken});
  unsigned pairs = 0;
  Bytes padded = padEmptyEnablePairs(stream, 0, &pairs);
  EXPECT_EQ(pairs, 1u);
  Bytes want = join({kPsb, kPsbEnd, kModeExec64, Bytes(kPgeA.size(), 0),
                     Bytes(1, 0), kCbr, kModeExec64, kPgeA, kTntTaken});
  EXPECT_EQ(padded, want);
}

TEST(StartQuirk, KeepsPairsThatMayHaveRunCode) {
  // A TNT between PGE and PGD: a branch ran.
  EXPECT_TRUE(padEmptyEnablePairs(
                  join({kPsb, kPsbEnd, kPgeA, kTntTaken, kPgdNoIp, kPgeA}))
                  .empty());
  // Tracing resumes elsewhere: the disable bound to some branch.
  EXPECT_TRUE(padEmptyEnablePairs(join({kPsb, kPsbEnd, kPgeA, kPgdNoIp, kPgeB}))
                  .empty());
  // A PGD with an IP says where tracing stopped.
  Bytes pgdWithIp = {0x21, 0x00, 0x10}; // TIP.PGD, 2-byte update.
  EXPECT_TRUE(
      padEmptyEnablePairs(join({kPsb, kPsbEnd, kPgeA, pgdWithIp, kPgeA}))
          .empty());
  // No pair at all.
  EXPECT_TRUE(padEmptyEnablePairs(join({kPsb, kPsbEnd, kPgeA})).empty());
}

} // namespace
