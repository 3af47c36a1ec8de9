//===- FoldedWriter.cpp - Folded stacks for flame graphs ------------------===//
//
// The format of Brendan Gregg's stackcollapse scripts, read by flamegraph.pl,
// speedscope and inferno: "a;b;c N" per line. N is nanoseconds of self time,
// so a flame graph's widths are exact time, not sample counts.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/TraceWriters.h"

#include "ValidatedWriters.h"

#include "llvm/ADT/DenseMap.h"

#include <vector>

namespace magic_trace {
namespace {

/// Distinct stacks as a trie: a node is (parent node, label id).
class StackTrie {
public:
  static constexpr uint32_t Root = 0;

  StackTrie() : nodes(1, {Root, 0}), self(1, 0) {}

  uint32_t child(uint32_t parent, uint32_t label) {
    auto [it, inserted] = children.try_emplace(uint64_t(parent) << 32 | label,
                                               uint32_t(nodes.size()));
    if (inserted) {
      nodes.push_back({parent, label});
      self.push_back(0);
    }
    return it->second;
  }

  void addSelf(uint32_t node, uint64_t ns) { self[node] += ns; }

  /// Writes every stack with self time as "a;b;c ns", in the order the
  /// stacks first occurred. Each node is a distinct stack, so no line repeats.
  void write(llvm::raw_ostream &os,
             const std::vector<std::string> &labels) const {
    std::vector<uint32_t> path;
    for (uint32_t node = 1; node < nodes.size(); ++node) {
      if (self[node] == 0)
        continue;
      path.clear();
      for (uint32_t n = node; n != Root; n = nodes[n].parent)
        path.push_back(nodes[n].label);
      for (auto it = path.rbegin(); it != path.rend(); ++it) {
        if (it != path.rbegin())
          os << ';';
        os << labels[*it];
      }
      os << ' ' << self[node] << '\n';
    }
  }

private:
  struct Node {
    uint32_t parent;
    uint32_t label;
  };
  std::vector<Node> nodes;
  std::vector<uint64_t> self; ///< Per node; the root's stays 0.
  llvm::DenseMap<uint64_t, uint32_t> children;
};

/// ';' separates frames and the last ' ' the count; newlines end lines.
std::string label(llvm::StringRef name, bool inlined) {
  std::string out = name.empty() ? "[unnamed]" : name.str();
  for (char &c : out)
    if (c == ';')
      c = ',';
    else if (c == '\n' || c == '\r')
      c = ' ';
  if (inlined)
    out += "_[i]";
  return out;
}

} // namespace

llvm::Error writeFolded(const TraceModel &model, llvm::raw_ostream &os,
                        const FoldedOptions &options) {
  if (llvm::Error err = validateModel(model))
    return err;
  writers::writeValidatedFolded(model, os, options);
  return llvm::Error::success();
}

void writers::writeValidatedFolded(const TraceModel &model,
                                   llvm::raw_ostream &os,
                                   const FoldedOptions &options) {
  StackTrie trie;
  // Label ids per StringId and inlined bit, each label computed once.
  std::vector<std::string> labels;
  llvm::DenseMap<uint64_t, uint32_t> labelIds;
  auto labelOf = [&](const FrameSite &site) {
    bool inlined = site.kind == FrameKind::Inlined;
    auto [it, inserted] = labelIds.try_emplace(
        uint64_t(site.name) << 1 | inlined, uint32_t(labels.size()));
    if (inserted)
      labels.push_back(label(model.strings.get(site.name), inlined));
    return it->second;
  };
  for (const ThreadModel &thread : model.threads) {
    uint32_t base = StackTrie::Root;
    if (options.threadPrefix) {
      labels.push_back(label((thread.name.empty() ? "thread" : thread.name) +
                                 "-" + std::to_string(thread.tid),
                             false));
      base = trie.child(StackTrie::Root, uint32_t(labels.size() - 1));
    }
    for (const Segment &segment : thread.segments) {
      const FrameList &frames = segment.frames;
      std::vector<uint32_t> node(frames.size());
      std::vector<uint64_t> self(frames.size());
      for (size_t i = 0; i < frames.size(); ++i) {
        const Frame &frame = frames[i];
        uint32_t parentNode =
            frame.parent == Frame::NoParent ? base : node[frame.parent];
        node[i] = trie.child(parentNode, labelOf(thread.sites[frame.site]));
        self[i] = frame.end - frame.begin;
        // Children lie inside their parent (validateModel), so this never
        // underflows.
        if (frame.parent != Frame::NoParent)
          self[frame.parent] -= frame.end - frame.begin;
      }
      for (size_t i = 0; i < frames.size(); ++i)
        trie.addSelf(node[i], self[i]);
    }
  }
  trie.write(os, labels);
}

} // namespace magic_trace
