// perftest's own out-of-band exchange (ib_send_bw, ib_write_bw, ib_read_bw, ib_send_lat,
// ib_write_lat over TCP port 18515, "Ethernet" data exchange method), so conduit-perf --perftest
// and the stock perftest tools run against each other. Learned from perftest's sources and from
// the binaries of perftest 4.5-0.17 (Debian bookworm, version string "6.06"; which handshakes
// each main() makes), checked against a capture of rxe talking to rxe:
//
//   each step is one fixed-size message each way; the client writes first
//   1. version        16 bytes: "6.06" and NULs (conduit-perf: its test, -b, -s/-n/-q after
//                     the NUL, where perftest reads nothing: PerftestRunShape below)
//   2. cycle buffer    4 bytes, big endian (perftest's cycle buffer, 4096)
//   3. cache line      4 bytes, big endian (64)
//   4. path MTU        2 bytes: the verbs MTU enum as text, "3" + NUL for 1024
//   5. handshakes     108 bytes each: "%04x:%04x:%06x:%06x:%08x:%016llx:" (LID, out_reads,
//                     QPN, PSN, rkey, vaddr), the 16 GID bytes as "%02x:", "%08x:" (SRQN),
//                     NUL. With -q N the first N carry QP 0 .. N-1's records; after them a
//                     handshake is a barrier (QP 0's record), except the one more round of
//                     N after the first barrier. The order of barriers, traffic and the end
//                     is the test's PerftestPlan below.
//   report            write_bw/read_bw: the client's report as 5 messages of 8 bytes, big
//                     endian: size, iterations (u64), BW peak, BW average [MiB/s], message
//                     rate [Mpps] (doubles); with -a only once, for the last size
//   close             one handshake, then "done" + NUL (5 bytes) from each side, no reply
//                     awaited. ib_write_lat 4.5 has none: it exits after its traffic, which
//                     closes the socket.
//
// Version conditions in perftest's sources: a sender writes the report's iterations as 8
// bytes when the *receiver's* version is >= 5.33 (ours is "6.06", so every peer that knows the
// rule sends 8, and expects 8 from us); the other atof(version) checks (e.g. write_bw's extra
// per-size handshake for >= 4.6) concern -b (duplex), which perftest mode does not speak.
//
// Plain values and byte arrays only; the socket side is perftest_session.cc. Every parser
// validates its input completely.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exchange.h"
#include "perf_options.h"
#include "perf_report.h"

namespace conduit::perf {

inline constexpr size_t kPerftestVersionBytes = 16;
inline constexpr size_t kPerftestRecordBytes = kQpRecordChars + 1;  // with its NUL
inline constexpr size_t kPerftestDoneBytes = 5;
inline constexpr size_t kPerftestReportFields = 5;
inline constexpr const char* kPerftestVersion = "6.06";
inline constexpr uint32_t kPerftestCycleBufferBytes = 4096;
inline constexpr uint32_t kPerftestCacheLineBytes = 64;
// The out_reads we advertise: perftest makes it the peer QP's max_rd_atomic, so our QPs'
// responders are given exactly this depth (max_dest_rd_atomic at connect). More READs in flight
// get NAK-invalid-request and fail the QP (seen with rxe's ib_read_bw when we advertised 16
// while conduitd's responders held 4, before libconduit could set the depth).
// tests/unit/perf checks it against the transport's maximum.
inline constexpr uint16_t kConduitReadResponderDepth = 16;

using PerftestVersion = std::array<uint8_t, kPerftestVersionBytes>;
using PerftestRecord = std::array<uint8_t, kPerftestRecordBytes>;
using PerftestU32 = std::array<uint8_t, 4>;
using PerftestU64 = std::array<uint8_t, 8>;
using PerftestMtu = std::array<uint8_t, 2>;

PerftestVersion perftest_version_message();
// "6.06": digits and dots, then only NULs. False on anything else.
bool parse_perftest_version(const PerftestVersion& m, std::string& out);

// conduit-perf's run in its version message, after the version's NUL, where perftest reads
// nothing (it takes the message as a C string: atof) and sends NULs: two conduit-perf sides so
// refuse a different test, -b, -s/-a, -n/-D or -q, which perftest 4.5's exchange does not carry
// (version, cycle buffer, cache line, MTU, records: it runs on, and fails or hangs later).
// Bytes 5..15: the run's kind, -q, -s (4 bytes big endian; 0: -a), the count (5 bytes big
// endian: -n up to 10^12, or -D's seconds). The kind: 0x80 | 0x10 (-D) | 0x08 (-b) | the test
// (TestKind, 0..7). An earlier conduit-perf sent 'n' (-n) or 'D' (-D) there, without the test
// and -b, and takes the new kind for a perftest peer's (nothing compared).
struct PerftestRunShape {
  bool sweep = false;     // -a
  uint64_t size = 0;      // -s (not -a)
  bool duration = false;  // count is -D's seconds, not -n
  uint64_t count = 0;
  uint32_t qps = 1;
  bool has_test = false;  // test and bidirectional are known (not from an earlier conduit-perf)
  TestKind test = TestKind::kSendBw;
  bool bidirectional = false;  // -b
};
PerftestRunShape perftest_run_shape(const PerfOptions& o);
PerftestVersion perftest_version_message(const PerftestRunShape& shape);
// The peer's, when it is a conduit-perf that sent one (nullopt from perftest).
std::optional<PerftestRunShape> parse_perftest_run_shape(const PerftestVersion& m);
// "" when alike; otherwise each difference, "-s 65536 here, -s 4096 at the peer", joined by "; ".
std::string perftest_shape_mismatch(const PerftestRunShape& mine, const PerftestRunShape& peer);

PerftestU32 perftest_u32(uint32_t v);  // big endian
uint32_t perftest_u32_value(const PerftestU32& m);
PerftestU64 perftest_u64(uint64_t v);
uint64_t perftest_u64_value(const PerftestU64& m);
PerftestU64 perftest_double(double v);  // the IEEE bits, big endian
double perftest_double_value(const PerftestU64& m);

// Path MTU in bytes (256..4096) <-> the 2-byte text of its verbs enum (1..5).
PerftestMtu perftest_mtu_message(uint32_t mtu_bytes);
bool parse_perftest_mtu(const PerftestMtu& m, uint32_t& mtu_bytes);

PerftestRecord perftest_record(const QpRecord& r);
bool parse_perftest_record(const PerftestRecord& m, QpRecord& out);

// perftest -R (rdma_cm): the exchange runs as SENDs on an rdma_cm connection of its own (the
// "comm" QP, one 56-byte receive posted at a time; the client sends first in every step, the
// server answers), the test QPs connect through rdma_cm (one REQ per QP, to the same port),
// and a connection record is perftest's struct pingpong_dest in binary, 56 bytes (x86_64):
//
//   0 lid, 4 out_reads, 8 qpn, 12 psn, 16 rkey   (32 bit, big endian)
//   20 padding (perftest leaves stack bytes there; ignored)
//   24 vaddr (64 bit, big endian), 32 gid (16 raw bytes), 48 srqn, 52 gid_index (32 bit, BE)
//
// Learned from perftest 4.5's sources and the Debian binaries (rdma_write_keys /
// rdma_read_keys). The version, cycle buffer, cache line, MTU and report messages are the same
// bytes as over TCP, each one SEND; the close is a handshake without the "done". Two more
// handshakes of 56 bytes (perftest's own are zeros) come right after the MTU, around the test
// QPs' connections: before the client's first REQ, and after the last connection is up.
inline constexpr size_t kPerftestCmRecordBytes = 56;
using PerftestCmRecord = std::array<uint8_t, kPerftestCmRecordBytes>;
PerftestCmRecord perftest_cm_record(const QpRecord& r);
// False when a field is out of its range (lid, out_reads > 16 bits; qpn, psn > 24 bits).
bool parse_perftest_cm_record(const PerftestCmRecord& m, QpRecord& out);

// The out_reads we advertise (perftest makes it the peer QP's max_rd_atomic) and the depth our
// QPs' responders get (max_dest_rd_atomic), as perftest uses its -o: -o, or without it
// kConduitReadResponderDepth.
uint16_t perftest_out_reads(const PerfOptions& o);

// -I: whether a message of `size` bytes is posted inline (CONDUIT_SEND_INLINE): perftest's
// size <= inline_size, within what conduit copies into a work request; SEND and WRITE only.
bool perftest_inline(const PerfOptions& o, uint64_t size);

// perftest's -D: from `start`, a warm-up margin, the sampled part, the same margin again, then
// the end; what completes in the sampled part is the result. The margin is -f (--margin) seconds,
// or perftest's default D/4 whole seconds: perftest_margin_s().
struct DurationWindow {
  uint64_t sample_begin_ns = 0;
  uint64_t sample_end_ns = 0;
  uint64_t end_ns = 0;
};
uint32_t perftest_margin_s(const PerfOptions& o);
// margin_s < duration_s / 2 (parse_args checks perftest's DURATION > 2*MARGIN).
DurationWindow perftest_duration_window(uint64_t start_ns, uint32_t duration_s, uint32_t margin_s);

// -l (--post_list) L: how many sends a QP posts now, chained in one call (0: none): L when the
// window has room for all of them (lists of more than the window are cut to it), fewer for the
// last ones of -n (`posted` of `iters`; `unbounded`, -D: no end).
uint32_t perftest_next_list(uint64_t posted, uint64_t iters, uint64_t outstanding, uint32_t window,
                            uint32_t post_list, bool unbounded);
// --recv_post_list N (SEND bandwidth tests): how many receives a QP posts again now, chained in
// one conduit_post_recv (0: none yet), as perftest posts its receives in lists of N. `idle`
// receives have completed and not been posted again; `posted` of `iters` are posted for the
// size (`unbounded`, -D: no end). A list of `list` once that many have completed; the last ones
// of -n however many are left. `list` 1 is a receive per completion.
uint32_t perftest_recv_list_to_post(uint64_t idle, uint64_t posted, uint64_t iters, uint32_t list,
                                    bool unbounded);

// perftest 4.5's CQ moderation for the bandwidth tests (force_dependecies): -Q, or 100 without
// it; without -Q, messages of more than 8192 bytes (one -s, not -a, not -e) get 1, every send
// signaled; at most the send queue (-t or 128, without -D at most -n); with -l L (> 1) and no
// -Q, L. 1 for the latency tests (every message signaled).
uint32_t perftest_cq_mod(const PerfOptions& o);
// The moderation a session runs with: perftest's `cq_mod` within our send window (a window full
// of sends must hold a signaled one, or nothing would complete), and with -l lists (cut to the
// window) that end on a signaled send: a divisor of the list.
uint32_t perftest_session_cq_mod(uint32_t cq_mod, uint32_t post_list, uint32_t window);
// Whether send `seq` (0, 1, ... on its QP) carries SIGNALED, as perftest's run_iter_bw: every
// cq_mod-th ((seq + 1) % cq_mod == 0, within a list the same: lists start at multiples of the
// list, a multiple of cq_mod), and the last of -n (`iters`; `unbounded`, -D: none). Each
// completion stands for the sends since the previous one (cq_mod of them).
bool perftest_signaled(uint64_t seq, uint64_t iters, uint32_t cq_mod, bool unbounded);

// What the client measured; sent by write_bw/read_bw after the traffic. The bandwidths are in
// the report's unit, as perftest puts them on the wire: MiB/s ("MB/sec", its default) or, with
// --report_gbits, Gb/s; the two sides must be given the same (perftest does not say which).
struct PerftestReport {
  uint64_t size_bytes = 0;
  uint64_t iterations = 0;
  double bw_peak = 0;  // MiB/s, or Gb/s with --report_gbits
  double bw_avg = 0;   // MiB/s, or Gb/s with --report_gbits
  double msg_rate_mpps = 0;
};
// Bytes per second in one unit of the report: 2^20 (MB/sec), or 125,000,000 (Gb/sec, 10^9 bit/s)
// with --report_gbits, as perftest's format_factor.
inline double perftest_bw_unit_bytes_per_s(bool gbits) { return gbits ? 125e6 : 1048576.0; }
// `messages` of `size` bytes; the rates count `timed` of them in `secs` (0: not measurable).
// The peak is the average: no per-message timestamps.
PerftestReport perftest_rate_report(uint64_t size, uint64_t messages, double secs, uint64_t timed,
                                    bool gbits);
// Whether perftest leaves the peak out of this side's bandwidth report (0.00 on the line and in
// the report sent to the peer), as perftest 4.5's force_dependecies() sets noPeak: -N, -D, the
// server of send_bw without -b, and (bandwidth tests) -n above 20000. False for latency tests.
bool perftest_no_peak(const PerfOptions& o, bool server);
// perftest's RESULT_LINE, which frames its header and results.
inline constexpr const char* kPerftestResultLine =
    "---------------------------------------------------------------------------------------\n";
// What perftest's parser prints on stdout about the options given (force_dependecies), before
// anything else: with -l above 1 and no -Q, that the moderation is the list's size.
std::string perftest_parser_remarks(const PerfOptions& o);
// What perftest's server prints on stdout before it waits for its client (not with --output).
std::string perftest_waiting_banner();
// The lines perftest 4.5 prints for a QP's record (ctx_print_pingpong_data), `side` "local" or
// "remote": LID, QPN, PSN; READs also OUT (out_reads), READs and WRITEs RKey and VAddr (not
// SEND, nor atomics: perftest 4.5 has no case for them); then the GID, its bytes in decimal.
std::string perftest_address_lines(const char* side, const QpRecord& r, TestKind t);
// Every QP's lines, in perftest's order: all of ours ("local"), then all the peer's ("remote").
std::string perftest_address_text(const std::vector<QpRecord>& mine,
                                  const std::vector<QpRecord>& peers, TestKind t);
// perftest's name of the test's verb: "Send", "RDMA_Write", "RDMA_Read", "Atomic".
const char* perftest_verb_name(TestKind t);
// What a session runs with, for its header.
struct PerftestRunValues {
  bool server = false;
  uint32_t mtu = 1024;       // the path MTU (the lower of the two sides')
  uint32_t tx_depth = 1;     // sends in flight per QP (the send window)
  uint32_t rx_depth = 0;     // receives posted per QP
  uint32_t cq_mod = 1;       // every cq_mod-th send signaled (bandwidth tests)
  uint32_t post_list = 1;    // sends per post (-l, within the window)
  uint32_t inline_size = 0;  // messages of up to this many bytes posted inline (SEND, WRITE)
  uint32_t out_reads = 0;    // READs and atomics our QPs serve at once (READ, atomic tests)
  std::string peer_version;  // from the version message (not with --dont_xchg_versions)
};
// The GID index perftest 4.5 prints on RoCE (" GID index       : %d" after the link type, and
// "GID_index" in --out_json's file): it prints it whenever its gid_index is not -1, and on an
// Ethernet link check_link_and_mtu() makes an unset one (no -x) 0, so a RoCE run always has
// one. conduitd's port has no GID table to index: its GID is the address -x names (or the TCP
// exchange's local address), IPv4-mapped or IPv6. 0 is what perftest prints for the equivalent
// run (perftest without -x), and the gid_index conduit-perf puts in its -R connection records.
inline constexpr int kPerftestGidIndex = 0;
// The header perftest 4.5 prints before a run (ctx_print_test_info), field by field as it
// prints them for the test, side and options, with the values of `v`: the title, with -e the
// events line ("conduitd_comp0": the device, one completion vector), dual-port,
// device ("conduitd"), QPs, transport, connection type, SRQ, PCIe relaxed ordering
// (Debian's build: ON, OFF with --disable_pcie_relaxed), ibv_wr* API (OFF: conduit's own post
// call), TX depth (client or -b), Post List (-l above 1), Recv Post List (--recv_post_list above
// 1, the option's value, on either side), RX depth (SEND tests: server or -b),
// CQ Moderation (bandwidth tests), Mtu, Link type, GID index (kPerftestGidIndex), Max inline
// data or Outstand reads, rdma_cm QPs, Data ex. method. With -e, after the title, perftest's
// " Test with events. Using conduitd_comp0" (the session sleeps on its CQ's one wake-up).
// Then conduit-perf's own lines: the iterations or the duration, the peer's version; with -R
// on the server, perftest's "Waiting for client rdma_cm QP to connect" after a rule (printed
// before the session waits for the test QPs' connections). Framed by kPerftestResultLine.
std::string perftest_test_info(const PerfOptions& o, const PerftestRunValues& v);

// --output: a bandwidth result as perftest prints it then ("%lf": the BW average in the report's
// unit, or the MsgRate in Mpps), and a latency one (t_avg, usec), without the newline.
std::string perftest_bw_output(const PerftestReport& r, PerftestOutput output);
std::string perftest_lat_output(double avg_us);
// perftest's bandwidth header (BW peak[MB/sec] or, with --report_gbits, [Gb/sec]), and a line.
std::string perftest_bw_header(bool gbits);
// The line is perftest's REPORT_FMT byte for byte (its spaces and tabs), or with --report_gbits
// and an average below 0.1 Gb/sec its REPORT_FMT_EXT, six decimals (perftest's inc_accuracy).
std::string perftest_bw_line(const PerftestReport& r, bool gbits);
// perftest's latency header and line byte for byte (RESULT_FMT_LAT with its trailing space,
// REPORT_FMT_LAT with its tabs), for the -n latency report.
std::string perftest_lat_header();
std::string perftest_lat_line(const LatResult& r);

// --cpu_util (-D): perftest reads /proc/stat's first line ("cpu  USER NICE SYSTEM IDLE ...")
// when its sample begins and ends (catch_alarm, which every -D test runs, bandwidth and latency),
// and reports USER's share of USER + IDLE over it (calc_cpu_util), as a column after the line's
// last number: the message rate, or on a latency -D line the tps average.
struct CpuTimes {
  uint64_t user = 0;
  uint64_t idle = 0;
};
bool parse_proc_stat_cpu(std::string_view first_line, CpuTimes& out);  // false: not that line
double perftest_cpu_util(const CpuTimes& begin, const CpuTimes& end);  // 0 when nothing moved
// What --cpu_util adds to the header (RESULT_EXT_CPU_UTIL) and to a line (REPORT_EXT_CPU_UTIL);
// "" without it.
std::string perftest_cpu_util_header(bool on);
std::string perftest_cpu_util_column(bool on, double util);
// A latency test's -D header and line (RESULT_FMT_LAT_DUR, REPORT_FMT_LAT_DUR: conduit-perf's
// lat_duration_header() and lat_duration_line()), with --cpu_util (`cpu`) perftest 4.5's
// CPU_Util[%] title and its column (print_report_lat_duration prints REPORT_EXT_CPU_UTIL).
std::string perftest_lat_duration_header(bool cpu);
std::string perftest_lat_duration_line(const LatDurationResult& r, bool cpu, double util);

// Whether perftest 4.5 prints --report-both's lines (and, through print_full_bw_report, writes
// --out_json's file with each of them): with -b, in the single-size branch of its bw tests'
// main() (RUN_REGULAR: -s) only. With -a (RUN_ALL) its loop prints each size's sum line and
// nothing more, so neither do we; the sum of the last size is then --out_json's last result.
bool perftest_report_both_printed(const PerfOptions& o);
// --report-both (-b): what perftest prints after the sum line: `rule`, " Local results: ", rule,
// the header and this side's line, rule, " Remote results: ", rule, the header and the peer's.
// `cpu_util` (< 0: no --cpu_util) goes after each line, as perftest's calc_cpu_util (its own).
// perftest prints this block whatever --output says (its printf()s there do not look at it):
// with --output the rules, titles and headers stay and each line is the one number
// (perftest_bw_output()), without the CPU column (print_full_bw_report prints that only in
// full verbosity; the header still has its CPU_Util[%] title).
std::string perftest_report_both_text(const PerftestReport& mine, const PerftestReport& theirs,
                                      bool gbits, const std::string& rule, double cpu_util = -1,
                                      PerftestOutput output = PerftestOutput::kFull);
std::array<PerftestU64, kPerftestReportFields> perftest_report_messages(const PerftestReport& r);

// --out_json: the file perftest 4.5 writes (Debian's 4.5-0.17 byte for byte: its dprintf()s),
// whole: "{", the test info, the results, "}". It is not JSON: the keys are bare words ("MsgSize:
// 65536,"), every value but Device's is unquoted, commas trail. perftest writes it where it
// prints a result (print_full_bw_report, print_report_lat, print_report_lat_duration), the file
// truncated each time, so the last result printed stays (with -a the last size; with
// --report-both the peer's own line).
// The test info ("test_info: {" .. "},"), in ctx_print_test_info's order with the header's
// values (perftest_test_info()): test (verb, atomic type, Bidirectional, Post_List, BW or
// Latency, "_"-joined), the -e line, Dual_port, Device (quoted), Number_of_qps, Transport_type,
// Connection_type, Using_SRQ, PCIe_relax_order, ibv_wr_API, "TX_depth :" (perftest's space),
// Post_List, Recv_Post_List, RX_depth, CQ_Moderation, Mtu (bytes), Link_type, GID_index,
// Max_inline_data or Outstand_reads, rdma_cm_QPs, Data_ex_method.
std::string perftest_json_test_info(const PerfOptions& o, const PerftestRunValues& v);
// A bandwidth result: MsgSize, n_iterations, BW_peak, BW_average (%.2lf, or %.6lf where the
// line has 6 decimals: Gb/sec below 0.1), MsgRate (%.6lf); with --output only bw_avg or
// msgRate_avg (%lf). Then "CPU_util: %.2f," with --cpu_util (cpu_util >= 0).
std::string perftest_json_bw(const PerfOptions& o, const PerftestRunValues& v,
                             const PerftestReport& r, double cpu_util = -1);
// A latency result: MsgSize, n_iterations, t_min, t_max, t_typical, t_avg, t_stdev,
// percentile_99, percentile_99.9 (%.2f), CPU_util with cpu_util >= 0; --output latency:
// "avg_lat: %lf," only.
std::string perftest_json_lat(const PerfOptions& o, const PerftestRunValues& v, const LatResult& r,
                              double cpu_util = -1);
// A latency result of -D: MsgSize, n_iterations, t_avg, tps_average (%.2f), CPU_util with
// cpu_util >= 0; --output latency: "t_avg: %lf" only (no comma: perftest's).
std::string perftest_json_lat_duration(const PerfOptions& o, const PerftestRunValues& v,
                                       const LatDurationResult& r, double cpu_util = -1);
// Writes `text` to `path` as perftest's open_file_write(): created mode 0600, truncated,
// O_CLOEXEC. False when it cannot be opened (perftest then prints "failed to open PATH" on
// stderr and runs on).
bool perftest_write_json_file(const std::string& path, const std::string& text);
// False when a value is impossible (negative or not finite rates, size 0 or > 1 GiB).
bool parse_perftest_report(const std::array<PerftestU64, kPerftestReportFields>& m,
                           PerftestReport& out);
// The report as the exchange steps carry it, one message each: size (8 bytes), iterations,
// then the three rates (8 each). perftest sizes the iterations by the version the peer told it:
// 8 bytes from 5.33 on (ours is 6.06), 4 when it knows none: with --dont_xchg_versions, which
// both sides must be given (then neither sends its version), `iters64` false.
std::vector<std::vector<uint8_t>> perftest_report_steps(const PerftestReport& r, bool iters64);
// False when a message has the wrong size or parse_perftest_report() refuses the values.
bool parse_perftest_report_steps(const std::vector<std::vector<uint8_t>>& m, bool iters64,
                                 PerftestReport& out);

// What happens on the exchange socket, and when, in one perftest session; perftest_plan() lists
// it per test and role. Each handshake is one PerftestRecord each way.
enum class PerftestStep : uint8_t {
  kConnect,       // one handshake per QP: the peer's QP records; connect our QPs to them
  kBarrier,       // one more handshake (QP 0's record)
  kRecords,       // one handshake per QP again (perftest prints the peer's QPs after it)
  kPostReceives,  // post the next size's receives (then a barrier tells the peer to send)
  kTraffic,       // the next size's traffic (bandwidth: the client only; latency: both)
  kReport,        // write_bw/read_bw: the client's PerftestReport, 5 x 8 bytes each way
  kClose,         // a handshake, then "done"; a peer that closes the socket instead is fine
  // The peer's traffic into our memory (WRITEs, READs, atomics: no completion here), which
  // ends with its next handshake: that one waits await_peer_ms() (perf_options.h), not -W.
  kAwaitPeer,
};
const char* perftest_step_name(PerftestStep s);  // "connect", "barrier", ...

struct PerftestPlan {
  std::vector<PerftestStep> steps;
  // The side that moves first in a ping-pong (write_lat: the server, send_lat: the client).
  bool server_starts = false;
};
// The plan of test t for one side, for `sizes` message sizes (1 for -s, 23 for -a). perftest
// 4.5 (write_lat.c, send_lat.c, send_bw.c, write_bw.c, read_bw.c):
//   all tests       connect, barrier, records (after connecting the QPs, the third); with
//                   -q N, connect and records are N handshakes each (perftest loops over its
//                   QPs there), every barrier one
//   send_bw         per size: the server posts receives, barrier, traffic; with -a a barrier
//                   after each size too (RUN_ALL); then close
//   write/read_bw   the client runs every size (the server awaits it); then a barrier,
//                   the report (the last size's), close
//   write_lat       barrier, traffic (the server writes first), then nothing: 4.5 exits. We
//                   still offer a close (answered by newer tools, a closed socket otherwise).
//                   -a: every size's traffic back to back, no handshake between them
//   send_lat        per size: both post receives, barrier, traffic (the client sends first);
//                   then close
//   read_lat        barrier; the client READs (traffic; -a: every size back to back) while the
//                   server awaits it, then close
// False (and no plan) without sizes.
bool perftest_plan(TestKind t, bool server, size_t sizes, PerftestPlan& out);
// The plan with -b (duplex: both sides send, the same plan for both; the bandwidth tests only):
//   send_bw         per size: both post receives, barrier, traffic, the reports both ways
//                   (each side prints the sum); with -a a barrier after each size; close
//   write/read_bw   per size: barrier, traffic (each side writes/reads the other), with -a a
//                   barrier if the peer's version is 4.6 or more (perftest tests its own), the
//                   reports both ways; close
// False for the latency tests.
bool perftest_duplex_plan(TestKind t, size_t sizes, const std::string& peer_version,
                          PerftestPlan& out);
// "connect barrier barrier ..." for messages and tests.
std::string perftest_plan_text(const PerftestPlan& p);

}  // namespace conduit::perf
