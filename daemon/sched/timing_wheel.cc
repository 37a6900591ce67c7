#include "sched/timing_wheel.h"

#include <bit>

namespace conduit::sched {

TimingWheel::TimingWheel(uint32_t slot_ns, uint32_t num_slots, uint64_t start_ns)
    : slot_ns_(slot_ns == 0 ? 1 : slot_ns),
      num_slots_(std::bit_ceil(num_slots < 64 ? 64u : num_slots)),
      mask_(num_slots_ - 1),
      cursor_(start_ns / slot_ns_),
      head_(num_slots_, kNone),
      bitmap_(num_slots_ / 64, 0) {}

void TimingWheel::reserve_ids(uint32_t count) {
  if (count <= slot_of_.size()) return;
  next_.resize(count, kNone);
  prev_.resize(count, kNone);
  slot_of_.resize(count, kNone);
}

void TimingWheel::insert(uint32_t id, uint64_t when_ns) {
  uint64_t abs = when_ns / slot_ns_;
  if (abs < cursor_) abs = cursor_;
  if (abs >= cursor_ + num_slots_) abs = cursor_ + num_slots_ - 1;  // park at the horizon
  const auto idx = static_cast<uint32_t>(abs & mask_);
  const uint32_t old = head_[idx];
  next_[id] = old;
  prev_[id] = kNone;
  if (old != kNone) prev_[old] = id;
  head_[idx] = id;
  slot_of_[id] = idx;
  bitmap_[idx / 64] |= uint64_t{1} << (idx % 64);
  ++size_;
}

void TimingWheel::remove(uint32_t id) {
  const uint32_t idx = slot_of_[id];
  if (idx == kNone) return;
  if (prev_[id] != kNone) {
    next_[prev_[id]] = next_[id];
  } else {
    head_[idx] = next_[id];
  }
  if (next_[id] != kNone) prev_[next_[id]] = prev_[id];
  if (head_[idx] == kNone) bitmap_[idx / 64] &= ~(uint64_t{1} << (idx % 64));
  slot_of_[id] = kNone;
  --size_;
}

uint32_t TimingWheel::take_slot(uint32_t idx) {
  const uint32_t h = head_[idx];
  head_[idx] = kNone;
  bitmap_[idx / 64] &= ~(uint64_t{1} << (idx % 64));
  for (uint32_t id = h; id != kNone; id = next_[id]) {
    slot_of_[id] = kNone;
    --size_;
  }
  return h;
}

int64_t TimingWheel::find_occupied_from(uint32_t idx) const {
  const auto words = static_cast<uint32_t>(bitmap_.size());
  uint32_t w = idx / 64;
  uint64_t bits = bitmap_[w] & (~uint64_t{0} << (idx % 64));
  for (uint32_t i = 0; i <= words; ++i) {
    if (bits != 0) {
      const uint32_t found = w * 64 + static_cast<uint32_t>(std::countr_zero(bits));
      return static_cast<int64_t>((found - idx) & mask_);
    }
    w = (w + 1) % words;
    bits = bitmap_[w];
    // Back at the first word: only the slots before idx are left.
    if (i + 1 == words) bits &= (idx % 64 == 0) ? 0 : ((uint64_t{1} << (idx % 64)) - 1);
  }
  return -1;
}

uint64_t TimingWheel::next_expiry_ns() const {
  if (size_ == 0) return kNever;
  const int64_t d = find_occupied_from(static_cast<uint32_t>(cursor_ & mask_));
  if (d < 0) return kNever;
  return (cursor_ + static_cast<uint64_t>(d)) * slot_ns_;
}

}  // namespace conduit::sched
