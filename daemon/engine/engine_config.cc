#include "engine/engine_config.h"

#include <algorithm>

namespace conduit::engine {
namespace {

uint32_t to_us(uint64_t ns) { return static_cast<uint32_t>(std::min<uint64_t>(ns / 1000, ~0u)); }
uint32_t to_mbps(uint64_t bps) {
  return static_cast<uint32_t>(std::min<uint64_t>(bps / 1'000'000, ~0u));
}

cc::ControllerConfig controller_for(const policy::CongestionControl& c) {
  cc::ControllerConfig out;
  switch (c.algorithm) {
    case policy::CcAlgorithm::kNone:
      out.kind = cc::ControllerKind::kNone;
      return out;
    case policy::CcAlgorithm::kFixed:
      out.kind = cc::ControllerKind::kFixed;
      out.fixed_rate_bps = c.fixed_rate_bps;
      return out;
    case policy::CcAlgorithm::kDcqcn:
      break;
  }
  out.kind = cc::ControllerKind::kDcqcn;
  const policy::DcqcnParams& k = c.dcqcn;
  cc::DcqcnParams& d = out.dcqcn;
  d.rpg_time_reset = std::max<uint32_t>(1, to_us(k.rpg_time_reset_ns));
  d.rpg_byte_reset = static_cast<uint32_t>(std::min<uint64_t>(k.rpg_byte_reset_bytes / 64, ~0u));
  d.rpg_threshold = k.rpg_threshold;
  d.rpg_ai_rate = std::max<uint32_t>(1, to_mbps(k.rpg_ai_rate_bps));
  d.rpg_hai_rate = std::max<uint32_t>(1, to_mbps(k.rpg_hai_rate_bps));
  d.rpg_gd = k.rpg_gd;
  d.rpg_min_dec_fac = k.rpg_min_dec_fac_percent;
  d.rpg_min_rate = std::max<uint32_t>(1, to_mbps(k.rpg_min_rate_bps));
  d.rpg_max_rate = to_mbps(k.rpg_max_rate_bps);
  d.rate_to_set_on_first_cnp = to_mbps(k.rate_to_set_on_first_cnp_bps);
  d.rate_reduce_monitor_period = to_us(k.rate_reduce_monitor_period_ns);
  d.initial_alpha_value = k.initial_alpha_value;
  d.dce_tcp_g = k.dce_tcp_g;
  d.dce_tcp_rtt = std::max<uint32_t>(1, to_us(k.dce_tcp_rtt_ns));
  d.clamp_tgt_rate = k.clamp_tgt_rate;
  d.clamp_tgt_rate_after_time_inc = k.clamp_tgt_rate_after_time_inc;
  return out;
}

}  // namespace

IdleMode idle_mode_from_policy(policy::IdleMode m) {
  return m == policy::IdleMode::kSpin ? IdleMode::kSpin : IdleMode::kAdaptive;
}

EngineConfig engine_config_from_policy(const policy::Policy& p, net::MacAddr mac,
                                       uint64_t port_speed_bps) {
  EngineConfig c;
  c.net.mac = mac;
  c.net.addr = net::Ipv4Addr{p.port.address.value};
  c.net.prefix_len = p.port.prefix_len;
  if (p.port.gateway) c.net.gateway = net::Ipv4Addr{p.port.gateway->value};
  if (p.port.address6) {
    c.net.addr6 = net::Ipv6Addr{p.port.address6->bytes};
    c.net.prefix_len6 = p.port.prefix_len6;
    if (p.port.gateway6) c.net.gateway6 = net::Ipv6Addr{p.port.gateway6->bytes};
    c.net.link_mtu = p.port.mtu_bytes;  // a Router Advertisement may lower it, not raise it
  }
  // Tagged frames: ARP, NDP, ICMP and the CMs' datagrams go with PCP 0 (best effort, as
  // Linux's VLAN devices send by default); RoCE frames take their class's priority.
  if (p.port.vlan) c.net.vlan_id = *p.port.vlan;
  // Without a VLAN, priority tags carry the RoCE frames' PCP; the rest goes untagged.
  c.priority_tagging = p.port.priority_tagging && !p.port.vlan;
  c.net.udp_ports = {p.port.roce_udp_port, p.port.cm_udp_port};
  for (const auto& n : p.port.neighbours) {
    c.net.static_neighbours.push_back({net::Ipv4Addr{n.ip.value}, net::MacAddr{n.mac.bytes}});
  }
  for (const auto& n : p.port.neighbours6) {
    c.net.static_neighbours6.push_back({net::Ipv6Addr{n.ip.bytes}, net::MacAddr{n.mac.bytes}});
  }
  // Static entries take table slots for good; learned ones keep the default's room.
  c.net.neighbour.capacity += std::max(p.port.neighbours.size(), p.port.neighbours6.size());
  c.roce_udp_port = p.port.roce_udp_port;
  c.cm_udp_port = p.port.cm_udp_port;
  // port.line_rate wins over the speed the port reports (a veth says 10 Gbit/s whatever it
  // carries); a port that reports none is taken for 10 Gbit/s.
  c.line_rate_bps =
      p.port.line_rate_bps.value_or(port_speed_bps != 0 ? port_speed_bps : 10'000'000'000ull);

  // The default class goes first: QPs that name no known class land there.
  std::vector<const policy::TrafficClass*> order;
  order.push_back(&p.default_class());
  for (const auto& tc : p.traffic_classes) {
    if (!tc.is_default) order.push_back(&tc);
  }
  for (const policy::TrafficClass* tc : order) {
    TrafficClassSpec s;
    s.name = tc->name;
    s.dscp = tc->dscp;
    s.ecn = static_cast<uint8_t>(tc->ecn);
    s.vlan_pcp = tc->priority;
    s.sched.strict = tc->strict;
    // Strict classes: the higher priority is served first (the loader keeps strict
    // classes' priorities distinct).
    s.sched.strict_rank = 7u - std::min<uint32_t>(tc->priority, 7u);
    s.sched.weight = tc->weight;
    s.sched.max_rate_bps = tc->max_rate_bps.value_or(0);
    s.cc = controller_for(tc->congestion_control);
    c.classes.push_back(s);
  }
  // 0: a CNP for every marked packet. Sub-microsecond spacings round down to it.
  c.np.min_time_between_cnps = to_us(p.cnp.min_time_between_cnps_ns);
  c.np.cnp_dscp = p.cnp.dscp;
  c.np.cnp_802p_prio = p.cnp.priority;
  c.np.cnp_ecn = static_cast<uint8_t>(p.cnp.ecn);
  const policy::TransportSection& t = p.transport;
  c.qp_defaults.ack_req_every_packets = t.ack_frequency;
  c.qp_defaults.window_packets = t.window_packets;
  if (t.bdp_cap_bytes != 0) {
    c.qp_defaults.sr_bdp_bytes = static_cast<uint32_t>(std::min<uint64_t>(t.bdp_cap_bytes, ~0u));
  }
  transport::QpAttr& a = c.qp_defaults.reset_attr;
  a.pmtu_bytes = t.pmtu_bytes;
  a.timeout = static_cast<uint8_t>(t.timeout_exponent);
  a.retry_cnt = static_cast<uint8_t>(t.retry_cnt);
  a.rnr_retry = static_cast<uint8_t>(t.rnr_retry);
  a.min_rnr_timer = static_cast<uint8_t>(t.min_rnr_timer);
  // As requester the policy's depth (at most the transport's); as responder always the
  // transport's maximum: the connection manager does not negotiate READ depths, so a peer
  // daemon whose policy allows more READs than ours is still served, never NAKed.
  static_assert(policy::kMaxOutstandingReads == transport::kMaxReadDepth);
  a.max_rd_atomic = static_cast<uint8_t>(t.max_outstanding_reads);
  a.max_dest_rd_atomic = static_cast<uint8_t>(transport::kMaxReadDepth);
  c.offer_selective_repeat = t.loss_recovery == policy::LossRecovery::kSelective;
  c.idle_mode = idle_mode_from_policy(p.daemon.idle_mode);
  return c;
}

PolicyUpdate engine_policy_update(const policy::Policy& p) {
  EngineConfig c = engine_config_from_policy(p, net::MacAddr{}, 0);
  PolicyUpdate u;
  u.classes = std::move(c.classes);
  u.np = c.np;
  u.qp_defaults = c.qp_defaults;
  u.offer_selective_repeat = c.offer_selective_repeat;
  return u;
}

}  // namespace conduit::engine
