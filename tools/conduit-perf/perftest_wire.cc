#include "perftest_wire.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string_view>
#include <utility>

namespace conduit::perf {

PerftestVersion perftest_version_message() {
  PerftestVersion m{};
  std::memcpy(m.data(), kPerftestVersion, std::strlen(kPerftestVersion));
  return m;
}

bool parse_perftest_version(const PerftestVersion& m, std::string& out) {
  size_t n = 0;
  while (n < m.size() && m[n] != 0) {
    const uint8_t c = m[n];
    if (!((c >= '0' && c <= '9') || c == '.')) return false;
    ++n;
  }
  if (n == 0) return false;
  // What follows the NUL perftest never reads (atof); a conduit-perf peer's run is there.
  out.assign(reinterpret_cast<const char*>(m.data()), n);
  return true;
}

PerftestRunShape perftest_run_shape(const PerfOptions& o) {
  PerftestRunShape r;
  r.sweep = o.sweep;
  r.size = o.sweep ? 0 : o.sizes.at(0);
  r.duration = o.duration_s != 0;
  r.count = r.duration ? o.duration_s : o.effective_iterations();
  r.qps = o.qps;
  r.has_test = true;
  r.test = o.test;
  r.bidirectional = o.bidirectional;
  return r;
}

namespace {
// Where the run goes in the version message: after "6.06" and its NUL.
constexpr size_t kShapeAt = std::string_view(kPerftestVersion).size() + 1;
static_assert(kShapeAt + 11 == kPerftestVersionBytes, "the run fills the version message");
// The run's kind byte (perftest_wire.h): 0x80 | 0x10 (-D) | 0x08 (-b) | the test.
constexpr uint8_t kKindTagged = 0x80;
constexpr uint8_t kKindTagMask = 0xE0;
constexpr uint8_t kKindDuration = 0x10;
constexpr uint8_t kKindBidirectional = 0x08;
constexpr uint8_t kKindTestMask = 0x07;
static_assert(static_cast<uint8_t>(TestKind::kAtomicLat) == kKindTestMask,
              "every test fits in the kind byte's three bits");
}  // namespace

PerftestVersion perftest_version_message(const PerftestRunShape& shape) {
  PerftestVersion m = perftest_version_message();
  size_t at = kShapeAt;
  if (shape.has_test) {
    m[at++] = static_cast<uint8_t>(kKindTagged | (shape.duration ? kKindDuration : 0) |
                                   (shape.bidirectional ? kKindBidirectional : 0) |
                                   static_cast<uint8_t>(shape.test));
  } else {
    m[at++] = shape.duration ? 'D' : 'n';  // as an earlier conduit-perf
  }
  m[at++] = static_cast<uint8_t>(std::min<uint32_t>(shape.qps, 255));
  const uint64_t size = shape.sweep ? 0 : std::min<uint64_t>(shape.size, 0xFFFFFFFFu);
  for (int i = 3; i >= 0; --i) m[at++] = static_cast<uint8_t>(size >> (8 * i));
  const uint64_t count = std::min<uint64_t>(shape.count, (uint64_t{1} << 40) - 1);
  for (int i = 4; i >= 0; --i) m[at++] = static_cast<uint8_t>(count >> (8 * i));
  return m;
}

std::optional<PerftestRunShape> parse_perftest_run_shape(const PerftestVersion& m) {
  // Only after our own version (a perftest peer sends NULs there).
  if (std::memcmp(m.data(), kPerftestVersion, kShapeAt) != 0) return std::nullopt;
  size_t at = kShapeAt;
  const uint8_t kind = m[at++];
  PerftestRunShape r;
  if (kind == 'n' || kind == 'D') {
    r.duration = kind == 'D';  // an earlier conduit-perf: no test, no -b
  } else if ((kind & kKindTagMask) == kKindTagged) {
    r.duration = (kind & kKindDuration) != 0;
    r.has_test = true;
    r.bidirectional = (kind & kKindBidirectional) != 0;
    r.test = static_cast<TestKind>(kind & kKindTestMask);
  } else {
    return std::nullopt;
  }
  r.qps = m[at++];
  uint64_t size = 0;
  for (int i = 0; i < 4; ++i) size = size << 8 | m[at++];
  uint64_t count = 0;
  for (int i = 0; i < 5; ++i) count = count << 8 | m[at++];
  r.sweep = size == 0;
  r.size = size;
  r.count = count;
  if (r.qps == 0 || r.count == 0) return std::nullopt;
  return r;
}

std::string perftest_shape_mismatch(const PerftestRunShape& mine, const PerftestRunShape& peer) {
  std::string out;
  auto differ = [&out](const std::string& here, const std::string& there) {
    if (here == there) return;
    if (!out.empty()) out += "; ";
    out += here + " here, " + there + " at the peer";
  };
  auto size = [](const PerftestRunShape& s) {
    return s.sweep ? std::string("-a") : "-s " + std::to_string(s.size);
  };
  auto count = [](const PerftestRunShape& s) {
    return (s.duration ? "-D " : "-n ") + std::to_string(s.count);
  };
  if (mine.has_test && peer.has_test) {
    differ(test_name(mine.test), test_name(peer.test));
    differ(mine.bidirectional ? "-b" : "no -b", peer.bidirectional ? "-b" : "no -b");
  }
  differ(size(mine), size(peer));
  differ(count(mine), count(peer));
  differ("-q " + std::to_string(mine.qps), "-q " + std::to_string(peer.qps));
  return out;
}

PerftestU32 perftest_u32(uint32_t v) {
  return {static_cast<uint8_t>(v >> 24), static_cast<uint8_t>(v >> 16),
          static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)};
}

uint32_t perftest_u32_value(const PerftestU32& m) {
  return static_cast<uint32_t>(m[0]) << 24 | static_cast<uint32_t>(m[1]) << 16 |
         static_cast<uint32_t>(m[2]) << 8 | m[3];
}

PerftestU64 perftest_u64(uint64_t v) {
  PerftestU64 m{};
  for (size_t i = 0; i < 8; ++i) m[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
  return m;
}

uint64_t perftest_u64_value(const PerftestU64& m) {
  uint64_t v = 0;
  for (uint8_t b : m) v = v << 8 | b;
  return v;
}

PerftestU64 perftest_double(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return perftest_u64(bits);
}

double perftest_double_value(const PerftestU64& m) {
  const uint64_t bits = perftest_u64_value(m);
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

PerftestMtu perftest_mtu_message(uint32_t mtu_bytes) {
  uint8_t e = 3;  // 1024, perftest's default
  for (uint8_t i = 1; i <= 5; ++i) {
    if ((128u << i) == mtu_bytes) e = i;
  }
  return {static_cast<uint8_t>('0' + e), 0};
}

bool parse_perftest_mtu(const PerftestMtu& m, uint32_t& mtu_bytes) {
  if (m[1] != 0 || m[0] < '1' || m[0] > '5') return false;
  mtu_bytes = 128u << (m[0] - '0');
  return true;
}

PerftestRecord perftest_record(const QpRecord& r) {
  PerftestRecord m{};
  const std::string text = format_qp_record(r);
  std::memcpy(m.data(), text.data(), std::min(text.size(), kQpRecordChars));
  return m;  // the last byte stays NUL
}

bool parse_perftest_record(const PerftestRecord& m, QpRecord& out) {
  if (m[kQpRecordChars] != 0) return false;
  return parse_qp_record(std::string_view(reinterpret_cast<const char*>(m.data()), kQpRecordChars),
                         out);
}

namespace {

// A big-endian field of the binary record, through the exchange's own encoders.
template <size_t N>
void put(PerftestCmRecord& m, size_t at, const std::array<uint8_t, N>& v) {
  std::memcpy(&m[at], v.data(), N);
}
template <class A>
A field(const PerftestCmRecord& m, size_t at) {
  A a;
  std::memcpy(a.data(), &m[at], a.size());
  return a;
}
uint32_t u32_at(const PerftestCmRecord& m, size_t at) {
  return perftest_u32_value(field<PerftestU32>(m, at));
}

}  // namespace

PerftestCmRecord perftest_cm_record(const QpRecord& r) {
  PerftestCmRecord m{};
  put(m, 0, perftest_u32(r.lid));
  put(m, 4, perftest_u32(r.out_reads));
  put(m, 8, perftest_u32(r.qpn));
  put(m, 12, perftest_u32(r.psn));
  put(m, 16, perftest_u32(r.rkey));
  put(m, 24, perftest_u64(r.vaddr));
  put(m, 32, r.gid);
  put(m, 48, perftest_u32(r.srqn));
  // gid_index (52) stays 0: the peer's perftest ignores it.
  return m;
}

bool parse_perftest_cm_record(const PerftestCmRecord& m, QpRecord& out) {
  QpRecord r;
  const uint32_t lid = u32_at(m, 0), out_reads = u32_at(m, 4);
  r.qpn = u32_at(m, 8);
  r.psn = u32_at(m, 12);
  if (lid > 0xFFFF || out_reads > 0xFFFF || r.qpn > 0xFFFFFF || r.psn > 0xFFFFFF) return false;
  r.lid = static_cast<uint16_t>(lid);
  r.out_reads = static_cast<uint16_t>(out_reads);
  r.rkey = u32_at(m, 16);
  r.vaddr = perftest_u64_value(field<PerftestU64>(m, 24));
  r.gid = field<Gid>(m, 32);
  r.srqn = u32_at(m, 48);
  out = r;
  return true;
}

std::array<PerftestU64, kPerftestReportFields> perftest_report_messages(const PerftestReport& r) {
  return {perftest_u64(r.size_bytes), perftest_u64(r.iterations), perftest_double(r.bw_peak),
          perftest_double(r.bw_avg), perftest_double(r.msg_rate_mpps)};
}

uint16_t perftest_out_reads(const PerfOptions& o) {
  if (o.out_reads == 0) return kConduitReadResponderDepth;
  return static_cast<uint16_t>(std::min<uint32_t>(o.out_reads, kConduitReadResponderDepth));
}

bool perftest_inline(const PerfOptions& o, uint64_t size) {
  if (o.test == TestKind::kReadBw || o.test == TestKind::kReadLat || is_atomic(o.test)) {
    return false;
  }
  return size <= std::min(o.inline_size, kConduitMaxInline);
}

uint32_t perftest_margin_s(const PerfOptions& o) {
  return o.margin_s >= 0 ? static_cast<uint32_t>(o.margin_s) : o.duration_s / 4;
}

DurationWindow perftest_duration_window(uint64_t start_ns, uint32_t duration_s, uint32_t margin_s) {
  const uint64_t margin_ns = uint64_t{margin_s} * 1'000'000'000ull;
  DurationWindow w;
  w.end_ns = start_ns + uint64_t{duration_s} * 1'000'000'000ull;
  w.sample_begin_ns = start_ns + margin_ns;
  w.sample_end_ns = w.end_ns - margin_ns;
  return w;
}

uint32_t perftest_next_list(uint64_t posted, uint64_t iters, uint64_t outstanding, uint32_t window,
                            uint32_t post_list, bool unbounded) {
  const uint64_t list = std::clamp<uint64_t>(post_list, 1, std::max<uint32_t>(window, 1));
  if (outstanding + list > window) return 0;
  if (unbounded) return static_cast<uint32_t>(list);
  if (posted >= iters) return 0;
  return static_cast<uint32_t>(std::min(list, iters - posted));
}

uint32_t perftest_recv_list_to_post(uint64_t idle, uint64_t posted, uint64_t iters, uint32_t list,
                                    bool unbounded) {
  const uint64_t l = std::max<uint32_t>(list, 1);
  const uint64_t left = unbounded ? UINT64_MAX : posted < iters ? iters - posted : 0;
  if (left == 0 || idle == 0) return 0;
  if (idle >= l) return static_cast<uint32_t>(std::min(l, left));
  return idle >= left ? static_cast<uint32_t>(left) : 0;  // the last ones of -n
}

uint32_t perftest_cq_mod(const PerfOptions& o) {
  if (is_latency(o.test)) return 1;
  // perftest's DEF_CQ_MOD, MSG_SIZE_CQ_MOD_LIMIT and DISABLED_CQ_MOD_VALUE.
  constexpr uint32_t kDefault = 100;
  constexpr uint64_t kLargeMessage = 8192;
  uint64_t m = o.cq_mod != 0 ? o.cq_mod : kDefault;
  const uint64_t size = o.sizes.empty() ? 0 : o.sizes[0];
  if (o.cq_mod == 0 && size > kLargeMessage && !o.sweep && !o.events) m = 1;
  uint64_t tx_depth = o.tx_depth != 0 ? o.tx_depth : 128;
  if (o.duration_s == 0) tx_depth = std::min<uint64_t>(tx_depth, o.effective_iterations());
  m = std::min(m, tx_depth);
  if (o.post_list > 1 && o.cq_mod == 0) m = o.post_list;
  return static_cast<uint32_t>(std::max<uint64_t>(m, 1));
}

uint32_t perftest_session_cq_mod(uint32_t cq_mod, uint32_t post_list, uint32_t window) {
  const uint32_t m = std::max<uint32_t>(1, std::min(cq_mod, std::max<uint32_t>(window, 1)));
  if (post_list <= 1) return m;
  const uint32_t list = std::min(post_list, std::max<uint32_t>(window, 1));
  return std::gcd(list, m);
}

bool perftest_signaled(uint64_t seq, uint64_t iters, uint32_t cq_mod, bool unbounded) {
  if (cq_mod <= 1) return true;
  return (seq + 1) % cq_mod == 0 || (!unbounded && seq + 1 == iters);
}

PerftestReport perftest_rate_report(uint64_t size, uint64_t messages, double secs, uint64_t timed,
                                    bool gbits) {
  PerftestReport r;
  r.size_bytes = size;
  r.iterations = messages;
  if (secs > 0 && timed > 0) {
    r.bw_avg = static_cast<double>(size) * static_cast<double>(timed) / secs /
               perftest_bw_unit_bytes_per_s(gbits);
    r.msg_rate_mpps = static_cast<double>(timed) / secs / 1e6;
  }
  r.bw_peak = r.bw_avg;
  return r;
}

bool perftest_no_peak(const PerfOptions& o, bool server) {
  if (is_latency(o.test)) return false;
  return o.no_peak || o.duration_s != 0 ||
         (o.test == TestKind::kSendBw && server && !o.bidirectional) ||
         o.effective_iterations() > 20000;
}

std::string perftest_address_lines(const char* side, const QpRecord& r, TestKind t) {
  char b[160];
  std::snprintf(b, sizeof(b), " %s address: LID %#04x QPN %#06x PSN %#06x", side, r.lid, r.qpn,
                r.psn);
  std::string s = b;
  const bool read = t == TestKind::kReadBw || t == TestKind::kReadLat;
  const bool write = t == TestKind::kWriteBw || t == TestKind::kWriteLat;
  if (read) {
    std::snprintf(b, sizeof(b), " OUT %#04x", r.out_reads);
    s += b;
  }
  if (read || write) {
    std::snprintf(b, sizeof(b), " RKey %#08x VAddr %#016llx", r.rkey,
                  static_cast<unsigned long long>(r.vaddr));
    s += b;
  }
  s += "\n GID: ";
  for (size_t i = 0; i < r.gid.size(); ++i) {
    std::snprintf(b, sizeof(b), i == 0 ? "%02d" : ":%02d", r.gid[i]);
    s += b;
  }
  return s + "\n";
}

std::string perftest_address_text(const std::vector<QpRecord>& mine,
                                  const std::vector<QpRecord>& peers, TestKind t) {
  std::string s;
  for (const QpRecord& r : mine) s += perftest_address_lines("local", r, t);
  for (const QpRecord& r : peers) s += perftest_address_lines("remote", r, t);
  return s;
}

std::string perftest_parser_remarks(const PerfOptions& o) {
  if (is_latency(o.test) || o.post_list <= 1 || o.cq_mod != 0) return "";
  return std::string(kPerftestResultLine) +
         "Post List requested - CQ moderation will be the size of the post list\n";
}

std::string perftest_waiting_banner() {
  return "\n************************************\n"
         "* Waiting for client to connect... *\n"
         "************************************\n";
}

const char* perftest_verb_name(TestKind t) {
  switch (t) {
    case TestKind::kSendBw:
    case TestKind::kSendLat:
      return "Send";
    case TestKind::kWriteBw:
    case TestKind::kWriteLat:
      return "RDMA_Write";
    case TestKind::kReadBw:
    case TestKind::kReadLat:
      return "RDMA_Read";
    case TestKind::kAtomicBw:
    case TestKind::kAtomicLat:
      return "Atomic";
  }
  return "?";
}

std::string perftest_test_info(const PerfOptions& o, const PerftestRunValues& v) {
  const bool lat = is_latency(o.test);
  const bool send = o.test == TestKind::kSendBw || o.test == TestKind::kSendLat;
  const bool reads =
      o.test == TestKind::kReadBw || o.test == TestKind::kReadLat || is_atomic(o.test);
  std::string s = kPerftestResultLine;
  s += "                    ";
  s += perftest_verb_name(o.test);
  s += " ";
  if (is_atomic(o.test)) s += o.atomic_cas ? "CMP_AND_SWAP " : "FETCH_AND_ADD ";
  if (lat) {
    s += "Latency ";
  } else {
    if (o.bidirectional) s += "Bidirectional ";
    if (v.post_list > 1) s += "Post List ";
    s += "BW ";
  }
  s += "Test\n";
  char b[160];
  auto line = [&](const char* fmt, auto... args) {
    std::snprintf(b, sizeof(b), fmt, args...);
    s += b;
  };
  if (o.events) {
    // perftest: "<device>_comp<completion vector>". The session sleeps on the CQ's wake-up with
    // -e (it is not -Y's); a conduit CQ has one: vector 0 (-X is ignored, with a note).
    line(" Test with events. Using %s_comp%d\n", "conduitd", 0);
  }
  line(" Dual-port       : %s\t\tDevice         : %s\n", "OFF", "conduitd");
  line(" Number of qps   : %u\t\tTransport type : %s\n", o.qps, "IB");
  line(" Connection type : %s\t\tUsing SRQ      : %s\n", "RC", "OFF");
  // Debian's perftest 4.5 is built with libpci (HAVE_RO): "ON", or "OFF" with
  // --disable_pcie_relaxed (its MRs then go without IBV_ACCESS_RELAXED_ORDERING); a build
  // without libpci prints "Unsupported". Its warning that the CPU is not relaxed-ordering
  // compliant (found by scanning the PCI bus for Intel's Haswell/Broadwell-EP root ports) is
  // not printed: no PCIe device of conduit's writes a buffer, so it would warn of nothing.
  line(" PCIe relax order: %s\n", o.disable_pcie_relaxed ? "OFF" : "ON");
  line(" ibv_wr* API     : %s\n", "OFF");
  if (!v.server || o.bidirectional) line(" TX depth        : %u\n", v.tx_depth);
  if (v.post_list > 1) line(" Post List       : %u\n", v.post_list);
  if (o.recv_post_list > 1) line(" Recv Post List  : %u\n", o.recv_post_list);
  if (send && (v.server || o.bidirectional)) line(" RX depth        : %u\n", v.rx_depth);
  if (!lat) line(" CQ Moderation   : %u\n", v.cq_mod);
  line(" Mtu             : %u[B]\n", v.mtu);
  line(" Link type       : %s\n", "Ethernet");
  line(" GID index       : %d\n", kPerftestGidIndex);
  if (reads) {
    line(" Outstand reads  : %u\n", v.out_reads);
  } else {
    line(" Max inline data : %u[B]\n", v.inline_size);
  }
  line(" rdma_cm QPs\t : %s\n", o.perftest_rdma_cm ? "ON" : "OFF");
  line(" Data ex. method : %s\n", o.perftest_rdma_cm ? "rdma_cm" : "Ethernet");
  // conduit-perf's own: what perftest's header leaves out.
  if (o.duration_s != 0) {
    line(" Duration        : %u[sec]\n", o.duration_s);
  } else {
    line(" Iterations      : %llu\n", static_cast<unsigned long long>(o.effective_iterations()));
  }
  s += " Peer version    : ";
  s += o.dont_xchg_versions ? "not exchanged" : v.peer_version;
  s += "\n";
  if (o.perftest_rdma_cm && v.server) {
    // perftest's -R server, after its fields; the session prints it before it waits for the
    // client's test QPs (their rdma_cm connections).
    s += kPerftestResultLine;
    s += " Waiting for client rdma_cm QP to connect\n";
    s += " Please run the same command with the IB/RoCE interface IP\n";
  }
  return s + kPerftestResultLine;
}

std::string perftest_bw_output(const PerftestReport& r, PerftestOutput output) {
  char b[64];
  std::snprintf(b, sizeof(b), "%lf",
                output == PerftestOutput::kMessageRate ? r.msg_rate_mpps : r.bw_avg);
  return b;
}

std::string perftest_lat_output(double avg_us) {
  char b[64];
  std::snprintf(b, sizeof(b), "%lf", avg_us);
  return b;
}

std::string perftest_bw_header(bool gbits) {
  return gbits ? " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
               : " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
}

std::string perftest_bw_line(const PerftestReport& r, bool gbits) {
  // perftest's REPORT_FMT, or REPORT_FMT_EXT (6 decimals) for Gb/sec below 0.1 (inc_accuracy).
  const bool fine = gbits && r.bw_avg < 0.1;
  char b[256];
  std::snprintf(b, sizeof(b),
                fine ? " %-7llu    %llu           %-7.6f            %-7.6f            %-7.6f"
                     : " %-7llu    %-10llu       %-7.2f            %-7.2f\t\t   %-7.6f",
                static_cast<unsigned long long>(r.size_bytes),
                static_cast<unsigned long long>(r.iterations), r.bw_peak, r.bw_avg,
                r.msg_rate_mpps);
  return b;
}

std::string perftest_lat_header() {
  return " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
         "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";
}

std::string perftest_lat_line(const LatResult& r) {
  char b[256];
  std::snprintf(
      b, sizeof(b),
      " %-7llu %llu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f"
      "\t\t%-7.2f \t\t%-7.2f",
      static_cast<unsigned long long>(r.size_bytes), static_cast<unsigned long long>(r.iterations),
      r.min_us, r.max_us, r.typical_us, r.avg_us, r.stdev_us, r.p99_us, r.p999_us);
  return b;
}

bool parse_proc_stat_cpu(std::string_view line, CpuTimes& out) {
  if (line.substr(0, 4) != "cpu ") return false;
  uint64_t v[4] = {};
  size_t at = 3;
  for (uint64_t& f : v) {
    while (at < line.size() && line[at] == ' ') ++at;
    const char* b = line.data() + at;
    const auto [p, ec] = std::from_chars(b, line.data() + line.size(), f);
    if (ec != std::errc() || p == b) return false;
    at = static_cast<size_t>(p - line.data());
  }
  out.user = v[0];
  out.idle = v[3];
  return true;
}

double perftest_cpu_util(const CpuTimes& begin, const CpuTimes& end) {
  const double user = static_cast<double>(end.user) - static_cast<double>(begin.user);
  const double idle = static_cast<double>(end.idle) - static_cast<double>(begin.idle);
  if (user + idle <= 0 || user < 0 || idle < 0) return 0;
  return user / (user + idle) * 100;
}

std::string perftest_cpu_util_header(bool on) { return on ? "    CPU_Util[%]" : ""; }

std::string perftest_cpu_util_column(bool on, double util) {
  if (!on) return "";
  char b[64];
  std::snprintf(b, sizeof(b), "\t    %-3.2f", util);
  return b;
}

bool perftest_report_both_printed(const PerfOptions& o) {
  return o.perftest && o.report_both && o.bidirectional && !o.sweep;
}

std::string perftest_lat_duration_header(bool cpu) {
  return lat_duration_header() + perftest_cpu_util_header(cpu);
}

std::string perftest_lat_duration_line(const LatDurationResult& r, bool cpu, double util) {
  return lat_duration_line(r) + perftest_cpu_util_column(cpu, util);
}

std::string perftest_report_both_text(const PerftestReport& mine, const PerftestReport& theirs,
                                      bool gbits, const std::string& rule, double cpu_util,
                                      PerftestOutput output) {
  const bool cpu = cpu_util >= 0;
  const bool full = output == PerftestOutput::kFull;
  std::string t;
  for (const auto& [title, r] :
       {std::pair{" Local results: ", &mine}, std::pair{" Remote results: ", &theirs}}) {
    t += rule + "\n" + title + "\n" + rule + perftest_bw_header(gbits) +
         perftest_cpu_util_header(cpu) + "\n" +
         (full ? perftest_bw_line(*r, gbits) + perftest_cpu_util_column(cpu, cpu_util)
               : perftest_bw_output(*r, output)) +
         "\n";
  }
  return t;
}

namespace {

// printf into a string (the JSON file's lines are perftest's dprintf()s).
template <class... Args>
std::string format(const char* fmt, Args... args) {
  char b[256];
  std::snprintf(b, sizeof(b), fmt, args...);
  return b;
}

// perftest's "CPU_util: %.2f," (REPORT_EXT_CPU_UTIL_JSON) with --cpu_util, else nothing.
std::string json_cpu_util(double cpu_util) {
  return cpu_util >= 0 ? format("CPU_util: %.2f,\n", cpu_util) : std::string();
}

// The whole file around one result's "results: {" .. "},".
std::string json_file(const PerfOptions& o, const PerftestRunValues& v, const std::string& r) {
  return "{\n" + perftest_json_test_info(o, v) + "results: {\n" + r + "},\n}\n";
}

}  // namespace

std::string perftest_json_test_info(const PerfOptions& o, const PerftestRunValues& v) {
  const bool lat = is_latency(o.test);
  const bool send = o.test == TestKind::kSendBw || o.test == TestKind::kSendLat;
  const bool reads =
      o.test == TestKind::kReadBw || o.test == TestKind::kReadLat || is_atomic(o.test);
  std::string s = "test_info: {\n";
  s += "test: ";
  s += perftest_verb_name(o.test);
  s += "_";
  if (is_atomic(o.test)) s += o.atomic_cas ? "CMP_AND_SWAP_" : "FETCH_AND_ADD_";
  if (lat) {
    s += "Latency_";
  } else {
    if (o.bidirectional) s += "Bidirectional_";
    if (v.post_list > 1) s += "Post_List_";
    s += "BW_";
  }
  s += "Test,\n";
  if (o.events) s += format("Test with events: Using_%s_comp%d,\n", "conduitd", 0);
  s += format("Dual_port: %s,\nDevice: \"%s\",\n", "OFF", "conduitd");
  s += format("Number_of_qps: %u,\nTransport_type: %s,\n", o.qps, "IB");
  s += format("Connection_type: %s,\nUsing_SRQ: %s,\n", "RC", "OFF");
  s += format("PCIe_relax_order: %s,\n", o.disable_pcie_relaxed ? "OFF" : "ON");
  s += format("ibv_wr_API: %s,\n", "OFF");
  if (!v.server || o.bidirectional) s += format("TX_depth : %u,\n", v.tx_depth);
  if (v.post_list > 1) s += format("Post_List: %u,\n", v.post_list);
  if (o.recv_post_list > 1) s += format("Recv_Post_List: %u,\n", o.recv_post_list);
  if (send && (v.server || o.bidirectional)) s += format("RX_depth: %u,\n", v.rx_depth);
  if (!lat) s += format("CQ_Moderation: %u,\n", v.cq_mod);
  s += format("Mtu: %u,\n", v.mtu);
  s += format("Link_type: %s,\n", "Ethernet");
  s += format("GID_index: %d,\n", kPerftestGidIndex);
  s += reads ? format("Outstand_reads: %u,\n", v.out_reads)
             : format("Max_inline_data: %u,\n", v.inline_size);
  s += format("rdma_cm_QPs: %s,\n", o.perftest_rdma_cm ? "ON" : "OFF");
  s += format("Data_ex_method: %s,\n", o.perftest_rdma_cm ? "rdma_cm" : "Ethernet");
  return s + "},\n";
}

std::string perftest_json_bw(const PerfOptions& o, const PerftestRunValues& v,
                             const PerftestReport& r, double cpu_util) {
  std::string t;
  if (o.output == PerftestOutput::kBandwidth) {
    t = format("bw_avg: %lf,\n", r.bw_avg);
  } else if (o.output == PerftestOutput::kMessageRate) {
    t = format("msgRate_avg: %lf,\n", r.msg_rate_mpps);
  } else {
    // REPORT_FMT_EXT_JSON where the line is REPORT_FMT_EXT (inc_accuracy), else REPORT_FMT_JSON.
    const bool fine = o.report_gbits && r.bw_avg < 0.1;
    t = format(fine ? "MsgSize: %llu,\nn_iterations: %llu,\nBW_peak: %.6lf,\nBW_average: %.6lf,\n"
                      "MsgRate: %.6lf,\n"
                    : "MsgSize: %llu,\nn_iterations: %llu,\nBW_peak: %.2lf,\nBW_average: %.2lf,\n"
                      "MsgRate: %.6lf,\n",
               static_cast<unsigned long long>(r.size_bytes),
               static_cast<unsigned long long>(r.iterations), r.bw_peak, r.bw_avg, r.msg_rate_mpps);
  }
  // perftest writes the CPU utilization with --output too.
  return json_file(o, v, t + json_cpu_util(cpu_util));
}

std::string perftest_json_lat(const PerfOptions& o, const PerftestRunValues& v, const LatResult& r,
                              double cpu_util) {
  if (o.output == PerftestOutput::kLatency) {
    return json_file(o, v, format("avg_lat: %lf,\n", r.avg_us));
  }
  return json_file(
      o, v,
      format("MsgSize: %llu,\nn_iterations: %llu,\nt_min: %.2f,\nt_max: %.2f,\nt_typical: %.2f,\n"
             "t_avg: %.2f,\nt_stdev: %.2f,\npercentile_99: %.2f,\npercentile_99.9: %.2f,\n",
             static_cast<unsigned long long>(r.size_bytes),
             static_cast<unsigned long long>(r.iterations), r.min_us, r.max_us, r.typical_us,
             r.avg_us, r.stdev_us, r.p99_us, r.p999_us) +
          json_cpu_util(cpu_util));
}

std::string perftest_json_lat_duration(const PerfOptions& o, const PerftestRunValues& v,
                                       const LatDurationResult& r, double cpu_util) {
  if (o.output == PerftestOutput::kLatency) {
    return json_file(o, v, format("t_avg: %lf\n", r.avg_us));
  }
  return json_file(o, v,
                   format("MsgSize: %llu,\nn_iterations: %llu,\nt_avg: %.2f,\ntps_average: %.2f,\n",
                          static_cast<unsigned long long>(r.size_bytes),
                          static_cast<unsigned long long>(r.iterations), r.avg_us, r.tps) +
                       json_cpu_util(cpu_util));
}

bool perftest_write_json_file(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, S_IRUSR | S_IWUSR);
  if (fd < 0) return false;
  // perftest's dprintf()s ignore a short write; so does this (the file is a side report).
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return true;
}

bool parse_perftest_report(const std::array<PerftestU64, kPerftestReportFields>& m,
                           PerftestReport& out) {
  PerftestReport r;
  r.size_bytes = perftest_u64_value(m[0]);
  r.iterations = perftest_u64_value(m[1]);
  r.bw_peak = perftest_double_value(m[2]);
  r.bw_avg = perftest_double_value(m[3]);
  r.msg_rate_mpps = perftest_double_value(m[4]);
  if (r.size_bytes == 0 || r.size_bytes > kMaxMessageBytes) return false;
  for (double d : {r.bw_peak, r.bw_avg, r.msg_rate_mpps}) {
    if (!std::isfinite(d) || d < 0) return false;
  }
  out = r;
  return true;
}

std::vector<std::vector<uint8_t>> perftest_report_steps(const PerftestReport& r, bool iters64) {
  std::vector<std::vector<uint8_t>> steps;
  for (const PerftestU64& m : perftest_report_messages(r)) steps.emplace_back(m.begin(), m.end());
  if (!iters64) {
    const PerftestU32 it = perftest_u32(static_cast<uint32_t>(r.iterations));
    steps[1].assign(it.begin(), it.end());
  }
  return steps;
}

bool parse_perftest_report_steps(const std::vector<std::vector<uint8_t>>& m, bool iters64,
                                 PerftestReport& out) {
  if (m.size() != kPerftestReportFields) return false;
  std::array<PerftestU64, kPerftestReportFields> a{};
  for (size_t i = 0; i < kPerftestReportFields; ++i) {
    const size_t want = i == 1 && !iters64 ? 4 : 8;
    if (m[i].size() != want) return false;
    std::copy(m[i].begin(), m[i].end(), a[i].begin() + (8 - want));  // 4 bytes: zero-extended
  }
  return parse_perftest_report(a, out);
}

const char* perftest_step_name(PerftestStep s) {
  switch (s) {
    case PerftestStep::kConnect:
      return "connect";
    case PerftestStep::kBarrier:
      return "barrier";
    case PerftestStep::kRecords:
      return "records";
    case PerftestStep::kPostReceives:
      return "receives";
    case PerftestStep::kTraffic:
      return "traffic";
    case PerftestStep::kReport:
      return "report";
    case PerftestStep::kClose:
      return "close";
    case PerftestStep::kAwaitPeer:
      return "await_peer";
  }
  return "?";
}

bool perftest_plan(TestKind t, bool server, size_t sizes, PerftestPlan& out) {
  using S = PerftestStep;
  if (sizes == 0) return false;
  PerftestPlan p;
  p.steps = {S::kConnect, S::kBarrier, S::kRecords};
  switch (t) {
    case TestKind::kSendBw:
      for (size_t i = 0; i < sizes; ++i) {
        if (server) p.steps.push_back(S::kPostReceives);
        p.steps.push_back(S::kBarrier);
        p.steps.push_back(S::kTraffic);
        if (sizes > 1) p.steps.push_back(S::kBarrier);  // RUN_ALL's barrier after each size
      }
      p.steps.push_back(S::kClose);
      break;
    case TestKind::kWriteBw:
    case TestKind::kReadBw:
    case TestKind::kAtomicBw:  // as ib_atomic_bw: the server's memory answers, like READs
      if (server) {
        p.steps.push_back(S::kAwaitPeer);
      } else {
        p.steps.insert(p.steps.end(), sizes, S::kTraffic);
      }
      p.steps.push_back(S::kBarrier);
      p.steps.push_back(S::kReport);
      p.steps.push_back(S::kClose);
      break;
    case TestKind::kWriteLat:
      // Every size back to back: no handshake between them (the polled byte of each size is
      // one the smaller sizes never wrote).
      p.steps.push_back(S::kBarrier);
      p.steps.insert(p.steps.end(), sizes, S::kTraffic);
      p.steps.push_back(S::kClose);
      p.server_starts = true;
      break;
    case TestKind::kSendLat:
      // Per size: both post its receives, a barrier, the ping-pong.
      for (size_t i = 0; i < sizes; ++i) {
        p.steps.insert(p.steps.end(), {S::kPostReceives, S::kBarrier, S::kTraffic});
      }
      p.steps.push_back(S::kClose);
      p.server_starts = false;
      break;
    case TestKind::kReadLat:
    case TestKind::kAtomicLat:  // as ib_atomic_lat: the server's memory answers
      // Only the client has traffic (every size back to back); the server awaits it in the
      // close, whose handshake the client answers after its READs.
      p.steps.push_back(S::kBarrier);
      if (server) {
        p.steps.push_back(S::kAwaitPeer);
      } else {
        p.steps.insert(p.steps.end(), sizes, S::kTraffic);
      }
      p.steps.push_back(S::kClose);
      break;
  }
  out = std::move(p);
  return true;
}

bool perftest_duplex_plan(TestKind t, size_t sizes, const std::string& peer_version,
                          PerftestPlan& out) {
  using S = PerftestStep;
  if (sizes == 0 || is_latency(t)) return false;
  PerftestPlan p;
  p.steps = {S::kConnect, S::kBarrier, S::kRecords};
  // perftest's version is digits and dots (parse_perftest_version): strtod reads "6.06" as
  // perftest's atof() does.
  const bool size_barrier = std::strtod(peer_version.c_str(), nullptr) >= 4.6;
  for (size_t i = 0; i < sizes; ++i) {
    if (t == TestKind::kSendBw) {
      p.steps.insert(p.steps.end(), {S::kPostReceives, S::kBarrier, S::kTraffic, S::kReport});
      if (sizes > 1) p.steps.push_back(S::kBarrier);
    } else {
      p.steps.insert(p.steps.end(), {S::kBarrier, S::kTraffic});
      if (sizes > 1 && size_barrier) p.steps.push_back(S::kBarrier);
      p.steps.push_back(S::kReport);
    }
  }
  p.steps.push_back(S::kClose);
  out = std::move(p);
  return true;
}

std::string perftest_plan_text(const PerftestPlan& p) {
  std::string s;
  for (PerftestStep step : p.steps) {
    if (!s.empty()) s += ' ';
    s += perftest_step_name(step);
  }
  return s;
}

}  // namespace conduit::perf
