#include "control/kernel_frame_tap.h"

#include <arpa/inet.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace conduit::control {

namespace {

// Offsets in an untagged Ethernet frame.
constexpr uint32_t kEtherTypeAt = 12;
constexpr uint32_t kIpv6NextHeaderAt = 14 + 6;
constexpr uint32_t kIcmp6TypeAt = 14 + 40;
constexpr uint32_t kIcmp6RouterAdvertisement = 134;

int fail(int fd, const char* what, std::string& error) {
  const int e = errno;
  error = std::string(what) + ": " + std::strerror(e);
  if (fd >= 0) ::close(fd);
  return -e;
}

}  // namespace

int open_router_advert_tap(int ifindex, std::string& error) {
  // Protocol 0 until bound: the socket receives nothing before its filter is in place.
  const int fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(-1, "packet socket", error);
  // Jumps count the instructions skipped: each mismatch goes to the last one (drop).
  std::array<sock_filter, 8> code{{
      BPF_STMT(BPF_LD | BPF_H | BPF_ABS, kEtherTypeAt),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IPV6, 0, 5),
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, kIpv6NextHeaderAt),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_ICMPV6, 0, 3),
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, kIcmp6TypeAt),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kIcmp6RouterAdvertisement, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, 0xFFFF),  // the whole frame
      BPF_STMT(BPF_RET | BPF_K, 0),
  }};
  sock_fprog prog{static_cast<unsigned short>(code.size()), code.data()};
  if (::setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0) {
    return fail(fd, "attaching the Router Advertisement filter", error);
  }
  const int one = 1;
  if (::setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0) {
    return fail(fd, "PACKET_IGNORE_OUTGOING", error);
  }
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_IPV6);
  sll.sll_ifindex = ifindex;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&sll), sizeof sll) != 0) {
    return fail(fd, "binding the packet socket to the interface", error);
  }
  return fd;
}

}  // namespace conduit::control
