#include "perf_options.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>
#include <span>

#include "exchange.h"

namespace conduit::perf {

namespace {

struct TestNameEntry {
  TestKind kind;
  const char* name;
};
constexpr TestNameEntry kTestNames[] = {
    {TestKind::kSendBw, "send_bw"},     {TestKind::kWriteBw, "write_bw"},
    {TestKind::kReadBw, "read_bw"},     {TestKind::kSendLat, "send_lat"},
    {TestKind::kWriteLat, "write_lat"}, {TestKind::kReadLat, "read_lat"},
    {TestKind::kAtomicBw, "atomic_bw"}, {TestKind::kAtomicLat, "atomic_lat"},
};

bool parse_u64(std::string_view s, uint64_t& out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out, 10);
  return ec == std::errc() && p == end;
}

template <class T>
bool parse_uint_in(std::string_view s, T lo, T hi, T& out) {
  uint64_t v = 0;
  if (!parse_u64(s, v) || v < lo || v > hi) return false;
  out = static_cast<T>(v);
  return true;
}

// perftest's connection types (-c, --connection): perftest's spellings.
bool is_perftest_connection_type(std::string_view s) {
  for (const char* t : {"RC", "UC", "UD", "XRC", "DC", "SRD", "RawEth"}) {
    if (s == t) return true;
  }
  return false;
}

bool all_digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

std::string range_error(const std::string& opt, std::string_view value, uint64_t lo, uint64_t hi) {
  return "option " + opt + ": '" + std::string(value) + "' is not a number from " +
         std::to_string(lo) + " to " + std::to_string(hi);
}

// perftest's -S/--sl, -T/--tos and -W/--report-counters: what to write for conduit-perf.
std::string perftest_sl_advice(std::string_view sl) {
  return "looks like perftest's service level (-S/--sl); conduit-perf's -S is conduitd's socket "
         "path. conduit's QPs take their priority (PCP and DSCP) from a traffic class of "
         "conduitd's policy: give --class NAME instead" +
         std::string(sl == "0" ? ", or drop it (SL 0 is perftest's default)" : "");
}

std::string perftest_tos_advice(std::string_view) {
  return "looks like perftest's type of service (-T/--tos, rdma_cm's TOS); conduit-perf's -T is a "
         "traffic class of conduitd's policy, whose DSCP the QPs' packets carry: give --class "
         "NAME (conduitctl policy show lists the classes)";
}

std::string perftest_counters_advice(const std::string& what) {
  return "option " + what +
         ": looks like perftest's -W (--report-counters); conduit-perf's -W is the no-progress "
         "timeout in seconds. conduitd's counters: conduitctl stats, before and after the run";
}

// perftest 4.5's options (ib_send/write/read_bw/lat, getopt_long's table) that conduit-perf has
// no equivalent for: refused with the reason, or (kNote) taken and ignored with a note, where
// what they change is local to perftest and the run here is the same without it. The ones that
// depend on their value or on other options are handled in parse_args() itself.
enum class PerftestOnly : uint8_t { kRefuse, kNote };
struct PerftestOnlyOption {
  const char* short_name;  // nullptr: none
  const char* long_name;   // nullptr: none
  bool valued;
  PerftestOnly what;
  const char* why;
};
constexpr const char* kWhyMulticast = "perftest's multicast runs UD QPs; conduit runs RC QPs only";
constexpr const char* kWhyDualPort =
    "a conduitd drives one port: for a second port, run another conduit-perf on the conduitd "
    "that drives it (-S)";
constexpr const char* kWhyRawEth =
    "it is perftest's raw Ethernet option (raw_ethernet_bw/lat), which the ib_* tests and "
    "conduit's RC QPs do not use";
constexpr const char* kWhyRate =
    "conduit-perf does not pace its sends: their rate is conduit's congestion control's (DCQCN) "
    "within the traffic class's policy";
constexpr const char* kWhyLimit =
    "conduit-perf does not fail a run below a limit: compare the line's BW average or MsgRate "
    "column instead";
constexpr const char* kWhyDc = "it is for DC, mlx5's dynamically connected QPs; conduit runs RC";
constexpr const char* kWhyCrypto = "it is mlx5's AES-XTS offload; conduit does not encrypt";
constexpr const char* kWhyMmap =
    "the buffers are conduit MRs in conduitd's shared memory, not a file's pages";
constexpr PerftestOnlyOption kPerftestOnly[] = {
    {"-g", "--mcg", false, PerftestOnly::kRefuse, kWhyMulticast},
    {"-M", "--MGID", true, PerftestOnly::kRefuse, kWhyMulticast},
    {"-O", "--dualport", false, PerftestOnly::kRefuse, kWhyDualPort},
    {nullptr, "--report-per-port", false, PerftestOnly::kRefuse, kWhyDualPort},
    {"-z", "--comm_rdma_cm", false, PerftestOnly::kRefuse,
     "perftest's exchange over rdma_cm with QPs connected from its records is not done here: "
     "give both sides -R (the exchange and the QPs through rdma_cm) or neither (the TCP "
     "exchange)"},
    {nullptr, "--tclass", true, PerftestOnly::kRefuse,
     "the traffic class (DSCP) of conduit's packets is the one of conduitd's policy class the "
     "QPs run in: give -T/--class NAME (conduitctl policy show lists the classes)"},
    {nullptr, "--reversed", false, PerftestOnly::kRefuse,
     "the server sending to the client is not done here: swap the two sides' roles"},
    {"-w", "--limit_bw", true, PerftestOnly::kRefuse, kWhyLimit},
    {"-y", "--limit_msgrate", true, PerftestOnly::kRefuse, kWhyLimit},
    {nullptr, "--rate_limit", true, PerftestOnly::kRefuse, kWhyRate},
    {nullptr, "--rate_units", true, PerftestOnly::kRefuse, kWhyRate},
    {nullptr, "--rate_limit_type", true, PerftestOnly::kRefuse, kWhyRate},
    {nullptr, "--burst_size", true, PerftestOnly::kRefuse, kWhyRate},
    {nullptr, "--typical_pkt_size", true, PerftestOnly::kRefuse, kWhyRate},
    {nullptr, "--latency_gap", true, PerftestOnly::kRefuse,
     "conduit-perf runs the ping-pong's exchanges back to back, with no gap between them"},
    {nullptr, "--mmap", true, PerftestOnly::kRefuse, kWhyMmap},
    {nullptr, "--mmap-offset", true, PerftestOnly::kRefuse, kWhyMmap},
    {nullptr, "--dlid", true, PerftestOnly::kRefuse,
     "RoCE has no LIDs: the peer is addressed by its GID (its -x)"},
    {nullptr, "--log_dci_streams", true, PerftestOnly::kRefuse, kWhyDc},
    {nullptr, "--log_active_dci_streams", true, PerftestOnly::kRefuse, kWhyDc},
    {nullptr, "--aes_xts", false, PerftestOnly::kRefuse, kWhyCrypto},
    {nullptr, "--encrypt_on_tx", false, PerftestOnly::kRefuse, kWhyCrypto},
    {nullptr, "--sig_before", false, PerftestOnly::kRefuse, kWhyCrypto},
    {nullptr, "--aes_block_size", true, PerftestOnly::kRefuse, kWhyCrypto},
    {nullptr, "--data_enc_keys_number", true, PerftestOnly::kRefuse, kWhyCrypto},
    {nullptr, "--kek_path", true, PerftestOnly::kRefuse, kWhyCrypto},
    {nullptr, "--credentials_path", true, PerftestOnly::kRefuse, kWhyCrypto},
    {nullptr, "--data_enc_key_app_path", true, PerftestOnly::kRefuse, kWhyCrypto},
    {"-B", "--source_mac", true, PerftestOnly::kRefuse, kWhyRawEth},
    {"-E", "--dest_mac", true, PerftestOnly::kRefuse, kWhyRawEth},
    {"-j", nullptr, true, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--dest_ip", true, PerftestOnly::kRefuse, kWhyRawEth},
    {"-k", "--source_port", true, PerftestOnly::kRefuse, kWhyRawEth},
    {"-K", "--dest_port", true, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--local_ip", true, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--remote_ip", true, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--local_mac", true, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--remote_mac", true, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--local_port", true, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--remote_port", true, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--ethertype", true, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--vlan_pcp", true, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--reply_every", true, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--flows", true, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--flows_burst", true, PerftestOnly::kRefuse, kWhyRawEth},
    {"-v", "--mac_fwd", false, PerftestOnly::kRefuse, kWhyRawEth},
    {"-P", "--client", false, PerftestOnly::kRefuse, kWhyRawEth},
    {"-Z", "--server", false, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--sniffer", false, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--promiscuous", false, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--use_rss", false, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--raw_ipv6", false, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--raw_mcast", false, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--tcp", false, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--vlan_en", false, PerftestOnly::kRefuse, kWhyRawEth},
    {nullptr, "--mr_per_qp", false, PerftestOnly::kNote,
     "one MR serves every QP (each peer QP is told its address and rkey all the same)"},
    {nullptr, "--odp", false, PerftestOnly::kNote,
     "conduit's MRs are conduitd's shared memory, present from the start: nothing to page in"},
    {nullptr, "--use_hugepages", false, PerftestOnly::kNote,
     "the buffers are in conduitd's shared memory region, which conduitd allocates"},
    {nullptr, "--use_old_post_send", false, PerftestOnly::kNote,
     "conduit has one post call (conduit_post_send)"},
    {nullptr, "--perform_warm_up", false, PerftestOnly::kNote,
     "no warm-up round is run before the measured one"},
    {nullptr, "--ipv6", false, PerftestOnly::kNote,
     "the address is -x's: give it an IPv6 GID to run over IPv6"},
    {nullptr, "--wait_destroy", true, PerftestOnly::kNote,
     "conduit-perf releases its QPs and memory when it ends"},
    {nullptr, "--retry_count", true, PerftestOnly::kNote,
     "conduit-perf's QPs retry 7 times (with -R as conduitd's connection manager agrees)"},
    {nullptr, "--inline_recv", true, PerftestOnly::kNote,
     "conduit has no inline receive: the data lands in the posted buffer"},
};

// perftest 4.5's long options, in the order of its getopt_long table (the order its binary
// lists them in when a prefix is ambiguous). --source_ip is in it twice, as two entries that
// differ, so getopt takes "--source_ip" itself but refuses every shorter prefix of it as
// ambiguous. Its help's --CPU-freq (-F) and --MGID (-M) are not in it.
constexpr const char* kPerftestLongOptions[] = {
    "--all",
    "--atomic_type",
    "--aes_xts",
    "--aes_block_size",
    "--bidirectional",
    "--burst_size",
    "--connection",
    "--comm_rdma_cm",
    "--cq-mod",
    "--client",
    "--cpu_util",
    "--credentials_path",
    "--dualport",
    "--duration",
    "--dest_mac",
    "--dest_ip",
    "--dest_port",
    "--dont_xchg_versions",
    "--dlid",
    "--data_enc_keys_number",
    "--data_enc_key_app_path",
    "--disable_pcie_relaxed",
    "--events",
    "--ethertype",
    "--encrypt_on_tx",
    "--force-link",
    "--flow_label",
    "--flows",
    "--flows_burst",
    "--hop_limit",
    "--help",
    "--ib-dev",
    "--ib-port",
    "--iters",
    "--inline_size",
    "--inline_recv",
    "--ipv6",
    "--limit_bw",
    "--limit_msgrate",
    "--local_mac",
    "--local_ip",
    "--local_port",
    "--latency_gap",
    "--log_dci_streams",
    "--log_active_dci_streams",
    "--mtu",
    "--mcg",
    "--margin",
    "--mac_fwd",
    "--mmap",
    "--mmap-offset",
    "--mr_per_qp",
    "--outs",
    "--output",
    "--out_json",
    "--out_json_file",
    "--odp",
    "--port",
    "--post_list",
    "--pkey_index",
    "--promiscuous",
    "--perform_warm_up",
    "--qp-timeout",
    "--qp",
    "--rdma_cm",
    "--rx-depth",
    "--report-cycles",
    "--report-histogrm",
    "--report-unsorted",
    "--report-counters",
    "--remote_mac",
    "--remote_ip",
    "--remote_port",
    "--run_infinitely",
    "--report_gbits",
    "--report-both",
    "--reversed",
    "--rate_limit",
    "--rate_limit_type",
    "--rate_units",
    "--retry_count",
    "--raw_ipv6",
    "--report-per-port",
    "--raw_mcast",
    "--reply_every",
    "--recv_post_list",
    "--size",
    "--sl",
    "--source_mac",
    "--source_ip",
    "--source_port",
    "--server",
    "--sniffer",
    "--sig_before",
    "--source_ip",
    "--tx-depth",
    "--tos",
    "--tcp",
    "--typical_pkt_size",
    "--tclass",
    "--use_rss",
    "--use-srq",
    "--use_hugepages",
    "--use_old_post_send",
    "--vector",
    "--version",
    "--vlan_en",
    "--vlan_pcp",
    "--gid-index",
    "--kek_path",
    "--noPeak",
    "--wait_destroy",
};
// conduit-perf's long options that perftest 4.5 does not have.
constexpr const char* kOwnLongOptions[] = {
    "--check", "--json",     "--gid",   "--socket",   "--class", "--timeout",          "--cm",
    "--sr",    "--perftest", "--yield", "--CPU-freq", "--MGID",  "--report-histogram",
};

// getopt_long's rule, as perftest applies it: a whole name is that option; otherwise a prefix
// of one option of perftest's table is that option, of several is refused naming them all.
// Where no perftest option starts so, the same over conduit-perf's own. `name` is rewritten
// to the whole name; a name nothing starts with is left for the caller to refuse.
bool resolve_long_option(std::string& name, std::string& error) {
  if (name.size() <= 2) return true;
  const std::span<const char* const> tables[] = {kPerftestLongOptions, kOwnLongOptions};
  for (const auto table : tables) {
    for (const char* n : table) {
      if (name == n) return true;
    }
  }
  std::vector<std::string_view> candidates;
  for (const auto table : tables) {
    for (const char* n : table) {
      if (std::string_view(n).starts_with(name)) candidates.emplace_back(n);
    }
    if (!candidates.empty()) break;  // perftest's options first, as perftest has no others
  }
  if (candidates.empty()) return true;
  if (candidates.size() == 1) {
    name = std::string(candidates[0]);
    return true;
  }
  error = "option '" + name + "' is ambiguous; possibilities:";
  for (std::string_view c : candidates) error += " '" + std::string(c) + "'";
  if (std::all_of(candidates.begin(), candidates.end(),
                  [&](std::string_view c) { return c == candidates[0]; })) {
    error += " (as perftest's, whose table has " + std::string(candidates[0]) + " twice): give " +
             std::string(candidates[0]) + " in full";
  } else {
    error += " (as perftest's getopt: give more of the name)";
  }
  return false;
}

const PerftestOnlyOption* find_perftest_only(const std::string& name) {
  for (const auto& e : kPerftestOnly) {
    if ((e.short_name != nullptr && name == e.short_name) ||
        (e.long_name != nullptr && name == e.long_name)) {
      return &e;
    }
  }
  return nullptr;
}

}  // namespace

const char* test_name(TestKind t) {
  for (const auto& e : kTestNames) {
    if (e.kind == t) return e.name;
  }
  return "unknown";
}

bool parse_test_name(std::string_view s, TestKind& out) {
  for (const auto& e : kTestNames) {
    if (s == e.name) {
      out = e.kind;
      return true;
    }
  }
  return false;
}

uint64_t PerfOptions::effective_iterations() const {
  if (iterations != 0) return iterations;
  if (duration_s != 0) return 0;
  return is_latency(test) ? 1000 : 5000;
}

uint32_t PerfOptions::effective_tx_depth() const {
  if (tx_depth != 0) return tx_depth;
  // Ping-pong: one message in flight, but the sends' ACKs may trail the answers.
  if (is_latency(test)) return 16;
  // Many QPs share one daemon: keep the total in flight near 4096 WRs.
  return std::clamp<uint32_t>(4096 / qps, 8, 128);
}

uint32_t PerfOptions::effective_rx_depth() const {
  if (rx_depth != 0) return rx_depth;
  if (is_latency(test)) return 16;
  // conduitd's receive rings hold 256 entries.
  return std::clamp<uint32_t>(16384 / qps, 16, 256);
}

uint32_t PerfOptions::effective_cq_mod() const {
  const uint32_t depth = effective_tx_depth();
  if (check) return 1;  // every send completes visibly: its slot may be refilled
  const uint32_t m = cq_mod != 0 ? cq_mod : 64;
  return std::max<uint32_t>(1, std::min(m, depth));
}

int await_peer_ms(uint32_t duration_s, uint32_t timeout_s) {
  if (duration_s == 0) return -1;
  const uint64_t ms = (uint64_t{duration_s} + timeout_s) * 1000;
  return static_cast<int>(std::min<uint64_t>(ms, std::numeric_limits<int>::max()));
}

std::vector<uint64_t> sweep_sizes(uint64_t min_bytes, uint64_t max_bytes) {
  std::vector<uint64_t> out;
  if (min_bytes == 0 || min_bytes > max_bytes) return out;
  uint64_t s = min_bytes;
  for (;;) {
    out.push_back(s);
    if (s > max_bytes / 2) break;
    s *= 2;
  }
  if (out.back() != max_bytes) out.push_back(max_bytes);
  return out;
}

bool parse_size(std::string_view s, uint64_t& out) {
  size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  uint64_t base = 0;
  if (!parse_u64(s.substr(0, digits), base)) return false;
  std::string_view suffix = s.substr(digits);
  uint64_t mult = 1;
  if (suffix.empty() || suffix == "B") {
    mult = 1;
  } else if (suffix == "K" || suffix == "k" || suffix == "KiB" || suffix == "KB") {
    mult = 1ull << 10;
  } else if (suffix == "M" || suffix == "m" || suffix == "MiB" || suffix == "MB") {
    mult = 1ull << 20;
  } else if (suffix == "G" || suffix == "g" || suffix == "GiB" || suffix == "GB") {
    mult = 1ull << 30;
  } else {
    return false;
  }
  if (base > std::numeric_limits<uint64_t>::max() / mult) return false;
  out = base * mult;
  return true;
}

ParseResult parse_args(int argc, const char* const* argv, PerfOptions& out) {
  PerfOptions o;
  ParseResult r;
  auto fail = [&r](std::string msg) {
    r.ok = false;
    r.error = std::move(msg);
    return r;
  };
  bool have_test = false;
  bool have_size = false;
  bool have_json_file = false;  // --out_json_file
  // perftest's -S SL and -T TOS are numbers; ours are a socket path and a class name. A number
  // after the short spelling is perftest's meaning when --perftest is given (anywhere on the
  // line): refused after the loop, saying what to write. The long spellings are ours as given.
  std::string perftest_sl, perftest_tos;
  std::vector<std::string_view> positional;
  // perftest's --use-srq, -X (--vector), --recv_post_list and --source_ip: checked after the loop.
  bool use_srq = false;
  bool have_vector = false;
  uint32_t& recv_post_list = o.recv_post_list;
  std::string source_ip;

  // --perftest anywhere on the line (also after a mistake the loop stops at) sets the exit
  // statuses: perftest's (parse_exit_status()).
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i] != nullptr ? argv[i] : "";
    if (arg.size() <= 2 || arg.substr(0, 2) != "--") continue;
    std::string name(arg.substr(0, arg.find('=')));
    std::string ambiguous;
    if (resolve_long_option(name, ambiguous) && name == "--perftest") r.perftest = true;
  }

  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i] != nullptr ? argv[i] : "";
    std::string name;
    std::string_view value;
    bool inline_value = false;
    if (arg.size() > 2 && arg.substr(0, 2) == "--") {
      const size_t eq = arg.find('=');
      name = std::string(arg.substr(0, eq));
      if (eq != std::string_view::npos) {
        value = arg.substr(eq + 1);
        inline_value = true;
      }
      std::string ambiguous;
      if (!resolve_long_option(name, ambiguous)) return fail(ambiguous);
    } else if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {
      name = std::string(arg.substr(0, 2));
      if (arg.size() > 2) {
        value = arg.substr(2);
        inline_value = true;
      }
    } else {
      positional.push_back(arg);
      continue;
    }

    auto is = [&name](const char* s, const char* l) {
      return name == s || (l != nullptr && name == l);
    };
    // Flags take no value.
    auto flag = [&](bool& field) -> bool {
      if (inline_value) return false;
      field = true;
      return true;
    };
    // perftest's -c TYPE (--connection): conduit-perf's own -c is --check, a flag, so -c is the
    // connection type when its value is one of perftest's type names.
    const bool next_is_type = !inline_value && i + 1 < argc && argv[i + 1] != nullptr &&
                              is_perftest_connection_type(argv[i + 1]);
    if (name == "--connection" ||
        (name == "-c" && (inline_value ? is_perftest_connection_type(value) : next_is_type))) {
      if (!inline_value) {
        if (i + 1 >= argc || argv[i + 1] == nullptr)
          return fail("option " + name + " needs a value");
        value = argv[++i];
      }
      if (value != "RC") {
        return fail("option " + name + " " + std::string(value) +
                    ": conduit runs RC QPs only (perftest's default); drop it or give " + name +
                    " RC");
      }
      continue;
    }
    if (is("-F", "--CPU-freq")) {
      // perftest's -F only silences its warning about CPU frequency scaling; we give none.
      bool ignored = false;
      if (!flag(ignored)) return fail("option " + name + " takes no value");
      continue;
    }
    if (is("--report_gbits", nullptr)) {
      if (!flag(o.report_gbits)) return fail("option " + name + " takes no value");
      continue;
    }
    if (is("--cpu_util", nullptr)) {
      if (!flag(o.cpu_util)) return fail("option " + name + " takes no value");
      continue;
    }
    if (is("--dont_xchg_versions", nullptr)) {
      if (!flag(o.dont_xchg_versions)) return fail("option " + name + " takes no value");
      continue;
    }
    if (is("-N", "--noPeak")) {
      if (!flag(o.no_peak)) return fail("option " + name + " takes no value");
      continue;
    }
    if (is("--report-both", nullptr)) {
      if (!flag(o.report_both)) return fail("option " + name + " takes no value");
      continue;
    }
    if (is("--out_json", nullptr)) {
      if (!flag(o.out_json)) return fail("option " + name + " takes no value");
      continue;
    }
    if (is("--disable_pcie_relaxed", nullptr)) {
      if (!flag(o.disable_pcie_relaxed)) return fail("option " + name + " takes no value");
      r.notes.push_back(
          "option --disable_pcie_relaxed: conduit has no PCIe device to order writes for; the "
          "--perftest header says \"PCIe relax order: OFF\", as perftest's");
      continue;
    }
    if (is("-C", "--report-cycles")) {
      return fail("option " + name +
                  ": conduit-perf times with the monotonic clock and reports microseconds, not "
                  "CPU cycles; drop " +
                  name);
    }
    if (is("--run_infinitely", nullptr)) {
      return fail(
          "option --run_infinitely: conduit-perf runs for a count (-n) or a time: give -D SEC "
          "(up to 86400) on both sides instead");
    }
    if (is("-L", "--hop_limit")) {
      return fail("option " + name +
                  ": perftest's hop limit is for its raw Ethernet QPs (it refuses it for RC "
                  "too); conduit's packets carry TTL (hop limit) 64: drop " +
                  name);
    }
    if (is("-U", "--report-unsorted") || is("-H", "--report-histogram") ||
        is("--report-histogrm", nullptr)) {
      return fail("option " + name +
                  ": conduit-perf prints the latency summary (with the 99% and 99.9% "
                  "percentiles), not every sample");
    }
    if (is("-h", "--help")) {
      if (!flag(o.help)) return fail("option " + name + " takes no value");
      continue;
    }
    if (is("-V", "--version")) {
      if (!flag(o.version)) return fail("option " + name + " takes no value");
      continue;
    }
    if (is("-a", "--all")) {
      if (!flag(o.sweep)) return fail("option " + name + " takes no value");
      continue;
    }
    if (is("-b", "--bidirectional")) {
      if (!flag(o.bidirectional)) return fail("option " + name + " takes no value");
      continue;
    }
    if (is("-c", "--check")) {
      if (!flag(o.check)) return fail("option " + name + " takes no value");
      continue;
    }
    if (is("-e", "--events")) {
      if (!flag(o.events)) return fail("option " + name + " takes no value");
      continue;
    }
    if (is("-Y", "--yield")) {
      if (!flag(o.yield)) return fail("option " + name + " takes no value");
      continue;
    }
    if (is("--perftest", nullptr)) {
      if (!flag(o.perftest)) return fail("option " + name + " takes no value");
      continue;
    }
    if (is("-R", "--rdma_cm")) {
      if (!flag(o.perftest_rdma_cm)) return fail("option " + name + " takes no value");
      continue;
    }
    if (is("-J", "--json")) {
      if (!flag(o.json)) return fail("option " + name + " takes no value");
      continue;
    }
    if (is("--use-srq", nullptr)) {
      if (!flag(use_srq)) return fail("option " + name + " takes no value");
      continue;
    }
    if (is("--sr", nullptr)) {
      if (!flag(o.cm_selective_repeat)) return fail("option " + name + " takes no value");
      continue;
    }

    if (const PerftestOnlyOption* p = find_perftest_only(name)) {
      // Its value first (attached, after '=', or the next argument), so that it is never taken
      // for the server's name.
      if (p->valued && !inline_value) {
        if (i + 1 >= argc || argv[i + 1] == nullptr) {
          return fail("option " + name + " needs a value");
        }
        value = argv[++i];
      }
      const std::string given =
          name + (p->valued || inline_value ? " " + std::string(value) : std::string());
      if (p->what == PerftestOnly::kRefuse) return fail("option " + given + ": " + p->why);
      if (!p->valued && inline_value) return fail("option " + name + " takes no value");
      r.notes.push_back("option " + given + " ignored: " + p->why);
      continue;
    }

    // Everything else takes a value: attached, after '=', or the next argument.
    static constexpr const char* kValued[][2] = {
        {"-s", "--size"},
        {"-n", "--iters"},
        {"-D", "--duration"},
        {"-q", "--qp"},
        {"-p", "--port"},
        {"-t", "--tx-depth"},
        {"-r", "--rx-depth"},
        {"-Q", "--cq-mod"},
        {"-m", "--mtu"},
        {"-x", "--gid"},
        {"-S", "--socket"},
        {"-T", "--class"},
        {"-W", "--timeout"},
        {"-u", "--qp-timeout"},
        {"--cm", nullptr},
        {"-A", "--atomic_type"},
        {"-d", "--ib-dev"},
        {"-i", "--ib-port"},
        {"-l", "--post_list"},
        {"-o", "--outs"},
        {"-I", "--inline_size"},
        {"-f", "--margin"},
        // perftest's, refused below saying what to write instead.
        {"--sl", nullptr},
        {"--tos", nullptr},
        {"--gid-index", nullptr},
        {"--report-counters", nullptr},
        // perftest's, taken where they mean what conduit does (or ignored with a note).
        {"-X", "--vector"},
        {"--recv_post_list", nullptr},
        {"--force-link", nullptr},
        {"--pkey_index", nullptr},
        {"--source_ip", nullptr},
        {"--flow_label", nullptr},
        {"--output", nullptr},
        {"--out_json_file", nullptr}};
    bool valued = false;
    for (const auto& v : kValued) valued = valued || is(v[0], v[1]);
    if (!valued) return fail("unknown option '" + name + "' (conduit-perf --help lists them)");
    if (!inline_value) {
      if (i + 1 >= argc || argv[i + 1] == nullptr) return fail("option " + name + " needs a value");
      value = argv[++i];
    }
    if (is("-s", "--size")) {
      // One size, or a comma-separated list (conduit's extension of perftest's -s).
      o.sizes.clear();
      std::string_view rest = value;
      for (;;) {
        const size_t comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        uint64_t v = 0;
        if (!parse_size(item, v) || v == 0 || v > kMaxMessageBytes || o.sizes.size() >= 64) {
          return fail("option " + name + ": '" + std::string(value) +
                      "' is not a size (or list of at most 64 sizes) from 1 B to 1 GiB "
                      "(e.g. 65536, 64K, 1MiB, 1,4K,16M)");
        }
        o.sizes.push_back(v);
        if (comma == std::string_view::npos) break;
        rest = rest.substr(comma + 1);
      }
      have_size = true;
    } else if (is("-n", "--iters")) {
      if (!parse_uint_in<uint64_t>(value, 1, 1'000'000'000'000ull, o.iterations)) {
        return fail(range_error(name, value, 1, 1'000'000'000'000ull));
      }
    } else if (is("-D", "--duration")) {
      if (!parse_uint_in<uint32_t>(value, 1, 86400, o.duration_s)) {
        return fail(range_error(name, value, 1, 86400));
      }
    } else if (is("-q", "--qp")) {
      if (!parse_uint_in<uint32_t>(value, 1, kMaxQps, o.qps)) {
        return fail(range_error(name, value, 1, kMaxQps));
      }
    } else if (is("-p", "--port")) {
      if (!parse_uint_in<uint16_t>(value, 1, 65535, o.port)) {
        return fail(range_error(name, value, 1, 65535));
      }
    } else if (is("-t", "--tx-depth") || is("-r", "--rx-depth")) {
      uint32_t& depth = is("-t", "--tx-depth") ? o.tx_depth : o.rx_depth;
      if (!parse_uint_in<uint32_t>(value, 1, kMaxRingDepth, depth)) {
        return fail(range_error(name, value, 1, kMaxRingDepth) +
                    " (the deepest rings a conduitd policy can give)");
      }
    } else if (is("-Q", "--cq-mod")) {
      if (!parse_uint_in<uint32_t>(value, 1, kMaxDepth, o.cq_mod)) {
        return fail(range_error(name, value, 1, kMaxDepth));
      }
    } else if (is("-m", "--mtu")) {
      uint32_t v = 0;
      if (!parse_uint_in<uint32_t>(value, 256, 4096, v) || (v & (v - 1)) != 0) {
        return fail("option " + name + ": '" + std::string(value) +
                    "' is not a path MTU (256, 512, 1024, 2048 or 4096)");
      }
      o.mtu = v;
    } else if (is("-x", "--gid")) {
      Gid gid{};
      if (!value.empty() && value.size() <= 3 &&
          value.find_first_not_of("0123456789") == std::string_view::npos) {
        return fail("option " + name + ": '" + std::string(value) +
                    "' looks like perftest's GID index; conduit-perf's -x takes the address "
                    "itself: our conduitd's port address (e.g. 198.18.0.1)");
      }
      if (value.size() > 64 || !parse_gid(value, gid)) {
        return fail("option " + name + ": '" + std::string(value) +
                    "' is not an IPv4 address or a GID (e.g. 198.18.0.1 or ::ffff:198.18.0.1)");
      }
      o.gid = std::string(value);
    } else if (is("--sl", nullptr)) {
      return fail("option --sl " + std::string(value) + ": " + perftest_sl_advice(value));
    } else if (is("--tos", nullptr)) {
      return fail("option --tos " + std::string(value) + ": " + perftest_tos_advice(value));
    } else if (is("--gid-index", nullptr)) {
      return fail("option --gid-index " + std::string(value) +
                  ": perftest's GID index; conduit-perf's -x (--gid) takes the address itself: "
                  "our conduitd's port address (e.g. 198.18.0.1)");
    } else if (is("--report-counters", nullptr)) {
      return fail(perftest_counters_advice("--report-counters"));
    } else if (is("-S", "--socket")) {
      if (name == "-S" && all_digits(value)) perftest_sl = std::string(value);
      if (value.empty() || value.size() > 107) {
        return fail("option " + name + " needs a Unix socket path (at most 107 bytes)");
      }
      o.socket_path = std::string(value);
    } else if (is("-T", "--class")) {
      if (name == "-T" && all_digits(value)) perftest_tos = std::string(value);
      if (value.empty() || value.size() > 32) {
        return fail("option " + name + " needs a traffic class name (at most 32 bytes)");
      }
      o.traffic_class = std::string(value);
    } else if (is("-u", "--qp-timeout")) {
      // 0: no ACK timer, as verbs' (IB's) infinite timeout; conduit's transport does the same.
      if (!parse_uint_in<uint8_t>(value, 0, 31, o.qp_timeout)) {
        return fail(range_error(name, value, 0, 31));
      }
    } else if (is("-A", "--atomic_type")) {
      // perftest's spellings.
      if (value == "CMP_AND_SWAP") {
        o.atomic_cas = true;
      } else if (value == "FETCH_AND_ADD") {
        o.atomic_cas = false;
      } else {
        return fail("option " + name + ": '" + std::string(value) +
                    "' is not CMP_AND_SWAP or FETCH_AND_ADD");
      }
    } else if (is("--cm", nullptr)) {
      if (!parse_uint_in<uint64_t>(value, 1, ~uint64_t{0}, o.cm_service)) {
        return fail("option --cm needs a service number (1 .. 2^64-1)");
      }
      o.cm = true;
    } else if (is("-d", "--ib-dev")) {
      // conduit has no devices to choose from: the conduitd at -S drives one port.
      if (value.empty()) return fail("option " + name + " needs a device name");
      r.notes.push_back("option " + name + " " + std::string(value) +
                        " ignored: conduit-perf uses the port of the conduitd at -S (--socket)");
    } else if (is("-i", "--ib-port")) {
      // A conduitd drives one port: perftest's default port 1 is it; another is refused
      // rather than quietly measuring the wrong one.
      uint32_t ib_port = 0;
      if (!parse_uint_in<uint32_t>(value, 1, 255, ib_port)) {
        return fail(range_error(name, value, 1, 255));
      }
      if (ib_port != 1) {
        return fail("option " + name + " " + std::string(value) +
                    ": a conduitd drives one port (-i 1); for another port, run the conduitd "
                    "that drives it and give its socket with -S");
      }
    } else if (is("-l", "--post_list")) {
      // perftest takes 0 too (strtol; only a list above 1 is checked): below, by the side.
      if (!parse_uint_in<uint32_t>(value, 0, kMaxDepth, o.post_list)) {
        return fail(range_error(name, value, 0, kMaxDepth));
      }
    } else if (is("-f", "--margin")) {
      uint32_t margin = 0;
      if (!parse_uint_in<uint32_t>(value, 0, 43200, margin)) {
        return fail(range_error(name, value, 0, 43200));
      }
      o.margin_s = static_cast<int32_t>(margin);
    } else if (is("-I", "--inline_size")) {
      // perftest: CHECK_VALUE(inline_size, 0, MAX_INLINE, "Max inline").
      if (!parse_uint_in<uint32_t>(value, 0, kPerftestMaxInline, o.inline_size)) {
        return fail(range_error(name, value, 0, kPerftestMaxInline) + " (perftest's max inline)");
      }
      if (o.inline_size > kConduitMaxInline) {
        r.notes.push_back("option " + name + " " + std::string(value) +
                          ": conduit copies at most " + std::to_string(kConduitMaxInline) +
                          " bytes into a work request: messages up to " +
                          std::to_string(kConduitMaxInline) +
                          " bytes are posted inline, larger ones from the buffer");
      }
    } else if (is("-o", "--outs")) {
      // perftest: strtol, 0 (or less) the device's max, above it lowered to it with a warning.
      if (!parse_uint_in<uint32_t>(value, 0, kMaxDepth, o.out_reads)) {
        return fail(range_error(name, value, 0, kMaxDepth));
      }
      if (o.out_reads > kMaxPerftestOutReads) {
        r.notes.push_back("option " + name + " " + std::string(value) +
                          ": a conduitd QP serves at most " + std::to_string(kMaxPerftestOutReads) +
                          " READs or atomics at once: " + std::to_string(kMaxPerftestOutReads) +
                          " (as perftest lowers it to the device's max)");
        o.out_reads = kMaxPerftestOutReads;
      }
    } else if (is("-X", "--vector")) {
      uint32_t vector = 0;
      if (!parse_uint_in<uint32_t>(value, 0, 1023, vector)) {
        return fail(range_error(name, value, 0, 1023));
      }
      have_vector = true;
    } else if (is("--recv_post_list", nullptr)) {
      if (!parse_uint_in<uint32_t>(value, 1, kMaxDepth, recv_post_list)) {
        return fail(range_error(name, value, 1, kMaxDepth));
      }
    } else if (is("--force-link", nullptr)) {
      if (value == "IB") {
        return fail("option --force-link IB: conduit runs RoCE, over Ethernet only");
      }
      if (value != "Ethernet") {
        return fail("option --force-link: '" + std::string(value) +
                    "' is not IB or Ethernet (perftest's link types)");
      }
      // RoCE: what conduit runs anyway.
    } else if (is("--pkey_index", nullptr)) {
      uint32_t index = 0;
      if (!parse_uint_in<uint32_t>(value, 0, 65535, index)) {
        return fail(range_error(name, value, 0, 65535));
      }
      if (index != 0) {
        return fail("option --pkey_index " + std::string(value) +
                    ": conduit's QPs carry the default P_Key (0xFFFF, index 0): drop it or give 0");
      }
    } else if (is("--source_ip", nullptr)) {
      // perftest binds its rdma_cm IDs to it: our side's RoCE address, conduit-perf's -x.
      Gid gid{};
      if (value.size() > 64 || !parse_gid(value, gid)) {
        return fail("option --source_ip: '" + std::string(value) +
                    "' is not an IPv4 address or a GID (e.g. 198.18.0.1)");
      }
      source_ip = std::string(value);
    } else if (is("--output", nullptr)) {
      if (value == "bandwidth") {
        o.output = PerftestOutput::kBandwidth;
      } else if (value == "message_rate") {
        o.output = PerftestOutput::kMessageRate;
      } else if (value == "latency") {
        o.output = PerftestOutput::kLatency;
      } else {
        return fail("option --output " + std::string(value) +
                    ": perftest: \"Invalid verbosity level output flag. Please use bandwidth, "
                    "latency, message_rate\"");
      }
    } else if (is("--out_json_file", nullptr)) {
      if (value.empty()) return fail("option --out_json_file needs a file name");
      o.out_json_file = std::string(value);
      have_json_file = true;
    } else if (is("--flow_label", nullptr)) {
      uint32_t label = 0;
      if (!parse_uint_in<uint32_t>(value, 0, 0xFFFFF, label)) {
        return fail(range_error(name, value, 0, 0xFFFFF));
      }
      if (label != 0) {
        return fail("option --flow_label " + std::string(value) +
                    ": conduit's packets carry flow label 0 (IPv6; IPv4 has none): drop it or "
                    "give 0");
      }
    } else if (is("-W", "--timeout")) {
      // perftest's -W is --report-counters, a list of counter names: never a number.
      if (!value.empty() &&
          value.find_first_of("/,abcdefghijklmnopqrstuvwxyz_") != std::string_view::npos) {
        return fail(perftest_counters_advice(name + " " + std::string(value)));
      }
      if (!parse_uint_in<uint32_t>(value, 1, 3600, o.timeout_s)) {
        return fail(range_error(name, value, 1, 3600));
      }
    } else {
      return fail("unknown option '" + name + "' (conduit-perf --help lists them)");
    }
  }

  if (o.help || o.version) {
    out = o;
    r.ok = true;
    return r;
  }
  if (o.perftest && o.check) {
    // Before the positional arguments, as -J: perftest's -c takes a connection type.
    return fail(
        "--perftest does not do -c (--check): perftest's exchange has no room for it (perftest's "
        "-c is the connection type: -c RC)");
  }
  if (o.perftest && o.json) {
    // Before the positional arguments: perftest's -J takes a value, which is no server name.
    return fail(
        "--perftest does not do -J: conduit-perf's -J (JSON lines) has no room in perftest's "
        "exchange, and perftest's -J (--dest_ip) is a raw Ethernet option the ib_* tests do not "
        "use");
  }
  if (positional.empty()) {
    return fail(
        "name a test: send_bw, write_bw, read_bw, send_lat, write_lat, read_lat, atomic_bw or "
        "atomic_lat (conduit-perf --help)");
  }
  if (!parse_test_name(positional[0], o.test)) {
    return fail(
        "unknown test '" + std::string(positional[0]) +
        "' (send_bw, write_bw, read_bw, send_lat, write_lat, read_lat, atomic_bw, atomic_lat)");
  }
  have_test = true;
  if (positional.size() > 2) {
    return fail("unexpected argument '" + std::string(positional[2]) +
                "': give the test name and at most one server address");
  }
  if (positional.size() == 2) {
    if (positional[1].empty() || positional[1].size() > 255) return fail("bad server address");
    o.server = std::string(positional[1]);
  }
  if (o.sweep && have_size && o.perftest && !is_atomic(o.test)) {
    // perftest: with -a the size is MAX_SIZE whatever -s said (force_dependecies): every size.
    r.notes.push_back(
        "option -s ignored: -a runs every size from 2 B to 8 MiB (as perftest's -a "
        "overrides -s)");
    have_size = false;
  }
  if (o.sweep && have_size)
    return fail("-a (sweep all sizes) and -s (one size) exclude each other");
  if (o.iterations != 0 && o.duration_s != 0 && o.perftest) {
    // perftest takes both and runs for the time (force_dependecies: iters = 0 in duration mode).
    r.notes.push_back("option -n " + std::to_string(o.iterations) +
                      " ignored: -D runs for a time, as perftest's -D with -n");
    o.iterations = 0;
  }
  if (o.iterations != 0 && o.duration_s != 0) {
    return fail("-n (iterations) and -D (duration) exclude each other");
  }
  if (o.events && o.yield) return fail("-e (sleep on the CQs) and -Y (yield) exclude each other");
  if (o.sweep) o.sizes = sweep_sizes(kSweepMinBytes, kSweepMaxBytes);
  if (is_latency(o.test) && !have_size && !o.sweep) o.sizes = {2};
  if (is_latency(o.test) && o.bidirectional) {
    return fail("-b applies to bandwidth tests; latency tests are ping-pongs already");
  }
  if (is_latency(o.test) && o.qps != 1) return fail("latency tests use one QP (drop -q)");
  // perftest: "NoPeak only valid for BW tests".
  if (is_latency(o.test) && o.no_peak) return fail("-N (--noPeak) applies to bandwidth tests");
  if (o.test == TestKind::kWriteLat) {
    for (uint64_t s : o.sizes) {
      if (s < 1) return fail("write_lat needs messages of at least 1 byte");
    }
  }
  if (is_atomic(o.test)) {
    const std::string t = test_name(o.test);
    if (!o.perftest) {
      return fail(t + " runs with --perftest (against ib_" + t +
                  " or another conduit-perf --perftest); conduit-perf's own exchange has no "
                  "atomic test");
    }
    if (o.sweep || (have_size && (o.sizes.size() != 1 || o.sizes[0] != 8))) {
      return fail(t + " moves 8 bytes per operation: drop -s / -a (or give -s 8)");
    }
    o.sizes = {8};
    if (o.bidirectional) return fail(t + " runs one way (drop -b), as ib_" + t);
  } else if (o.atomic_cas) {
    return fail("-A (atomic type) applies to atomic_bw and atomic_lat");
  }
  if (o.perftest) {
    // perftest refuses -D with -a ("Duration mode currently doesn't support running on all
    // sizes"). With -b, -D runs WRITE and READ (each side a client for the time); send_bw's
    // duplex exchange is built on -n.
    if (o.duration_s != 0 && o.sweep) return fail("--perftest runs -D with one size (-s)");
    if (o.duration_s != 0 && o.bidirectional && o.test == TestKind::kSendBw) {
      return fail("--perftest runs send_bw -b with -n only (write_bw and read_bw take -D)");
    }
    if (o.qps > kPerftestMaxQps) {
      return fail("--perftest runs at most " + std::to_string(kPerftestMaxQps) + " QPs (-q)");
    }
    if (!o.sweep && o.sizes.size() != 1) return fail("--perftest runs one size (-s) or -a");
    if (o.events) {
      // perftest's own limits on -e; otherwise it is what the session does already: it sleeps
      // on its CQ whenever nothing has completed.
      if (o.test == TestKind::kWriteBw || o.test == TestKind::kWriteLat) {
        return fail(
            "-e (--events) is not available on the WRITE tests (perftest: \"Events feature not "
            "available on WRITE verb\")");
      }
      if (o.duration_s != 0) {
        return fail(
            "-e (--events) and -D exclude each other (perftest: \"Duration mode doesn't "
            "work with events\")");
      }
    }
    if (o.cq_mod != 0 && is_latency(o.test)) {
      r.notes.push_back("option -Q (--cq-mod) " + std::to_string(o.cq_mod) +
                        " ignored: a latency test signals every message (perftest's -Q is for "
                        "the bandwidth tests)");
      o.cq_mod = 0;
    } else if (o.cq_mod > 1024) {
      return fail("option -Q (--cq-mod) " + std::to_string(o.cq_mod) +
                  ": perftest's CQ moderation is 1 to 1024 (\"CQ moderation should be between 1 "
                  "and 1024\")");
    } else if (o.cq_mod != 0 && o.post_list > 1 && o.post_list % o.cq_mod != 0) {
      // perftest signals every cq_mod-th WR of a list: the list must end on one.
      return fail("-l (--post_list) " + std::to_string(o.post_list) + " with -Q " +
                  std::to_string(o.cq_mod) +
                  ": perftest: \"Post list size must be a multiple of CQ moderation\"");
    }
    if (o.iterations != 0 && o.iterations < kPerftestMinIterations) {
      return fail("--perftest: perftest takes -n " + std::to_string(kPerftestMinIterations) +
                  " or more");
    }
  }
  if (o.perftest && !perftest_sl.empty()) {
    return fail("option -S " + perftest_sl + ": " + perftest_sl_advice(perftest_sl) +
                " (a socket path that is a number: --socket " + perftest_sl + ")");
  }
  if (o.perftest && !perftest_tos.empty()) {
    return fail("option -T " + perftest_tos + ": " + perftest_tos_advice(perftest_tos) +
                " (a class named by a number: --class " + perftest_tos + ")");
  }
  if (o.cpu_util && (!o.perftest || o.duration_s == 0)) {
    // perftest: " CPU Utilization works only with Duration mode." (and it runs on). With -D it
    // measures on every test, the latency ones too (force_dependecies sets
    // cpu_util_data.enable for any -D run).
    r.notes.push_back(std::string("option --cpu_util ignored: ") +
                      (!o.perftest ? "it is perftest's (--perftest)"
                                   : "CPU utilization works only with -D, as perftest's"));
    o.cpu_util = false;
  }
  if (o.report_both && !o.perftest) {
    r.notes.push_back(
        "option --report-both ignored without --perftest: conduit-perf's own -b report gives "
        "the sum of both directions");
  }
  if ((o.out_json || have_json_file) && !o.perftest) {
    return fail(std::string(o.out_json ? "--out_json" : "--out_json_file") +
                " is perftest's: it runs with --perftest (conduit-perf's own mode: -J for JSON "
                "lines)");
  }
  if (have_json_file && !o.out_json) {
    // perftest's --out_json_file only names the file: nothing is written without --out_json.
    r.notes.push_back("option --out_json_file " + o.out_json_file +
                      ": no file is written without --out_json, as perftest's");
  }
  if (o.output != PerftestOutput::kFull) {
    if (!o.perftest) {
      return fail(
          "--output is perftest's: it runs with --perftest (conduit-perf's own mode: -J for "
          "JSON lines)");
    }
    // perftest's force_dependecies, word for word.
    if (!is_latency(o.test) && o.output == PerftestOutput::kLatency) {
      return fail(
          "--output latency: perftest: \"Output verbosity level for BW can be: bandwidth, "
          "message_rate\"");
    }
    if (is_latency(o.test) && o.output != PerftestOutput::kLatency) {
      return fail("--output: perftest: \"Output verbosity level for LAT can be: latency\"");
    }
  }
  if (o.dont_xchg_versions && !o.perftest) {
    return fail("--dont_xchg_versions is perftest's: it runs with --perftest");
  }
  if (o.post_list == 0) {
    // perftest's parser takes -l 0; its post lists then hold no WR (post_list per QP). A side
    // that never posts a send runs as with -l 1: a bandwidth server without -b, read_lat's and
    // atomic_lat's server (send_lat's and write_lat's answer: they post). One that posts, posts
    // from the empty list and counts 0 sent each time: perftest fails there ("Couldn't post
    // send") or worse, so we refuse it before the run.
    const bool posts = !o.is_server() || o.bidirectional || o.test == TestKind::kSendLat ||
                       o.test == TestKind::kWriteLat;
    if (!o.perftest) {
      r.notes.push_back(
          "option -l (--post_list) 0 ignored without --perftest: conduit-perf's own mode posts "
          "one work request per call");
    } else if (posts) {
      return fail(
          "option -l (--post_list) 0: perftest's parser takes it, but a side that posts sends "
          "(a client, -b, send_lat's and write_lat's server) then posts from an empty post list "
          "and fails (\"Couldn't post send\") or worse: give -l 1 or more");
    }
    o.post_list = 1;
  }
  if (o.post_list > 1) {
    const std::string l = "option -l (--post_list) " + std::to_string(o.post_list);
    if (is_latency(o.test)) {
      // perftest refuses it, on every latency test (exit 1).
      return fail(l +
                  ": perftest: \"Post list is supported in BW tests only\" (a latency test has "
                  "one message in flight; drop -l)");
    }
    if (!o.perftest) {
      r.notes.push_back(l +
                        " ignored without --perftest: conduit-perf's own mode posts one "
                        "work request per call");
      o.post_list = 1;
    } else if (o.duration_s == 0 && o.effective_iterations() % o.post_list != 0) {
      return fail(l + ": -n " + std::to_string(o.effective_iterations()) +
                  " is not a multiple of it (perftest: \"Number of iterations must be a "
                  "multiple of post list size\")");
    }
  }
  if (o.margin_s >= 0) {
    if (!o.perftest || o.duration_s == 0) {
      r.notes.push_back("option -f (--margin) ignored: it applies to --perftest -D");
    } else if (!(o.duration_s > 2 * static_cast<uint32_t>(o.margin_s))) {
      // perftest: "please check that DURATION > 2*MARGIN".
      return fail("-f " + std::to_string(o.margin_s) + " with -D " + std::to_string(o.duration_s) +
                  ": the margins at both ends leave nothing to sample (perftest: DURATION > "
                  "2*MARGIN)");
    }
  }
  if (o.inline_size != 0) {
    // perftest: "Inline feature not available on READ/Atomic verbs".
    if (o.test == TestKind::kReadBw || o.test == TestKind::kReadLat || is_atomic(o.test)) {
      return fail("-I (--inline_size) applies to the SEND and WRITE tests (not READs or atomics)");
    }
    if (!o.perftest) {
      r.notes.push_back(
          "option -I ignored without --perftest: conduit-perf's own mode posts "
          "from the buffer");
    }
  }
  if (o.out_reads != 0) {
    // perftest: "Setting Outstanding reads only available on READ verb".
    if (o.test != TestKind::kReadBw && o.test != TestKind::kReadLat && !is_atomic(o.test)) {
      return fail("-o (--outs) applies to read_bw, read_lat, atomic_bw and atomic_lat");
    }
    if (o.perftest_rdma_cm) {
      return fail(
          "-o (--outs) with -R: conduit's rdma_cm connections take the READ depths conduitd's "
          "connection manager agrees; drop -o");
    }
    if (!o.perftest) {
      r.notes.push_back(
          "option -o ignored without --perftest: conduit-perf's own QPs take conduitd's "
          "transport.max_outstanding_reads");
    }
  }
  if (o.cm && o.perftest) return fail("--cm and --perftest exclude each other");
  if (o.no_peak && !o.perftest) {
    r.notes.push_back(
        "option -N (--noPeak) ignored without --perftest: conduit-perf's own report measures the "
        "peak (the best 10 ms)");
  }
  if (!source_ip.empty()) {
    // perftest's --source_ip is our RoCE address: -x's, which it stands for when -x is not given.
    Gid a{}, b{};
    if (o.gid.empty()) {
      o.gid = source_ip;
    } else if (!parse_gid(o.gid, a) || !parse_gid(source_ip, b) || a != b) {
      return fail("--source_ip " + source_ip + " and -x " + o.gid +
                  " differ: both name our conduitd's port address (give one)");
    }
  }
  if (use_srq) {
    // perftest: "Using SRQ only avavilible in SEND tests."
    if (o.test != TestKind::kSendBw && o.test != TestKind::kSendLat) {
      return fail("--use-srq applies to send_bw and send_lat (perftest: SRQ only in SEND tests)");
    }
    r.notes.push_back(
        "option --use-srq ignored: conduit has no shared receive queue; each QP's receives are "
        "its own (the peer sees no difference)");
  }
  if (have_vector) {
    if (!o.events) {
      return fail(
          "-X (--vector) without -e (perftest: \"Events must be enabled to select a "
          "completion vector\")");
    }
    r.notes.push_back("option -X (--vector) ignored: a conduit CQ has one wake-up");
  }
  if (recv_post_list > 1) {
    const std::string l = "--recv_post_list " + std::to_string(recv_post_list);
    if (is_latency(o.test)) {
      return fail(l + ": perftest: \"Receive post list is supported in BW tests only\"");
    }
    if (o.duration_s == 0 && o.effective_iterations() % recv_post_list != 0) {
      return fail(l + ": -n " + std::to_string(o.effective_iterations()) +
                  " is not a multiple of it (perftest: \"Number of iterations must be a multiple "
                  "of receive post list size\")");
    }
    if (!o.perftest) {
      r.notes.push_back(
          "option " + l +
          " ignored: receives are posted one at a time (the peer sees no difference)");
      o.recv_post_list = 1;
    } else if (o.test != TestKind::kSendBw) {
      r.notes.push_back("option " + l + ": " + test_name(o.test) +
                        " posts no receives (nor does perftest's): only the header's \"Recv "
                        "Post List\" shows it");
    }
  }
  // Here, not after a server has waited for its client: perftest's records carry GIDs, so our
  // port's address cannot be taken from the TCP connection.
  if (o.perftest && o.gid.empty()) {
    return fail("--perftest needs -x ADDR: our conduitd's port address (IPv4 or GID)");
  }
  if (o.perftest_rdma_cm && !o.perftest) {
    return fail("-R (rdma_cm) is perftest's: it runs with --perftest (use --cm for conduit's CM)");
  }
  if (o.cm_selective_repeat && !o.cm) return fail("--sr is negotiated through --cm");
  (void)have_test;
  out = o;
  r.ok = true;
  return r;
}

int parse_exit_status(const ParseResult& r, const PerfOptions& o) {
  if (!r.ok) return r.perftest ? 1 : 2;
  if (o.help || o.version) return r.perftest ? 1 : 0;
  return -1;
}

std::string usage_text() {
  return R"(conduit-perf - perftest-style benchmarks over conduitd

Usage:
  conduit-perf TEST [options]          server: waits for one client
  conduit-perf TEST SERVER [options]   client: connects to SERVER (TCP, port 18515)

TEST: send_bw write_bw read_bw (bandwidth), send_lat write_lat read_lat (latency),
atomic_bw atomic_lat (8-byte atomics, with --perftest: ib_atomic_bw's and ib_atomic_lat's peer).
The client chooses the parameters and sends them to the server, so the
server needs only the test name (and --socket/--gid where they differ).

Options:
  -s, --size BYTES       message size (65536 for bw, 2 for lat; 64K, 1MiB work),
                         or a list: -s 1,1025,16M
  -a, --all              sweep sizes 2 B .. 8 MiB (powers of two)
  -n, --iters N          messages per size and QP, as perftest (5000 bw, 1000 lat)
  -D, --duration SEC     run each size SEC seconds instead of -n (--perftest: with
                         -n too, as perftest: -n is ignored with a note)
  -q, --qp N             queue pairs (bw tests; 1), round robin
  -b, --bidirectional    both sides send at once (bw tests)
  -c, --check            verify every received byte (SEND data, READ data,
                         and the WRITE target after each size)
  -e, --events           sleep on the CQs instead of busy polling
  -Y, --yield            poll, and give the core to other threads between polls
                         (sched_yield): for a client on the core of a spinning
                         conduitd, which yields back when it has completed
                         something; lower latency than -e there (also with
                         --perftest, which otherwise sleeps on its CQ)
  -t, --tx-depth N       sends in flight per QP (bw 128, fewer with many QPs; lat
                         16); at most conduitd's clients.quotas.max_send_wr (256
                         by default)
  -r, --rx-depth N       receives posted per QP (bw 256, fewer with many QPs; lat
                         16); at most conduitd's clients.quotas.max_recv_wr (256
                         by default)
  -Q, --cq-mod N         request a completion every N sends (64, at most -t; -c:
                         every send)
  -m, --mtu BYTES        path MTU 256..4096 (1024)
  -T, --class NAME       the policy's traffic class for the QPs (its default
                         class)
  -x, --gid ADDR         address the peer sends to: our conduitd's port
                         address (IPv4 or GID); default: the TCP local address
                         (--perftest: required)
  -S, --socket PATH      conduitd control socket ($CONDUIT_SOCKET, or
                         /run/conduit/conduitd.sock)
  -p, --port N           TCP port of the out-of-band exchange (18515)
  -W, --timeout SEC      fail when nothing completes for SEC seconds (30); the
                         server waits 4 x SEC for a client, which retries its
                         TCP connection as long. A side whose memory the peer
                         WRITEs or READs waits for the peer's run: -D + SEC,
                         without -D as long as the peer stays connected
  -u, --qp-timeout N     local ACK timeout 4.096 us * 2^N (14); 0: none, as IB's
                         infinite timeout (what a gap or a NAK does not reveal is
                         never resent: a lost last packet stalls the run until
                         -W); with --cm or -R the policy's transport.timeout
                         applies instead
  -A, --atomic_type T    atomic_bw, atomic_lat: FETCH_AND_ADD (default) or CMP_AND_SWAP
  --perftest             speak perftest's own TCP exchange instead of ours, so
                         the peer may be stock ib_send_bw, ib_write_bw,
                         ib_read_bw, ib_send_lat, ib_write_lat or ib_read_lat (e.g. on rxe or
                         a RoCE NIC); both roles, -n iterations (5 or more; per
                         QP) or (one size) -D seconds, -s one size or -a (every
                         test), bw tests -q up to 64 QPs; perftest does not
                         tell the server the client's -s/-a/-n/-D/-q: give both
                         the same (two conduit-perf sides refuse a difference,
                         and a different test or -b, said in the version
                         message where perftest reads nothing); bw tests -b
                         (both send). Not with -c or -J;
                         -e is taken (the session sleeps on its CQ between polls
                         anyway; the header says "Test with events", as perftest's;
                         refused on WRITE tests and with -D, as perftest does); bw tests -Q N as perftest's: every Nth send
                         signaled, each completion counting N (perftest's default:
                         100; every send for one -s above 8 KiB; -l L: L); within
                         the send window
  -R, --rdma_cm          with --perftest, as perftest's -R: the exchange and every
                         QP connect through rdma_cm (the InfiniBand CM, to port -p
                         at SERVER, the peer's RoCE address); no TCP. Give the
                         peer -R too
  --cm SERVICE           connect the QPs through conduitd's connection manager:
                         the server listens on SERVICE, the client connects to
                         it at the server's -x address (TCP still carries the
                         parameters); both sides give the same --cm
  --sr                   with --cm: offer selective repeat (used when both do)
  -J, --json             one JSON object per line instead of the table, with
                         the keys test, bytes, iterations, then (bw) qps,
                         bidirectional, bw_peak_gbps, bw_avg_gbps, msg_rate_mpps
                         or (lat, usec as in the table) t_min_us, t_max_us,
                         t_typical_us, t_avg_us, t_stdev_us, t_p99_us, t_p999_us;
                         with -c also check_mismatches
  -V, --version          print the version
  -h, --help             this text

Long options may be shortened to a prefix, as perftest's (getopt_long): a prefix of
one of perftest 4.5's long options is that option (--iter: --iters, --report_gb:
--report_gbits), of several is refused naming them (--re, --source_i: perftest's
table has --source_ip twice); where none of perftest's starts so, one of conduit-
perf's own (--tim: --timeout). --gid is conduit-perf's (perftest's --gid-index).

perftest's options, taken so that perftest command lines run:
  -d, --ib-dev DEV       ignored, with a note on stderr: the conduitd at -S drives
                         one port
  -i, --ib-port N        1 only: a conduitd drives one port (for another, give its
                         conduitd's -S)
  -c, --connection RC    RC only (UC, UD, XRC, DC, SRD are refused); -c without a
                         connection type is --check
  -F, --CPU-freq         ignored: conduit-perf gives no CPU frequency warning
  -l, --post_list N      --perftest bandwidth tests: sends posted N at a time, chained
                         in one call (at most the send window), as perftest's post
                         lists: only every -Qth WR of a list signaled (-Q N by
                         default; -Q must divide N); -n must be a multiple of N.
                         Ignored, with a note, without --perftest; refused by the
                         latency tests (above 1), as perftest. -l 0, which perftest
                         takes: nothing on a side that posts no sends (a bw server
                         without -b, read_lat's and atomic_lat's server), refused
                         on one that does (perftest's fails there)
  -f, --margin SEC       --perftest -D: the seconds left out of the sample at each
                         end (perftest's default D/4; -D must exceed 2 x SEC)
  -I, --inline_size N    send and write tests, --perftest: messages of up to N bytes
                         (0..912, perftest's range; 0 by default) are posted inline,
                         the payload copied into the work request, as perftest's -I;
                         conduit inlines at most 96 bytes (larger ones go from the
                         buffer, with a note)
  -o, --outs N           read and atomic tests, --perftest: READs and atomics our QPs
                         serve at once (1..16; 0: 16, conduitd's most; more: 16),
                         as perftest's -o, told to the peer (its READs in flight
                         towards us) and given to our QPs; not with -R
  --dont_xchg_versions   --perftest, as perftest's: no version, system data or MTU
                         messages (each side runs its own -m), the report's
                         iterations in 4 bytes; give both sides the same
  -N, --noPeak           --perftest: the peak column is 0.00, as perftest's (which
                         gives 0.00 also with -D, on send_bw's server without -b
                         and above -n 20000: so do we); without --perftest
                         ignored, with a note (our own peak is measured)
  --report_gbits         --perftest: bandwidth in Gb/sec instead of MB/sec, on
                         both sides' lines and in the report they exchange (give
                         both sides the same); conduit-perf's own report is in
                         Gb/sec anyway
  --cpu_util             --perftest -D: perftest's CPU_Util[%] column on the
                         bandwidth and latency lines, and CPU_util in --out_json's
                         file (/proc/stat's user time over user + idle during the
                         sample, as perftest computes it); ignored, with a note,
                         without -D
  --output WHAT          --perftest, as perftest's: each result as one number
                         (printf's %lf) and nothing else on stdout: bandwidth (the
                         BW average, in MB/sec or with --report_gbits Gb/sec) or
                         message_rate (Mpps) for bw tests, latency (t_avg, usec)
                         for latency tests
  --out_json             --perftest: each result also written to a file, as
                         perftest 4.5 writes it (its key: value lines, not strict
                         JSON: test_info with the header's fields, results with
                         the line's numbers), rewritten at each result: the last
                         stays (with -a the last size)
  --out_json_file PATH   --perftest --out_json: the file (default perftest_out.json
                         in the working directory, as perftest's)
  --report-both          --perftest -b: after the sum of both directions, this
                         side's and the peer's own lines ("Local results",
                         "Remote results"), as perftest: with one size (-s), not
                         with -a, and with --output too (its numbers); nothing
                         without -b
Refused, saying why: -U and -H (the latency summary only), -C (microseconds, not
cycles), -L (perftest's raw Ethernet hop limit) and --run_infinitely (give -D).
Every other option of perftest 4.5's ib_* tests is taken, ignored with a note or
refused saying why (its value is never taken for the server): taken as they mean
the same here, --source_ip ADDR (-x ADDR), --force-link Ethernet, --pkey_index 0,
--flow_label 0, --disable_pcie_relaxed (the header's "PCIe relax order: OFF"; ON
without it, as Debian's perftest); ignored with a note, as nothing the peer sees
changes: --mr_per_qp, --odp, --use_hugepages, --use_old_post_send,
--perform_warm_up, --ipv6, --wait_destroy, --retry_count, --inline_recv,
--use-srq (send tests), -X (with -e); --recv_post_list N (bw tests) posts send_bw's
receives in lists of N and is shown in the header, as perftest's; refused:
-z (give -R on both sides or neither), --tclass (give --class NAME), -g/-M
(multicast), -O/--report-per-port (one port), --reversed, -w/-y (limits), the
rate limiter's, --mmap, --dlid, DC, AES-XTS and raw
Ethernet options (-B -E -j -J -k -K -v -P -Z ...).
With --perftest, -a and -s together run every size, as perftest's -a (a note says
-s is ignored); conduit-perf's own mode refuses the pair. perftest's -x GID_INDEX, -S SL, -T TOS and -W COUNTERS are not
these: conduit-perf's -x, -S, -T and -W (above) are its own. So that a perftest
line does not run with them taken as ours, they are refused saying what to write:
-x N, --gid-index N, --sl N, --tos N, --report-counters LIST and -W LIST always;
-S N and -T N (numbers) with --perftest (--socket N and --class N are ours). The
QPs' priority and DSCP come from the traffic class (-T NAME, --class NAME).

Output (like perftest): bandwidth lines
  #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]
  (--perftest: [MB/sec], MiB (2^20 bytes) per second, perftest's default, or
  [Gb/sec] with --report_gbits; its write_bw/read_bw server prints the
  client's report, of the last size with -a)
latency lines (one-way = round trip / 2, as perftest reports; read_lat: the
  READ's whole round trip, as ib_read_lat reports)
  #bytes #iterations t_min t_max t_typical t_avg t_stdev t_99 t_99.9 [usec]
  (--perftest -D: perftest's duration report, #bytes #iterations t_avg[usec]
  tps average: the sampled part's round trips, their average and rate)
Exit status: 0 on success, 1 on an error or a --check mismatch, 2 on bad usage. With
--perftest perftest's: 1 on bad usage, and after -h and -V too (as perftest 4.5's binaries).
)";
}

}  // namespace conduit::perf
