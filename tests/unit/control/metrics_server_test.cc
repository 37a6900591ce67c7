// The metrics endpoint's HTTP server on a real loopback socket: what it answers,
// and that hostile clients (garbage, huge heads, idle connections, a flood of
// connections) are refused, counted and do not stop it serving the next scrape.
#include "control/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

using conduit::control::MetricsServer;
namespace asio = boost::asio;

namespace {

constexpr uint32_t kLoopback = 0x7F000001;

// The server on its own io_context thread, as conduitd's control thread runs it.
struct Fixture {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::atomic<int> pages{0};
  MetricsServer server;
  std::thread thread;
  uint16_t port = 0;

  explicit Fixture(uint32_t deadline_ms = MetricsServer::kDeadlineMs)
      : server(
            io,
            [this] {
              ++pages;
              return std::string("conduit_up 1\n");
            },
            deadline_ms) {
    std::string error;
    REQUIRE(server.start(kLoopback, 0, error) == 0);
    port = server.port();
    REQUIRE(port != 0);
    thread = std::thread([this] { io.run(); });
  }
  ~Fixture() {
    asio::post(io, [this] {
      server.stop();
      work.reset();
    });
    thread.join();
  }
  uint64_t counter(const std::string& name) {
    std::promise<uint64_t> p;
    asio::post(io, [&] {
      std::vector<conduit::proto::Counter> v;
      server.counters(v);
      for (auto& c : v) {
        if (c.name == name) return p.set_value(c.value);
      }
      p.set_value(~0ull);
    });
    return p.get_future().get();
  }
};

int connect_to(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(kLoopback);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  return fd;
}

// Everything the server sends until it closes (or timeout_ms passes: "" + "TIMEOUT").
std::string read_all(int fd, int timeout_ms = 5000) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return out + "TIMEOUT";
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return out;  // EOF or reset
    out.append(buf, static_cast<size_t>(n));
  }
}

std::string http_exchange(uint16_t port, const std::string& request) {
  const int fd = connect_to(port);
  size_t off = 0;
  while (off < request.size()) {
    const ssize_t n = ::send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may refuse before reading it all
    off += static_cast<size_t>(n);
  }
  std::string r = read_all(fd);
  ::close(fd);
  return r;
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

}  // namespace

TEST_CASE("metrics server: GET /metrics is the page, with Prometheus' content type") {
  Fixture f;
  const std::string r = http_exchange(f.port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  INFO(r);
  CHECK(starts_with(r, "HTTP/1.1 200 OK\r\n"));
  CHECK(r.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n") != std::string::npos);
  CHECK(r.find("Content-Length: 13\r\n") != std::string::npos);
  CHECK(r.find("Connection: close\r\n") != std::string::npos);
  CHECK(r.substr(r.size() - 15) == "\r\nconduit_up 1\n");
  // HEAD: the same head, no body.
  const std::string h = http_exchange(f.port, "HEAD /metrics HTTP/1.0\r\n\r\n");
  CHECK(starts_with(h, "HTTP/1.1 200 OK\r\n"));
  CHECK(h.find("Content-Length: 13\r\n") != std::string::npos);
  CHECK(h.substr(h.size() - 4) == "\r\n\r\n");
  // A request sent a byte at a time is still one request.
  const int fd = connect_to(f.port);
  for (char c : std::string("GET /metrics?x HTTP/1.1\r\nHost: x\r\n\r\n")) {
    REQUIRE(::send(fd, &c, 1, MSG_NOSIGNAL) == 1);
  }
  CHECK(starts_with(read_all(fd), "HTTP/1.1 200 OK\r\n"));
  ::close(fd);
  CHECK(f.pages == 3);
  CHECK(f.counter("metrics.scrapes") == 3);
}

TEST_CASE("metrics server: wrong paths, methods and malformed heads get their status") {
  Fixture f;
  CHECK(
      starts_with(http_exchange(f.port, "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"), "HTTP/1.1 404 "));
  CHECK(starts_with(http_exchange(f.port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"), "HTTP/1.1 200 "));
  const std::string post =
      http_exchange(f.port, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi");
  CHECK(starts_with(post, "HTTP/1.1 405 "));
  CHECK(post.find("Allow: GET, HEAD\r\n") != std::string::npos);
  CHECK(starts_with(
      http_exchange(f.port, "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"),
      "HTTP/1.1 400 "));
  // The start of a TLS ClientHello: refused at once, not at the deadline.
  CHECK(starts_with(
      http_exchange(f.port, std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03", 10)),
      "HTTP/1.1 400 "));
  CHECK(starts_with(http_exchange(f.port, "GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n"),
                    "HTTP/1.1 505 "));
  CHECK(starts_with(http_exchange(f.port, "GET /metrics HTTP/1.1\r\nHost: x\r\nX: " +
                                              std::string(20000, 'a') + "\r\n\r\n"),
                    "HTTP/1.1 431 "));
  CHECK(f.pages == 0);
  CHECK(f.counter("metrics.bad_requests") == 5);
  CHECK(f.counter("metrics.not_found") == 1);
  // The server still serves.
  CHECK(starts_with(http_exchange(f.port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
                    "HTTP/1.1 200 "));
}

// RFC 9110 9.3.2: the answer to HEAD never has content, whatever its status (the
// Content-Length says what a GET would have got).
TEST_CASE("metrics server: an answer to HEAD has no body, refusals included") {
  Fixture f;
  const auto ends_at_head = [](const std::string& r) {
    return r.size() >= 4 && r.substr(r.size() - 4) == "\r\n\r\n";
  };
  const std::string with_body =
      http_exchange(f.port, "HEAD /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
  INFO(with_body);
  CHECK(starts_with(with_body, "HTTP/1.1 400 "));
  CHECK(ends_at_head(with_body));
  const std::string missing = http_exchange(f.port, "HEAD /nope HTTP/1.1\r\nHost: x\r\n\r\n");
  INFO(missing);
  CHECK(starts_with(missing, "HTTP/1.1 404 "));
  CHECK(ends_at_head(missing));
  // Refused by the parser after the request line (HTTP/1.1 without Host): still HEAD.
  const std::string no_host = http_exchange(f.port, "HEAD /metrics HTTP/1.1\r\n\r\n");
  INFO(no_host);
  CHECK(starts_with(no_host, "HTTP/1.1 400 "));
  CHECK(ends_at_head(no_host));
  CHECK(f.pages == 0);
}

TEST_CASE("metrics server: idle connections are closed at the deadline; a flood is refused 503") {
  Fixture f(300);
  // One that sends half a request and stops: closed without an answer.
  const int slow = connect_to(f.port);
  REQUIRE(::send(slow, "GET /met", 8, MSG_NOSIGNAL) == 8);
  CHECK(read_all(slow, 5000).empty());
  ::close(slow);
  CHECK(f.counter("metrics.timeouts") == 1);

  // kMaxConnections idle ones are held; the next is answered 503 at once.
  std::vector<int> idle;
  for (uint32_t i = 0; i < MetricsServer::kMaxConnections; ++i) idle.push_back(connect_to(f.port));
  for (int i = 0; i < 100 && f.counter("metrics.connections") < MetricsServer::kMaxConnections;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(f.counter("metrics.connections") == MetricsServer::kMaxConnections);
  CHECK(starts_with(http_exchange(f.port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
                    "HTTP/1.1 503 "));
  CHECK(f.counter("metrics.refused_connections") == 1);
  // Once the deadline closed them, scrapes work again.
  for (int fd : idle) {
    CHECK(read_all(fd, 5000).empty());
    ::close(fd);
  }
  CHECK(starts_with(http_exchange(f.port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
                    "HTTP/1.1 200 "));
  CHECK(f.counter("metrics.connections") <= 1);
}

TEST_CASE("metrics server: an address in use is a clear error") {
  Fixture f;
  asio::io_context io;
  MetricsServer second(io, [] { return std::string(); });
  std::string error;
  CHECK(second.start(kLoopback, f.port, error) < 0);
  CHECK(error.find("127.0.0.1:" + std::to_string(f.port)) != std::string::npos);
  CHECK(error.find("daemon.metrics_address") != std::string::npos);
}
