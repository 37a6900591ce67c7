#include "tcp_line_channel.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "exchange.h"

namespace conduit::perf {

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string sockaddr_text(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof(buf));
  } else if (ss.ss_family == AF_INET6) {
    const auto* a6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    // An IPv4 client on a dual-stack socket shows as ::ffff:a.b.c.d: print the IPv4 part.
    if (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) {
      inet_ntop(AF_INET, a6->sin6_addr.s6_addr + 12, buf, sizeof(buf));
    } else {
      inet_ntop(AF_INET6, &a6->sin6_addr, buf, sizeof(buf));
    }
  }
  return buf;
}

}  // namespace

TcpLineChannel::~TcpLineChannel() {
  if (fd_ >= 0) close(fd_);
}

TcpLineChannel::TcpLineChannel(TcpLineChannel&& o) noexcept : fd_(o.fd_), buf_(std::move(o.buf_)) {
  o.fd_ = -1;
}

TcpLineChannel& TcpLineChannel::operator=(TcpLineChannel&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    buf_ = std::move(o.buf_);
    o.fd_ = -1;
  }
  return *this;
}

TcpLineChannel TcpLineChannel::adopt(int fd) { return TcpLineChannel(fd); }

bool TcpLineChannel::accept_one(uint16_t port, int timeout_ms, TcpLineChannel& out,
                                std::string& error) {
  int ls = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool v6 = ls >= 0;
  if (!v6) ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (ls < 0) {
    error = errno_text("socket");
    return false;
  }
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc;
  if (v6) {
    int zero = 0;
    setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    a.sin6_addr = in6addr_any;
    rc = bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    rc = bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  if (rc < 0 || listen(ls, 1) < 0) {
    error = "cannot listen on TCP port " + std::to_string(port) + ": " + std::strerror(errno) +
            " (another conduit-perf server? choose one with -p)";
    close(ls);
    return false;
  }
  pollfd p{ls, POLLIN, 0};
  rc = poll(&p, 1, timeout_ms);
  if (rc <= 0) {
    error = rc == 0 ? "no client connected within " + std::to_string(timeout_ms / 1000) + " s"
                    : errno_text("poll");
    close(ls);
    return false;
  }
  int fd = accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
  close(ls);
  if (fd < 0) {
    error = errno_text("accept");
    return false;
  }
  set_nodelay(fd);
  out = TcpLineChannel(fd);
  return true;
}

bool TcpLineChannel::connect_to(const std::string& host, uint16_t port, int timeout_ms,
                                TcpLineChannel& out, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    error = "cannot resolve '" + host + "': " + gai_strerror(rc);
    return false;
  }
  const int64_t deadline = now_ms() + timeout_ms;
  int last_errno = 0;
  for (;;) {
    for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
      int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd < 0) continue;
      if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
        freeaddrinfo(res);
        set_nodelay(fd);
        out = TcpLineChannel(fd);
        return true;
      }
      last_errno = errno;
      close(fd);
    }
    if (now_ms() >= deadline) break;
    // The server may not be listening yet: retry refused connections.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  freeaddrinfo(res);
  error = "cannot connect to " + host + ":" + service + ": " + std::strerror(last_errno) +
          " (is 'conduit-perf TEST' running there as the server?)";
  return false;
}

bool TcpLineChannel::send_line(std::string_view line, std::string& error) {
  if (fd_ < 0) {
    error = "channel closed";
    return false;
  }
  std::string s(line);
  s += '\n';
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      error = errno_text("send to the peer");
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}

bool TcpLineChannel::take_line(std::string& line, std::string& error) {
  const size_t nl = buf_.find('\n');
  if (nl == std::string::npos) {
    if (buf_.size() > kMaxLineBytes) error = "the peer sent a line longer than 1024 bytes";
    return false;
  }
  if (nl > kMaxLineBytes) {
    error = "the peer sent a line longer than 1024 bytes";
    return false;
  }
  line = buf_.substr(0, nl);
  buf_.erase(0, nl + 1);
  for (char c : line) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) {
      error = "the peer sent a line with control or non-ASCII bytes";
      return false;
    }
  }
  return true;
}

int TcpLineChannel::fill(int timeout_ms, std::string& error) {
  if (fd_ < 0) {
    error = "channel closed";
    return -1;
  }
  pollfd p{fd_, POLLIN, 0};
  int rc = poll(&p, 1, timeout_ms);
  if (rc < 0) {
    if (errno == EINTR) return 0;
    error = errno_text("poll");
    return -1;
  }
  if (rc == 0) return 0;
  char tmp[4096];
  ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN) return 0;
    error = errno_text("receive from the peer");
    return -1;
  }
  if (n == 0) {
    error = "the peer closed the connection";
    return -1;
  }
  buf_.append(tmp, static_cast<size_t>(n));
  return 1;
}

bool TcpLineChannel::recv_line(std::string& line, int timeout_ms, std::string& error) {
  error.clear();
  const int64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    if (take_line(line, error)) return true;
    if (!error.empty()) return false;
    const int64_t left = deadline - now_ms();
    if (left <= 0) {
      error = "the peer said nothing for " + std::to_string(timeout_ms / 1000) + " s";
      return false;
    }
    if (fill(static_cast<int>(left), error) < 0) return false;
  }
}

bool TcpLineChannel::try_recv_line(std::string& line, std::string& error) {
  error.clear();
  if (take_line(line, error)) return true;
  if (!error.empty()) return false;
  if (fill(0, error) <= 0) return false;
  return take_line(line, error);
}

void TcpLineChannel::wait_readable(int timeout_ms) const {
  if (fd_ < 0 || buf_.find('\n') != std::string::npos) return;
  pollfd p{fd_, POLLIN, 0};
  poll(&p, 1, timeout_ms);
}

std::string TcpLineChannel::local_address() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (fd_ < 0 || getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) < 0) return "";
  return sockaddr_text(ss);
}

std::string TcpLineChannel::peer_address() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (fd_ < 0 || getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) < 0) return "";
  return sockaddr_text(ss);
}

}  // namespace conduit::perf
