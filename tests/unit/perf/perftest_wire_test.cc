// perftest's exchange against the bytes rxe's perftest 4.5 really sent (the reference capture
// /work/shared/captures/rxe-perftest-send-write.pcap, ib_write_bw -n 5 -s 64), and bad input.
#include "perftest_wire.h"

#include "transport/qp_attr.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

using namespace conduit::perf;

namespace {

template <size_t N>
std::array<uint8_t, N> bytes_of(const char* text, size_t len) {
  std::array<uint8_t, N> a{};
  std::memcpy(a.data(), text, std::min(len, N));
  return a;
}

std::array<uint8_t, 8> hex8(uint64_t v) {
  std::array<uint8_t, 8> a{};
  for (size_t i = 0; i < 8; ++i) a[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
  return a;
}

// perftest 4.5's --out_json test_info block (Debian's write_test_info_to_file) for one RC QP
// on conduitd, no SRQ, relaxed ordering on, no events, no rdma_cm: the title, the depth lines
// (`depth_lines`, as "TX_depth : 128,\n"), the MTU and the inline size are the test's. Its
// output is checked against a whole file spelled out in the --out_json test.
std::string json_test_info(const std::string& test, const std::string& depth_lines, uint32_t mtu,
                           uint32_t max_inline) {
  std::string info = "test_info: {\n";
  info += "test: " + test + ",\n";
  info +=
      "Dual_port: OFF,\n"
      "Device: \"conduitd\",\n"
      "Number_of_qps: 1,\n"
      "Transport_type: IB,\n"
      "Connection_type: RC,\n"
      "Using_SRQ: OFF,\n"
      "PCIe_relax_order: ON,\n"
      "ibv_wr_API: OFF,\n";
  info += depth_lines;
  info += "Mtu: " + std::to_string(mtu) + ",\n";
  info +=
      "Link_type: Ethernet,\n"
      "GID_index: 0,\n";
  info += "Max_inline_data: " + std::to_string(max_inline) + ",\n";
  info +=
      "rdma_cm_QPs: OFF,\n"
      "Data_ex_method: Ethernet,\n"
      "},\n";
  return info;
}

// The whole --out_json file around a test_info block: "{", it, "results: {", the result lines
// (each with its own ending), "},", "}".
std::string json_file(const std::string& test_info, const std::string& results) {
  return "{\n" + test_info + "results: {\n" + results + "},\n}\n";
}

}  // namespace

TEST_CASE("perftest version message: 16 bytes, \"6.06\" and NULs, as rxe's perftest sends") {
  const PerftestVersion m = perftest_version_message();
  const PerftestVersion captured = bytes_of<16>("6.06", 4);
  CHECK(m == captured);
  std::string v;
  REQUIRE(parse_perftest_version(captured, v));
  CHECK(v == "6.06");
  SECTION("bad versions") {
    CHECK_FALSE(parse_perftest_version(PerftestVersion{}, v));        // empty
    CHECK_FALSE(parse_perftest_version(bytes_of<16>("6.0x", 4), v));  // not a number
    // After the NUL, perftest reads nothing (atof): a conduit-perf peer's run is there.
    CHECK(parse_perftest_version(bytes_of<16>("6.06\0z", 6), v));
    CHECK(v == "6.06");
    PerftestVersion full{};
    full.fill('6');
    CHECK(parse_perftest_version(full, v));  // 16 digits, no NUL: still a version
  }
}

TEST_CASE("perftest system data and MTU messages") {
  CHECK(perftest_u32(kPerftestCycleBufferBytes) == PerftestU32{0x00, 0x00, 0x10, 0x00});
  CHECK(perftest_u32(kPerftestCacheLineBytes) == PerftestU32{0x00, 0x00, 0x00, 0x40});
  CHECK(perftest_u32_value(PerftestU32{0x12, 0x34, 0x56, 0x78}) == 0x12345678u);
  CHECK(perftest_mtu_message(1024) == PerftestMtu{'3', 0});  // the capture's "3\0"
  CHECK(perftest_mtu_message(4096) == PerftestMtu{'5', 0});
  CHECK(perftest_mtu_message(256) == PerftestMtu{'1', 0});
  uint32_t mtu = 0;
  REQUIRE(parse_perftest_mtu(PerftestMtu{'3', 0}, mtu));
  CHECK(mtu == 1024);
  REQUIRE(parse_perftest_mtu(PerftestMtu{'5', 0}, mtu));
  CHECK(mtu == 4096);
  CHECK_FALSE(parse_perftest_mtu(PerftestMtu{'0', 0}, mtu));
  CHECK_FALSE(parse_perftest_mtu(PerftestMtu{'6', 0}, mtu));
  CHECK_FALSE(parse_perftest_mtu(PerftestMtu{'3', '3'}, mtu));
}

TEST_CASE("perftest connection record: the captured 108 bytes parse and re-format exactly") {
  const char* text =
      "0000:0001:000011:2743c4:00000000:00005578304d4000:"
      "00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:03:00000000:";
  const PerftestRecord captured = bytes_of<108>(text, std::strlen(text));
  QpRecord r;
  REQUIRE(parse_perftest_record(captured, r));
  CHECK(r.out_reads == 1);
  CHECK(r.qpn == 0x11);
  CHECK(r.psn == 0x2743c4);
  CHECK(r.vaddr == 0x5578304d4000ull);
  CHECK(r.gid[10] == 0xff);
  CHECK(r.gid[12] == 198);
  CHECK(r.gid[15] == 3);
  CHECK(perftest_record(r) == captured);
  SECTION("no NUL at the end") {
    PerftestRecord bad = captured;
    bad[107] = ':';
    CHECK_FALSE(parse_perftest_record(bad, r));
  }
  SECTION("a field that is not hex") {
    PerftestRecord bad = captured;
    bad[7] = 'g';
    CHECK_FALSE(parse_perftest_record(bad, r));
  }
  SECTION("the ibv_rc_pingpong record is not a perftest record") {
    const char* pp = "0000:000011:123456:00000000000000000000ffffc6120001";
    CHECK_FALSE(parse_perftest_record(bytes_of<108>(pp, std::strlen(pp) + 1), r));
  }
}

TEST_CASE("perftest -R record: struct pingpong_dest's 56 bytes, big endian, padding ignored") {
  // As rdma_write_keys lays it out (perftest 4.5, x86_64): lid, out_reads, qpn, psn, rkey (BE
  // 32), 4 bytes of padding, vaddr (BE 64), the GID's 16 bytes, srqn, gid_index (BE 32).
  PerftestCmRecord m{};
  const uint8_t head[] = {
      0,    0,    0,    0,    0,    0,    0,    16,   0,    0,    0x11, 0x22, 0,
      0x27, 0x43, 0xc4, 0,    0,    0x01, 0x75, 0xde, 0xad, 0xbe, 0xef,  // rkey, padding (garbage)
      0,    0,    0x55, 0x78, 0x30, 0x4d, 0x40, 0};                      // vaddr
  std::memcpy(m.data(), head, sizeof head);
  const uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 200, 2};
  std::memcpy(m.data() + 32, gid, 16);
  m[55] = 1;  // gid_index 1
  QpRecord r;
  REQUIRE(parse_perftest_cm_record(m, r));
  CHECK(r.lid == 0);
  CHECK(r.out_reads == 16);
  CHECK(r.qpn == 0x1122);
  CHECK(r.psn == 0x2743c4);
  CHECK(r.rkey == 0x175);
  CHECK(r.vaddr == 0x5578304d4000ull);
  CHECK(r.gid[12] == 198);
  CHECK(r.gid[15] == 2);
  CHECK(r.srqn == 0);
  // Ours: the same fields, zero padding, gid_index 0 (perftest ignores both).
  PerftestCmRecord back = m;
  std::memset(back.data() + 20, 0, 4);
  back[55] = 0;
  CHECK(perftest_cm_record(r) == back);
  QpRecord again;
  REQUIRE(parse_perftest_cm_record(perftest_cm_record(r), again));
  CHECK(again == r);
  SECTION("a QPN or PSN wider than 24 bits, or a lid wider than 16, is refused") {
    PerftestCmRecord bad = m;
    bad[8] = 1;
    CHECK_FALSE(parse_perftest_cm_record(bad, r));
    bad = m;
    bad[12] = 1;
    CHECK_FALSE(parse_perftest_cm_record(bad, r));
    bad = m;
    bad[1] = 1;
    CHECK_FALSE(parse_perftest_cm_record(bad, r));
  }
  SECTION("perftest's syncs around the connections: zeros parse as an empty record") {
    REQUIRE(parse_perftest_cm_record(PerftestCmRecord{}, r));
    CHECK(r == QpRecord{});
  }
}

TEST_CASE("perftest report: the client's 5 fields as write_bw sent them") {
  // Frames 73..81 of the capture: size 64, 5 iterations, then three doubles.
  const std::array<PerftestU64, kPerftestReportFields> captured{
      hex8(0x40), hex8(5), hex8(0x3fa86ad49f3e8f19ull), hex8(0x3fa86ad480b3bf69ull),
      hex8(0x3f499a786cdee2b1ull)};
  PerftestReport r;
  REQUIRE(parse_perftest_report(captured, r));
  CHECK(r.size_bytes == 64);
  CHECK(r.iterations == 5);
  CHECK(r.bw_peak == Approx(0.0476900).epsilon(1e-5));
  CHECK(r.bw_avg == Approx(0.0476900).epsilon(1e-5));
  CHECK(r.msg_rate_mpps == Approx(0.00078135).epsilon(1e-5));
  CHECK(perftest_report_messages(r) == captured);
  SECTION("impossible reports are refused") {
    auto bad = captured;
    bad[0] = hex8(0);  // size 0
    CHECK_FALSE(parse_perftest_report(bad, r));
    bad = captured;
    bad[0] = hex8(kMaxMessageBytes + 1);
    CHECK_FALSE(parse_perftest_report(bad, r));
    bad = captured;
    bad[3] = perftest_double(std::numeric_limits<double>::quiet_NaN());
    CHECK_FALSE(parse_perftest_report(bad, r));
    bad = captured;
    bad[4] = perftest_double(-1.0);
    CHECK_FALSE(parse_perftest_report(bad, r));
  }
}

namespace {

std::string plan_of(TestKind t, bool server, size_t sizes) {
  PerftestPlan p;
  if (!perftest_plan(t, server, sizes, p)) return "none";
  return perftest_plan_text(p);
}

size_t count_of(const std::string& text, const std::string& word) {
  size_t n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

}  // namespace

// The handshakes each perftest 4.5 main() makes, counted in the binaries of perftest
// 4.5-0.17 (and seen in the capture for send_bw/write_bw): both sides must make the same
// number, in the same places relative to posting receives and the traffic.
TEST_CASE("perftest plans: bandwidth tests, one size") {
  CHECK(plan_of(TestKind::kSendBw, true, 1) ==
        "connect barrier records receives barrier traffic close");
  CHECK(plan_of(TestKind::kSendBw, false, 1) == "connect barrier records barrier traffic close");
  // The server awaits the client's WRITEs/READs/atomics without -W's limit: they complete
  // nothing on its side, and -D or a large -n makes them last longer than -W.
  for (TestKind t : {TestKind::kWriteBw, TestKind::kReadBw, TestKind::kAtomicBw}) {
    CHECK(plan_of(t, true, 1) == "connect barrier records await_peer barrier report close");
    CHECK(plan_of(t, false, 1) == "connect barrier records traffic barrier report close");
  }
}

TEST_CASE("perftest plans: -a (RUN_ALL), 23 sizes") {
  const size_t n = sweep_sizes(kSweepMinBytes, kSweepMaxBytes).size();
  REQUIRE(n == 23);  // perftest's 2^1 .. 2^23
  // send_bw: each size has its receives, a barrier before and one after the traffic.
  const std::string server = plan_of(TestKind::kSendBw, true, n);
  const std::string client = plan_of(TestKind::kSendBw, false, n);
  CHECK(count_of(server, "receives") == n);
  CHECK(count_of(client, "receives") == 0);
  CHECK(count_of(server, "traffic") == n);
  CHECK(count_of(client, "traffic") == n);
  CHECK(count_of(server, "barrier") == 1 + 2 * n);
  CHECK(count_of(client, "barrier") == 1 + 2 * n);
  CHECK(server.rfind("receives barrier traffic barrier close") == server.size() - 38);
  // write_bw/read_bw: no barriers between sizes; the server waits for one final report.
  const std::string w_client = plan_of(TestKind::kWriteBw, false, n);
  CHECK(count_of(w_client, "traffic") == n);
  CHECK(count_of(w_client, "barrier") == 2);
  CHECK(w_client.find("traffic traffic") != std::string::npos);
  CHECK(plan_of(TestKind::kReadBw, true, n) ==
        "connect barrier records await_peer barrier report close");
}

TEST_CASE("perftest plans: -b (duplex)") {
  PerftestPlan p;
  REQUIRE(perftest_duplex_plan(TestKind::kSendBw, 1, "6.06", p));
  CHECK(perftest_plan_text(p) == "connect barrier records receives barrier traffic report close");
  for (TestKind t : {TestKind::kWriteBw, TestKind::kReadBw}) {
    REQUIRE(perftest_duplex_plan(t, 1, "6.06", p));
    CHECK(perftest_plan_text(p) == "connect barrier records barrier traffic report close");
  }
  const size_t n = sweep_sizes(kSweepMinBytes, kSweepMaxBytes).size();
  REQUIRE(perftest_duplex_plan(TestKind::kSendBw, n, "6.06", p));
  const std::string send = perftest_plan_text(p);
  CHECK(count_of(send, "receives") == n);
  CHECK(count_of(send, "report") == n);
  CHECK(count_of(send, "barrier") == 1 + 2 * n);
  // write_bw/read_bw -a: one more barrier per size when the peer's version is 4.6 or more.
  REQUIRE(perftest_duplex_plan(TestKind::kWriteBw, n, "6.06", p));
  CHECK(count_of(perftest_plan_text(p), "barrier") == 1 + 2 * n);
  REQUIRE(perftest_duplex_plan(TestKind::kWriteBw, n, "4.5", p));
  CHECK(count_of(perftest_plan_text(p), "barrier") == 1 + n);
  CHECK_FALSE(perftest_duplex_plan(TestKind::kSendLat, 1, "6.06", p));
  CHECK_FALSE(perftest_duplex_plan(TestKind::kSendBw, 0, "6.06", p));
}

TEST_CASE("perftest plans: latency tests") {
  PerftestPlan p;
  // write_lat: four handshakes, the server writes first; 4.5 ends without a closing
  // handshake (we offer one and accept a closed socket).
  REQUIRE(perftest_plan(TestKind::kWriteLat, true, 1, p));
  CHECK(perftest_plan_text(p) == "connect barrier records barrier traffic close");
  CHECK(p.server_starts);
  REQUIRE(perftest_plan(TestKind::kWriteLat, false, 1, p));
  CHECK(perftest_plan_text(p) == "connect barrier records barrier traffic close");
  // send_lat: both sides post their receives before the fourth handshake; the client sends
  // first; ctx_close_connection's handshake and "done" at the end.
  for (bool server : {true, false}) {
    REQUIRE(perftest_plan(TestKind::kSendLat, server, 1, p));
    CHECK(perftest_plan_text(p) == "connect barrier records receives barrier traffic close");
    CHECK_FALSE(p.server_starts);
  }
  // read_lat: four handshakes; only the client has traffic, the server awaits it in the close.
  CHECK(plan_of(TestKind::kReadLat, false, 1) == "connect barrier records barrier traffic close");
  CHECK(plan_of(TestKind::kReadLat, true, 1) == "connect barrier records barrier await_peer close");
  CHECK(plan_of(TestKind::kAtomicLat, true, 1) ==
        "connect barrier records barrier await_peer close");
  // No sizes at all: nothing to speak.
  CHECK(plan_of(TestKind::kSendLat, true, 0) == "none");
  CHECK(plan_of(TestKind::kSendBw, true, 0) == "none");
}

TEST_CASE("perftest plans: latency tests with -a (RUN_ALL), 23 sizes") {
  const size_t n = sweep_sizes(kSweepMinBytes, kSweepMaxBytes).size();
  REQUIRE(n == 23);
  // write_lat (write_lat.c): every size's run_iter_lat_write back to back, no handshake
  // between sizes; both sides the same plan, the server starts every size.
  for (bool server : {true, false}) {
    const std::string w = plan_of(TestKind::kWriteLat, server, n);
    CHECK(w.find("connect barrier records barrier traffic traffic") == 0);
    CHECK(count_of(w, "traffic") == n);
    CHECK(count_of(w, "barrier") == 2);
    CHECK(w.rfind("traffic close") == w.size() - 13);
  }
  // send_lat (send_lat.c): per size, ctx_set_recv_wqes and a handshake before the ping-pong.
  for (bool server : {true, false}) {
    const std::string sl = plan_of(TestKind::kSendLat, server, n);
    CHECK(count_of(sl, "receives barrier traffic") == n);
    CHECK(count_of(sl, "barrier") == 1 + n);
    CHECK(sl.rfind("receives barrier traffic close") == sl.size() - 30);
  }
  // read_lat (read_lat.c): the client READs every size; the server waits in the close.
  const std::string rc = plan_of(TestKind::kReadLat, false, n);
  CHECK(count_of(rc, "traffic") == n);
  CHECK(count_of(rc, "barrier") == 2);
  CHECK(plan_of(TestKind::kReadLat, true, n) == "connect barrier records barrier await_peer close");
}

TEST_CASE("--perftest options") {
  PerfOptions o;
  const char* ok[] = {"conduit-perf", "write_bw", "--perftest", "-x198.18.0.1",
                      "-s",           "4096",     "-n",         "10"};
  REQUIRE(parse_args(8, ok, o).ok);
  CHECK(o.perftest);
  const char* lat[] = {"conduit-perf", "send_lat", "--perftest", "-x198.18.0.1",
                       "-s",           "64",       "-n",         "100"};
  REQUIRE(parse_args(8, lat, o).ok);
  CHECK(o.sizes == std::vector<uint64_t>{64});
  const char* lat_default[] = {"conduit-perf", "write_lat", "--perftest", "-x198.18.0.1"};
  REQUIRE(parse_args(4, lat_default, o).ok);
  CHECK(o.sizes == std::vector<uint64_t>{2});  // perftest's latency default
  CHECK(o.effective_iterations() == 1000);
  for (const char* t : {"write_lat", "send_lat", "read_lat"}) {
    const char* lat_sweep[] = {"conduit-perf", t, "--perftest", "-x198.18.0.1", "-a", "-n", "5"};
    REQUIRE(parse_args(7, lat_sweep, o).ok);  // perftest's 2 B .. 8 MiB
    CHECK(o.sizes.size() == 23);
    CHECK(o.sizes.back() == 8ull << 20);
  }
  const char* bw_sweep[] = {"conduit-perf", "send_bw", "--perftest", "-x198.18.0.1",
                            "-a",           "-n",      "5"};
  REQUIRE(parse_args(7, bw_sweep, o).ok);
  CHECK(o.sizes.size() == 23);
  CHECK(o.sizes.front() == 2);
  CHECK(o.sizes.back() == 8ull << 20);
  const char* list[] = {"conduit-perf", "send_bw", "--perftest", "-x198.18.0.1", "-s", "64,128"};
  CHECK_FALSE(parse_args(6, list, o).ok);
  const char* few[] = {"conduit-perf", "send_bw", "--perftest", "-x198.18.0.1", "-a", "-n", "4"};
  CHECK_FALSE(parse_args(7, few, o).ok);  // perftest: "Iteration num should be between 5 and"
  const char* check[] = {"conduit-perf", "write_bw", "--perftest", "-x198.18.0.1", "-c"};
  CHECK_FALSE(parse_args(5, check, o).ok);
  const char* json[] = {"conduit-perf", "write_lat", "--perftest", "-x198.18.0.1", "-J"};
  CHECK_FALSE(parse_args(5, json, o).ok);
  const char* dur[] = {"conduit-perf", "send_lat", "--perftest", "-x198.18.0.1", "-D", "5"};
  REQUIRE(parse_args(6, dur, o).ok);  // perftest's latency -D: its duration report
  CHECK(o.sizes == std::vector<uint64_t>{2});
  CHECK(o.effective_iterations() == 0);
  const char* dur_lat_all[] = {"conduit-perf", "write_lat", "--perftest", "-x198.18.0.1",
                               "-D",           "5",         "-a"};
  CHECK_FALSE(parse_args(7, dur_lat_all, o).ok);  // perftest: no -D with -a
  const char* dur_bw[] = {"conduit-perf", "write_bw", "--perftest", "-x198.18.0.1",
                          "-D",           "5",        "-s",         "4096"};
  REQUIRE(parse_args(8, dur_bw, o).ok);
  CHECK(o.duration_s == 5);
  CHECK(o.effective_iterations() == 0);
  const char* dur_all[] = {"conduit-perf", "send_bw", "--perftest", "-x198.18.0.1",
                           "-D",           "5",       "-a"};
  CHECK_FALSE(parse_args(7, dur_all, o).ok);
  const char* duplex[] = {"conduit-perf", "write_bw", "--perftest", "-x198.18.0.1", "-b", "-a"};
  REQUIRE(parse_args(6, duplex, o).ok);  // perftest's -b: the bandwidth tests
  CHECK(o.bidirectional);
  const char* duplex_dur[] = {"conduit-perf", "send_bw", "--perftest", "-x198.18.0.1",
                              "-b",           "-D",      "5"};
  CHECK_FALSE(parse_args(7, duplex_dur, o).ok);
  const char* qps[] = {"conduit-perf", "write_bw", "--perftest", "-x198.18.0.1", "-q", "4"};
  REQUIRE(parse_args(6, qps, o).ok);  // perftest's -q: the bandwidth tests
  CHECK(o.qps == 4);
  const char* many[] = {"conduit-perf", "send_bw", "--perftest", "-x198.18.0.1", "-q", "65"};
  CHECK_FALSE(parse_args(6, many, o).ok);  // more than one CQ shares out
  const char* lat_q[] = {"conduit-perf", "send_lat", "--perftest", "-x198.18.0.1", "-q", "2"};
  CHECK_FALSE(parse_args(6, lat_q, o).ok);  // perftest's latency tests run one QP
  const char* val[] = {"conduit-perf", "send_bw", "--perftest=1"};
  CHECK_FALSE(parse_args(3, val, o).ok);
  const char* u[] = {"conduit-perf", "send_bw", "--perftest", "-x198.18.0.1", "-u", "17"};
  REQUIRE(parse_args(6, u, o).ok);
  CHECK(o.qp_timeout == 17);
  const char* u_bad[] = {"conduit-perf", "send_bw", "--perftest", "-x198.18.0.1", "-u", "32"};
  CHECK_FALSE(parse_args(6, u_bad, o).ok);
  // -u 0: perftest's (verbs') infinite timeout, which conduit's transport has too (no ACK
  // timer: only a gap or a NAK makes it resend).
  const char* u_zero[] = {"conduit-perf", "send_bw", "--perftest", "-x198.18.0.1", "-u", "0"};
  CHECK(parse_args(6, u_zero, o).ok);
  CHECK(o.qp_timeout == 0);
  CHECK(conduit::transport::ack_timeout_ns(0) == 0);  // the transport's "no timer"
  CHECK(conduit::perf::usage_text().find("0: none, as IB's") != std::string::npos);
}

TEST_CASE("--perftest advertises a READ depth conduitd's responder can hold") {
  // perftest's requester keeps this many READs in flight towards us; the session gives its
  // QPs' responders this depth at connect, which the transport must accept.
  CHECK(kConduitReadResponderDepth >= 1);
  CHECK(kConduitReadResponderDepth <= conduit::transport::kMaxReadDepth);
}

TEST_CASE("perftest's bandwidth report: MB/sec (MiB/s) by default, Gb/sec with --report_gbits") {
  // 1 GiB in one second: 1024 MiB/s, or 8.589934592 Gb/s (perftest's format_factor 125000000).
  const PerftestReport mib = perftest_rate_report(1 << 20, 1024, 1.0, 1024, false);
  CHECK(mib.bw_avg == Approx(1024.0));
  CHECK(mib.bw_peak == Approx(1024.0));
  CHECK(mib.msg_rate_mpps == Approx(0.001024));
  const PerftestReport gb = perftest_rate_report(1 << 20, 1024, 1.0, 1024, true);
  CHECK(gb.bw_avg == Approx(8.589934592));
  CHECK(gb.msg_rate_mpps == Approx(0.001024));
  CHECK(perftest_rate_report(64, 5, 0.0, 5, true).bw_avg == 0.0);  // not measurable
  // The headers, as perftest's RESULT_FMT and RESULT_FMT_G.
  CHECK(perftest_bw_header(false) ==
        " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]");
  CHECK(perftest_bw_header(true) ==
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]");
  // perftest's REPORT_FMT, byte for byte: " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t
  // %-7.6lf".
  CHECK(perftest_bw_line(mib, false) ==
        " 1048576    1024             1024.00            1024.00\t\t   0.001024");
  CHECK(perftest_bw_line(gb, true) ==
        " 1048576    1024             8.59               8.59   \t\t   0.001024");
  // With --report_gbits an average below 0.1 Gb/sec gets six decimals (perftest's inc_accuracy,
  // REPORT_FMT_EXT) instead of 0.00.
  const PerftestReport slow = perftest_rate_report(2, 5000, 1.0, 5000, true);
  CHECK(perftest_bw_line(slow, true) ==
        " 2          5000           0.000080            0.000080            0.005000");
  CHECK(perftest_bw_line(perftest_rate_report(2, 5000, 1.0, 5000, false), false)
            .find("0.01               0.01") != std::string::npos);
}

namespace {

PerfOptions perftest_options(std::vector<const char*> args) {
  args.insert(args.begin(), "conduit-perf");
  PerfOptions o;
  const ParseResult r = parse_args(static_cast<int>(args.size()), args.data(), o);
  INFO(r.error);
  REQUIRE(r.ok);
  return o;
}

}  // namespace

TEST_CASE("perftest's peak: 0.00 with -N, -D, on send_bw's server and above -n 20000") {
  // -N (--noPeak), as perftest: both sides' lines and the report give the peak as 0.
  auto o = perftest_options({"write_bw", "h", "--perftest", "-x", "198.18.0.1", "-N"});
  CHECK(o.no_peak);
  CHECK(perftest_no_peak(o, false));
  CHECK(perftest_no_peak(
      perftest_options({"send_bw", "--perftest", "-x", "198.18.0.1", "--noPeak", "-b"}), true));
  // Without it, the client's peak is reported (ours: the average, no per-message clock).
  o = perftest_options({"write_bw", "h", "--perftest", "-x", "198.18.0.1"});
  CHECK_FALSE(perftest_no_peak(o, false));
  CHECK_FALSE(perftest_no_peak(o, true));
  // perftest's force_dependecies(): noPeak with -D, on send_bw's server (without -b), and for
  // bandwidth tests above -n 20000.
  o = perftest_options({"write_bw", "h", "--perftest", "-x", "198.18.0.1", "-D", "4"});
  CHECK(perftest_no_peak(o, false));
  o = perftest_options({"send_bw", "--perftest", "-x", "198.18.0.1"});
  CHECK(perftest_no_peak(o, true));
  CHECK_FALSE(perftest_no_peak(o, false));
  o = perftest_options({"send_bw", "--perftest", "-x", "198.18.0.1", "-b"});
  CHECK_FALSE(perftest_no_peak(o, true));
  CHECK(perftest_no_peak(
      perftest_options({"read_bw", "--perftest", "-x", "1.2.3.4", "-n", "20001"}), false));
  CHECK_FALSE(perftest_no_peak(
      perftest_options({"read_bw", "--perftest", "-x", "1.2.3.4", "-n", "20000"}), false));
  // Latency tests have no peak; perftest refuses -N there.
  CHECK_FALSE(
      perftest_no_peak(perftest_options({"send_lat", "--perftest", "-x", "1.2.3.4"}), true));
  PerfOptions bad;
  const char* lat_n[] = {"conduit-perf", "send_lat", "--perftest", "-x1.2.3.4", "-N"};
  const ParseResult r = parse_args(5, lat_n, bad);
  CHECK_FALSE(r.ok);
  CHECK(r.error.find("-N (--noPeak) applies to bandwidth tests") != std::string::npos);
  // Without --perftest our own report measures the peak: -N is said to be ignored.
  PerfOptions own;
  const char* own_n[] = {"conduit-perf", "send_bw", "-N"};
  const ParseResult r2 = parse_args(3, own_n, own);
  REQUIRE(r2.ok);
  REQUIRE(r2.notes.size() == 1);
  CHECK(r2.notes[0].find("-N (--noPeak) ignored without --perftest") != std::string::npos);
}

TEST_CASE("perftest's -o (--outs): the READ depth we advertise and serve") {
  // Without -o: conduitd's most, as perftest advertises its device's max.
  auto o = perftest_options({"read_bw", "h", "--perftest", "-x", "198.18.0.1"});
  CHECK(perftest_out_reads(o) == kConduitReadResponderDepth);
  o = perftest_options({"read_bw", "h", "--perftest", "-x", "198.18.0.1", "-o", "4"});
  CHECK(o.out_reads == 4);
  CHECK(perftest_out_reads(o) == 4);
  CHECK(perftest_out_reads(
            perftest_options({"atomic_lat", "--perftest", "-x", "198.18.0.1", "--outs=1"})) == 1);
  // 0: the most (perftest: the device's max); above it: lowered to it, with a note.
  CHECK(perftest_out_reads(perftest_options(
            {"read_lat", "--perftest", "-x", "1.2.3.4", "-o", "0"})) == kConduitReadResponderDepth);
  PerfOptions big;
  const char* many[] = {"conduit-perf", "read_bw", "--perftest", "-x1.2.3.4", "-o", "64"};
  const ParseResult r = parse_args(6, many, big);
  REQUIRE(r.ok);
  CHECK(perftest_out_reads(big) == 16);
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0].find("-o 64: a conduitd QP serves at most 16") != std::string::npos);
  // perftest: "Setting Outstanding reads only available on READ verb"; -R: the CM decides.
  PerfOptions bad;
  const char* write[] = {"conduit-perf", "write_bw", "--perftest", "-x1.2.3.4", "-o", "4"};
  CHECK(parse_args(6, write, bad).error.find("-o (--outs) applies to read_bw") !=
        std::string::npos);
  const char* cm[] = {"conduit-perf", "read_bw", "--perftest", "-R", "-x1.2.3.4", "-o", "4"};
  CHECK(parse_args(7, cm, bad).error.find("drop -o") != std::string::npos);
  const char* junk[] = {"conduit-perf", "read_bw", "--perftest", "-x1.2.3.4", "-o", "x"};
  CHECK_FALSE(parse_args(6, junk, bad).ok);
}

TEST_CASE("perftest's -I (--inline_size): messages up to N bytes inline, at most 96") {
  // perftest's bandwidth default: nothing inline.
  auto o = perftest_options({"send_bw", "h", "--perftest", "-x", "198.18.0.1", "-s", "2"});
  CHECK(o.inline_size == 0);
  CHECK_FALSE(perftest_inline(o, 2));
  o = perftest_options({"write_lat", "h", "--perftest", "-x", "198.18.0.1", "-I", "64"});
  CHECK(o.inline_size == 64);
  CHECK(perftest_inline(o, 1));
  CHECK(perftest_inline(o, 64));
  CHECK_FALSE(perftest_inline(o, 65));
  // Above what conduit copies into a work request: up to 96 bytes inline, with a note.
  PerfOptions big;
  const char* args[] = {"conduit-perf", "send_lat", "--perftest", "-x1.2.3.4", "--inline_size=220"};
  const ParseResult r = parse_args(5, args, big);
  REQUIRE(r.ok);
  CHECK(perftest_inline(big, kConduitMaxInline));
  CHECK_FALSE(perftest_inline(big, kConduitMaxInline + 1));
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0].find("--inline_size 220: conduit copies at most 96 bytes") != std::string::npos);
  // perftest's range is 0..912 (MAX_INLINE); READs and atomics have no inline data.
  PerfOptions bad;
  const char* over[] = {"conduit-perf", "send_bw", "--perftest", "-x1.2.3.4", "-I", "913"};
  CHECK(parse_args(6, over, bad).error.find("from 0 to 912") != std::string::npos);
  const char* read[] = {"conduit-perf", "read_bw", "--perftest", "-x1.2.3.4", "-I", "64"};
  CHECK(parse_args(6, read, bad).error.find("SEND and WRITE tests") != std::string::npos);
}

TEST_CASE("perftest's -D window: D/4 margins at each end, or -f (--margin) seconds") {
  constexpr uint64_t s = 1'000'000'000ull;
  auto o = perftest_options({"write_bw", "h", "--perftest", "-x", "198.18.0.1", "-D", "10"});
  CHECK(perftest_margin_s(o) == 2);  // perftest's duration / 4, whole seconds
  DurationWindow w = perftest_duration_window(100, 10, perftest_margin_s(o));
  CHECK(w.sample_begin_ns == 100 + 2 * s);
  CHECK(w.sample_end_ns == 100 + 8 * s);
  CHECK(w.end_ns == 100 + 10 * s);
  o = perftest_options({"write_bw", "h", "--perftest", "-x", "198.18.0.1", "-D", "10", "-f", "1"});
  CHECK(perftest_margin_s(o) == 1);
  w = perftest_duration_window(0, 10, perftest_margin_s(o));
  CHECK(w.sample_begin_ns == 1 * s);
  CHECK(w.sample_end_ns == 9 * s);
  o = perftest_options(
      {"send_lat", "h", "--perftest", "-x", "198.18.0.1", "-D", "3", "--margin=0"});
  CHECK(perftest_margin_s(o) == 0);
  CHECK(perftest_duration_window(0, 3, 0).sample_end_ns == 3 * s);
  // perftest: "please check that DURATION > 2*MARGIN".
  PerfOptions bad;
  const char* wide[] = {"conduit-perf", "write_bw", "--perftest", "-x1.2.3.4",
                        "-D",           "4",        "-f",         "2"};
  CHECK(parse_args(8, wide, bad).error.find("DURATION > 2*MARGIN") != std::string::npos);
  // Without -D it means nothing: a note.
  PerfOptions n;
  const char* no_d[] = {"conduit-perf", "write_bw", "--perftest", "-x1.2.3.4", "-f", "2"};
  const ParseResult r = parse_args(6, no_d, n);
  REQUIRE(r.ok);
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0].find("-f (--margin) ignored") != std::string::npos);
}

TEST_CASE("perftest's -l (--post_list): sends chained L at a time, within the window") {
  auto o =
      perftest_options({"write_bw", "h", "--perftest", "-x", "198.18.0.1", "-l", "4", "-n", "20"});
  CHECK(o.post_list == 4);
  // Room for a whole list: 4; not: none; the window caps the list (lists of 8 in a window of 4).
  CHECK(perftest_next_list(0, 20, 0, 128, 4, false) == 4);
  CHECK(perftest_next_list(16, 20, 124, 128, 4, false) == 4);
  CHECK(perftest_next_list(16, 20, 125, 128, 4, false) == 0);
  CHECK(perftest_next_list(20, 20, 0, 128, 4, false) == 0);  // all -n posted
  CHECK(perftest_next_list(0, 20, 0, 4, 8, false) == 4);
  CHECK(perftest_next_list(0, 20, 1, 4, 8, false) == 0);
  CHECK(perftest_next_list(18, 20, 0, 128, 4, false) == 2);  // the last ones (-n not L's multiple)
  CHECK(perftest_next_list(1000, 0, 0, 128, 4, true) == 4);  // -D: no end
  CHECK(perftest_next_list(5, 20, 3, 16, 1, false) == 1);    // -l 1: one at a time, as before
  // perftest: "Number of iterations must be a multiple of post list size" (5000 by default).
  PerfOptions bad;
  const char* odd[] = {"conduit-perf", "send_bw", "--perftest", "-x1.2.3.4", "-l", "3"};
  CHECK(parse_args(6, odd, bad).error.find("not a multiple of it") != std::string::npos);
  CHECK(perftest_options({"send_bw", "--perftest", "-x", "1.2.3.4", "-l", "8"}).post_list == 8);
  CHECK(perftest_options({"send_bw", "--perftest", "-x", "1.2.3.4", "-l", "3", "-D", "4"})
            .post_list == 3);
  // Latency tests: perftest refuses a list ("Post list is supported in BW tests only", exit 1),
  // with or without --perftest, on every latency test; -l 1 is no list and is taken.
  for (const char* t : {"send_lat", "write_lat", "read_lat", "atomic_lat"}) {
    for (bool perftest : {true, false}) {
      PerfOptions lat;
      std::vector<const char*> a = {"conduit-perf", t, "-l", "4"};
      if (perftest) a.insert(a.end(), {"--perftest", "-x1.2.3.4"});
      const ParseResult r = parse_args(static_cast<int>(a.size()), a.data(), lat);
      INFO(t << (perftest ? " --perftest" : ""));
      CHECK_FALSE(r.ok);
      // (atomic_lat runs with --perftest only, which it says first.)
      if (perftest || std::string(t) != "atomic_lat") {
        CHECK(r.error.find("Post list is supported in BW tests only") != std::string::npos);
      }
    }
    PerfOptions one;
    const char* l1[] = {"conduit-perf", t, "--perftest", "-x1.2.3.4", "--post_list=1"};
    const ParseResult r1 = parse_args(5, l1, one);
    CHECK(r1.ok);
    CHECK(r1.notes.empty());
    CHECK(one.post_list == 1);
  }
}

TEST_CASE("--dont_xchg_versions: the report's iterations in 4 bytes, as perftest sends them") {
  auto o =
      perftest_options({"write_bw", "h", "--perftest", "-x", "198.18.0.1", "--dont_xchg_versions"});
  CHECK(o.dont_xchg_versions);
  PerfOptions bad;
  const char* own[] = {"conduit-perf", "write_bw", "--dont_xchg_versions"};
  CHECK(parse_args(3, own, bad).error.find("runs with --perftest") != std::string::npos);

  PerftestReport r;
  r.size_bytes = 65536;
  r.iterations = 5000;
  r.bw_peak = 0;
  r.bw_avg = 1234.5;
  r.msg_rate_mpps = 0.0197;
  // Versions exchanged: 5 messages of 8 bytes, the arrays perftest_report_messages() gives.
  const auto v = perftest_report_steps(r, true);
  REQUIRE(v.size() == 5);
  const auto a = perftest_report_messages(r);
  for (size_t i = 0; i < 5; ++i) {
    CHECK(std::vector<uint8_t>(a[i].begin(), a[i].end()) == v[i]);
  }
  // Not exchanged: perftest's remote version is 0 (< 5.33): hton_int, 4 bytes.
  const auto n = perftest_report_steps(r, false);
  REQUIRE(n.size() == 5);
  CHECK(n[0].size() == 8);
  CHECK(n[1] == std::vector<uint8_t>{0x00, 0x00, 0x13, 0x88});
  CHECK(n[2].size() == 8);
  PerftestReport back;
  REQUIRE(parse_perftest_report_steps(n, false, back));
  CHECK(back.iterations == 5000);
  CHECK(back.size_bytes == 65536);
  CHECK(back.bw_avg == 1234.5);
  REQUIRE(parse_perftest_report_steps(v, true, back));
  CHECK(back.iterations == 5000);
  // The wrong width is malformed, not misread.
  CHECK_FALSE(parse_perftest_report_steps(n, true, back));
  CHECK_FALSE(parse_perftest_report_steps(v, false, back));
  CHECK(conduit::perf::usage_text().find("--dont_xchg_versions") != std::string::npos);
}

TEST_CASE("--report-both: each direction's line after the sum, as perftest's -b") {
  auto o =
      perftest_options({"write_bw", "h", "--perftest", "-x", "198.18.0.1", "-b", "--report-both"});
  CHECK(o.report_both);
  PerftestReport mine, theirs;
  mine.size_bytes = theirs.size_bytes = 65536;
  mine.iterations = theirs.iterations = 5000;
  mine.bw_avg = 1000;
  theirs.bw_avg = 900;
  const std::string t = perftest_report_both_text(mine, theirs, false, "----\n");
  // perftest: printf(RESULT_LINE); printf("\n Local results: \n"); printf(RESULT_LINE); ...
  const std::string want = "----\n\n Local results: \n----\n" + perftest_bw_header(false) + "\n" +
                           perftest_bw_line(mine, false) + "\n----\n\n Remote results: \n----\n" +
                           perftest_bw_header(false) + "\n" + perftest_bw_line(theirs, false) +
                           "\n";
  CHECK(t == want);
  CHECK(t.find("1000.00") != std::string::npos);
  CHECK(t.find("900.00") != std::string::npos);
  CHECK(perftest_report_both_text(mine, theirs, true, "-\n").find("BW peak[Gb/sec]") !=
        std::string::npos);
  // Without --perftest our own -b report is the sum: a note.
  PerfOptions own;
  const char* args[] = {"conduit-perf", "write_bw", "-b", "--report-both"};
  const ParseResult r = parse_args(4, args, own);
  REQUIRE(r.ok);
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0].find("--report-both ignored without --perftest") != std::string::npos);
}

TEST_CASE("--report-both: one size only (not -a), and with --output its numbers") {
  // perftest 4.5 (Debian's ib_write_bw, ib_read_bw, ib_send_bw): the Local/Remote block is in
  // main()'s single-size branch (RUN_REGULAR) only; its -a loop prints each size's sum.
  CHECK(perftest_report_both_printed(perftest_options(
      {"write_bw", "h", "--perftest", "-x", "198.18.0.1", "-b", "--report-both"})));
  CHECK(perftest_report_both_printed(perftest_options(
      {"send_bw", "--perftest", "-x", "198.18.0.1", "-b", "--report-both", "-s", "4096"})));
  CHECK_FALSE(perftest_report_both_printed(perftest_options(
      {"write_bw", "h", "--perftest", "-x", "198.18.0.1", "-b", "--report-both", "-a"})));
  CHECK_FALSE(perftest_report_both_printed(perftest_options(
      {"send_bw", "--perftest", "-x", "198.18.0.1", "-b", "--report-both", "-a"})));
  CHECK_FALSE(perftest_report_both_printed(
      perftest_options({"write_bw", "h", "--perftest", "-x", "198.18.0.1", "--report-both"})));
  CHECK_FALSE(perftest_report_both_printed(
      perftest_options({"write_bw", "h", "--perftest", "-x", "198.18.0.1", "-b"})));
  // --output: perftest's printf()s of the rules, titles and headers do not look at it; each
  // line is print_full_bw_report's number ("%lf"), without the CPU column (full verbosity
  // only), the header with its CPU_Util[%] title.
  PerftestReport mine, theirs;
  mine.size_bytes = theirs.size_bytes = 65536;
  mine.iterations = theirs.iterations = 5000;
  mine.bw_avg = 1000;
  mine.msg_rate_mpps = 0.016;
  theirs.bw_avg = 900;
  theirs.msg_rate_mpps = 0.0144;
  const std::string bw =
      perftest_report_both_text(mine, theirs, false, "----\n", -1, PerftestOutput::kBandwidth);
  CHECK(bw == "----\n\n Local results: \n----\n" + perftest_bw_header(false) +
                  "\n1000.000000\n----\n\n Remote results: \n----\n" + perftest_bw_header(false) +
                  "\n900.000000\n");
  const std::string mr =
      perftest_report_both_text(mine, theirs, true, "-\n", 12.5, PerftestOutput::kMessageRate);
  CHECK(mr == "-\n\n Local results: \n-\n" + perftest_bw_header(true) +
                  "    CPU_Util[%]\n0.016000\n-\n\n Remote results: \n-\n" +
                  perftest_bw_header(true) + "    CPU_Util[%]\n0.014400\n");
  // Full output: unchanged (the lines, with the CPU column).
  CHECK(perftest_report_both_text(mine, theirs, false, "-\n", 12.5, PerftestOutput::kFull) ==
        perftest_report_both_text(mine, theirs, false, "-\n", 12.5));
  CHECK(perftest_report_both_text(mine, theirs, false, "-\n", 12.5).find("\t    12.50\n") !=
        std::string::npos);
}

TEST_CASE("--cpu_util: perftest's CPU_Util[%] column on the bandwidth tests' -D lines") {
  auto o = perftest_options(
      {"write_bw", "h", "--perftest", "-x", "198.18.0.1", "-D", "4", "--cpu_util"});
  CHECK(o.cpu_util);
  // /proc/stat's first line: perftest takes the 1st number (user) and the 4th (idle).
  CpuTimes a, b;
  REQUIRE(parse_proc_stat_cpu("cpu  100 5 30 900 7 0 2 0 0 0\n", a));
  CHECK(a.user == 100);
  CHECK(a.idle == 900);
  REQUIRE(parse_proc_stat_cpu("cpu  130 5 40 970 7 0 2 0 0 0", b));
  CHECK(perftest_cpu_util(a, b) == Approx(30.0));  // 30 / (30 + 70)
  CHECK(perftest_cpu_util(a, a) == 0.0);
  CHECK_FALSE(parse_proc_stat_cpu("cpu0 1 2 3 4", a));
  CHECK_FALSE(parse_proc_stat_cpu("cpu  1 2 x", a));
  // RESULT_EXT_CPU_UTIL and REPORT_EXT_CPU_UTIL.
  CHECK(perftest_cpu_util_header(true) == "    CPU_Util[%]");
  CHECK(perftest_cpu_util_column(true, 30.0) == "\t    30.00");
  CHECK(perftest_cpu_util_header(false).empty());
  CHECK(perftest_cpu_util_column(false, 30.0).empty());
  PerftestReport r;
  r.size_bytes = 64;
  r.iterations = 100;
  CHECK(perftest_report_both_text(r, r, false, "-\n", 12.5).find("CPU_Util[%]\n") !=
        std::string::npos);
  // perftest: " CPU Utilization works only with Duration mode." A note each, and no column.
  for (std::vector<const char*> args :
       {std::vector<const char*>{"conduit-perf", "write_bw", "--perftest", "-x1.2.3.4",
                                 "--cpu_util"},
        std::vector<const char*>{"conduit-perf", "send_lat", "--perftest", "-x1.2.3.4",
                                 "--cpu_util"},
        std::vector<const char*>{"conduit-perf", "write_bw", "-D", "4", "--cpu_util"}}) {
    PerfOptions n;
    const ParseResult pr = parse_args(static_cast<int>(args.size()), args.data(), n);
    REQUIRE(pr.ok);
    CHECK_FALSE(n.cpu_util);
    REQUIRE(pr.notes.size() == 1);
    CHECK(pr.notes[0].find("--cpu_util ignored") != std::string::npos);
  }
}

TEST_CASE("--cpu_util on the latency tests' -D lines, as perftest 4.5's") {
  // perftest 4.5 (Debian's ib_write_lat): force_dependecies enables the measurement for any -D
  // run, catch_alarm reads /proc/stat where the sample begins and ends on every test, and
  // print_report_lat_duration prints REPORT_EXT_CPU_UTIL after the tps average; main() prints
  // RESULT_EXT_CPU_UTIL after RESULT_FMT_LAT_DUR.
  for (const char* t : {"write_lat", "send_lat", "read_lat", "atomic_lat"}) {
    PerfOptions o;
    const char* args[] = {"conduit-perf", t,    "h", "--perftest",
                          "-x1.2.3.4",    "-D", "4", "--cpu_util"};
    const ParseResult r = parse_args(8, args, o);
    INFO(t << ": " << r.error);
    REQUIRE(r.ok);
    CHECK(o.cpu_util);
    CHECK(r.notes.empty());
  }
  CHECK(perftest_lat_duration_header(true) ==
        " #bytes        #iterations       t_avg[usec]    tps average    CPU_Util[%]");
  CHECK(perftest_lat_duration_header(false) == lat_duration_header());
  LatDurationResult d;
  d.size_bytes = 2;
  d.iterations = 300000;
  d.avg_us = 3.33;
  d.tps = 150150.15;
  CHECK(perftest_lat_duration_line(d, true, 42.5) == lat_duration_line(d) + "\t    42.50");
  CHECK(perftest_lat_duration_line(d, false, 42.5) == lat_duration_line(d));
  // --out_json: "CPU_util: %.2f," after the numbers (write_report_lat_duration_to_file).
  const auto o = perftest_options(
      {"write_lat", "h", "--perftest", "-x", "198.18.0.1", "-D", "4", "--cpu_util", "--out_json"});
  CHECK(perftest_json_lat_duration(o, PerftestRunValues{}, d, 42.5).find("CPU_util: 42.50,\n") !=
        std::string::npos);
}

TEST_CASE("perftest's latency report lines, byte for byte") {
  // RESULT_FMT_LAT (with its trailing space) and REPORT_FMT_LAT (with its tabs).
  CHECK(perftest_lat_header() ==
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
        "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ");
  conduit::perf::LatResult r;
  r.size_bytes = 2;
  r.iterations = 1000;
  r.min_us = 1.5;
  r.max_us = 20.25;
  r.typical_us = 2;
  r.avg_us = 2.25;
  r.stdev_us = 0.5;
  r.p99_us = 4;
  r.p999_us = 19;
  CHECK(perftest_lat_line(r) ==
        " 2       1000          1.50           20.25        2.00     \t       2.25        \t0.50   "
        "\t\t4.00    \t\t19.00  ");
}

TEST_CASE("perftest's CQ moderation: -Q, 100 by default, 1 above 8 KiB, -l's size with -l") {
  auto cq = [](std::vector<const char*> extra) {
    std::vector<const char*> a = {"write_bw", "h", "--perftest", "-x", "198.18.0.1"};
    a.insert(a.end(), extra.begin(), extra.end());
    return perftest_cq_mod(perftest_options(a));
  };
  // perftest 4.5's force_dependecies: DEF_CQ_MOD 100, but every send signaled for messages of
  // more than 8192 bytes (its default 65536 among them) unless -Q, -a or -e say otherwise.
  CHECK(cq({}) == 1);
  CHECK(cq({"-s", "8192"}) == 100);
  CHECK(cq({"-s", "8193"}) == 1);
  CHECK(cq({"-s", "64", "-Q", "16"}) == 16);
  CHECK(cq({"-Q", "16"}) == 16);  // -Q given: taken for large messages too
  CHECK(cq({"-a"}) == 100);
  // At most the send queue: -t, and without -D at most -n.
  CHECK(cq({"-s", "64", "-t", "32"}) == 32);
  CHECK(cq({"-s", "64", "-n", "40"}) == 40);
  CHECK(cq({"-s", "64", "-D", "4"}) == 100);
  // -l L without -Q: L (perftest: "CQ moderation will be the size of the post list").
  CHECK(cq({"-l", "8"}) == 8);
  CHECK(cq({"-s", "64", "-l", "8", "-Q", "4"}) == 4);
  // The latency tests signal every message.
  CHECK(perftest_cq_mod(perftest_options(
            {"send_lat", "h", "--perftest", "-x", "198.18.0.1", "-s", "64"})) == 1);

  // Within our window, and (with -l) a divisor of the list as cut to the window.
  CHECK(perftest_session_cq_mod(100, 1, 128) == 100);
  CHECK(perftest_session_cq_mod(100, 1, 16) == 16);
  CHECK(perftest_session_cq_mod(8, 8, 128) == 8);
  CHECK(perftest_session_cq_mod(4, 8, 128) == 4);
  CHECK(perftest_session_cq_mod(32, 32, 12) == 12);
  CHECK(perftest_session_cq_mod(8, 32, 12) == 4);
  CHECK(perftest_session_cq_mod(0, 1, 0) == 1);
}

TEST_CASE("perftest's signaled sends: every cq_mod-th, and the last of -n") {
  // -Q 4, -n 10: sends 3, 7 and 9 carry SIGNALED (run_iter_bw); each completion stands for the
  // sends since the previous one.
  std::vector<uint64_t> signaled;
  for (uint64_t k = 0; k < 10; ++k) {
    if (perftest_signaled(k, 10, 4, false)) signaled.push_back(k);
  }
  CHECK(signaled == std::vector<uint64_t>{3, 7, 9});
  // -D: no last one.
  CHECK_FALSE(perftest_signaled(9, 0, 4, true));
  CHECK(perftest_signaled(11, 0, 4, true));
  // -Q 1: all of them.
  for (uint64_t k = 0; k < 5; ++k) CHECK(perftest_signaled(k, 5, 1, false));
  // -l 8 (cq_mod 8): lists posted from 0, 8, ... end on their signaled send, only that one.
  for (uint64_t k = 0; k < 16; ++k) CHECK(perftest_signaled(k, 16, 8, false) == (k % 8 == 7));
}

TEST_CASE("perftest's -Q: taken by the bandwidth tests, refused where perftest refuses it") {
  PerfOptions o;
  const char* q[] = {"conduit-perf", "write_bw", "h", "--perftest", "-x1.2.3.4", "-Q", "8"};
  const ParseResult r = parse_args(7, q, o);
  REQUIRE(r.ok);
  CHECK(o.cq_mod == 8);
  CHECK(r.notes.empty());
  // perftest: "Post list size must be a multiple of CQ moderation", and 1 .. 1024.
  const char* bad_list[] = {"conduit-perf", "write_bw", "h",  "--perftest", "-x1.2.3.4",
                            "-l",           "4",        "-Q", "8"};
  CHECK(
      parse_args(9, bad_list, o).error.find("Post list size must be a multiple of CQ moderation") !=
      std::string::npos);
  const char* big[] = {"conduit-perf", "write_bw", "h", "--perftest", "-x1.2.3.4", "-Q", "2048"};
  CHECK(parse_args(7, big, o).error.find("between 1 and 1024") != std::string::npos);
  // Latency tests: a note, every message signaled.
  const char* lat[] = {"conduit-perf", "send_lat", "h", "--perftest", "-x1.2.3.4", "-Q", "8"};
  const ParseResult l = parse_args(7, lat, o);
  REQUIRE(l.ok);
  CHECK(o.cq_mod == 0);
  REQUIRE(l.notes.size() == 1);
  CHECK(l.notes[0].find("a latency test signals every message") != std::string::npos);
}

TEST_CASE("--out_json: perftest 4.5's file, byte for byte, for bandwidth and latency tests") {
  // Debian's ib_write_bw 4.5-0.17 writes it with dprintf(): "{", write_test_info_to_file's
  // "test_info: {" .. "},", "results: {" .. "},", "}". Bare keys, trailing commas, only the
  // device quoted; "TX_depth :" has its space.
  auto o = perftest_options({"write_bw", "h", "--perftest", "-x", "198.18.0.1", "--out_json"});
  PerftestRunValues v;
  v.mtu = 1024;
  v.tx_depth = 128;
  v.rx_depth = 256;
  v.cq_mod = 100;
  PerftestReport r;
  r.size_bytes = 65536;
  r.iterations = 5000;
  r.bw_peak = 11234.56;
  r.bw_avg = 11000.5;
  r.msg_rate_mpps = 0.176008;
  // The whole file, spelled out: the builders json_test_info() and json_file() must give
  // these very bytes too (checked below), so that a slip in them cannot hide one in ours.
  const std::string write_bw_file =
      "{\n"
      "test_info: {\n"
      "test: RDMA_Write_BW_Test,\n"
      "Dual_port: OFF,\n"
      "Device: \"conduitd\",\n"
      "Number_of_qps: 1,\n"
      "Transport_type: IB,\n"
      "Connection_type: RC,\n"
      "Using_SRQ: OFF,\n"
      "PCIe_relax_order: ON,\n"
      "ibv_wr_API: OFF,\n"
      "TX_depth : 128,\n"
      "CQ_Moderation: 100,\n"
      "Mtu: 1024,\n"
      "Link_type: Ethernet,\n"
      "GID_index: 0,\n"
      "Max_inline_data: 0,\n"
      "rdma_cm_QPs: OFF,\n"
      "Data_ex_method: Ethernet,\n"
      "},\n"
      "results: {\n"
      "MsgSize: 65536,\n"
      "n_iterations: 5000,\n"
      "BW_peak: 11234.56,\n"
      "BW_average: 11000.50,\n"
      "MsgRate: 0.176008,\n"
      "},\n"
      "}\n";
  CHECK(perftest_json_bw(o, v, r) == write_bw_file);
  const std::string info =
      json_test_info("RDMA_Write_BW_Test", "TX_depth : 128,\nCQ_Moderation: 100,\n", 1024, 0);
  CHECK(json_file(info,
                  "MsgSize: 65536,\nn_iterations: 5000,\nBW_peak: 11234.56,\n"
                  "BW_average: 11000.50,\nMsgRate: 0.176008,\n") == write_bw_file);
  CHECK(perftest_json_test_info(o, v) == info);
  // --cpu_util: after the numbers; with --output too.
  CHECK(perftest_json_bw(o, v, r, 37.5).find("MsgRate: 0.176008,\nCPU_util: 37.50,\n},\n}\n") !=
        std::string::npos);
  o.output = PerftestOutput::kBandwidth;
  CHECK(perftest_json_bw(o, v, r, 37.5)
            .find("results: {\nbw_avg: 11000.500000,\nCPU_util: "
                  "37.50,\n},\n}\n") != std::string::npos);
  o.output = PerftestOutput::kMessageRate;
  CHECK(perftest_json_bw(o, v, r).find("results: {\nmsgRate_avg: 0.176008,\n},\n}\n") !=
        std::string::npos);
  // Gb/sec below 0.1: 6 decimals, as the line (REPORT_FMT_EXT_JSON).
  o = perftest_options(
      {"write_bw", "h", "--perftest", "-x", "198.18.0.1", "--out_json", "--report_gbits"});
  r.bw_peak = 0.06;
  r.bw_avg = 0.05;
  CHECK(perftest_json_bw(o, v, r).find("BW_peak: 0.060000,\nBW_average: 0.050000,\n") !=
        std::string::npos);

  // The server of send_lat: RX depth, no TX depth, no CQ moderation; the latency results.
  o = perftest_options({"send_lat", "--perftest", "-x", "198.18.0.1", "--out_json", "-I", "64"});
  v = PerftestRunValues{};
  v.server = true;
  v.mtu = 4096;
  v.tx_depth = 1;
  v.rx_depth = 16;
  v.inline_size = 64;
  const std::string lat_info = json_test_info("Send_Latency_Test", "RX_depth: 16,\n", 4096, 64);
  LatResult l;
  l.size_bytes = 2;
  l.iterations = 1000;
  l.min_us = 1.5;
  l.max_us = 20.25;
  l.typical_us = 2;
  l.avg_us = 2.5;
  l.stdev_us = 0.75;
  l.p99_us = 5;
  l.p999_us = 19;
  CHECK(perftest_json_lat(o, v, l) == json_file(lat_info,
                                                "MsgSize: 2,\n"
                                                "n_iterations: 1000,\n"
                                                "t_min: 1.50,\n"
                                                "t_max: 20.25,\n"
                                                "t_typical: 2.00,\n"
                                                "t_avg: 2.50,\n"
                                                "t_stdev: 0.75,\n"
                                                "percentile_99: 5.00,\n"
                                                "percentile_99.9: 19.00,\n"));
  LatDurationResult d;
  d.size_bytes = 2;
  d.iterations = 12345;
  d.avg_us = 3.25;
  d.tps = 153846.15;
  CHECK(perftest_json_lat_duration(o, v, d) ==
        json_file(lat_info,
                  "MsgSize: 2,\nn_iterations: 12345,\nt_avg: 3.25,\ntps_average: 153846.15,\n"));
  // --output latency: the average alone (print_report_lat's "avg_lat", with its comma;
  // print_report_lat_duration's "t_avg", without).
  o.output = PerftestOutput::kLatency;
  CHECK(perftest_json_lat(o, v, l, 12.5) == json_file(lat_info, "avg_lat: 2.500000,\n"));
  CHECK(perftest_json_lat_duration(o, v, d) == json_file(lat_info, "t_avg: 3.250000\n"));

  // The title's parts, -e, -l, -R, READs' outstanding reads, --disable_pcie_relaxed.
  o = perftest_options({"read_bw", "h", "--perftest", "-x", "198.18.0.1", "-b", "-R", "-e",
                        "--disable_pcie_relaxed"});
  v = PerftestRunValues{};
  v.tx_depth = 64;
  v.cq_mod = 1;
  v.out_reads = 16;
  std::string t = perftest_json_test_info(o, v);
  CHECK(t.find("test: RDMA_Read_Bidirectional_BW_Test,\nTest with events: Using_conduitd_comp0,\n"
               "Dual_port: OFF,\n") != std::string::npos);
  CHECK(t.find("PCIe_relax_order: OFF,\n") != std::string::npos);
  CHECK(
      t.find(
          "GID_index: 0,\nOutstand_reads: 16,\nrdma_cm_QPs: ON,\nData_ex_method: rdma_cm,\n},\n") !=
      std::string::npos);
  CHECK(t.find("Max_inline_data") == std::string::npos);
  o = perftest_options({"write_bw", "h", "--perftest", "-x", "198.18.0.1", "-l", "4", "-q", "2"});
  v.post_list = 4;
  v.cq_mod = 4;
  t = perftest_json_test_info(o, v);
  CHECK(t.find("test: RDMA_Write_Post_List_BW_Test,\n") != std::string::npos);
  CHECK(t.find("Number_of_qps: 2,\n") != std::string::npos);
  CHECK(t.find("TX_depth : 64,\nPost_List: 4,\nCQ_Moderation: 4,\n") != std::string::npos);
  o = perftest_options({"atomic_lat", "h", "--perftest", "-x", "198.18.0.1", "-A", "CMP_AND_SWAP"});
  CHECK(perftest_json_test_info(o, v).find("test: Atomic_CMP_AND_SWAP_Latency_Test,\n") !=
        std::string::npos);
}

TEST_CASE("--recv_post_list: perftest 4.5's Recv Post List line and entry, and lists posted") {
  // Debian's perftest 4.5: " Recv Post List  : %d" after Post List (before RX depth) and
  // "Recv_Post_List: %d," after Post_List, both when it is above 1, on either side.
  auto o = perftest_options(
      {"send_bw", "--perftest", "-x", "198.18.0.1", "--recv_post_list", "8", "-n", "1000"});
  PerftestRunValues v;
  v.server = true;
  v.mtu = 1024;
  v.rx_depth = 512;
  v.cq_mod = 100;
  std::string t = perftest_test_info(o, v);
  CHECK(t.find(" ibv_wr* API     : OFF\n Recv Post List  : 8\n RX depth        : 512\n") !=
        std::string::npos);
  std::string j = perftest_json_test_info(o, v);
  CHECK(j.find("ibv_wr_API: OFF,\nRecv_Post_List: 8,\nRX_depth: 512,\n") != std::string::npos);
  o = perftest_options(
      {"write_bw", "h", "--perftest", "-x", "198.18.0.1", "-l", "4", "--recv_post_list", "2"});
  v = PerftestRunValues{};
  v.tx_depth = 128;
  v.post_list = 4;
  v.cq_mod = 4;
  t = perftest_test_info(o, v);
  CHECK(t.find(" TX depth        : 128\n Post List       : 4\n Recv Post List  : 2\n"
               " CQ Moderation   : 4\n") != std::string::npos);
  j = perftest_json_test_info(o, v);
  CHECK(j.find("TX_depth : 128,\nPost_List: 4,\nRecv_Post_List: 2,\nCQ_Moderation: 4,\n") !=
        std::string::npos);
  // 1 (the default): neither.
  o = perftest_options({"send_bw", "--perftest", "-x", "198.18.0.1", "--recv_post_list", "1"});
  CHECK(perftest_test_info(o, v).find("Recv Post List") == std::string::npos);
  CHECK(perftest_json_test_info(o, v).find("Recv_Post_List") == std::string::npos);
  // The receives posted again: a list of N once N have completed, the last ones of -n as they
  // are; one per completion without the option; -D has no end.
  CHECK(perftest_recv_list_to_post(1, 512, 1000, 8, false) == 0);
  CHECK(perftest_recv_list_to_post(7, 512, 1000, 8, false) == 0);
  CHECK(perftest_recv_list_to_post(8, 512, 1000, 8, false) == 8);
  CHECK(perftest_recv_list_to_post(8, 996, 1000, 8, false) == 4);  // 4 left to post
  CHECK(perftest_recv_list_to_post(3, 997, 1000, 8, false) == 3);
  CHECK(perftest_recv_list_to_post(2, 997, 1000, 8, false) == 0);
  CHECK(perftest_recv_list_to_post(8, 1000, 1000, 8, false) == 0);
  CHECK(perftest_recv_list_to_post(8, 5000, 0, 8, true) == 8);
  CHECK(perftest_recv_list_to_post(7, 5000, 0, 8, true) == 0);
  CHECK(perftest_recv_list_to_post(1, 10, 1000, 1, false) == 1);
  CHECK(perftest_recv_list_to_post(1, 10, 1000, 0, false) == 1);
  CHECK(perftest_recv_list_to_post(0, 10, 1000, 1, false) == 0);
  CHECK(perftest_recv_list_to_post(1, 1000, 1000, 1, false) == 0);
}

TEST_CASE("--out_json's file is written as perftest's open_file_write: 0600, truncated") {
  const std::string path = "/tmp/conduit-perf-unit-" + std::to_string(::getpid()) + ".json";
  REQUIRE(perftest_write_json_file(path, "a longer first report\n"));
  REQUIRE(perftest_write_json_file(path, "{\nlast\n}\n"));  // the last one stays
  std::ifstream in(path);
  const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(got == "{\nlast\n}\n");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  ::unlink(path.c_str());
  // perftest prints "failed to open PATH" and runs on: the caller's to say.
  CHECK_FALSE(perftest_write_json_file("/nonexistent-dir-conduit/x.json", "x"));
}

TEST_CASE("--perftest's header: perftest 4.5's test info, field by field, with our values") {
  const std::string rule(87, '-');
  CHECK(std::string(kPerftestResultLine) == rule + "\n");  // perftest's RESULT_LINE
  // ib_send_bw's client: TX depth, no RX depth; -l: "Post List" in the title and its line.
  auto o = perftest_options(
      {"send_bw", "h", "--perftest", "-x", "198.18.0.1", "-q", "2", "-l", "4", "-n", "1000"});
  PerftestRunValues v;
  v.mtu = 1024;
  v.tx_depth = 128;
  v.rx_depth = 256;
  v.cq_mod = 4;
  v.post_list = 4;
  v.peer_version = "6.06";
  CHECK(perftest_test_info(o, v) == rule +
                                        "\n"
                                        "                    Send Post List BW Test\n"
                                        " Dual-port       : OFF\t\tDevice         : conduitd\n"
                                        " Number of qps   : 2\t\tTransport type : IB\n"
                                        " Connection type : RC\t\tUsing SRQ      : OFF\n"
                                        " PCIe relax order: ON\n"
                                        " ibv_wr* API     : OFF\n"
                                        " TX depth        : 128\n"
                                        " Post List       : 4\n"
                                        " CQ Moderation   : 4\n"
                                        " Mtu             : 1024[B]\n"
                                        " Link type       : Ethernet\n"
                                        " GID index       : 0\n"
                                        " Max inline data : 0[B]\n"
                                        " rdma_cm QPs\t : OFF\n"
                                        " Data ex. method : Ethernet\n"
                                        " Iterations      : 1000\n"
                                        " Peer version    : 6.06\n" +
                                        rule + "\n");
  // Its server: RX depth (SEND), no TX depth.
  o = perftest_options({"send_bw", "--perftest", "-x", "198.18.0.1", "-I", "64"});
  v = PerftestRunValues{};
  v.server = true;
  v.mtu = 4096;
  v.tx_depth = 128;
  v.rx_depth = 256;
  v.cq_mod = 100;
  v.inline_size = 64;
  v.peer_version = "6.06";
  std::string info = perftest_test_info(o, v);
  CHECK(info.find("                    Send BW Test\n") != std::string::npos);
  CHECK(info.find(" RX depth        : 256\n CQ Moderation   : 100\n Mtu             : 4096[B]\n") !=
        std::string::npos);
  CHECK(info.find("TX depth") == std::string::npos);
  CHECK(info.find("Post List") == std::string::npos);
  CHECK(info.find(" Max inline data : 64[B]\n") != std::string::npos);
  CHECK(info.find(" Iterations      : 5000\n") != std::string::npos);
  // Debian's perftest 4.5 (built with libpci): relaxed ordering ON unless
  // --disable_pcie_relaxed; the GID index on RoCE, after the link type, on every side and test.
  CHECK(info.find(" PCIe relax order: ON\n ibv_wr* API     : OFF\n") != std::string::npos);
  CHECK(info.find(" Link type       : Ethernet\n GID index       : 0\n Max inline data") !=
        std::string::npos);
  o = perftest_options({"send_bw", "--perftest", "-x", "198.18.0.1", "--disable_pcie_relaxed"});
  CHECK(o.disable_pcie_relaxed);
  info = perftest_test_info(o, v);
  CHECK(info.find(" PCIe relax order: OFF\n ibv_wr* API     : OFF\n") != std::string::npos);
  CHECK(info.find("Unsupported") == std::string::npos);
  // write_bw -b -D: "Bidirectional", TX depth on both sides, no RX depth (not SEND).
  o = perftest_options({"write_bw", "--perftest", "-x", "198.18.0.1", "-b", "-D", "4"});
  v.server = true;
  info = perftest_test_info(o, v);
  CHECK(info.find("                    RDMA_Write Bidirectional BW Test\n") != std::string::npos);
  CHECK(info.find(" TX depth        : 128\n CQ Moderation") != std::string::npos);
  CHECK(info.find("RX depth") == std::string::npos);
  CHECK(info.find(" Duration        : 4[sec]\n") != std::string::npos);
  // Latency: no CQ moderation line; READs and atomics give their outstanding reads instead
  // of the inline size; -R: rdma_cm, in both lines; the version not exchanged.
  o = perftest_options({"read_lat", "h", "--perftest", "-R", "-x", "198.18.0.1"});
  v = PerftestRunValues{};
  v.tx_depth = 1;
  v.out_reads = 16;
  info = perftest_test_info(o, v);
  CHECK(info.find("                    RDMA_Read Latency Test\n") != std::string::npos);
  CHECK(info.find("CQ Moderation") == std::string::npos);
  CHECK(info.find(" TX depth        : 1\n Mtu") != std::string::npos);
  CHECK(info.find(" Link type       : Ethernet\n GID index       : 0\n Outstand reads  : 16\n "
                  "rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n") != std::string::npos);
  CHECK(info.find("Max inline") == std::string::npos);
  CHECK(info.find(" Peer version    : not exchanged") == std::string::npos);  // it was
  o = perftest_options({"atomic_bw", "h", "--perftest", "-x", "198.18.0.1", "-A", "CMP_AND_SWAP",
                        "--dont_xchg_versions"});
  info = perftest_test_info(o, v);
  CHECK(info.find("                    Atomic CMP_AND_SWAP BW Test\n") != std::string::npos);
  CHECK(info.find(" Peer version    : not exchanged\n") != std::string::npos);
  o = perftest_options({"atomic_lat", "h", "--perftest", "-x", "198.18.0.1"});
  CHECK(perftest_test_info(o, v).find("                    Atomic FETCH_AND_ADD Latency Test\n") !=
        std::string::npos);
}

TEST_CASE(
    "two conduit-perf sides refuse different -s/-a, -n/-D or -q; a perftest peer sends none") {
  // perftest 4.5 exchanges no -s, -n or -q (version, cycle buffer, cache line, MTU, records):
  // it runs on, and fails or hangs later. conduit-perf's own are in the version message after
  // its NUL, which perftest reads as a C string (atof).
  const auto shape = [](std::vector<const char*> a) {
    return perftest_run_shape(perftest_options(a));
  };
  const PerftestRunShape client =
      shape({"send_bw", "h", "--perftest", "-x", "198.18.0.1", "-s", "4096", "-q", "4"});
  CHECK(client.qps == 4);
  CHECK(client.size == 4096);
  CHECK_FALSE(client.sweep);
  CHECK_FALSE(client.duration);
  CHECK(client.count == 5000);
  const PerftestVersion m = perftest_version_message(client);
  CHECK(std::string(reinterpret_cast<const char*>(m.data())) == "6.06");  // what perftest reads
  std::string v;
  REQUIRE(parse_perftest_version(m, v));
  CHECK(v == "6.06");
  const auto back = parse_perftest_run_shape(m);
  REQUIRE(back.has_value());
  CHECK(back->qps == 4);
  CHECK(back->size == 4096);
  CHECK(back->count == 5000);
  CHECK_FALSE(back->sweep);
  CHECK_FALSE(back->duration);
  // The largest: -s 1 GiB, -n 10^12, -q 64; -a; -D.
  const PerftestRunShape big = shape({"write_bw", "h", "--perftest", "-x", "1.2.3.4", "-s", "1G",
                                      "-n", "1000000000000", "-q", "64"});
  const auto big_back = parse_perftest_run_shape(perftest_version_message(big));
  REQUIRE(big_back.has_value());
  CHECK(big_back->size == (1ull << 30));
  CHECK(big_back->count == 1'000'000'000'000ull);
  CHECK(big_back->qps == 64);
  const auto sweep_back = parse_perftest_run_shape(
      perftest_version_message(shape({"send_lat", "--perftest", "-x", "1.2.3.4", "-a"})));
  REQUIRE(sweep_back.has_value());
  CHECK(sweep_back->sweep);
  CHECK(sweep_back->count == 1000);
  const auto dur_back = parse_perftest_run_shape(
      perftest_version_message(shape({"write_bw", "--perftest", "-x", "1.2.3.4", "-D", "7"})));
  REQUIRE(dur_back.has_value());
  CHECK(dur_back->duration);
  CHECK(dur_back->count == 7);
  // perftest's own message: nothing to compare.
  CHECK_FALSE(parse_perftest_run_shape(perftest_version_message()).has_value());
  CHECK_FALSE(parse_perftest_run_shape(bytes_of<16>("6.06", 4)).has_value());

  // Alike: nothing to say. Different: each difference, ours and the peer's.
  CHECK(perftest_shape_mismatch(client, client).empty());
  const std::string server_default =
      perftest_shape_mismatch(shape({"send_bw", "--perftest", "-x", "1.2.3.4"}), client);
  CHECK(server_default.find("-s 65536 here, -s 4096 at the peer") != std::string::npos);
  CHECK(server_default.find("-q 1 here, -q 4 at the peer") != std::string::npos);
  CHECK(server_default.find("-n") == std::string::npos);
  const std::string n_d = perftest_shape_mismatch(
      shape({"write_bw", "--perftest", "-x", "1.2.3.4", "-n", "100"}), *dur_back);
  CHECK(n_d.find("-n 100 here, -D 7 at the peer") != std::string::npos);
  const std::string a_s = perftest_shape_mismatch(
      *sweep_back, shape({"send_lat", "h", "--perftest", "-x", "1.2.3.4", "-s", "64"}));
  CHECK(a_s.find("-a here, -s 64 at the peer") != std::string::npos);
}

TEST_CASE(
    "perftest's --output: one number per result, as perftest's bandwidth/message_rate/latency") {
  auto o = perftest_options(
      {"write_bw", "h", "--perftest", "-x", "198.18.0.1", "--output", "bandwidth"});
  CHECK(o.output == PerftestOutput::kBandwidth);
  CHECK(perftest_options({"send_bw", "--perftest", "-x", "1.2.3.4", "--output=message_rate"})
            .output == PerftestOutput::kMessageRate);
  CHECK(perftest_options({"read_lat", "h", "--perftest", "-x", "1.2.3.4", "--outp", "latency"})
            .output == PerftestOutput::kLatency);
  CHECK(perftest_options({"send_bw", "--perftest", "-x", "1.2.3.4"}).output ==
        PerftestOutput::kFull);
  // perftest's refusals, word for word.
  struct Case {
    std::vector<const char*> args;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {{"send_bw", "--perftest", "-x1.2.3.4", "--output=latency"},
            "Output verbosity level for BW can be: bandwidth, message_rate"},
           {{"send_lat", "--perftest", "-x1.2.3.4", "--output=bandwidth"},
            "Output verbosity level for LAT can be: latency"},
           {{"send_lat", "--perftest", "-x1.2.3.4", "--output=message_rate"},
            "Output verbosity level for LAT can be: latency"},
           {{"send_bw", "--perftest", "-x1.2.3.4", "--output=foo"},
            "Invalid verbosity level output flag. Please use bandwidth, latency, message_rate"},
           {{"send_bw", "--output=bandwidth"}, "runs with --perftest"},
       }) {
    std::vector<const char*> a = {"conduit-perf"};
    a.insert(a.end(), c.args.begin(), c.args.end());
    PerfOptions p;
    const ParseResult r = parse_args(static_cast<int>(a.size()), a.data(), p);
    INFO(c.says);
    CHECK_FALSE(r.ok);
    CHECK(r.error.find(c.says) != std::string::npos);
  }
  // The number, printf's %lf: the bandwidth average in the report's unit, or the message rate.
  PerftestReport r;
  r.size_bytes = 65536;
  r.iterations = 5000;
  r.bw_peak = 2000;
  r.bw_avg = 1234.5678;
  r.msg_rate_mpps = 0.019753;
  CHECK(perftest_bw_output(r, PerftestOutput::kBandwidth) == "1234.567800");
  CHECK(perftest_bw_output(r, PerftestOutput::kMessageRate) == "0.019753");
  CHECK(perftest_lat_output(3.25) == "3.250000");
}

TEST_CASE("--perftest's server says it waits for its client, in perftest's words, on stdout") {
  // Scripts wait for this banner before they start the client.
  CHECK(perftest_waiting_banner() ==
        "\n************************************\n"
        "* Waiting for client to connect... *\n"
        "************************************\n");
}

TEST_CASE("--perftest's address lines: perftest 4.5's ctx_print_pingpong_data") {
  QpRecord r;
  r.lid = 0;
  r.qpn = 0x11;
  r.psn = 0x6b3a5b;
  r.rkey = 0x1234;
  r.vaddr = 0x7f0000001000ull;
  r.out_reads = 16;
  r.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 1};
  const std::string gid = " GID: 00:00:00:00:00:00:00:00:00:00:255:255:198:18:00:01\n";
  // SEND: the basics; WRITE: RKey and VAddr; READ: OUT (its out_reads) before them; atomics:
  // the basics (perftest 4.5's switch on the verb has no case for them). The GID's bytes in
  // decimal, as perftest prints them.
  CHECK(perftest_address_lines("local", r, TestKind::kSendBw) ==
        " local address: LID 0000 QPN 0x0011 PSN 0x6b3a5b\n" + gid);
  CHECK(perftest_address_lines("remote", r, TestKind::kWriteLat) ==
        " remote address: LID 0000 QPN 0x0011 PSN 0x6b3a5b RKey 0x001234 VAddr "
        "0x007f0000001000\n" +
            gid);
  CHECK(perftest_address_lines("local", r, TestKind::kReadBw) ==
        " local address: LID 0000 QPN 0x0011 PSN 0x6b3a5b OUT 0x10 RKey 0x001234 VAddr "
        "0x007f0000001000\n" +
            gid);
  CHECK(perftest_address_lines("local", r, TestKind::kAtomicLat) ==
        " local address: LID 0000 QPN 0x0011 PSN 0x6b3a5b\n" + gid);
}

TEST_CASE("--perftest's address lines with -q: every local QP's, then every remote one's") {
  // perftest prints its QPs' records in one loop, the peer's in the next.
  QpRecord a, b, pa, pb;
  a.qpn = 1;
  b.qpn = 2;
  pa.qpn = 3;
  pb.qpn = 4;
  const std::string text = perftest_address_text({a, b}, {pa, pb}, TestKind::kSendBw);
  CHECK(text == perftest_address_lines("local", a, TestKind::kSendBw) +
                    perftest_address_lines("local", b, TestKind::kSendBw) +
                    perftest_address_lines("remote", pa, TestKind::kSendBw) +
                    perftest_address_lines("remote", pb, TestKind::kSendBw));
}

TEST_CASE("--perftest -l without -Q says so on stdout, as perftest's parser does") {
  const std::string said =
      std::string(kPerftestResultLine) +
      "Post List requested - CQ moderation will be the size of the post list\n";
  CHECK(perftest_parser_remarks(
            perftest_options({"write_bw", "h", "--perftest", "-x", "1.2.3.4", "-l", "4"})) == said);
  CHECK(perftest_parser_remarks(perftest_options(
            {"send_bw", "--perftest", "-x", "1.2.3.4", "-l", "4", "-D", "3"})) == said);
  // With -Q, or no list: nothing.
  CHECK(perftest_parser_remarks(perftest_options(
            {"write_bw", "h", "--perftest", "-x", "1.2.3.4", "-l", "4", "-Q", "2"})) == "");
  CHECK(perftest_parser_remarks(perftest_options({"write_bw", "h", "--perftest", "-x", "1.2.3.4"}))
            .empty());
}

TEST_CASE("two conduit-perf sides refuse a different test or -b too; perftest sees \"6.06\"") {
  // send vs write vs read vs atomic, bw vs lat, and -b: in the version message's byte after
  // the NUL, with -n/-D (perftest reads the message as a C string, atof: "6.06").
  const auto message = [](std::vector<const char*> a) {
    return perftest_version_message(perftest_run_shape(perftest_options(a)));
  };
  const auto differ = [&](std::vector<const char*> mine, std::vector<const char*> peer) {
    const auto a = parse_perftest_run_shape(message(mine));
    const auto b = parse_perftest_run_shape(message(peer));
    REQUIRE(a.has_value());
    REQUIRE(b.has_value());
    return perftest_shape_mismatch(*a, *b);
  };
  const char* tests[] = {"send_bw",   "write_bw", "read_bw",   "send_lat",
                         "write_lat", "read_lat", "atomic_bw", "atomic_lat"};
  for (const char* t : tests) {
    const PerftestVersion m = message({t, "--perftest", "-x", "1.2.3.4"});
    CHECK(std::string(reinterpret_cast<const char*>(m.data())) == "6.06");
    for (const char* u : tests) {
      INFO(t << " vs " << u);
      const std::string d = differ({t, "--perftest", "-x", "1.2.3.4", "-s", "8"},
                                   {u, "--perftest", "-x", "1.2.3.4", "-s", "8"});
      if (std::string_view(t) == u) {
        CHECK(d.empty());
      } else {
        CHECK(d.find(std::string(t) + " here, " + u + " at the peer") != std::string::npos);
      }
    }
  }
  // -b on one side only; on both, alike.
  const std::string b = differ({"write_bw", "h", "--perftest", "-x", "1.2.3.4", "-b"},
                               {"write_bw", "--perftest", "-x", "1.2.3.4"});
  CHECK(b == "-b here, no -b at the peer");
  CHECK(differ({"send_bw", "--perftest", "-x", "1.2.3.4"},
               {"send_bw", "h", "--perftest", "-x", "1.2.3.4", "-b"}) ==
        "no -b here, -b at the peer");
  CHECK(differ({"read_bw", "--perftest", "-x", "1.2.3.4", "-b", "-D", "3"},
               {"read_bw", "h", "--perftest", "-x", "1.2.3.4", "-b", "-D", "3"})
            .empty());
  // -D and -b together still say -D.
  CHECK(differ({"write_bw", "--perftest", "-x", "1.2.3.4", "-b", "-D", "3"},
               {"write_bw", "h", "--perftest", "-x", "1.2.3.4", "-b", "-n", "100"}) ==
        "-D 3 here, -n 100 at the peer");
  // An earlier conduit-perf's message ('n' or 'D' there, no test): its -s/-n/-q are still
  // compared, the test and -b not (it says nothing of them).
  PerftestVersion old = message({"send_bw", "h", "--perftest", "-x", "1.2.3.4", "-q", "2"});
  old[5] = 'n';
  const auto old_shape = parse_perftest_run_shape(old);
  REQUIRE(old_shape.has_value());
  const auto mine =
      parse_perftest_run_shape(message({"write_bw", "--perftest", "-x", "1.2.3.4", "-b"}));
  REQUIRE(mine.has_value());
  CHECK(perftest_shape_mismatch(*mine, *old_shape) == "-q 1 here, -q 2 at the peer");
  old[5] = 'D';
  CHECK(parse_perftest_run_shape(old).has_value());
  old[5] = 'x';
  CHECK_FALSE(parse_perftest_run_shape(old).has_value());
}

TEST_CASE("--perftest's header: -e's events line after the title, -R's server banner last") {
  // perftest 4.5's ctx_print_test_info: " Test with events. Using <device>_comp<vector>" right
  // after the title with -e; with -R on the server, after the fields, a rule and "Waiting for
  // client rdma_cm QP to connect" with its hint, before the closing rule (then it waits).
  const std::string rule(87, '-');
  PerftestRunValues v;
  v.server = true;
  v.rx_depth = 256;
  v.peer_version = "6.06";
  auto o = perftest_options({"send_bw", "--perftest", "-x", "198.18.0.1", "-e"});
  std::string info = perftest_test_info(o, v);
  // Our device is "conduitd" (the Device field); a conduit CQ has one wake-up: vector 0.
  CHECK(info.find("                    Send BW Test\n"
                  " Test with events. Using conduitd_comp0\n"
                  " Dual-port       : OFF\t\tDevice         : conduitd\n") != std::string::npos);
  CHECK(info.find("rdma_cm QP to connect") == std::string::npos);
  o = perftest_options({"read_lat", "h", "--perftest", "-x", "198.18.0.1", "--events"});
  v.server = false;
  CHECK(perftest_test_info(o, v).find("                    RDMA_Read Latency Test\n Test with "
                                      "events. Using conduitd_comp0\n") != std::string::npos);
  o = perftest_options({"send_bw", "h", "--perftest", "-x", "198.18.0.1"});
  CHECK(perftest_test_info(o, v).find("Test with events") == std::string::npos);

  // -R: the server's banner closes the header; the client has none.
  o = perftest_options({"write_bw", "--perftest", "-x", "198.18.0.1", "-R"});
  v.server = true;
  info = perftest_test_info(o, v);
  const std::string banner = rule + "\n Waiting for client rdma_cm QP to connect\n" +
                             " Please run the same command with the IB/RoCE interface IP\n" + rule +
                             "\n";
  REQUIRE(info.size() > banner.size());
  CHECK(info.substr(info.size() - banner.size()) == banner);
  CHECK(info.find(" rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n") != std::string::npos);
  const size_t waiting = info.find("Waiting for client rdma_cm QP");
  CHECK(waiting != std::string::npos);
  CHECK(waiting > info.find("Data ex. method"));
  v.server = false;
  o = perftest_options({"write_bw", "198.18.0.2", "--perftest", "-x", "198.18.0.1", "-R"});
  CHECK(perftest_test_info(o, v).find("Waiting for client") == std::string::npos);
  // Without -R no banner on the server either.
  v.server = true;
  o = perftest_options({"write_bw", "--perftest", "-x", "198.18.0.1"});
  CHECK(perftest_test_info(o, v).find("Waiting for client") == std::string::npos);
}
