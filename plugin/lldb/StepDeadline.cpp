//===- StepDeadline.cpp - Every step of the stepper ends in time ----------===//
#include "StepDeadline.h"

#include "lldb/API/SBPlatform.h"
#include "lldb/API/SBTarget.h"
#include "lldb/API/SBUnixSignals.h"

#include <csignal>
#include <cstring>
#include <sys/types.h>

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

/// The pid of `process` when the deadline can stop its threads with a
/// SIGSTOP of its own: the process runs on this host (LLDB's host platform,
/// where thread ids are the kernel's), and LLDB stops at a SIGSTOP and does
/// not pass it on (its default: `process handle SIGSTOP`); else 0.
static uint64_t hostPid(lldb::SBProcess &process) {
  lldb::SBPlatform platform = process.GetTarget().GetPlatform();
  const char *name = platform.GetName();
  if (!name || std::strcmp(name, "host") != 0)
    return 0;
  lldb::SBUnixSignals signals = process.GetUnixSignals();
  if (!signals.GetShouldStop(SIGSTOP) || !signals.GetShouldSuppress(SIGSTOP))
    return 0;
  lldb::pid_t pid = process.GetProcessID();
  return pid == LLDB_INVALID_PROCESS_ID ? 0 : pid;
}

StepDeadline::StepDeadline(lldb::SBDebugger debugger, lldb::SBProcess process)
    : debugger(debugger), process(process), localPid(hostPid(process)),
      watcher([this] { watch(); }) {}

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
  signalled = false;
  halted = false;
  wake.notify_all();
}

StepDeadline::Fired StepDeadline::disarm() {
  std::lock_guard<std::mutex> lock(mutex);
  armed = false;
  return fired;
}

bool StepDeadline::haltedLastStep() {
  std::lock_guard<std::mutex> lock(mutex);
  return halted;
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
    // The user's interrupt goes through the debugger, which marks the stop
    // as interrupted; the deadline's is first a signal of our own, where it
    // can be. It goes to the process, not the thread: the kernel hands it to
    // a thread that runs. When none takes it (the stepped thread was
    // exiting, and lldb-server waits on), the next try is a halt.
    bool signal = fired == Fired::Deadline && localPid && !signalled;
    signalled |= signal;
    halted |= !signal && fired == Fired::Deadline;
    lock.unlock();
    if (signal)
      kill(pid_t(localPid), SIGSTOP);
    else
      process.SendAsyncInterrupt();
    lock.lock();
  }
}

} // namespace magic_trace::plugin
