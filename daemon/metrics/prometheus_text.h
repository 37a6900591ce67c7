// conduitd's counters in the Prometheus text exposition format, version 0.0.4
// (what `GET /metrics` answers; see config/POLICY.md, daemon.metrics_address).
//
// Pure: the caller gathers the numbers (the same ones `conduitctl stats` and
// `conduitctl qps` print) and gets the page back.
//
// Names: a stats name such as `port.rx_packets` becomes
// `conduit_port_rx_packets_total` ('.' and '-' become '_'; counters end in
// `_total`), and its HELP line names the stats key, so an operator can go from
// a graph to `conduitctl stats` and back. Most stats only grow; the few that
// go up and down (current connections, QPs, free mbufs, uptime...) are listed
// in is_gauge() and exported as gauges. A stats name added to the daemon is a
// counter unless it is added there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace conduit::metrics {

struct StatSample {
  std::string name;  // the conduitctl stats name, [A-Za-z0-9_.-]
  uint64_t value = 0;
};

// One row of `conduitctl qps`.
struct QpSample {
  uint32_t qpn = 0;
  uint32_t client_id = 0;
  uint32_t pid = 0;
  std::string state;  // "RTS", "ERROR", ...
  std::string peer;   // the peer's IPv4 address, or its GID; empty before RTR
  uint32_t peer_qpn = 0;
  std::string traffic_class;
  uint64_t rate_bps = 0;   // 0: unknown (not exported)
  uint32_t alpha_ppm = 0;  // DCQCN alpha, parts per million
  uint64_t cnps_rx = 0;
  uint64_t cnps_tx = 0;
  uint64_t retransmits = 0;
  uint64_t tx_bytes = 0;
  uint64_t rx_bytes = 0;
};

struct Exposition {
  std::string version;  // conduitd's version (conduit_build_info)
  std::vector<StatSample> stats;
  std::vector<QpSample> qps;
  // The most QPs with series of their own (daemon.metrics_max_qps): beyond it, the QPs that
  // moved the most bytes are kept (ties: lower QPN) and conduit_qp_series_omitted counts the
  // rest, so a host with thousands of QPs does not flood the scraper.
  size_t max_qps = SIZE_MAX;
};

// Whether a stats name is a gauge (goes up and down) rather than a counter.
bool is_gauge(std::string_view stats_name);

// `conduit_` + the name with every character outside [A-Za-z0-9_] made '_',
// + `_total` for a counter.
std::string metric_name(std::string_view stats_name, bool gauge);

// A label value with '\', '"' and newline escaped.
std::string escape_label_value(std::string_view v);

// The whole page. A stats name that maps to a metric name already written, or to
// one of the page's own families (conduit_build_info, conduit_qp_*), is left out
// (the first one wins), so the page never declares a family twice. At most
// e.max_qps QPs get per-QP series.
std::string format_exposition(const Exposition& e);

}  // namespace conduit::metrics
