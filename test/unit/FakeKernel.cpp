//===- FakeKernel.cpp - The perf backend's kernel, for tests --------------===//
#include "FakeKernel.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace magic_trace::testing {
namespace {

std::error_code errnoCode(int value) {
  return std::error_code(value, std::generic_category());
}

bool isPowerOfTwo(uint64_t value) { return value && !(value & (value - 1)); }

// Record types and AUX flags (include/uapi/linux/perf_event.h).
constexpr uint32_t kRecordLost = 2;
constexpr uint32_t kRecordAux = 11;
constexpr uint32_t kRecordMmap2 = 10;
constexpr uint32_t kRecordItraceStart = 12;
constexpr uint64_t kAuxFlagOverwrite = 0x02;

} // namespace

struct FakeKernel::Ring {
  std::unique_ptr<uint64_t[]> base; ///< Perf page + data pages (8-aligned).
  size_t baseLength = 0;
  std::unique_ptr<uint8_t[]> aux;
  uint64_t auxSize = 0;
  bool overwrite = false;
  uint64_t baseUser = 0, basePinned = 0, auxUser = 0, auxPinned = 0;
  unsigned cpu = 0;
  unsigned dropping = 0; ///< Records still to find the data pages full.
  uint64_t lost = 0;     ///< Records not written since the last LOST.
  uint64_t head = 0;     ///< rb->head: data_head is what was published.
  uint64_t watermark = 0, wakeup = 0; ///< rb->watermark, rb->wakeup.
  bool pollPending = false;           ///< rb->poll (POLLIN).
  bool wokeReader = false;            ///< The last record woke the poller.

  perf_event_mmap_page &page() {
    return *reinterpret_cast<perf_event_mmap_page *>(base.get());
  }
  uint8_t *data() { return reinterpret_cast<uint8_t *>(base.get()); }
};

struct FakeKernel::Event {
  int fd = -1; ///< -1: a copy made by inherit.
  perf_event_attr attr{};
  uint32_t tid = 0;
  int cpu = -1;
  bool enabled = false;
  bool closed = false;
  bool itraceStarted = false;
  Event *parent = nullptr; ///< The event it was copied from (inherit).
  Event *output = nullptr; ///< PERF_EVENT_IOC_SET_OUTPUT.
  Ring *ring = nullptr;    ///< Its own mapping.
};

std::vector<std::vector<uint8_t>> psbStretches(llvm::ArrayRef<uint8_t> bytes) {
  static const uint8_t psb[16] = {0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                                  0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                                  0x02, 0x82, 0x02, 0x82};
  std::vector<size_t> starts;
  for (auto it = bytes.begin();
       (it = std::search(it, bytes.end(), std::begin(psb), std::end(psb))) !=
       bytes.end();
       it += sizeof(psb))
    starts.push_back(it - bytes.begin());
  std::vector<std::vector<uint8_t>> result;
  for (size_t i = 0; i < starts.size(); ++i)
    result.emplace_back(
        bytes.begin() + starts[i],
        bytes.begin() + (i + 1 < starts.size() ? starts[i + 1] : bytes.size()));
  return result;
}

FakeKernel::FakeKernel(Options options) : options(std::move(options)) {}
FakeKernel::~FakeKernel() = default;

void FakeKernel::addThread(uint32_t pid, uint32_t tid) {
  std::lock_guard<std::mutex> guard(mutex);
  pidOf[tid] = pid;
}

uint32_t FakeKernel::clone(uint32_t parent, uint32_t tid) {
  std::lock_guard<std::mutex> guard(mutex);
  if (!tid)
    tid = nextTid++;
  pidOf[tid] = pidOf.at(parent);
  // perf_event_init_task, in copy_process: every inherit event of the
  // parent gets a copy in the child before it can run; output goes to the
  // original event (inherit_event takes the parent's parent).
  std::vector<Event *> inherited;
  for (const auto &event : events)
    if (event->tid == parent && !event->closed && event->attr.inherit)
      inherited.push_back(event.get());
  for (Event *source : inherited) {
    auto child = std::make_unique<Event>();
    child->attr = source->attr;
    child->tid = tid;
    child->cpu = source->cpu;
    child->enabled = source->enabled;
    child->parent = source->parent ? source->parent : source;
    events.push_back(std::move(child));
  }
  return tid;
}

void FakeKernel::exitThread(uint32_t tid) {
  std::lock_guard<std::mutex> guard(mutex);
  pidOf.erase(tid);
  for (const auto &event : events)
    if (event->tid == tid && event->fd < 0)
      event->closed = true;
}

FakeKernel::Event *FakeKernel::eventOf(int fd) {
  for (const auto &event : events)
    if (event->fd == fd && !event->closed)
      return event.get();
  return nullptr;
}

FakeKernel::Ring *FakeKernel::ringOf(Event &event) {
  // perf_output_begin / perf_aux_output_begin: a copy writes to its parent;
  // a redirected event to its output.
  Event *target = event.parent ? event.parent : &event;
  while (target->output)
    target = target->output;
  return target->ring;
}

llvm::ErrorOr<int> FakeKernel::perfEventOpen(const perf_event_attr &attr,
                                             int pid, int cpu) {
  std::lock_guard<std::mutex> guard(mutex);
  // perf_event_paranoid > 2 (Debian's 3) forbids unprivileged events.
  if (options.paranoid > 2)
    return errnoCode(EACCES);
  if (!pidOf.count(uint32_t(pid)))
    return errnoCode(ESRCH);
  if (cpu >= int(options.cpus))
    return errnoCode(ENODEV);
  // exclusive_event_init: per-task PT events and a CPU-wide PT session
  // exclude each other.
  if (options.systemWidePt)
    return errnoCode(EBUSY);
  // exclusive_event_installable: one PT event per thread and CPU.
  for (const auto &event : events)
    if (!event->closed && event->tid == uint32_t(pid) &&
        (event->cpu == cpu || event->cpu == -1 || cpu == -1))
      return errnoCode(EBUSY);
  auto event = std::make_unique<Event>();
  event->fd = nextFd++;
  event->attr = attr;
  event->tid = uint32_t(pid);
  event->cpu = cpu;
  event->enabled = !attr.disabled;
  events.push_back(std::move(event));
  return events.back()->fd;
}

std::error_code FakeKernel::charge(uint64_t pages, uint64_t &userPart,
                                   uint64_t &pinnedPart) {
  // perf_mmap: the user may lock perf_event_mlock_kb per online CPU; what
  // goes beyond is pinned to the process, up to RLIMIT_MEMLOCK, unless
  // the caller is exempt (CAP_IPC_LOCK, paranoid -1).
  uint64_t userLimit = options.mlockKb * 1024 / options.pageSize * options.cpus;
  uint64_t userLocked = std::min(userLockedPages, userLimit) + pages;
  uint64_t extra = userLocked > userLimit ? userLocked - userLimit : 0;
  if (!options.exempt && options.memlockLimit &&
      pinnedPages + extra > *options.memlockLimit / options.pageSize)
    return errnoCode(EPERM);
  userPart = pages - extra;
  pinnedPart = extra;
  userLockedPages += userPart;
  pinnedPages += pinnedPart;
  return {};
}

llvm::ErrorOr<void *> FakeKernel::mmap(int fd, size_t length, bool writable,
                                       uint64_t offset) {
  std::lock_guard<std::mutex> guard(mutex);
  Event *event = eventOf(fd);
  if (!event)
    return errnoCode(EBADF);
  // perf_mmap: an inherited per-thread (cpu = -1) event cannot be mapped.
  if (event->cpu == -1 && event->attr.inherit)
    return errnoCode(EINVAL);
  uint64_t page = options.pageSize;
  if (length % page)
    return errnoCode(EINVAL);
  if (offset == 0) {
    uint64_t dataPages = length / page - 1;
    if (event->output || event->ring || (dataPages && !isPowerOfTwo(dataPages)))
      return errnoCode(EINVAL);
    auto ring = std::make_unique<Ring>();
    if (std::error_code error =
            charge(length / page, ring->baseUser, ring->basePinned))
      return error;
    ring->base.reset(new uint64_t[length / 8]());
    ring->baseLength = length;
    ring->cpu = unsigned(event->cpu);
    ring->page().data_offset = page;
    ring->page().data_size = dataPages * page;
    ring->page().cap_user_time_zero = 1;
    ring->page().time_zero = options.timeZero;
    ring->page().time_mult = options.timeMult;
    ring->page().time_shift = options.timeShift;
    // ring_buffer_init: attr.wakeup_watermark when attr.watermark, else
    // half the data pages.
    uint64_t dataSize = dataPages * page;
    ring->watermark =
        event->attr.watermark
            ? std::min<uint64_t>(event->attr.wakeup_watermark, dataSize)
            : 0;
    if (!ring->watermark)
      ring->watermark = dataSize / 2;
    event->ring = ring.get();
    rings.push_back(std::move(ring));
    return static_cast<void *>(event->ring->base.get());
  }
  // rb_alloc_aux: at the offset and size the perf page names, a power of
  // two of pages, once.
  Ring *ring = event->ring;
  if (!ring || ring->aux || offset != ring->page().aux_offset ||
      length != ring->page().aux_size || !isPowerOfTwo(length / page))
    return errnoCode(EINVAL);
  if (std::error_code error =
          charge(length / page, ring->auxUser, ring->auxPinned))
    return error;
  ring->aux.reset(new uint8_t[length]());
  ring->auxSize = length;
  ring->overwrite = !writable;
  return static_cast<void *>(ring->aux.get());
}

void FakeKernel::munmap(void *address, size_t length) {
  std::lock_guard<std::mutex> guard(mutex);
  for (const auto &ring : rings) {
    if (ring->aux.get() == address) {
      userLockedPages -= ring->auxUser;
      pinnedPages -= ring->auxPinned;
      ring->auxUser = ring->auxPinned = 0;
      ring->aux.reset();
    } else if (ring->base.get() == address) {
      userLockedPages -= ring->baseUser;
      pinnedPages -= ring->basePinned;
      ring->baseUser = ring->basePinned = 0;
    }
  }
}

std::error_code FakeKernel::ioctl(int fd, unsigned long request,
                                  unsigned long argument) {
  std::lock_guard<std::mutex> guard(mutex);
  Event *event = eventOf(fd);
  if (!event)
    return errnoCode(EBADF);
  if (request == PERF_EVENT_IOC_ENABLE || request == PERF_EVENT_IOC_DISABLE) {
    // perf_event_for_each_child: also the copies inherit made.
    bool enable = request == PERF_EVENT_IOC_ENABLE;
    for (const auto &other : events)
      if (other.get() == event || other->parent == event)
        other->enabled = enable;
    return {};
  }
  if (request == PERF_EVENT_IOC_SET_OUTPUT) {
    Event *target = eventOf(int(argument));
    // perf_event_set_output: same CPU; not while the event has a mapping.
    if (!target || target->cpu != event->cpu)
      return errnoCode(EINVAL);
    if (event->ring)
      return errnoCode(EBUSY);
    event->output = target;
    return {};
  }
  return errnoCode(ENOTTY);
}

void FakeKernel::close(int fd) {
  std::lock_guard<std::mutex> guard(mutex);
  if (Event *event = eventOf(fd))
    event->closed = true;
}

void FakeKernel::emit(Ring &ring, const Event &event, uint32_t type,
                      llvm::ArrayRef<uint64_t> words, uint32_t tid,
                      std::optional<uint64_t> time) {
  // The sample_id trailer (sample_id_all), in perf_event_open(2)'s order.
  std::vector<uint64_t> sampleId;
  uint64_t sampleType = event.attr.sample_id_all ? event.attr.sample_type : 0;
  if (sampleType & PERF_SAMPLE_TID)
    sampleId.push_back(uint64_t(pidOf.count(tid) ? pidOf[tid] : tid) |
                       uint64_t(tid) << 32);
  if (sampleType & PERF_SAMPLE_TIME)
    sampleId.push_back(time.value_or(clock));
  if (sampleType & PERF_SAMPLE_CPU)
    sampleId.push_back(ring.cpu);
  perf_event_mmap_page &page = ring.page();
  uint64_t dataSize = page.data_size;
  uint64_t size = 8 + (words.size() + sampleId.size()) * 8;
  // perf_output_begin: a pending loss adds a LOST {header, id, lost} and
  // its sample_id in front of this record, and the two need room together.
  uint64_t lostSize = ring.lost ? 8 + 16 + sampleId.size() * 8 : 0;
  uint64_t tail = __atomic_load_n(&page.data_tail, __ATOMIC_ACQUIRE);
  // CIRC_SPACE (include/linux/circ_buf.h): the ring is full one byte short.
  uint64_t space = (tail - (ring.head + 1)) & (dataSize - 1);
  if (ring.dropping || space < lostSize + size) {
    // fail: local_inc(&rb->lost); the record is gone.
    if (ring.dropping)
      --ring.dropping;
    ++ring.lost;
    return;
  }
  auto write = [&](uint32_t recordType, llvm::ArrayRef<uint64_t> fields) {
    std::vector<uint64_t> body(fields.begin(), fields.end());
    body.insert(body.end(), sampleId.begin(), sampleId.end());
    std::vector<uint8_t> bytes(8 + body.size() * 8);
    uint16_t recordSize = uint16_t(bytes.size());
    std::memcpy(bytes.data(), &recordType, 4);
    std::memcpy(bytes.data() + 6, &recordSize, 2);
    std::memcpy(bytes.data() + 8, body.data(), body.size() * 8);
    for (uint8_t byte : bytes)
      ring.data()[page.data_offset + (ring.head++ & (dataSize - 1))] = byte;
  };
  if (ring.lost) {
    write(kRecordLost, {0, ring.lost});
    ring.lost = 0;
  }
  write(type, words);
  // perf_output_put_handle: the reader sees the head once the bytes are
  // there (smp_wmb, then data_head).
  __atomic_store_n(&page.data_head, ring.head, __ATOMIC_RELEASE);
  // Past the watermark: rb->wakeup moves on and the poller is woken
  // (perf_output_wakeup sets rb->poll = POLLIN).
  if (ring.head - ring.wakeup > ring.watermark) {
    ring.wakeup += ring.watermark;
    ring.pollPending = true;
    ring.wokeReader = true;
    woken.notify_all();
  }
}

void FakeKernel::letReaderRun(std::unique_lock<std::mutex> &guard, Ring &ring) {
  if (!ring.wokeReader || options.wokenReaderRuns.count() == 0)
    return;
  ring.wokeReader = false;
  perf_event_mmap_page &page = ring.page();
  uint64_t tail = __atomic_load_n(&page.data_tail, __ATOMIC_ACQUIRE);
  auto deadline = std::chrono::steady_clock::now() + options.wokenReaderRuns;
  // The reader writes data_tail without telling us: look every millisecond.
  while (__atomic_load_n(&page.data_tail, __ATOMIC_ACQUIRE) == tail &&
         std::chrono::steady_clock::now() < deadline)
    woken.wait_for(guard, std::chrono::milliseconds(1));
}

std::pair<FakeKernel::Event *, FakeKernel::Ring *>
FakeKernel::runningOn(uint32_t tid, unsigned cpu) {
  if (!pidOf.count(tid))
    return {nullptr, nullptr};
  Event *event = nullptr;
  for (const auto &candidate : events)
    if (!candidate->closed && candidate->tid == tid &&
        (candidate->cpu == int(cpu) || candidate->cpu == -1))
      event = candidate.get();
  if (!event || !event->enabled)
    return {nullptr, nullptr};
  Ring *ring = ringOf(*event);
  if (!ring || !ring->aux)
    return {nullptr, nullptr};
  return {event, ring};
}

void FakeKernel::mapExecutable(uint32_t tid, unsigned cpu, uint64_t timeNs,
                               uint64_t address, uint64_t size,
                               const std::string &path) {
  std::unique_lock<std::mutex> guard(mutex);
  auto [event, ring] = runningOn(tid, cpu);
  if (!event || !event->attr.mmap || !event->attr.mmap2)
    return;
  constexpr uint64_t ProtReadExec = 0x1 | 0x4, MapPrivate = 0x2;
  std::vector<uint64_t> words = {uint64_t(pidOf[tid]) | uint64_t(tid) << 32,
                                 address,
                                 size,
                                 0, // pgoff
                                 0,
                                 0,
                                 0, // maj, min, ino, ino_generation
                                 ProtReadExec | MapPrivate << 32};
  // The file name, NUL-terminated and padded to 8 bytes.
  std::vector<uint8_t> name(path.begin(), path.end());
  name.resize((name.size() + 8) & ~size_t(7), 0);
  for (size_t at = 0; at < name.size(); at += 8) {
    uint64_t word = 0;
    std::memcpy(&word, name.data() + at, 8);
    words.push_back(word);
  }
  emit(*ring, *event, kRecordMmap2, words, tid, timeNs);
}

void FakeKernel::run(uint32_t tid, unsigned cpu, llvm::ArrayRef<uint8_t> bytes,
                     uint64_t auxFlags) {
  std::unique_lock<std::mutex> guard(mutex);
  auto [event, ring] = runningOn(tid, cpu);
  if (!event)
    return;
  ++clock;
  if (!event->itraceStarted) {
    event->itraceStarted = true;
    emit(*ring, *event, kRecordItraceStart,
         {uint64_t(pidOf[tid]) | uint64_t(tid) << 32}, tid);
  }
  // The hardware writes on at aux_head, overwriting the oldest bytes; in
  // snapshot mode the driver keeps aux_head an offset in the ring.
  uint64_t head = ring->page().aux_head;
  for (uint8_t byte : bytes)
    ring->aux[head++ & (ring->auxSize - 1)] = byte;
  head &= ring->auxSize - 1;
  __atomic_store_n(&ring->page().aux_head, head, __ATOMIC_RELEASE);
  // pt_event_stop in snapshot mode: PERF_RECORD_AUX {aux_head, the whole
  // buffer, OVERWRITE | what went wrong}.
  emit(*ring, *event, kRecordAux,
       {head, ring->auxSize, kAuxFlagOverwrite | auxFlags}, tid);
  letReaderRun(guard, *ring);
}

llvm::ErrorOr<unsigned> FakeKernel::poll(llvm::MutableArrayRef<pollfd> fds,
                                         int timeoutMs) {
  std::unique_lock<std::mutex> guard(mutex);
  auto pending = [&] {
    for (const pollfd &entry : fds) {
      Event *event = eventOf(entry.fd);
      Ring *ring = event ? ringOf(*event) : nullptr;
      if (!event || (ring && ring->pollPending))
        return true;
    }
    return false;
  };
  if (timeoutMs < 0)
    woken.wait(guard, pending);
  else
    woken.wait_for(guard, std::chrono::milliseconds(timeoutMs), pending);
  unsigned ready = 0;
  for (pollfd &entry : fds) {
    entry.revents = 0;
    Event *event = eventOf(entry.fd);
    Ring *ring = event ? ringOf(*event) : nullptr;
    if (!event)
      entry.revents = POLLNVAL;
    // perf_poll: atomic_xchg(&rb->poll, 0), so one of the ring's events
    // reports it.
    else if (ring && ring->pollPending && (entry.events & POLLIN)) {
      entry.revents = POLLIN;
      ring->pollPending = false;
    }
    ready += entry.revents != 0;
  }
  return ready;
}

void FakeKernel::dropRecords(unsigned cpu, unsigned count) {
  std::lock_guard<std::mutex> guard(mutex);
  for (const auto &ring : rings)
    if (ring->cpu == cpu)
      ring->dropping += count;
}

uint64_t FakeKernel::lockedBytes() const {
  std::lock_guard<std::mutex> guard(mutex);
  return (userLockedPages + pinnedPages) * options.pageSize;
}

std::map<unsigned, uint64_t> FakeKernel::auxSizes() const {
  std::lock_guard<std::mutex> guard(mutex);
  std::map<unsigned, uint64_t> sizes;
  for (const auto &ring : rings)
    if (ring->aux)
      sizes[ring->cpu] = ring->auxSize;
  return sizes;
}

} // namespace magic_trace::testing
