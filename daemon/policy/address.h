// Text forms of the addresses in the policy: IPv4, IPv4/prefix, MAC.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "policy/policy.h"

namespace conduit::policy {

// Dotted quad, decimal, no leading zeros ("010" would read as octal elsewhere).
std::optional<Ipv4Address> parse_ipv4(std::string_view text);
std::string format_ipv4(Ipv4Address a);

// RFC 4291 text (with "::" and a dotted-quad tail; no zone index), and RFC
// 5952's canonical form back.
std::optional<Ipv6Address> parse_ipv6(std::string_view text);
std::string format_ipv6(const Ipv6Address& a);
// "addr/len" with len 1..128; nullopt without the "/len".
std::optional<std::pair<Ipv6Address, uint8_t>> parse_ipv6_prefix(std::string_view text);
// True when a and b share their first len bits.
bool same_ipv6_prefix(const Ipv6Address& a, const Ipv6Address& b, uint8_t len);
// What a port may own: not unspecified, loopback, multicast or IPv4-mapped.
bool is_unicast_host6(const Ipv6Address& a);
bool is_link_local6(const Ipv6Address& a);

// Six hex pairs separated by ':' or '-', either case.
std::optional<MacAddress> parse_mac(std::string_view text);
std::string format_mac(const MacAddress& m);

// The network mask for a prefix length 0..32 (host order).
uint32_t prefix_mask(uint8_t prefix_len);

// "a.b.c.d/len" with len 0..32 (decimal, no leading zero); host bits are not checked
// (port.address keeps them, clients.allowed_peers refuses them).
std::optional<Ipv4Prefix> parse_ipv4_prefix(std::string_view text);

}  // namespace conduit::policy
