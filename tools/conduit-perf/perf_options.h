// conduit-perf's command line: perftest's options, parsed and validated.
//
//   conduit-perf TEST [SERVER] [options]
//
// Without SERVER the process is the server (waits for one client on --port);
// with it, the client, which decides sizes, iterations and the other test
// parameters and sends them to the server (exchange.h). Plain values only: no
// I/O here, so the parser is unit-tested and fuzzed without a daemon.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace conduit::perf {

// kAtomicBw / kAtomicLat: perftest's ib_atomic_bw / ib_atomic_lat (8-byte fetch-and-add or
// compare-and-swap; --perftest only).
enum class TestKind : uint8_t {
  kSendBw,
  kWriteBw,
  kReadBw,
  kSendLat,
  kWriteLat,
  kReadLat,
  kAtomicBw,
  kAtomicLat
};

const char* test_name(TestKind t);                        // "send_bw", ...
bool parse_test_name(std::string_view s, TestKind& out);  // false: unknown name
inline bool is_latency(TestKind t) {
  return t == TestKind::kSendLat || t == TestKind::kWriteLat || t == TestKind::kReadLat ||
         t == TestKind::kAtomicLat;
}
inline bool is_atomic(TestKind t) { return t == TestKind::kAtomicBw || t == TestKind::kAtomicLat; }

// Message sizes: 2 B .. 8 MiB for the -a sweep (perftest's range); -s accepts 1 B .. 1 GiB.
inline constexpr uint64_t kSweepMinBytes = 2;
inline constexpr uint64_t kSweepMaxBytes = 8ull << 20;
inline constexpr uint64_t kMaxMessageBytes = 1ull << 30;
inline constexpr uint32_t kMaxQps = 4096;
inline constexpr uint32_t kMaxDepth = 32768;  // what the exchange carries (-Q, a peer's)
// -t / -r: the deepest rings a conduitd policy can give (clients.quotas.max_send_wr /
// max_recv_wr). The daemon in use may hold fewer (256 by default): checked when the
// context opens (conduit_query_context).
inline constexpr uint32_t kMaxRingDepth = 32768;
inline constexpr uint16_t kDefaultPort = 18515;        // perftest's
inline constexpr uint64_t kPerftestMinIterations = 5;  // perftest refuses fewer (-n)
// --perftest -q: QPs share one CQ of 1024 entries; 64 leaves each 16 in flight.
inline constexpr uint32_t kPerftestMaxQps = 64;
// -I: perftest's most (MAX_INLINE), and what conduit copies into a work request at most
// (CONDUIT_SEND_INLINE, the shared rings' CONDUIT_SHM_MAX_INLINE).
inline constexpr uint32_t kPerftestMaxInline = 912;
inline constexpr uint32_t kConduitMaxInline = 96;
// -o: the most READs and atomics a conduitd QP serves at once (the transport's max read depth).
inline constexpr uint32_t kMaxPerftestOutReads = 16;

// perftest's --output: its result as one number per line (printf's %lf) and nothing else:
// bandwidth (the BW average), message_rate (the MsgRate), latency (t_avg).
enum class PerftestOutput : uint8_t { kFull, kBandwidth, kMessageRate, kLatency };

struct PerfOptions {
  TestKind test = TestKind::kSendBw;
  std::string server;  // empty: this process is the server
  uint16_t port = kDefaultPort;
  std::string socket_path;  // conduitd socket; empty: $CONDUIT_SOCKET or the default
  std::string gid;  // address the peer sends to (our daemon's); empty: the TCP local address
  std::vector<uint64_t> sizes{65536};  // -s one size, -a the sweep
  bool sweep = false;
  uint64_t iterations = 0;  // 0: the test's default (5000 bw, 1000 lat) unless duration is set
  uint32_t duration_s = 0;  // -D: run each size this long instead of a count
  uint32_t qps = 1;
  bool bidirectional = false;
  bool check = false;  // verify every byte that arrives (slower)
  bool json = false;
  bool events = false;    // -e: sleep on the CQ instead of busy polling
  bool yield = false;     // -Y: give the core up between polls instead of spinning
  uint32_t tx_depth = 0;  // 0: 128 for bw (fewer with many QPs), 16 for latency
  uint32_t rx_depth = 0;  // 0: 256 for bw (fewer with many QPs), 16 for latency
  uint32_t cq_mod = 0;    // signal every N sends; 0: min(64, tx_depth)
  uint32_t mtu = 0;       // path MTU bytes 256..4096; 0: 1024
  std::string traffic_class;
  uint32_t timeout_s = 30;  // no progress for this long: fail instead of hanging
  uint8_t qp_timeout = 14;  // -u: local ACK timeout 4.096 us * 2^N (not --cm); 0: none (IB's)
  bool atomic_cas = false;  // -A CMP_AND_SWAP (atomic_bw); default FETCH_AND_ADD, as perftest
  bool perftest = false;    // speak perftest's own exchange (perftest_wire.h) with stock tools
  // -R with --perftest: perftest's -R: the exchange and the test QPs on rdma_cm connections
  // (the IB CM) to -p, no TCP.
  bool perftest_rdma_cm = false;
  // --cm SERVICE: connect the QPs through conduitd's connection manager (the
  // server listens on SERVICE) instead of exchanging QPN/PSN over TCP; the TCP
  // channel still carries the parameters and the run's coordination.
  bool cm = false;
  uint64_t cm_service = 0;
  bool cm_selective_repeat = false;  // --sr: offer selective repeat through the CM
  // --report_gbits: --perftest's bandwidth in Gb/s (10^9 bit/s) instead of perftest's default
  // MiB/s ("MB/sec"), on the line and in the report the two sides exchange, as perftest.
  // conduit-perf's own report is in Gb/s either way.
  bool report_gbits = false;
  // -N (--noPeak): perftest's bandwidth lines give the peak as 0.00 (it does not compute it).
  // perftest also leaves the peak out with -D, on send_bw's server (not -b) and above -n 20000:
  // perftest_no_peak() (perftest_wire.h).
  bool no_peak = false;
  // -o (--outs) N, read_bw/read_lat/atomic_bw/atomic_lat with --perftest: the READs and atomics
  // our QPs serve at once, advertised to the peer as out_reads (perftest makes it the peer's
  // max_rd_atomic) and given to our responders (max_dest_rd_atomic), as perftest does with its
  // -o. 0: conduitd's most, kMaxPerftestOutReads; more is lowered to that (as perftest lowers
  // it to the device's max).
  uint32_t out_reads = 0;
  // -I (--inline_size) N, --perftest, SEND and WRITE tests: messages of up to N bytes are posted
  // inline (CONDUIT_SEND_INLINE: the payload copied into the work request), as perftest's -I;
  // conduit copies at most kConduitMaxInline bytes, so larger messages go from the buffer.
  // 0: none (perftest's bandwidth default).
  uint32_t inline_size = 0;
  // -f (--margin) SEC with --perftest -D: the warm-up and cool-down left out of the sample at
  // each end, as perftest's; -1: perftest's default, D/4 (perftest_margin_s()).
  int32_t margin_s = -1;
  // -l (--post_list) L, --perftest bandwidth tests: sends posted L at a time, chained in one
  // conduit_post_send, as perftest's post lists; -n must be a multiple of L (as perftest says).
  // parse_args() leaves it 1 or more (-l 0, which perftest takes, is 1 where no send is posted).
  uint32_t post_list = 1;
  // --dont_xchg_versions with --perftest, as perftest's: no version, system data or MTU
  // messages (each side runs its own MTU), and the report's iterations in 4 bytes, as perftest
  // sends them to a peer whose version it does not know. Both sides must be given it.
  bool dont_xchg_versions = false;
  // --report-both with --perftest -b: after the sum line, each direction's own (this side's
  // and the peer's report), as perftest's "Local results" / "Remote results": with one size
  // only, whatever --output says (perftest_report_both_printed()).
  bool report_both = false;
  // --cpu_util with --perftest -D: perftest's CPU_Util[%] column (/proc/stat's user time over
  // user + idle during the sample) on the bandwidth and latency lines. parse_args() clears it,
  // with a note, where perftest measures nothing (without -D).
  bool cpu_util = false;
  // --output with --perftest, as perftest's: no header, no addresses, no rules, only the number.
  PerftestOutput output = PerftestOutput::kFull;
  // --disable_pcie_relaxed with --perftest: the header's "PCIe relax order" is OFF instead of ON,
  // as Debian's perftest 4.5 prints it (nothing else changes: conduit has no PCIe device).
  bool disable_pcie_relaxed = false;
  // --recv_post_list N with --perftest (bandwidth tests): the SEND tests post their receives in
  // lists of N, chained in one conduit_post_recv, as perftest's; the header's "Recv Post List"
  // and --out_json's Recv_Post_List show it above 1 (WRITE, READ and atomic tests post no
  // receives, as perftest's: there it is only shown).
  uint32_t recv_post_list = 1;
  // --out_json with --perftest: each result perftest 4.5 prints is also written to
  // out_json_file (--out_json_file PATH; perftest's default, perftest_out.json in the working
  // directory), as perftest's print_full_bw_report / print_report_lat write it: truncated and
  // written again at each one, so the last one stays (perftest_json_*() in perftest_wire.h).
  bool out_json = false;
  std::string out_json_file = "perftest_out.json";
  bool help = false;
  bool version = false;

  bool is_server() const { return server.empty(); }
  uint64_t effective_iterations() const;
  uint32_t effective_tx_depth() const;
  uint32_t effective_rx_depth() const;
  uint32_t effective_cq_mod() const;
  uint32_t effective_mtu() const { return mtu == 0 ? 1024 : mtu; }
};

// How long a side waits for its peer's next message while the peer's WRITEs, READs or atomics
// run on its memory (they complete nothing there, so -W's "no progress" cannot apply): the
// run's -D seconds plus -W, in milliseconds; without -D (duration_s 0) the run has no known
// length: -1, as long as the out-of-band connection stays open (a peer that fails says so or
// closes it), as perftest's server waits.
int await_peer_ms(uint32_t duration_s, uint32_t timeout_s);

// 2, 4, 8, ... up to and including max_bytes (a power of two or not).
std::vector<uint64_t> sweep_sizes(uint64_t min_bytes, uint64_t max_bytes);

// Parses "65536", "64K", "4KiB", "8M", "1MiB", "1G". False on anything else or overflow.
bool parse_size(std::string_view s, uint64_t& out);

struct ParseResult {
  bool ok = false;
  std::string error;  // what is wrong and how to fix it, when !ok
  // perftest options that were accepted but mean nothing here (-d DEV, -l N): one line each
  // saying so, for stderr, so a perftest script runs and its user knows what was not done.
  std::vector<std::string> notes;
  // --perftest is on the line (anywhere, by any unique prefix; set even when !ok): the exit
  // statuses are perftest's (parse_exit_status()).
  bool perftest = false;
};

// argv[0] is skipped. Every value is range-checked; the first problem is reported.
ParseResult parse_args(int argc, const char* const* argv, PerfOptions& out);

// The status main() exits with when the parse ends the run, or -1 when the run goes on.
// conduit-perf's own: 2 on bad usage (!r.ok), 0 for -h and -V. With --perftest on the line,
// perftest 4.5's: 1 for all three, as its binaries exit after a parser error, a refused
// combination, its help and its version (measured on Debian's ib_send_bw 4.5-0.17).
int parse_exit_status(const ParseResult& r, const PerfOptions& o);

std::string usage_text();

}  // namespace conduit::perf
