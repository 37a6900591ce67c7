#include "control/kernel_frame_tap.h"

#include <arpa/inet.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace conduit::control {

namespace {

// Offsets in an untagged Ethernet frame (as packet sockets see a tagged one too).
constexpr uint32_t kMacBytes = 12;  // destination and source
constexpr uint32_t kEtherTypeAt = 12;
constexpr size_t kVlanTagBytes = 4;

// A classic BPF load offset of one of the kernel's ancillary fields (SKF_AD_OFF is negative).
constexpr uint32_t ancillary(int field) { return static_cast<uint32_t>(SKF_AD_OFF + field); }
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

std::vector<sock_filter> router_advert_filter(std::optional<uint16_t> vlan) {
  // The kernel takes an 802.1Q tag out of the frame before packet sockets see it: the frame
  // is laid out untagged, and the tag is in the ancillary fields the filter can load. Jumps
  // count the instructions skipped: each mismatch goes to the last one (drop).
  std::vector<sock_filter> code;
  const auto drop_unless = [&code](uint32_t k) {  // the jump's distance is set at the end
    code.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, k, 0, 0));
  };
  code.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ancillary(SKF_AD_VLAN_TAG_PRESENT)));
  if (vlan) {
    drop_unless(1);
    code.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ancillary(SKF_AD_VLAN_TPID)));
    drop_unless(ETH_P_8021Q);
    code.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ancillary(SKF_AD_VLAN_TAG)));
    code.push_back(BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0x0FFF));
    drop_unless(*vlan);
  } else {
    // Untagged, or a priority tag (VID 0), as the network stack takes them.
    const size_t untagged = code.size();
    code.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 0));  // true: to the frame
    code.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ancillary(SKF_AD_VLAN_TPID)));
    drop_unless(ETH_P_8021Q);
    code.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ancillary(SKF_AD_VLAN_TAG)));
    code.push_back(BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0x0FFF));
    drop_unless(0);
    code[untagged].jt = static_cast<uint8_t>(code.size() - untagged - 1);
  }
  code.push_back(BPF_STMT(BPF_LD | BPF_H | BPF_ABS, kEtherTypeAt));
  drop_unless(ETH_P_IPV6);
  code.push_back(BPF_STMT(BPF_LD | BPF_B | BPF_ABS, kIpv6NextHeaderAt));
  drop_unless(IPPROTO_ICMPV6);
  code.push_back(BPF_STMT(BPF_LD | BPF_B | BPF_ABS, kIcmp6TypeAt));
  drop_unless(kIcmp6RouterAdvertisement);
  code.push_back(BPF_STMT(BPF_RET | BPF_K, 0xFFFF));  // the whole frame
  code.push_back(BPF_STMT(BPF_RET | BPF_K, 0));
  const size_t last = code.size() - 1;
  for (size_t i = 0; i < last; ++i) {
    sock_filter& ins = code[i];
    if (BPF_CLASS(ins.code) == BPF_JMP && ins.jt == 0 && ins.jf == 0) {
      ins.jf = static_cast<uint8_t>(last - i - 1);
    }
  }
  return code;
}

int open_router_advert_tap(int ifindex, std::optional<uint16_t> vlan, std::string& error) {
  // Protocol 0 until bound: the socket receives nothing before its filter is in place.
  const int fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(-1, "packet socket", error);
  std::vector<sock_filter> code = router_advert_filter(vlan);
  sock_fprog prog{static_cast<unsigned short>(code.size()), code.data()};
  if (::setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0) {
    return fail(fd, "attaching the Router Advertisement filter", error);
  }
  const int one = 1;
  if (::setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0) {
    return fail(fd, "PACKET_IGNORE_OUTGOING", error);
  }
  if (::setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof one) != 0) {
    return fail(fd, "PACKET_AUXDATA", error);
  }
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  // Every protocol (the filter picks): a socket bound to one EtherType is handed a tagged
  // frame only after the kernel has cleared its tag (and, with no VLAN device of that VID,
  // marked it for another host), so the filter could not tell its VLAN.
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = ifindex;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&sll), sizeof sll) != 0) {
    return fail(fd, "binding the packet socket to the interface", error);
  }
  return fd;
}

ssize_t read_kernel_frame(int fd, std::span<uint8_t> buf) {
  if (buf.size() < 2 * kVlanTagBytes) return -EINVAL;
  // Read past where a tag would go, then move the MAC addresses in front of it.
  iovec iov{buf.data() + kVlanTagBytes, buf.size() - kVlanTagBytes};
  alignas(cmsghdr) std::array<uint8_t, CMSG_SPACE(sizeof(tpacket_auxdata))> control{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  const ssize_t n = ::recvmsg(fd, &msg, MSG_TRUNC);
  if (n < 0) return -errno;
  // Cut (MSG_TRUNC gives the whole length): say so, whether or not a tag would have fitted.
  if (static_cast<size_t>(n) > iov.iov_len) return static_cast<ssize_t>(buf.size()) + 1;
  const tpacket_auxdata* aux = nullptr;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_PACKET && c->cmsg_type == PACKET_AUXDATA &&
        c->cmsg_len >= CMSG_LEN(sizeof(tpacket_auxdata))) {
      aux = reinterpret_cast<const tpacket_auxdata*>(CMSG_DATA(c));
    }
  }
  uint8_t* const frame = buf.data() + kVlanTagBytes;
  const bool tagged = aux != nullptr && (aux->tp_status & TP_STATUS_VLAN_VALID) != 0;
  if (!tagged || n < static_cast<ssize_t>(kMacBytes)) {
    std::memmove(buf.data(), frame, static_cast<size_t>(n));
    return n;
  }
  // The tag as it was on the wire: TPID (802.1Q unless the kernel says otherwise), then TCI.
  const uint16_t tpid =
      (aux->tp_status & TP_STATUS_VLAN_TPID_VALID) != 0 ? aux->tp_vlan_tpid : ETH_P_8021Q;
  std::memmove(buf.data(), frame, kMacBytes);
  buf[kMacBytes] = static_cast<uint8_t>(tpid >> 8);
  buf[kMacBytes + 1] = static_cast<uint8_t>(tpid);
  buf[kMacBytes + 2] = static_cast<uint8_t>(aux->tp_vlan_tci >> 8);
  buf[kMacBytes + 3] = static_cast<uint8_t>(aux->tp_vlan_tci);
  return n + static_cast<ssize_t>(kVlanTagBytes);
}

}  // namespace conduit::control
