#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "shm/doorbell.h"

namespace conduit::shm {

EventFd::~EventFd() {
  if (fd_ >= 0) ::close(fd_);
}

EventFd& EventFd::operator=(EventFd&& other) noexcept {
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

uint64_t EventFd::drain() const {
  uint64_t count = 0;
  for (;;) {
    const ssize_t n = ::read(fd_, &count, sizeof(count));
    if (n == static_cast<ssize_t>(sizeof(count))) return count;
    if (n < 0 && errno == EINTR) continue;
    return 0;  // EAGAIN: nothing pending
  }
}

int EventFd::wait(int timeout_ms) const {
  pollfd p{fd_, POLLIN, 0};
  for (;;) {
    const int rc = ::poll(&p, 1, timeout_ms);
    if (rc < 0 && errno == EINTR) continue;  // a signal; the caller's deadline still holds
    if (rc < 0) return -errno;
    if (rc == 0) return 0;
    if ((p.revents & (POLLERR | POLLNVAL)) != 0) return -EBADF;
    drain();
    return 1;
  }
}

int EventFd::kick_shared(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return -errno;
  if ((flags & O_NONBLOCK) == 0) return -EPERM;
  const uint64_t one = 1;
  for (;;) {
    const ssize_t n = ::write(fd, &one, sizeof(one));
    if (n == static_cast<ssize_t>(sizeof(one))) return 0;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return 0;       // saturated: the reader is woken already
    if (n < 0 && errno == EINVAL) return -EPERM;  // not an eventfd after all
    return n < 0 ? -errno : -EIO;
  }
}

uint64_t EventFd::drain_shared(int fd) {
  uint64_t count = 0;
  iovec iov{&count, sizeof(count)};
  for (;;) {
    const ssize_t n = ::preadv2(fd, &iov, 1, -1, RWF_NOWAIT);
    if (n == static_cast<ssize_t>(sizeof(count))) return count;
    if (n < 0 && errno == EINTR) continue;
    // Kernels before 5.12 read eventfds without RWF_NOWAIT support: drain as before there
    // (a client could then block this read), rather than never draining, which would leave
    // the descriptor readable and the caller's sleep ending at once, for ever.
    if (n < 0 && errno == EOPNOTSUPP)
      return ::read(fd, &count, sizeof(count)) == sizeof(count) ? count : 0;
    return 0;  // EAGAIN: nothing pending
  }
}

bool EventFd::is_eventfd(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return false;
  if ((st.st_mode & S_IFMT) != 0) return false;  // a pipe, socket, file or device
  // Which anonymous inode it is, /proc says (where it is mounted).
  char path[32];
  std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  char target[32] = {};
  const ssize_t n = ::readlink(path, target, sizeof(target) - 1);
  return n <= 0 || std::strcmp(target, "anon_inode:[eventfd]") == 0;
}

}  // namespace conduit::shm
