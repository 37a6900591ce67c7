#include "net/checksum.h"

#include <bit>
#include <cstring>

#include "net/ipv4.h"

namespace conduit::net {

uint32_t checksum_partial(std::span<const uint8_t> bytes, uint32_t sum) {
  // Sum in native byte order, 8 bytes per step, then swap once: the one's
  // complement sum commutes with byte swapping (RFC 1071 section 2(B)).
  const uint8_t* p = bytes.data();
  const size_t n = bytes.size();
  uint64_t acc = 0;  // each step adds < 2^33: no overflow below 2^31 steps (16 GiB)
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    acc += (w & 0xFFFFFFFFu) + (w >> 32);
  }
  for (; i + 2 <= n; i += 2) {
    uint16_t w;
    std::memcpy(&w, p + i, 2);
    acc += w;
  }
  if (i < n) {
    // A lone last byte is the high byte of a zero-padded big-endian word.
    acc += std::endian::native == std::endian::little ? uint64_t{p[i]} : uint64_t{p[i]} << 8;
  }
  while (acc >> 16) acc = (acc & 0xFFFF) + (acc >> 16);
  auto folded = static_cast<uint16_t>(acc);
  if constexpr (std::endian::native == std::endian::little) folded = __builtin_bswap16(folded);
  const uint64_t total = uint64_t{sum} + folded;
  return static_cast<uint32_t>((total & 0xFFFFFFFFu) + (total >> 32));
}

uint16_t checksum_finish(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

uint16_t ipv4_header_checksum(std::span<const uint8_t> header) {
  return checksum_finish(checksum_partial(header));
}

uint16_t ipv4_header_checksum(const Ipv4Header& header) {
  static_assert(sizeof header == 20);
  // The common case unrolled: five native-order 32-bit words, one swap.
  uint64_t acc = 0;
  for (size_t i = 0; i < 20; i += 4) {
    uint32_t w;
    std::memcpy(&w, reinterpret_cast<const uint8_t*>(&header) + i, 4);
    acc += w;
  }
  acc = (acc & 0xFFFFFFFFu) + (acc >> 32);
  acc = (acc & 0xFFFF) + (acc >> 16);
  acc = (acc & 0xFFFF) + (acc >> 16);
  auto folded = static_cast<uint16_t>(acc);
  if constexpr (std::endian::native == std::endian::little) folded = __builtin_bswap16(folded);
  return static_cast<uint16_t>(~folded);
}

uint32_t udp_pseudo_header_sum(Ipv4Addr src, Ipv4Addr dst, uint16_t udp_len_bytes) {
  uint64_t acc = (src.value >> 16) + (src.value & 0xFFFF) + (dst.value >> 16) +
                 (dst.value & 0xFFFF) + kIpProtoUdp + udp_len_bytes;
  while (acc >> 32) acc = (acc & 0xFFFFFFFFu) + (acc >> 32);
  return static_cast<uint32_t>(acc);
}

uint32_t ipv6_pseudo_header_sum(const Ipv6Addr& src, const Ipv6Addr& dst, uint32_t upper_len_bytes,
                                uint8_t next_header) {
  uint32_t sum = checksum_partial(src.bytes);
  sum = checksum_partial(dst.bytes, sum);
  uint64_t acc = uint64_t{sum} + (upper_len_bytes >> 16) + (upper_len_bytes & 0xFFFF) + next_header;
  while (acc >> 32) acc = (acc & 0xFFFFFFFFu) + (acc >> 32);
  return static_cast<uint32_t>(acc);
}

}  // namespace conduit::net
