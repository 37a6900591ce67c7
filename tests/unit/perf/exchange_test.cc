#include "exchange.h"

#include <catch2/catch.hpp>
#include <string>

using namespace conduit::perf;

TEST_CASE("QP records are perftest's text record") {
  QpRecord r;
  r.lid = 0;
  r.out_reads = 16;
  r.qpn = 0x000011;
  r.psn = 0xabcdef;
  r.rkey = 0x1234;
  r.vaddr = 0x7f0000001000ull;
  REQUIRE(parse_gid("198.18.0.1", r.gid));
  const std::string s = format_qp_record(r);
  CHECK(s.size() == kQpRecordChars);
  CHECK(s ==
        "0000:0010:000011:abcdef:00001234:00007f0000001000:"
        "00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:01:00000000:");
  QpRecord back;
  REQUIRE(parse_qp_record(s, back));
  CHECK(back == r);
}

TEST_CASE("QP record round trip keeps every field") {
  QpRecord r;
  r.lid = 0xffff;
  r.out_reads = 0xffff;
  r.qpn = 0xffffff;
  r.psn = 0xffffff;
  r.rkey = 0xffffffffu;
  r.vaddr = ~0ull;
  for (int i = 0; i < 16; ++i) r.gid[static_cast<size_t>(i)] = static_cast<uint8_t>(i * 17);
  r.srqn = 0xdeadbeef;
  QpRecord back;
  REQUIRE(parse_qp_record(format_qp_record(r), back));
  CHECK(back == r);
  // Upper-case hex is accepted (other perftest builds print it).
  std::string upper = format_qp_record(r);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  REQUIRE(parse_qp_record(upper, back));
  CHECK(back == r);
}

TEST_CASE("malformed QP records are rejected") {
  QpRecord r;
  REQUIRE(parse_gid("10.0.0.1", r.gid));
  const std::string good = format_qp_record(r);
  QpRecord out;
  CHECK_FALSE(parse_qp_record("", out));
  CHECK_FALSE(parse_qp_record(good.substr(1), out));  // short
  CHECK_FALSE(parse_qp_record(good + "0", out));      // long
  std::string bad = good;
  bad[4] = '-';  // separator
  CHECK_FALSE(parse_qp_record(bad, out));
  bad = good;
  bad[7] = 'g';  // not hex
  CHECK_FALSE(parse_qp_record(bad, out));
  bad = good;
  bad[10] = ' ';
  CHECK_FALSE(parse_qp_record(bad, out));
  bad = good;
  bad.back() = 'x';  // no final ':'
  CHECK_FALSE(parse_qp_record(bad, out));
}

TEST_CASE("GIDs from IPv4 and IPv6 text") {
  Gid g{};
  REQUIRE(parse_gid("198.18.0.2", g));
  CHECK(g[10] == 0xff);
  CHECK(g[11] == 0xff);
  CHECK(g[12] == 198);
  CHECK(g[15] == 2);
  CHECK(format_gid(g) == "198.18.0.2");
  REQUIRE(parse_gid("::ffff:198.18.0.3", g));
  CHECK(format_gid(g) == "198.18.0.3");
  REQUIRE(parse_gid("fe80::1", g));
  CHECK(format_gid(g) == "fe80::1");
  CHECK_FALSE(parse_gid("", g));
  CHECK_FALSE(parse_gid("198.18.0", g));
  CHECK_FALSE(parse_gid("256.1.1.1", g));
  CHECK_FALSE(parse_gid("host.example", g));
}

TEST_CASE("test parameters round-trip") {
  TestParams p;
  p.test = TestKind::kReadBw;
  p.qps = 256;
  p.sizes = {1, 2, 4096, 16u << 20};
  p.iterations = 0;
  p.duration_s = 5;
  p.bidirectional = true;
  p.check = true;
  p.tx_depth = 16;
  p.rx_depth = 64;
  p.cq_mod = 1;
  p.mtu = 4096;
  p.timeout_s = 7;
  const std::string line = format_params(p);
  CHECK(line.size() <= kMaxLineBytes);
  TestParams back;
  std::string error;
  REQUIRE(parse_params(line, back, error));
  CHECK(back == p);
}

TEST_CASE("parameters from options fill every default") {
  PerfOptions o;
  o.test = TestKind::kSendBw;
  o.sweep = true;
  o.sizes = sweep_sizes(kSweepMinBytes, kSweepMaxBytes);
  TestParams p = params_from_options(o);
  CHECK(p.iterations == 5000);
  CHECK(p.tx_depth == 128);
  CHECK(p.rx_depth == 256);
  CHECK(p.cq_mod == 64);
  CHECK(p.mtu == 1024);
  std::string error;
  TestParams back;
  REQUIRE(parse_params(format_params(p), back, error));
  CHECK(back == p);
}

TEST_CASE("--cm crosses in the parameters; the server refuses what it cannot run") {
  PerfOptions client;
  client.test = TestKind::kWriteBw;
  client.server = "198.18.0.2";
  PerfOptions server;
  server.test = TestKind::kWriteBw;
  TestParams p = params_from_options(client);
  CHECK(format_params(p).find("cm=") == std::string::npos);  // as before --cm existed
  CHECK(server_mismatch(p, server).empty());

  // The server would wait for connection requests, the client for QP records (and the
  // other way round): each for -W, then a message about something else.
  server.cm = true;
  server.cm_service = 7;
  CHECK(server_mismatch(p, server).find("same --cm") != std::string::npos);
  client.cm = true;
  client.cm_service = 7;
  p = params_from_options(client);
  TestParams back;
  std::string error;
  REQUIRE(parse_params(format_params(p), back, error));
  CHECK(back.cm_service == 7);
  CHECK(back == p);
  CHECK(server_mismatch(back, server).empty());
  server.cm = false;
  CHECK(server_mismatch(back, server).find("--cm 7") != std::string::npos);
  server.cm = true;
  server.cm_service = 8;
  CHECK(server_mismatch(back, server).find("--cm 8") != std::string::npos);

  server.cm_service = 7;
  server.test = TestKind::kReadBw;
  CHECK(server_mismatch(back, server) == "server runs read_bw, client asked for write_bw");
}

TEST_CASE("bad parameter lines say what is wrong") {
  TestParams good;
  good.sizes = {64};
  good.iterations = 10;
  const std::string line = format_params(good);
  TestParams out;
  std::string error;
  auto rejects = [&](const std::string& l, const char* says) {
    INFO(l);
    error.clear();
    CHECK_FALSE(parse_params(l, out, error));
    CHECK(error.find(says) != std::string::npos);
  };
  rejects("", "malformed");
  rejects("SSH-2.0-OpenSSH_9.2", "does not speak");
  rejects(line + " extra=1", "unknown parameter");
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = line;
    const size_t at = s.find(from);
    REQUIRE(at != std::string::npos);
    s.replace(at, from.size(), to);
    return s;
  };
  rejects(replace("test=send_bw", "test=nope"), "test name");
  rejects(replace("qps=1", "qps=0"), "'qps'");
  rejects(replace("qps=1", "qps=99999"), "'qps'");
  rejects(replace("mtu=1024", "mtu=1000"), "power of two");
  rejects(replace("mtu=1024", "mtu=8192"), "'mtu'");
  rejects(replace("iters=10", "iters=0"), "exactly one");
  rejects(replace("duration_s=0", "duration_s=3"), "exactly one");
  rejects(replace("sizes=64", "sizes=0"), "bad size");
  rejects(replace("sizes=64", "sizes=64,"), "ends with a comma");
  rejects(replace("sizes=64", "sizes=64,,2"), "bad size");
  rejects(replace("sizes=64", "sizes=2147483648"), "bad size");
  rejects(line + " cm=0", "'cm'");
  rejects(line + " cm=x", "'cm'");
  rejects(replace("bidir=0", "bidir=2"), "'bidir'");
  rejects(replace("check=0", "check=x"), "'check'");
  rejects(replace("tx_depth=1", "tx_depth=-1"), "'tx_depth'");
  rejects(replace("tx_depth=1", "tx_depth=1 x"), "malformed");
  rejects(replace(" qps=1", ""), "'qps'");
  std::string many = "sizes=1";
  for (int i = 0; i < 64; ++i) many += ",1";
  rejects(replace("sizes=64", many), "bad size");
}

TEST_CASE("messages: verb and key=value fields, strictly") {
  Message m;
  REQUIRE(parse_message("end size=64 msgs=5 ns=100 peak_bps=1 mismatches=0", m));
  CHECK(m.verb == "end");
  CHECK(m.get("size") == std::string_view("64"));
  CHECK(m.get_u64("msgs", 0, 10) == 5u);
  CHECK_FALSE(m.get_u64("msgs", 6, 10));
  CHECK_FALSE(m.get("absent"));
  CHECK(format_message(m) == "end size=64 msgs=5 ns=100 peak_bps=1 mismatches=0");
  REQUIRE(parse_message("ok", m));
  CHECK(m.fields.empty());

  CHECK_FALSE(parse_message("", m));
  CHECK_FALSE(parse_message(" end", m));
  CHECK_FALSE(parse_message("end ", m));
  CHECK_FALSE(parse_message("end  size=1", m));
  CHECK_FALSE(parse_message("end size", m));
  CHECK_FALSE(parse_message("end =1", m));
  CHECK_FALSE(parse_message("end Size=1", m));
  CHECK_FALSE(parse_message("end size=1 size=2", m));
  CHECK_FALSE(parse_message("end size=a b", m));
  CHECK_FALSE(parse_message("end size=\"1\"", m));
  CHECK_FALSE(parse_message(std::string(kMaxLineBytes + 1, 'a'), m));
  CHECK_FALSE(parse_message("end v=" + std::string(257, 'a'), m));
  std::string many = "end";
  for (int i = 0; i < 33; ++i) many += " k" + std::to_string(i) + "=1";
  CHECK_FALSE(parse_message(many, m));
}

TEST_CASE("free text crosses the line intact: a reason with spaces and symbols") {
  const std::string reason =
      "modify_qp: path MTU 4096 is above what port MTU 1500 carries (64% ok)";
  const std::string v = encode_text(reason);
  Message m;
  REQUIRE(parse_message("error reason=" + v, m));
  REQUIRE(m.get("reason"));
  CHECK(decode_text(*m.get("reason")) == reason);
  // Control bytes never reach the terminal; a stray or short escape stays as written.
  CHECK(decode_text(encode_text("a\x1b[2Jb\n")) == "a?[2Jb?");
  CHECK(decode_text("50%") == "50%");
  CHECK(decode_text("%4") == "%4");
  CHECK(decode_text("%zz") == "%zz");
  // Long text is cut to what a value holds, never in the middle of an escape.
  const std::string cut = encode_text(std::string(300, ' '));
  CHECK(cut.size() == 255);
  REQUIRE(parse_message("error reason=" + cut, m));
  CHECK(decode_text(cut) == std::string(85, ' '));
}

TEST_CASE("run reports round-trip and reject junk") {
  RunReport r{4096, 5000, 123456789, 9876543210ull, 2};
  Message m = report_message(r);
  RunReport back;
  REQUIRE(parse_report(m, back));
  CHECK(back == r);
  Message parsed;
  REQUIRE(parse_message(format_message(m), parsed));
  REQUIRE(parse_report(parsed, back));
  CHECK(back == r);
  REQUIRE(parse_message("end size=0 msgs=1 ns=1 peak_bps=1 mismatches=0", parsed));
  CHECK_FALSE(parse_report(parsed, back));
  REQUIRE(parse_message("end size=1 msgs=1 ns=1 peak_bps=1", parsed));
  CHECK_FALSE(parse_report(parsed, back));
  REQUIRE(parse_message("done size=1 msgs=1 ns=1 peak_bps=1 mismatches=0", parsed));
  CHECK_FALSE(parse_report(parsed, back));
  REQUIRE(
      parse_message("end size=1 msgs=99999999999999999999 ns=1 peak_bps=1 mismatches=0", parsed));
  CHECK_FALSE(parse_report(parsed, back));
}
