// The out-of-band exchange between a conduit-perf client and server, over TCP.
//
// One message per line ('\n'), at most kMaxLineBytes, printable ASCII only:
//
//   client -> server  "conduit-perf/1 test=send_bw qps=1 sizes=2,4 iters=5000 ..."  (TestParams)
//   server -> client  "ok" | "error reason=..." (also for another test or --cm than its own)
//   client -> server  "qp <record>" x qps      then the server answers the same
//   per size:         "start size=N" -> "ready size=N"; traffic; "end size=N ..." each way
//                     (fields in RunReport); write_bw --check: "verified size=N mismatches=M"
//   client -> server  "bye"
//
// <record> is perftest's connection record text, so a reader who knows
// perftest recognises it: "%04x:%04x:%06x:%06x:%08x:%016llx:" (LID, out_reads,
// QPN, PSN, rkey, vaddr), the 16 GID bytes as "%02x:", then "%08x:" (SRQN).
//
// Everything received is validated before use: unknown keys, out-of-range
// values, overlong lines and stray bytes are errors with a message. Plain
// values, no I/O (tcp_line_channel.h does the socket side).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "perf_options.h"

namespace conduit::perf {

inline constexpr size_t kMaxLineBytes = 1024;
inline constexpr size_t kQpRecordChars = 107;  // perftest's 108-byte record without its NUL
inline constexpr const char* kProtocolTag = "conduit-perf/1";

using Gid = std::array<uint8_t, 16>;

struct QpRecord {
  uint16_t lid = 0;
  uint16_t out_reads = 0;
  uint32_t qpn = 0;    // 24 bit
  uint32_t psn = 0;    // 24 bit: the first PSN this side sends
  uint32_t rkey = 0;   // of the QP's buffer, for WRITE/READ
  uint64_t vaddr = 0;  // the buffer's iova
  Gid gid{};           // where to send: ::ffff:a.b.c.d for RoCEv2 over IPv4
  uint32_t srqn = 0;
  bool operator==(const QpRecord&) const = default;
};

std::string format_qp_record(const QpRecord& r);  // exactly kQpRecordChars characters
bool parse_qp_record(std::string_view s, QpRecord& out);

// "198.18.0.1" -> ::ffff:198.18.0.1; also full IPv6 text ("fe80::1", "::ffff:1.2.3.4").
bool parse_gid(std::string_view s, Gid& out);
std::string format_gid(const Gid& g);  // IPv4-mapped GIDs as the dotted IPv4 address

// What the client decided; the server runs with exactly these.
struct TestParams {
  TestKind test = TestKind::kSendBw;
  uint32_t qps = 1;
  std::vector<uint64_t> sizes;
  uint64_t iterations = 0;  // 0: duration_s decides
  uint32_t duration_s = 0;
  bool bidirectional = false;
  bool check = false;
  uint32_t tx_depth = 1;
  uint32_t rx_depth = 1;
  uint32_t cq_mod = 1;
  uint32_t mtu = 1024;
  uint32_t timeout_s = 30;
  // --cm: the service the client connects its QPs to; 0: QP records over TCP. Sent only when
  // set ("cm=N"), so a line without --cm reads as before.
  uint64_t cm_service = 0;
  bool operator==(const TestParams&) const = default;
};
inline constexpr size_t kMaxSizes = 64;

TestParams params_from_options(const PerfOptions& o);
std::string format_params(const TestParams& p);
// False with `error` saying what is wrong.
bool parse_params(std::string_view line, TestParams& out, std::string& error);
// What the server, started with `server`, cannot run of the client's parameters: another
// test, or --cm on one side only (or other services): both would wait for what the other
// never sends. Empty when they agree; the client's choices rule everything else.
std::string server_mismatch(const TestParams& client, const PerfOptions& server);

// A message: a verb and key=value fields. Keys [a-z_0-9]{1,32}; values
// [A-Za-z0-9_.,:/+-]{0,256}; at most 32 fields.
struct Message {
  std::string verb;
  std::vector<std::pair<std::string, std::string>> fields;

  std::optional<std::string_view> get(std::string_view key) const;
  // The field as a number in [lo, hi]; nullopt when missing or out of range.
  std::optional<uint64_t> get_u64(std::string_view key, uint64_t lo, uint64_t hi) const;
};
bool parse_message(std::string_view line, Message& out);
std::string format_message(const Message& m);
// Free text (an error reason) as a value: bytes a value may not hold become %XX,
// cut to the longest value a line carries. decode_text reverses it; control
// bytes come back as '?'.
std::string encode_text(std::string_view s);
std::string decode_text(std::string_view v);

// One side's measurement of one size, sent in "end" messages.
struct RunReport {
  uint64_t size_bytes = 0;
  uint64_t messages = 0;    // completed by this side's sender (or received, for receivers)
  uint64_t elapsed_ns = 0;  // first post to last completion
  uint64_t peak_bps = 0;    // best 10 ms window (whole run if shorter)
  uint64_t mismatches = 0;  // --check: messages whose bytes were wrong
  bool operator==(const RunReport&) const = default;
};
Message report_message(const RunReport& r);
bool parse_report(const Message& m, RunReport& out);

}  // namespace conduit::perf
