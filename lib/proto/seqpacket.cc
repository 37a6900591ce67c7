#include "proto/seqpacket.h"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include "proto/control_protocol.h"

namespace conduit::proto {

int send_datagram(int sock, std::span<const uint8_t> bytes, std::span<const int> fds) {
  if (fds.size() > kMaxFdsPerMessage) return -EINVAL;
  iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
  if (!fds.empty()) {
    std::memset(control, 0, sizeof(control));
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n >= 0) return static_cast<size_t>(n) == bytes.size() ? 0 : -EMSGSIZE;
    if (errno != EINTR) return -errno;
  }
}

ssize_t recv_datagram(int sock, std::vector<uint8_t>& buf, std::vector<UniqueFd>& fds, int flags) {
  fds.clear();
  // One spare byte: a datagram that fills it is larger than any valid message.
  buf.resize(kMaxMessageBytes + 1);
  iovec iov{buf.data(), buf.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  for (;;) {
    n = ::recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
    if (n >= 0) break;
    if (errno != EINTR) return -errno;
  }
  // Take ownership of every descriptor first, so none leaks on an error path.
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds.emplace_back(fd);
      }
    }
  }
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 ||
      static_cast<size_t>(n) > kMaxMessageBytes) {
    fds.clear();
    return -EMSGSIZE;
  }
  buf.resize(static_cast<size_t>(n));
  return n;
}

int connect_seqpacket(const std::string& path, UniqueFd& out) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return -ENAMETOOLONG;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!s.valid()) return -errno;
  for (;;) {
    if (::connect(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) break;
    if (errno != EINTR) return -errno;
  }
  out = std::move(s);
  return out.get();
}

std::string connect_error_message(int rc, const std::string& path) {
  switch (-rc) {
    case ENOENT:
      return "conduitd is not running: there is no socket at " + path +
             " (start it with 'systemctl start conduitd', or point CONDUIT_SOCKET at the "
             "socket it uses)";
    case ECONNREFUSED: {
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
        return path +
               " is not a socket, so no conduitd can be there (check --socket, "
               "CONDUIT_SOCKET or daemon.control_socket in the policy)";
      }
      return "conduitd is not running: nothing listens on " + path +
             " (the socket is left from a daemon that stopped; start it with 'systemctl start "
             "conduitd')";
    }
    case ENOTDIR:
      return "a part of " + path +
             " is not a directory, so no conduitd can be there (check "
             "--socket, CONDUIT_SOCKET or daemon.control_socket in the policy)";
    case EACCES:
    case EPERM: {
      struct stat st {};
      std::string owner = "the socket's group";
      std::string group = "GROUP";  // a placeholder only where the name cannot be found
      if (::stat(path.c_str(), &st) == 0) {
        if (const struct group* gr = ::getgrgid(st.st_gid)) {
          owner = std::string("group '") + gr->gr_name + "'";
          group = gr->gr_name;
        }
      }
      return "permission denied on " + path + ": access is granted through " + owner +
             "; add your user to it (usermod -aG " + group + " $USER) and log in again";
    }
    case ENAMETOOLONG:
      return "socket path too long: " + path;
    default:
      return "cannot connect to conduitd at " + path + ": " + std::strerror(-rc);
  }
}

}  // namespace conduit::proto
