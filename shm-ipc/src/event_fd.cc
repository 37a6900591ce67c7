#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "shm/doorbell.h"

namespace conduit::shm {

OwnedFd::~OwnedFd() {
  if (fd_ >= 0) ::close(fd_);
}

OwnedFd& OwnedFd::operator=(OwnedFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

int EventFd::create(EventFd* out) {
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return -errno;
  *out = EventFd(fd);
  return 0;
}

int EventFd::kick() const {
  const uint64_t one = 1;
  for (;;) {
    const ssize_t n = ::write(fd_, &one, sizeof(one));
    if (n == static_cast<ssize_t>(sizeof(one))) return 0;
    if (n < 0 && errno == EINTR) continue;
    // EAGAIN: the counter is at its maximum, so the reader is already woken.
    if (n < 0 && errno == EAGAIN) return 0;
    return n < 0 ? -errno : -EIO;
  }
}

uint64_t EventFd::drain_fd(int fd) {
  uint64_t count = 0;
  for (;;) {
    const ssize_t n = ::read(fd, &count, sizeof(count));
    if (n == static_cast<ssize_t>(sizeof(count))) return count;
    if (n < 0 && errno == EINTR) continue;
    return 0;  // EAGAIN: nothing pending
  }
}

int OwnedFd::poll_readable(int timeout_ms) const {
  pollfd p{fd_, POLLIN, 0};
  for (;;) {
    const int rc = ::poll(&p, 1, timeout_ms);
    if (rc < 0 && errno == EINTR) continue;  // a signal; the caller's deadline still holds
    if (rc < 0) return -errno;
    if (rc == 0) return 0;
    if ((p.revents & (POLLERR | POLLNVAL)) != 0) return -EBADF;
    return 1;
  }
}

int EventFd::wait(int timeout_ms) const {
  const int rc = poll_readable(timeout_ms);
  if (rc <= 0) return rc;
  drain();
  return 1;
}

}  // namespace conduit::shm
