#include "qp_table.h"

#include <cinttypes>
#include <cstdio>

namespace conduit::ctl {

std::string rate_text(uint64_t bps) {
  char b[32];
  if (bps == 0) return "-";
  if (bps >= 1'000'000'000) {
    std::snprintf(b, sizeof(b), "%.2fG", static_cast<double>(bps) / 1e9);
  } else {
    std::snprintf(b, sizeof(b), "%.1fM", static_cast<double>(bps) / 1e6);
  }
  return b;
}

std::string format_qp_table(const std::vector<proto::QpSummary>& qps) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line),
                "%-8s %-7s %-5s %-8s %-15s %-10s %9s %8s %8s %8s %8s %14s %14s\n", "QPN", "PID",
                "STATE", "PEER_QPN", "PEER", "CLASS", "RATE", "ALPHA", "CNP_RX", "CNP_TX", "RETX",
                "TX_BYTES", "RX_BYTES");
  out += line;
  for (const auto& q : qps) {
    std::snprintf(line, sizeof(line),
                  "%-8u %-7u %-5s %-8u %-15s %-10s %9s %8.4f %8" PRIu64 " %8" PRIu64 " %8" PRIu64
                  " %14" PRIu64 " %14" PRIu64 "\n",
                  q.qpn, q.pid, proto::qp_state_name(q.state), q.dest_qpn,
                  proto::gid_string(q.dgid).c_str(),
                  q.traffic_class.empty() ? "(default)" : q.traffic_class.c_str(),
                  rate_text(q.rate_bps).c_str(), q.alpha_ppm / 1e6, q.cnps_rx, q.cnps_tx,
                  q.retransmits, q.tx_bytes, q.rx_bytes);
    out += line;
  }
  if (qps.empty()) out += "(no QPs)\n";
  return out;
}

}  // namespace conduit::ctl
