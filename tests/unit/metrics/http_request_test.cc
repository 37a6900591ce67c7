#include "metrics/http_request.h"

#include <catch2/catch.hpp>
#include <string>

using namespace conduit::metrics;

TEST_CASE("http_request: what Prometheus sends is a GET of /metrics") {
  const std::string req =
      "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9464\r\nUser-Agent: Prometheus/2.42.0\r\n"
      "Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n"
      "Accept-Encoding: gzip\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n";
  const RequestHead h = parse_request_head(req);
  REQUIRE(h.status == HeadStatus::kOk);
  CHECK(h.method == "GET");
  CHECK(h.path == "/metrics");
  CHECK(h.minor_version == 1);
  CHECK_FALSE(h.has_body);
  CHECK(h.head_bytes == req.size());
}

TEST_CASE("http_request: a head that has not fully arrived asks for more, at every cut") {
  const std::string req = "GET /metrics?x=1 HTTP/1.0\r\nAccept: */*\r\n\r\n";
  for (size_t n = 0; n < req.size(); ++n) {
    INFO("cut at " << n);
    CHECK(parse_request_head(req.substr(0, n)).status == HeadStatus::kIncomplete);
  }
  const RequestHead h = parse_request_head(req);
  REQUIRE(h.status == HeadStatus::kOk);
  CHECK(h.path == "/metrics");  // the query is not part of the path
  CHECK(h.minor_version == 0);  // HTTP/1.0 needs no Host
}

TEST_CASE("http_request: leading empty lines are skipped; a body is noticed") {
  RequestHead h = parse_request_head("\r\nHEAD / HTTP/1.1\r\nhost: x\r\n\r\n");
  REQUIRE(h.status == HeadStatus::kOk);
  CHECK(h.method == "HEAD");
  CHECK(h.path == "/");
  h = parse_request_head("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
  REQUIRE(h.status == HeadStatus::kOk);
  CHECK(h.has_body);
  h = parse_request_head("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 000\r\n\r\n");
  REQUIRE(h.status == HeadStatus::kOk);
  CHECK_FALSE(h.has_body);
  h = parse_request_head("GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  REQUIRE(h.status == HeadStatus::kOk);
  CHECK(h.has_body);
}

TEST_CASE("http_request: malformed heads are refused with a reason, 400") {
  const char* bad[] = {
      "GET /metrics\r\n\r\n",                                 // no version
      "GET  /metrics HTTP/1.1\r\nHost: x\r\n\r\n",            // two spaces
      "GET /metrics HTTP/1.1 \r\nHost: x\r\n\r\n",            // trailing space
      "G(T /metrics HTTP/1.1\r\nHost: x\r\n\r\n",             // method not a token
      "GET metrics HTTP/1.1\r\nHost: x\r\n\r\n",              // not origin form
      "GET http://x/metrics HTTP/1.1\r\nHost: x\r\n\r\n",     // absolute form: not served
      "GET /met\x01rics HTTP/1.1\r\nHost: x\r\n\r\n",         // control character
      "GET /metrics HTTP/1.x\r\nHost: x\r\n\r\n",             // version digits
      "GET /metrics HTTP/1.1\r\n\r\n",                        // 1.1 without Host
      "GET /metrics HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",  // two Hosts
      "GET /metrics HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n",
      "GET /metrics HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n",
      "GET /metrics HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
      "GET /metrics HTTP/1.1\r\nHost: x\r\nA: b\rc\r\n\r\n",  // bare CR in a value
      "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
      "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 2\r\n\r\n",
  };
  for (const char* b : bad) {
    INFO(b);
    const RequestHead h = parse_request_head(b);
    CHECK(h.status == HeadStatus::kBad);
    CHECK_FALSE(h.why.empty());
    CHECK(http_status_for(h.status) == 400);
  }
  // Refused before the blank line arrives: a NUL, a bare LF.
  CHECK(parse_request_head(std::string("GET /\0", 6)).status == HeadStatus::kBad);
  CHECK(parse_request_head("GET / HTTP/1.1\nHost: x\n").status == HeadStatus::kBad);
  CHECK(parse_request_head("\x16\x03\x01\x02").status == HeadStatus::kBad);  // TLS
  CHECK(parse_request_head("GET / HTTP/1.1\r\nUser-Agent: \x7f").status == HeadStatus::kBad);
  CHECK(parse_request_head("GET / HTTP/1.1\r\nUser-Agent: a\tb").status == HeadStatus::kIncomplete);
}

TEST_CASE("http_request: other versions get 505, oversized heads 431") {
  RequestHead h = parse_request_head("GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n");
  CHECK(h.status == HeadStatus::kVersion);
  CHECK(http_status_for(h.status) == 505);
  CHECK(parse_request_head("GET /metrics HTTP/0.9\r\nHost: x\r\n\r\n").status ==
        HeadStatus::kVersion);

  // No blank line within the bound: refused without waiting for more.
  std::string big = "GET /metrics HTTP/1.1\r\nHost: x\r\nX: " + std::string(kMaxHeadBytes, 'a');
  h = parse_request_head(big);
  CHECK(h.status == HeadStatus::kTooLarge);
  CHECK(http_status_for(h.status) == 431);
  // A complete head that is over the bound is refused too.
  CHECK(parse_request_head(big + "\r\n\r\n").status == HeadStatus::kTooLarge);
  // Just under the bound is fine.
  std::string fits = "GET /metrics HTTP/1.1\r\nHost: x\r\nX: ";
  fits += std::string(kMaxHeadBytes - fits.size() - 4, 'a') + "\r\n\r\n";
  REQUIRE(fits.size() == kMaxHeadBytes);
  CHECK(parse_request_head(fits).status == HeadStatus::kOk);

  std::string many = "GET / HTTP/1.1\r\nHost: x\r\n";
  for (size_t i = 0; i < kMaxHeaderFields; ++i) many += "A: b\r\n";
  CHECK(parse_request_head(many + "\r\n").status == HeadStatus::kTooLarge);
}

TEST_CASE("http_request: reason phrases") {
  CHECK(std::string(http_reason(200)) == "OK");
  CHECK(std::string(http_reason(404)) == "Not Found");
  CHECK(std::string(http_reason(405)) == "Method Not Allowed");
  CHECK(std::string(http_reason(431)) == "Request Header Fields Too Large");
  CHECK(std::string(http_reason(503)) == "Service Unavailable");
  CHECK(std::string(http_reason(999)) == "Error");
}

TEST_CASE("http_request: the verdict does not depend on how the bytes were split") {
  // A bare LF after a bad version: 400 whether the head came whole or in pieces
  // (found by the fuzzer; it used to be 505 whole and 400 in pieces).
  const std::string req = "GET / HTTP/2.1\r\nHojt\n\rx:  folded\r\n\r\n";
  for (size_t n = 1; n <= req.size(); ++n) {
    const HeadStatus s = parse_request_head(req.substr(0, n)).status;
    INFO("first " << n << " bytes");
    CHECK((s == HeadStatus::kIncomplete || s == HeadStatus::kBad));
  }
  CHECK(parse_request_head(req).status == HeadStatus::kBad);
  // HTTP/1.2 and later minor versions are read as 1.1 (RFC 9110 2.5): Host is needed.
  CHECK(parse_request_head("GET / HTTP/1.8\r\n\r\n").status == HeadStatus::kBad);
  const RequestHead h = parse_request_head("GET / HTTP/1.8\r\nHost: x\r\n\r\n");
  REQUIRE(h.status == HeadStatus::kOk);
  CHECK(h.minor_version == 1);
}

// A refusal after a well-formed request line keeps the method, so the server
// answers a HEAD without a body (RFC 9110 9.3.2) even when it refuses it.
TEST_CASE("http_request: a refused head keeps its method once the request line was read") {
  RequestHead h = parse_request_head("HEAD /metrics HTTP/1.1\r\n\r\n");  // no Host
  CHECK(h.status == HeadStatus::kBad);
  CHECK(h.method == "HEAD");
  h = parse_request_head("HEAD /metrics HTTP/1.1\r\nHost: x\r\nbad field\r\n\r\n");
  CHECK(h.status == HeadStatus::kBad);
  CHECK(h.method == "HEAD");
  h = parse_request_head("HEAD /metrics HTTP/2.0\r\nHost: x\r\n\r\n");
  CHECK(h.status == HeadStatus::kVersion);
  CHECK(h.method == "HEAD");
  // Before the request line is whole there is no method to keep.
  h = parse_request_head("HEAD  /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(h.status == HeadStatus::kBad);
  CHECK(h.method.empty());
}
