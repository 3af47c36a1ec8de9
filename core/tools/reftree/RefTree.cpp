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

/// PLT stubs as objdump names them: "<target>@plt", each ending where the
/// next symbol starts. LLVM's PLT reader (MCInstrAnalysis::findPltEntries,
/// the one llvm-objdump uses; magic-trace's symbolizer has its own) finds
/// each stub's GOT slot; the slot's dynamic relocation names the target, or
/// for an IRELATIVE slot the IFUNC whose resolver is the addend. A PLT
/// section's start with no stub there (PLT0, IBT's lazy-binding stubs) is
/// named after the section.
void addPltStubs(const object::ELFObjectFileBase &elf, uint64_t bias,
                 std::vector<RefFunction> &out) {
  static const bool initialized = [] {
    InitializeAllTargetInfos();
    InitializeAllTargetMCs();
    return true;
  }();
  (void)initialized;
  Triple triple = elf.makeTriple();
  std::string error;
  const Target *target = TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return;
  std::unique_ptr<MCSubtargetInfo> subtarget(
      target->createMCSubtargetInfo(triple, "", ""));
  std::unique_ptr<MCInstrInfo> instructions(target->createMCInstrInfo());
  if (!subtarget || !instructions)
    return;
  std::unique_ptr<MCInstrAnalysis> analysis(
      target->createMCInstrAnalysis(instructions.get()));
  if (!analysis)
    return;

  auto nameOf = [](const object::SymbolRef &symbol) -> std::string {
    Expected<StringRef> name = symbol.getName();
    if (!name) {
      consumeError(name.takeError());
      return {};
    }
    return name->str();
  };
  // IFUNC symbols by value: .dynsym's, and .symtab's for a static
  // executable, which has only that.
  std::map<uint64_t, std::string> resolvers;
  auto addResolvers =
      [&](object::ELFObjectFileBase::elf_symbol_iterator_range symbols) {
        for (const object::ELFSymbolRef &symbol : symbols) {
          if (symbol.getELFType() != ELF::STT_GNU_IFUNC)
            continue;
          if (Expected<uint64_t> value = symbol.getValue())
            resolvers.emplace(*value, nameOf(symbol));
          else
            consumeError(value.takeError());
        }
      };
  addResolvers(elf.getDynamicSymbolIterators());
  addResolvers(object::ELFObjectFileBase::elf_symbol_iterator_range(
      elf.symbol_begin(), elf.symbol_end()));
  // The dynamic relocations; a static executable has no dynamic section,
  // and its IRELATIVE slots are in an allocated .rela.plt that libc's
  // start-up code applies (__libc_setup_irel, from __rela_iplt_start).
  std::vector<object::SectionRef> relocationSections =
      elf.dynamic_relocation_sections();
  if (relocationSections.empty())
    for (const object::SectionRef &section : elf.sections())
      if (object::ELFSectionRef(section).getType() == ELF::SHT_RELA &&
          (object::ELFSectionRef(section).getFlags() & ELF::SHF_ALLOC))
        relocationSections.push_back(section);
  std::map<uint64_t, std::string> slotTargets;
  for (const object::SectionRef &section : relocationSections)
    for (const object::RelocationRef &relocation : section.relocations()) {
      std::string name;
      uint64_t type = relocation.getType();
      if (type == ELF::R_X86_64_JUMP_SLOT || type == ELF::R_X86_64_GLOB_DAT) {
        object::symbol_iterator symbol = relocation.getSymbol();
        if (symbol != elf.symbol_end())
          name = nameOf(*symbol);
      } else if (type == ELF::R_X86_64_IRELATIVE) {
        Expected<int64_t> addend =
            object::ELFRelocationRef(relocation).getAddend();
        if (!addend) {
          consumeError(addend.takeError());
          continue;
        }
        auto resolver = resolvers.find(uint64_t(*addend));
        if (resolver != resolvers.end())
          name = resolver->second;
      }
      if (!name.empty())
        slotTargets[relocation.getOffset()] = name;
    }

  for (const object::SectionRef &section : elf.sections()) {
    Expected<StringRef> name = section.getName();
    Expected<StringRef> contents = section.getContents();
    if (!name || !contents) {
      if (!name)
        consumeError(name.takeError());
      if (!contents)
        consumeError(contents.takeError());
      continue;
    }
    if (*name != ".plt" && *name != ".plt.sec" && *name != ".plt.got")
      continue;
    bool stubAtStart = false;
    size_t first = out.size();
    for (auto [stub, slot] : analysis->findPltEntries(
             section.getAddress(), arrayRefFromStringRef(*contents),
             *subtarget)) {
      auto found = slotTargets.find(slot);
      if (found == slotTargets.end())
        continue;
      stubAtStart |= stub == section.getAddress();
      std::string stubName = demangle(found->second) + "@plt";
      out.push_back({stub + bias, 0, stubName, {stubName}, false});
    }
    if (!stubAtStart && !contents->empty())
      out.push_back(
          {section.getAddress() + bias, 0, name->str(), {name->str()}, false});
    // Each stub ends where the next begins, the last with its section (the
    // code after it, .text in a stripped file, is no part of it).
    std::sort(out.begin() + first, out.end(),
              [](const RefFunction &a, const RefFunction &b) {
                return a.begin < b.begin;
              });
    uint64_t sectionEnd = section.getAddress() + section.getSize() + bias;
    for (size_t i = first; i < out.size(); ++i)
      out[i].end = i + 1 < out.size() ? out[i + 1].begin : sectionEnd;
  }
}

/// The module's code symbols, named the way llvm-symbolizer (and so the
/// user) names code: FUNC, IFUNC and untyped symbols of .symtab, or of
/// .dynsym when there is no .symtab; one per address (the largest); a symbol
/// of size 0 covers everything up to the next one, the last one up to the
/// end of its section; the PLT stubs (addPltStubs); and in stripped code one
/// function per FDE (addFdeFunctions).
void addSymbols(const Module &module, std::vector<RefFunction> &out) {
  auto binary = object::ObjectFile::createObjectFile(module.fileToRead());
  if (!binary) {
    consumeError(binary.takeError());
    return;
  }
  const auto *elf = dyn_cast<object::ELFObjectFileBase>(binary->getBinary());
  if (!elf)
    return;
  uint64_t bias = module.loadAddress - linkBase(*elf);
  // A stripped library's full .symtab lives in its separate debug file,
  // found by build-id where debuggers look (same link-time addresses).
  // MT_DEBUG_FILE_DIRS replaces /usr/lib/debug as for the symbolizer
  // (docs/symbolizer.md): empty, the reference is that of a machine without
  // debug packages.
  object::OwningBinary<object::ObjectFile> debugBinary;
  std::string id = toHex(object::getBuildID(elf), /*LowerCase=*/true);
  const char *dirs = std::getenv("MT_DEBUG_FILE_DIRS");
  SmallVector<StringRef, 4> roots;
  StringRef(dirs ? dirs : "/usr/lib/debug").split(roots, ':', -1, false);
  for (StringRef root : roots) {
    if (id.size() <= 2 || debugBinary.getBinary())
      break;
    std::string path = root.str() + "/.build-id/" + id.substr(0, 2) + "/" +
                       id.substr(2) + ".debug";
    auto debug = object::ObjectFile::createObjectFile(path);
    if (debug) {
      const auto *debugElf =
          dyn_cast<object::ELFObjectFileBase>(debug->getBinary());
      if (debugElf && !debugElf->symbols().empty()) {
        debugBinary = std::move(*debug);
        elf = debugElf;
      }
    } else {
      consumeError(debug.takeError());
    }
  }
  std::vector<RefFunction> symbols;
  uint64_t lastSectionEnd = 0;
  auto add = [&](const object::ELFSymbolRef &symbol) {
    uint8_t type = symbol.getELFType();
    if (type != ELF::STT_FUNC && type != ELF::STT_GNU_IFUNC &&
        type != ELF::STT_NOTYPE)
      return;
    Expected<uint64_t> address = symbol.getAddress();
    Expected<StringRef> name = symbol.getName();
    Expected<object::section_iterator> section = symbol.getSection();
    if (!address || !name || !section || *section == elf->section_end() ||
        !(*section)->isText() || name->empty()) {
      if (!address)
        consumeError(address.takeError());
      if (!name)
        consumeError(name.takeError());
      if (!section)
        consumeError(section.takeError());
      return;
    }
    uint64_t size = symbol.getSize();
    symbols.push_back({*address + bias,
                       size ? *address + bias + size : 0,
                       name->str(),
                       {demangle(name->split('@').first)},
                       false});
    lastSectionEnd = std::max(lastSectionEnd, (*section)->getAddress() +
                                                  (*section)->getSize() + bias);
  };
  auto table = elf->symbols();
  if (table.begin() == table.end())
    table = elf->getDynamicSymbolIterators();
  for (const object::SymbolRef &symbol : table)
    add(object::ELFSymbolRef(symbol));
  // The loaded file has the PLT (a debug file's copy is empty).
  addPltStubs(*cast<object::ELFObjectFileBase>(binary->getBinary()), bias,
              symbols);

  std::sort(symbols.begin(), symbols.end(),
            [](const RefFunction &a, const RefFunction &b) {
              if (a.begin != b.begin)
                return a.begin < b.begin;
              uint64_t sizeA = a.end ? a.end - a.begin : 0;
              uint64_t sizeB = b.end ? b.end - b.begin : 0;
              return sizeA > sizeB; // The largest first.
            });
  size_t first = out.size();
  for (size_t i = 0; i < symbols.size(); ++i) {
    if (out.size() > first && symbols[i].begin == out.back().begin) {
      out.back().aliases.push_back(symbols[i].aliases.front());
      continue;
    }
    RefFunction function = symbols[i];
    if (function.end == 0) {
      size_t next = i + 1;
      while (next < symbols.size() && symbols[next].begin == function.begin)
        ++next;
      function.end =
          next < symbols.size() ? symbols[next].begin : lastSectionEnd;
    }
    out.push_back(std::move(function));
  }
  // Stripped code: a function per FDE no symbol covers, from the loaded
  // file (a debug file has no .eh_frame bytes).
  addFdeFunctions(*binary->getBinary(), sys::path::filename(module.path), bias,
                  first, out);
}

} // namespace

RefSymbols::RefSymbols(const std::vector<Module> &modules) {
  for (const Module &module : modules)
    addSymbols(module, functions);
  // Modules do not overlap; a sized symbol inside another one's extent is
  // left to the outer one, so the list is a partition.
  std::sort(functions.begin(), functions.end(),
            [](const RefFunction &a, const RefFunction &b) {
              return a.begin < b.begin;
            });
  std::vector<RefFunction> clean;
  for (RefFunction &function : functions) {
    if (!clean.empty() && function.begin < clean.back().end) {
      // A symbol of size 0 ends where the next symbol starts.
      if (function.begin > clean.back().begin &&
          clean.back().end > function.end)
        continue;
      if (function.begin == clean.back().begin)
        continue;
      clean.back().end = function.begin;
    }
    clean.push_back(std::move(function));
  }
  functions = std::move(clean);
}

RefFunction RefSymbols::lookup(uint64_t address) const {
  auto next = std::upper_bound(
      functions.begin(), functions.end(), address,
      [](uint64_t a, const RefFunction &f) { return a < f.begin; });
  if (next != functions.begin() && address < std::prev(next)->end)
    return *std::prev(next);
  RefFunction gap;
  gap.unknown = true;
  gap.begin = next != functions.begin() ? std::prev(next)->end : 0;
  gap.end = next != functions.end() ? next->begin : UINT64_MAX;
  gap.name = "[unknown]";
  return gap;
}

namespace {

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
