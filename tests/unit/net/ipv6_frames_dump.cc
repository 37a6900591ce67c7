// Prints, one per line as "name hex", the IPv6 frames NetStack builds: the
// NA answering an NS, a DAD answer, the NS of resolve6(), the unsolicited
// NA and the Router Solicitation of announce() and an ICMPv6 echo reply. ipv6_scapy_check.py parses
// them with scapy (an independent implementation) and checks fields and checksums.
#include <cstdio>
#include <vector>

#include "net/net_stack.h"
#include "test_frames.h"

using namespace conduit::net;
using namespace conduit::net::test;

namespace {

void print(const char* name, const uint8_t* p, size_t n) {
  std::printf("%s ", name);
  for (size_t i = 0; i < n; ++i) std::printf("%02x", p[i]);
  std::printf("\n");
}

void print_reply(NetStack& s, const char* name, const std::vector<uint8_t>& in) {
  std::vector<uint8_t> reply(2048);
  const RxResult r = s.on_rx_frame(in, 0, reply);
  if (r.verdict != RxVerdict::kReply) {
    std::printf("%s-not-answered %s\n", name, rx_drop_name(r.drop));
    return;
  }
  print(name, reply.data(), r.reply_len);
}

}  // namespace

int main() {
  NetStackConfig c;
  c.mac = kOurMac;
  c.addr = kOurIp;
  c.addr6 = kOurIp6;
  c.ttl = 64;
  NetStack s(c);
  print_reply(s, "na", ns_for_us());
  Ip6Opts dad;
  dad.src = Ipv6Addr{};
  dad.dst = Ipv6Addr::solicited_node(kOurIp6);
  dad.eth_dst = kOurSolicitedMac;
  print_reply(s, "na_dad", ns_frame(kOurIp6, {}, dad));
  std::vector<uint8_t> body = {0x12, 0x34, 0x00, 0x07};
  for (uint8_t i = 0; i < 33; ++i) body.push_back(i);
  print_reply(s, "echo_reply", ipv6_frame(58, icmp6(128, 0, body, kPeerIp6, kOurIp6)));
  s.resolve6(kPeerLl6, 0, 1);
  s.announce();
  NetAction a[4];
  const size_t n = s.take_actions(a);
  for (size_t i = 0; i < n; ++i) {
    if (a[i].kind != NetAction::Kind::kTransmit || !a[i].ipv6) continue;
    const uint8_t type = a[i].bytes[12 + 40 + 2];
    print(type == 135 ? "ns" : type == 133 ? "rs" : "na_unsolicited", a[i].bytes.data(), a[i].len);
  }
  return 0;
}
