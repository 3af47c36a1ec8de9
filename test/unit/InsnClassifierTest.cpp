// Unit tests for the x86-64 instruction classifier: one hand-assembled
// encoding per class (opcodes from the Intel SDM, volume 2), then every
// instruction of libc's .text decoded linearly.
#include "magic_trace/InsnClassifier.h"

#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <vector>

using namespace magic_trace;

namespace {

class InsnClassifierTest : public ::testing::Test {
protected:
  void SetUp() override {
    auto created = InsnClassifier::create();
    ASSERT_TRUE(bool(created)) << llvm::toString(created.takeError());
    classifier = std::move(*created);
  }

  /// Classifies `bytes` at `ip`, failing the test on a decode error.
  ClassifiedInsn classify(std::vector<uint8_t> bytes, uint64_t ip = 0x401000) {
    auto result = classifier->classify(bytes, ip);
    EXPECT_TRUE(bool(result)) << llvm::toString(result.takeError());
    return result ? *result : ClassifiedInsn();
  }

  void expectClass(std::vector<uint8_t> bytes, BranchClass branch,
                   const char *what) {
    ClassifiedInsn insn = classify(bytes);
    EXPECT_EQ(insn.branch, branch) << what;
    EXPECT_EQ(insn.size, bytes.size()) << what;
  }

  std::unique_ptr<InsnClassifier> classifier;
};

TEST_F(InsnClassifierTest, PlainInstructionsFallThrough) {
  expectClass({0x90}, BranchClass::Other, "nop");
  expectClass({0xf3, 0x0f, 0x1e, 0xfa}, BranchClass::Other, "endbr64");
  expectClass({0xf3, 0xa4}, BranchClass::Other, "rep movsb");
  expectClass({0xf3, 0x48, 0xab}, BranchClass::Other, "rep stosq");
  expectClass({0x48, 0x89, 0xe5}, BranchClass::Other, "mov rbp, rsp");
  // EVEX.512.66.0F38.W0 26 /r: vptestnmb k4{k1}, zmm1, zmm1.
  expectClass({0x62, 0xf2, 0x76, 0x49, 0x26, 0xe1}, BranchClass::Other,
              "vptestnmb");
  // VEX.L0.F2.0F.W0 93 /r: kmovd eax, k0.
  expectClass({0xc5, 0xfb, 0x93, 0xc0}, BranchClass::Other, "kmovd");
  // xbegin is not a branch for PT unless the transaction aborts.
  expectClass({0x0f, 0x01, 0xd5}, BranchClass::Other, "xend");
}

TEST_F(InsnClassifierTest, ConditionalBranchesHaveTargets) {
  ClassifiedInsn jz = classify({0x74, 0x05}, 0x1000);
  EXPECT_EQ(jz.branch, BranchClass::CondBranch);
  EXPECT_EQ(jz.directTarget, 0x1007u);
  ClassifiedInsn jneNear =
      classify({0x0f, 0x85, 0x00, 0x01, 0x00, 0x00}, 0x1000);
  EXPECT_EQ(jneNear.branch, BranchClass::CondBranch);
  EXPECT_EQ(jneNear.directTarget, 0x1106u);
  ClassifiedInsn backwards = classify({0x7c, 0xfe}, 0x2000); // jl $
  EXPECT_EQ(backwards.directTarget, 0x2000u);
  ClassifiedInsn jrcxz = classify({0xe3, 0x10}, 0x1000);
  EXPECT_EQ(jrcxz.branch, BranchClass::CondBranch);
  EXPECT_EQ(jrcxz.directTarget, 0x1012u);
  expectClass({0x67, 0xe3, 0x10}, BranchClass::CondBranch, "jecxz");
  expectClass({0xe2, 0xfe}, BranchClass::CondBranch, "loop");
  expectClass({0xe1, 0xfe}, BranchClass::CondBranch, "loope");
  expectClass({0xe0, 0xfe}, BranchClass::CondBranch, "loopne");
}

TEST_F(InsnClassifierTest, DirectJumpsAndCalls) {
  ClassifiedInsn jmp8 = classify({0xeb, 0xfe}, 0x1000);
  EXPECT_EQ(jmp8.branch, BranchClass::DirectJump);
  EXPECT_EQ(jmp8.directTarget, 0x1000u);
  ClassifiedInsn jmp32 = classify({0xe9, 0xfb, 0xff, 0xff, 0xff}, 0x1000);
  EXPECT_EQ(jmp32.branch, BranchClass::DirectJump);
  EXPECT_EQ(jmp32.directTarget, 0x1000u);
  ClassifiedInsn call = classify({0xe8, 0x00, 0x00, 0x00, 0x00}, 0x1000);
  EXPECT_EQ(call.branch, BranchClass::DirectCall);
  EXPECT_EQ(call.directTarget, 0x1005u);
  ClassifiedInsn bndJmp =
      classify({0xf2, 0xe9, 0x00, 0x10, 0x00, 0x00}, 0x1000);
  EXPECT_EQ(bndJmp.branch, BranchClass::DirectJump);
  EXPECT_EQ(bndJmp.directTarget, 0x2006u);
}

TEST_F(InsnClassifierTest, IndirectJumpsAndCalls) {
  expectClass({0xff, 0xd0}, BranchClass::IndirectCall, "call rax");
  expectClass({0x41, 0xff, 0xd3}, BranchClass::IndirectCall, "call r11");
  expectClass({0xff, 0x15, 0x10, 0x00, 0x00, 0x00}, BranchClass::IndirectCall,
              "call [rip+0x10]");
  expectClass({0xff, 0xe0}, BranchClass::IndirectJump, "jmp rax");
  expectClass({0x3e, 0xff, 0xe0}, BranchClass::IndirectJump, "notrack jmp rax");
  expectClass({0xff, 0x24, 0xc5, 0x00, 0x10, 0x00, 0x00},
              BranchClass::IndirectJump, "jmp [rax*8+0x1000]");
  EXPECT_EQ(classify({0xff, 0xd0}).directTarget, 0u);
}

TEST_F(InsnClassifierTest, Returns) {
  expectClass({0xc3}, BranchClass::Return, "ret");
  expectClass({0xc2, 0x08, 0x00}, BranchClass::Return, "ret 8");
  expectClass({0xf2, 0xc3}, BranchClass::Return, "bnd ret");
  expectClass({0xf3, 0xc3}, BranchClass::Return, "rep ret");
}

TEST_F(InsnClassifierTest, SyscallsAndSoftwareInterrupts) {
  expectClass({0x0f, 0x05}, BranchClass::Syscall, "syscall");
  expectClass({0x0f, 0x34}, BranchClass::Syscall, "sysenter");
  expectClass({0xcd, 0x80}, BranchClass::Syscall, "int 0x80");
  expectClass({0xcc}, BranchClass::Syscall, "int3");
}

TEST_F(InsnClassifierTest, FarTransfers) {
  expectClass({0xff, 0x18}, BranchClass::FarTransfer, "call far [rax]");
  expectClass({0xff, 0x28}, BranchClass::FarTransfer, "jmp far [rax]");
  expectClass({0xcb}, BranchClass::FarTransfer, "retf");
  expectClass({0x48, 0xcb}, BranchClass::FarTransfer, "retfq");
  expectClass({0x48, 0xcf}, BranchClass::FarTransfer, "iretq");
  expectClass({0x0f, 0x0b}, BranchClass::FarTransfer, "ud2");
}

// The text report --annotate --insns prints. Expected: llvm-objdump-22 -d
// --no-show-raw-insn of the same bytes at address 0 (b.bin: 8d 04 37 e8 2b
// 01 00 00 f0 0f b1 0a 75 fa c3), which prints the lock prefix on a line
// of its own.
TEST_F(InsnClassifierTest, DisassemblesAsObjdump) {
  auto text = [&](std::vector<uint8_t> bytes, uint64_t ip) {
    auto result = classifier->disassemble(bytes, ip);
    EXPECT_TRUE(bool(result)) << llvm::toString(result.takeError());
    return result ? *result : std::string();
  };
  EXPECT_EQ(text({0x8d, 0x04, 0x37}, 0x0), "leal (%rdi,%rsi), %eax");
  EXPECT_EQ(text({0xe8, 0x2b, 0x01, 0x00, 0x00}, 0x3), "callq 0x133");
  EXPECT_EQ(text({0xf0, 0x0f, 0xb1, 0x0a}, 0x8), "lock cmpxchgl %ecx, (%rdx)");
  EXPECT_EQ(text({0x75, 0xfa}, 0xc), "jne 0x8");
  EXPECT_EQ(text({0xc3}, 0xe), "retq");
  // c.bin: 83 e2 f8 48 8d 35 1c 0e 00 00 (objdump adds "# 0xe26" after the
  // lea, a comment on where it points).
  EXPECT_EQ(text({0x83, 0xe2, 0xf8}, 0x0), "andl $-0x8, %edx");
  EXPECT_EQ(text({0x48, 0x8d, 0x35, 0x1c, 0x0e, 0x00, 0x00}, 0x3),
            "leaq 0xe1c(%rip), %rsi");
  EXPECT_FALSE(bool(classifier->disassemble({0x0f, 0xff}, 0x10)))
      << "ud0 without its operand is cut short";
}

TEST_F(InsnClassifierTest, BadBytesNameTheAddress) {
  auto truncated = classifier->classify({0xe8, 0x00}, 0x7f0012345678);
  ASSERT_FALSE(bool(truncated));
  std::string message = llvm::toString(truncated.takeError());
  EXPECT_NE(message.find("7f0012345678"), std::string::npos) << message;
  // 0x06 (push es) is invalid in 64-bit mode.
  auto invalid = classifier->classify({0x06}, 0x1000);
  EXPECT_FALSE(bool(invalid));
  llvm::consumeError(invalid.takeError());
  auto empty = classifier->classify({}, 0x1000);
  EXPECT_FALSE(bool(empty));
  llvm::consumeError(empty.takeError());
}

/// Every instruction of libc's .text, decoded linearly from its start: glibc
/// keeps no data in .text, so a linear sweep stays in sync. This is where
/// AVX-512, CET and the string functions' odd encodings live.
TEST_F(InsnClassifierTest, ClassifiesAllOfLibcText) {
  const char *libc = "/lib/x86_64-linux-gnu/libc.so.6";
  if (!llvm::sys::fs::exists(libc))
    GTEST_SKIP() << "no " << libc;
  auto binary = llvm::object::ObjectFile::createObjectFile(libc);
  ASSERT_TRUE(bool(binary)) << llvm::toString(binary.takeError());
  const llvm::object::ObjectFile &object = *binary->getBinary();
  uint64_t decoded = 0, branches = 0, failures = 0;
  bool sawText = false;
  for (const llvm::object::SectionRef &section : object.sections()) {
    auto name = section.getName();
    if (!name || *name != ".text")
      continue;
    sawText = true;
    auto contents = section.getContents();
    ASSERT_TRUE(bool(contents));
    llvm::ArrayRef<uint8_t> text = llvm::arrayRefFromStringRef(*contents);
    uint64_t address = section.getAddress();
    for (uint64_t offset = 0; offset < text.size();) {
      auto insn =
          classifier->classify(text.drop_front(offset), address + offset);
      if (!insn) {
        if (++failures <= 5)
          ADD_FAILURE() << llvm::toString(insn.takeError());
        else
          llvm::consumeError(insn.takeError());
        offset += 1;
        continue;
      }
      ++decoded;
      branches += insn->branch != BranchClass::Other;
      EXPECT_NE(insn->branch, BranchClass::Unknown);
      offset += insn->size;
    }
  }
  ASSERT_TRUE(sawText);
  EXPECT_EQ(failures, 0u);
  EXPECT_GT(decoded, 100000u);
  EXPECT_GT(branches, decoded / 20);
}

} // namespace
