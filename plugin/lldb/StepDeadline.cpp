//===- StepDeadline.cpp - Every step of the stepper ends in time ----------===//
#include "StepDeadline.h"

#include <csignal>

namespace magic_trace::plugin {
namespace {

/// How often the watcher looks for an interrupt request while a step runs:
/// a script's SBDebugger::RequestInterrupt stops the step this soon.
constexpr auto PollInterval = std::chrono::milliseconds(50);
/// An interrupt LLDB dropped (it arrived as the process was stopping) is
/// sent again after this long: a stop within a second is the promise.
constexpr auto ResendInterval = std::chrono::milliseconds(200);

std::atomic<bool> ctrlCPressed{false};
std::atomic<bool> watching{false};
struct sigaction previousAction;

void onSigint(int signal, siginfo_t *info, void *context) {
  ctrlCPressed = true;
  if (previousAction.sa_flags & SA_SIGINFO) {
    if (previousAction.sa_sigaction)
      previousAction.sa_sigaction(signal, info, context);
  } else if (previousAction.sa_handler != SIG_DFL &&
             previousAction.sa_handler != SIG_IGN) {
    previousAction.sa_handler(signal);
  }
}

} // namespace

CtrlCWatch::CtrlCWatch() {
  if (watching.exchange(true))
    return;
  ctrlCPressed = false;
  struct sigaction action = {};
  action.sa_sigaction = onSigint;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  installed = sigaction(SIGINT, &action, &previousAction) == 0;
  if (!installed)
    watching = false;
}

CtrlCWatch::~CtrlCWatch() {
  if (!installed)
    return;
  sigaction(SIGINT, &previousAction, nullptr);
  watching = false;
}

bool CtrlCWatch::pressed() { return ctrlCPressed; }

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
    // SBDebugger::RequestInterrupt (a script, an IDE).
    bool interrupt = fired == Fired::No &&
                     (debugger.InterruptRequested() || CtrlCWatch::pressed());
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
