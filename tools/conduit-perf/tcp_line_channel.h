// The TCP side of the out-of-band exchange: one connection, '\n'-terminated
// lines of at most kMaxLineBytes (exchange.h says what they hold).
//
// Every wait is bounded: connect retries until its deadline (the server may
// still be starting), reads give up after timeout_ms, and a line longer than
// the limit or holding a NUL/CR is an error rather than a buffer that grows.
// Thread role: one thread per channel.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace conduit::perf {

class TcpLineChannel {
 public:
  TcpLineChannel() = default;
  ~TcpLineChannel();
  TcpLineChannel(TcpLineChannel&& o) noexcept;
  TcpLineChannel& operator=(TcpLineChannel&& o) noexcept;
  TcpLineChannel(const TcpLineChannel&) = delete;
  TcpLineChannel& operator=(const TcpLineChannel&) = delete;

  // Server: listen on all addresses at `port`, accept one client. False with `error`.
  static bool accept_one(uint16_t port, int timeout_ms, TcpLineChannel& out, std::string& error);
  // Client: connect to host:port, retrying refused connections until timeout_ms.
  static bool connect_to(const std::string& host, uint16_t port, int timeout_ms,
                         TcpLineChannel& out, std::string& error);
  // A channel over an already connected stream socket (tests use socketpair()).
  static TcpLineChannel adopt(int fd);

  bool send_line(std::string_view line, std::string& error);
  // Waits up to timeout_ms for a full line (without its '\n').
  bool recv_line(std::string& line, int timeout_ms, std::string& error);
  // A full line if one is already readable; false otherwise (error set on a broken channel).
  bool try_recv_line(std::string& line, std::string& error);

  // Waits up to timeout_ms until a line may be ready (buffered bytes or a readable socket).
  void wait_readable(int timeout_ms) const;

  // The address of our end, e.g. "198.18.0.1"; empty if unknown.
  std::string local_address() const;
  std::string peer_address() const;
  bool is_open() const { return fd_ >= 0; }
  // The socket, for byte-exact (non-line) exchanges such as perftest's; still owned here.
  int native_handle() const { return fd_; }

 private:
  explicit TcpLineChannel(int fd) : fd_(fd) {}
  bool take_line(std::string& line, std::string& error);  // from buf_, if complete
  int fill(int timeout_ms, std::string& error);           // 1 read, 0 timeout, -1 error/EOF

  int fd_ = -1;
  std::string buf_;
};

}  // namespace conduit::perf
