// conduitd's Prometheus endpoint: a small HTTP/1.1 server on the control
// thread's io_context (Boost.Asio) that answers `GET /metrics` with the page
// the caller builds (metrics/prometheus_text.h).
//
// It is built to face a network it does not trust: one request per connection
// (the answer says `Connection: close`), a request head of at most 8 KiB
// (metrics/http_request.h), 5 s for a connection from accept to the last byte
// of the answer, and at most kMaxConnections open at once (more are answered
// 503 and closed). Every refusal is counted (counters(), in conduitctl stats
// as metrics.*).
//
// Thread role: the io_context's thread only (the control thread); start() and
// stop() before it runs or on it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "proto/control_protocol.h"

namespace boost::asio {
class io_context;
}

namespace conduit::control {

class MetricsServer {
 public:
  static constexpr uint32_t kMaxConnections = 16;
  static constexpr uint32_t kDeadlineMs = 5000;

  // `page` builds the body of GET /metrics; it runs on the io_context's thread.
  // deadline_ms: how long a connection may stay open (tests shorten it).
  MetricsServer(boost::asio::io_context& io, std::function<std::string()> page,
                uint32_t deadline_ms = kDeadlineMs);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds ip:port (host byte order; port 0 picks a free one, see port()) and
  // starts accepting. 0, or a negative errno with `error` saying what failed.
  int start(uint32_t ip, uint16_t port, std::string& error);
  // Closes the listener and every connection. Idempotent.
  void stop();
  uint16_t port() const;

  // metrics.scrapes, metrics.bad_requests, ... (appended to `out`).
  void counters(std::vector<proto::Counter>& out) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace conduit::control
