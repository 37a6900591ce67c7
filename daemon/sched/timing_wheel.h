// A single-level timing wheel of ids (flows) keyed by an absolute time.
//
// Slots are slot_ns wide; num_slots (a power of two) of them cover the
// horizon. An id scheduled beyond the horizon is parked in the farthest slot
// and handed back when that slot expires; the caller re-inserts it (a slow
// flow costs one extra insert per horizon lap). Insert, remove and the
// expiry of each id are O(1); finding the next occupied slot scans a bitmap
// (num_slots/64 words at worst).
//
// Links are intrusive arrays indexed by id, so no allocation happens after
// reserve_ids(). Thread role: single owner (the engine lcore).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace conduit::sched {

inline constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

class TimingWheel {
 public:
  // slot_ns >= 1; num_slots a power of two >= 64. start_ns: the wheel expires
  // nothing before this time.
  TimingWheel(uint32_t slot_ns, uint32_t num_slots, uint64_t start_ns = 0);

  // Ids must be < the reserved count. Setup path (allocates).
  void reserve_ids(uint32_t count);

  // Schedules id (not already in the wheel) at when_ns. A time before the
  // current slot goes into the current slot.
  void insert(uint32_t id, uint64_t when_ns);
  void remove(uint32_t id);
  bool contains(uint32_t id) const { return id < slot_of_.size() && slot_of_[id] != kNone; }

  // Removes every id whose slot starts at or before now_ns and calls fn(id)
  // for each, in slot order. fn may insert ids (including the one passed).
  template <typename Fn>
  void expire(uint64_t now_ns, Fn&& fn);

  // Start time of the first occupied slot, or kNever if the wheel is empty.
  uint64_t next_expiry_ns() const;

  uint32_t slot_ns() const { return slot_ns_; }
  uint64_t horizon_ns() const { return uint64_t{slot_ns_} * num_slots_; }
  uint32_t size() const { return size_; }

 private:
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  // Detaches the list of slot idx and returns its head.
  uint32_t take_slot(uint32_t idx);
  int64_t find_occupied_from(uint32_t idx) const;  // distance to first occupied slot, or -1

  uint32_t slot_ns_;
  uint32_t num_slots_;
  uint32_t mask_;
  uint64_t cursor_;  // absolute index of the earliest slot not yet expired
  uint32_t size_ = 0;
  std::vector<uint32_t> head_;     // per slot
  std::vector<uint64_t> bitmap_;   // per slot: occupied
  std::vector<uint32_t> next_;     // per id
  std::vector<uint32_t> prev_;     // per id
  std::vector<uint32_t> slot_of_;  // per id, kNone when absent
};

template <typename Fn>
void TimingWheel::expire(uint64_t now_ns, Fn&& fn) {
  const uint64_t target = now_ns / slot_ns_;
  while (cursor_ <= target && size_ > 0) {
    const int64_t d = find_occupied_from(static_cast<uint32_t>(cursor_ & mask_));
    if (d < 0 || cursor_ + static_cast<uint64_t>(d) > target) break;
    cursor_ += static_cast<uint64_t>(d);
    uint32_t id = take_slot(static_cast<uint32_t>(cursor_ & mask_));
    ++cursor_;  // re-inserts during fn land at the new cursor or later
    while (id != kNone) {
      const uint32_t next = next_[id];
      fn(id);
      id = next;
    }
  }
  if (cursor_ <= target) cursor_ = target + 1;
}

}  // namespace conduit::sched
