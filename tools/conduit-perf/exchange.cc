#include "exchange.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstdio>
#include <cstring>

namespace conduit::perf {

namespace {

bool parse_hex_field(std::string_view s, size_t width, uint64_t& out) {
  if (s.size() != width) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return false;
    }
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  out = v;
  return true;
}

bool parse_dec(std::string_view s, uint64_t& out) {
  if (s.empty() || s.size() > 20) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out, 10);
  return ec == std::errc() && p == end;
}

bool key_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }
// '%' only introduces an escape of encode_text; numbers and names never hold it.
bool plain_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c != '\0' && std::strchr("_.,:/+-", c) != nullptr);
}
bool value_char(char c) { return plain_char(c) || c == '%'; }
int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
constexpr size_t kMaxKeyBytes = 32;
constexpr size_t kMaxValueBytes = 256;
constexpr size_t kMaxFields = 32;

}  // namespace

std::string format_qp_record(const QpRecord& r) {
  char buf[kQpRecordChars + 1];
  int n = std::snprintf(buf, sizeof(buf), "%04x:%04x:%06x:%06x:%08x:%016llx:", r.lid, r.out_reads,
                        r.qpn & 0xFFFFFFu, r.psn & 0xFFFFFFu, r.rkey,
                        static_cast<unsigned long long>(r.vaddr));
  for (uint8_t b : r.gid) {
    n += std::snprintf(buf + n, sizeof(buf) - static_cast<size_t>(n), "%02x:", b);
  }
  std::snprintf(buf + n, sizeof(buf) - static_cast<size_t>(n), "%08x:", r.srqn);
  return std::string(buf);
}

bool parse_qp_record(std::string_view s, QpRecord& out) {
  if (s.size() != kQpRecordChars) return false;
  // Field widths in order; every field is followed by ':'.
  static constexpr size_t kWidths[] = {4, 4, 6, 6, 8, 16, 2, 2, 2, 2, 2, 2,
                                       2, 2, 2, 2, 2, 2,  2, 2, 2, 2, 8};
  uint64_t v[std::size(kWidths)];
  size_t pos = 0;
  for (size_t i = 0; i < std::size(kWidths); ++i) {
    if (!parse_hex_field(s.substr(pos, kWidths[i]), kWidths[i], v[i])) return false;
    pos += kWidths[i];
    if (pos >= s.size() || s[pos] != ':') return false;
    ++pos;
  }
  if (pos != s.size()) return false;
  QpRecord r;
  r.lid = static_cast<uint16_t>(v[0]);
  r.out_reads = static_cast<uint16_t>(v[1]);
  r.qpn = static_cast<uint32_t>(v[2]);
  r.psn = static_cast<uint32_t>(v[3]);
  r.rkey = static_cast<uint32_t>(v[4]);
  r.vaddr = v[5];
  for (size_t i = 0; i < 16; ++i) r.gid[i] = static_cast<uint8_t>(v[6 + i]);
  r.srqn = static_cast<uint32_t>(v[22]);
  out = r;
  return true;
}

bool parse_gid(std::string_view s, Gid& out) {
  if (s.empty() || s.size() > 63) return false;
  const std::string str(s);
  in_addr a4{};
  if (inet_pton(AF_INET, str.c_str(), &a4) == 1) {
    Gid g{};
    g[10] = g[11] = 0xFF;
    std::memcpy(g.data() + 12, &a4.s_addr, 4);  // s_addr is already network order
    out = g;
    return true;
  }
  in6_addr a6{};
  if (inet_pton(AF_INET6, str.c_str(), &a6) == 1) {
    std::memcpy(out.data(), a6.s6_addr, 16);
    return true;
  }
  return false;
}

std::string format_gid(const Gid& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  static constexpr uint8_t kMappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  if (std::memcmp(g.data(), kMappedPrefix, 12) == 0) {
    inet_ntop(AF_INET, g.data() + 12, buf, sizeof(buf));
  } else {
    inet_ntop(AF_INET6, g.data(), buf, sizeof(buf));
  }
  return std::string(buf);
}

TestParams params_from_options(const PerfOptions& o) {
  TestParams p;
  p.test = o.test;
  p.qps = o.qps;
  p.sizes = o.sizes;
  p.iterations = o.effective_iterations();
  p.duration_s = o.duration_s;
  p.bidirectional = o.bidirectional;
  p.check = o.check;
  p.tx_depth = o.effective_tx_depth();
  p.rx_depth = o.effective_rx_depth();
  p.cq_mod = o.effective_cq_mod();
  p.mtu = o.effective_mtu();
  p.timeout_s = o.timeout_s;
  p.cm_service = o.cm ? o.cm_service : 0;
  return p;
}

std::string format_params(const TestParams& p) {
  std::string sizes;
  for (uint64_t s : p.sizes) {
    if (!sizes.empty()) sizes += ',';
    sizes += std::to_string(s);
  }
  Message m;
  m.verb = kProtocolTag;
  m.fields = {{"test", test_name(p.test)},
              {"qps", std::to_string(p.qps)},
              {"sizes", sizes},
              {"iters", std::to_string(p.iterations)},
              {"duration_s", std::to_string(p.duration_s)},
              {"bidir", p.bidirectional ? "1" : "0"},
              {"check", p.check ? "1" : "0"},
              {"tx_depth", std::to_string(p.tx_depth)},
              {"rx_depth", std::to_string(p.rx_depth)},
              {"cq_mod", std::to_string(p.cq_mod)},
              {"mtu", std::to_string(p.mtu)},
              {"timeout_s", std::to_string(p.timeout_s)}};
  if (p.cm_service != 0) m.fields.emplace_back("cm", std::to_string(p.cm_service));
  return format_message(m);
}

bool parse_params(std::string_view line, TestParams& out, std::string& error) {
  Message m;
  if (!parse_message(line, m)) {
    error = "the client's parameter line is malformed";
    return false;
  }
  if (m.verb != kProtocolTag) {
    error = "the peer does not speak " + std::string(kProtocolTag) +
            " (another program on this port, or another conduit-perf version)";
    return false;
  }
  static constexpr const char* kKeys[] = {
      "test",     "qps",      "sizes",  "iters", "duration_s", "bidir", "check",
      "tx_depth", "rx_depth", "cq_mod", "mtu",   "timeout_s",  "cm"};
  for (const auto& [k, v] : m.fields) {
    bool known = false;
    for (const char* want : kKeys) known = known || k == want;
    if (!known) {
      error = "unknown parameter '" + k + "'";
      return false;
    }
  }
  TestParams p;
  auto test = m.get("test");
  if (!test || !parse_test_name(*test, p.test)) {
    error = "missing or unknown test name";
    return false;
  }
  struct U32Field {
    const char* key;
    uint32_t* field;
    uint64_t lo, hi;
  };
  uint64_t bidir = 0, check = 0;
  const U32Field u32s[] = {{"qps", &p.qps, 1, kMaxQps},
                           {"duration_s", &p.duration_s, 0, 86400},
                           {"tx_depth", &p.tx_depth, 1, kMaxDepth},
                           {"rx_depth", &p.rx_depth, 1, kMaxDepth},
                           {"cq_mod", &p.cq_mod, 1, kMaxDepth},
                           {"mtu", &p.mtu, 256, 4096},
                           {"timeout_s", &p.timeout_s, 1, 3600}};
  for (const auto& f : u32s) {
    auto v = m.get_u64(f.key, f.lo, f.hi);
    if (!v) {
      error = std::string("parameter '") + f.key + "' missing or out of range";
      return false;
    }
    *f.field = static_cast<uint32_t>(*v);
  }
  if ((p.mtu & (p.mtu - 1)) != 0) {
    error = "parameter 'mtu' is not a power of two";
    return false;
  }
  auto iters = m.get_u64("iters", 0, 1'000'000'000'000ull);
  auto b = m.get_u64("bidir", 0, 1);
  auto c = m.get_u64("check", 0, 1);
  if (!iters || !b || !c) {
    error = "parameter 'iters', 'bidir' or 'check' missing or out of range";
    return false;
  }
  if (m.get("cm")) {
    auto cm = m.get_u64("cm", 1, ~uint64_t{0});
    if (!cm) {
      error = "parameter 'cm' is not a service number";
      return false;
    }
    p.cm_service = *cm;
  }
  p.iterations = *iters;
  bidir = *b;
  check = *c;
  p.bidirectional = bidir != 0;
  p.check = check != 0;
  if ((p.iterations == 0) == (p.duration_s == 0)) {
    error = "exactly one of 'iters' and 'duration_s' must be non-zero";
    return false;
  }
  auto sizes = m.get("sizes");
  if (!sizes || sizes->empty()) {
    error = "parameter 'sizes' missing";
    return false;
  }
  std::string_view rest = *sizes;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    uint64_t v = 0;
    if (!parse_dec(item, v) || v == 0 || v > kMaxMessageBytes || p.sizes.size() >= kMaxSizes) {
      error = "parameter 'sizes' holds a bad size (1 B .. 1 GiB, at most 64 of them)";
      return false;
    }
    p.sizes.push_back(v);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
    if (rest.empty()) {
      error = "parameter 'sizes' ends with a comma";
      return false;
    }
  }
  out = std::move(p);
  return true;
}

std::string server_mismatch(const TestParams& client, const PerfOptions& server) {
  if (client.test != server.test) {
    return std::string("server runs ") + test_name(server.test) + ", client asked for " +
           test_name(client.test);
  }
  const uint64_t mine = server.cm ? server.cm_service : 0;
  if (client.cm_service == mine) return "";
  auto how = [](uint64_t service) {
    return service == 0 ? std::string("exchanges QP records over TCP (no --cm)")
                        : "connects through the CM (--cm " + std::to_string(service) + ")";
  };
  return "the client " + how(client.cm_service) + ", this server " + how(mine) +
         ": give both sides the same --cm";
}

std::optional<std::string_view> Message::get(std::string_view key) const {
  for (const auto& [k, v] : fields) {
    if (k == key) return std::string_view(v);
  }
  return std::nullopt;
}

std::optional<uint64_t> Message::get_u64(std::string_view key, uint64_t lo, uint64_t hi) const {
  auto v = get(key);
  uint64_t n = 0;
  if (!v || !parse_dec(*v, n) || n < lo || n > hi) return std::nullopt;
  return n;
}

bool parse_message(std::string_view line, Message& out) {
  if (line.empty() || line.size() > kMaxLineBytes) return false;
  Message m;
  size_t pos = line.find(' ');
  m.verb = std::string(line.substr(0, pos));
  if (m.verb.empty() || m.verb.size() > kMaxKeyBytes) return false;
  for (char c : m.verb) {
    if (!value_char(c)) return false;
  }
  while (pos != std::string_view::npos) {
    ++pos;  // the single space separating fields
    const size_t next = line.find(' ', pos);
    std::string_view field = line.substr(pos, next == std::string_view::npos ? next : next - pos);
    const size_t eq = field.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq > kMaxKeyBytes) return false;
    std::string_view key = field.substr(0, eq);
    std::string_view value = field.substr(eq + 1);
    if (value.size() > kMaxValueBytes || m.fields.size() >= kMaxFields) return false;
    for (char c : key) {
      if (!key_char(c)) return false;
    }
    for (char c : value) {
      if (!value_char(c)) return false;
    }
    for (const auto& [k, v] : m.fields) {
      if (k == key) return false;  // duplicates would make get() ambiguous
    }
    m.fields.emplace_back(std::string(key), std::string(value));
    pos = next;
  }
  out = std::move(m);
  return true;
}

std::string format_message(const Message& m) {
  std::string s = m.verb;
  for (const auto& [k, v] : m.fields) {
    s += ' ';
    s += k;
    s += '=';
    s += v;
  }
  return s;
}

std::string encode_text(std::string_view s) {
  std::string out;
  for (char c : s) {
    char piece[4] = {c, 0, 0, 0};
    if (!plain_char(c)) std::snprintf(piece, sizeof piece, "%%%02X", static_cast<unsigned char>(c));
    const size_t n = std::strlen(piece);
    if (out.size() + n > kMaxValueBytes) break;  // whole escapes only
    out.append(piece, n);
  }
  return out;
}

std::string decode_text(std::string_view v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    const int hi = v[i] == '%' && i + 2 < v.size() ? hex_digit(v[i + 1]) : -1;
    const int lo = hi >= 0 ? hex_digit(v[i + 2]) : -1;
    if (lo < 0) {
      out += v[i];  // a stray '%' stays as it is
      continue;
    }
    const char c = static_cast<char>(hi * 16 + lo);
    out += (c >= 0x20 && c < 0x7f) ? c : '?';  // no control bytes reach a terminal
    i += 2;
  }
  return out;
}

Message report_message(const RunReport& r) {
  Message m;
  m.verb = "end";
  m.fields = {{"size", std::to_string(r.size_bytes)},
              {"msgs", std::to_string(r.messages)},
              {"ns", std::to_string(r.elapsed_ns)},
              {"peak_bps", std::to_string(r.peak_bps)},
              {"mismatches", std::to_string(r.mismatches)}};
  return m;
}

bool parse_report(const Message& m, RunReport& out) {
  if (m.verb != "end" || m.fields.size() != 5) return false;
  constexpr uint64_t kMax = ~0ull;
  auto size = m.get_u64("size", 1, kMaxMessageBytes);
  auto msgs = m.get_u64("msgs", 0, kMax);
  auto ns = m.get_u64("ns", 0, kMax);
  auto peak = m.get_u64("peak_bps", 0, kMax);
  auto mism = m.get_u64("mismatches", 0, kMax);
  if (!size || !msgs || !ns || !peak || !mism) return false;
  out = RunReport{*size, *msgs, *ns, *peak, *mism};
  return true;
}

}  // namespace conduit::perf
