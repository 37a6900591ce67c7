// Text forms of MacAddr, Ipv4Addr and Ipv6Addr (setup and logging only,
// never per packet).
#include <array>
#include <charconv>

#include "net/ipv4_addr.h"
#include "net/ipv6_addr.h"
#include "net/mac_addr.h"

namespace conduit::net {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Parses ':'-separated groups of 1..4 hex digits into out (from index 0);
// when dotted_tail, the last piece may be a dotted quad worth two groups.
// Returns the number of groups, or -1 when malformed. Empty text is 0 groups.
int parse_ipv6_groups(std::string_view text, bool dotted_tail, std::array<uint16_t, 8>& out) {
  if (text.empty()) return 0;
  int n = 0;
  size_t at = 0;
  while (true) {
    const size_t colon = text.find(':', at);
    const std::string_view piece =
        text.substr(at, colon == std::string_view::npos ? std::string_view::npos : colon - at);
    const bool last = colon == std::string_view::npos;
    if (piece.find('.') != std::string_view::npos) {
      if (!last || !dotted_tail || n > 6) return -1;
      const auto v4 = Ipv4Addr::parse(piece);
      if (!v4) return -1;
      out[n++] = static_cast<uint16_t>(v4->value >> 16);
      out[n++] = static_cast<uint16_t>(v4->value);
      return n;
    }
    if (piece.empty() || piece.size() > 4 || n >= 8) return -1;
    uint16_t group = 0;
    for (char c : piece) {
      const int d = hex_digit(c);
      if (d < 0) return -1;
      group = static_cast<uint16_t>(group << 4 | d);
    }
    out[n++] = group;
    if (last) return n;
    at = colon + 1;
  }
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

std::optional<Ipv6Addr> Ipv6Addr::parse(std::string_view text) {
  std::array<uint16_t, 8> head{};
  std::array<uint16_t, 8> tail{};
  const size_t gap = text.find("::");
  int n_head = 0;
  int n_tail = 0;
  if (gap == std::string_view::npos) {
    n_head = parse_ipv6_groups(text, /*dotted_tail=*/true, head);
    if (n_head != 8) return std::nullopt;
  } else {
    const std::string_view before = text.substr(0, gap);
    const std::string_view after = text.substr(gap + 2);
    if (after.find("::") != std::string_view::npos) return std::nullopt;  // two "::"
    n_head = parse_ipv6_groups(before, /*dotted_tail=*/false, head);
    n_tail = parse_ipv6_groups(after, /*dotted_tail=*/true, tail);
    // "::" stands for at least one zero group.
    if (n_head < 0 || n_tail < 0 || n_head + n_tail > 7) return std::nullopt;
  }
  std::array<uint16_t, 8> groups{};
  for (int i = 0; i < n_head; ++i) groups[static_cast<size_t>(i)] = head[static_cast<size_t>(i)];
  for (int i = 0; i < n_tail; ++i) {
    groups[static_cast<size_t>(8 - n_tail + i)] = tail[static_cast<size_t>(i)];
  }
  return Ipv6Addr::from_groups(groups);
}

std::string Ipv6Addr::to_string() const {
  std::array<uint16_t, 8> g{};
  for (size_t i = 0; i < 8; ++i) g[i] = static_cast<uint16_t>(bytes[2 * i] << 8 | bytes[2 * i + 1]);
  // The longest run of >= 2 zero groups, leftmost on a tie (RFC 5952 4.2).
  size_t best_at = 8;
  size_t best_len = 1;
  for (size_t i = 0; i < 8;) {
    if (g[i] != 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < 8 && g[j] == 0) ++j;
    if (j - i > best_len) {
      best_at = i;
      best_len = j - i;
    }
    i = j;
  }
  const size_t hex_groups = is_v4_mapped() ? 6 : 8;
  std::string out;
  out.reserve(41);
  char buf[8];
  for (size_t i = 0; i < hex_groups;) {
    if (i == best_at) {
      out += "::";
      i += best_len;
      continue;
    }
    if (!out.empty() && out.back() != ':') out.push_back(':');
    out.append(buf, std::to_chars(buf, buf + sizeof buf, g[i], 16).ptr);
    ++i;
  }
  if (hex_groups == 6) {
    if (out.back() != ':') out.push_back(':');
    out += Ipv4Addr{uint32_t{g[6]} << 16 | g[7]}.to_string();
  }
  return out;
}

}  // namespace conduit::net
