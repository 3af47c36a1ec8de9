//===- QemuDebugger.cpp - GDB's all-stop over QEMU's gdbstub --------------===//
//
// QEMU 7.2's user-mode gdbstub stops only the thread that reports a stop:
// the program's other threads run on while GDB has it "stopped". GDB then
// inserts and removes breakpoints, which QEMU does in every vCPU's list,
// while those threads walk their lists at each block they look up: a data
// race in QEMU. Seen here as a worker's SIGSEGV at address 0 in
// check_for_breakpoints, which QEMU reports to GDB as the worker's own stop
// while the first thread still waits for GDB's packets; two threads then
// read GDB's socket and the session hangs (window/session.test, about one
// run in 30 under load).
//
// So the recorder stands between GDB and the gdbstub (relay=, stub=): it
// relays the bytes both ways and, when the stub sends a stop reply, holds
// every other running thread at the start of its next block before GDB
// sees the reply; when GDB sends a packet that resumes the program, it
// lets them go before the stub sees it. Every breakpoint change GDB makes
// then meets threads that wait inside a block callback, away from their
// breakpoint lists, as GDB's all-stop mode means; a thread whose syscall
// returns while GDB has the program stopped waits at the return. They are let
// go before the stopped thread runs, since that thread's first act is a
// tb_flush that waits for every other vCPU to leave its block
// (start_exclusive). docs/qemu.md "GDB's all-stop".
//
//===----------------------------------------------------------------------===//
#include "Recorder.h"

#include "magic_trace/GdbPackets.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <linux/futex.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

namespace magic_trace::qemu_plugin {

namespace {

/// 1 while GDB has the program stopped (the threads wait at their blocks).
std::atomic<uint32_t> debuggerHold{0};

/// How long a stop reply waits for the running threads to reach a block's
/// start: a thread that does not come by (descheduled, or held in QEMU)
/// is not waited for further.
constexpr std::chrono::milliseconds kHoldDeadline{500};
/// How long the relay tries to reach the gdbstub, which listens only once
/// QEMU has loaded this plugin and set up the program.
constexpr std::chrono::milliseconds kStubDeadline{10000};

/// Every other running thread waits at its next block's start before this
/// returns, or the deadline passes.
void holdForDebugger(uint64_t stoppedTid) {
  Recorder &rec = *recorder;
  debuggerHold.store(1, std::memory_order_release);
  rec.set(SlowDebuggerStop);
  everyThreadBarrier();
  std::vector<ThreadRecorder *> threads;
  {
    std::lock_guard<std::mutex> lock(rec.mutex);
    threads = rec.threads;
  }
  auto deadline = std::chrono::steady_clock::now() + kHoldDeadline;
  for (ThreadRecorder *thread : threads) {
    if (thread->tid == stoppedTid)
      continue;
    while (__atomic_load_n(&thread->slot->state, __ATOMIC_ACQUIRE) ==
               uint32_t(QemuThreadState::Running) &&
           thread->waitingAt.load(std::memory_order_acquire) == 0 &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

/// Until GDB resumes the program (releaseForDebugger).
void waitWhileHeld() {
  while (debuggerHold.load(std::memory_order_acquire)) {
    timespec timeout{0, 100 * 1000 * 1000};
    syscall(SYS_futex, &debuggerHold, FUTEX_WAIT, 1, &timeout, nullptr, 0);
  }
}

void releaseForDebugger() {
  if (!debuggerHold.load(std::memory_order_acquire))
    return;
  recorder->clear(SlowDebuggerStop);
  debuggerHold.store(0, std::memory_order_release);
  syscall(SYS_futex, &debuggerHold, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

/// A file descriptor closed with its owner.
struct Socket {
  int fd = -1;
  explicit Socket(int fd = -1) : fd(fd) {}
  Socket(const Socket &) = delete;
  Socket &operator=(const Socket &) = delete;
  ~Socket() {
    if (fd >= 0)
      close(fd);
  }
};

bool socketAddress(const std::string &path, sockaddr_un &address) {
  std::memset(&address, 0, sizeof(address));
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path))
    return false;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return true;
}

bool writeAll(int fd, llvm::StringRef bytes) {
  while (!bytes.empty()) {
    ssize_t written = write(fd, bytes.data(), bytes.size());
    if (written < 0 && errno == EINTR)
      continue;
    if (written <= 0)
      return false;
    bytes = bytes.drop_front(size_t(written));
  }
  return true;
}

/// GDB's side: accepts one connection, from this user.
int acceptDebugger(int listener) {
  for (;;) {
    int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0 && errno == EINTR)
      continue;
    if (fd < 0)
      return -1;
    ucred peer{};
    socklen_t length = sizeof(peer);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) == 0 &&
        peer.uid == getuid())
      return fd;
    close(fd);
  }
}

/// The gdbstub's side, once QEMU listens.
int connectStub(const std::string &path) {
  sockaddr_un address;
  if (!socketAddress(path, address))
    return -1;
  auto deadline = std::chrono::steady_clock::now() + kStubDeadline;
  while (std::chrono::steady_clock::now() < deadline) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      return -1;
    if (connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address)) ==
        0)
      return fd;
    close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

/// Relays until either side closes; stop replies hold the threads, resume
/// packets let them go.
void relay(int debugger, int stub) {
  GdbStreamSplitter fromDebugger, fromStub;
  std::vector<GdbStreamPiece> pieces;
  char buffer[65536];
  for (;;) {
    pollfd fds[2] = {{debugger, POLLIN, 0}, {stub, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    for (int side = 0; side < 2; ++side) {
      if (!(fds[side].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      ssize_t count = read(fds[side].fd, buffer, sizeof(buffer));
      if (count < 0 && errno == EINTR)
        continue;
      if (count <= 0)
        return;
      pieces.clear();
      bool isStub = side == 1;
      (isStub ? fromStub : fromDebugger)
          .feed(llvm::StringRef(buffer, size_t(count)), pieces);
      for (const GdbStreamPiece &piece : pieces) {
        if (piece.isPacket && isStub) {
          StubReply reply = readStubReply(piece.data());
          if (reply.kind == StubReply::Stopped)
            holdForDebugger(reply.thread);
          else if (reply.kind == StubReply::Exited)
            releaseForDebugger();
        } else if (piece.isPacket && resumesProgram(piece.data())) {
          releaseForDebugger();
        }
        if (!writeAll(isStub ? debugger : stub, piece.bytes))
          return;
      }
    }
  }
}

void relayLoop(int listener, std::string listenPath, std::string stubPath) {
  Socket listening(listener);
  Socket debugger(acceptDebugger(listener));
  unlink(listenPath.c_str());
  if (debugger.fd < 0)
    return;
  Socket stub(connectStub(stubPath));
  if (stub.fd < 0) {
    warn("cannot reach QEMU's gdbstub at " + stubPath +
         " (GDB's connection is closed)");
    return;
  }
  relay(debugger.fd, stub.fd);
  // GDB or QEMU is gone: nothing holds the threads any more.
  releaseForDebugger();
}

} // namespace

void waitForDebugger(ThreadRecorder &thread, uint64_t start) {
  thread.waitAtBlockStart(start, waitWhileHeld);
}

void syscallReturned(qemu_plugin_id_t, unsigned int, int64_t, int64_t) {
  // Outside cpu_exec: a thread that waits here is not one the stopped
  // thread's exclusive section waits for, and its next step would be a
  // walk of its breakpoint list before its next block.
  waitWhileHeld();
}

llvm::Error startDebuggerRelay(const std::string &listenPath,
                               const std::string &stubPath) {
  sockaddr_un address, stubAddress;
  if (!socketAddress(listenPath, address))
    return llvm::createStringError("relay=" + listenPath +
                                   " is too long for a socket path");
  // Checked here, not when GDB has connected: QEMU's -g cannot listen
  // there either, and GDB would only see its connection closed.
  if (!socketAddress(stubPath, stubAddress))
    return llvm::createStringError("stub=" + stubPath +
                                   " is too long for a socket path");
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0 ||
      bind(listener, reinterpret_cast<sockaddr *>(&address), sizeof(address)) !=
          0 ||
      listen(listener, 1) != 0) {
    std::string reason = std::strerror(errno);
    if (listener >= 0)
      close(listener);
    return llvm::createStringError("cannot listen for GDB at " + listenPath +
                                   ": " + reason);
  }
  // As the flusher: every signal blocked, QEMU's host signal handler
  // assumes it runs on a vCPU thread.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  std::thread(relayLoop, listener, listenPath, stubPath).detach();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return llvm::Error::success();
}

} // namespace magic_trace::qemu_plugin
