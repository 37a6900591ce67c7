// Big-endian loads and stores at any byte address (memcpy: no alignment
// assumed), as whole words. One accessor per width keeps the header encoders
// and decoders a readable list of (offset, field) pairs.
#pragma once

#include <bit>
#include <cstddef>
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
// 24-bit fields (QPNs, PSNs).
inline void put_be24(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 16);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v);
}
inline uint32_t get_be24(const uint8_t* p) {
  return uint32_t{p[0]} << 16 | uint32_t{p[1]} << 8 | p[2];
}

namespace detail {
struct Word16 {
  uint8_t b[16];
};
// The first and the last sizeof(Word) bytes of [src, src + n), n >= sizeof(Word),
// as two words: together all n bytes when n <= 2 * sizeof(Word).
template <class Word>
inline void copy_ends(uint8_t* dst, const uint8_t* src, size_t n) {
  Word a, b;
  std::memcpy(&a, src, sizeof a);
  std::memcpy(&b, src + n - sizeof b, sizeof b);
  std::memcpy(dst, &a, sizeof a);
  std::memcpy(dst + n - sizeof b, &b, sizeof b);
}
}  // namespace detail

// memcpy for the per-packet copies (a small SEND's payload into the frame and
// out of it): up to 64 bytes as at most four overlapping 16-byte words (or
// 8-, 4-byte words), inline, with no call; longer copies call memcpy.
// The ranges must not overlap.
inline void copy_payload(uint8_t* dst, const uint8_t* src, size_t n) {
  if (n > 64) {
    std::memcpy(dst, src, n);
  } else if (n > 32) {  // [0, 16) + [n - 32, n - 16), then [16, 32) + [n - 16, n)
    detail::copy_ends<detail::Word16>(dst, src, n - 16);
    detail::copy_ends<detail::Word16>(dst + 16, src + 16, n - 16);
  } else if (n >= 16) {
    detail::copy_ends<detail::Word16>(dst, src, n);
  } else if (n >= 8) {
    detail::copy_ends<uint64_t>(dst, src, n);
  } else if (n >= 4) {
    detail::copy_ends<uint32_t>(dst, src, n);
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

}  // namespace conduit::wire
