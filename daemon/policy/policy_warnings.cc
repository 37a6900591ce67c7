#include "policy/policy_warnings.h"

#include <optional>

#include "policy/dcqcn_knobs.h"

namespace conduit::policy {
namespace {

// The engine keeps DCQCN knobs in mlx5's units (1 us, 1 Mbit/s, 64 bytes); a
// value between two steps is rounded down, and the operator should know.
void warn_rounded_knobs(const TrafficClass& tc, size_t index, std::vector<std::string>& out) {
  if (tc.congestion_control.algorithm != CcAlgorithm::kDcqcn) return;
  for (const detail::DcqcnKnob& k : detail::kDcqcnKnobs) {
    if (k.unit == 0) continue;
    const uint64_t v = tc.congestion_control.dcqcn.*k.u64;
    if (v % k.unit == 0) continue;
    out.push_back("traffic_classes[" + std::to_string(index) + "].congestion_control." +
                  std::string(k.name) + ": " + detail::format_knob(k.kind, v) +
                  " is not a whole number of " + detail::format_knob(k.kind, k.unit) +
                  " (mlx5's unit) and is used as " + detail::format_knob(k.kind, v - v % k.unit));
  }
}

// DCQCN reacts to CNPs, and a receiver sends one only for CE-marked packets, which
// switches mark only when the packet is ECT.
void warn_dcqcn_not_ect(const TrafficClass& tc, size_t index, std::vector<std::string>& out) {
  if (tc.congestion_control.algorithm != CcAlgorithm::kDcqcn) return;
  if (tc.ecn != EcnCodepoint::kNotEct) return;
  out.push_back("traffic_classes[" + std::to_string(index) +
                "].ecn: not_ect with congestion_control dcqcn: switches CE-mark only ECT "
                "packets, so class '" +
                tc.name +
                "' gets no CNPs and DCQCN never lowers its rate; use ect0 or ect1, or algorithm "
                "fixed or none");
}

// The reaction point keeps its rates within [rpg_min_rate, rpg_max_rate or the line
// rate], clamping what lies outside; the loader refuses rpg_max_rate < rpg_min_rate
// and rate_to_set_on_first_cnp < rpg_min_rate, the rest is clamped and named here.
// Without port.line_rate the port's speed is known only at start-up.
void warn_clamped_rates(const TrafficClass& tc, size_t index, std::optional<uint64_t> line_rate_bps,
                        std::vector<std::string>& out) {
  if (tc.congestion_control.algorithm != CcAlgorithm::kDcqcn) return;
  const DcqcnParams& d = tc.congestion_control.dcqcn;
  const std::string at = "traffic_classes[" + std::to_string(index) + "].congestion_control.";
  const auto rate = [](uint64_t bps) { return format_rate(bps); };
  uint64_t ceiling = d.rpg_max_rate_bps;  // 0: the line rate
  std::string ceiling_name = "rpg_max_rate";
  if (line_rate_bps) {
    const uint64_t line = *line_rate_bps;
    if (d.rpg_max_rate_bps > line) {
      out.push_back(at + "rpg_max_rate: " + rate(d.rpg_max_rate_bps) + " is above port.line_rate " +
                    rate(line) + " and is used as " + rate(line));
    }
    if (d.rpg_min_rate_bps > line) {
      out.push_back(at + "rpg_min_rate: " + rate(d.rpg_min_rate_bps) + " is above port.line_rate " +
                    rate(line) + " and is used as " + rate(line) +
                    " (DCQCN cannot lower this class's rate)");
    }
    if (ceiling == 0 || ceiling > line) {
      ceiling = line;
      ceiling_name = "port.line_rate";
    }
  }
  if (ceiling != 0 && d.rate_to_set_on_first_cnp_bps > ceiling) {
    out.push_back(at + "rate_to_set_on_first_cnp: " + rate(d.rate_to_set_on_first_cnp_bps) +
                  " is above " + ceiling_name + " " + rate(ceiling) + " and is used as " +
                  rate(ceiling));
  }
}

// The engine's NP counts the CNP spacing in whole microseconds, as mlx5 does.
void warn_rounded_cnp_spacing(const CnpSection& cnp, std::vector<std::string>& out) {
  const uint64_t ns = cnp.min_time_between_cnps_ns;
  const uint64_t unit = detail::kKnobTimeUnitNs;
  if (ns % unit == 0) return;
  const uint64_t used = ns - ns % unit;
  out.push_back(
      "cnp.min_time_between_cnps: " + format_duration(ns) + " is not a whole number of " +
      format_duration(unit) + " and is used as " +
      (used == 0 ? std::string("0 (a CNP for every CE-marked packet)") : format_duration(used)));
}

}  // namespace

std::vector<std::string> policy_warnings(const Policy& p) {
  std::vector<std::string> out;
  const auto& lcores = p.daemon.lcores;
  if (lcores.size() > 1) {
    std::string unused;
    for (size_t i = 1; i < lcores.size(); ++i) {
      unused += (i > 1 ? ", " : "") + std::to_string(lcores[i]);
    }
    out.push_back("daemon.lcores lists " + std::to_string(lcores.size()) +
                  " lcores, but this conduitd runs one engine, on lcore " +
                  std::to_string(lcores.front()) + "; lcore" + (lcores.size() > 2 ? "s " : " ") +
                  unused + " stay" + (lcores.size() > 2 ? "" : "s") +
                  " unused (QPs are not sharded across engines yet)");
  }
  warn_rounded_cnp_spacing(p.cnp, out);
  for (size_t i = 0; i < p.traffic_classes.size(); ++i) {
    warn_dcqcn_not_ect(p.traffic_classes[i], i, out);
    warn_rounded_knobs(p.traffic_classes[i], i, out);
    warn_clamped_rates(p.traffic_classes[i], i, p.port.line_rate_bps, out);
  }
  return out;
}

}  // namespace conduit::policy
