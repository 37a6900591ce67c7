// conduitctl: inspect and steer a running conduitd over its control socket.
//
//   conduitctl [--socket PATH] status
//   conduitctl [--socket PATH] qps [--json]
//   conduitctl [--socket PATH] stats [--json]
//   conduitctl [--socket PATH] policy show
//   conduitctl [--socket PATH] policy reload
//
// Speaks the operator requests of the control protocol (lib/proto); never
// attaches, so it needs no shared memory.
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "proto/control_codec.h"
#include "proto/seqpacket.h"
#include "qp_table.h"

namespace {

namespace proto = conduit::proto;
namespace ctl = conduit::ctl;

constexpr const char* kUsage =
    "usage: conduitctl [--socket PATH] COMMAND\n"
    "\n"
    "Commands:\n"
    "  status          version, uptime, engine (lcore, idle mode, port, MTU, line rate,\n"
    "                  link), clients, QPs and the policy file\n"
    "  qps [--json]    one row per QP: number, owner, state, peer, class, current\n"
    "                  DCQCN rate (bit/s) and alpha, CNPs received/sent,\n"
    "                  retransmissions, bytes sent/received\n"
    "  stats [--json]  every daemon counter (engine, net, transport, control);\n"
    "                  --json adds the per-QP table as \"qps\"\n"
    "  policy show     the running policy as YAML (defaults filled in)\n"
    "  policy reload   re-read the policy file (like SIGHUP); an invalid file is\n"
    "                  reported and the running policy stays\n"
    "\n"
    "  --version       conduitctl's version (status shows the daemon's)\n"
    "\n"
    "The socket is --socket, else $CONDUIT_SOCKET, else /run/conduit/conduitd.sock.\n"
    "Exit status: 0 done, 1 the daemon could not be reached or refused (or the output\n"
    "could not be written), 2 usage.\n";

constexpr int kReplyTimeoutSeconds = 10;

class Client {
 public:
  explicit Client(std::string path) : path_(std::move(path)) {}

  // 0 or a negative errno (message printed).
  int connect() {
    int rc = proto::connect_seqpacket(path_, sock_);
    if (rc < 0) {
      std::fprintf(stderr, "conduitctl: %s\n", proto::connect_error_message(rc, path_).c_str());
      return rc;
    }
    timeval tv{kReplyTimeoutSeconds, 0};
    ::setsockopt(sock_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return 0;
  }

  // Sends one request; on success fills `reply`. Errors are printed.
  int call(proto::Request body, proto::ReplyMessage& reply) {
    proto::RequestMessage req{++seq_, std::move(body)};
    int rc = proto::send_datagram(sock_.get(), proto::encode_request(req));
    if (rc < 0) return fail(rc, "sending to conduitd");
    std::vector<uint8_t> buf;
    std::vector<proto::UniqueFd> fds;
    ssize_t n = proto::recv_datagram(sock_.get(), buf, fds);
    if (n == 0) return fail(-ECONNRESET, "conduitd closed the connection");
    if (n == -EAGAIN || n == -EWOULDBLOCK) {
      std::fprintf(stderr,
                   "conduitctl: conduitd at %s did not answer within %d s (is it hung? "
                   "'systemctl status conduitd' and its log may say why)\n",
                   path_.c_str(), kReplyTimeoutSeconds);
      return -ETIMEDOUT;
    }
    if (n < 0) return fail(static_cast<int>(n), "no answer from conduitd");
    proto::CodecError err;
    if (!proto::decode_reply(buf, reply, err)) return fail(err.code, "bad reply: " + err.reason);
    if (reply.seq != req.seq || reply.type != req.type()) {
      return fail(-EPROTO, "conduitd answered a different request");
    }
    if (reply.status < 0) {
      std::fprintf(stderr, "conduitctl: %s\n", reply.reason.c_str());
      return reply.status;
    }
    return 0;
  }

 private:
  int fail(int rc, const std::string& what) {
    std::fprintf(stderr, "conduitctl: %s: %s\n", what.c_str(), std::strerror(-rc));
    return rc;
  }
  std::string path_;
  proto::UniqueFd sock_;
  uint32_t seq_ = 0;
};

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\u%04x", c);
      out += b;
    } else {
      out += c;
    }
  }
  return out;
}

std::string gid_str(const std::array<uint8_t, 16>& g) { return proto::gid_string(g); }

int cmd_status(Client& c) {
  proto::ReplyMessage r;
  if (int rc = c.call(proto::StatusRequest{}, r); rc < 0) return 1;
  const auto& s = std::get<proto::StatusReply>(r.body);
  std::printf("conduitd %s, up %" PRIu64 " s\n", s.version.c_str(), s.uptime_s);
  std::printf("engine:  %s\n", s.engine_state.c_str());
  std::printf("clients: %u\n", s.clients);
  std::printf("QPs:     %u\n", s.qps);
  std::printf("policy:  %s\n", s.policy_path.c_str());
  return 0;
}

// Every QP, page by page (the daemon refreshes the engine's figures for page one).
int list_qps(Client& c, std::vector<proto::QpSummary>& all) {
  uint32_t start = 0;
  for (;;) {
    proto::ReplyMessage r;
    if (c.call(proto::ListQpsRequest{start, proto::kMaxListEntries}, r) < 0) return -1;
    const auto& l = std::get<proto::ListQpsReply>(r.body);
    all.insert(all.end(), l.qps.begin(), l.qps.end());
    if (l.next_qpn == 0 || l.next_qpn <= start) break;
    start = l.next_qpn;
  }
  return 0;
}

void print_qps_json(const std::vector<proto::QpSummary>& all) {
  std::printf("[");
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& q = all[i];
    std::printf(
        "%s{\"qpn\": %u, \"client\": %u, \"pid\": %u, \"state\": \"%s\", "
        "\"dest_qpn\": %u, \"peer\": \"%s\", \"class\": \"%s\", \"rate_bps\": %" PRIu64
        ", \"alpha\": %.6f, \"cnps_rx\": %" PRIu64 ", \"cnps_tx\": %" PRIu64
        ", \"retransmits\": %" PRIu64 ", \"tx_bytes\": %" PRIu64 ", \"rx_bytes\": %" PRIu64 "}",
        i == 0 ? "" : ", ", q.qpn, q.client_id, q.pid, proto::qp_state_name(q.state), q.dest_qpn,
        gid_str(q.dgid).c_str(), json_escape(q.traffic_class).c_str(), q.rate_bps,
        q.alpha_ppm / 1e6, q.cnps_rx, q.cnps_tx, q.retransmits, q.tx_bytes, q.rx_bytes);
  }
  std::printf("]");
}

// --json: the daemon's counters as top-level keys, plus "qps": the per-QP table.
int cmd_stats(Client& c, bool json) {
  proto::ReplyMessage r;
  if (c.call(proto::StatsRequest{}, r) < 0) return 1;
  const auto& s = std::get<proto::StatsReply>(r.body);
  if (json) {
    std::vector<proto::QpSummary> qps;
    if (list_qps(c, qps) < 0) return 1;
    std::printf("{");
    for (const auto& k : s.counters) {
      std::printf("\"%s\": %" PRIu64 ", ", json_escape(k.name).c_str(), k.value);
    }
    std::printf("\"qps\": ");
    print_qps_json(qps);
    std::printf("}\n");
    return 0;
  }
  size_t w = 0;
  for (const auto& k : s.counters) w = std::max(w, k.name.size());
  for (const auto& k : s.counters) {
    std::printf("%-*s %" PRIu64 "\n", static_cast<int>(w), k.name.c_str(), k.value);
  }
  return 0;
}

int cmd_qps(Client& c, bool json) {
  std::vector<proto::QpSummary> all;
  if (list_qps(c, all) < 0) return 1;
  if (json) {
    print_qps_json(all);
    std::printf("\n");
    return 0;
  }
  std::fputs(ctl::format_qp_table(all).c_str(), stdout);
  return 0;
}

int cmd_policy_show(Client& c) {
  uint64_t offset = 0;
  for (;;) {
    proto::ReplyMessage r;
    if (c.call(proto::PolicyShowRequest{offset}, r) < 0) return 1;
    const auto& p = std::get<proto::PolicyShowReply>(r.body);
    std::fwrite(p.chunk.data(), 1, p.chunk.size(), stdout);
    offset += p.chunk.size();
    if (p.chunk.empty() || offset >= p.total_bytes) break;
  }
  return 0;
}

int cmd_policy_reload(Client& c) {
  proto::ReplyMessage r;
  if (c.call(proto::PolicyReloadRequest{}, r) < 0) return 1;
  std::printf("%s\n", std::get<proto::PolicyReloadReply>(r.body).message.c_str());
  return 0;
}

// One line, as conduitd's: the mistake stays visible (in a script's log too).
int usage_error(const std::string& what) {
  std::fprintf(stderr, "conduitctl: %s (see conduitctl --help)\n", what.c_str());
  return 2;
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const char* env = std::getenv("CONDUIT_SOCKET");
  std::string socket = env != nullptr && *env != '\0' ? env : "/run/conduit/conduitd.sock";
  bool json = false;
  std::vector<std::string> words;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--socket") {
      if (i + 1 >= args.size()) return usage_error("--socket needs a PATH");
      socket = args[++i];
    } else if (a.starts_with("--socket=")) {
      socket = a.substr(9);
    } else if (a == "--json") {
      json = true;
    } else if (a == "--help" || a == "-h" || a == "help") {
      std::printf("%s", kUsage);
      return 0;
    } else if (a == "--version") {
      std::printf("conduitctl %s\n", CONDUIT_VERSION);
      return 0;
    } else if (a.starts_with("-")) {
      return usage_error("unknown option '" + a + "'");
    } else {
      words.push_back(a);
    }
  }
  if (socket.empty()) return usage_error("the socket path is empty");
  auto is = [&](std::initializer_list<const char*> w) {
    if (words.size() != w.size()) return false;
    size_t i = 0;
    for (const char* x : w) {
      if (words[i++] != x) return false;
    }
    return true;
  };
  enum { kStatus, kQps, kStats, kShow, kReload, kBad } cmd = kBad;
  if (is({"status"})) cmd = kStatus;
  if (is({"qps"})) cmd = kQps;
  if (is({"stats"})) cmd = kStats;
  if (is({"policy", "show"})) cmd = kShow;
  if (is({"policy", "reload"})) cmd = kReload;
  if (cmd == kBad) {
    if (words.empty()) return usage_error("no command given");
    std::string given;
    for (const auto& w : words) given += (given.empty() ? "" : " ") + w;
    if (words[0] == "policy") {
      return usage_error("unknown command '" + given + "': policy takes 'show' or 'reload'");
    }
    return usage_error("unknown command '" + given + "'");
  }
  if (json && cmd != kQps && cmd != kStats) {
    return usage_error("--json applies to 'qps' and 'stats' only");
  }
  Client c(socket);
  if (c.connect() < 0) return 1;
  switch (cmd) {
    case kStatus:
      return cmd_status(c);
    case kQps:
      return cmd_qps(c, json);
    case kStats:
      return cmd_stats(c, json);
    case kShow:
      return cmd_policy_show(c);
    case kReload:
      return cmd_policy_reload(c);
    case kBad:
      break;
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const int rc = run(argc, argv);
  // Output that did not reach its file (a full disk under `stats --json > f`) is a failure,
  // not exit 0 with the output cut short.
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) {
    std::fprintf(stderr, "conduitctl: writing the output: %s\n",
                 errno != 0 ? std::strerror(errno) : "write error");
    return rc == 0 ? 1 : rc;
  }
  return rc;
}
