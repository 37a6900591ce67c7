// Fuzz target: NetStack's receive classifier on arbitrary frames.
//
// Input: byte 0 selects a configuration (VLAN or not, UDP checksum check or
// not); the rest is one frame. Besides crashes/UB it checks the classifier's
// contract: every frame gets exactly one verdict, drops are counted, replies
// fit the scratch buffer, delivered offsets lie inside the frame, and
// pending actions stay bounded.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "net/net_stack.h"

using namespace conduit::net;

namespace {

NetStack make_stack(bool vlan, bool verify_udp) {
  NetStackConfig c;
  c.mac = MacAddr{{0x02, 0, 0, 0, 0, 0x01}};
  c.addr = Ipv4Addr::from_octets(198, 18, 0, 1);
  c.prefix_len = 24;
  c.gateway = Ipv4Addr::from_octets(198, 18, 0, 254);
  if (vlan) c.vlan_id = 100;
  c.udp_ports = {4791, 18515};
  c.verify_udp_checksum = verify_udp;
  c.neighbour.capacity = 16;
  c.neighbour.max_pending_per_hop = 4;
  return NetStack(c);
}

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static NetStack stacks[4] = {make_stack(false, false), make_stack(false, true),
                               make_stack(true, false), make_stack(true, true)};
  static uint64_t now_ns = 0;
  NetStack& s = stacks[data[0] & 3];
  const std::span<const uint8_t> frame(data + 1, size - 1);
  // The reply buffer is exactly as large as the stack promises to need.
  std::vector<uint8_t> reply(std::max<size_t>(frame.size() + 4, 64));

  const NetCounters before = s.counters();
  now_ns += 1'000'000;
  // Give the neighbour table something to resolve so ARP replies matter.
  if (data[0] & 4) s.resolve(Ipv4Addr::from_octets(198, 18, 0, 2), now_ns, size);
  const RxResult r = s.on_rx_frame(frame, now_ns, reply);
  const NetCounters& after = s.counters();
  check(after.rx_frames == before.rx_frames + 1);
  switch (r.verdict) {
    case RxVerdict::kDrop:
      check(r.drop != RxDrop::kNone && r.drop < RxDrop::kCount);
      check(after.total_drops() == before.total_drops() + 1);
      break;
    case RxVerdict::kReply:
      check(r.reply_len >= 60 && r.reply_len <= reply.size());
      break;
    case RxVerdict::kDeliverUdp:
      check(r.udp.payload_offset + size_t{r.udp.payload_len} <= frame.size());
      check(r.udp.ip_offset + 28u <= r.udp.payload_offset);
      check(r.udp.dst_port == 4791 || r.udp.dst_port == 18515);
      break;
    case RxVerdict::kConsumed:
      break;
  }
  if (r.verdict != RxVerdict::kDrop) check(after.total_drops() == before.total_drops());
  s.poll_timers(now_ns);
  NetAction actions[8];
  while (s.take_actions(actions) > 0) {
  }
  check(s.pending_actions() == 0);
  check(s.neighbours().size() <= 16);
  return 0;
}
