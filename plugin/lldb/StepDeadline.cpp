//===- StepDeadline.cpp - Every step of the stepper ends in time ----------===//
#include "StepDeadline.h"

namespace magic_trace::plugin {
namespace {

/// How often the watcher looks for an interrupt request while a step runs:
/// a script's SBDebugger::RequestInterrupt stops the step this soon.
constexpr auto PollInterval = std::chrono::milliseconds(50);
/// An interrupt LLDB dropped (it arrived as the process was stopping) is
/// sent again after this long.
constexpr auto ResendInterval = std::chrono::seconds(1);

} // namespace

StepDeadline::StepDeadline(lldb::SBDebugger debugger, lldb::SBProcess process)
    : debugger(debugger), process(process), watcher([this] { watch(); }) {}

StepDeadline::~StepDeadline() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    quit = true;
  }
  wake.notify_all();
  watcher.join();
}

void StepDeadline::arm(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex);
  deadline = Clock::now() + timeout;
  armed = true;
  fired = Fired::No;
  wake.notify_all();
}

StepDeadline::Fired StepDeadline::disarm() {
  std::lock_guard<std::mutex> lock(mutex);
  armed = false;
  return fired;
}

void StepDeadline::watch() {
  std::unique_lock<std::mutex> lock(mutex);
  while (!quit) {
    if (!armed) {
      wake.wait(lock);
      continue;
    }
    Clock::time_point until = std::min(deadline, Clock::now() + PollInterval);
    wake.wait_until(lock, until);
    if (!armed || quit)
      continue;
    // Off the command's thread, InterruptRequested sees
    // SBDebugger::RequestInterrupt (a script, an IDE); Ctrl-C in the lldb
    // driver is seen by the stepper itself once this step is back, which
    // the deadline guarantees.
    bool interrupt = fired == Fired::No && debugger.InterruptRequested();
    if (!interrupt && Clock::now() < deadline)
      continue;
    if (fired == Fired::No)
      fired = interrupt ? Fired::Interrupt : Fired::Deadline;
    deadline = Clock::now() + ResendInterval;
    lock.unlock();
    process.SendAsyncInterrupt();
    lock.lock();
  }
}

} // namespace magic_trace::plugin
