// One control message per SOCK_SEQPACKET datagram, with file descriptors as
// SCM_RIGHTS ancillary data. Shared by libconduit, conduitctl and conduitd.
// Thread role: stateless wrappers around sendmsg/recvmsg; EINTR is retried.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "proto/unique_fd.h"

namespace conduit::proto {

// At most this many descriptors travel with one message (attach passes two).
inline constexpr size_t kMaxFdsPerMessage = 4;

// Sends one datagram. Returns 0 or a negative errno (-EAGAIN on a non-blocking
// socket whose buffer is full, -EPIPE when the peer is gone).
int send_datagram(int sock, std::span<const uint8_t> bytes, std::span<const int> fds = {});

// Receives one datagram into `buf` (resized to the datagram) and its descriptors
// into `fds` (received close-on-exec). Returns the byte count (> 0), 0 when the
// peer hung up, or a negative errno: -EMSGSIZE if the datagram or its descriptor
// list was truncated (every received descriptor is then closed).
// `flags` is passed to recvmsg (e.g. MSG_DONTWAIT).
ssize_t recv_datagram(int sock, std::vector<uint8_t>& buf, std::vector<UniqueFd>& fds,
                      int flags = 0);

// Connects a blocking SOCK_SEQPACKET socket to `path`. Returns the socket or a
// negative errno (-ENOENT/-ECONNREFUSED: no daemon; -EACCES: socket permissions).
int connect_seqpacket(const std::string& path, UniqueFd& out);

// What a person should do about connect_seqpacket's error `rc` on `path`:
// names the socket when no daemon listens, the socket's group on EACCES.
std::string connect_error_message(int rc, const std::string& path);

}  // namespace conduit::proto
