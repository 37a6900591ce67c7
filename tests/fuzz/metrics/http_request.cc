// Fuzz target: the metrics endpoint's HTTP request-head parser on arbitrary
// bytes, fed as a client would send them (byte 0 picks how many bytes arrive
// per read). Besides crashes and UB it checks the parser's contract:
// - a verdict other than kIncomplete never changes when more bytes arrive
//   (the server answers on the first one),
// - kIncomplete is only given below the 8 KiB bound,
// - an accepted head has a method that is a token, a path that starts with
//   '/', a head length inside the input that ends in a blank line,
// - every refusal has a reason and maps to 400, 431 or 505,
// - label escaping never leaves a bare '"', '\' or newline.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "metrics/http_request.h"
#include "metrics/prometheus_text.h"

using namespace conduit::metrics;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t step = 1 + data[0] % 64;
  const std::string_view all(reinterpret_cast<const char*>(data + 1), size - 1);

  RequestHead first;
  size_t first_at = 0;
  for (size_t n = 0;; n = std::min(all.size(), n + step)) {
    const RequestHead h = parse_request_head(all.substr(0, n));
    if (h.status == HeadStatus::kIncomplete) {
      check(n < kMaxHeadBytes);
    } else if (first.status == HeadStatus::kIncomplete) {
      first = h;
      first_at = n;
    } else {
      // Later reads never change the verdict (only the server's first answer counts,
      // but a parser whose verdict flips would be reading past the head).
      check(h.status == first.status);
      if (h.status == HeadStatus::kOk) {
        check(h.head_bytes == first.head_bytes && h.path == first.path && h.method == first.method);
      }
    }
    if (n == all.size()) break;
  }
  if (first.status == HeadStatus::kOk) {
    check(!first.method.empty() && !first.path.empty() && first.path[0] == '/');
    check(first.head_bytes >= 4 && first.head_bytes <= first_at &&
          first.head_bytes <= kMaxHeadBytes);
    check(all.substr(first.head_bytes - 4, 4) == "\r\n\r\n");
    check(first.minor_version == 0 || first.minor_version == 1);
  } else if (first.status != HeadStatus::kIncomplete) {
    check(!first.why.empty());
    const int s = http_status_for(first.status);
    check(s == 400 || s == 431 || s == 505);
  }

  const std::string e = escape_label_value(all);
  for (size_t i = 0; i < e.size(); ++i) {
    check(e[i] != '\n');
    if (e[i] == '\\') {
      check(i + 1 < e.size() && (e[i + 1] == '\\' || e[i + 1] == '"' || e[i + 1] == 'n'));
      ++i;
    } else {
      check(e[i] != '"');
    }
  }
  return 0;
}
