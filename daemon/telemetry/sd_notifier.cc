#include "telemetry/sd_notifier.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#if CONDUIT_HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace conduit::telemetry {

SdNotifier::SdNotifier() {
  if (const char* s = std::getenv("NOTIFY_SOCKET"); s != nullptr) socket_path_ = s;
  const char* usec = std::getenv("WATCHDOG_USEC");
  const char* pid = std::getenv("WATCHDOG_PID");
  // WATCHDOG_PID, when set, names the process systemd watches; pings from
  // another process (a child that inherited the environment) would not count.
  const bool ours = pid == nullptr || std::strtoll(pid, nullptr, 10) == ::getpid();
  if (usec != nullptr && ours) watchdog_us_ = std::strtoull(usec, nullptr, 10);
}

int SdNotifier::notify(const std::string& state) const {
  if (socket_path_.empty()) return 0;
#if CONDUIT_HAVE_LIBSYSTEMD
  int rc = sd_notify(0, state.c_str());
  return rc < 0 ? rc : 0;
#else
  sockaddr_un addr{};
  if (socket_path_.size() >= sizeof(addr.sun_path) || socket_path_.size() < 2) return -EINVAL;
  if (socket_path_[0] != '/' && socket_path_[0] != '@') return -EAFNOSUPPORT;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path_.data(), socket_path_.size());
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // abstract namespace
  const socklen_t len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_path_.size());
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  const ssize_t n = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                             reinterpret_cast<const sockaddr*>(&addr), len);
  const int err = errno;
  ::close(fd);
  if (n < 0) return -err;
  return static_cast<size_t>(n) == state.size() ? 0 : -EMSGSIZE;
#endif
}

}  // namespace conduit::telemetry
