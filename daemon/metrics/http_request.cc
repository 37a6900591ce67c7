#include "metrics/http_request.h"

#include <algorithm>

namespace conduit::metrics {
namespace {

// RFC 9110 5.6.2: tchar.
bool is_tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar);
}

// Visible ASCII and obs-text, as a request target or a field value may hold
// (no controls, no DEL); space and tab are allowed in field values only.
bool is_vchar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u > 0x20 && u != 0x7f);
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char c) {
             return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
           };
           return lower(x) == lower(y);
         });
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

RequestHead refuse(HeadStatus s, std::string why) {
  RequestHead h;
  h.status = s;
  h.why = std::move(why);
  return h;
}

}  // namespace

RequestHead parse_request_head(std::string_view buf) {
  // RFC 9112 2.2: a server SHOULD ignore at least one empty line before the request line.
  size_t lead = 0;
  while (lead + 1 < buf.size() && buf[lead] == '\r' && buf[lead + 1] == '\n' && lead < 4) lead += 2;
  // Only the first kMaxHeadBytes count: the head must end within them.
  const std::string_view window = buf.substr(0, kMaxHeadBytes);
  const std::string_view rest = window.substr(std::min(lead, window.size()));
  const size_t end = rest.find("\r\n\r\n");
  // Bytes a head never holds (a bare LF; controls other than CR, LF and tab: a TLS
  // ClientHello, binary junk) are refused as soon as they arrive rather than at the
  // deadline. The scan comes first, over the head or what has arrived of it, so the
  // verdict does not depend on how the bytes were split into reads.
  const std::string_view scanned = end == std::string_view::npos ? rest : rest.substr(0, end + 4);
  for (size_t i = 0; i < scanned.size(); ++i) {
    const auto u = static_cast<unsigned char>(scanned[i]);
    if (u == '\n' && (i == 0 || scanned[i - 1] != '\r')) {
      return refuse(HeadStatus::kBad, "line ended by a bare LF");
    }
    if ((u < 0x20 && u != '\r' && u != '\n' && u != '\t') || u == 0x7f) {
      return refuse(HeadStatus::kBad, "control byte in the request head (not HTTP?)");
    }
  }
  if (end == std::string_view::npos) {
    if (buf.size() >= kMaxHeadBytes) {
      return refuse(HeadStatus::kTooLarge, "request head longer than 8192 bytes");
    }
    return {};
  }
  const std::string_view head = rest.substr(0, end + 2);  // every line with its CRLF

  RequestHead h;
  size_t pos = 0;
  auto next_line = [&](std::string_view& line) {
    const size_t e = head.find("\r\n", pos);
    if (e == std::string_view::npos) return false;
    line = head.substr(pos, e - pos);
    pos = e + 2;
    return true;
  };
  std::string_view line;
  next_line(line);
  if (line.find('\n') != std::string_view::npos || line.find('\r') != std::string_view::npos) {
    return refuse(HeadStatus::kBad, "stray CR or LF in the request line");
  }
  // request-line = method SP request-target SP HTTP-version (single spaces).
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return refuse(HeadStatus::kBad, "request line is not 'METHOD TARGET HTTP/1.x'");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method)) return refuse(HeadStatus::kBad, "method is not a token");
  // From here a refusal keeps the method: the answer to a HEAD has no body, refusals included.
  h.method = std::string(method);
  const auto refuse_request = [&h](HeadStatus s, std::string why) {
    RequestHead r = refuse(s, std::move(why));
    r.method = h.method;
    return r;
  };
  if (target.empty() || !std::all_of(target.begin(), target.end(), is_vchar)) {
    return refuse_request(HeadStatus::kBad, "request target is empty or has control characters");
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' ||
      version[5] < '0' || version[5] > '9' || version[7] < '0' || version[7] > '9') {
    return refuse_request(HeadStatus::kBad, "malformed HTTP version");
  }
  if (version[5] != '1')
    return refuse_request(HeadStatus::kVersion, "only HTTP/1.0 and HTTP/1.1 are served");
  h.minor_version = version[7] == '0' ? 0 : 1;  // HTTP/1.2 and later are read as 1.1
  if (target.front() != '/') {
    return refuse_request(HeadStatus::kBad, "request target must be a path (origin form)");
  }
  const size_t q = target.find_first_of("?#");
  h.path = std::string(target.substr(0, q));

  size_t fields = 0;
  bool host = false;
  while (pos < head.size()) {
    next_line(line);
    if (++fields > kMaxHeaderFields) {
      return refuse_request(HeadStatus::kTooLarge, "more than 64 header fields");
    }
    if (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {
      return refuse_request(HeadStatus::kBad, "obsolete line folding in a header field");
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos)
      return refuse_request(HeadStatus::kBad, "header field without ':'");
    const std::string_view name = line.substr(0, colon);
    if (!is_token(name))
      return refuse_request(HeadStatus::kBad, "header field name is not a token");
    const std::string_view value = trim_ows(line.substr(colon + 1));
    for (char c : value) {
      if (!is_vchar(c) && c != ' ' && c != '\t') {
        return refuse_request(HeadStatus::kBad, "control character in a header field value");
      }
    }
    if (iequals(name, "Host")) {
      if (host) return refuse_request(HeadStatus::kBad, "more than one Host field");
      host = true;
    } else if (iequals(name, "Content-Length")) {
      if (value.empty() ||
          !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return refuse_request(HeadStatus::kBad, "Content-Length is not a number");
      }
      if (value.find_first_not_of('0') != std::string_view::npos) h.has_body = true;
    } else if (iequals(name, "Transfer-Encoding")) {
      h.has_body = true;
    }
  }
  // RFC 9112 3.2: an HTTP/1.1 request without a Host field is answered with 400.
  if (h.minor_version >= 1 && !host)
    return refuse_request(HeadStatus::kBad, "HTTP/1.1 request without Host");
  h.status = HeadStatus::kOk;
  h.head_bytes = lead + end + 4;
  return h;
}

int http_status_for(HeadStatus s) {
  switch (s) {
    case HeadStatus::kOk:
      return 200;
    case HeadStatus::kTooLarge:
      return 431;
    case HeadStatus::kVersion:
      return 505;
    case HeadStatus::kBad:
    case HeadStatus::kIncomplete:
      break;
  }
  return 400;
}

const char* http_reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Error";
  }
}

}  // namespace conduit::metrics
