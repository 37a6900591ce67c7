// The head of an HTTP/1.x request (RFC 9112 sections 2-3, 5): request line and
// header fields, enough for a metrics endpoint that answers GET and HEAD.
//
// Pure: bytes in, a verdict out. The caller reads from its socket into one
// buffer and calls parse_request_head() after each read until the verdict is
// no longer kIncomplete. Bounded: a head longer than kMaxHeadBytes, or with
// more than kMaxHeaderFields fields, is refused (431), so a client cannot make
// the daemon buffer without limit.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace conduit::metrics {

inline constexpr size_t kMaxHeadBytes = 8192;
inline constexpr size_t kMaxHeaderFields = 64;

enum class HeadStatus {
  kIncomplete,  // no blank line yet and still within the bounds: read more
  kOk,
  kBad,       // malformed: answer 400
  kTooLarge,  // head or field count over the bounds: answer 431
  kVersion,   // not HTTP/1.0 or HTTP/1.1: answer 505
};

struct RequestHead {
  HeadStatus status = HeadStatus::kIncomplete;
  std::string method;  // as sent (case-sensitive); refusals keep it once the request line is read
  std::string path;    // the target's path, without "?query"; origin form only
  int minor_version = 1;
  bool has_body = false;  // Content-Length > 0 or Transfer-Encoding present
  std::string why;        // for kBad / kTooLarge / kVersion: what was wrong
  size_t head_bytes = 0;  // kOk: bytes of the head, blank line included
};

// Looks at the start of `buf` (bytes received so far on a connection).
RequestHead parse_request_head(std::string_view buf);

// Status code and reason phrase for the answer to a refused head.
int http_status_for(HeadStatus s);
const char* http_reason(int status);

}  // namespace conduit::metrics
