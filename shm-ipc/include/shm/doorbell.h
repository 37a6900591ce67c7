// Doorbells: a wakeup descriptor plus a needs-wakeup flag in shared memory
// (conduit_shm_wakeup, layout.h), so a busy producer never makes a syscall
// and an idle consumer can sleep.
//
// Protocol (Dekker style; both fences are needed):
//
//   consumer, before sleeping                 producer, after enqueue
//   -------------------------                 -----------------------
//   flag = 1                      (W1)        publish prod (release)      (P1)
//   fence(seq_cst)                (F1)        fence(seq_cst)              (F2)
//   if ring not empty: flag = 0, run          if flag != 0: flag = 0, kick descriptor
//   else poll(descriptor, timeout); flag = 0
//
// Without (F1) and (F2) each side's load may be satisfied before its own
// earlier store is visible to the other (store buffering, allowed even on
// x86): the consumer sees the ring empty and the producer sees the flag clear,
// and the wakeup is lost. With both seq_cst fences at least one side sees the
// other's store, so either the consumer finds the entry or the producer kicks.
// The producer clears the flag with an exchange so one arming yields at most
// one kick; a hostile client that keeps re-arming a CQ flag costs the engine at
// most one write per completion for that client's own CQ.
//
// Between conduitd and a client the descriptor is a WakeFd (below): never
// one whose open file description both processes share.
//
// Who sleeps where:
//   engine  consumes every client's SQ/RQ; arms the region's engine line and
//           sleeps on the clients' doorbells (ppoll). Clients call
//           producer_should_kick(engine line) after posting.
//   client  consumes its CQ; arms the CQ's line and waits on the CQ's wakeup
//           pipe with wait_for_entries(). The engine calls
//           producer_should_kick() on that line after publishing CQEs.
#pragma once

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>

#include "shm/layout.h"
#include "shm/spsc_ring.h"

namespace conduit::shm {

// Consumer side: (W1) + (F1). Call, then re-check the ring before sleeping.
inline void consumer_arm_wakeup(conduit_shm_wakeup* w) {
  std::atomic_ref<uint32_t>(w->needs_wakeup).store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // (F1) pairs with (F2)
}

// Consumer side: after waking or when the re-check found work.
inline void consumer_disarm_wakeup(conduit_shm_wakeup* w) {
  std::atomic_ref<uint32_t>(w->needs_wakeup).store(0, std::memory_order_relaxed);
}

// Producer side, after the enqueue that published prod: (F2), then the flag
// check. True means "kick the consumer's descriptor now".
inline bool producer_should_kick(conduit_shm_wakeup* w) {
  std::atomic_thread_fence(std::memory_order_seq_cst);  // (F2) pairs with (F1)
  std::atomic_ref<uint32_t> flag(w->needs_wakeup);
  if (flag.load(std::memory_order_relaxed) == 0) return false;  // common case: no RMW
  return flag.exchange(0, std::memory_order_relaxed) != 0;
}

// A CQ overrun (conduit_shm_wakeup.cqes_lost, layout.h). The engine, after an enqueue
// that found the ring full: stores its own running count of the CQ's lost completions
// (never read back from the region: the client can write anything there), with release,
// before its producer_should_kick (whose fence then orders it before the flag check, as
// (P1) is: a client that armed the line sees the count or is kicked).
inline void producer_store_lost(conduit_shm_wakeup* w, uint32_t lost_total) {
  std::atomic_ref<uint32_t>(w->cqes_lost).store(lost_total, std::memory_order_release);
}
// The client: acquire, paired with the store above. Load it before looking at the ring:
// if the ring is empty then, every completion the engine wrote before the loss was taken.
inline uint32_t consumer_load_lost(conduit_shm_wakeup* w) {
  return std::atomic_ref<uint32_t>(w->cqes_lost).load(std::memory_order_acquire);
}

// A descriptor closed with its owner. Move-only.
class OwnedFd {
 public:
  OwnedFd() = default;
  explicit OwnedFd(int fd) : fd_(fd) {}  // adopts fd
  ~OwnedFd();
  OwnedFd(OwnedFd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  OwnedFd& operator=(OwnedFd&& other) noexcept;
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 protected:
  // Waits until the descriptor is readable or timeout_ms passes (-1: forever; EINTR is
  // retried). 1 readable, 0 timed out, -EBADF on POLLERR/POLLNVAL, -errno.
  int poll_readable(int timeout_ms) const;

  int fd_ = -1;
};

// An owned eventfd (non-blocking, close-on-exec), for wakeups within one
// process (conduitd's engine and control threads). Move-only.
class EventFd : public OwnedFd {
 public:
  EventFd() = default;
  explicit EventFd(int fd) : OwnedFd(fd) {}  // adopts fd

  // 0 or -errno.
  static int create(EventFd* out);

  // Adds 1 to the counter. 0 or -errno (a saturated counter counts as success).
  int kick() const;
  // Reads and resets the counter without blocking; returns the count (0 if none).
  uint64_t drain() const { return drain_fd(fd_); }
  // The same for an eventfd owned elsewhere (never one another process holds).
  static uint64_t drain_fd(int fd);
  // Waits until the counter is non-zero or timeout_ms passes (-1: forever),
  // then drains it. 1 woken, 0 timed out, -errno (EINTR is retried).
  int wait(int timeout_ms) const;
};

// One end of a one-way wakeup channel between conduitd and a client, which
// conduitd creates, keeping one end and handing the other over. The two ends
// are two open file descriptions, so what the client does to its end (clear
// O_NONBLOCK, fill it, close it) cannot make conduitd's calls block. (A shared
// eventfd would not do: its O_NONBLOCK lives in the one description both
// processes hold, and a client that cleared it could stall conduitd's write
// on a counter it filled to the maximum, or its read on an empty one.)
//   conduitd -> client (a CQ's wakeup, the CM events): a pipe, the cheaper
//     of the two (a same-core wake-up costs about 0.3 us more than an eventfd's,
//     a socket's 1.7 us; BENCHMARKS.md). Its writer must ignore SIGPIPE
//     (conduitd does): a write whose reader has gone raises it.
//   client -> conduitd (the engine's doorbell): a Unix stream socketpair,
//     whose writer sends with MSG_NOSIGNAL: a client whose conduitd has gone
//     gets -EPIPE, not a SIGPIPE that would end the application.
// Move-only.
class WakeFd : public OwnedFd {
 public:
  enum class Kind : uint8_t { kPipe, kSocket };
  WakeFd() = default;
  WakeFd(int fd, Kind kind) : OwnedFd(fd), kind_(kind) {}  // adopts fd

  // Both ends of a new channel (non-blocking, close-on-exec): `writer` kicks,
  // `reader` drains and polls. 0 or -errno.
  static int create(Kind kind, WakeFd* writer, WakeFd* reader);

  int kick() const { return kind_ == Kind::kSocket ? kick_socket(fd_) : kick_pipe(fd_); }
  int64_t drain() const { return drain(fd_); }
  // Waits until a kick is pending or timeout_ms passes (-1: forever), then
  // drains. 1 woken, 0 timed out, -EPIPE when the writer is gone, -errno.
  int wait(int timeout_ms) const;

  // For descriptors owned elsewhere (the engine's copies). A kick writes one
  // byte: 0, also when the channel is full (the reader has bytes pending, so
  // it is woken already); -EPIPE when the reader is gone; -errno.
  static int kick_pipe(int fd);
  static int kick_socket(int fd);
  // Reads what is pending, at most 4 KiB per call: the bytes read (kicks), 0
  // if none, -EPIPE when the writer is gone and nothing is pending (the
  // descriptor then stays readable for ever: stop polling it), -errno.
  static int64_t drain(int fd);

 private:
  Kind kind_ = Kind::kPipe;
};

// Blocks until `ring` has entries, or timeout_ms passes (-1: forever), using
// the protocol above. Returns the number of entries available (> 0), 0 on
// timeout, -EPIPE if the ring's producer index is impossible, or -errno from
// the descriptor. Spins first for spin_polls re-checks (cheap when busy).
// Wake is EventFd or WakeFd.
template <class T, class Wake>
int wait_for_entries(SpscConsumer<T>& ring, conduit_shm_wakeup* w, const Wake& efd, int timeout_ms,
                     uint32_t spin_polls = 64) {
  for (uint32_t i = 0; i < spin_polls; ++i) {
    if (const uint32_t n = ring.available(); n > 0) return static_cast<int>(n);
    if (ring.broken()) return -EPIPE;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    consumer_arm_wakeup(w);  // (W1)+(F1), then the re-check below
    const uint32_t n = ring.available();
    if (n > 0 || ring.broken()) {
      consumer_disarm_wakeup(w);
      return ring.broken() ? -EPIPE : static_cast<int>(n);
    }
    int wait_ms = timeout_ms;
    if (timeout_ms >= 0) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      wait_ms = left.count() > 0 ? static_cast<int>(left.count()) : 0;
    }
    const int rc = efd.wait(wait_ms);
    consumer_disarm_wakeup(w);
    if (rc < 0) return rc;
    if (const uint32_t m = ring.available(); m > 0) return static_cast<int>(m);
    if (ring.broken()) return -EPIPE;
    if (rc == 0 || (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline)) return 0;
    // Woken by a kick for entries we already consumed, or spuriously: sleep again.
  }
}

}  // namespace conduit::shm
