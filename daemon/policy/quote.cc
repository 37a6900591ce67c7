#include "policy/quote.h"

namespace conduit::policy {

std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) {
      out += c;
    } else {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

std::string quote(std::string_view text) {
  static constexpr size_t kMaxBytes = 40;
  std::string out = "'" + printable(text.substr(0, kMaxBytes));
  if (text.size() > kMaxBytes) out += "...";
  out += "'";
  return out;
}

}  // namespace conduit::policy
