#include "tcp_line_channel.h"

#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <thread>

#include "exchange.h"

using conduit::perf::kMaxLineBytes;
using conduit::perf::TcpLineChannel;

namespace {

struct Pair {
  TcpLineChannel a;
  int raw = -1;  // the other end, written byte by byte by the tests
  Pair() {
    int fds[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    a = TcpLineChannel::adopt(fds[0]);
    raw = fds[1];
  }
  ~Pair() {
    if (raw >= 0) close(raw);
  }
  void write_raw(const std::string& s) const {
    REQUIRE(write(raw, s.data(), s.size()) == static_cast<ssize_t>(s.size()));
  }
};

}  // namespace

TEST_CASE("lines arrive whole even when split or batched") {
  Pair p;
  std::string line, error;
  CHECK_FALSE(p.a.try_recv_line(line, error));
  CHECK(error.empty());
  p.write_raw("star");
  CHECK_FALSE(p.a.try_recv_line(line, error));
  p.write_raw("t size=2\nready size=2\n");
  REQUIRE(p.a.recv_line(line, 1000, error));
  CHECK(line == "start size=2");
  REQUIRE(p.a.try_recv_line(line, error));
  CHECK(line == "ready size=2");
}

TEST_CASE("sent lines end with a newline") {
  Pair p;
  std::string error;
  REQUIRE(p.a.send_line("ok", error));
  char buf[8] = {};
  REQUIRE(read(p.raw, buf, sizeof(buf)) == 3);
  CHECK(std::string(buf, 3) == "ok\n");
}

TEST_CASE("timeouts, overlong lines, control bytes and hang-ups are errors") {
  std::string line, error;
  {
    Pair p;
    CHECK_FALSE(p.a.recv_line(line, 50, error));
    CHECK(error.find("said nothing") != std::string::npos);
  }
  {
    Pair p;
    p.write_raw(std::string(kMaxLineBytes + 10, 'a'));
    CHECK_FALSE(p.a.recv_line(line, 1000, error));
    CHECK(error.find("longer than") != std::string::npos);
  }
  {
    Pair p;
    p.write_raw(std::string("bad\x01line\n"));
    CHECK_FALSE(p.a.recv_line(line, 1000, error));
    CHECK(error.find("control") != std::string::npos);
  }
  {
    Pair p;
    p.write_raw("partial");
    close(p.raw);
    p.raw = -1;
    CHECK_FALSE(p.a.recv_line(line, 1000, error));
    CHECK(error.find("closed") != std::string::npos);
  }
}

TEST_CASE("a TCP client and server find each other on loopback") {
  // Port 0 is not allowed by the options; pick a high port unlikely to be taken.
  const uint16_t port = static_cast<uint16_t>(30000 + getpid() % 20000);
  std::string server_error;
  TcpLineChannel server;
  bool accepted = false;
  std::thread t([&] { accepted = TcpLineChannel::accept_one(port, 5000, server, server_error); });
  TcpLineChannel client;
  std::string error;
  const bool connected = TcpLineChannel::connect_to("127.0.0.1", port, 5000, client, error);
  t.join();
  if (!accepted && server_error.find("cannot listen") != std::string::npos) {
    WARN("port in use, skipped: " << server_error);
    return;
  }
  REQUIRE(connected);
  REQUIRE(accepted);
  CHECK(client.local_address() == "127.0.0.1");
  CHECK(server.peer_address() == "127.0.0.1");
  REQUIRE(client.send_line("hello", error));
  std::string line;
  REQUIRE(server.recv_line(line, 1000, error));
  CHECK(line == "hello");
}

TEST_CASE("connecting to nobody fails within the deadline") {
  TcpLineChannel c;
  std::string error;
  CHECK_FALSE(TcpLineChannel::connect_to("127.0.0.1", 1, 300, c, error));
  CHECK(error.find("cannot connect") != std::string::npos);
}
