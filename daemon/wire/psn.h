// 24-bit packet sequence number arithmetic (InfiniBand BTH PSN).
//
// PSNs wrap at 2^24. Two PSNs are ordered by the sign of their 24-bit
// difference, as rxe does with (int32)((a - b) << 8); the comparison is
// meaningful while the two are less than 2^23 apart, which the send window
// guarantees.
#pragma once

#include <cstdint>

namespace conduit::wire {

inline constexpr uint32_t kPsnMask = 0xFFFFFF;
inline constexpr uint32_t kPsnHalfRange = 1u << 23;

// A PSN is always kept reduced to 24 bits.
constexpr uint32_t psn_mask(uint32_t v) { return v & kPsnMask; }
constexpr uint32_t psn_add(uint32_t psn, uint32_t n) { return psn_mask(psn + n); }
constexpr uint32_t psn_next(uint32_t psn) { return psn_add(psn, 1); }

// Signed distance a - b in the 24-bit circle, in [-2^23, 2^23).
constexpr int32_t psn_diff(uint32_t a, uint32_t b) {
  // Shift the 24-bit difference into the top of a 32-bit word so the
  // two's-complement sign bit is the 24-bit sign bit, then shift back.
  return static_cast<int32_t>((a - b) << 8) >> 8;
}

constexpr bool psn_lt(uint32_t a, uint32_t b) { return psn_diff(a, b) < 0; }
constexpr bool psn_le(uint32_t a, uint32_t b) { return psn_diff(a, b) <= 0; }
constexpr bool psn_gt(uint32_t a, uint32_t b) { return psn_diff(a, b) > 0; }
constexpr bool psn_ge(uint32_t a, uint32_t b) { return psn_diff(a, b) >= 0; }

// True when lo <= psn < hi in modular order (an empty range when lo == hi).
constexpr bool psn_in_range(uint32_t psn, uint32_t lo, uint32_t hi) {
  return psn_mask(psn - lo) < psn_mask(hi - lo);
}

}  // namespace conduit::wire
