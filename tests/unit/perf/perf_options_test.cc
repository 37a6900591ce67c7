#include "perf_options.h"

#include <catch2/catch.hpp>
#include <regex>
#include <string>
#include <vector>

#include "perf_report.h"

using conduit::perf::bw_json;
using conduit::perf::lat_json;
using conduit::perf::make_bw_result;
using conduit::perf::make_lat_result;
using conduit::perf::parse_args;
using conduit::perf::parse_size;
using conduit::perf::PerfOptions;
using conduit::perf::sweep_sizes;
using conduit::perf::TestKind;

namespace {

struct Parsed {
  bool ok;
  std::string error;
  PerfOptions o;
};

Parsed parse(std::vector<const char*> args) {
  args.insert(args.begin(), "conduit-perf");
  Parsed p;
  auto r = parse_args(static_cast<int>(args.size()), args.data(), p.o);
  p.ok = r.ok;
  p.error = r.error;
  return p;
}

}  // namespace

TEST_CASE("server and client are told apart by the server address") {
  auto s = parse({"send_bw"});
  REQUIRE(s.ok);
  CHECK(s.o.is_server());
  CHECK(s.o.test == TestKind::kSendBw);
  CHECK(s.o.sizes == std::vector<uint64_t>{65536});
  CHECK(s.o.effective_iterations() == 5000);

  auto c = parse({"write_bw", "198.19.0.2", "-s", "4K", "-n", "100", "-q", "4", "-b"});
  REQUIRE(c.ok);
  CHECK_FALSE(c.o.is_server());
  CHECK(c.o.server == "198.19.0.2");
  CHECK(c.o.test == TestKind::kWriteBw);
  CHECK(c.o.sizes == std::vector<uint64_t>{4096});
  CHECK(c.o.iterations == 100);
  CHECK(c.o.qps == 4);
  CHECK(c.o.bidirectional);
}

TEST_CASE("every option spelling is accepted") {
  auto p =
      parse({"read_bw", "h",    "--size=1MiB", "--duration", "3",        "--qp=16",     "--check",
             "--json",  "-e",   "-t32",        "-r",         "64",       "-Q",          "8",
             "-m",      "4096", "-x",          "198.18.0.1", "--socket", "/tmp/a.sock", "-p",
             "20000",   "-T",   "bulk",        "-W",         "5"});
  REQUIRE(p.ok);
  CHECK(p.o.sizes == std::vector<uint64_t>{1u << 20});
  CHECK(p.o.duration_s == 3);
  CHECK(p.o.effective_iterations() == 0);
  CHECK(p.o.qps == 16);
  CHECK(p.o.check);
  CHECK(p.o.json);
  CHECK(p.o.events);
  CHECK(p.o.effective_tx_depth() == 32);
  CHECK(p.o.effective_rx_depth() == 64);
  CHECK(p.o.effective_cq_mod() == 1);  // --check signals every send
  CHECK(p.o.effective_mtu() == 4096);
  CHECK(p.o.gid == "198.18.0.1");
  CHECK(p.o.socket_path == "/tmp/a.sock");
  CHECK(p.o.port == 20000);
  CHECK(p.o.traffic_class == "bulk");
  CHECK(p.o.timeout_s == 5);
}

TEST_CASE("-Y polls and yields between polls, instead of spinning or sleeping") {
  auto p = parse({"write_lat", "h", "--yield"});
  REQUIRE(p.ok);
  CHECK(p.o.yield);
  CHECK_FALSE(p.o.events);
  auto q = parse({"send_bw", "h", "-Y"});
  REQUIRE(q.ok);
  CHECK(q.o.yield);
}

TEST_CASE("-a sweeps 2 B to 8 MiB") {
  auto p = parse({"send_bw", "-a"});
  REQUIRE(p.ok);
  REQUIRE(p.o.sizes.size() == 23);
  CHECK(p.o.sizes.front() == 2);
  CHECK(p.o.sizes.back() == 8u << 20);
  CHECK(sweep_sizes(2, 10) == std::vector<uint64_t>{2, 4, 8, 10});
  CHECK(sweep_sizes(1, 1) == std::vector<uint64_t>{1});
  CHECK(sweep_sizes(0, 8).empty());
  CHECK(sweep_sizes(9, 8).empty());
}

TEST_CASE("latency tests default to 2 bytes and 1000 iterations") {
  auto p = parse({"send_lat", "10.0.0.1"});
  REQUIRE(p.ok);
  CHECK(p.o.sizes == std::vector<uint64_t>{2});
  CHECK(p.o.effective_iterations() == 1000);
  CHECK(p.o.effective_tx_depth() == 16);
}

TEST_CASE("atomic_bw: 8 bytes, perftest's -A spellings, --perftest only") {
  auto p = parse({"atomic_bw", "--perftest", "-x", "198.18.0.1"});
  REQUIRE(p.ok);
  CHECK(p.o.test == TestKind::kAtomicBw);
  CHECK(p.o.sizes == std::vector<uint64_t>{8});
  CHECK_FALSE(p.o.atomic_cas);  // FETCH_AND_ADD, as ib_atomic_bw
  p = parse({"atomic_bw", "h", "--perftest", "-x", "198.18.0.1", "-s", "8",
             "--atomic_type=CMP_AND_SWAP", "-q", "2"});
  REQUIRE(p.ok);
  CHECK(p.o.atomic_cas);
  p = parse({"atomic_bw", "--perftest", "-x", "198.18.0.1", "-A", "FETCH_AND_ADD"});
  REQUIRE(p.ok);
  CHECK_FALSE(p.o.atomic_cas);
  CHECK(std::string(test_name(TestKind::kAtomicBw)) == "atomic_bw");
  p = parse({"atomic_lat", "h", "--perftest", "-x", "198.18.0.1", "-A", "CMP_AND_SWAP"});
  REQUIRE(p.ok);
  CHECK(p.o.test == TestKind::kAtomicLat);
  CHECK(is_latency(p.o.test));
  CHECK(p.o.sizes == std::vector<uint64_t>{8});  // not the latency tests' 2
  CHECK(p.o.atomic_cas);
}

TEST_CASE("defaults shrink with many QPs") {
  auto p = parse({"send_bw", "-q", "256"});
  REQUIRE(p.ok);
  CHECK(p.o.effective_tx_depth() == 16);
  CHECK(p.o.effective_rx_depth() == 64);
  CHECK(p.o.effective_cq_mod() == 16);
}

TEST_CASE("-s takes a list of sizes") {
  auto p = parse({"send_bw", "-s", "1,1025,16M"});
  REQUIRE(p.ok);
  CHECK(p.o.sizes == std::vector<uint64_t>{1, 1025, 16u << 20});
  CHECK_FALSE(parse({"send_bw", "-s", "1,,2"}).ok);
  CHECK_FALSE(parse({"send_bw", "-s", "1,"}).ok);
  CHECK_FALSE(parse({"send_bw", "-s", ",1"}).ok);
}

TEST_CASE("sizes parse with binary suffixes and reject junk") {
  uint64_t v = 0;
  CHECK((parse_size("2", v) && v == 2));
  CHECK((parse_size("64K", v) && v == 65536));
  CHECK((parse_size("8MiB", v) && v == 8u << 20));
  CHECK((parse_size("1G", v) && v == 1u << 30));
  CHECK_FALSE(parse_size("", v));
  CHECK_FALSE(parse_size("K", v));
  CHECK_FALSE(parse_size("12X", v));
  CHECK_FALSE(parse_size("-1", v));
  CHECK_FALSE(parse_size("99999999999999999999", v));
  CHECK_FALSE(parse_size("99999999999999G", v));
}

TEST_CASE("bad command lines are rejected with a reason") {
  struct Case {
    std::vector<const char*> args;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{}, "name a test"},
      {{"-n", "5"}, "read_lat, atomic_bw or atomic_lat"},  // every test, as --help lists them
      {{"send_gw"}, "unknown test"},
      {{"send_bw", "a", "b"}, "unexpected argument"},
      {{"send_bw", "-s"}, "needs a value"},
      {{"send_bw", "-s", "0"}, "from 1 B to 1 GiB"},
      {{"send_bw", "-s", "2G"}, "from 1 B to 1 GiB"},
      {{"send_bw", "-q", "0"}, "from 1 to 4096"},
      {{"send_bw", "-q", "4097"}, "from 1 to 4096"},
      {{"send_bw", "-q", "1x"}, "not a number"},
      {{"send_bw", "-n", "5", "-D", "2"}, "exclude each other"},
      {{"send_bw", "-a", "-s", "4"}, "exclude each other"},
      {{"send_lat", "-e", "-Y"}, "-e (sleep on the CQs) and -Y (yield) exclude each other"},
      {{"send_lat", "--yield=1"}, "takes no value"},
      {{"send_bw", "-m", "1000"}, "path MTU"},
      {{"send_bw", "-m", "8192"}, "path MTU"},
      {{"send_bw", "-t", "32769"}, "the deepest rings a conduitd policy can give"},
      {{"send_bw", "-r", "0"}, "from 1 to 32768"},
      {{"send_bw", "-x", "198.18.0"}, "is not an IPv4 address or a GID"},
      {{"atomic_bw"}, "atomic_bw runs with --perftest"},
      {{"atomic_bw", "--perftest", "-s", "64"}, "8 bytes per operation"},
      {{"atomic_bw", "--perftest", "-a"}, "8 bytes per operation"},
      {{"atomic_bw", "--perftest", "-b"}, "runs one way"},
      {{"atomic_bw", "--perftest", "-A", "SWAP"}, "is not CMP_AND_SWAP or FETCH_AND_ADD"},
      {{"send_bw", "-A", "CMP_AND_SWAP"}, "-A (atomic type) applies to atomic_bw and atomic_lat"},
      {{"atomic_lat", "-x", "198.18.0.1"}, "atomic_lat runs with --perftest"},
      {{"atomic_lat", "--perftest", "-s", "2"}, "8 bytes per operation"},
      {{"send_bw", "-x", "host.example"}, "is not an IPv4 address or a GID"},
      {{"send_bw", "-p", "65536"}, "from 1 to 65535"},
      {{"send_bw", "--frobnicate"}, "unknown option"},
      {{"send_bw", "-b=1"}, "takes no value"},
      {{"send_bw", "--check=yes"}, "takes no value"},
      {{"send_lat", "-b"}, "bandwidth tests"},
      {{"write_lat", "-q", "2"}, "one QP"},
      {{"send_bw", "-T", "a-class-name-that-is-far-too-long-for-policy"}, "traffic class"},
      // Said at once, not after the server has waited for its client and exchanged versions.
      {{"send_bw", "--perftest"}, "--perftest needs -x ADDR"},
      {{"write_lat", "h", "--perftest", "-R"}, "--perftest needs -x ADDR"},
  };
  for (const auto& c : cases) {
    auto p = parse(c.args);
    INFO(c.says);
    CHECK_FALSE(p.ok);
    CHECK(p.error.find(c.says) != std::string::npos);
  }
}

TEST_CASE("awaiting the peer's traffic: -D plus -W, or as long as the peer is connected") {
  // ib_write_bw -D 60 against our server: the client's barrier comes after 60 s, not -W's 30.
  CHECK(conduit::perf::await_peer_ms(60, 30) == 90'000);
  CHECK(conduit::perf::await_peer_ms(86400, 3600) == 90'000'000);
  // -n: no length known (perftest's server blocks in its read too).
  CHECK(conduit::perf::await_peer_ms(0, 30) == -1);
}

namespace {

// An option's --help entry (its line and the lines continuing it), whitespace collapsed.
std::string help_entry(const std::string& opt) {
  const std::string u = conduit::perf::usage_text();
  const size_t at = u.find("\n  " + opt + ",");
  if (at == std::string::npos) return "";
  const std::string raw = u.substr(at + 1, u.find("\n  -", at + 1) - at - 1);
  std::string out;
  for (char c : raw) {
    const bool space = c == ' ' || c == '\n';
    if (!space || (!out.empty() && out.back() != ' ')) out += space ? ' ' : c;
  }
  return out;
}

}  // namespace

TEST_CASE("--help gives the defaults the parser applies and every --json key") {
  const Parsed bw = parse({"send_bw"});
  const Parsed lat = parse({"send_lat"});
  INFO(help_entry("-q"));
  CHECK(help_entry("-q").find("; " + std::to_string(bw.o.qps) + ")") != std::string::npos);
  const std::string t = help_entry("-t");
  INFO(t);
  CHECK(t.find("bw " + std::to_string(bw.o.effective_tx_depth())) != std::string::npos);
  CHECK(t.find("lat " + std::to_string(lat.o.effective_tx_depth())) != std::string::npos);
  const std::string r = help_entry("-r");
  INFO(r);
  CHECK(r.find("bw " + std::to_string(bw.o.effective_rx_depth())) != std::string::npos);
  CHECK(r.find("lat " + std::to_string(lat.o.effective_rx_depth())) != std::string::npos);
  CHECK(help_entry("-Q").find("(" + std::to_string(bw.o.effective_cq_mod())) != std::string::npos);
  CHECK(help_entry("-T").find("default") != std::string::npos);
  // Scripts read these keys: --help names every one.
  const std::string json = help_entry("-J");
  INFO(json);
  const std::string objects =
      bw_json(make_bw_result(64, 10, 1000, 0), TestKind::kSendBw, 1, false) +
      lat_json(make_lat_result(2, {1000, 2000}), TestKind::kSendLat);
  const std::regex key("\"([a-z_0-9]+)\":");
  for (auto it = std::sregex_iterator(objects.begin(), objects.end(), key);
       it != std::sregex_iterator(); ++it) {
    CHECK(json.find((*it)[1].str()) != std::string::npos);
  }
  CHECK(json.find("check_mismatches") != std::string::npos);
}

TEST_CASE("--help and --version need no test name") {
  CHECK(parse({"--help"}).o.help);
  CHECK(parse({"-V"}).o.version);
  CHECK_FALSE(conduit::perf::usage_text().empty());
}

TEST_CASE("--cm SERVICE connects through the connection manager; --sr needs it") {
  auto p = parse({"send_bw", "h", "--cm", "7", "--sr"});
  REQUIRE(p.ok);
  CHECK(p.o.cm);
  CHECK(p.o.cm_service == 7);
  CHECK(p.o.cm_selective_repeat);
  p = parse({"send_bw", "--cm=18446744073709551615"});
  REQUIRE(p.ok);
  CHECK(p.o.cm_service == 18446744073709551615ull);
  CHECK_FALSE(parse({"send_bw", "--cm", "0"}).ok);
  CHECK_FALSE(parse({"send_bw", "--cm"}).ok);
  CHECK(parse({"send_bw", "--sr"}).error.find("--cm") != std::string::npos);
  CHECK(parse({"send_bw", "--cm", "7", "--perftest", "-n", "5"}).error.find("exclude") !=
        std::string::npos);
  CHECK_FALSE(parse({"send_bw"}).o.cm);
}

namespace {

struct ParsedWithNotes {
  bool ok;
  std::string error;
  std::vector<std::string> notes;
  PerfOptions o;
};

ParsedWithNotes parse_notes(std::vector<const char*> args) {
  args.insert(args.begin(), "conduit-perf");
  ParsedWithNotes p;
  auto r = parse_args(static_cast<int>(args.size()), args.data(), p.o);
  p.ok = r.ok;
  p.error = r.error;
  p.notes = r.notes;
  return p;
}

}  // namespace

TEST_CASE("--perftest takes -Y (a local choice), -e and -Q as perftest's, not -c or -J") {
  auto p = parse({"write_lat", "h", "--perftest", "-x", "198.18.0.1", "-Y"});
  REQUIRE(p.ok);
  CHECK(p.o.yield);
  for (const char* opt : {"-c", "-J"}) {
    CHECK(parse({"write_lat", "h", "--perftest", opt}).error.find("does not do") !=
          std::string::npos);
  }
  // perftest's -e sleeps on the CQ, as the session does anyway; perftest refuses it on WRITE
  // tests and with -D.
  for (const char* t : {"send_bw", "read_bw", "send_lat", "read_lat", "atomic_bw"}) {
    INFO(t);
    auto e = parse({t, "h", "--perftest", "-x", "198.18.0.1", "-e"});
    INFO(e.error);
    CHECK(e.ok);
  }
  CHECK(parse({"write_bw", "h", "--perftest", "-x", "1.2.3.4", "-e"})
            .error.find("not available on the WRITE tests") != std::string::npos);
  CHECK(parse({"write_lat", "h", "--perftest", "-x", "1.2.3.4", "--events"})
            .error.find("not available on the WRITE tests") != std::string::npos);
  CHECK(parse({"send_bw", "h", "--perftest", "-x", "1.2.3.4", "-e", "-D", "4"})
            .error.find("Duration mode doesn't work with events") != std::string::npos);
  // -Q: perftest's completion moderation, taken (perftest_wire_test.cc).
  auto q = parse_notes({"write_bw", "h", "--perftest", "-x", "198.18.0.1", "-Q", "8"});
  INFO(q.error);
  REQUIRE(q.ok);
  CHECK(q.o.cq_mod == 8);
  CHECK(q.notes.empty());
  // perftest's -c is the connection type: say which -c this is.
  CHECK(parse({"write_bw", "h", "--perftest", "-c"}).error.find("-c (--check)") !=
        std::string::npos);
}

TEST_CASE("-R (perftest's rdma_cm) runs with --perftest only") {
  auto p = parse({"send_bw", "198.18.0.2", "--perftest", "-R", "-x", "198.18.0.1", "-q", "2"});
  REQUIRE(p.ok);
  CHECK(p.o.perftest_rdma_cm);
  CHECK(parse({"write_lat", "--perftest", "--rdma_cm", "-x", "198.18.0.1"}).o.perftest_rdma_cm);
  CHECK(parse({"send_bw", "h", "-R"}).error.find("--perftest") != std::string::npos);
  CHECK(parse({"send_bw", "h", "--perftest", "-R=1"}).error.find("takes no value") !=
        std::string::npos);
  CHECK_FALSE(parse({"send_bw", "h", "--perftest"}).o.perftest_rdma_cm);
}

TEST_CASE("--perftest: -D takes -b for write_bw and read_bw, not for send_bw or with -a") {
  CHECK(
      parse({"write_bw", "h", "--perftest", "-x", "198.18.0.1", "-s", "4096", "-D", "4", "-b"}).ok);
  CHECK(
      parse({"read_bw", "h", "--perftest", "-x", "198.18.0.1", "-s", "4096", "-D", "4", "-b"}).ok);
  CHECK(parse({"send_bw", "h", "--perftest", "-s", "4096", "-D", "4", "-b"})
            .error.find("send_bw -b with -n only") != std::string::npos);
  CHECK(parse({"write_bw", "h", "--perftest", "-a", "-D", "4"}).error.find("one size") !=
        std::string::npos);
}

TEST_CASE("read_lat is a latency test") {
  Parsed p = parse({"read_lat", "h", "-s", "64"});
  REQUIRE(p.ok);
  CHECK(p.o.test == TestKind::kReadLat);
  CHECK(conduit::perf::is_latency(p.o.test));
  CHECK(p.o.effective_iterations() == 1000);
  CHECK_FALSE(parse({"read_lat", "h", "-q", "2"}).ok);  // one QP, as the other latency tests
  CHECK_FALSE(parse({"read_lat", "h", "-b"}).ok);
}

TEST_CASE("perftest's hardware options: taken, ignored with a note, or refused with the reason") {
  // A typical perftest script line runs as it is.
  auto p = parse_notes({"write_bw", "198.18.0.2", "--perftest", "-x", "198.18.0.1", "-d", "mlx5_0",
                        "-i", "1", "-F", "--report_gbits", "-c", "RC", "-q", "4"});
  INFO(p.error);
  REQUIRE(p.ok);
  CHECK(p.o.report_gbits);
  CHECK_FALSE(p.o.check);  // -c RC is perftest's connection type, not --check
  CHECK(p.o.qps == 4);
  CHECK(p.o.server == "198.18.0.2");
  // -d is said to be ignored; -i 1, -F and -c RC need no word.
  REQUIRE(p.notes.size() == 1);
  CHECK(p.notes[0].find("-d mlx5_0 ignored") != std::string::npos);
  // The long spellings, and values attached.
  p = parse_notes({"send_bw", "h", "--ib-dev=rxe0", "--ib-port=1", "--CPU-freq", "--connection=RC",
                   "-cRC", "--post_list", "8"});
  INFO(p.error);
  REQUIRE(p.ok);
  CHECK_FALSE(p.o.check);
  REQUIRE(p.notes.size() == 2);
  CHECK(p.notes[0].find("--ib-dev rxe0 ignored") != std::string::npos);
  CHECK(p.notes[1].find("-l (--post_list) 8 ignored without --perftest") != std::string::npos);
  CHECK(parse_notes({"send_bw", "-l", "1"}).notes.empty());
  // -c alone (or before a non-type) is still --check.
  CHECK(parse_notes({"send_bw", "-c", "h"}).o.check);
  CHECK(parse_notes({"send_bw", "-c", "h"}).o.server == "h");
  CHECK(parse_notes({"send_bw", "h", "-c"}).o.check);
  // --report_gbits without --perftest: our report is in Gb/sec already.
  CHECK(parse_notes({"send_bw", "--report_gbits"}).ok);
  CHECK_FALSE(parse_notes({"send_bw"}).o.report_gbits);

  struct Case {
    std::vector<const char*> args;
    const char* says;
  };
  const std::vector<Case> refused = {
      {{"send_bw", "-c", "UC"}, "option -c UC: conduit runs RC QPs only"},
      {{"send_bw", "-c", "UD"}, "option -c UD: conduit runs RC QPs only"},
      {{"write_bw", "--connection=XRC"}, "option --connection XRC: conduit runs RC QPs only"},
      {{"send_bw", "--connection", "rc"}, "conduit runs RC QPs only"},
      {{"send_bw", "--connection"}, "needs a value"},
      {{"send_bw", "-i", "2"}, "a conduitd drives one port (-i 1)"},
      {{"send_bw", "-i", "0"}, "from 1 to 255"},
      {{"send_bw", "-d", ""}, "needs a device name"},
      {{"send_bw", "-l", "32769"}, "from 0 to 32768"},
      {{"send_bw", "-F=1"}, "takes no value"},
      {{"send_bw", "--report_gbits=1"}, "takes no value"},
      {{"send_lat", "-U"}, "the latency summary"},
      {{"send_lat", "--report-histogram"}, "the latency summary"},
      // perftest's -x is a GID index; ours is the address.
      {{"send_bw", "-x", "3"}, "looks like perftest's GID index"},
  };
  for (const auto& c : refused) {
    auto r = parse_notes(c.args);
    INFO(c.says);
    CHECK_FALSE(r.ok);
    CHECK(r.error.find(c.says) != std::string::npos);
  }
}

TEST_CASE("--help names perftest's hardware options and what becomes of them") {
  const std::string u = conduit::perf::usage_text();
  for (const char* s : {"-d, --ib-dev DEV", "-i, --ib-port N", "-c, --connection RC",
                        "-F, --CPU-freq", "-l, --post_list N", "--report_gbits", "--report-both",
                        "[Gb/sec] with --report_gbits", "-N, --noPeak"}) {
    INFO(s);
    CHECK(u.find(s) != std::string::npos);
  }
}

TEST_CASE(
    "perftest's -S SL, -T TOS and -W counters: with --perftest refused saying what to write") {
  struct Case {
    std::vector<const char*> args;
    const char* says;
  };
  const std::vector<Case> refused = {
      // -S N: perftest's service level (0 its default); the option may come before --perftest.
      {{"send_bw", "h", "-S", "3", "--perftest", "-x", "198.18.0.1"},
       "option -S 3: looks like perftest's service level"},
      {{"send_bw", "h", "--perftest", "-x", "198.18.0.1", "-S0"}, "or drop it (SL 0"},
      {{"send_bw", "h", "--perftest", "-x", "198.18.0.1", "-S", "15"}, "give --class NAME"},
      {{"send_bw", "h", "--perftest", "-x", "198.18.0.1", "-S", "15"}, "--socket 15"},
      {{"send_bw", "h", "--sl", "2"}, "option --sl 2: looks like perftest's service level"},
      // -T N: perftest's TOS.
      {{"write_bw", "h", "--perftest", "-x", "198.18.0.1", "-T", "106"},
       "option -T 106: looks like perftest's type of service"},
      {{"write_bw", "h", "--perftest", "-x", "198.18.0.1", "-T", "106"}, "--class 106"},
      {{"write_bw", "h", "--tos=106"}, "option --tos 106: looks like perftest's type of service"},
      // -W LIST: perftest's --report-counters, with or without --perftest.
      {{"send_bw", "h", "-W", "counters/port_xmit_data,hw_counters/out_of_buffer"},
       "looks like perftest's -W (--report-counters)"},
      {{"send_bw", "h", "--report-counters=counters/port_xmit_data"}, "conduitctl stats"},
      {{"send_bw", "h", "--gid-index", "3"}, "perftest's GID index"},
  };
  for (const auto& c : refused) {
    Parsed r = parse(c.args);
    INFO(c.says);
    CHECK_FALSE(r.ok);
    CHECK(r.error.find(c.says) != std::string::npos);
  }
  // conduit-perf's own meanings stay: a path and a class without --perftest, the long
  // spellings with it, class names with --perftest, -W seconds.
  CHECK(parse({"send_bw", "h", "-S", "3"}).o.socket_path == "3");
  CHECK(parse({"send_bw", "h", "-T", "106"}).o.traffic_class == "106");
  Parsed p = parse({"send_bw", "h", "--perftest", "-x", "198.18.0.1", "--socket", "3", "--class",
                    "106", "-T", "bulk", "-S", "/run/c.sock", "-W", "60"});
  INFO(p.error);
  REQUIRE(p.ok);
  CHECK(p.o.socket_path == "/run/c.sock");
  CHECK(p.o.traffic_class == "bulk");
  CHECK(p.o.timeout_s == 60);
  CHECK(parse({"send_bw", "h", "--perftest", "-x", "198.18.0.1", "--class=106"}).o.traffic_class ==
        "106");
  CHECK(parse({"send_bw", "h", "-W", "abc"}).error.find("--report-counters") != std::string::npos);
  CHECK(parse({"send_bw", "h", "-W", "0"}).error.find("from 1 to 3600") != std::string::npos);
}

TEST_CASE(
    "perftest's -C, -L, --run_infinitely refused saying why; -a overrides -s with --perftest") {
  struct Case {
    std::vector<const char*> args;
    const char* says;
  };
  const std::vector<Case> refused = {
      {{"send_lat", "h", "--perftest", "-x", "1.2.3.4", "-C"}, "reports microseconds"},
      {{"send_lat", "h", "--report-cycles"}, "not CPU cycles"},
      {{"write_bw", "h", "--perftest", "-x", "1.2.3.4", "--run_infinitely"}, "give -D SEC"},
      {{"send_bw", "h", "-L", "64"}, "raw Ethernet QPs"},
      {{"send_bw", "h", "--hop_limit=3"}, "drop --hop_limit"},
  };
  for (const auto& c : refused) {
    Parsed r = parse(c.args);
    INFO(c.says);
    CHECK_FALSE(r.ok);
    CHECK(r.error.find(c.says) != std::string::npos);
  }
  // perftest's -a sets the size to its maximum whatever -s said: every size.
  Parsed p = parse({"write_bw", "h", "--perftest", "-x", "1.2.3.4", "-a", "-s", "4096"});
  INFO(p.error);
  REQUIRE(p.ok);
  CHECK(p.o.sizes.size() == 23);
  CHECK(p.o.sizes.front() == 2);
  p = parse({"send_lat", "h", "--perftest", "-x", "1.2.3.4", "-s", "64", "-a"});
  REQUIRE(p.ok);
  CHECK(p.o.sizes.size() == 23);
  // conduit-perf's own mode (and the atomics, 8 bytes only) keep refusing the pair.
  CHECK(parse({"send_bw", "-a", "-s", "4"}).error.find("exclude each other") != std::string::npos);
  CHECK_FALSE(parse({"atomic_bw", "h", "--perftest", "-x", "1.2.3.4", "-a", "-s", "8"}).ok);
  CHECK(conduit::perf::usage_text().find("-C (microseconds, not") != std::string::npos);
}

namespace {

// perftest 4.5's options (ib_send_bw's getopt_long table, with whether each takes a value), as
// its binary (Debian bookworm's perftest 4.5+0.17) takes them. Its help names -F's --CPU-freq
// and -M's --MGID, but the table has neither (getopt says "unrecognized option").
struct PerftestOption {
  const char* name;
  bool valued;
};
constexpr PerftestOption kPerftest45Options[] = {
    {"-a", false},
    {"-b", false},
    {"-c", true},
    {"-d", true},
    {"-e", false},
    {"-f", true},
    {"-g", false},
    {"-h", false},
    {"-i", true},
    {"-j", true},
    {"-k", true},
    {"-l", true},
    {"-m", true},
    {"-n", true},
    {"-o", true},
    {"-p", true},
    {"-q", true},
    {"-r", true},
    {"-s", true},
    {"-t", true},
    {"-u", true},
    {"-v", false},
    {"-w", true},
    {"-x", true},
    {"-y", true},
    {"-z", false},
    {"-A", true},
    {"-B", true},
    {"-C", false},
    {"-D", true},
    {"-E", true},
    {"-F", false},
    {"-H", false},
    {"-I", true},
    {"-J", true},
    {"-K", true},
    {"-L", true},
    {"-M", true},
    {"-N", false},
    {"-O", false},
    {"-P", false},
    {"-Q", true},
    {"-R", false},
    {"-S", true},
    {"-T", true},
    {"-U", false},
    {"-V", false},
    {"-W", true},
    {"-X", true},
    {"-Z", false},
    {"--aes_block_size", true},
    {"--aes_xts", false},
    {"--all", false},
    {"--atomic_type", true},
    {"--bidirectional", false},
    {"--burst_size", true},
    {"--client", false},
    {"--comm_rdma_cm", false},
    {"--connection", true},
    {"--cpu_util", false},
    {"--cq-mod", true},
    {"--credentials_path", true},
    {"--data_enc_key_app_path", true},
    {"--data_enc_keys_number", true},
    {"--dest_ip", true},
    {"--dest_mac", true},
    {"--dest_port", true},
    {"--disable_pcie_relaxed", false},
    {"--dlid", true},
    {"--dont_xchg_versions", false},
    {"--dualport", false},
    {"--duration", true},
    {"--encrypt_on_tx", false},
    {"--ethertype", true},
    {"--events", false},
    {"--flow_label", true},
    {"--flows", true},
    {"--flows_burst", true},
    {"--force-link", true},
    {"--gid-index", true},
    {"--help", false},
    {"--hop_limit", true},
    {"--ib-dev", true},
    {"--ib-port", true},
    {"--inline_recv", true},
    {"--inline_size", true},
    {"--ipv6", false},
    {"--iters", true},
    {"--kek_path", true},
    {"--latency_gap", true},
    {"--limit_bw", true},
    {"--limit_msgrate", true},
    {"--local_ip", true},
    {"--local_mac", true},
    {"--local_port", true},
    {"--log_active_dci_streams", true},
    {"--log_dci_streams", true},
    {"--mac_fwd", false},
    {"--margin", true},
    {"--mcg", false},
    {"--mmap", true},
    {"--mmap-offset", true},
    {"--mr_per_qp", false},
    {"--mtu", true},
    {"--noPeak", false},
    {"--odp", false},
    {"--out_json", false},
    {"--out_json_file", true},
    {"--output", true},
    {"--outs", true},
    {"--perform_warm_up", false},
    {"--pkey_index", true},
    {"--port", true},
    {"--post_list", true},
    {"--promiscuous", false},
    {"--qp", true},
    {"--qp-timeout", true},
    {"--rate_limit", true},
    {"--rate_limit_type", true},
    {"--rate_units", true},
    {"--raw_ipv6", false},
    {"--raw_mcast", false},
    {"--rdma_cm", false},
    {"--recv_post_list", true},
    {"--remote_ip", true},
    {"--remote_mac", true},
    {"--remote_port", true},
    {"--reply_every", true},
    {"--report-both", false},
    {"--report-counters", true},
    {"--report-cycles", false},
    {"--report-histogrm", false},
    {"--report-per-port", false},
    {"--report-unsorted", false},
    {"--report_gbits", false},
    {"--retry_count", true},
    {"--reversed", false},
    {"--run_infinitely", false},
    {"--rx-depth", true},
    {"--server", false},
    {"--sig_before", false},
    {"--size", true},
    {"--sl", true},
    {"--sniffer", false},
    {"--source_ip", true},
    {"--source_mac", true},
    {"--source_port", true},
    {"--tclass", true},
    {"--tcp", false},
    {"--tos", true},
    {"--tx-depth", true},
    {"--typical_pkt_size", true},
    {"--use-srq", false},
    {"--use_hugepages", false},
    {"--use_old_post_send", false},
    {"--use_rss", false},
    {"--vector", true},
    {"--version", false},
    {"--vlan_en", false},
    {"--vlan_pcp", true},
    {"--wait_destroy", true},
};

}  // namespace

TEST_CASE("every perftest 4.5 option is taken, ignored with a note, or refused saying why") {
  for (const auto& opt : kPerftest45Options) {
    for (const char* test : {"send_bw", "write_lat"}) {
      // A server name after it: never the option's value, never taken for one.
      std::vector<const char*> a = {test, "--perftest", "-x", "198.18.0.1", opt.name};
      if (opt.valued) a.push_back("1");
      a.push_back("198.18.0.2");
      const auto p = parse_notes(a);
      INFO(test << " " << opt.name << ": " << p.error);
      CHECK(p.error.find("unknown option") == std::string::npos);
      CHECK(p.error.find("unexpected argument") == std::string::npos);
      if (p.ok && !p.o.help && !p.o.version) CHECK(p.o.server == "198.18.0.2");
    }
  }
}

TEST_CASE("perftest's options that conduit has no use for: refused with the reason, or a note") {
  auto refused = [](std::vector<const char*> extra, const char* why) {
    std::vector<const char*> a = {"send_bw", "h", "--perftest", "-x", "198.18.0.1"};
    a.insert(a.end(), extra.begin(), extra.end());
    const auto p = parse_notes(a);
    INFO(p.error);
    CHECK_FALSE(p.ok);
    const std::string name(extra[0]);
    CHECK(p.error.find(name.substr(0, name.find('='))) != std::string::npos);
    CHECK(p.error.find(why) != std::string::npos);
  };
  refused({"-z"}, "give both sides -R");
  refused({"--comm_rdma_cm"}, "give both sides -R");
  refused({"--tclass", "96"}, "-T/--class NAME");
  refused({"--tclass=96"}, "-T/--class NAME");  // the message names it as --tclass 96
  refused({"--flow_label", "7"}, "flow label 0");
  refused({"-g"}, "RC QPs only");
  refused({"-M", "ff02::1"}, "RC QPs only");
  refused({"-O"}, "drives one port");
  refused({"--reversed"}, "swap the two sides");
  refused({"-w", "10"}, "does not fail a run below a limit");
  refused({"--rate_limit", "5"}, "does not pace");
  refused({"--mmap", "/dev/shm/x"}, "not a file's pages");
  refused({"--dlid", "3"}, "no LIDs");
  refused({"-B", "00:11:22:33:44:55"}, "raw Ethernet");
  refused({"--dest_ip", "1.2.3.4"}, "raw Ethernet");
  refused({"-J", "1.2.3.4"}, "raw Ethernet");
  refused({"--force-link", "IB"}, "Ethernet only");
  refused({"--pkey_index", "1"}, "default P_Key");
  refused({"-X", "0"}, "Events must be enabled");
  refused({"--recv_post_list", "4", "-n", "10"}, "multiple of receive post list size");
  refused({"--report-histogrm"}, "latency summary");
  // Taken with a note: what they change stays inside perftest.
  for (const char* o : {"--mr_per_qp", "--odp", "--use_hugepages", "--use_old_post_send",
                        "--perform_warm_up", "--ipv6", "--use-srq"}) {
    const auto p = parse_notes({"send_bw", "h", "--perftest", "-x", "198.18.0.1", o});
    INFO(o << ": " << p.error);
    REQUIRE(p.ok);
    REQUIRE(p.notes.size() == 1);
    CHECK(p.notes[0].find(std::string("option ") + o + " ignored") != std::string::npos);
  }
  // --disable_pcie_relaxed: taken for the header's "PCIe relax order: OFF", with a note.
  const auto pcie =
      parse_notes({"send_bw", "h", "--perftest", "-x", "198.18.0.1", "--disable_pcie_relaxed"});
  REQUIRE(pcie.ok);
  CHECK(pcie.o.disable_pcie_relaxed);
  REQUIRE(pcie.notes.size() == 1);
  CHECK(pcie.notes[0].find("PCIe relax order: OFF") != std::string::npos);
  CHECK(!parse({"send_bw", "h", "--perftest", "-x", "198.18.0.1", "--disable_pcie_relaxed=1"}).ok);
  const auto w = parse_notes({"send_bw", "--perftest", "-x", "198.18.0.1", "--wait_destroy", "5",
                              "--inline_recv", "64", "h"});
  REQUIRE(w.ok);
  CHECK(w.o.server == "h");
  CHECK(w.notes.size() == 2);
  // --use-srq: SEND tests only, as perftest.
  CHECK(parse({"write_bw", "h", "--perftest", "-x", "198.18.0.1", "--use-srq"})
            .error.find("SRQ only in SEND tests") != std::string::npos);
  // Taken: Ethernet links, P_Key index 0, flow label 0, -X with -e, a receive list.
  for (std::vector<const char*> ok : {std::vector<const char*>{"--force-link", "Ethernet"},
                                      {"--pkey_index", "0"},
                                      {"--flow_label", "0"},
                                      {"-e", "-X", "2"},
                                      {"--recv_post_list", "4", "-n", "100"}}) {
    std::vector<const char*> a = {"send_bw", "h", "--perftest", "-x", "198.18.0.1"};
    a.insert(a.end(), ok.begin(), ok.end());
    const auto p = parse_notes(a);
    INFO(ok[0] << ": " << p.error);
    CHECK(p.ok);
  }
}

TEST_CASE("--recv_post_list: send_bw posts its receives in lists, as perftest's") {
  // With --perftest the value is kept (the header's Recv Post List, the session's lists): no
  // note on send_bw; the WRITE, READ and atomic tests post no receives, nor does perftest's.
  auto p = parse_notes(
      {"send_bw", "--perftest", "-x", "198.18.0.1", "--recv_post_list", "4", "-n", "100"});
  REQUIRE(p.ok);
  CHECK(p.o.recv_post_list == 4);
  CHECK(p.notes.empty());
  p = parse_notes({"send_bw", "h", "--perftest", "-x", "198.18.0.1", "--recv_post_list=8"});
  REQUIRE(p.ok);
  CHECK(p.o.recv_post_list == 8);
  CHECK(p.notes.empty());
  p = parse_notes({"write_bw", "h", "--perftest", "-x", "198.18.0.1", "--recv_post_list", "4"});
  REQUIRE(p.ok);
  CHECK(p.o.recv_post_list == 4);
  REQUIRE(p.notes.size() == 1);
  CHECK(p.notes[0].find("write_bw posts no receives") != std::string::npos);
  CHECK(p.notes[0].find("Recv Post List") != std::string::npos);
  // conduit-perf's own mode: ignored, as before.
  p = parse_notes({"send_bw", "h", "--recv_post_list", "4", "-n", "100"});
  REQUIRE(p.ok);
  CHECK(p.o.recv_post_list == 1);
  REQUIRE(p.notes.size() == 1);
  CHECK(p.notes[0].find("ignored") != std::string::npos);
  CHECK(PerfOptions{}.recv_post_list == 1);
}

TEST_CASE("--out_json and --out_json_file: perftest 4.5's report file, with --perftest") {
  // perftest 4.5 (Debian's ib_write_bw): --out_json takes no argument ("option '--out_json'
  // doesn't allow an argument"), --out_json_file requires one; the default file is
  // perftest_out.json in the working directory.
  auto p = parse_notes({"send_bw", "h", "--perftest", "-x", "198.18.0.1", "--out_json"});
  INFO(p.error);
  REQUIRE(p.ok);
  CHECK(p.o.out_json);
  CHECK(p.o.out_json_file == "perftest_out.json");
  CHECK(p.notes.empty());
  CHECK(p.o.server == "h");
  p = parse_notes({"write_lat", "--perftest", "-x", "198.18.0.1", "--out_json_file", "/tmp/r.json",
                   "--out_json", "h"});
  REQUIRE(p.ok);
  CHECK(p.o.out_json);
  CHECK(p.o.out_json_file == "/tmp/r.json");  // its value is not the server
  CHECK(p.o.server == "h");
  p = parse_notes(
      {"send_bw", "h", "--perftest", "-x", "198.18.0.1", "--out_json_f=x.json", "--out_json"});
  REQUIRE(p.ok);
  CHECK(p.o.out_json_file == "x.json");
  // --out_json_file alone names the file; perftest writes nothing without --out_json.
  p = parse_notes({"send_bw", "h", "--perftest", "-x", "198.18.0.1", "--out_json_file=x.json"});
  REQUIRE(p.ok);
  CHECK_FALSE(p.o.out_json);
  REQUIRE(p.notes.size() == 1);
  CHECK(p.notes[0].find("no file is written without --out_json") != std::string::npos);
  CHECK(parse({"send_bw", "h", "--perftest", "-x", "198.18.0.1", "--out_json=1"})
            .error.find("--out_json takes no value") != std::string::npos);
  CHECK(parse({"send_bw", "h", "--perftest", "-x", "198.18.0.1", "--out_json_file"})
            .error.find("needs a value") != std::string::npos);
  CHECK(parse({"send_bw", "h", "--perftest", "-x", "198.18.0.1", "--out_json_file="})
            .error.find("needs a file name") != std::string::npos);
  CHECK(parse({"send_bw", "h", "--perftest", "-x", "198.18.0.1", "--out_jso"})
            .error.find("ambiguous") != std::string::npos);
  // conduit-perf's own mode has -J.
  for (const char* j : {"--out_json", "--out_json_file=x"}) {
    const auto own = parse({"send_bw", "h", j});
    INFO(j);
    CHECK_FALSE(own.ok);
    CHECK(own.error.find("is perftest's: it runs with --perftest") != std::string::npos);
    CHECK(own.error.find("-J") != std::string::npos);
  }
}

TEST_CASE("perftest's --source_ip is our port's address: -x's") {
  const auto p = parse({"send_bw", "h", "--perftest", "-R", "--source_ip", "198.18.0.1"});
  INFO(p.error);
  REQUIRE(p.ok);
  CHECK(p.o.gid == "198.18.0.1");
  CHECK(
      parse({"send_bw", "h", "--perftest", "-x", "198.18.0.1", "--source_ip", "::ffff:198.18.0.1"})
          .ok);
  CHECK(parse({"send_bw", "h", "--perftest", "-x", "198.18.0.1", "--source_ip", "198.18.0.9"})
            .error.find("differ") != std::string::npos);
}

TEST_CASE("--perftest takes -n with -D as perftest does: the time wins") {
  const auto p =
      parse_notes({"write_bw", "h", "--perftest", "-x", "198.18.0.1", "-n", "1000", "-D", "5"});
  INFO(p.error);
  REQUIRE(p.ok);
  CHECK(p.o.duration_s == 5);
  CHECK(p.o.iterations == 0);
  REQUIRE(p.notes.size() == 1);
  CHECK(p.notes[0].find("-n 1000 ignored") != std::string::npos);
  // conduit-perf's own mode still refuses the pair.
  CHECK(parse({"write_bw", "h", "-n", "1000", "-D", "5"}).error.find("exclude each other") !=
        std::string::npos);
}

TEST_CASE("long options: a unique prefix of perftest 4.5's is taken, an ambiguous one refused") {
  // getopt_long's rule, as perftest 4.5's binary applies it to its table: an exact name wins, a
  // prefix of exactly one option is that option, a prefix of several is refused naming them.
  // perftest's table holds --source_ip twice (two entries that differ), so getopt refuses its
  // shorter prefixes too ("possibilities: '--source_ip' '--source_ip'").
  std::vector<std::string> names;
  for (const auto& opt : kPerftest45Options) {
    if (std::string_view(opt.name).substr(0, 2) == "--") names.emplace_back(opt.name);
  }
  REQUIRE(names.size() == 111);
  size_t unique = 0, ambiguous = 0;
  for (const auto& opt : kPerftest45Options) {
    const std::string full = opt.name;
    if (full.substr(0, 2) != "--") continue;
    for (size_t len = 3; len < full.size(); ++len) {
      const std::string prefix = full.substr(0, len);
      std::vector<std::string> candidates;
      bool exact = false;
      for (const auto& n : names) {
        if (n == prefix) exact = true;
        if (n.compare(0, prefix.size(), prefix) == 0) candidates.push_back(n);
      }
      if (exact) continue;  // another option's whole name: that option
      // conduit-perf's own --gid (the address, -x) is a whole name here; perftest takes it for
      // --gid-index: its GID index is refused saying so (below).
      if (prefix == "--gid") continue;
      if (std::string("--source_ip").compare(0, prefix.size(), prefix) == 0) {
        candidates.push_back("--source_ip");
      }
      auto args = [&](const std::string& spelled) {
        std::vector<std::string> a = {"send_bw", "--perftest", "-x", "198.18.0.1", spelled};
        if (opt.valued) a.push_back("1");
        a.push_back("198.18.0.2");
        return a;
      };
      auto run = [](const std::vector<std::string>& a) {
        std::vector<const char*> v;
        for (const auto& s : a) v.push_back(s.c_str());
        return parse_notes(v);
      };
      const auto got = run(args(prefix));
      INFO(prefix << ": " << got.error);
      if (candidates.size() == 1) {
        ++unique;
        // Exactly what the whole name does.
        const auto want = run(args(full));
        CHECK(got.ok == want.ok);
        CHECK(got.error == want.error);
        CHECK(got.notes == want.notes);
        CHECK(got.o.server == want.o.server);
      } else {
        ++ambiguous;
        CHECK_FALSE(got.ok);
        CHECK(got.error.find("option '" + prefix + "' is ambiguous") != std::string::npos);
        for (const auto& c : candidates) {
          CHECK(got.error.find("'" + c + "'") != std::string::npos);
        }
        // No other option is named as a candidate.
        size_t quoted = 0;
        for (size_t at = got.error.find("'--"); at != std::string::npos;
             at = got.error.find("'--", at + 1)) {
          ++quoted;
        }
        CHECK(quoted == candidates.size() + 1);  // and the prefix itself
      }
    }
  }
  CHECK(unique > 400);
  CHECK(ambiguous > 100);

  // The spellings perftest users write.
  auto p = parse({"write_bw", "h", "--perftest", "-x", "198.18.0.1", "--iter=2000", "--report_gb",
                  "--siz", "4096", "--bidir", "--qp=4"});
  INFO(p.error);
  REQUIRE(p.ok);
  CHECK(p.o.iterations == 2000);
  CHECK(p.o.report_gbits);
  CHECK(p.o.sizes == std::vector<uint64_t>{4096});
  CHECK(p.o.bidirectional);
  CHECK(p.o.qps == 4);
  CHECK(parse({"send_bw", "h", "--perftest", "-x", "198.18.0.1", "--dur", "5"}).o.duration_s == 5);
  // --qp is a whole name (not a prefix of --qp-timeout); --qp- is --qp-timeout.
  CHECK(parse({"send_bw", "h", "--qp-", "9"}).o.qp_timeout == 9);
  CHECK(parse({"send_bw", "h", "--gid", "3"}).error.find("looks like perftest's GID index") !=
        std::string::npos);
  CHECK(parse({"send_bw", "h", "--gid-i", "3"}).error.find("perftest's GID index") !=
        std::string::npos);
  // Ambiguous: refused naming perftest's candidates.
  CHECK(parse({"send_bw", "h", "--re", "1"}).error.find("'--report_gbits'") != std::string::npos);
  CHECK(parse({"send_bw", "h", "--s", "1"}).error.find("is ambiguous; possibilities:") !=
        std::string::npos);
  // conduit-perf's own long options: exact, and by a prefix no perftest option starts with.
  for (const char* own :
       {"--check", "--json", "--gid", "--socket", "--class", "--timeout", "--cm", "--sr",
        "--perftest", "--yield", "--CPU-freq", "--MGID", "--report-histogram"}) {
    const auto q = parse({"send_bw", own, "1", "h"});
    INFO(own << ": " << q.error);
    CHECK(q.error.find("unknown option") == std::string::npos);
    CHECK(q.error.find("ambiguous") == std::string::npos);
  }
  CHECK(parse({"send_bw", "h", "--ch"}).o.check);
  CHECK(parse({"send_bw", "h", "--tim", "7"}).o.timeout_s == 7);
  CHECK(parse({"send_bw", "h", "--soc", "/run/c.sock"}).o.socket_path == "/run/c.sock");
  CHECK(parse({"send_bw", "h", "--cla", "bulk"}).o.traffic_class == "bulk");
  // ... but where perftest has options starting so, perftest's rule: --perf is its
  // --perform_warm_up, --cl its --client, --so ambiguous among its --source_*.
  CHECK(parse_notes({"send_bw", "h", "--perftest", "-x", "198.18.0.1", "--perf"})
            .notes.at(0)
            .find("--perform_warm_up ignored") != std::string::npos);
  CHECK(parse({"send_bw", "h", "--cl"}).error.find("--client") != std::string::npos);
  CHECK(parse({"send_bw", "h", "--so", "x"}).error.find("ambiguous") != std::string::npos);
  CHECK(parse({"send_bw", "h", "--nosuch"}).error.find("unknown option '--nosuch'") !=
        std::string::npos);
}

namespace {

// What main() exits with when parsing ends the run (a usage error, -h, -V).
int exit_status(std::vector<const char*> args) {
  args.insert(args.begin(), "conduit-perf");
  PerfOptions o;
  const auto r = parse_args(static_cast<int>(args.size()), args.data(), o);
  return conduit::perf::parse_exit_status(r, o);
}

}  // namespace

TEST_CASE("--perftest: usage errors, -h and -V exit 1, as perftest 4.5's binaries") {
  // perftest 4.5 (Debian's ib_send_bw, "6.06"), measured: an unknown option, a bad value
  // (-s abc, -q 0), a refused combination (-D with -a, -n not a multiple of -l), -h and -V all
  // exit 1 (its main's `return FAILURE` after the parser).
  CHECK(exit_status({"send_bw", "--perftest", "-x", "1.2.3.4", "--zzz"}) == 1);
  CHECK(exit_status({"send_bw", "--perftest", "-x", "1.2.3.4", "-s", "abc"}) == 1);
  CHECK(exit_status({"send_bw", "--perftest", "-x", "1.2.3.4", "-q", "0"}) == 1);
  CHECK(exit_status({"send_bw", "--perftest", "-x", "1.2.3.4", "-D", "2", "-a"}) == 1);
  CHECK(exit_status({"send_bw", "h", "--perftest", "-x", "1.2.3.4", "-l", "2", "-n", "7"}) == 1);
  CHECK(exit_status({"send_bw", "--perftest"}) == 1);  // no -x
  CHECK(exit_status({"--perftest", "-h"}) == 1);
  CHECK(exit_status({"send_bw", "-h", "--perftest"}) == 1);
  CHECK(exit_status({"send_bw", "--perftest", "-V"}) == 1);
  // --perftest after the mistake, or spelled as a prefix, is on the line all the same.
  CHECK(exit_status({"send_bw", "-s", "abc", "--perftest"}) == 1);
  CHECK(exit_status({"send_bw", "--zzz", "--perftes"}) == 1);
  // conduit-perf's own mode keeps its statuses: 2 on bad usage, 0 for -h and -V.
  CHECK(exit_status({"send_bw", "--zzz"}) == 2);
  CHECK(exit_status({"send_bw", "-s", "abc"}) == 2);
  CHECK(exit_status({"send_bw", "-a", "-s", "64"}) == 2);
  CHECK(exit_status({"-h"}) == 0);
  CHECK(exit_status({"--version"}) == 0);
  // --perf is perftest's --perform_warm_up (a prefix of one of its options), not --perftest.
  CHECK(exit_status({"send_bw", "--perf", "--zzz"}) == 2);
  // A line that runs: no status from the parse.
  CHECK(exit_status({"send_bw", "--perftest", "-x", "1.2.3.4"}) == -1);
  CHECK(exit_status({"send_bw"}) == -1);
}

TEST_CASE("-l 0: perftest's parser takes it; a side that posts sends cannot run it") {
  // perftest 4.5 takes -l 0 (strtol, checked only above 1) and allocates its post lists with
  // post_list WRs per QP: none. A side that never posts a send (a bandwidth server without -b,
  // read_lat's and atomic_lat's server) runs as with -l 1; one that does posts from the empty
  // list and counts 0 posted each time, and fails ("Couldn't post send") or worse.
  for (const char* t : {"send_bw", "write_bw", "read_bw", "atomic_bw", "read_lat", "atomic_lat"}) {
    auto p = parse_notes({t, "--perftest", "-x", "1.2.3.4", "-l", "0"});
    INFO(t << ": " << p.error);
    CHECK(p.ok);
    if (!p.ok) continue;
    CHECK(p.o.post_list == 1);
    CHECK(p.notes.empty());  // perftest says nothing either
    CHECK(exit_status({t, "--perftest", "-x", "1.2.3.4", "-l", "0"}) == -1);
  }
  CHECK(parse({"send_bw", "--perftest", "-x", "1.2.3.4", "--post_list=0", "-n", "7"}).ok);
  struct Refused {
    std::vector<const char*> args;
  };
  const std::vector<Refused> refused = {
      {{"send_bw", "h", "--perftest", "-x", "1.2.3.4", "-l", "0"}},
      {{"write_bw", "h", "--perftest", "-x", "1.2.3.4", "-l", "0"}},
      {{"read_bw", "h", "--perftest", "-x", "1.2.3.4", "-l", "0", "-D", "4"}},
      {{"write_bw", "--perftest", "-x", "1.2.3.4", "-b", "-l", "0"}},
      {{"send_lat", "--perftest", "-x", "1.2.3.4", "-l", "0"}},
      {{"write_lat", "--perftest", "-x", "1.2.3.4", "-l", "0"}},
      {{"read_lat", "h", "--perftest", "-x", "1.2.3.4", "-l", "0"}},
  };
  for (const auto& c : refused) {
    auto p = parse_notes(c.args);
    INFO(c.args[0] << " " << c.args[1] << ": " << p.error);
    CHECK_FALSE(p.ok);
    CHECK(p.error.find("-l (--post_list) 0") != std::string::npos);
    CHECK(p.error.find("Couldn't post send") != std::string::npos);
    CHECK(exit_status(c.args) == 1);
  }
  // conduit-perf's own mode posts one WR per call: -l 0 is ignored with a note, as -l 8.
  auto own = parse_notes({"send_bw", "h", "-l", "0"});
  REQUIRE(own.ok);
  CHECK(own.o.post_list == 1);
  REQUIRE(own.notes.size() == 1);
  CHECK(own.notes[0].find("-l (--post_list) 0 ignored without --perftest") != std::string::npos);
}
