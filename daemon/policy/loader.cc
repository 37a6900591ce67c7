#include "policy/loader.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "policy/address.h"
#include "policy/dcqcn_knobs.h"
#include "policy/quote.h"
#include "policy/units.h"
#include "policy/yaml_reader.h"

namespace conduit::policy {
namespace {

using detail::DcqcnKnob;
using detail::EnumNames;
using detail::ErrorSink;
using detail::Field;
using detail::kMaxRateBps;
using detail::kMinRateBps;
using detail::KnobKind;
using detail::MapReader;

constexpr size_t kMaxTrafficClasses = 16;
constexpr size_t kMaxClassNameBytes = 32;
constexpr size_t kMaxSocketPathBytes = 107;  // sun_path holds 108 bytes with the NUL
constexpr uint64_t kMaxLcore = 1023;
constexpr uint64_t kMaxId = 4'294'967'294;  // (uid_t)-1 means "no id"
// Positions of values that checks across sections point back at.
struct Marks {
  YAML::Mark root;
  std::optional<YAML::Mark> port_mtu;
  std::optional<YAML::Mark> pmtu;
  std::optional<YAML::Mark> bdp_cap;
  std::optional<YAML::Mark> cnp_dscp;
  // A value already reported as wrong: checks against it would be follow-on errors.
  bool port_mtu_bad = false;
  bool pmtu_bad = false;
  bool cnp_dscp_bad = false;
};

template <typename T, typename V>
void assign(T& out, const std::optional<V>& v) {
  if (v) out = static_cast<T>(*v);
}

const EnumNames<LogLevel> kLogLevels = {
    {"trace", LogLevel::kTrace}, {"debug", LogLevel::kDebug}, {"info", LogLevel::kInfo},
    {"warn", LogLevel::kWarn},   {"error", LogLevel::kError}, {"critical", LogLevel::kCritical},
    {"off", LogLevel::kOff}};
const EnumNames<IdleMode> kIdleModes = {{"spin", IdleMode::kSpin},
                                        {"adaptive", IdleMode::kAdaptive}};
const EnumNames<EcnCodepoint> kEcnCodepoints = {{"ect0", EcnCodepoint::kEct0},
                                                {"ect1", EcnCodepoint::kEct1},
                                                {"not_ect", EcnCodepoint::kNotEct}};
const EnumNames<CcAlgorithm> kCcAlgorithms = {
    {"dcqcn", CcAlgorithm::kDcqcn}, {"fixed", CcAlgorithm::kFixed}, {"none", CcAlgorithm::kNone}};
const EnumNames<DcqcnPreset> kDcqcnPresets = {{"mlx5", DcqcnPreset::kMlx5},
                                              {"paper", DcqcnPreset::kPaper}};
const EnumNames<LossRecovery> kLossRecoveries = {{"go_back_n", LossRecovery::kGoBackN},
                                                 {"selective", LossRecovery::kSelective}};

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// [DDDD:]BB:DD.F as DPDK's allow list takes it.
bool is_pci_address(std::string_view s) {
  if (s.size() == 12) {
    for (size_t i = 0; i < 4; ++i) {
      if (!is_hex(s[i])) return false;
    }
    if (s[4] != ':') return false;
    s.remove_prefix(5);
  }
  if (s.size() != 7) return false;
  return is_hex(s[0]) && is_hex(s[1]) && s[2] == ':' && is_hex(s[3]) && is_hex(s[4]) &&
         s[5] == '.' && s[6] >= '0' && s[6] <= '7';
}

// net_<driver><n>[,key=value...] as DPDK's --vdev takes it.
bool is_net_vdev(std::string_view s) {
  if (s.substr(0, 4) != "net_") return false;
  size_t comma = s.find(',');
  std::string_view name = s.substr(0, comma);
  if (name.size() <= 4) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  if (comma == std::string_view::npos) return true;
  std::string_view args = s.substr(comma + 1);
  while (true) {
    size_t next = args.find(',');
    std::string_view kv = args.substr(0, next);
    size_t eq = kv.find('=');
    if (eq == 0 || eq == std::string_view::npos) return false;
    for (char c : kv) {
      if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7F) {
        return false;
      }
    }
    if (next == std::string_view::npos) return true;
    args.remove_prefix(next + 1);
  }
}

// `text` without the leading zeros of each number that follows its start, a '.', a '/' or a
// ':' ("198.018.0.1/08" -> "198.18.0.1/8"): what an operator who wrote them most likely meant.
// Our IPv4 text takes none, since inet_aton and its kin read 010 as octal (8).
std::string without_leading_zeros(std::string_view text) {
  std::string out;
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  for (size_t i = 0; i < text.size(); ++i) {
    const bool starts = i == 0 || text[i - 1] == '.' || text[i - 1] == '/' || text[i - 1] == ':';
    if (starts) {
      while (text[i] == '0' && i + 1 < text.size() && digit(text[i + 1])) ++i;
    }
    out += text[i];
  }
  return out;
}

// "; did you mean X?" when `text` without its leading zeros is what `accepted` takes; else "".
template <class Accepted>
std::string leading_zero_hint(std::string_view text, Accepted accepted) {
  const std::string fixed = without_leading_zeros(text);
  if (fixed == text || !accepted(fixed)) return "";
  return "; without leading zeros (some tools read 010 as octal 8), did you mean " + fixed + "?";
}

std::string ipv4_hint(std::string_view text) {
  return leading_zero_hint(text, [](std::string_view t) { return parse_ipv4(t).has_value(); });
}

std::optional<Ipv4Address> read_ipv4(ErrorSink& s, const Field& f) {
  auto text = detail::read_string(s, f);
  if (!text) return std::nullopt;
  auto ip = parse_ipv4(*text);
  if (!ip) {
    s.add(f.mark,
          f.path + ": " + quote(*text) + " is not an IPv4 address (a.b.c.d)" + ipv4_hint(*text));
  }
  return ip;
}

// daemon.metrics_address's IPV4:PORT: "" and *out set, or why not (after the quoted text).
std::string metrics_address_problem(std::string_view text, SocketAddress* out) {
  static const std::string kForm = "IPV4:PORT (e.g. 127.0.0.1:9464) or off";
  const size_t colon = text.rfind(':');
  if (text.starts_with('[') || (colon != std::string_view::npos &&
                                text.substr(0, colon).find(':') != std::string_view::npos)) {
    return "is an IPv6 address: the metrics endpoint listens on IPv4 only; expected " + kForm;
  }
  if (colon == std::string_view::npos) return "has no ':PORT'; expected " + kForm;
  const std::string_view host = text.substr(0, colon);
  const std::string_view digits = text.substr(colon + 1);
  if (host.empty()) return "has no address before the port; expected " + kForm;
  const std::optional<Ipv4Address> ip = parse_ipv4(host);
  if (!ip) return "has " + quote(host) + " before the port, not an IPv4 address (a.b.c.d)";
  if (digits.empty()) return "has no port after the ':'; expected " + kForm;
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return "has port " + quote(digits) + ", not a decimal number";
  }
  uint64_t port = 0;
  for (const char c : digits) {
    port = std::min<uint64_t>(port * 10 + static_cast<uint64_t>(c - '0'), 65536);  // saturated
  }
  if (port == 0 || port > 65535) {
    return "has port " + std::string(digits) + ", out of range 1..65535";
  }
  if (digits.size() > 1 && digits[0] == '0') {
    return "has port " + quote(digits) + " with a leading zero";
  }
  if (out != nullptr) *out = SocketAddress{*ip, static_cast<uint16_t>(port)};
  return "";
}

// Not 0.0.0.0/8 ("this network"), loopback, multicast or class E (with broadcast).
bool is_unicast_host(Ipv4Address ip) {
  const uint32_t first = ip.value >> 24;
  return first != 0 && first != 127 && (ip.value >> 28) != 0xE && (ip.value >> 28) != 0xF;
}

// "" when ip may be a host of the subnet; otherwise why not. /31 (RFC 3021) and /32
// have no network or broadcast address.
std::string subnet_role(Ipv4Address ip, Ipv4Address subnet, uint8_t prefix_len) {
  if (prefix_len >= 31) return "";
  const uint32_t mask = prefix_mask(prefix_len);
  const std::string net =
      format_ipv4(Ipv4Address{subnet.value & mask}) + "/" + std::to_string(prefix_len);
  if ((ip.value & ~mask) == 0) return "the network address of " + net;
  if ((ip.value & ~mask) == ~mask) return "the broadcast address of " + net;
  return "";
}

// ---- daemon ---------------------------------------------------------------

void parse_daemon(ErrorSink& s, const Field& f, DaemonSection& d) {
  MapReader r(s, f);
  if (auto v = r.take("control_socket")) {
    if (auto path = detail::read_string(s, *v)) {
      if (path->empty() || path->front() != '/') {
        s.add(v->mark, v->path + ": must be an absolute path, got " + quote(*path));
      } else if (path->size() > kMaxSocketPathBytes) {
        s.add(v->mark, v->path + ": longer than " + std::to_string(kMaxSocketPathBytes) +
                           " bytes, the limit of a Unix socket path");
      } else {
        d.control_socket = *path;
      }
    }
  }
  if (auto v = r.take("socket_group")) {
    if (auto group = detail::read_string(s, *v)) {
      bool ok = !group->empty() && group->size() <= 32 &&
                std::all_of(group->begin(), group->end(), is_name_char);
      if (!ok) {
        s.add(v->mark, v->path + ": " + quote(*group) + " is not a group name or number");
      } else {
        d.socket_group = *group;
      }
    }
  }
  if (auto v = r.take("lcores")) {
    if (auto list = detail::read_list(s, *v)) {
      std::vector<uint32_t> lcores;
      bool ok = true;
      for (const Field& e : *list) {
        auto id = detail::read_uint(s, e, 0, kMaxLcore);
        if (!id) {
          ok = false;
        } else if (std::find(lcores.begin(), lcores.end(), *id) != lcores.end()) {
          s.add(e.mark, e.path + ": lcore " + std::to_string(*id) + " is listed twice");
          ok = false;
        } else {
          lcores.push_back(static_cast<uint32_t>(*id));
        }
      }
      if (list->empty()) {
        s.add(v->mark, v->path + ": needs at least one lcore");
      } else if (ok) {
        d.lcores = std::move(lcores);
      }
    }
  }
  if (auto v = r.take("log_level")) assign(d.log_level, detail::read_enum(s, *v, kLogLevels));
  if (auto v = r.take("metrics_address")) {
    if (auto text = detail::read_string(s, *v)) {
      if (*text == "off") {
        d.metrics.reset();
      } else if (text->find(':') == std::string::npos) {
        s.add(v->mark,
              v->path + ": expected IPV4:PORT (e.g. 127.0.0.1:9464) or off, got " + quote(*text));
      } else {
        SocketAddress address;
        if (const std::string why = metrics_address_problem(*text, &address); !why.empty()) {
          s.add(v->mark, v->path + ": " + quote(*text) + " " + why +
                             leading_zero_hint(*text, [](std::string_view t) {
                               return metrics_address_problem(t, nullptr).empty();
                             }));
        } else {
          d.metrics = address;
        }
      }
    }
  }
  if (auto v = r.take("metrics_max_qps")) {
    assign(d.metrics_max_qps, detail::read_uint(s, *v, 0, kMaxMetricsMaxQps));
  }
  if (auto v = r.take("idle_mode")) assign(d.idle_mode, detail::read_enum(s, *v, kIdleModes));
  r.finish();
}

// ---- port -------------------------------------------------------------------

// A MAC a static neighbour may have: unicast, not all zero; nullopt (error added) otherwise.
std::optional<MacAddress> read_neighbour_mac(ErrorSink& s, const Field& value) {
  auto text = detail::read_string(s, value);
  if (!text) return std::nullopt;
  auto mac = parse_mac(*text);
  if (!mac) {
    s.add(value.mark,
          value.path + ": " + quote(*text) + " is not a MAC address (aa:bb:cc:dd:ee:ff)");
    return std::nullopt;
  }
  if ((mac->bytes[0] & 1) != 0 || *mac == MacAddress{}) {
    s.add(value.mark, value.path + ": " + quote(*text) + " is not a unicast MAC address");
    return std::nullopt;
  }
  return mac;
}

// port.neighbours: IPv4 keys (inside the port's subnet) and, with port.address6, IPv6 keys
// (link-local or inside address6's prefix).
void parse_neighbours(ErrorSink& s, const Field& f, PortSection& port, bool have_address,
                      bool have_address6) {
  if (f.node.IsNull()) return;
  if (!f.node.IsMap()) {
    s.add(f.mark, f.path + ": expected a mapping of IP address to MAC address, got " +
                      detail::describe(f.node));
    return;
  }
  if (f.node.size() > kMaxStaticNeighbours) {
    s.add(f.mark, f.path + ": " + std::to_string(f.node.size()) + " entries, at most " +
                      std::to_string(kMaxStaticNeighbours) + " are accepted");
    return;
  }
  for (auto it = f.node.begin(); it != f.node.end(); ++it) {
    Field key{it->first, it->first.Mark(), f.path};
    const auto key_text = detail::read_string(s, key);
    if (!key_text) continue;
    const auto value_field = [&](const std::string& name) {
      return Field{it->second, it->second.IsNull() ? key.mark : it->second.Mark(),
                   f.path + "." + name};
    };
    if (key_text->find(':') != std::string::npos) {
      const auto ip = parse_ipv6(*key_text);
      if (!ip || !is_unicast_host6(*ip)) {
        s.add(key.mark, f.path + ": " + quote(*key_text) + " is not a unicast IPv6 address");
        continue;
      }
      const auto mac = read_neighbour_mac(s, value_field(format_ipv6(*ip)));
      if (!mac) continue;
      if (!have_address6) {
        s.add(key.mark, f.path + ": " + format_ipv6(*ip) +
                            " is an IPv6 neighbour, which needs port.address6");
        continue;
      }
      if (!is_link_local6(*ip) && !same_ipv6_prefix(*ip, *port.address6, port.prefix_len6)) {
        s.add(key.mark, f.path + ": " + format_ipv6(*ip) + " is neither link-local nor inside " +
                            format_ipv6(*port.address6) + "/" + std::to_string(port.prefix_len6));
        continue;
      }
      auto& out = port.neighbours6;
      if (std::find_if(out.begin(), out.end(), [&](const Neighbour6& n) { return n.ip == *ip; }) !=
          out.end()) {
        s.add(key.mark, f.path + ": " + format_ipv6(*ip) + " is listed twice");
        continue;
      }
      out.push_back(Neighbour6{*ip, *mac});
      continue;
    }
    auto ip = parse_ipv4(*key_text);
    if (!ip) {
      s.add(key.mark, key.path + ": " + quote(*key_text) +
                          " is not an IPv4 address (a.b.c.d) or an IPv6 address" +
                          ipv4_hint(*key_text));
      continue;
    }
    const auto mac = read_neighbour_mac(s, value_field(format_ipv4(*ip)));
    if (!mac) continue;
    if (have_address && ((ip->value ^ port.address.value) & prefix_mask(port.prefix_len)) != 0) {
      s.add(key.mark, f.path + ": " + format_ipv4(*ip) + " is outside the port's subnet " +
                          format_ipv4(port.address) + "/" + std::to_string(port.prefix_len));
      continue;
    }
    auto& out = port.neighbours;
    auto dup =
        std::find_if(out.begin(), out.end(), [&](const Neighbour& n) { return n.ip == *ip; });
    if (dup != out.end()) {
      s.add(key.mark, f.path + ": " + format_ipv4(*ip) + " is listed twice");
      continue;
    }
    out.push_back(Neighbour{*ip, *mac});
  }
}

void parse_port(ErrorSink& s, const Field& f, PortSection& p, Marks& marks) {
  MapReader r(s, f);
  bool have_device = false;
  bool have_address = false;  // present and valid, so subnet checks can use it
  bool address_given = false;
  if (auto v = r.take("device")) {
    have_device = true;
    if (auto dev = detail::read_string(s, *v)) {
      if (is_pci_address(*dev)) {
        // DPDK names a PCI port by its full lower-case address; so do we.
        std::string full = dev->size() == 7 ? "0000:" + *dev : *dev;
        std::transform(full.begin(), full.end(), full.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        p.device = full;
        p.device_kind = DeviceKind::kPci;
      } else if (is_net_vdev(*dev)) {
        p.device = *dev;
        p.device_kind = DeviceKind::kVdev;
      } else {
        s.add(v->mark, v->path + ": " + quote(*dev) +
                           " is neither a PCI address (0000:3b:00.0) nor a DPDK net vdev "
                           "(net_memif0,role=server,...)");
      }
    }
  }
  if (auto v = r.take("eal_args")) {
    if (auto list = detail::read_list(s, *v)) {
      std::vector<std::string> args;
      for (const Field& e : *list) {
        auto arg = detail::read_string(s, e);
        if (arg && arg->empty()) {
          s.add(e.mark, e.path + ": empty argument");
        } else if (arg) {
          args.push_back(*arg);
        }
      }
      if (args.size() == list->size()) p.eal_args = std::move(args);
    }
  }
  if (auto v = r.take("address")) {
    address_given = true;
    have_address = true;
    if (auto text = detail::read_string(s, *v)) {
      const std::optional<Ipv4Prefix> net = parse_ipv4_prefix(*text);
      if (!net || net->length < 1) {
        s.add(v->mark, v->path + ": expected IPV4/PREFIX (e.g. 198.18.0.1/24), got " +
                           quote(*text) + leading_zero_hint(*text, [](std::string_view t) {
                             const auto n = parse_ipv4_prefix(t);
                             return n && n->length >= 1;
                           }));
        have_address = false;
      } else if (!is_unicast_host(net->network)) {
        s.add(v->mark,
              v->path + ": " + format_ipv4(net->network) + " is not a unicast host address");
        have_address = false;
      } else if (auto role = subnet_role(net->network, net->network, net->length); !role.empty()) {
        s.add(v->mark,
              v->path + ": " + format_ipv4(net->network) + " is " + role + ", not a host address");
        have_address = false;
      } else {
        p.address = net->network;
        p.prefix_len = net->length;
      }
    } else {
      have_address = false;
    }
  }
  if (auto v = r.take("gateway")) {
    if (auto ip = read_ipv4(s, *v)) {
      if (!is_unicast_host(*ip)) {
        s.add(v->mark, v->path + ": " + format_ipv4(*ip) + " is not a unicast host address");
      } else if (have_address && ((ip->value ^ p.address.value) & prefix_mask(p.prefix_len)) != 0) {
        s.add(v->mark, v->path + ": " + format_ipv4(*ip) + " is outside the port's subnet " +
                           format_ipv4(p.address) + "/" + std::to_string(p.prefix_len));
      } else if (have_address && *ip == p.address) {
        s.add(v->mark, v->path + ": is the port's own address");
      } else if (auto role = have_address ? subnet_role(*ip, p.address, p.prefix_len) : "";
                 !role.empty()) {
        s.add(v->mark, v->path + ": " + format_ipv4(*ip) + " is " + role + ", not a host address");
      } else {
        p.gateway = *ip;
      }
    }
  }
  bool have_address6 = false;
  if (auto v = r.take("address6")) {
    if (auto text = detail::read_string(s, *v)) {
      const auto net = parse_ipv6_prefix(*text);
      if (!net) {
        s.add(v->mark, v->path +
                           ": expected IPV6/PREFIX (e.g. fe80::c0:1/64 or 2001:db8::1/64), got " +
                           quote(*text));
      } else if (!is_unicast_host6(net->first)) {
        s.add(v->mark, v->path + ": " + format_ipv6(net->first) +
                           " is not a unicast address a port can own (unspecified, loopback, "
                           "multicast or IPv4-mapped)");
      } else {
        p.address6 = net->first;
        p.prefix_len6 = net->second;
        have_address6 = true;
      }
    }
  }
  if (auto v = r.take("gateway6")) {
    if (auto text = detail::read_string(s, *v)) {
      const auto ip = parse_ipv6(*text);
      if (!ip) {
        s.add(v->mark, v->path + ": expected an IPv6 address, got " + quote(*text));
      } else if (!is_unicast_host6(*ip)) {
        s.add(v->mark, v->path + ": " + format_ipv6(*ip) + " is not a unicast address");
      } else if (!have_address6) {
        s.add(v->mark, v->path +
                           ": needs port.address6 (an IPv6 router for a port without an "
                           "IPv6 address)");
      } else if (*ip == *p.address6) {
        s.add(v->mark, v->path + ": is the port's own address");
      } else if (!is_link_local6(*ip) && !same_ipv6_prefix(*ip, *p.address6, p.prefix_len6)) {
        s.add(v->mark, v->path + ": " + format_ipv6(*ip) + " is neither link-local nor inside " +
                           format_ipv6(*p.address6) + "/" + std::to_string(p.prefix_len6));
      } else {
        p.gateway6 = *ip;
      }
    }
  }
  if (auto v = r.take("neighbours")) parse_neighbours(s, *v, p, have_address, have_address6);
  if (auto v = r.take("mtu")) {
    marks.port_mtu = v->mark;
    auto mtu = detail::read_uint(s, *v, 576, 9216);
    assign(p.mtu_bytes, mtu);
    marks.port_mtu_bad = !mtu;
  }
  if (auto v = r.take("vlan")) {
    // 0 (priority tags only) and 4095 are reserved VIDs (IEEE 802.1Q).
    if (auto vid = detail::read_uint(s, *v, 1, 4094)) p.vlan = static_cast<uint16_t>(*vid);
  }
  if (auto v = r.take("priority_tagging")) {
    if (auto on = detail::read_bool(s, *v)) {
      if (*on && p.vlan) {
        s.add(v->mark, v->path +
                           ": is for ports without port.vlan (with it, every RoCE frame's "
                           "tag already carries its priority)");
      } else {
        p.priority_tagging = *on;
      }
    }
  }
  if (auto v = r.take("line_rate")) {
    if (auto rate = detail::read_rate_bps(s, *v, 1'000'000, kMaxRateBps)) p.line_rate_bps = rate;
  }
  std::optional<Field> roce_port_field = r.take("roce_udp_port");
  if (roce_port_field) assign(p.roce_udp_port, detail::read_uint(s, *roce_port_field, 1, 65535));
  if (auto v = r.take("cm_udp_port")) {
    if (auto port = detail::read_uint(s, *v, 1, 65535)) {
      if (*port == p.roce_udp_port) {
        s.add(v->mark, v->path + ": " + std::to_string(*port) +
                           " is also the RoCE UDP port (port.roce_udp_port)");
      } else {
        p.cm_udp_port = static_cast<uint16_t>(*port);
      }
    }
  } else if (roce_port_field && p.roce_udp_port == p.cm_udp_port) {
    s.add(roce_port_field->mark, roce_port_field->path + ": " + std::to_string(p.roce_udp_port) +
                                     " is also the connection-manager port "
                                     "(port.cm_udp_port, default 4792)");
  }
  std::optional<Field> rx_field = r.take("rx_descriptors");
  if (rx_field) assign(p.rx_descriptors, detail::read_uint(s, *rx_field, 64, 16384));
  if (auto v = r.take("tx_descriptors"))
    assign(p.tx_descriptors, detail::read_uint(s, *v, 64, 16384));
  std::optional<Field> mbufs_field = r.take("mbufs");
  if (mbufs_field) assign(p.mbufs, detail::read_uint(s, *mbufs_field, 1023, 1048575));
  if (p.mbufs <= p.rx_descriptors + p.tx_descriptors) {
    const Field* at = mbufs_field ? &*mbufs_field : rx_field ? &*rx_field : nullptr;
    const std::string msg =
        "port.mbufs: " + std::to_string(p.mbufs) + " cannot fill the RX and TX rings (" +
        std::to_string(p.rx_descriptors) + " + " + std::to_string(p.tx_descriptors) +
        " descriptors); raise mbufs or lower the ring sizes";
    if (at != nullptr) {
      s.add(at->mark, msg);
    } else {
      s.add(r.mark(), msg);
    }
  }
  if (r.is_map()) {
    if (!have_device) {
      s.add(r.mark(), "port: missing required key 'device' (PCI address or DPDK vdev)");
    }
    if (!address_given) {
      s.add(r.mark(), "port: missing required key 'address' (e.g. 198.18.0.1/24)");
    }
  }
  r.finish();
}

// ---- traffic classes --------------------------------------------------------

void parse_congestion_control(ErrorSink& s, const Field& f, CongestionControl& cc,
                              std::optional<uint64_t> class_max_rate_bps) {
  if (f.node.IsScalar()) {
    auto algorithm = detail::read_enum(s, f, kCcAlgorithms);
    if (algorithm == CcAlgorithm::kFixed) {
      s.add(f.mark, f.path + ": fixed needs a rate: write {algorithm: fixed, rate: 10gbit}");
    } else if (algorithm) {
      cc.algorithm = *algorithm;
    }
    return;
  }
  MapReader r(s, f);
  if (!r.is_map()) return;
  if (auto v = r.take("algorithm")) assign(cc.algorithm, detail::read_enum(s, *v, kCcAlgorithms));
  std::optional<Field> preset_field = r.take("preset");
  if (auto v = preset_field) {
    if (auto preset = detail::read_enum(s, *v, kDcqcnPresets)) {
      cc.preset = *preset;
      cc.dcqcn = dcqcn_preset(*preset);
    }
  }
  std::vector<Field> dcqcn_only;  // preset and knobs given, refused for other algorithms
  if (preset_field) dcqcn_only.push_back(*preset_field);
  // The knobs the file sets, and whether each was valid: the checks across knobs
  // point at one the file sets, and skip any already reported as wrong.
  struct SetKnob {
    std::string_view name;
    YAML::Mark mark;
    bool ok = false;
  };
  std::vector<SetKnob> set_knobs;
  for (const DcqcnKnob& k : detail::kDcqcnKnobs) {
    auto v = r.take(k.name);
    if (!v) continue;
    dcqcn_only.push_back(*v);
    set_knobs.push_back({k.name, v->mark});
    std::optional<uint64_t> amount;
    switch (k.kind) {
      case KnobKind::kDuration:
        amount = detail::read_duration_ns(s, *v, k.min, k.max);
        break;
      case KnobKind::kRate:
        amount = detail::read_rate_bps(s, *v, k.min, k.max);
        break;
      case KnobKind::kSize:
        amount = detail::read_size_bytes(s, *v, k.min, k.max);
        break;
      case KnobKind::kInteger: {
        auto n = detail::read_uint(s, *v, k.min, k.max);
        assign(cc.dcqcn.*k.u32, n);
        set_knobs.back().ok = n.has_value();
        break;
      }
      case KnobKind::kBool: {
        auto b = detail::read_bool(s, *v);
        assign(cc.dcqcn.*k.flag, b);
        set_knobs.back().ok = b.has_value();
        break;
      }
    }
    if (!amount) continue;
    if (*amount != 0 && *amount < k.unit) {
      // The engine keeps the knob in whole units; this would become 0, which means
      // something else for every knob that accepts it.
      s.add(v->mark, v->path + ": " + detail::format_knob(k.kind, *amount) +
                         " is below the knob's unit of " + detail::format_knob(k.kind, k.unit) +
                         " (mlx5's unit); write 0 or at least " +
                         detail::format_knob(k.kind, k.unit));
      continue;
    }
    cc.dcqcn.*k.u64 = *amount;
    set_knobs.back().ok = true;
  }
  auto rate = r.take("rate");
  if (rate) assign(cc.fixed_rate_bps, detail::read_rate_bps(s, *rate, kMinRateBps, kMaxRateBps));
  std::string algorithm_name = cc.algorithm == CcAlgorithm::kDcqcn   ? "dcqcn"
                               : cc.algorithm == CcAlgorithm::kFixed ? "fixed"
                                                                     : "none";
  if (cc.algorithm != CcAlgorithm::kDcqcn) {
    for (const Field& k : dcqcn_only) {
      s.add(k.mark, k.path + ": applies only to algorithm dcqcn, not " + algorithm_name);
    }
  } else {
    const DcqcnParams& d = cc.dcqcn;
    // Where the file sets the first of these knobs; nullopt when one it sets is wrong.
    auto where = [&](std::initializer_list<std::string_view> names) -> std::optional<YAML::Mark> {
      std::optional<YAML::Mark> mark;
      for (std::string_view name : names) {
        auto it = std::find_if(set_knobs.begin(), set_knobs.end(),
                               [&](const SetKnob& k) { return k.name == name; });
        if (it == set_knobs.end()) continue;
        if (!it->ok) return std::nullopt;
        if (!mark) mark = it->mark;
      }
      return mark.value_or(f.mark);
    };
    if (d.rpg_max_rate_bps != 0 && d.rpg_min_rate_bps > d.rpg_max_rate_bps) {
      if (auto at = where({"rpg_min_rate", "rpg_max_rate"})) {
        s.add(*at, f.path + ": rpg_min_rate " + format_rate(d.rpg_min_rate_bps) +
                       " is above rpg_max_rate " + format_rate(d.rpg_max_rate_bps));
      }
    }
    if (d.rate_to_set_on_first_cnp_bps != 0 &&
        d.rate_to_set_on_first_cnp_bps < d.rpg_min_rate_bps) {
      if (auto at = where({"rate_to_set_on_first_cnp", "rpg_min_rate"})) {
        s.add(*at, f.path + ": rate_to_set_on_first_cnp " +
                       format_rate(d.rate_to_set_on_first_cnp_bps) + " is below rpg_min_rate " +
                       format_rate(d.rpg_min_rate_bps));
      }
    }
  }
  if (cc.algorithm == CcAlgorithm::kFixed) {
    if (!rate) {
      s.add(f.mark, f.path + ": algorithm fixed needs a rate (e.g. rate: 10gbit)");
    } else if (class_max_rate_bps && cc.fixed_rate_bps > *class_max_rate_bps) {
      s.add(rate->mark, rate->path + ": " + format_rate(cc.fixed_rate_bps) +
                            " is above the class max_rate " + format_rate(*class_max_rate_bps));
    }
  } else if (rate) {
    s.add(rate->mark, rate->path + ": applies only to algorithm fixed, not " + algorithm_name);
  }
  r.finish();
}

// Where a class's name and DSCP sit, for the duplicate checks.
struct ClassMarks {
  YAML::Mark name;
  YAML::Mark dscp;
  bool default_unreadable = false;  // "no default class" would then be a follow-on error
  bool dscp_unknown = false;        // missing or invalid (reported): not compared with others
};

void parse_traffic_class(ErrorSink& s, const Field& f, TrafficClass& tc, ClassMarks& marks) {
  MapReader r(s, f);
  marks = {f.mark, f.mark};
  if (!r.is_map()) {
    // Reported: nothing of it is known, so it is compared with nothing.
    marks.default_unreadable = true;
    marks.dscp_unknown = true;
    return;
  }
  bool have_name = false;
  bool have_dscp = false;
  if (auto v = r.take("name")) {
    have_name = true;
    marks.name = v->mark;
    if (auto name = detail::read_string(s, *v)) {
      if (name->empty() || name->size() > kMaxClassNameBytes ||
          !std::all_of(name->begin(), name->end(), is_name_char)) {
        s.add(v->mark,
              v->path + ": " + quote(*name) + " is not a class name (1..32 of A-Z a-z 0-9 _ -)");
      } else {
        tc.name = *name;
      }
    }
  }
  if (auto v = r.take("default")) {
    auto is_default = detail::read_bool(s, *v);
    assign(tc.is_default, is_default);
    marks.default_unreadable = !is_default;
  }
  if (auto v = r.take("dscp")) {
    have_dscp = true;
    marks.dscp = v->mark;
    auto dscp = detail::read_uint(s, *v, 0, 63);
    assign(tc.dscp, dscp);
    marks.dscp_unknown = !dscp;
  }
  if (auto v = r.take("ecn")) {
    if (v->node.IsScalar() && v->node.Scalar() == "ce") {
      s.add(v->mark, v->path + ": senders do not set CE (switches do); use ect0, ect1 or not_ect");
    } else {
      assign(tc.ecn, detail::read_enum(s, *v, kEcnCodepoints));
    }
  }
  if (auto v = r.take("priority")) assign(tc.priority, detail::read_uint(s, *v, 0, 7));
  if (auto v = r.take("weight")) {
    if (v->node.IsScalar() && v->node.Scalar() == "strict") {
      tc.strict = true;
    } else if (v->node.IsScalar() && !v->node.Scalar().empty() &&
               !std::isdigit(static_cast<unsigned char>(v->node.Scalar()[0])) &&
               v->node.Scalar()[0] != '-') {
      s.add(v->mark,
            v->path + ": expected strict or an integer 1..1000, got " + quote(v->node.Scalar()));
    } else {
      assign(tc.weight, detail::read_uint(s, *v, 1, 1000));
    }
  }
  if (auto v = r.take("max_rate")) {
    if (auto rate = detail::read_rate_bps(s, *v, kMinRateBps, kMaxRateBps)) tc.max_rate_bps = rate;
  }
  if (auto v = r.take("congestion_control")) {
    parse_congestion_control(s, *v, tc.congestion_control, tc.max_rate_bps);
  }
  if (!have_name) s.add(f.mark, f.path + ": missing required key 'name'");
  if (!have_dscp) {
    s.add(f.mark, f.path + ": missing required key 'dscp'");
    marks.dscp_unknown = true;
  }
  r.finish();
}

// cnp_dscp: nullopt when cnp.dscp was reported as wrong (no class is compared with it).
void parse_traffic_classes(ErrorSink& s, const Field& f, std::vector<TrafficClass>& out,
                           std::optional<uint8_t> cnp_dscp) {
  if (!f.node.IsSequence() || f.node.size() == 0) {
    s.add(f.mark,
          f.path + ": expected a list of at least one traffic class, got " +
              (f.node.IsSequence() ? std::string("an empty list") : detail::describe(f.node)));
    return;
  }
  auto elements = detail::read_list(s, f);
  if (!elements) return;
  if (elements->size() > kMaxTrafficClasses) {
    s.add(f.mark, f.path + ": " + std::to_string(elements->size()) + " classes; at most " +
                      std::to_string(kMaxTrafficClasses) + " are supported");
    return;
  }
  std::vector<TrafficClass> classes;
  std::vector<ClassMarks> class_marks;
  for (const Field& e : *elements) {
    TrafficClass tc;
    ClassMarks m;
    parse_traffic_class(s, e, tc, m);
    classes.push_back(std::move(tc));
    class_marks.push_back(m);
  }
  const TrafficClass* first_default = nullptr;
  bool default_unreadable = false;
  for (size_t i = 0; i < classes.size(); ++i) {
    const TrafficClass& tc = classes[i];
    const Field& e = (*elements)[i];
    for (size_t j = 0; j < i; ++j) {
      const TrafficClass& other = classes[j];
      if (!tc.name.empty() && tc.name == other.name) {
        s.add(class_marks[i].name, e.path + ".name: duplicate class name " + quote(tc.name) +
                                       " (also " + (*elements)[j].path + ")");
      }
      if (tc.dscp == other.dscp && !class_marks[i].dscp_unknown && !class_marks[j].dscp_unknown) {
        s.add(class_marks[i].dscp, e.path + ".dscp: duplicate DSCP " + std::to_string(tc.dscp) +
                                       " (also class " + quote(other.name) + ", " +
                                       (*elements)[j].path + ")");
      }
      if (tc.strict && other.strict && tc.priority == other.priority) {
        s.add(e.mark, e.path + ": strict classes " + quote(other.name) + " and " + quote(tc.name) +
                          " share priority " + std::to_string(tc.priority) +
                          ", so their order is undefined");
      }
    }
    if (tc.dscp == cnp_dscp && !class_marks[i].dscp_unknown) {
      s.add(class_marks[i].dscp,
            e.path + ".dscp: DSCP " + std::to_string(tc.dscp) + " is the CNP DSCP (cnp.dscp)");
    }
    default_unreadable = default_unreadable || class_marks[i].default_unreadable;
    if (tc.is_default) {
      if (first_default != nullptr) {
        s.add(e.mark, e.path + ": second default class (" + quote(first_default->name) +
                          " is already the default)");
      } else {
        first_default = &tc;
      }
    }
  }
  if (first_default == nullptr && !default_unreadable) {
    s.add(f.mark, f.path +
                      ": no default class; set 'default: true' on the class that carries "
                      "traffic no other class claims");
  }
  out = std::move(classes);
}

// ---- cnp, transport, clients ------------------------------------------------

void parse_cnp(ErrorSink& s, const Field& f, CnpSection& c, Marks& marks) {
  MapReader r(s, f);
  if (auto v = r.take("dscp")) {
    marks.cnp_dscp = v->mark;
    auto dscp = detail::read_uint(s, *v, 0, 63);
    assign(c.dscp, dscp);
    marks.cnp_dscp_bad = !dscp;
  }
  if (auto v = r.take("ecn")) assign(c.ecn, detail::read_enum(s, *v, kEcnCodepoints));
  if (auto v = r.take("priority")) assign(c.priority, detail::read_uint(s, *v, 0, 7));
  if (auto v = r.take("min_time_between_cnps")) {
    assign(c.min_time_between_cnps_ns, detail::read_duration_ns(s, *v, 0, 100'000'000));
  }
  r.finish();
}

void parse_transport(ErrorSink& s, const Field& f, TransportSection& t, Marks& marks) {
  MapReader r(s, f);
  if (auto v = r.take("pmtu")) {
    marks.pmtu = v->mark;
    marks.pmtu_bad = true;
    if (auto pmtu = detail::read_size_bytes(s, *v, 256, 4096)) {
      if ((*pmtu & (*pmtu - 1)) != 0) {
        s.add(v->mark, v->path + ": " + std::to_string(*pmtu) +
                           " is not a path MTU (256, 512, 1024, 2048 or 4096)");
      } else {
        t.pmtu_bytes = static_cast<uint32_t>(*pmtu);
        marks.pmtu_bad = false;
      }
    }
  }
  if (auto v = r.take("timeout")) assign(t.timeout_exponent, detail::read_uint(s, *v, 0, 31));
  if (auto v = r.take("retry_cnt")) assign(t.retry_cnt, detail::read_uint(s, *v, 0, 7));
  if (auto v = r.take("rnr_retry")) assign(t.rnr_retry, detail::read_uint(s, *v, 0, 7));
  if (auto v = r.take("min_rnr_timer")) {
    bool is_code = v->node.IsScalar() && !v->node.Scalar().empty() &&
                   std::all_of(v->node.Scalar().begin(), v->node.Scalar().end(),
                               [](char c) { return c >= '0' && c <= '9'; });
    if (is_code && v->node.Scalar().size() <= 19 && v->node.Scalar()[0] != '0' &&
        std::stoull(v->node.Scalar()) > 31) {
      // "min_rnr_timer: 640" means 640 us more likely than a code.
      s.add(v->mark, v->path + ": " + v->node.Scalar() +
                         " is not an RNR timer code (0..31); a time needs its unit, e.g. " +
                         v->node.Scalar() + "us");
    } else if (is_code) {
      assign(t.min_rnr_timer, detail::read_uint(s, *v, 0, 31));
    } else if (auto ns = detail::read_duration_ns(s, *v, 1, rnr_timer_ns(0))) {
      // The smallest timer at least as long as asked; code 0 is the longest.
      uint32_t code = 0;
      for (uint32_t c = 1; c <= 31; ++c) {
        if (rnr_timer_ns(c) >= *ns) {
          code = c;
          break;
        }
      }
      t.min_rnr_timer = code;
    }
  }
  if (auto v = r.take("ack_frequency")) assign(t.ack_frequency, detail::read_uint(s, *v, 1, 1024));
  if (auto v = r.take("window")) assign(t.window_packets, detail::read_uint(s, *v, 1, 8192));
  if (auto v = r.take("loss_recovery")) {
    assign(t.loss_recovery, detail::read_enum(s, *v, kLossRecoveries));
  }
  if (auto v = r.take("bdp_cap")) {
    marks.bdp_cap = v->mark;
    assign(t.bdp_cap_bytes, detail::read_size_bytes(s, *v, 0, 1ull << 30));
  }
  if (auto v = r.take("max_outstanding_reads")) {
    assign(t.max_outstanding_reads, detail::read_uint(s, *v, 1, kMaxOutstandingReads));
  }
  r.finish();
}

std::optional<std::vector<uint32_t>> read_ids(ErrorSink& s, const Field& f) {
  auto list = detail::read_list(s, f);
  if (!list) return std::nullopt;
  std::vector<uint32_t> ids;
  bool ok = true;
  for (const Field& e : *list) {
    auto id = detail::read_uint(s, e, 0, kMaxId);
    if (!id) {
      ok = false;
    } else if (std::find(ids.begin(), ids.end(), *id) != ids.end()) {
      s.add(e.mark, e.path + ": " + std::to_string(*id) + " is listed twice");
      ok = false;
    } else {
      ids.push_back(static_cast<uint32_t>(*id));
    }
  }
  if (!ok) return std::nullopt;
  return ids;
}

// "a.b.c.d/len" (host bits zero) or "a.b.c.d" (= /32); "ipv6/len" or "ipv6" (= /128).
struct Prefixes {
  std::vector<Ipv4Prefix> v4;
  std::vector<Ipv6Prefix> v6;
};
std::optional<Prefixes> read_prefixes(ErrorSink& s, const Field& f) {
  auto list = detail::read_list(s, f);
  if (!list) return std::nullopt;
  Prefixes out;
  bool ok = true;
  for (const Field& e : *list) {
    auto text = detail::read_string(s, e);
    if (!text) {
      ok = false;
      continue;
    }
    const bool has_len = text->find('/') != std::string::npos;
    if (text->find(':') != std::string::npos) {
      std::optional<Ipv6Prefix> net;
      if (auto p = parse_ipv6_prefix(*text)) net = Ipv6Prefix{p->first, p->second};
      if (!net && !has_len) {
        if (auto ip = parse_ipv6(*text)) net = Ipv6Prefix{*ip, 128};
      }
      if (!net) {
        s.add(e.mark,
              e.path + ": expected an IPv6 network (fd00::/8) or address, got " + quote(*text));
        ok = false;
        continue;
      }
      Ipv6Prefix masked{Ipv6Address{}, net->length};
      for (size_t i = 0; i < 16; ++i) {
        const int bits = std::clamp(int{net->length} - int(i) * 8, 0, 8);
        masked.network.bytes[i] = static_cast<uint8_t>(net->network.bytes[i] & (0xFF00u >> bits));
      }
      if (!(masked == *net)) {
        s.add(e.mark, e.path + ": " + *text + " has host bits set; did you mean " +
                          format_ipv6(masked.network) + "/" + std::to_string(net->length) + "?");
        ok = false;
      } else if (std::find(out.v6.begin(), out.v6.end(), *net) != out.v6.end()) {
        s.add(e.mark, e.path + ": " + *text + " is listed twice");
        ok = false;
      } else {
        out.v6.push_back(*net);
      }
      continue;
    }
    std::optional<Ipv4Prefix> net = parse_ipv4_prefix(*text);
    if (!net && !has_len) {
      if (auto ip = parse_ipv4(*text)) net = Ipv4Prefix{*ip, 32};  // a single host
    }
    if (!net) {
      s.add(e.mark, e.path +
                        ": expected an IPv4 network (198.18.0.0/15), an IPv6 network "
                        "(fd00::/8) or an address, got " +
                        quote(*text) + leading_zero_hint(*text, [&](std::string_view t) {
                          return has_len ? parse_ipv4_prefix(t).has_value()
                                         : parse_ipv4(t).has_value();
                        }));
      ok = false;
      continue;
    }
    const Ipv4Prefix p = *net;
    if ((p.network.value & prefix_mask(p.length)) != p.network.value) {
      const Ipv4Address masked{p.network.value & prefix_mask(p.length)};
      s.add(e.mark, e.path + ": " + *text + " has host bits set; did you mean " +
                        format_ipv4(masked) + "/" + std::to_string(p.length) + "?");
      ok = false;
      continue;
    }
    if (std::find(out.v4.begin(), out.v4.end(), p) != out.v4.end()) {
      s.add(e.mark, e.path + ": " + *text + " is listed twice");
      ok = false;
      continue;
    }
    out.v4.push_back(p);
  }
  if (!ok) return std::nullopt;
  return out;
}

void parse_clients(ErrorSink& s, const Field& f, ClientsSection& c) {
  MapReader r(s, f);
  if (auto v = r.take("allowed_uids")) assign(c.allowed_uids, read_ids(s, *v));
  if (auto v = r.take("allowed_gids")) assign(c.allowed_gids, read_ids(s, *v));
  if (auto v = r.take("allowed_peers")) {
    if (auto p = read_prefixes(s, *v)) {
      c.allowed_peers = std::move(p->v4);
      c.allowed_peers6 = std::move(p->v6);
    }
  }
  if (auto v = r.take("quotas")) {
    MapReader q(s, *v);
    ClientQuotas& quotas = c.quotas;
    if (auto x = q.take("max_qps"))
      assign(quotas.max_qps, detail::read_uint(s, *x, 1, kMaxQpsPerClient));
    if (auto x = q.take("max_cqs"))
      assign(quotas.max_cqs, detail::read_uint(s, *x, 1, kMaxCqsPerClient));
    if (auto x = q.take("max_mrs")) assign(quotas.max_mrs, detail::read_uint(s, *x, 1, 1 << 20));
    // Ring depths: powers of two (the rings index with a mask).
    std::optional<YAML::Mark> depth_mark;
    auto depth = [&](const char* key, uint32_t max, uint32_t& out) {
      auto x = q.take(key);
      if (!x) return;
      depth_mark = x->mark;
      auto d = detail::read_uint(s, *x, kMinRingDepth, max);
      if (!d) return;
      if (!std::has_single_bit(*d)) {
        const uint64_t up = std::bit_ceil(*d);
        const uint64_t down = std::bit_floor(*d);
        s.add(x->mark, x->path + ": " + std::to_string(*d) +
                           " is not a power of two (the rings index with a mask); use " +
                           std::to_string(down) + (up <= max ? " or " + std::to_string(up) : ""));
        return;
      }
      out = static_cast<uint32_t>(*d);
    };
    depth("max_send_wr", kMaxWrDepth, quotas.max_send_wr);
    depth("max_recv_wr", kMaxWrDepth, quotas.max_recv_wr);
    depth("max_cqe", kMaxCqeDepth, quotas.max_cqe);
    if (quotas.ring_bytes() > kMaxRingBytesPerClient) {
      s.add(depth_mark.value_or(v->mark),
            v->path + ": every client's shared area would hold " +
                format_size(quotas.ring_bytes()) + " of rings (max_qps " +
                std::to_string(quotas.max_qps) + " x (max_send_wr " +
                std::to_string(quotas.max_send_wr) + " + max_recv_wr " +
                std::to_string(quotas.max_recv_wr) + ") x 128 B + max_cqs " +
                std::to_string(quotas.max_cqs) + " x max_cqe " + std::to_string(quotas.max_cqe) +
                " x 32 B), above the limit of " + format_size(kMaxRingBytesPerClient) +
                "; lower the depths or max_qps / max_cqs");
    }
    // A size already reported as wrong is not compared in its default's place.
    bool sizes_ok = true;
    std::optional<Field> registered = q.take("max_registered_memory");
    if (registered) {
      auto bytes = detail::read_size_bytes(s, *registered, 4096, 1ull << 44);
      assign(quotas.max_registered_bytes, bytes);
      sizes_ok = sizes_ok && bytes;
    }
    std::optional<Field> region = q.take("max_region_size");
    if (region) {
      auto bytes = detail::read_size_bytes(s, *region, 4096, 1ull << 44);
      assign(quotas.max_region_bytes, bytes);
      sizes_ok = sizes_ok && bytes;
    }
    if (sizes_ok && quotas.max_region_bytes > quotas.max_registered_bytes) {
      const Field& where = region ? *region : registered ? *registered : *v;
      s.add(where.mark, v->path + ": max_region_size " + format_size(quotas.max_region_bytes) +
                            " is above max_registered_memory " +
                            format_size(quotas.max_registered_bytes));
    }
    q.finish();
  }
  r.finish();
}

// ---- the document -----------------------------------------------------------

void check_across_sections(ErrorSink& s, const Policy& p, const Marks& marks) {
  const TransportSection& t = p.transport;
  if (marks.pmtu_bad) return;  // both checks measure against the path MTU
  const uint32_t overhead = p.port.address6 ? kRoceOverheadBytes6 : kRoceOverheadBytes;
  if (!marks.port_mtu_bad && t.pmtu_bytes + overhead > p.port.mtu_bytes) {
    s.add(marks.pmtu.value_or(marks.port_mtu.value_or(marks.root)),
          "transport.pmtu: " + std::to_string(t.pmtu_bytes) + " does not fit port.mtu " +
              std::to_string(p.port.mtu_bytes) + ": a full packet needs an IP MTU of " +
              std::to_string(t.pmtu_bytes + overhead) +
              (p.port.address6 ? " (over IPv6, port.address6)" : ""));
  }
  if (t.bdp_cap_bytes != 0 && t.bdp_cap_bytes < t.pmtu_bytes) {
    s.add(marks.bdp_cap.value_or(marks.root), "transport.bdp_cap: " + format_size(t.bdp_cap_bytes) +
                                                  " is below one packet (transport.pmtu " +
                                                  std::to_string(t.pmtu_bytes) +
                                                  "); use 0 for the transport's default (128KiB)");
  }
}

void parse_document(ErrorSink& s, const YAML::Node& root, Policy& p) {
  Marks marks;
  marks.root = root.Mark();
  if (root.IsNull()) {
    s.add(YAML::Mark(), "the policy is empty; at least port.device and port.address are needed");
    return;
  }
  MapReader r(s, Field{root, root.Mark(), ""});
  if (!r.is_map()) return;
  if (auto v = r.take("version")) detail::read_uint(s, *v, 1, 1);
  if (auto v = r.take("daemon")) parse_daemon(s, *v, p.daemon);
  if (auto v = r.take("port")) {
    parse_port(s, *v, p.port, marks);
  } else {
    s.add(root.Mark(), "missing required section 'port' (needs at least device and address)");
  }
  if (auto v = r.take("cnp")) parse_cnp(s, *v, p.cnp, marks);
  if (auto v = r.take("traffic_classes")) {
    parse_traffic_classes(s, *v, p.traffic_classes,
                          marks.cnp_dscp_bad ? std::nullopt : std::optional<uint8_t>(p.cnp.dscp));
  } else if (!marks.cnp_dscp_bad && p.cnp.dscp == p.traffic_classes.front().dscp) {
    s.add(marks.cnp_dscp.value_or(root.Mark()),
          "cnp.dscp: " + std::to_string(p.cnp.dscp) + " is the DSCP of the built-in default class");
  }
  if (auto v = r.take("transport")) parse_transport(s, *v, p.transport, marks);
  if (auto v = r.take("clients")) parse_clients(s, *v, p.clients);
  r.finish();
  check_across_sections(s, p, marks);
}

// Records where each document starts; ignores everything else.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// Checks the text holds exactly one document before building nodes.
// YAML::LoadAll cannot be used: yaml-cpp 0.7 accepts a stray ',' as an
// empty document without consuming it, so LoadAll loops forever, allocating
// (jbeder/yaml-cpp#1040, fixed upstream after 0.8). Here at most two
// documents are read, and a second document starting where the first did is
// that stuck parser.
bool check_single_document(ErrorSink& sink, const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts handler;
  for (int docs = 0; docs < 2 && parser.HandleNextDocument(handler); ++docs) {
  }
  if (handler.starts.size() < 2) return true;
  if (handler.starts[1].pos == handler.starts[0].pos) {
    sink.add(handler.starts[0],
             "YAML syntax error: no document can be read here (a stray ',', ']' or '}'?)");
  } else {
    sink.add(handler.starts[1], "more than one YAML document; the policy is a single document");
  }
  return false;
}

}  // namespace

std::string PolicyError::to_string() const {
  if (line == 0) return file + ": " + message;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message;
}

std::string LoadResult::error_text() const {
  std::string out;
  for (const auto& e : errors) out += e.to_string() + "\n";
  return out;
}

LoadResult load_policy_string(std::string_view text, std::string_view name) {
  ErrorSink sink(name, text);
  LoadResult result;
  Policy policy;
  try {
    std::string owned(text);
    if (check_single_document(sink, owned)) parse_document(sink, YAML::Load(owned), policy);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own message for this is "bad file". A policy nests four levels.
    sink.add(e.mark, "YAML syntax error: nested more than " + std::to_string(e.depth() - 1) +
                         " levels deep; a policy nests at most four");
  } catch (const YAML::Exception& e) {
    sink.add(e.mark, "YAML syntax error: " + printable(e.msg));
  } catch (const std::exception& e) {
    // yaml-cpp can throw outside its own hierarchy (bad_alloc on absurd input).
    sink.add(YAML::Mark(), "cannot parse: " + printable(e.what()));
  }
  result.errors = sink.take();
  if (result.errors.empty()) result.policy = std::move(policy);
  return result;
}

LoadResult load_policy_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    LoadResult r;
    r.errors.push_back({path, 0, 0, std::string("cannot open: ") + std::strerror(errno)});
    r.unreadable = true;
    return r;
  }
  std::string text;
  char buf[4096];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxPolicyFileBytes) {
      LoadResult r;
      r.errors.push_back(
          {path, 0, 0,
           "larger than " + std::to_string(kMaxPolicyFileBytes) + " bytes; not a policy file"});
      return r;
    }
  }
  if (in.bad()) {
    LoadResult r;
    r.errors.push_back({path, 0, 0, std::string("read error: ") + std::strerror(errno)});
    r.unreadable = true;
    return r;
  }
  return load_policy_string(text, path);
}

}  // namespace conduit::policy
