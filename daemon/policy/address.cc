#include "policy/address.h"

#include <cstdio>

namespace conduit::policy {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

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
