#include "metrics/prometheus_text.h"

#include <catch2/catch.hpp>
#include <sstream>
#include <string>

using namespace conduit::metrics;

namespace {

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("prometheus_text: stats names map to metric names, counters end in _total") {
  CHECK(metric_name("port.rx_packets", false) == "conduit_port_rx_packets_total");
  CHECK(metric_name("port.mbufs_free", true) == "conduit_port_mbufs_free");
  CHECK(metric_name("wire.drop-bad.icrc", false) == "conduit_wire_drop_bad_icrc_total");
  CHECK(is_gauge("port.mbufs_free"));
  CHECK(is_gauge("control.qps"));
  CHECK(is_gauge("uptime_s"));
  CHECK_FALSE(is_gauge("port.rx_packets"));
  CHECK_FALSE(is_gauge("control.requests"));
}

TEST_CASE("prometheus_text: label values are escaped") {
  CHECK(escape_label_value("plain") == "plain");
  CHECK(escape_label_value("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
}

TEST_CASE("prometheus_text: the page declares each family once, with HELP and TYPE") {
  Exposition e;
  e.version = "0.1.0";
  e.stats = {{"port.rx_packets", 42},
             {"port.mbufs_free", 8000},
             {"uptime_s", 7},
             {"port-rx.packets", 1}};  // maps to a name already written: left out
  QpSample q;
  q.qpn = 17;
  q.client_id = 3;
  q.pid = 1234;
  q.state = "RTS";
  q.peer = "198.18.0.2";
  q.peer_qpn = 18;
  q.traffic_class = "roce";
  q.rate_bps = 10'000'000'000;
  q.alpha_ppm = 62'500;
  q.cnps_rx = 5;
  q.tx_bytes = 1 << 20;
  QpSample r = q;
  r.qpn = 18;
  r.state = "INIT";
  r.peer.clear();
  r.peer_qpn = 0;
  r.rate_bps = 0;  // unknown: no rate sample
  r.alpha_ppm = 1'000'000;
  e.qps = {q, r};
  const std::string page = format_exposition(e);
  INFO(page);

  CHECK(page.find("# TYPE conduit_build_info gauge\nconduit_build_info{version=\"0.1.0\"} 1\n") !=
        std::string::npos);
  CHECK(page.find("# HELP conduit_port_rx_packets_total conduitctl stats: port.rx_packets\n"
                  "# TYPE conduit_port_rx_packets_total counter\n"
                  "conduit_port_rx_packets_total 42\n") != std::string::npos);
  CHECK(page.find("# TYPE conduit_port_mbufs_free gauge\nconduit_port_mbufs_free 8000\n") !=
        std::string::npos);
  CHECK(page.find("conduit_uptime_s 7\n") != std::string::npos);
  CHECK(count(page, "# TYPE conduit_port_rx_packets_total ") == 1);
  CHECK(page.find("conduit_port_rx_packets_total 1\n") == std::string::npos);

  CHECK(
      page.find("conduit_qp_info{qpn=\"17\",client=\"3\",pid=\"1234\",state=\"RTS\",class=\"roce\","
                "peer=\"198.18.0.2\",peer_qpn=\"18\"} 1\n") != std::string::npos);
  CHECK(page.find("conduit_qp_info{qpn=\"18\",client=\"3\",pid=\"1234\",state=\"INIT\","
                  "class=\"roce\",peer=\"\",peer_qpn=\"\"} 1\n") != std::string::npos);
  CHECK(page.find("conduit_qp_rate_bits_per_second{qpn=\"17\"} 10000000000\n") !=
        std::string::npos);
  CHECK(page.find("conduit_qp_rate_bits_per_second{qpn=\"18\"}") == std::string::npos);
  CHECK(page.find("conduit_qp_dcqcn_alpha{qpn=\"17\"} 0.062500\n") != std::string::npos);
  CHECK(page.find("conduit_qp_dcqcn_alpha{qpn=\"18\"} 1.000000\n") != std::string::npos);
  CHECK(page.find("conduit_qp_cnps_received_total{qpn=\"17\"} 5\n") != std::string::npos);
  CHECK(page.find("conduit_qp_tx_bytes_total{qpn=\"17\"} 1048576\n") != std::string::npos);

  // Every line is a comment or "name[{labels}] value"; every family is typed before its samples.
  std::istringstream in(page);
  std::string line, typed;
  size_t samples = 0;
  while (std::getline(in, line)) {
    REQUIRE_FALSE(line.empty());
    if (line.rfind("# TYPE ", 0) == 0) {
      typed = line.substr(7, line.find(' ', 7) - 7);
      continue;
    }
    if (line[0] == '#') continue;
    const std::string name = line.substr(0, line.find_first_of("{ "));
    INFO(line);
    CHECK(name == typed);
    ++samples;
  }
  CHECK(samples == 1 + 3 + 1 + 2 + 1 + 2 + 2 * 5);  // ... + conduit_qp_series_omitted
  CHECK(page.back() == '\n');
}

// A stats name that maps onto a family the page writes itself (the per-QP counters)
// is left out like any other clash: Prometheus rejects a page that declares a family twice.
TEST_CASE("prometheus_text: a stats name never redeclares the page's own families") {
  Exposition e;
  e.stats = {{"qp.tx_bytes", 1}, {"qp_retransmits", 2}, {"port.rx_packets", 4}};
  QpSample q;
  q.qpn = 17;
  q.tx_bytes = 99;
  e.qps = {q};
  const std::string page = format_exposition(e);
  INFO(page);
  CHECK(count(page, "# TYPE conduit_qp_tx_bytes_total ") == 1);
  CHECK(count(page, "# TYPE conduit_qp_retransmits_total ") == 1);
  CHECK(page.find("conduit_qp_tx_bytes_total 1\n") == std::string::npos);
  CHECK(page.find("conduit_qp_tx_bytes_total{qpn=\"17\"} 99\n") != std::string::npos);
  CHECK(page.find("conduit_port_rx_packets_total 4\n") != std::string::npos);
}

TEST_CASE("prometheus_text: an empty daemon still gives a valid page") {
  const std::string page = format_exposition({});
  CHECK(page.find("conduit_build_info{version=\"\"} 1\n") != std::string::npos);
  CHECK(page.find("# TYPE conduit_qp_info gauge\n") != std::string::npos);
}

TEST_CASE("prometheus_text: max_qps keeps the busiest QPs' series and counts the rest") {
  Exposition e;
  for (uint32_t n = 1; n <= 6; ++n) {
    QpSample q;
    q.qpn = n;
    q.state = "RTS";
    q.tx_bytes = n == 2 || n == 5 ? 1000 : 10 * n;  // 2 and 5 moved the most, then 6 and 4
    q.rx_bytes = n == 4 ? 20 : 0;                   // 4: 60 in all, as 6
    e.qps.push_back(q);
  }
  e.max_qps = 4;
  const std::string page = format_exposition(e);
  CHECK(page.find("conduit_qp_series_omitted 2\n") != std::string::npos);
  CHECK(count(page, "conduit_qp_info{") == 4);
  for (const char* kept : {"qpn=\"2\"", "qpn=\"4\"", "qpn=\"5\"", "qpn=\"6\""}) {
    INFO(kept);
    CHECK(count(page, kept) == 7);  // info + six number families
  }
  CHECK(count(page, "qpn=\"1\"") == 0);
  CHECK(count(page, "qpn=\"3\"") == 0);
  // In QPN order, as without a cap.
  CHECK(page.find("conduit_qp_info{qpn=\"2\"") < page.find("conduit_qp_info{qpn=\"4\""));

  e.max_qps = 0;  // no per-QP series at all
  const std::string none = format_exposition(e);
  CHECK(none.find("conduit_qp_series_omitted 6\n") != std::string::npos);
  CHECK(count(none, "qpn=") == 0);
  e.max_qps = 6;  // exactly enough
  CHECK(format_exposition(e).find("conduit_qp_series_omitted 0\n") != std::string::npos);
}
