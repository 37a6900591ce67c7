#include "payload_pattern.h"

#include <cstring>

namespace conduit::perf {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

void fill_pattern(uint8_t* dst, size_t len_bytes, uint64_t seed) {
  size_t i = 0;
  for (uint64_t k = 0; i + 8 <= len_bytes; ++k, i += 8) {
    const uint64_t w = splitmix64(seed + k);
    std::memcpy(dst + i, &w, 8);
  }
  if (i < len_bytes) {
    const uint64_t w = splitmix64(seed + i / 8);
    std::memcpy(dst + i, &w, len_bytes - i);
  }
}

bool check_pattern(const uint8_t* src, size_t len_bytes, uint64_t seed) {
  size_t i = 0;
  for (uint64_t k = 0; i + 8 <= len_bytes; ++k, i += 8) {
    const uint64_t w = splitmix64(seed + k);
    if (std::memcmp(src + i, &w, 8) != 0) return false;
  }
  if (i < len_bytes) {
    const uint64_t w = splitmix64(seed + i / 8);
    if (std::memcmp(src + i, &w, len_bytes - i) != 0) return false;
  }
  return true;
}

}  // namespace conduit::perf
