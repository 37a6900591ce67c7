// Single-producer single-consumer ring over a conduit_shm_ring_ctrl and a slot
// array, both in shared memory (see layout.h).
//
// Thread roles: one SpscProducer and one SpscConsumer per ring, each used by a
// single thread (possibly in different processes). Neither class is
// thread-safe on its own.
//
// Indices are free-running uint32_t: they wrap at 2^32 and are masked with
// capacity - 1 only to address a slot, so prod - cons (mod 2^32) is always the
// fill level. Capacity is a power of two <= 2^31.
//
// Each side keeps its own index privately and only ever *stores* it to shared
// memory; it never reads it back. It reads the other side's index only to
// refresh a private cache (cached_cons_ / cached_prod_), and only when the
// cache says there is not enough room / not enough entries. A peer that
// writes garbage into its index therefore cannot move ours; the garbage is
// caught by the sanity check `0 <= prod - cons <= capacity` and the handle
// becomes broken() (sticky; every later call returns 0). The daemon then
// disconnects the client.
//
// Consumers copy entries out into the caller's array (no pointer into shared
// memory is ever handed out) and each index is loaded once per refresh, so the
// daemon always validates a private copy ("copy, then validate"). A hostile
// producer may rewrite a slot while it is being copied; the copy may then be
// torn, which is harmless because only the copy is validated and used.
//
// Orderings (each acquire names the release it pairs with):
//   (P1) producer: stores to slots, then prod.store(release)
//   (C1) consumer: prod.load(acquire)  -- pairs with (P1): slots written before
//        the producer published prod are visible to the consumer's copy.
//   (C2) consumer: copies slots, then cons.store(release)
//   (P2) producer: cons.load(acquire)  -- pairs with (C2): the consumer's reads
//        of a slot are finished before the producer overwrites it.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "shm/layout.h"

namespace conduit::shm {

static_assert(std::atomic_ref<uint32_t>::is_always_lock_free,
              "shared-memory indices need lock-free 32-bit atomics");
static_assert(std::atomic_ref<uint32_t>::required_alignment <= alignof(uint32_t));

constexpr bool is_pow2(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

// The one sanity rule for a pair of free-running indices: the fill level
// prod - cons (mod 2^32) is between 0 and capacity. Anything else means the
// peer wrote an impossible index.
constexpr bool ring_indices_sane(uint32_t prod, uint32_t cons, uint32_t capacity) {
  return prod - cons <= capacity;
}

// The ring's two indices as the other side last published them. Used by
// tests, tools and the client at QP/CQ creation; not on the fast path.
inline uint32_t load_prod(const conduit_shm_ring_ctrl* ctrl) {
  // Pairs with (P1).
  return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(ctrl->prod))
      .load(std::memory_order_acquire);
}
inline uint32_t load_cons(const conduit_shm_ring_ctrl* ctrl) {
  // Pairs with (C2).
  return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(ctrl->cons))
      .load(std::memory_order_acquire);
}

// Empties the ring and sets both indices to start_index. Only while neither
// side is using the ring (the daemon does this before handing a QP/CQ slot to
// the client). A start near 2^32 exercises wrap-around in tests.
inline void reset_ring(conduit_shm_ring_ctrl* ctrl, uint32_t start_index) {
  std::atomic_ref<uint32_t>(ctrl->prod).store(start_index, std::memory_order_relaxed);
  std::atomic_ref<uint32_t>(ctrl->cons).store(start_index, std::memory_order_release);
}

template <class T>
class SpscProducer {
  static_assert(std::is_trivially_copyable_v<T>, "ring entries are copied with memcpy");

 public:
  SpscProducer() = default;
  // ctrl and slots must stay mapped while the producer is used. capacity must
  // be a power of two (callers take it from their own copy of the layout).
  // start_index is the ring's current (empty) index, as set by reset_ring.
  SpscProducer(conduit_shm_ring_ctrl* ctrl, T* slots, uint32_t capacity, uint32_t start_index)
      : ctrl_(ctrl),
        slots_(slots),
        mask_(capacity - 1),
        prod_(start_index),
        cached_cons_(start_index),
        broken_(!is_pow2(capacity) || capacity > (1u << 31)) {}

  // Copies up to n entries from src into the ring; returns how many (0..n).
  // Partial when the ring is nearly full; 0 when full or broken().
  uint32_t enqueue_burst(const T* src, uint32_t n) {
    if (broken_) return 0;
    const uint32_t capacity = mask_ + 1;
    uint32_t free_slots = capacity - (prod_ - cached_cons_);
    if (free_slots < n) {
      const uint32_t cons =
          std::atomic_ref<uint32_t>(ctrl_->cons)
              .load(std::memory_order_acquire);         // (P2) pairs with the consumer's (C2)
      if (!ring_indices_sane(prod_, cons, capacity)) {  // consumer read what was never written
        broken_ = true;
        return 0;
      }
      cached_cons_ = cons;
      free_slots = capacity - (prod_ - cons);
    }
    if (n > free_slots) n = free_slots;
    if (n == 0) return 0;
    copy_in(prod_ & mask_, src, n);
    prod_ += n;
    // (P1) publishes the slots written above; pairs with the consumer's (C1).
    std::atomic_ref<uint32_t>(ctrl_->prod).store(prod_, std::memory_order_release);
    return n;
  }

  bool try_enqueue(const T& entry) { return enqueue_burst(&entry, 1) == 1; }

  // Free slots, refreshing the cached consumer index (one shared load).
  uint32_t free_count() {
    if (broken_) return 0;
    const uint32_t cons = std::atomic_ref<uint32_t>(ctrl_->cons)
                              .load(std::memory_order_acquire);  // (P2) pairs with (C2)
    if (!ring_indices_sane(prod_, cons, mask_ + 1)) {
      broken_ = true;
      return 0;
    }
    cached_cons_ = cons;
    return mask_ + 1 - (prod_ - cons);
  }

  // True once the consumer's index was impossible; sticky.
  bool broken() const { return broken_; }
  uint32_t capacity() const { return mask_ + 1; }
  uint32_t prod_index() const { return prod_; }

 private:
  // Per-entry fixed-size copies: inlined and vectorised. A compiler may
  // still merge such a loop into one memcpy call of variable length (GCC 12
  // does at -O2), which is fine for a burst but for a single entry costs more
  // than the copy; one entry (never wrapping) is therefore copied on its own.
  void copy_in(uint32_t slot, const T* src, uint32_t n) {
    if (n == 1) {
      std::memcpy(static_cast<void*>(slots_ + slot), src, sizeof(T));
      return;
    }
    const uint32_t first = n < mask_ + 1 - slot ? n : mask_ + 1 - slot;
    for (uint32_t i = 0; i < first; ++i) {
      std::memcpy(static_cast<void*>(slots_ + slot + i), src + i, sizeof(T));
    }
    for (uint32_t i = first; i < n; ++i) {
      std::memcpy(static_cast<void*>(slots_ + (i - first)), src + i, sizeof(T));
    }
  }

  conduit_shm_ring_ctrl* ctrl_ = nullptr;
  T* slots_ = nullptr;
  uint32_t mask_ = 0;
  uint32_t prod_ = 0;         // authoritative; never read back from shm
  uint32_t cached_cons_ = 0;  // last consumer index seen
  bool broken_ = true;        // a default-constructed handle does nothing
};

template <class T>
class SpscConsumer {
  static_assert(std::is_trivially_copyable_v<T>, "ring entries are copied with memcpy");

 public:
  SpscConsumer() = default;
  SpscConsumer(conduit_shm_ring_ctrl* ctrl, const T* slots, uint32_t capacity, uint32_t start_index)
      : ctrl_(ctrl),
        slots_(slots),
        mask_(capacity - 1),
        cons_(start_index),
        cached_prod_(start_index),
        broken_(!is_pow2(capacity) || capacity > (1u << 31)) {}

  // Copies up to n entries into dst (private memory) and frees their slots;
  // returns how many (0..n). 0 when empty or broken(). The caller validates
  // the copies; the producer may already be overwriting the slots.
  uint32_t dequeue_burst(T* dst, uint32_t n) {
    if (broken_) return 0;
    uint32_t avail = cached_prod_ - cons_;
    if (avail < n) {
      if (!refresh()) return 0;
      avail = cached_prod_ - cons_;
    }
    if (n > avail) n = avail;
    if (n == 0) return 0;
    copy_out(cons_ & mask_, dst, n);
    cons_ += n;
    // (C2) our copies are done before the slots are handed back; pairs with
    // the producer's (P2).
    std::atomic_ref<uint32_t>(ctrl_->cons).store(cons_, std::memory_order_release);
    return n;
  }

  bool try_dequeue(T* dst) { return dequeue_burst(dst, 1) == 1; }

  // Entries ready, refreshing the cached producer index (one shared load).
  // Used before sleeping, after arming the wakeup flag (doorbell.h).
  uint32_t available() {
    if (broken_ || !refresh()) return 0;
    return cached_prod_ - cons_;
  }

  // True once the producer's index was impossible; sticky.
  bool broken() const { return broken_; }
  uint32_t capacity() const { return mask_ + 1; }
  uint32_t cons_index() const { return cons_; }

 private:
  bool refresh() {
    // (C1) pairs with the producer's (P1). Read once into a local: a hostile
    // producer may change it again at any time.
    const uint32_t prod = std::atomic_ref<uint32_t>(ctrl_->prod).load(std::memory_order_acquire);
    if (!ring_indices_sane(prod, cons_,
                           mask_ + 1)) {  // more entries than slots, or prod behind cons
      broken_ = true;
      return false;
    }
    cached_prod_ = prod;
    return true;
  }

  void copy_out(uint32_t slot, T* dst, uint32_t n) const {
    if (n == 1) {  // see copy_in
      std::memcpy(static_cast<void*>(dst), slots_ + slot, sizeof(T));
      return;
    }
    const uint32_t first = n < mask_ + 1 - slot ? n : mask_ + 1 - slot;
    for (uint32_t i = 0; i < first; ++i) {
      std::memcpy(static_cast<void*>(dst + i), slots_ + slot + i, sizeof(T));
    }
    for (uint32_t i = first; i < n; ++i) {
      std::memcpy(static_cast<void*>(dst + i), slots_ + (i - first), sizeof(T));
    }
  }

  conduit_shm_ring_ctrl* ctrl_ = nullptr;
  const T* slots_ = nullptr;
  uint32_t mask_ = 0;
  uint32_t cons_ = 0;         // authoritative; never read back from shm
  uint32_t cached_prod_ = 0;  // last producer index seen (validated)
  bool broken_ = true;
};

}  // namespace conduit::shm
