#include "policy/policy_dump.h"

#include <yaml-cpp/yaml.h>

#include "policy/address.h"
#include "policy/dcqcn_knobs.h"
#include "policy/units.h"

namespace conduit::policy {
namespace {

const char* name_of(LogLevel v) {
  switch (v) {
    case LogLevel::kTrace:
      return "trace";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
    case LogLevel::kCritical:
      return "critical";
    case LogLevel::kOff:
      break;
  }
  return "off";
}

const char* name_of(IdleMode v) { return v == IdleMode::kSpin ? "spin" : "adaptive"; }

const char* name_of(EcnCodepoint v) {
  switch (v) {
    case EcnCodepoint::kEct0:
      return "ect0";
    case EcnCodepoint::kEct1:
      return "ect1";
    case EcnCodepoint::kNotEct:
      break;
  }
  return "not_ect";
}

const char* name_of(CcAlgorithm v) {
  switch (v) {
    case CcAlgorithm::kDcqcn:
      return "dcqcn";
    case CcAlgorithm::kFixed:
      return "fixed";
    case CcAlgorithm::kNone:
      break;
  }
  return "none";
}

const char* name_of(DcqcnPreset v) { return v == DcqcnPreset::kPaper ? "paper" : "mlx5"; }

const char* name_of(LossRecovery v) {
  return v == LossRecovery::kSelective ? "selective" : "go_back_n";
}

void emit_ids(YAML::Emitter& out, const char* key, const std::vector<uint32_t>& ids) {
  out << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (uint32_t id : ids) out << id;
  out << YAML::EndSeq;
}

void emit_congestion_control(YAML::Emitter& out, const CongestionControl& cc) {
  out << YAML::Key << "congestion_control" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "algorithm" << YAML::Value << name_of(cc.algorithm);
  if (cc.algorithm == CcAlgorithm::kFixed) {
    out << YAML::Key << "rate" << YAML::Value << format_rate(cc.fixed_rate_bps);
  } else if (cc.algorithm == CcAlgorithm::kDcqcn) {
    out << YAML::Key << "preset" << YAML::Value << name_of(cc.preset);
    for (const detail::DcqcnKnob& k : detail::kDcqcnKnobs) {
      out << YAML::Key << std::string(k.name) << YAML::Value;
      switch (k.kind) {
        case detail::KnobKind::kDuration:
          out << format_duration(cc.dcqcn.*k.u64);
          break;
        case detail::KnobKind::kRate:
          out << format_rate(cc.dcqcn.*k.u64);
          break;
        case detail::KnobKind::kSize:
          out << format_size(cc.dcqcn.*k.u64);
          break;
        case detail::KnobKind::kInteger:
          out << cc.dcqcn.*k.u32;
          break;
        case detail::KnobKind::kBool:
          out << (cc.dcqcn.*k.flag ? "true" : "false");
          break;
      }
    }
  }
  out << YAML::EndMap;
}

}  // namespace

std::string to_yaml(const Policy& p) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "version" << YAML::Value << 1;

  const DaemonSection& d = p.daemon;
  out << YAML::Key << "daemon" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "control_socket" << YAML::Value << d.control_socket;
  if (!d.socket_group.empty()) {
    out << YAML::Key << "socket_group" << YAML::Value << d.socket_group;
  }
  emit_ids(out, "lcores", d.lcores);
  out << YAML::Key << "log_level" << YAML::Value << name_of(d.log_level);
  out << YAML::Key << "metrics_address" << YAML::Value
      << (d.metrics ? format_ipv4(d.metrics->ip) + ":" + std::to_string(d.metrics->port)
                    : std::string("off"));
  out << YAML::Key << "metrics_max_qps" << YAML::Value << d.metrics_max_qps;
  out << YAML::Key << "idle_mode" << YAML::Value << name_of(d.idle_mode);
  out << YAML::EndMap;

  const PortSection& port = p.port;
  out << YAML::Key << "port" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "device" << YAML::Value << YAML::DoubleQuoted << port.device;
  out << YAML::Key << "eal_args" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const auto& arg : port.eal_args) out << YAML::DoubleQuoted << arg;
  out << YAML::EndSeq;
  out << YAML::Key << "address" << YAML::Value
      << format_ipv4(port.address) + "/" + std::to_string(port.prefix_len);
  if (port.gateway) out << YAML::Key << "gateway" << YAML::Value << format_ipv4(*port.gateway);
  if (port.address6) {
    out << YAML::Key << "address6" << YAML::Value
        << format_ipv6(*port.address6) + "/" + std::to_string(port.prefix_len6);
  }
  if (port.gateway6) out << YAML::Key << "gateway6" << YAML::Value << format_ipv6(*port.gateway6);
  out << YAML::Key << "neighbours" << YAML::Value;
  if (port.neighbours.empty() && port.neighbours6.empty()) out << YAML::Flow;  // "{}"
  out << YAML::BeginMap;
  for (const auto& n : port.neighbours) {
    out << YAML::Key << format_ipv4(n.ip) << YAML::Value << YAML::DoubleQuoted << format_mac(n.mac);
  }
  for (const auto& n : port.neighbours6) {
    out << YAML::Key << YAML::DoubleQuoted << format_ipv6(n.ip) << YAML::Value << YAML::DoubleQuoted
        << format_mac(n.mac);
  }
  out << YAML::EndMap;
  out << YAML::Key << "mtu" << YAML::Value << port.mtu_bytes;
  if (port.vlan) out << YAML::Key << "vlan" << YAML::Value << *port.vlan;
  if (port.priority_tagging) out << YAML::Key << "priority_tagging" << YAML::Value << true;
  if (port.line_rate_bps) {
    out << YAML::Key << "line_rate" << YAML::Value << format_rate(*port.line_rate_bps);
  }
  out << YAML::Key << "roce_udp_port" << YAML::Value << port.roce_udp_port;
  out << YAML::Key << "cm_udp_port" << YAML::Value << port.cm_udp_port;
  out << YAML::Key << "rx_descriptors" << YAML::Value << port.rx_descriptors;
  out << YAML::Key << "tx_descriptors" << YAML::Value << port.tx_descriptors;
  out << YAML::Key << "mbufs" << YAML::Value << port.mbufs;
  out << YAML::EndMap;

  out << YAML::Key << "traffic_classes" << YAML::Value << YAML::BeginSeq;
  for (const TrafficClass& tc : p.traffic_classes) {
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << tc.name;
    out << YAML::Key << "default" << YAML::Value << (tc.is_default ? "true" : "false");
    out << YAML::Key << "dscp" << YAML::Value << static_cast<unsigned>(tc.dscp);
    out << YAML::Key << "ecn" << YAML::Value << name_of(tc.ecn);
    out << YAML::Key << "priority" << YAML::Value << static_cast<unsigned>(tc.priority);
    out << YAML::Key << "weight" << YAML::Value;
    if (tc.strict) {
      out << "strict";
    } else {
      out << tc.weight;
    }
    if (tc.max_rate_bps) {
      out << YAML::Key << "max_rate" << YAML::Value << format_rate(*tc.max_rate_bps);
    }
    emit_congestion_control(out, tc.congestion_control);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;

  const CnpSection& c = p.cnp;
  out << YAML::Key << "cnp" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "dscp" << YAML::Value << static_cast<unsigned>(c.dscp);
  out << YAML::Key << "ecn" << YAML::Value << name_of(c.ecn);
  out << YAML::Key << "priority" << YAML::Value << static_cast<unsigned>(c.priority);
  out << YAML::Key << "min_time_between_cnps" << YAML::Value
      << format_duration(c.min_time_between_cnps_ns);
  out << YAML::EndMap;

  const TransportSection& t = p.transport;
  out << YAML::Key << "transport" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "pmtu" << YAML::Value << t.pmtu_bytes;
  out << YAML::Key << "timeout" << YAML::Value << t.timeout_exponent;
  out << YAML::Key << "retry_cnt" << YAML::Value << t.retry_cnt;
  out << YAML::Key << "rnr_retry" << YAML::Value << t.rnr_retry;
  out << YAML::Key << "min_rnr_timer" << YAML::Value << t.min_rnr_timer;
  out << YAML::Key << "ack_frequency" << YAML::Value << t.ack_frequency;
  out << YAML::Key << "window" << YAML::Value << t.window_packets;
  out << YAML::Key << "loss_recovery" << YAML::Value << name_of(t.loss_recovery);
  out << YAML::Key << "bdp_cap" << YAML::Value << format_size(t.bdp_cap_bytes);
  out << YAML::Key << "max_outstanding_reads" << YAML::Value << t.max_outstanding_reads;
  out << YAML::EndMap;

  const ClientsSection& cl = p.clients;
  out << YAML::Key << "clients" << YAML::Value << YAML::BeginMap;
  emit_ids(out, "allowed_uids", cl.allowed_uids);
  emit_ids(out, "allowed_gids", cl.allowed_gids);
  out << YAML::Key << "allowed_peers" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const Ipv4Prefix& n : cl.allowed_peers) {
    out << format_ipv4(n.network) + "/" + std::to_string(n.length);
  }
  for (const Ipv6Prefix& n : cl.allowed_peers6) {
    out << format_ipv6(n.network) + "/" + std::to_string(n.length);
  }
  out << YAML::EndSeq;
  out << YAML::Key << "quotas" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "max_qps" << YAML::Value << cl.quotas.max_qps;
  out << YAML::Key << "max_cqs" << YAML::Value << cl.quotas.max_cqs;
  out << YAML::Key << "max_mrs" << YAML::Value << cl.quotas.max_mrs;
  out << YAML::Key << "max_send_wr" << YAML::Value << cl.quotas.max_send_wr;
  out << YAML::Key << "max_recv_wr" << YAML::Value << cl.quotas.max_recv_wr;
  out << YAML::Key << "max_cqe" << YAML::Value << cl.quotas.max_cqe;
  out << YAML::Key << "max_registered_memory" << YAML::Value
      << format_size(cl.quotas.max_registered_bytes);
  out << YAML::Key << "max_region_size" << YAML::Value << format_size(cl.quotas.max_region_bytes);
  out << YAML::EndMap;
  out << YAML::EndMap;

  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace conduit::policy
