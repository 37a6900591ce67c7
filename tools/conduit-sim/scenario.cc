#include "scenario.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

namespace conduit::sim {

namespace {

struct Ctx {
  std::string file;
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw std::runtime_error(file + ": " + key + ": " + why);
  }
};

void check_keys(const Ctx& c, const YAML::Node& n, const std::string& where,
                const std::set<std::string>& allowed) {
  if (!n.IsMap()) c.fail(where, "expected a mapping");
  for (const auto& kv : n) {
    const auto k = kv.first.as<std::string>();
    if (!allowed.count(k)) c.fail(where.empty() ? k : where + "." + k, "unknown key");
  }
}

double num(const Ctx& c, const YAML::Node& n, const std::string& key, double lo, double hi) {
  double v = 0;
  try {
    v = n.as<double>();
  } catch (const YAML::Exception&) {
    c.fail(key, "expected a number");
  }
  if (!std::isfinite(v) || v < lo || v > hi) {
    c.fail(key, "out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

uint64_t ns_from(double v, double unit_ns) {
  return static_cast<uint64_t>(std::llround(v * unit_ns));
}

HostSpec link_from(const Ctx& c, const YAML::Node& n, const std::string& where, HostSpec h) {
  check_keys(c, n, where, {"rate_gbps", "delay_us"});
  if (n["rate_gbps"]) {
    h.rate_bps = ns_from(num(c, n["rate_gbps"], where + ".rate_gbps", 0.001, 10000), 1e9);
  }
  if (n["delay_us"]) h.delay_ns = ns_from(num(c, n["delay_us"], where + ".delay_us", 0, 1e6), 1e3);
  return h;
}

cc::ControllerConfig cc_from(const Ctx& c, const YAML::Node& n, const std::string& where,
                             cc::ControllerConfig base) {
  check_keys(c, n, where, {"algorithm", "preset", "fixed_rate_gbps", "knobs"});
  if (n["algorithm"]) {
    const auto a = n["algorithm"].as<std::string>();
    if (a == "dcqcn") {
      base.kind = cc::ControllerKind::kDcqcn;
    } else if (a == "fixed") {
      base.kind = cc::ControllerKind::kFixed;
    } else if (a == "none") {
      base.kind = cc::ControllerKind::kNone;
    } else {
      c.fail(where + ".algorithm", "expected dcqcn, fixed or none, got '" + a + "'");
    }
  }
  if (n["preset"]) {
    const auto p = n["preset"].as<std::string>();
    if (p == "paper") {
      base.dcqcn = cc::DcqcnParams::paper();
    } else if (p == "mlx5") {
      base.dcqcn = cc::DcqcnParams::mlx5_defaults();
    } else {
      c.fail(where + ".preset", "expected paper or mlx5, got '" + p + "'");
    }
  }
  if (n["fixed_rate_gbps"]) {
    base.fixed_rate_bps =
        ns_from(num(c, n["fixed_rate_gbps"], where + ".fixed_rate_gbps", 0.000001, 10000), 1e9);
  }
  if (const auto k = n["knobs"]) {
    if (!k.IsMap()) c.fail(where + ".knobs", "expected a mapping");
    auto& d = base.dcqcn;
    const std::map<std::string, uint32_t*> u32 = {
        {"rpg_time_reset", &d.rpg_time_reset},
        {"rpg_byte_reset", &d.rpg_byte_reset},
        {"rpg_threshold", &d.rpg_threshold},
        {"rpg_ai_rate", &d.rpg_ai_rate},
        {"rpg_hai_rate", &d.rpg_hai_rate},
        {"rpg_gd", &d.rpg_gd},
        {"rpg_min_dec_fac", &d.rpg_min_dec_fac},
        {"rpg_min_rate", &d.rpg_min_rate},
        {"rpg_max_rate", &d.rpg_max_rate},
        {"rate_to_set_on_first_cnp", &d.rate_to_set_on_first_cnp},
        {"rate_reduce_monitor_period", &d.rate_reduce_monitor_period},
        {"initial_alpha_value", &d.initial_alpha_value},
        {"dce_tcp_g", &d.dce_tcp_g},
        {"dce_tcp_rtt", &d.dce_tcp_rtt}};
    for (const auto& kv : k) {
      const auto key = kv.first.as<std::string>();
      const std::string path = where + ".knobs." + key;
      if (auto it = u32.find(key); it != u32.end()) {
        *it->second = static_cast<uint32_t>(num(c, kv.second, path, 0, 4294967295.0));
      } else if (key == "clamp_tgt_rate") {
        d.clamp_tgt_rate = num(c, kv.second, path, 0, 1) != 0;
      } else if (key == "clamp_tgt_rate_after_time_inc") {
        d.clamp_tgt_rate_after_time_inc = num(c, kv.second, path, 0, 1) != 0;
      } else {
        c.fail(path, "unknown DCQCN knob");
      }
    }
    if (const char* why = cc::validate(d)) c.fail(where + ".knobs", why);
  }
  return base;
}

}  // namespace

namespace {

Scenario parse(const std::string& path) {
  Ctx c{path};
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    c.fail("(file)", e.what());
  }
  check_keys(
      c, root, "",
      {"name", "duration_ms", "steady_state_ms", "packet_bytes", "seed", "link", "hosts", "switch",
       "cc", "np", "classes", "flows", "monitor", "queue_sample_us", "csv_interval_us"});
  Scenario s;
  s.name = root["name"] ? root["name"].as<std::string>() : path;
  if (!root["duration_ms"]) c.fail("duration_ms", "required");
  s.duration_ns = ns_from(num(c, root["duration_ms"], "duration_ms", 0.001, 1e6), 1e6);
  s.window_start_ns = s.duration_ns / 2;
  s.window_end_ns = s.duration_ns;
  if (const auto w = root["steady_state_ms"]) {
    if (!w.IsSequence() || w.size() != 2) c.fail("steady_state_ms", "expected [start, end]");
    s.window_start_ns = ns_from(num(c, w[0], "steady_state_ms[0]", 0, 1e6), 1e6);
    s.window_end_ns = ns_from(num(c, w[1], "steady_state_ms[1]", 0, 1e6), 1e6);
    if (s.window_start_ns >= s.window_end_ns || s.window_end_ns > s.duration_ns) {
      c.fail("steady_state_ms", "need start < end <= duration_ms");
    }
  }
  if (root["packet_bytes"]) {
    s.packet_bytes = static_cast<uint32_t>(num(c, root["packet_bytes"], "packet_bytes", 64, 9216));
  }
  if (root["seed"]) s.seed = static_cast<uint64_t>(num(c, root["seed"], "seed", 0, 1e18));
  if (root["queue_sample_us"]) {
    s.queue_sample_ns = ns_from(num(c, root["queue_sample_us"], "queue_sample_us", 0.01, 1e6), 1e3);
  }
  if (root["csv_interval_us"]) {
    s.csv_interval_ns = ns_from(num(c, root["csv_interval_us"], "csv_interval_us", 1, 1e6), 1e3);
  }

  HostSpec link_default{"", 40'000'000'000, 1000};
  if (root["link"]) link_default = link_from(c, root["link"], "link", link_default);
  std::map<std::string, HostSpec> host_overrides;
  if (const auto h = root["hosts"]) {
    if (!h.IsMap()) c.fail("hosts", "expected a mapping of host name to link");
    for (const auto& kv : h) {
      const auto name = kv.first.as<std::string>();
      host_overrides[name] = link_from(c, kv.second, "hosts." + name, link_default);
    }
  }

  if (const auto sw = root["switch"]) {
    check_keys(c, sw, "switch", {"buffer_bytes", "kmin_bytes", "kmax_bytes", "pmax"});
    if (sw["buffer_bytes"]) {
      s.sw.buffer_bytes =
          static_cast<uint64_t>(num(c, sw["buffer_bytes"], "switch.buffer_bytes", 1, 1e12));
    }
    if (sw["kmin_bytes"]) {
      s.sw.kmin_bytes =
          static_cast<uint64_t>(num(c, sw["kmin_bytes"], "switch.kmin_bytes", 0, 1e12));
    }
    if (sw["kmax_bytes"]) {
      s.sw.kmax_bytes =
          static_cast<uint64_t>(num(c, sw["kmax_bytes"], "switch.kmax_bytes", 0, 1e12));
    }
    if (sw["pmax"]) s.sw.pmax = num(c, sw["pmax"], "switch.pmax", 0, 1);
    if (s.sw.kmin_bytes > s.sw.kmax_bytes) c.fail("switch", "kmin_bytes must be <= kmax_bytes");
  }

  cc::ControllerConfig cc_default;
  cc_default.kind = cc::ControllerKind::kDcqcn;
  cc_default.dcqcn = cc::DcqcnParams::paper();
  if (root["cc"]) cc_default = cc_from(c, root["cc"], "cc", cc_default);

  s.np = cc::NpParams::paper();
  if (const auto np = root["np"]) {
    check_keys(c, np, "np", {"preset", "min_time_between_cnps"});
    if (np["preset"]) {
      const auto p = np["preset"].as<std::string>();
      if (p == "paper") {
        s.np = cc::NpParams::paper();
      } else if (p == "mlx5") {
        s.np = cc::NpParams::mlx5_defaults();
      } else {
        c.fail("np.preset", "expected paper or mlx5");
      }
    }
    if (np["min_time_between_cnps"]) {
      s.np.min_time_between_cnps = static_cast<uint32_t>(
          num(c, np["min_time_between_cnps"], "np.min_time_between_cnps", 0, 1e6));
    }
  }

  std::map<std::string, uint32_t> class_index;
  if (const auto cl = root["classes"]) {
    if (!cl.IsSequence() || cl.size() == 0) c.fail("classes", "expected a non-empty list");
    for (size_t i = 0; i < cl.size(); ++i) {
      const std::string where = "classes[" + std::to_string(i) + "]";
      check_keys(c, cl[i], where, {"name", "strict", "rank", "weight", "max_rate_gbps"});
      ClassSpec k;
      if (!cl[i]["name"]) c.fail(where + ".name", "required");
      k.name = cl[i]["name"].as<std::string>();
      if (class_index.count(k.name)) c.fail(where + ".name", "duplicate class '" + k.name + "'");
      if (cl[i]["strict"]) k.config.strict = num(c, cl[i]["strict"], where + ".strict", 0, 1) != 0;
      if (cl[i]["rank"]) {
        k.config.strict_rank =
            static_cast<uint32_t>(num(c, cl[i]["rank"], where + ".rank", 0, 1e6));
      }
      if (cl[i]["weight"]) {
        k.config.weight = static_cast<uint32_t>(num(c, cl[i]["weight"], where + ".weight", 1, 1e6));
      }
      if (cl[i]["max_rate_gbps"]) {
        k.config.max_rate_bps =
            ns_from(num(c, cl[i]["max_rate_gbps"], where + ".max_rate_gbps", 0.001, 1e4), 1e9);
      }
      class_index[k.name] = static_cast<uint32_t>(s.classes.size());
      s.classes.push_back(k);
    }
  } else {
    s.classes.push_back(ClassSpec{"default", {}});
    class_index["default"] = 0;
  }

  std::map<std::string, uint32_t> host_index;
  auto host = [&](const std::string& name) {
    if (auto it = host_index.find(name); it != host_index.end()) return it->second;
    HostSpec h = host_overrides.count(name) ? host_overrides[name] : link_default;
    h.name = name;
    const auto id = static_cast<uint32_t>(s.hosts.size());
    host_index[name] = id;
    s.hosts.push_back(h);
    return id;
  };

  const auto fl = root["flows"];
  if (!fl || !fl.IsSequence() || fl.size() == 0) c.fail("flows", "expected a non-empty list");
  for (size_t i = 0; i < fl.size(); ++i) {
    const std::string where = "flows[" + std::to_string(i) + "]";
    check_keys(c, fl[i], where,
               {"src", "dst", "count", "same_host", "start_ms", "stop_ms", "class", "cc"});
    if (!fl[i]["src"] || !fl[i]["dst"]) c.fail(where, "src and dst are required");
    const auto src = fl[i]["src"].as<std::string>();
    const auto dst = fl[i]["dst"].as<std::string>();
    const auto count =
        fl[i]["count"] ? static_cast<uint32_t>(num(c, fl[i]["count"], where + ".count", 1, 100000))
                       : 1u;
    const bool same_host =
        fl[i]["same_host"] && num(c, fl[i]["same_host"], where + ".same_host", 0, 1) != 0;
    FlowSpec f;
    f.stop_ns = s.duration_ns;
    if (fl[i]["start_ms"]) {
      f.start_ns = ns_from(num(c, fl[i]["start_ms"], where + ".start_ms", 0, 1e6), 1e6);
    }
    if (fl[i]["stop_ms"])
      f.stop_ns = ns_from(num(c, fl[i]["stop_ms"], where + ".stop_ms", 0, 1e6), 1e6);
    if (f.start_ns >= f.stop_ns) c.fail(where, "start_ms must be before stop_ms");
    if (fl[i]["class"]) {
      const auto cn = fl[i]["class"].as<std::string>();
      if (!class_index.count(cn)) c.fail(where + ".class", "no class named '" + cn + "'");
      f.cls = class_index[cn];
    }
    f.cc = fl[i]["cc"] ? cc_from(c, fl[i]["cc"], where + ".cc", cc_default) : cc_default;
    if (f.cc.kind == cc::ControllerKind::kFixed && f.cc.fixed_rate_bps == 0) {
      c.fail(where + ".cc", "algorithm fixed needs fixed_rate_gbps");
    }
    f.dst = host(dst);
    for (uint32_t k = 0; k < count; ++k) {
      const std::string name = (count == 1 || same_host) ? src : src + std::to_string(k);
      if (name == dst) c.fail(where, "a flow's src and dst must differ");
      f.src = host(name);
      f.id = static_cast<uint32_t>(s.flows.size());
      s.flows.push_back(f);
    }
  }
  s.monitor_host = s.flows[0].dst;
  if (root["monitor"]) {
    const auto m = root["monitor"].as<std::string>();
    if (!host_index.count(m)) c.fail("monitor", "no host named '" + m + "'");
    s.monitor_host = host_index[m];
  }
  return s;
}

}  // namespace

Scenario load_scenario(const std::string& path) {
  try {
    return parse(path);
  } catch (const YAML::Exception& e) {
    // A node of the wrong kind (a list where a name belongs, ...).
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace conduit::sim
