//===- WindowPlan.cpp - Which PSB each thread's decode starts at ----------===//
#include "WindowPlan.h"

#include "magic_trace/ModelWindow.h"
#include "magic_trace/Pipeline.h"

#include <algorithm>

namespace magic_trace::pipeline {
namespace {

/// The last timed PSB at or before `at`, or npos.
size_t lastTimedAtOrBefore(const PsbTimes &psbs, uint64_t at) {
  size_t found = SIZE_MAX;
  // PSB times ascend with the offsets where they are known; untimed ones
  // (0) are passed over.
  for (size_t i = 0; i < psbs.ns.size(); ++i) {
    if (psbs.ns[i] == 0)
      continue;
    if (psbs.ns[i] > at)
      break;
    found = i;
  }
  return found;
}

/// The next timed PSB after `index`, or npos.
size_t nextTimed(const PsbTimes &psbs, size_t index) {
  for (size_t i = index + 1; i < psbs.ns.size(); ++i)
    if (psbs.ns[i])
      return i;
  return SIZE_MAX;
}

/// The longest length in (fits, over) for which `holds` is true, else
/// `fits`, by bisection: `holds` is true at `fits`, false at `over`, and
/// once false stays false.
template <typename Holds>
uint64_t longestFitting(uint64_t fits, uint64_t over, Holds holds) {
  while (over - fits > 1) {
    uint64_t middle = fits + (over - fits) / 2;
    if (holds(middle))
      fits = middle;
    else
      over = middle;
  }
  return fits;
}

uint64_t predictedSlices(llvm::ArrayRef<ThreadPlan> threads, uint64_t window) {
  double slices = 0;
  for (const ThreadPlan &thread : threads) {
    uint64_t at = thread.windowEnd > window ? thread.windowEnd - window : 0;
    uint64_t bytes = hasTimes(*thread.psbs)
                         ? bytesAfter(*thread.psbs, thread.end, at)
                         : thread.psbs->bytes;
    slices += thread.slicesPerByte * double(bytes) + kThreadInstants;
  }
  return uint64_t(slices);
}

} // namespace

bool hasTimes(const PsbTimes &psbs) {
  return std::any_of(psbs.ns.begin(), psbs.ns.end(),
                     [](uint64_t ns) { return ns != 0; });
}

size_t sampleStart(const PsbTimes &psbs, uint64_t bytes) {
  for (size_t i = psbs.offsets.size(); i-- > 0;)
    if (psbs.bytes - psbs.offsets[i] >= bytes)
      return i;
  return 0;
}

uint64_t bytesAfter(const PsbTimes &psbs, uint64_t end, uint64_t at) {
  size_t before = lastTimedAtOrBefore(psbs, at);
  if (before == SIZE_MAX)
    return psbs.bytes;
  size_t after = nextTimed(psbs, before);
  uint64_t fromTime = psbs.ns[before];
  uint64_t toTime =
      after == SIZE_MAX ? std::max(end, fromTime) : psbs.ns[after];
  uint64_t fromByte = psbs.offsets[before];
  uint64_t toByte = after == SIZE_MAX ? psbs.bytes : psbs.offsets[after];
  uint64_t offset = fromByte;
  if (toTime > fromTime)
    offset += uint64_t(double(toByte - fromByte) * double(at - fromTime) /
                       double(toTime - fromTime));
  return psbs.bytes - std::min(offset, psbs.bytes);
}

uint64_t plannedWindow(llvm::ArrayRef<ThreadPlan> threads, uint64_t limitNs,
                       uint64_t budget) {
  if (predictedSlices(threads, limitNs) <= budget)
    return limitNs;
  // The prediction grows with the window.
  return longestFitting(0, limitNs, [&](uint64_t length) {
    return predictedSlices(threads, length) <= budget;
  });
}

uint64_t bytesForWindow(llvm::ArrayRef<ThreadPlan> threads, uint64_t length) {
  uint64_t total = 0;
  for (const ThreadPlan &thread : threads) {
    const PsbTimes &psbs = *thread.psbs;
    if (!hasTimes(psbs)) {
      total += psbs.bytes;
      continue;
    }
    uint64_t at = thread.windowEnd > length ? thread.windowEnd - length : 0;
    total += psbs.bytes - psbs.offsets[decodeStart(psbs, at)];
  }
  return total;
}

uint64_t traceBudgetWindow(llvm::ArrayRef<ThreadPlan> threads, uint64_t spanNs,
                           uint64_t budget) {
  if (spanNs == 0 || bytesForWindow(threads, spanNs) <= budget)
    return spanNs;
  if (bytesForWindow(threads, 1) > budget)
    return 0;
  // The bytes grow with the length.
  return longestFitting(1, spanNs, [&](uint64_t length) {
    return bytesForWindow(threads, length) <= budget;
  });
}

size_t decodeStart(const PsbTimes &psbs, uint64_t at) {
  size_t last = lastTimedAtOrBefore(psbs, at);
  if (last == SIZE_MAX)
    return 0;
  for (size_t i = last; i-- > 0;)
    if (psbs.ns[i])
      return i;
  return 0;
}

uint64_t exactFrom(const PsbTimes &psbs, size_t from) {
  if (from == 0)
    return 0;
  size_t next = nextTimed(psbs, from);
  return next == SIZE_MAX ? UINT64_MAX : psbs.ns[next];
}

} // namespace magic_trace::pipeline

namespace magic_trace {

size_t windowDecodeStart(const PsbTimes &psbs, uint64_t at) {
  return pipeline::decodeStart(psbs, at);
}

} // namespace magic_trace
