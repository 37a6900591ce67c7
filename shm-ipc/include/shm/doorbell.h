// Doorbells: an eventfd plus a needs-wakeup flag in shared memory
// (conduit_shm_wakeup, layout.h), so a busy producer never makes a syscall
// and an idle consumer can sleep.
//
// Protocol (Dekker style; both fences are needed):
//
//   consumer, before sleeping                 producer, after enqueue
//   -------------------------                 -----------------------
//   flag = 1                      (W1)        publish prod (release)      (P1)
//   fence(seq_cst)                (F1)        fence(seq_cst)              (F2)
//   if ring not empty: flag = 0, run          if flag != 0: flag = 0, kick eventfd
//   else poll(eventfd, timeout); flag = 0
//
// Without (F1) and (F2) each side's load may be satisfied before its own
// earlier store is visible to the other (store buffering, allowed even on
// x86): the consumer sees the ring empty and the producer sees the flag clear,
// and the wakeup is lost. With both seq_cst fences at least one side sees the
// other's store, so either the consumer finds the entry or the producer kicks.
// The producer clears the flag with an exchange so one arming yields at most
// one kick; a hostile client that keeps re-arming a CQ flag costs the engine at
// most one eventfd write per completion for that client's own CQ.
//
// Who sleeps where:
//   engine  consumes every client's SQ/RQ; arms the region's engine line and
//           sleeps on the clients' doorbell eventfds (epoll). Clients call
//           producer_should_kick(engine line) after posting.
//   client  consumes its CQ; arms the CQ's line and waits on the CQ's eventfd
//           with wait_for_entries(). The engine calls producer_should_kick()
//           on that line after publishing CQEs.
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
// check. True means "write to the consumer's eventfd now".
inline bool producer_should_kick(conduit_shm_wakeup* w) {
  std::atomic_thread_fence(std::memory_order_seq_cst);  // (F2) pairs with (F1)
  std::atomic_ref<uint32_t> flag(w->needs_wakeup);
  if (flag.load(std::memory_order_relaxed) == 0) return false;  // common case: no RMW
  return flag.exchange(0, std::memory_order_relaxed) != 0;
}

// An owned eventfd (non-blocking, close-on-exec). Move-only.
class EventFd {
 public:
  EventFd() = default;
  explicit EventFd(int fd) : fd_(fd) {}  // adopts fd
  ~EventFd();
  EventFd(EventFd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  EventFd& operator=(EventFd&& other) noexcept;
  EventFd(const EventFd&) = delete;
  EventFd& operator=(const EventFd&) = delete;

  // 0 or -errno.
  static int create(EventFd* out);

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Adds 1 to the counter. 0 or -errno (a saturated counter counts as success).
  int kick() const;
  // Reads and resets the counter without blocking; returns the count (0 if none).
  uint64_t drain() const;
  // Waits until the counter is non-zero or timeout_ms passes (-1: forever),
  // then drains it. 1 woken, 0 timed out, -errno (EINTR is retried).
  int wait(int timeout_ms) const;

  // For an eventfd another process holds too (the daemon's side of a client's
  // wakeup descriptors). O_NONBLOCK lives in the open file description that
  // both share, so the other process can clear it, and the eventfd's own
  // read and write calls would then block (on an empty counter, or one it
  // filled to its maximum). These never block on a counter:
  // Adds 1 to fd's counter. 0 (also when the counter is at its maximum: the
  // reader is woken already), -EPERM when fd is not an eventfd or the shared
  // flags lost O_NONBLOCK (the caller stops using fd: its holder tampered
  // with it), or -errno. The check and the write are two calls: a holder
  // that sets O_NONBLOCK back and forth between them while its counter sits
  // at the maximum can still stall the write.
  static int kick_shared(int fd);
  // Reads and resets fd's counter (preadv2 with RWF_NOWAIT, which an eventfd
  // honours whatever its flags say, from Linux 5.12; a plain read before);
  // the count, 0 if none or on error.
  static uint64_t drain_shared(int fd);
  // Whether fd is an eventfd (what a client must hand over as one).
  static bool is_eventfd(int fd);

 private:
  int fd_ = -1;
};

// Blocks until `ring` has entries, or timeout_ms passes (-1: forever), using
// the protocol above. Returns the number of entries available (> 0), 0 on
// timeout, -EPIPE if the ring's producer index is impossible, or -errno from
// the eventfd. Spins first for spin_polls re-checks (cheap when busy).
template <class T>
int wait_for_entries(SpscConsumer<T>& ring, conduit_shm_wakeup* w, const EventFd& efd,
                     int timeout_ms, uint32_t spin_polls = 64) {
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
