// The Internet checksum (RFC 1071): one's-complement sum of 16-bit
// big-endian words, used by IPv4, ICMP, ICMPv6 and UDP.
#pragma once

#include <cstdint>
#include <span>

#include "net/ipv4.h"
#include "net/ipv4_addr.h"
#include "net/ipv6_addr.h"

namespace conduit::net {

// Adds `bytes` (as big-endian 16-bit words, an odd tail padded with zero) to
// a running 32-bit partial sum. Chain calls only on even-length pieces.
uint32_t checksum_partial(std::span<const uint8_t> bytes, uint32_t sum = 0);

// Folds a partial sum to 16 bits and complements it: the value to store
// (with Be16::from_host) in a checksum field that was zero while summing.
// Summing a region that includes a correct checksum folds to 0.
uint16_t checksum_finish(uint32_t sum);

// Checksum of a whole IPv4 header (checksum field included: a valid header
// yields 0; with the field zeroed it yields the value to store).
uint16_t ipv4_header_checksum(std::span<const uint8_t> header);
// Same, for a header without options (the receive fast path).
uint16_t ipv4_header_checksum(const Ipv4Header& header);

// Partial sum of the UDP pseudo-header (src, dst, protocol, UDP length).
uint32_t udp_pseudo_header_sum(Ipv4Addr src, Ipv4Addr dst, uint16_t udp_len_bytes);

// Partial sum of the IPv6 pseudo-header (RFC 8200 section 8.1: src, dst,
// upper-layer length, next header), for UDP and ICMPv6.
uint32_t ipv6_pseudo_header_sum(const Ipv6Addr& src, const Ipv6Addr& dst, uint32_t upper_len_bytes,
                                uint8_t next_header);

}  // namespace conduit::net
