//===- DisplayCut.cpp - Where a window leaves displayed times alone -------===//
#include "magic_trace/TraceWriters.h"

#include "DisplayClock.h"

#include <algorithm>

namespace magic_trace {

uint64_t displaySafeCut(const ThreadModel &thread, uint64_t from) {
  // The events come in the model's time order. `shown` is the displayed
  // time of the last event before the candidate `at`: a window from `at`
  // displays as the whole model does when no event is at `at` (a frame
  // there would be clipped in one and not the other) and `shown` < `at`
  // (every event before displays before the window, every event after
  // displays at its model time, whatever came before).
  uint64_t at = from, shown = 0;
  writers::DisplayClock clock;
  auto visit = [&](uint64_t ns, uint64_t displayed,
                   writers::DisplayClock::Event, uint32_t) {
    while (ns >= at) {
      if (ns != at && shown < at)
        return false; // Found.
      at = std::max(at + 1, shown + 1);
      if (ns < at)
        break;
    }
    shown = std::max(shown, displayed);
    return true;
  };
  for (const Segment &segment : thread.segments)
    if (!clock.walk(segment, visit))
      return at;
  return std::max(at, shown + 1);
}

} // namespace magic_trace
