#include "control/metrics_server.h"

#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <map>

#include "metrics/http_request.h"

namespace conduit::control {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

std::string response(int status, std::string_view content_type, const std::string& body,
                     bool head_only, std::string_view extra_headers = {}) {
  std::string r =
      "HTTP/1.1 " + std::to_string(status) + " " + metrics::http_reason(status) + "\r\n";
  r += "Content-Type: ";
  r += content_type;
  r += "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  r += extra_headers;
  r += "Connection: close\r\n\r\n";
  if (!head_only) r += body;
  return r;
}

std::string plain(int status, const std::string& text, bool head_only = false,
                  std::string_view extra_headers = {}) {
  return response(status, "text/plain; charset=utf-8", text + "\n", head_only, extra_headers);
}

}  // namespace

struct MetricsServer::Impl : std::enable_shared_from_this<MetricsServer::Impl> {
  struct Conn {
    tcp::socket sock;
    asio::steady_timer deadline;
    std::array<char, 2048> chunk{};
    std::string head;
    std::string out;
    explicit Conn(asio::io_context& io) : sock(io), deadline(io) {}
  };

  Impl(asio::io_context& io, std::function<std::string()> page, uint32_t deadline_ms)
      : io(io), acceptor(io), page(std::move(page)), deadline_ms(deadline_ms) {}

  asio::io_context& io;
  tcp::acceptor acceptor;
  std::function<std::string()> page;
  uint32_t deadline_ms;
  std::map<Conn*, std::shared_ptr<Conn>> conns;
  bool stopped = false;
  // Counters (conduitctl stats metrics.*).
  uint64_t accepted = 0;
  uint64_t scrapes = 0;
  uint64_t bad_requests = 0;
  uint64_t not_found = 0;
  uint64_t refused = 0;
  uint64_t timeouts = 0;
  uint64_t accept_errors = 0;

  void accept_loop() {
    auto c = std::make_shared<Conn>(io);
    acceptor.async_accept(c->sock, [self = shared_from_this(), c](boost::system::error_code ec) {
      if (self->stopped) return;
      if (ec) {
        // EMFILE and friends: count, say so once in a while, and keep accepting.
        if (self->accept_errors++ % 1000 == 0) {
          spdlog::warn("metrics: accept failed: {}", ec.message());
        }
      } else {
        self->on_accept(c);
      }
      self->accept_loop();
    });
  }

  void on_accept(const std::shared_ptr<Conn>& c) {
    ++accepted;
    boost::system::error_code ignored;
    c->sock.non_blocking(true, ignored);
    if (conns.size() >= kMaxConnections) {
      ++refused;
      // A fresh socket's send buffer takes this whole; the client learns why.
      const std::string r = plain(503, "too many open connections to the metrics endpoint");
      asio::write(c->sock, asio::buffer(r), ignored);
      c->sock.close(ignored);
      return;
    }
    conns[c.get()] = c;
    c->deadline.expires_after(std::chrono::milliseconds(deadline_ms));
    c->deadline.async_wait([self = shared_from_this(), c](boost::system::error_code ec) {
      if (ec || self->stopped || self->conns.count(c.get()) == 0) return;
      ++self->timeouts;
      self->close(c);
    });
    read(c);
  }

  void read(const std::shared_ptr<Conn>& c) {
    c->sock.async_read_some(asio::buffer(c->chunk), [self = shared_from_this(), c](
                                                        boost::system::error_code ec, size_t n) {
      if (self->stopped || self->conns.count(c.get()) == 0) return;
      if (ec) {
        self->close(c);  // hung up before a whole request: nothing to answer
        return;
      }
      c->head.append(c->chunk.data(), n);
      const metrics::RequestHead h = metrics::parse_request_head(c->head);
      if (h.status == metrics::HeadStatus::kIncomplete) {
        self->read(c);
        return;
      }
      self->answer(c, h);
    });
  }

  void answer(const std::shared_ptr<Conn>& c, const metrics::RequestHead& h) {
    using metrics::HeadStatus;
    // RFC 9110 9.3.2: the answer to HEAD has no content, whatever its status.
    const bool head_only = h.method == "HEAD";
    if (h.status != HeadStatus::kOk) {
      ++bad_requests;
      const int status = metrics::http_status_for(h.status);
      spdlog::debug("metrics: refused a request ({}): {}", status, h.why);
      c->out = plain(status, h.why, head_only);
    } else if (h.method != "GET" && h.method != "HEAD") {
      ++bad_requests;
      c->out = plain(405, "only GET and HEAD are served", false, "Allow: GET, HEAD\r\n");
    } else if (h.has_body) {
      ++bad_requests;
      c->out = plain(400, "a GET or HEAD request has no body", head_only);
    } else if (h.path == "/metrics") {
      ++scrapes;
      c->out = response(200, "text/plain; version=0.0.4; charset=utf-8", page(), head_only);
    } else if (h.path == "/") {
      c->out = plain(200, "conduitd: Prometheus metrics are at /metrics", head_only);
    } else {
      ++not_found;
      c->out = plain(404, "not found: conduitd serves /metrics", head_only);
    }
    asio::async_write(c->sock, asio::buffer(c->out),
                      [self = shared_from_this(), c](boost::system::error_code, size_t) {
                        if (self->stopped || self->conns.count(c.get()) == 0) return;
                        boost::system::error_code ignored;
                        c->sock.shutdown(tcp::socket::shutdown_send, ignored);
                        self->close(c);
                      });
  }

  void close(const std::shared_ptr<Conn>& c) {
    boost::system::error_code ignored;
    c->deadline.cancel();
    c->sock.close(ignored);
    conns.erase(c.get());
  }

  void stop() {
    if (stopped) return;
    stopped = true;
    boost::system::error_code ignored;
    acceptor.close(ignored);
    auto all = conns;
    for (auto& [p, c] : all) close(c);
  }
};

MetricsServer::MetricsServer(asio::io_context& io, std::function<std::string()> page,
                             uint32_t deadline_ms)
    : impl_(std::make_shared<Impl>(io, std::move(page), deadline_ms)) {}

MetricsServer::~MetricsServer() { stop(); }

int MetricsServer::start(uint32_t ip, uint16_t port, std::string& error) {
  const tcp::endpoint ep(asio::ip::address_v4(ip), port);
  const std::string where = ep.address().to_string() + ":" + std::to_string(port);
  boost::system::error_code ec;
  Impl& im = *impl_;
  im.acceptor.open(ep.protocol(), ec);
  if (!ec) im.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) im.acceptor.bind(ep, ec);
  if (!ec) im.acceptor.listen(64, ec);
  if (ec) {
    error = "metrics endpoint " + where + ": " + ec.message() +
            (ec == boost::system::errc::address_in_use
                 ? " (another process listens there; change daemon.metrics_address)"
             : ec == boost::system::errc::address_not_available
                 ? " (no interface of this host has that address)"
                 : "");
    boost::system::error_code ignored;
    im.acceptor.close(ignored);
    return -ec.value();
  }
  im.accept_loop();
  return 0;
}

void MetricsServer::stop() { impl_->stop(); }

uint16_t MetricsServer::port() const {
  boost::system::error_code ec;
  const auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

void MetricsServer::counters(std::vector<proto::Counter>& out) const {
  const Impl& im = *impl_;
  out.push_back({"metrics.connections", im.conns.size()});
  out.push_back({"metrics.accepted", im.accepted});
  out.push_back({"metrics.scrapes", im.scrapes});
  out.push_back({"metrics.bad_requests", im.bad_requests});
  out.push_back({"metrics.not_found", im.not_found});
  out.push_back({"metrics.refused_connections", im.refused});
  out.push_back({"metrics.timeouts", im.timeouts});
  out.push_back({"metrics.accept_errors", im.accept_errors});
}

}  // namespace conduit::control
