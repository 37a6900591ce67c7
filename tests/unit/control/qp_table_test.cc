// conduitctl qps: the table's columns fit their content, the header names units, and
// every line splits into the header's fields (what awk-style readers rely on).
#include "qp_table.h"

#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "proto/cm_addr.h"

using namespace conduit;
using conduit::ctl::format_qp_table;
using conduit::ctl::rate_text;

namespace {

struct Field {
  size_t begin, end;  // [begin, end) in its line
  std::string text;
};

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<Field> fields_of(const std::string& line) {
  std::vector<Field> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    if (i == line.size()) break;
    const size_t b = i;
    while (i < line.size() && line[i] != ' ') ++i;
    out.push_back({b, i, line.substr(b, i - b)});
  }
  return out;
}

proto::QpSummary qp(uint32_t qpn, const proto::CmAddr& peer, std::string cls, uint64_t rate_bps,
                    uint64_t tx_bytes) {
  proto::QpSummary q;
  q.qpn = qpn;
  q.client_id = 1;
  q.pid = 4242;
  q.state = proto::QpState::kRts;
  q.dest_qpn = qpn + 1;
  q.dgid = peer;
  q.traffic_class = std::move(cls);
  q.rate_bps = rate_bps;
  q.alpha_ppm = 31250;
  q.cnps_rx = 12;
  q.cnps_tx = 3;
  q.retransmits = 1190;
  q.tx_bytes = tx_bytes;
  q.rx_bytes = 77;
  return q;
}

// A ULA peer, a full eight-group IPv6 address (39 characters) and an IPv4 peer.
const proto::CmAddr kUla = {0xFD, 0,    0,    0,    0,    0,    0,    0,
                            0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0xDE, 0xF0};
const proto::CmAddr kFull = {0xFD, 0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0xDE,
                             0xF0, 0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0xDE};

}  // namespace

TEST_CASE("conduitctl qps: columns as wide as their content, header included", "[ctl]") {
  const std::vector<proto::QpSummary> qps = {
      qp(17, proto::cm_addr_v4(0xC6120002), "", 9'610'000'000, 123),
      qp(18, kUla, "gold", 300'000'000, 98'765'432'109'876),
      qp(4'194'303, kFull, "latency-critical-storage", 40'000, 0)};
  const std::string table = format_qp_table(qps);
  const auto lines = lines_of(table);
  REQUIRE(lines.size() == 4);
  CHECK(table.find("fd12:3456:789a:bcde:f012:3456:789a:bcde") != std::string::npos);
  CHECK(table.find("fd00::1234:5678:9abc:def0") != std::string::npos);
  CHECK(table.find("latency-critical-storage") != std::string::npos);
  const auto header = fields_of(lines[0]);
  REQUIRE(header.size() == 13);
  // Text columns (QPN .. CLASS) start where their header does; numbers (RATE ..) end there.
  for (size_t row = 1; row < lines.size(); ++row) {
    INFO("line: '" << lines[row] << "'");
    const auto f = fields_of(lines[row]);
    REQUIRE(f.size() == header.size());
    for (size_t c = 0; c < 6; ++c) {
      INFO("column " << header[c].text);
      CHECK(f[c].begin == header[c].begin);
    }
    for (size_t c = 6; c < f.size(); ++c) {
      INFO("column " << header[c].text);
      CHECK(f[c].end == header[c].end);
    }
  }
  for (const auto& l : lines) CHECK(l.back() != ' ');
}

TEST_CASE("conduitctl qps: narrow content keeps the header's width", "[ctl]") {
  const auto lines = lines_of(format_qp_table({qp(1, proto::CmAddr{}, "", 0, 0)}));
  REQUIRE(lines.size() == 2);
  const auto header = fields_of(lines[0]);
  const auto row = fields_of(lines[1]);
  REQUIRE(row.size() == header.size());
  CHECK(row[4].text == "-");  // no peer yet
  CHECK(row[5].text == "(default)");
  CHECK(row[6].text == "-");  // no rate sample
  for (size_t c = 0; c < 6; ++c) CHECK(row[c].begin == header[c].begin);
  for (size_t c = 6; c < row.size(); ++c) CHECK(row[c].end == header[c].end);
  // Single spaces between the header's names: nothing wider than the content needs.
  CHECK(lines[0].find("QPN PID") == 0);
}

TEST_CASE("conduitctl qps: the header names the units", "[ctl]") {
  const auto header = fields_of(lines_of(format_qp_table({}))[0]);
  std::vector<std::string> names;
  for (const auto& f : header) names.push_back(f.text);
  CHECK(names == std::vector<std::string>{"QPN", "PID", "STATE", "PEER_QPN", "PEER", "CLASS",
                                          "RATE[bit/s]", "ALPHA", "CNP_RX", "CNP_TX", "RETX",
                                          "TX_BYTES", "RX_BYTES"});
  CHECK(format_qp_table({}).ends_with("\n(no QPs)\n"));
}

TEST_CASE("conduitctl qps: rates in bit/s, three figures, any size", "[ctl]") {
  CHECK(rate_text(0) == "-");
  CHECK(rate_text(512) == "512");
  CHECK(rate_text(40'000) == "40.0k");  // DCQCN's floor is far below 1 Mbit/s
  CHECK(rate_text(999'000) == "999k");
  CHECK(rate_text(1'500'000) == "1.50M");
  CHECK(rate_text(300'000'000) == "300M");
  CHECK(rate_text(999'700'000) == "1.00G");
  CHECK(rate_text(9'610'000'000) == "9.61G");
  CHECK(rate_text(25'000'000'000) == "25.0G");
  CHECK(rate_text(400'000'000'000) == "400G");
}
