//===- RefTree.cpp - The reference call tree from emulator ground truth ---===//

#include "RefTree.h"
#include "RefCode.h"
#include "RefFunctionBounds.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Demangle/Demangle.h"
#include "llvm/MC/MCInstrAnalysis.h"
#include "llvm/MC/MCInstrInfo.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Object/BuildID.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/TargetSelect.h"

#include <algorithm>
#include <cstdlib>
#include <map>

using namespace llvm;
using namespace magic_trace;
using namespace magic_trace::reftree;

namespace {

/// The longest x86 instruction: a return goes to its call plus at most this.
constexpr uint64_t MaxInsnLength = 15;

/// Did every instruction of [first, end) run inside one injected loss (a
/// frame no decoder could see)? A frame with no instruction is visible.
bool withinLoss(const std::vector<std::pair<uint64_t, uint64_t>> &lost,
                uint64_t first, uint64_t end) {
  if (end <= first)
    return false;
  for (const auto &[begin, count] : lost)
    if (first >= begin && end <= begin + count)
      return true;
  return false;
}

/// Builds the reference tree instruction by instruction. A frame is pushed
/// by a call and popped when execution comes back to its call's next
/// instruction; the other rules (tail calls, unwinding, returns into frames
/// the trace never saw) say what the tree of a trace means and so are the
/// same as the model's, applied here to exact addresses.
class ReferenceBuilder {
public:
  ReferenceBuilder(const RefSymbols &symbols, const RefCode *code)
      : symbols(symbols), code(code) {}

  std::vector<TreeFrame> build(const ThreadTruth &truth,
                               const TimeConversion &time, uint64_t startTsc);

private:
  struct Node {
    RefFunction function;
    uint64_t begin = 0, end = 0;
    uint32_t parent = UINT32_MAX;
    uint64_t callSite = 0; ///< Address of the call that pushed it, or 0.
    /// Entered by a jump: the begin of the function it replaced, or 0.
    uint64_t replacedBegin = 0;
    bool atStop = false;
    /// Instructions [firstInsn, endInsn) ran in it or its callees.
    uint64_t firstInsn = 0, endInsn = 0;
  };

  void push(const RefFunction &function, uint64_t time, uint64_t callSite) {
    Node node;
    node.function = function;
    node.begin = node.end = time;
    node.callSite = callSite;
    node.firstInsn = node.endInsn = index;
    node.parent = stack.empty() ? UINT32_MAX : stack.back();
    if (node.parent == UINT32_MAX)
      roots.push_back(uint32_t(nodes.size()));
    stack.push_back(uint32_t(nodes.size()));
    nodes.push_back(node);
  }
  void popTo(size_t depth, uint64_t time) {
    while (stack.size() > depth) {
      nodes[stack.back()].end = time;
      nodes[stack.back()].endInsn = index;
      stack.pop_back();
    }
  }
  /// A tail call, or a jump into another function not on the stack: the
  /// new frame replaces the top one and returns where it would have, so it
  /// keeps its call site (with 0, a return from a tail-called frame of a
  /// recursion matched an outer activation's call site and popped it too:
  /// python3's compiler, issue 15's corpus).
  void replaceTop(const RefFunction &function, uint64_t time) {
    uint64_t callSite = nodes[stack.back()].callSite;
    uint64_t replaced = nodes[stack.back()].function.unknown
                            ? 0
                            : nodes[stack.back()].function.begin;
    popTo(stack.size() - 1, time);
    push(function, time, callSite);
    nodes.back().replacedBegin = replaced;
  }
  static bool same(const RefFunction &a, const RefFunction &b) {
    return a.begin == b.begin && a.unknown == b.unknown;
  }
  /// Nearest stack index below the top running `function`, or SIZE_MAX.
  size_t onStack(const RefFunction &function) const {
    for (size_t i = stack.size() - 1; i-- > 0;)
      if (same(nodes[stack[i]].function, function))
        return i;
    return SIZE_MAX;
  }
  void inferParent(const RefFunction &function, uint64_t time) {
    popTo(0, time);
    std::vector<uint32_t> old;
    old.swap(roots);
    push(function, start, 0);
    for (uint32_t root : old)
      nodes[root].parent = stack.back();
  }
  void onReturn(uint64_t target, const RefFunction &function, uint64_t time);
  void onJump(uint64_t target, const RefFunction &function, uint64_t time,
              uint64_t jumpFrom);
  void onResume(const RefFunction &function, uint64_t time);

  const RefSymbols &symbols;
  const RefCode *code;
  std::vector<Node> nodes;
  uint64_t index = 0; ///< The instruction being handled.
  std::vector<uint32_t> stack, roots;
  uint64_t start = 0;
};

void ReferenceBuilder::onReturn(uint64_t target, const RefFunction &function,
                                uint64_t time) {
  // The frame whose call instruction ends right before the target: the
  // return address it pushed. Its caller's symbol may differ from the
  // target's when the call was its last instruction and another symbol
  // starts after it (ld.so's _start calls _dl_start, which returns into
  // _dl_start_user): still the caller's frame.
  for (size_t i = stack.size(); i-- > 0;) {
    uint64_t site = nodes[stack[i]].callSite;
    if (site != 0 && site < target && target - site <= MaxInsnLength && i > 0 &&
        (same(nodes[stack[i - 1]].function, function) ||
         (!function.unknown && function.begin > site &&
          function.begin <= target))) {
      popTo(i, time);
      return;
    }
  }
  size_t frame = onStack(function);
  if (frame != SIZE_MAX) {
    popTo(frame + 1, time);
    return;
  }
  inferParent(function, time);
}

void ReferenceBuilder::onJump(uint64_t target, const RefFunction &function,
                              uint64_t time, uint64_t jumpFrom) {
  if (same(nodes[stack.back()].function, function))
    return;
  if (!function.unknown && target == function.begin) {
    replaceTop(function, time); // Tail call.
    return;
  }
  size_t frame = onStack(function);
  if (frame != SIZE_MAX) {
    popTo(frame + 1, time);
    return;
  }
  // An indirect jump into the middle of a function not on the stack (the
  // unwinder's to a landing pad, longjmp's) goes to a caller from before the
  // trace, unless it goes back into the function the frame replaced (a cold
  // part's into its hot part): the same rule as the model's, with the
  // jump's kind read from the module by LLVM's disassembler.
  if (!function.unknown && jumpFrom && code &&
      function.begin != nodes[stack.back()].replacedBegin &&
      code->isIndirectJump(jumpFrom)) {
    inferParent(function, time);
    return;
  }
  replaceTop(function, time);
}

void ReferenceBuilder::onResume(const RefFunction &function, uint64_t time) {
  if (same(nodes[stack.back()].function, function))
    return;
  size_t frame = onStack(function);
  if (frame != SIZE_MAX) {
    popTo(frame + 1, time);
    return;
  }
  push(function, time, 0);
}

std::vector<TreeFrame> ReferenceBuilder::build(const ThreadTruth &truth,
                                               const TimeConversion &time,
                                               uint64_t startTsc) {
  auto at = [&](uint64_t index) { return time.tscToNs(startTsc + index); };
  const std::vector<uint64_t> &insns = truth.insns;
  if (insns.empty())
    return {};
  start = at(0);
  push(symbols.lookup(insns[0]), start, 0);
  // The transfer out of each instruction, and where tracing resumed (after
  // a syscall or an interruption).
  std::vector<const TruthEvent *> transfer(insns.size(), nullptr);
  std::vector<bool> resumed(insns.size() + 1, false);
  for (const TruthEvent &e : truth.events) {
    if (e.index > insns.size())
      continue;
    if (e.kind == TruthEventKind::Enable || e.kind == TruthEventKind::Interrupt)
      resumed[e.index] = true;
    else if (e.kind != TruthEventKind::Disable && e.index < insns.size())
      transfer[e.index] = &e;
  }
  for (size_t i = 1; i < insns.size(); ++i) {
    index = i;
    uint64_t address = insns[i];
    uint64_t now = at(i);
    RefFunction function = symbols.lookup(address);
    const TruthEvent *from = transfer[i - 1];
    if (resumed[i]) {
      onResume(function, now);
      continue;
    }
    if (from && from->kind == TruthEventKind::Call) {
      push(function, now, insns[i - 1]);
      continue;
    }
    if (from && from->kind == TruthEventKind::Return) {
      onReturn(address, function, now);
      continue;
    }
    // A jump, a syscall coming back, or falling through into other code.
    onJump(address, function, now,
           from && from->kind == TruthEventKind::Jump ? insns[i - 1] : 0);
  }
  // The emulator's final disable records where the thread stopped (the
  // instruction it would execute next, which never ran). When the last
  // instruction was a call, or a jump to another function's entry (a tail
  // call), that function is on the stack at the stop: a breakpoint at a
  // function's entry is how a snapshot is usually triggered. Its frame is
  // opened there, zero-length at the end.
  uint64_t end = at(insns.size());
  index = insns.size();
  const TruthEvent *last = transfer.back();
  for (const TruthEvent &e : truth.events) {
    if (e.kind != TruthEventKind::Disable || e.index != insns.size() || !last ||
        e.to == 0)
      continue;
    RefFunction function = symbols.lookup(e.to);
    if (last->kind == TruthEventKind::Call) {
      push(function, end, insns.back());
      nodes.back().atStop = true;
    } else if (last->kind == TruthEventKind::Jump && !function.unknown &&
               e.to == function.begin &&
               !same(nodes[stack.back()].function, function)) {
      replaceTop(function, end); // Tail call.
      nodes.back().atStop = true;
    }
    break;
  }
  popTo(0, end);

  // Pre-order: children by creation (= by begin), from the roots.
  std::vector<std::vector<uint32_t>> children(nodes.size());
  std::vector<uint32_t> top;
  for (uint32_t i = 0; i < nodes.size(); ++i)
    (nodes[i].parent == UINT32_MAX ? top : children[nodes[i].parent])
        .push_back(i);
  std::vector<TreeFrame> out;
  std::vector<std::pair<uint32_t, unsigned>> work;
  for (auto it = top.rbegin(); it != top.rend(); ++it)
    work.push_back({*it, 0});
  while (!work.empty()) {
    auto [index, depth] = work.back();
    work.pop_back();
    const Node &node = nodes[index];
    out.push_back({node.function.unknown ? 0 : node.function.begin,
                   node.function.name, node.begin, node.end, depth,
                   node.function.aliases, node.atStop,
                   withinLoss(truth.lost, node.firstInsn, node.endInsn)});
    for (auto it = children[index].rbegin(); it != children[index].rend(); ++it)
      work.push_back({*it, depth + 1});
  }
  return out;
}

bool isCode(FrameKind kind) {
  return kind == FrameKind::Physical || kind == FrameKind::Unknown;
}

} // namespace

std::vector<TreeFrame> reftree::referenceTree(const ThreadTruth &truth,
                                              const RefSymbols &symbols,
                                              const TimeConversion &time,
                                              uint64_t startTsc,
                                              const RefCode *code) {
  return ReferenceBuilder(symbols, code).build(truth, time, startTsc);
}

std::vector<TreeFrame> reftree::modelTree(const ThreadModel &model,
                                          const StringTable &strings,
                                          bool mergeStitched) {
  std::vector<TreeFrame> out;
  // Output indices of the code frames open at the previous segment's end,
  // outermost first: what a stitched successor's first frames continue.
  std::vector<size_t> openChain;
  for (const Segment &segment : model.segments) {
    // Code frames among each frame's ancestors and itself.
    std::vector<unsigned> codeDepth(segment.frames.size(), 0);
    bool merging = mergeStitched && segment.stitchedToPrevious;
    size_t chainPosition = 0;
    std::vector<size_t> nextChain;
    for (size_t i = 0; i < segment.frames.size(); ++i) {
      const Frame &frame = segment.frames[i];
      const FrameSite &site = model.sites[frame.site];
      unsigned above =
          frame.parent == Frame::NoParent ? 0 : codeDepth[frame.parent];
      bool code = isCode(site.kind);
      codeDepth[i] = above + (code ? 1 : 0);
      if (!code)
        continue;
      size_t index;
      if (merging && frame.inferred && frame.begin == segment.begin &&
          i < segment.continuedFrames && chainPosition < openChain.size() &&
          above == chainPosition) {
        index = openChain[chainPosition++];
        out[index].end = frame.end;
      } else {
        merging = false;
        index = out.size();
        out.push_back({site.kind == FrameKind::Unknown ? 0 : site.address,
                       strings.get(site.name).str(),
                       frame.begin,
                       frame.end,
                       above,
                       {},
                       false,
                       false});
      }
      if (frame.open)
        nextChain.push_back(index);
    }
    openChain = std::move(nextChain);
  }
  return out;
}

bool reftree::sameFunction(const TreeFrame &reference, const TreeFrame &model) {
  if (reference.key == model.key)
    return true;
  return reference.key != 0 && model.key != 0 &&
         std::find(reference.aliases.begin(), reference.aliases.end(),
                   model.name) != reference.aliases.end();
}

size_t reftree::matchingFrames(const std::vector<TreeFrame> &reference,
                               const std::vector<TreeFrame> &model,
                               uint64_t tolerance) {
  std::vector<std::pair<const TreeFrame *, bool>> byBegin;
  for (const TreeFrame &frame : model)
    byBegin.push_back({&frame, false});
  std::sort(byBegin.begin(), byBegin.end(), [](const auto &a, const auto &b) {
    return a.first->begin < b.first->begin;
  });
  auto near = [tolerance](uint64_t a, uint64_t b) {
    return (a > b ? a - b : b - a) <= tolerance;
  };
  size_t matched = 0;
  for (const TreeFrame &frame : reference) {
    uint64_t low = frame.begin > tolerance ? frame.begin - tolerance : 0;
    auto it = std::lower_bound(byBegin.begin(), byBegin.end(), low,
                               [](const auto &entry, uint64_t value) {
                                 return entry.first->begin < value;
                               });
    for (; it != byBegin.end() && it->first->begin <= frame.begin + tolerance;
         ++it) {
      if (it->second || !near(it->first->end, frame.end) ||
          !sameFunction(frame, *it->first))
        continue;
      it->second = true;
      ++matched;
      break;
    }
  }
  return matched;
}

std::string reftree::firstDifference(const std::vector<TreeFrame> &reference,
                                     const std::vector<TreeFrame> &model,
                                     uint64_t tolerance) {
  auto show = [](const TreeFrame &f) {
    return (std::string(2 * f.depth, ' ') + f.name + " @" + utohexstr(f.key) +
            " " + std::to_string(f.begin) + "-" + std::to_string(f.end));
  };
  auto near = [tolerance](uint64_t a, uint64_t b) {
    return (a > b ? a - b : b - a) <= tolerance;
  };
  size_t count = std::min(reference.size(), model.size());
  for (size_t i = 0; i < count; ++i) {
    const TreeFrame &r = reference[i], &m = model[i];
    if (!sameFunction(r, m) || r.depth != m.depth || !near(r.begin, m.begin) ||
        !near(r.end, m.end))
      return "frame " + std::to_string(i) + ": reference " + show(r) +
             ", model " + show(m);
  }
  if (reference.size() != model.size())
    return "reference has " + std::to_string(reference.size()) +
           " frames, model " + std::to_string(model.size()) + "; next: " +
           (reference.size() > count ? "reference " + show(reference[count])
                                     : "model " + show(model[count]));
  return "";
}
