#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "shm/doorbell.h"

namespace conduit::shm {

namespace {

// 0 for a written byte or a full channel (its reader has bytes pending); -EPIPE, -errno.
int kick_result(ssize_t n) {
  if (n == 1) return 0;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
  return n < 0 ? -errno : -EIO;
}

}  // namespace

int WakeFd::create(Kind kind, WakeFd* writer, WakeFd* reader) {
  int fds[2];  // [0] reads, [1] writes
  if (kind == Kind::kPipe) {
    if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return -errno;
  } else {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
      return -errno;
    // One way, as a pipe: the reader's sends fail (EPIPE), so no bytes pile up unread.
    if (::shutdown(sv[1], SHUT_RD) != 0) {
      const int err = errno;
      ::close(sv[0]);
      ::close(sv[1]);
      return -err;
    }
    fds[0] = sv[0];
    fds[1] = sv[1];
  }
  *reader = WakeFd(fds[0], kind);
  *writer = WakeFd(fds[1], kind);
  return 0;
}

int WakeFd::kick_pipe(int fd) {
  const char one = 1;
  for (;;) {
    const ssize_t n = ::write(fd, &one, 1);
    if (n < 0 && errno == EINTR) continue;
    return kick_result(n);
  }
}

int WakeFd::kick_socket(int fd) {
  const char one = 1;
  for (;;) {
    const ssize_t n = ::send(fd, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    return kick_result(n);
  }
}

int64_t WakeFd::drain(int fd) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) return n;
    if (n == 0) return -EPIPE;  // the writer is gone and nothing is pending
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -errno;
  }
}

int WakeFd::wait(int timeout_ms) const {
  const int rc = poll_readable(timeout_ms);
  if (rc <= 0) return rc;
  const int64_t n = drain();
  return n < 0 ? static_cast<int>(n) : 1;
}

}  // namespace conduit::shm
