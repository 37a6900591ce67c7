#include "perf_report.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "buffer_layout.h"

using namespace conduit::perf;

TEST_CASE("bandwidth in Gb/s and message rate in Mpps") {
  // 1000 messages of 125000 bytes in 1 s: 1 Gb/s, 0.001 Mpps.
  BwResult r = make_bw_result(125000, 1000, 1'000'000'000, 0);
  CHECK(r.avg_gbps == Approx(1.0));
  CHECK(r.peak_gbps == Approx(1.0));  // never below the average
  CHECK(r.msg_rate_mpps == Approx(0.001));
  r = make_bw_result(125000, 1000, 1'000'000'000, 3'000'000'000ull);
  CHECK(r.peak_gbps == Approx(3.0));
  CHECK(make_bw_result(64, 0, 0, 0).avg_gbps == 0.0);

  BwResult both = combine_bidirectional(make_bw_result(125000, 1000, 1'000'000'000, 0),
                                        make_bw_result(125000, 500, 1'000'000'000, 0));
  CHECK(both.iterations == 1500);
  CHECK(both.avg_gbps == Approx(1.5));

  const std::string line = bw_line(make_bw_result(65536, 5000, 1'000'000'000, 0));
  CHECK(line.find("65536") != std::string::npos);
  CHECK(line.find("2.62") != std::string::npos);
  CHECK(bw_header().find("BW peak[Gb/sec]") != std::string::npos);
  const std::string j = bw_json(make_bw_result(2, 10, 1000, 0), TestKind::kSendBw, 1, false);
  CHECK(j.front() == '{');
  CHECK(j.back() == '}');
  CHECK(j.find("\"test\":\"send_bw\"") != std::string::npos);
}

TEST_CASE("latency statistics are one-way (half the round trip)") {
  std::vector<uint64_t> rtt;
  for (uint64_t i = 1; i <= 1000; ++i) rtt.push_back(i * 1000);  // 1..1000 us round trips
  LatResult r = make_lat_result(2, rtt);
  CHECK(r.iterations == 1000);
  CHECK(r.min_us == Approx(0.5));
  CHECK(r.max_us == Approx(500.0));
  CHECK(r.typical_us == Approx(250.0));
  CHECK(r.avg_us == Approx(250.25));
  CHECK(r.p99_us == Approx(495.0));
  CHECK(r.p999_us == Approx(499.5));
  CHECK(r.stdev_us > 0);
  CHECK(make_lat_result(2, {}).iterations == 0);
  CHECK(lat_header().find("t_typical[usec]") != std::string::npos);
  CHECK(lat_json(r, TestKind::kWriteLat).find("\"t_p999_us\":499.500") != std::string::npos);
  // read_lat reports the READ's whole round trip, as ib_read_lat does.
  const LatResult whole = make_lat_result(2, rtt, true);
  CHECK(whole.min_us == Approx(1.0));
  CHECK(whole.typical_us == Approx(500.0));
  CHECK(whole.p999_us == Approx(999.0));
  CHECK(lat_json(whole, TestKind::kReadLat).find("\"test\":\"read_lat\"") != std::string::npos);
}

TEST_CASE("latency with -D: perftest's average over the sampled time") {
  // 2 s sampled, 100000 round trips: 20 us each, 10 us one way.
  LatDurationResult r = make_lat_duration_result(64, 100000, 2'000'000'000);
  CHECK(r.size_bytes == 64);
  CHECK(r.iterations == 100000);
  CHECK(r.avg_us == Approx(10.0));
  CHECK(r.tps == Approx(50000.0));
  const LatDurationResult read = make_lat_duration_result(64, 100000, 2'000'000'000, true);
  CHECK(read.avg_us == Approx(20.0));
  CHECK(read.tps == Approx(50000.0));
  CHECK(make_lat_duration_result(64, 0, 2'000'000'000).avg_us == 0.0);
  CHECK(make_lat_duration_result(64, 5, 0).tps == 0.0);
  // As ib_send_lat 4.5 -D prints them: " 64            586            1711.92        292.07 ".
  CHECK(lat_duration_header() == " #bytes        #iterations       t_avg[usec]    tps average");
  CHECK(lat_duration_line(r) == " 64            100000            10.00          50000.00");
  CHECK(lat_duration_line(make_lat_duration_result(64, 586, 2'006'010'000)) ==
        " 64            586            1711.61        292.12 ");
}

TEST_CASE("peak meter takes the best 10 ms window") {
  PeakMeter m;
  m.start(0);
  m.add(5'000'000, 1000);                     // window still open
  CHECK(m.peak_bps(5'000'000) == 1'600'000);  // whole-run rate while no window closed
  m.add(10'000'000, 1000);                    // 2000 B in 10 ms = 1.6 Mb/s
  m.add(20'000'000, 125000);                  // 125000 B in 10 ms = 100 Mb/s
  m.add(40'000'000, 1000);
  CHECK(m.peak_bps(40'000'000) == 100'000'000);
}

TEST_CASE("buffer layout: one slot without --check, in-flight slots with it") {
  BufferLayout l = make_layout(65536, 1, 128, 512, false, 128u << 20);
  CHECK(l.tx_slots == 1);
  CHECK(l.rx_slots == 1);
  CHECK(l.rx_offset(0) == 65536);
  CHECK(l.mr_bytes() == 131072);
  l = make_layout(3, 1, 128, 512, false, 128u << 20);
  CHECK(l.slot_bytes == 64);
  l = make_layout(65536, 1, 128, 512, true, 128u << 20);
  CHECK(l.tx_slots == 128);
  CHECK(l.rx_slots == 512);
  l = make_layout(16u << 20, 1, 128, 512, true, 128u << 20);
  CHECK(l.tx_slots == 4);
  CHECK(l.rx_slots == 4);
  l = make_layout(16u << 20, 256, 16, 64, true, 128u << 20);
  CHECK(l.tx_slots == 1);  // never zero
  CHECK(l.rx_slots == 1);
  CHECK(l.tx_offset(3) == 3 * l.slot_bytes);
}
