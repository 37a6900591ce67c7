#include "qp_table.h"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>

namespace conduit::ctl {

namespace {

enum class Align : uint8_t { kLeft, kRight };

struct Column {
  const char* header;
  Align align;
};

// RATE is the QP's current DCQCN rate in bit/s (QpSummary::rate_bps); ALPHA a fraction
// (0 .. 1); CNP_RX / CNP_TX and RETX counts; TX_BYTES / RX_BYTES payload bytes.
constexpr std::array<Column, 13> kColumns{{{"QPN", Align::kLeft},
                                           {"PID", Align::kLeft},
                                           {"STATE", Align::kLeft},
                                           {"PEER_QPN", Align::kLeft},
                                           {"PEER", Align::kLeft},
                                           {"CLASS", Align::kLeft},
                                           {"RATE[bit/s]", Align::kRight},
                                           {"ALPHA", Align::kRight},
                                           {"CNP_RX", Align::kRight},
                                           {"CNP_TX", Align::kRight},
                                           {"RETX", Align::kRight},
                                           {"TX_BYTES", Align::kRight},
                                           {"RX_BYTES", Align::kRight}}};

using Row = std::array<std::string, kColumns.size()>;

std::string u64(uint64_t v) { return std::to_string(v); }

Row cells(const proto::QpSummary& q) {
  char alpha[32];
  std::snprintf(alpha, sizeof(alpha), "%.4f", q.alpha_ppm / 1e6);
  return {u64(q.qpn),
          u64(q.pid),
          proto::qp_state_name(q.state),
          u64(q.dest_qpn),
          proto::gid_string(q.dgid),
          q.traffic_class.empty() ? "(default)" : q.traffic_class,
          rate_text(q.rate_bps),
          alpha,
          u64(q.cnps_rx),
          u64(q.cnps_tx),
          u64(q.retransmits),
          u64(q.tx_bytes),
          u64(q.rx_bytes)};
}

void append_row(std::string& out, const Row& row, const std::array<size_t, kColumns.size()>& w) {
  std::string line;
  for (size_t i = 0; i < row.size(); ++i) {
    if (i != 0) line += ' ';
    const size_t pad = w[i] - row[i].size();
    if (kColumns[i].align == Align::kRight) line.append(pad, ' ');
    line += row[i];
    if (kColumns[i].align == Align::kLeft) line.append(pad, ' ');
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  out += line;
  out += '\n';
}

}  // namespace

std::string rate_text(uint64_t bps) {
  if (bps == 0) return "-";
  struct Prefix {
    double scale;
    const char* suffix;
  };
  constexpr Prefix kPrefixes[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
  for (const Prefix& p : kPrefixes) {
    // 999.7M rounds to 1.00G, not "1000M".
    if (static_cast<double>(bps) < p.scale * 0.9995) continue;
    const double v = static_cast<double>(bps) / p.scale;
    char b[32];
    // Three significant figures: 9.61G, 25.0G, 300M.
    std::snprintf(b, sizeof(b), v < 10 ? "%.2f%s" : v < 100 ? "%.1f%s" : "%.0f%s", v, p.suffix);
    return b;
  }
  return u64(bps);
}

std::string format_qp_table(const std::vector<proto::QpSummary>& qps) {
  Row header;
  std::array<size_t, kColumns.size()> width{};
  for (size_t i = 0; i < kColumns.size(); ++i) {
    header[i] = kColumns[i].header;
    width[i] = header[i].size();
  }
  std::vector<Row> rows;
  rows.reserve(qps.size());
  for (const auto& q : qps) {
    rows.push_back(cells(q));
    for (size_t i = 0; i < kColumns.size(); ++i)
      width[i] = std::max(width[i], rows.back()[i].size());
  }
  std::string out;
  append_row(out, header, width);
  for (const Row& r : rows) append_row(out, r, width);
  if (rows.empty()) out += "(no QPs)\n";
  return out;
}

}  // namespace conduit::ctl
