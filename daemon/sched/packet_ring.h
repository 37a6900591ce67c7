// Fixed-capacity FIFO of packet references for one flow's pacer queue.
// Capacity is a power of two fixed at construction; push fails when full.
// Single owner (the engine lcore); no allocation after construction.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

namespace conduit::sched {

// What the scheduler knows about a packet: its length for pacing and DWRR,
// and an opaque tag the caller uses to find it (a PSN, a buffer index...).
struct PacketRef {
  uint32_t len_bytes = 0;
  uint32_t tag = 0;
};

class PacketRing {
 public:
  PacketRing() : PacketRing(0) {}
  explicit PacketRing(uint32_t capacity)
      : slots_(capacity == 0 ? 0 : std::bit_ceil(capacity)),
        mask_(slots_.empty() ? 0 : static_cast<uint32_t>(slots_.size() - 1)) {}

  bool empty() const { return head_ == tail_; }
  uint32_t size() const { return tail_ - head_; }  // free-running counters
  uint32_t capacity() const { return static_cast<uint32_t>(slots_.size()); }
  bool push(PacketRef p) {
    if (size() == capacity()) return false;
    slots_[tail_++ & mask_] = p;
    return true;
  }
  const PacketRef& front() const { return slots_[head_ & mask_]; }
  PacketRef pop() { return slots_[head_++ & mask_]; }
  void clear() { head_ = tail_; }

 private:
  std::vector<PacketRef> slots_;
  uint32_t mask_;
  uint32_t head_ = 0;
  uint32_t tail_ = 0;
};

}  // namespace conduit::sched
