#include "metrics/prometheus_text.h"

#include <algorithm>
#include <array>
#include <set>

namespace conduit::metrics {
namespace {

// Stats that are levels, not running totals. Keep in step with
// ControlService::counters() and Engine::fill_snapshot().
constexpr std::array<std::string_view, 16> kGauges = {
    "uptime_s",
    "control.connections",
    "control.clients_attached",
    "control.qps",
    "control.cqs",
    "control.mrs",
    "control.mr_bytes",
    "control.engine_backlog",
    "control.pending_releases",
    "engine.attached",
    "engine.qps",
    "engine.stall_max_us",
    "cm.connections",
    "port.mbufs_free",
    "port.mbufs_in_use",
    "metrics.connections",
};

// The families the page writes itself, after the stats: a stats name that maps onto one of
// them is left out like any other clash (Prometheus refuses a family declared twice).
const std::string kBuildInfo = "conduit_build_info";
const std::string kQpOmitted = "conduit_qp_series_omitted";
const std::string kQpInfo = "conduit_qp_info";
const std::string kQpRate = "conduit_qp_rate_bits_per_second";
const std::string kQpAlpha = "conduit_qp_dcqcn_alpha";
const std::string kQpCnpsRx = "conduit_qp_cnps_received_total";
const std::string kQpCnpsTx = "conduit_qp_cnps_sent_total";
const std::string kQpRetx = "conduit_qp_retransmits_total";
const std::string kQpTxBytes = "conduit_qp_tx_bytes_total";
const std::string kQpRxBytes = "conduit_qp_rx_bytes_total";

void family(std::string& out, const std::string& name, std::string_view type,
            std::string_view help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, const std::string& name, const std::string& labels,
            const std::string& value) {
  out += name;
  if (!labels.empty()) {
    out += '{';
    out += labels;
    out += '}';
  }
  out += ' ';
  out += value;
  out += '\n';
}

std::string label(std::string_view key, std::string_view value) {
  std::string s(key);
  s += "=\"";
  s += escape_label_value(value);
  s += '"';
  return s;
}

std::string ppm_fraction(uint32_t ppm) {
  std::string s = std::to_string(ppm / 1'000'000) + '.';
  std::string frac = std::to_string(ppm % 1'000'000);
  s += std::string(6 - frac.size(), '0') + frac;
  return s;
}

// A per-QP family: one sample per QP, labelled by its number only (the other
// labels are on conduit_qp_info, so a reload that renames a class or a state
// change does not start new series of the numbers).
template <typename Get>
void qp_family(std::string& out, const std::vector<QpSample>& qps, const std::string& name,
               std::string_view type, std::string_view help, Get get) {
  family(out, name, type, help);
  for (const QpSample& q : qps) {
    const std::string v = get(q);
    if (!v.empty()) sample(out, name, label("qpn", std::to_string(q.qpn)), v);
  }
}

// The QPs that get series: all of them up to `max`, else the `max` that moved the most bytes
// (ties: lower QPN), in QPN order either way.
std::vector<QpSample> exported_qps(const std::vector<QpSample>& all, size_t max) {
  std::vector<QpSample> q = all;
  if (q.size() > max) {
    const auto busier = [](const QpSample& a, const QpSample& b) {
      const uint64_t x = a.tx_bytes + a.rx_bytes;
      const uint64_t y = b.tx_bytes + b.rx_bytes;
      return x != y ? x > y : a.qpn < b.qpn;
    };
    std::nth_element(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(max), q.end(), busier);
    q.resize(max);
  }
  std::sort(q.begin(), q.end(), [](const QpSample& a, const QpSample& b) { return a.qpn < b.qpn; });
  return q;
}

}  // namespace

bool is_gauge(std::string_view stats_name) {
  return std::find(kGauges.begin(), kGauges.end(), stats_name) != kGauges.end();
}

std::string metric_name(std::string_view stats_name, bool gauge) {
  std::string n = "conduit_";
  for (char c : stats_name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    n += ok ? c : '_';
  }
  if (!gauge) n += "_total";
  return n;
}

std::string escape_label_value(std::string_view v) {
  std::string s;
  s.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      s += "\\\\";
    } else if (c == '"') {
      s += "\\\"";
    } else if (c == '\n') {
      s += "\\n";
    } else {
      s += c;
    }
  }
  return s;
}

std::string format_exposition(const Exposition& e) {
  std::string out;
  out.reserve(4096 + e.stats.size() * 96 + e.qps.size() * 700);
  family(out, kBuildInfo, "gauge", "conduitd's version; always 1");
  sample(out, kBuildInfo, label("version", e.version), "1");

  std::set<std::string> seen = {kBuildInfo, kQpOmitted, kQpInfo, kQpRate,    kQpAlpha,
                                kQpCnpsRx,  kQpCnpsTx,  kQpRetx, kQpTxBytes, kQpRxBytes};
  for (const StatSample& s : e.stats) {
    const bool gauge = is_gauge(s.name);
    std::string name = metric_name(s.name, gauge);
    if (!seen.insert(name).second) continue;
    family(out, name, gauge ? "gauge" : "counter", "conduitctl stats: " + s.name);
    sample(out, name, "", std::to_string(s.value));
  }

  const std::vector<QpSample> q = exported_qps(e.qps, e.max_qps);
  family(out, kQpOmitted, "gauge",
         "QPs left out of the per-QP series (daemon.metrics_max_qps); conduitctl qps lists all");
  sample(out, kQpOmitted, "", std::to_string(e.qps.size() - q.size()));
  family(out, kQpInfo, "gauge",
         "One per queue pair (conduitctl qps); its labels say what the QP is");
  for (const QpSample& s : q) {
    std::string l = label("qpn", std::to_string(s.qpn));
    l += ',' + label("client", std::to_string(s.client_id));
    l += ',' + label("pid", std::to_string(s.pid));
    l += ',' + label("state", s.state);
    l += ',' + label("class", s.traffic_class);
    l += ',' + label("peer", s.peer);
    l += ',' + label("peer_qpn", s.peer_qpn == 0 ? "" : std::to_string(s.peer_qpn));
    sample(out, kQpInfo, l, "1");
  }
  qp_family(out, q, kQpRate, "gauge",
            "The QP's current sending rate (DCQCN or the class's fixed rate)",
            [](const QpSample& s) {
              return s.rate_bps == 0 ? std::string() : std::to_string(s.rate_bps);
            });
  qp_family(out, q, kQpAlpha, "gauge", "The QP's DCQCN alpha, 0..1",
            [](const QpSample& s) { return ppm_fraction(s.alpha_ppm); });
  qp_family(out, q, kQpCnpsRx, "counter", "CNPs received: congestion on the way to the peer",
            [](const QpSample& s) { return std::to_string(s.cnps_rx); });
  qp_family(out, q, kQpCnpsTx, "counter", "CNPs sent: CE-marked packets from the peer",
            [](const QpSample& s) { return std::to_string(s.cnps_tx); });
  qp_family(out, q, kQpRetx, "counter", "Packets the QP sent again",
            [](const QpSample& s) { return std::to_string(s.retransmits); });
  qp_family(out, q, kQpTxBytes, "counter", "Payload bytes the QP sent",
            [](const QpSample& s) { return std::to_string(s.tx_bytes); });
  qp_family(out, q, kQpRxBytes, "counter", "Payload bytes the QP received",
            [](const QpSample& s) { return std::to_string(s.rx_bytes); });
  return out;
}

}  // namespace conduit::metrics
