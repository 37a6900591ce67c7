#include "policy/quote.h"

namespace conduit::policy {

std::string quote(std::string_view text) {
  static constexpr size_t kMaxBytes = 40;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (char c : text.substr(0, kMaxBytes)) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) {
      out += c;
    } else {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  if (text.size() > kMaxBytes) out += "...";
  out += "'";
  return out;
}

}  // namespace conduit::policy
