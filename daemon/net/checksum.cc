#include "net/checksum.h"

#include "net/ipv4.h"

namespace conduit::net {

uint32_t checksum_partial(std::span<const uint8_t> bytes, uint32_t sum) {
  // 64-bit accumulator: no carries lost on frames up to many GiB, folded once.
  uint64_t acc = sum;
  size_t i = 0;
  for (; i + 1 < bytes.size(); i += 2) acc += (uint32_t{bytes[i]} << 8) | bytes[i + 1];
  if (i < bytes.size()) acc += uint32_t{bytes[i]} << 8;
  while (acc >> 32) acc = (acc & 0xFFFFFFFFu) + (acc >> 32);
  return static_cast<uint32_t>(acc);
}

uint16_t checksum_finish(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

uint16_t ipv4_header_checksum(std::span<const uint8_t> header) {
  return checksum_finish(checksum_partial(header));
}

uint32_t udp_pseudo_header_sum(Ipv4Addr src, Ipv4Addr dst, uint16_t udp_len_bytes) {
  uint64_t acc = (src.value >> 16) + (src.value & 0xFFFF) + (dst.value >> 16) +
                 (dst.value & 0xFFFF) + kIpProtoUdp + udp_len_bytes;
  while (acc >> 32) acc = (acc & 0xFFFFFFFFu) + (acc >> 32);
  return static_cast<uint32_t>(acc);
}

}  // namespace conduit::net
