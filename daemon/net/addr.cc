// Text forms of MacAddr and Ipv4Addr (setup and logging only, never per packet).
#include <charconv>

#include "net/ipv4_addr.h"
#include "net/mac_addr.h"

namespace conduit::net {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<MacAddr> MacAddr::parse(std::string_view text) {
  // Exactly 17 characters: six 2-digit hex groups separated by ':'.
  if (text.size() != 17) return std::nullopt;
  MacAddr mac;
  for (size_t i = 0; i < 6; ++i) {
    const size_t at = i * 3;
    const int hi = hex_digit(text[at]);
    const int lo = hex_digit(text[at + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    if (i < 5 && text[at + 2] != ':') return std::nullopt;
    mac.bytes[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return mac;
}

std::string MacAddr::to_string() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(17);
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i > 0) out.push_back(':');
    out.push_back(kHex[bytes[i] >> 4]);
    out.push_back(kHex[bytes[i] & 0xF]);
  }
  return out;
}

std::optional<Ipv4Addr> Ipv4Addr::parse(std::string_view text) {
  uint32_t value = 0;
  const char* p = text.data();
  const char* const end = text.data() + text.size();
  for (int part = 0; part < 4; ++part) {
    if (part > 0) {
      if (p == end || *p != '.') return std::nullopt;
      ++p;
    }
    if (p == end || *p < '0' || *p > '9') return std::nullopt;
    unsigned octet = 0;
    const auto [next, ec] = std::from_chars(p, end, octet);
    // At most 3 digits, no leading zeros ("010" is ambiguous: octal to some tools).
    if (ec != std::errc{} || octet > 255 || next - p > 3 || (next - p > 1 && *p == '0')) {
      return std::nullopt;
    }
    value = (value << 8) | octet;
    p = next;
  }
  if (p != end) return std::nullopt;
  return Ipv4Addr{value};
}

std::string Ipv4Addr::to_string() const {
  std::string out;
  for (int shift = 24; shift >= 0; shift -= 8) {
    if (shift != 24) out.push_back('.');
    out += std::to_string((value >> shift) & 0xFF);
  }
  return out;
}

}  // namespace conduit::net
