#include "policy/address.h"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>

namespace conduit::policy {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<Ipv6Address> parse_ipv6(std::string_view text) {
  // inet_pton: RFC 4291 text, "::" and a dotted-quad tail; it needs a C string.
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  char buf[INET6_ADDRSTRLEN];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  Ipv6Address a;
  if (inet_pton(AF_INET6, buf, a.bytes.data()) != 1) return std::nullopt;
  return a;
}

std::string format_ipv6(const Ipv6Address& a) {
  char buf[INET6_ADDRSTRLEN];
  if (inet_ntop(AF_INET6, a.bytes.data(), buf, sizeof buf) == nullptr) return "?";
  return buf;
}

std::optional<std::pair<Ipv6Address, uint8_t>> parse_ipv6_prefix(std::string_view text) {
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::string_view len_text = text.substr(slash + 1);
  if (len_text.empty() || len_text.size() > 3) return std::nullopt;
  unsigned len = 0;
  for (const char c : len_text) {
    if (c < '0' || c > '9') return std::nullopt;
    len = len * 10 + static_cast<unsigned>(c - '0');
  }
  if (len < 1 || len > 128 || (len_text.size() > 1 && len_text[0] == '0')) return std::nullopt;
  const auto a = parse_ipv6(text.substr(0, slash));
  if (!a) return std::nullopt;
  return std::pair{*a, static_cast<uint8_t>(len)};
}

bool same_ipv6_prefix(const Ipv6Address& a, const Ipv6Address& b, uint8_t len) {
  for (size_t i = 0; i < 16 && len > 0; ++i) {
    const unsigned bits = len >= 8 ? 8u : len;
    const auto mask = static_cast<uint8_t>(0xFF00u >> bits);
    if (((a.bytes[i] ^ b.bytes[i]) & mask) != 0) return false;
    len = static_cast<uint8_t>(len - bits);
  }
  return true;
}

bool is_link_local6(const Ipv6Address& a) {
  return a.bytes[0] == 0xFE && (a.bytes[1] & 0xC0) == 0x80;
}

bool is_unicast_host6(const Ipv6Address& a) {
  static constexpr std::array<uint8_t, 12> kV4Mapped = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  bool zero_upper = true;
  for (size_t i = 0; i < 15; ++i) zero_upper = zero_upper && a.bytes[i] == 0;
  if (zero_upper && (a.bytes[15] == 0 || a.bytes[15] == 1)) return false;  // :: and ::1
  if (a.bytes[0] == 0xFF) return false;                                    // multicast
  return std::memcmp(a.bytes.data(), kV4Mapped.data(), kV4Mapped.size()) != 0;
}

std::optional<Ipv4Address> parse_ipv4(std::string_view text) {
  uint32_t value = 0;
  size_t pos = 0;
  for (int octet = 0; octet < 4; ++octet) {
    if (octet != 0) {
      if (pos >= text.size() || text[pos] != '.') return std::nullopt;
      ++pos;
    }
    size_t start = pos;
    uint32_t part = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9' && pos - start < 3) {
      part = part * 10 + static_cast<uint32_t>(text[pos] - '0');
      ++pos;
    }
    size_t len = pos - start;
    if (len == 0 || part > 255 || (len > 1 && text[start] == '0')) return std::nullopt;
    value = (value << 8) | part;
  }
  if (pos != text.size()) return std::nullopt;
  return Ipv4Address{value};
}

std::string format_ipv4(Ipv4Address a) {
  return std::to_string(a.value >> 24) + "." + std::to_string((a.value >> 16) & 0xFF) + "." +
         std::to_string((a.value >> 8) & 0xFF) + "." + std::to_string(a.value & 0xFF);
}

std::optional<MacAddress> parse_mac(std::string_view text) {
  if (text.size() != 17) return std::nullopt;
  MacAddress mac;
  char separator = text[2];
  if (separator != ':' && separator != '-') return std::nullopt;
  for (size_t i = 0; i < 6; ++i) {
    int hi = hex_value(text[i * 3]);
    int lo = hex_value(text[i * 3 + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    if (i < 5 && text[i * 3 + 2] != separator) return std::nullopt;
    mac.bytes[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return mac;
}

std::string format_mac(const MacAddress& m) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m.bytes[0], m.bytes[1],
                m.bytes[2], m.bytes[3], m.bytes[4], m.bytes[5]);
  return buf;
}

std::optional<Ipv4Prefix> parse_ipv4_prefix(std::string_view text) {
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::optional<Ipv4Address> ip = parse_ipv4(text.substr(0, slash));
  const std::string_view digits = text.substr(slash + 1);
  if (!ip || digits.empty() || digits.size() > 2) return std::nullopt;
  if (digits.size() > 1 && digits[0] == '0') return std::nullopt;  // as in the address
  unsigned length = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    length = length * 10 + static_cast<unsigned>(c - '0');
  }
  if (length > 32) return std::nullopt;
  return Ipv4Prefix{*ip, static_cast<uint8_t>(length)};
}

uint32_t prefix_mask(uint8_t prefix_len) {
  if (prefix_len == 0) return 0;
  if (prefix_len >= 32) return 0xFFFFFFFFu;
  return ~((1u << (32 - prefix_len)) - 1);
}

}  // namespace conduit::policy
