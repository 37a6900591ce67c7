#include "policy/policy_diff.h"

namespace conduit::policy {

std::vector<std::string> restart_required_changes(const Policy& started, const Policy& next) {
  std::vector<std::string> keys;
  auto check = [&](bool same, const char* key) {
    if (!same) keys.emplace_back(key);
  };
  const DaemonSection& a = started.daemon;
  const DaemonSection& b = next.daemon;
  check(a.control_socket == b.control_socket, "daemon.control_socket");
  check(a.socket_group == b.socket_group, "daemon.socket_group");
  check(a.lcores == b.lcores, "daemon.lcores");
  check(a.metrics == b.metrics, "daemon.metrics_address");
  const PortSection& p = started.port;
  const PortSection& q = next.port;
  check(p.device == q.device, "port.device");
  check(p.eal_args == q.eal_args, "port.eal_args");
  check(p.address == q.address && p.prefix_len == q.prefix_len, "port.address");
  check(p.gateway == q.gateway, "port.gateway");
  check(p.address6 == q.address6 && p.prefix_len6 == q.prefix_len6, "port.address6");
  check(p.gateway6 == q.gateway6, "port.gateway6");
  check(p.neighbours == q.neighbours && p.neighbours6 == q.neighbours6, "port.neighbours");
  check(p.mtu_bytes == q.mtu_bytes, "port.mtu");
  check(p.vlan == q.vlan, "port.vlan");
  check(p.priority_tagging == q.priority_tagging, "port.priority_tagging");
  check(p.line_rate_bps == q.line_rate_bps, "port.line_rate");
  check(p.roce_udp_port == q.roce_udp_port, "port.roce_udp_port");
  check(p.cm_udp_port == q.cm_udp_port, "port.cm_udp_port");
  check(p.rx_descriptors == q.rx_descriptors, "port.rx_descriptors");
  check(p.tx_descriptors == q.tx_descriptors, "port.tx_descriptors");
  check(p.mbufs == q.mbufs, "port.mbufs");
  // traffic_classes, cnp and transport go to the running engine (EngineOp::kSetPolicy).
  return keys;
}

}  // namespace conduit::policy
