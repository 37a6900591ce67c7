// Big-endian loads and stores at any byte address (memcpy: no alignment
// assumed), as whole words. One accessor per width keeps the header encoders
// and decoders a readable list of (offset, field) pairs.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace conduit::wire {

template <class T>
inline T to_be(T v) {
  if constexpr (std::endian::native == std::endian::big) return v;
  if constexpr (sizeof(T) == 2) return __builtin_bswap16(v);
  if constexpr (sizeof(T) == 4) return __builtin_bswap32(v);
  if constexpr (sizeof(T) == 8) return __builtin_bswap64(v);
}
template <class T>
inline void put_be(uint8_t* p, T v) {
  v = to_be(v);
  std::memcpy(p, &v, sizeof v);
}
template <class T>
inline T get_be(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return to_be(v);
}
inline void put_be16(uint8_t* p, uint16_t v) { put_be(p, v); }
inline void put_be32(uint8_t* p, uint32_t v) { put_be(p, v); }
inline void put_be64(uint8_t* p, uint64_t v) { put_be(p, v); }
inline uint16_t get_be16(const uint8_t* p) { return get_be<uint16_t>(p); }
inline uint32_t get_be32(const uint8_t* p) { return get_be<uint32_t>(p); }
inline uint64_t get_be64(const uint8_t* p) { return get_be<uint64_t>(p); }

}  // namespace conduit::wire
