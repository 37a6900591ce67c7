// The bytes --check sends and expects: a pseudo-random stream per message.
//
// Byte i of the message with seed s is byte (i % 8) of splitmix64(s + i / 8),
// so a payload that arrives shifted, truncated, stale (an older message's
// seed) or from the wrong slot compares unequal. Seeds name (QP, message
// number), see payload_seed().
#pragma once

#include <cstddef>
#include <cstdint>

namespace conduit::perf {

// Distinct for every (qp_index, sequence) pair a run can produce.
inline uint64_t payload_seed(uint32_t qp_index, uint64_t sequence) {
  return (static_cast<uint64_t>(qp_index) << 44) ^ (sequence * 0x9E3779B97F4A7C15ull);
}

void fill_pattern(uint8_t* dst, size_t len_bytes, uint64_t seed);
// True when dst holds exactly the pattern of `seed`.
bool check_pattern(const uint8_t* src, size_t len_bytes, uint64_t seed);

}  // namespace conduit::perf
