// The Router Advertisement tap's classic BPF filter and its frame reader, without a packet
// socket (that needs CAP_NET_RAW and a link; integration-daemon-vlan and the af_xdp two-hosts
// test run them for real): the filter attached to one end of an AF_UNIX datagram pair judges
// what the other end sends (no 802.1Q tag there: the kernel's tag fields read 0), and
// read_kernel_frame reads what gets through.
#include "control/kernel_frame_tap.h"

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <optional>
#include <vector>

namespace conduit::control {
namespace {

// An untagged Ethernet frame: IPv6, next header `next`, then an ICMPv6 message of `type`.
std::vector<uint8_t> ipv6_frame(uint8_t next, uint8_t type, size_t len = 14 + 40 + 16) {
  std::vector<uint8_t> f(len, 0);
  f[0] = 0x33, f[1] = 0x33, f[5] = 1;  // to all nodes
  f[6] = 0x02, f[11] = 0xFE;           // from a router
  f[12] = 0x86, f[13] = 0xDD;          // IPv6
  f[14] = 0x60;
  f[14 + 6] = next;
  f[14 + 40] = type;
  return f;
}

struct Pair {
  int fd[2] = {-1, -1};
  Pair() { REQUIRE(::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, fd) == 0); }
  ~Pair() {
    ::close(fd[0]);
    ::close(fd[1]);
  }
  void filter(std::optional<uint16_t> vlan) {
    std::vector<sock_filter> code = router_advert_filter(vlan);
    sock_fprog prog{static_cast<unsigned short>(code.size()), code.data()};
    REQUIRE(::setsockopt(fd[1], SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) == 0);
  }
  // Sends `frame` into the pair; whether the filtered end received it (read and compared).
  bool passes(const std::vector<uint8_t>& frame) {
    REQUIRE(::send(fd[0], frame.data(), frame.size(), 0) == static_cast<ssize_t>(frame.size()));
    std::array<uint8_t, 256> buf{};
    const ssize_t n = read_kernel_frame(fd[1], buf);
    if (n == -EAGAIN) return false;
    REQUIRE(n == static_cast<ssize_t>(frame.size()));
    CHECK(std::vector<uint8_t>(buf.begin(), buf.begin() + n) == frame);
    return true;
  }
};

TEST_CASE("RA tap filter, untagged port: Router Advertisements only", "[kernel_tap]") {
  Pair p;
  p.filter(std::nullopt);
  CHECK(p.passes(ipv6_frame(58, 134)));        // a Router Advertisement
  CHECK_FALSE(p.passes(ipv6_frame(58, 135)));  // a Neighbor Solicitation
  CHECK_FALSE(p.passes(ipv6_frame(17, 134)));  // UDP, whatever follows
  std::vector<uint8_t> arp = ipv6_frame(58, 134);
  arp[12] = 0x08, arp[13] = 0x06;
  CHECK_FALSE(p.passes(arp));
  // A tag left in the frame (the kernel takes it out before packet sockets see the frame):
  // the EtherType is 802.1Q's, not IPv6.
  std::vector<uint8_t> inline_tag = ipv6_frame(58, 134);
  inline_tag.insert(inline_tag.begin() + 12, {0x81, 0x00, 0x00, 0x64});
  CHECK_FALSE(p.passes(inline_tag));
}

TEST_CASE("RA tap filter, port on a VLAN: an untagged Router Advertisement is not its",
          "[kernel_tap]") {
  Pair p;
  p.filter(100);
  CHECK_FALSE(p.passes(ipv6_frame(58, 134)));
  CHECK_FALSE(p.passes(ipv6_frame(58, 135)));
}

TEST_CASE("read_kernel_frame: a frame longer than the buffer is reported as not fitting",
          "[kernel_tap]") {
  Pair p;
  std::array<uint8_t, 64> buf{};
  // Fits: as sent (no tag to put back).
  const std::vector<uint8_t> small = ipv6_frame(58, 134, 60);
  REQUIRE(::send(p.fd[0], small.data(), small.size(), 0) == 60);
  CHECK(read_kernel_frame(p.fd[1], buf) == 60);
  CHECK(std::vector<uint8_t>(buf.begin(), buf.begin() + 60) == small);
  // 62 bytes: more than the 60 the reader keeps free of a tag's room, less than the buffer.
  // It was cut, so the answer must say it does not fit (more than buf.size()).
  const std::vector<uint8_t> cut = ipv6_frame(58, 134, 62);
  REQUIRE(::send(p.fd[0], cut.data(), cut.size(), 0) == 62);
  CHECK(read_kernel_frame(p.fd[1], buf) > static_cast<ssize_t>(buf.size()));
  CHECK(read_kernel_frame(p.fd[1], buf) == -EAGAIN);
  std::array<uint8_t, 7> tiny{};
  CHECK(read_kernel_frame(p.fd[1], tiny) == -EINVAL);
}

}  // namespace
}  // namespace conduit::control
