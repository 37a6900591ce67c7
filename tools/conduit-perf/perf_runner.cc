#include "perf_runner.h"

#include "perftest_session.h"

#include <conduit/conduit.h>
#include <sched.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "exchange.h"
#include "payload_pattern.h"
#include "perf_report.h"
#include "proto/seqpacket.h"
#include "tcp_line_channel.h"

namespace conduit::perf {

namespace {

constexpr uint64_t kCheckBudgetBytes = 128ull << 20;  // all QPs' MRs with --check
constexpr uint32_t kSpinsBeforeSleep = 2000;
constexpr uint32_t kLoopsPerChannelPoll = 256;
constexpr uint64_t kMaxInFlightBytes = 32ull << 20;  // per QP
constexpr long kWriteLatNapNs = 50'000;

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Seeds: (QP, size index, message) for SEND/WRITE payloads; READ sources use bit 35.
uint64_t message_seed(uint32_t qp, size_t size_index, uint64_t seq) {
  return payload_seed(qp, (uint64_t{size_index} << 36) | seq);
}
uint64_t read_source_seed(uint32_t qp, size_t size_index, uint32_t slot) {
  return payload_seed(qp, (uint64_t{size_index} << 36) | (1ull << 35) | slot);
}
// write_lat: the last byte marks which round trip a buffer belongs to.
uint8_t round_marker(uint64_t seq) { return static_cast<uint8_t>(1 + seq % 255); }

uint32_t mtu_enum(uint32_t bytes) {
  switch (bytes) {
    case 256:
      return CONDUIT_MTU_256;
    case 512:
      return CONDUIT_MTU_512;
    case 2048:
      return CONDUIT_MTU_2048;
    case 4096:
      return CONDUIT_MTU_4096;
    default:
      return CONDUIT_MTU_1024;
  }
}

struct Failure {
  std::string message;
};

[[noreturn]] void fail(std::string message) { throw Failure{std::move(message)}; }

void check_rc(int rc, const char* what) {
  if (rc < 0) fail(std::string(what) + ": " + conduit_strerror(rc));
}

struct QpSide {
  conduit_qp* qp = nullptr;
  conduit_mr* mr = nullptr;
  uint32_t psn = 0;
  QpRecord remote;
  // Sender state for the current size.
  uint64_t posted = 0;
  uint64_t completed = 0;
  // Receives: persistent across sizes (posted receives carry over).
  uint64_t rx_posted_total = 0;
  uint64_t rx_done_total = 0;
  uint64_t rx_in_size = 0;  // SENDs received in this size
};

// All conduit objects of one side; destroyed in reverse order.
class Endpoint {
 public:
  ~Endpoint() {
    for (auto& q : qps_) {
      if (q.qp != nullptr) conduit_destroy_qp(q.qp);
    }
    for (conduit_cq* cq : send_cqs_) conduit_destroy_cq(cq);
    for (conduit_cq* cq : recv_cqs_) conduit_destroy_cq(cq);
    for (auto& q : qps_) {
      if (q.mr != nullptr) conduit_free_mr(q.mr);
    }
    if (ctx_ != nullptr) conduit_close(ctx_);
  }

  void open(const PerfOptions& o, const TestParams& p, const BufferLayout& layout) {
    conduit_context_attr attr{};
    attr.socket_path = o.socket_path.empty() ? nullptr : o.socket_path.c_str();
    // Page-rounded MRs plus room for the rings the daemon places in the region.
    const uint64_t mr_bytes = (layout.mr_bytes() + 4095) & ~uint64_t{4095};
    attr.region_bytes = mr_bytes * p.qps + (8ull << 20) + uint64_t{p.qps} * (256u << 10);
    attr.client_name = o.is_server() ? "conduit-perf-server" : "conduit-perf-client";
    check_rc(conduit_open(&attr, &ctx_), "conduit_open");
    conduit_context_limits lim{};
    check_rc(conduit_query_context(ctx_, &lim), "conduit_query_context");
    if (p.tx_depth > lim.max_send_wr || p.rx_depth > lim.max_recv_wr) {
      const bool tx = p.tx_depth > lim.max_send_wr;
      fail(std::string(tx ? "send" : "receive") + " depth " +
           std::to_string(tx ? p.tx_depth : p.rx_depth) + " (" + (tx ? "-t" : "-r") +
           ", or the peer's) is deeper than this conduitd's " + (tx ? "send" : "receive") +
           " queues: they hold " + std::to_string(tx ? lim.max_send_wr : lim.max_recv_wr) +
           " work requests (policy clients.quotas." + (tx ? "max_send_wr" : "max_recv_wr") + ")");
    }
    // QPs share a CQ pair only as far as every completion they can have outstanding
    // (all WRs signaled, every receive) fits into the daemon's CQ rings.
    const uint32_t per_qp = std::max(p.tx_depth, p.rx_depth) + 1;
    qps_per_cq_ = std::max<uint32_t>(1, lim.max_cqe / per_qp);
    const uint32_t groups = (p.qps + qps_per_cq_ - 1) / qps_per_cq_;
    const uint32_t entries = std::min(lim.max_cqe, qps_per_cq_ * per_qp);
    if (entries < per_qp) {
      fail("one QP can have " + std::to_string(per_qp) + " completions outstanding, more than " +
           "this conduitd's CQs hold (" + std::to_string(lim.max_cqe) +
           ", policy clients.quotas.max_cqe); lower -t / -r or raise max_cqe");
    }
    for (uint32_t g = 0; g < groups; ++g) {
      conduit_cq* cq = nullptr;
      check_rc(conduit_create_cq(ctx_, entries, &cq), "conduit_create_cq (send)");
      send_cqs_.push_back(cq);
      check_rc(conduit_create_cq(ctx_, entries, &cq), "conduit_create_cq (recv)");
      recv_cqs_.push_back(cq);
    }
    std::mt19937 rng(static_cast<uint32_t>(now_ns() ^ static_cast<uint64_t>(getpid())));
    qps_.resize(p.qps);
    for (uint32_t i = 0; i < p.qps; ++i) {
      QpSide& q = qps_[i];
      check_rc(conduit_alloc_mr(ctx_, layout.mr_bytes(),
                                CONDUIT_ACCESS_LOCAL_WRITE | CONDUIT_ACCESS_REMOTE_WRITE |
                                    CONDUIT_ACCESS_REMOTE_READ,
                                &q.mr),
               "conduit_alloc_mr");
      conduit_qp_init_attr qa{};
      qa.send_cq = send_cqs_[i / qps_per_cq_];
      qa.recv_cq = recv_cqs_[i / qps_per_cq_];
      qa.max_send_wr = p.tx_depth;
      qa.max_recv_wr = p.rx_depth;
      qa.traffic_class = o.traffic_class.empty() ? nullptr : o.traffic_class.c_str();
      check_rc(conduit_create_qp(ctx_, &qa, &q.qp), "conduit_create_qp");
      q.psn = rng() & 0xFFFFFFu;
    }
  }

  QpRecord record(uint32_t i, const Gid& gid) const {
    const QpSide& q = qps_[i];
    QpRecord r;
    r.lid = 0;
    r.out_reads = 16;
    r.qpn = conduit_qp_num(q.qp);
    r.psn = q.psn;
    r.rkey = q.mr->rkey;
    r.vaddr = q.mr->iova;
    r.gid = gid;
    return r;
  }

  void connect(uint32_t i, const QpRecord& remote, uint32_t mtu_bytes, uint8_t qp_timeout) {
    QpSide& q = qps_[i];
    q.remote = remote;
    conduit_qp_connect_attr ca{};
    ca.remote_qpn = remote.qpn;
    ca.remote_psn = remote.psn;
    ca.local_psn = q.psn;
    std::memcpy(ca.remote_gid, remote.gid.data(), 16);
    ca.mtu = mtu_enum(mtu_bytes);
    ca.access =
        CONDUIT_ACCESS_LOCAL_WRITE | CONDUIT_ACCESS_REMOTE_WRITE | CONDUIT_ACCESS_REMOTE_READ;
    ca.timeout = qp_timeout;  // -u; 14: 67 ms, 7 retries: a dead peer fails in ~0.5 s
    ca.retry_cnt = 7;
    ca.rnr_retry = 7;
    ca.min_rnr_timer = 12;
    check_rc(conduit_connect_qp(q.qp, &ca), "conduit_connect_qp");
  }

  // Connection manager: QP i connects to / is accepted for the peer's QP i;
  // the private data carries the QP index and the MR's rkey and iova (what
  // the TCP record carries otherwise).
  static std::array<uint8_t, 16> cm_private(uint32_t index, uint32_t rkey, uint64_t iova) {
    std::array<uint8_t, 16> b{};
    std::memcpy(b.data(), &index, 4);
    std::memcpy(b.data() + 4, &rkey, 4);
    std::memcpy(b.data() + 8, &iova, 8);
    return b;
  }
  static void cm_remote(const uint8_t* priv, QpRecord& r, uint32_t* index) {
    std::memcpy(index, priv, 4);
    std::memcpy(&r.rkey, priv + 4, 4);
    std::memcpy(&r.vaddr, priv + 8, 8);
  }
  conduit_cm_param cm_param(uint32_t i, uint32_t mtu_bytes, bool sr,
                            std::array<uint8_t, 16>& priv) const {
    priv = cm_private(i, qps_[i].mr->rkey, qps_[i].mr->iova);
    conduit_cm_param cp{};
    cp.access =
        CONDUIT_ACCESS_LOCAL_WRITE | CONDUIT_ACCESS_REMOTE_WRITE | CONDUIT_ACCESS_REMOTE_READ;
    cp.mtu = mtu_enum(mtu_bytes);
    cp.flags = sr ? CONDUIT_CM_SELECTIVE_REPEAT : 0;
    cp.private_data = priv.data();
    cp.private_len = priv.size();
    return cp;
  }
  void cm_connect(uint32_t i, const std::string& host, uint64_t service, uint32_t mtu_bytes,
                  bool sr, int timeout_ms) {
    std::array<uint8_t, 16> priv;
    const conduit_cm_param cp = cm_param(i, mtu_bytes, sr, priv);
    conduit_cm_conn conn{};
    check_rc(conduit_connect_service(qps_[i].qp, host.c_str(), service, &cp, timeout_ms, &conn),
             "conduit_connect_service");
    if (conn.private_len != 16) fail("the peer's accept carried no rkey/iova");
    uint32_t index = 0;
    cm_remote(conn.private_data, qps_[i].remote, &index);
    qps_[i].remote.qpn = conn.remote_qpn;
  }
  // Answers one request; returns the QP index it connected.
  uint32_t cm_accept_one(uint32_t mtu_bytes, bool sr, int timeout_ms) {
    conduit_cm_request req{};
    check_rc(conduit_get_request(ctx_, timeout_ms, &req), "conduit_get_request");
    QpRecord remote;
    uint32_t index = UINT32_MAX;
    if (req.private_len == 16) cm_remote(req.private_data, remote, &index);
    if (index >= qps_.size() || qps_[index].remote.qpn != 0) {
      conduit_reject(ctx_, &req, CONDUIT_CM_REJ_REFUSED);
      fail("connection request for an unknown or already connected QP index");
    }
    std::array<uint8_t, 16> priv;
    const conduit_cm_param cp = cm_param(index, mtu_bytes, sr, priv);
    check_rc(conduit_accept(qps_[index].qp, &req, &cp, timeout_ms, nullptr), "conduit_accept");
    remote.qpn = req.peer_qpn;
    qps_[index].remote = remote;
    return index;
  }
  void listen(uint64_t service) { check_rc(conduit_listen(ctx_, service), "conduit_listen"); }

  std::vector<QpSide>& qps() { return qps_; }
  const std::vector<conduit_cq*>& send_cqs() const { return send_cqs_; }
  const std::vector<conduit_cq*>& recv_cqs() const { return recv_cqs_; }
  uint8_t* buffer(uint32_t i) const { return static_cast<uint8_t*>(qps_[i].mr->addr); }

 private:
  conduit_context* ctx_ = nullptr;
  std::vector<conduit_cq*> send_cqs_;  // one pair per qps_per_cq_ QPs
  std::vector<conduit_cq*> recv_cqs_;
  uint32_t qps_per_cq_ = 1;
  std::vector<QpSide> qps_;
};

// What this side does in the current test.
struct Roles {
  bool sends = false;     // posts SEND/WRITE/READ work requests
  bool receives = false;  // posts receives for the peer's SENDs
  bool peer_sends = false;
  bool peer_writes = false;  // the peer's WRITEs land in our rx slots (verified after)
};

Roles roles_for(TestKind t, bool bidirectional, bool client) {
  Roles r;
  switch (t) {
    case TestKind::kSendBw:
      r.sends = client || bidirectional;
      r.peer_sends = !client || bidirectional;
      r.receives = r.peer_sends;
      break;
    case TestKind::kWriteBw:
    case TestKind::kReadBw:
    case TestKind::kAtomicBw:  // refused without --perftest (perf_options.cc); READ's roles
      r.sends = client || bidirectional;
      r.peer_sends = !client || bidirectional;
      r.peer_writes = t == TestKind::kWriteBw && r.peer_sends;
      break;
    case TestKind::kSendLat:
      r.sends = r.peer_sends = r.receives = true;
      break;
    case TestKind::kWriteLat:
      r.sends = r.peer_sends = true;
      break;
    case TestKind::kReadLat:    // the client READs, the server's memory answers
    case TestKind::kAtomicLat:  // refused without --perftest (perf_options.cc)
      r.sends = client;
      r.peer_sends = !client;
      break;
  }
  return r;
}

class Session {
 public:
  Session(const PerfOptions& o, TcpLineChannel& ch) : o_(o), ch_(ch) {}

  int run();

 private:
  void negotiate();
  void connect_through_cm(const Gid& gid);
  void run_size(size_t size_index);
  void run_bw(size_t size_index, uint64_t size);
  void run_lat(size_t size_index, uint64_t size);
  void post_receives(uint32_t qi);
  bool post_one(uint32_t qi, uint64_t seq, uint64_t size, size_t size_index, bool signaled);
  void prepare_size(size_t size_index, uint64_t size);
  void verify_written(size_t size_index, uint64_t size, uint64_t per_qp, uint64_t& mismatches);
  bool poll_channel(std::optional<RunReport>& peer_end, std::optional<uint64_t>& verified);
  void idle();
  void progress() {
    last_progress_ns_ = now_ns();
    spins_ = 0;
  }
  void check_stalled(const char* what);
  std::string expect_line(const char* what);

  const PerfOptions& o_;
  TcpLineChannel& ch_;
  TestParams p_;
  BufferLayout layout_;
  Roles roles_;
  Endpoint ep_;
  bool client_ = false;
  uint32_t spins_ = 0;
  std::vector<conduit_cq*> wait_cqs_;  // what idle() sleeps on: the CQs this side's roles use
  size_t wait_from_ = 0;               // first of the (at most 64) CQs the next sleep watches
  uint64_t last_progress_ns_ = 0;
  uint64_t mismatches_total_ = 0;
  bool header_printed_ = false;
  RunReport mine_report_;
  // A line of the peer's next step ("start", "bye") read while this step still drained its
  // queues; expect_line() hands it out first.
  std::optional<std::string> held_line_;
};

std::string Session::expect_line(const char* what) {
  std::string line, error;
  const int timeout_ms = static_cast<int>(p_.timeout_s * 1000);
  if (held_line_) {
    line = std::move(*held_line_);
    held_line_.reset();
  } else if (!ch_.recv_line(line, timeout_ms, error)) {
    fail(std::string("waiting for ") + what + ": " + error);
  }
  Message m;
  if (parse_message(line, m) && m.verb == "error") {
    auto reason = m.get("reason");
    fail("the peer reports an error: " + (reason ? decode_text(*reason) : "(no reason)"));
  }
  return line;
}

void Session::check_stalled(const char* what) {
  if (now_ns() - last_progress_ns_ > uint64_t{p_.timeout_s} * 1'000'000'000ull) {
    fail(std::string("no progress for ") + std::to_string(p_.timeout_s) + " s while " + what +
         " (is the engine running? 'conduitctl qps' shows the QPs)");
  }
}

void Session::idle() {
  if (!roles_.sends && !roles_.receives) {
    // Nothing to poll here (the peer WRITEs or READs): sleep on the channel, not a core.
    ch_.wait_readable(50);
    return;
  }
  // Busy-poll a while, then sleep on the CQ: the daemons need the cores too (on this
  // two-core machine a spinning client starves them, and latency goes to milliseconds).
  if (o_.yield) {
    // The engine on this core runs until it has something for us, then yields back.
    sched_yield();
    return;
  }
  if (!o_.events && ++spins_ <= kSpinsBeforeSleep) return;
  if (wait_cqs_.empty()) {
    // A ping-pong waits for the answer; the send completions are reaped on the way.
    if (roles_.sends && !is_latency(p_.test)) wait_cqs_ = ep_.send_cqs();
    if (roles_.receives) {
      wait_cqs_.insert(wait_cqs_.end(), ep_.recv_cqs().begin(), ep_.recv_cqs().end());
    }
    if (wait_cqs_.empty()) wait_cqs_ = ep_.send_cqs();
  }
  // Any of the CQs wakes the sleep (a completion channel's job). More than one call
  // watches: a window of them in turn, so none waits longer than a few sleeps.
  const size_t n = std::min<size_t>(wait_cqs_.size(), CONDUIT_MAX_WAIT_CQS);
  if (wait_from_ + n > wait_cqs_.size()) wait_from_ = 0;
  const int rc = conduit_wait_cqs(wait_cqs_.data() + wait_from_, static_cast<int>(n),
                                  o_.events && n == wait_cqs_.size() ? 5 : 1);
  wait_from_ = (wait_from_ + n) % wait_cqs_.size();
  if (rc < 0) fail(std::string("waiting for completions: ") + conduit_strerror(rc));
}

void Session::negotiate() {
  std::string error;
  Gid gid{};
  const std::string gid_text = o_.gid.empty() ? ch_.local_address() : o_.gid;
  if (!parse_gid(gid_text, gid)) {
    fail("cannot use '" + gid_text + "' as our address (give our conduitd's address with -x)");
  }
  if (client_) {
    p_ = params_from_options(o_);
    if (!ch_.send_line(format_params(p_), error)) fail(error);
    std::string line = expect_line("the server's answer");
    if (line != "ok") fail("the server answered '" + line.substr(0, 80) + "'");
  } else {
    std::string line = expect_line("the client's parameters");
    if (!parse_params(line, p_, error)) {
      std::string ignored;
      ch_.send_line("error reason=" + encode_text(error), ignored);
      fail("bad parameters from the client: " + error);
    }
    error = server_mismatch(p_, o_);
    if (!error.empty()) {
      std::string ignored;
      ch_.send_line("error reason=" + encode_text(error), ignored);
      fail(error);
    }
  }
  roles_ = roles_for(p_.test, p_.bidirectional, client_);
  const uint64_t max_size = *std::max_element(p_.sizes.begin(), p_.sizes.end());
  layout_ = make_layout(max_size, p_.qps, p_.tx_depth, p_.rx_depth, p_.check, kCheckBudgetBytes);
  ep_.open(o_, p_, layout_);
  // The listener is up before the client hears "ok".
  if (!client_ && o_.cm) ep_.listen(o_.cm_service);
  if (!client_ && !ch_.send_line("ok", error)) fail(error);

  if (o_.cm) {
    connect_through_cm(gid);
    return;
  }
  // QP records: the client first, then the server (perftest's order).
  std::vector<QpRecord> remote(p_.qps);
  auto send_records = [&] {
    for (uint32_t i = 0; i < p_.qps; ++i) {
      if (!ch_.send_line("qp " + format_qp_record(ep_.record(i, gid)), error)) fail(error);
    }
  };
  auto recv_records = [&] {
    for (uint32_t i = 0; i < p_.qps; ++i) {
      std::string line = expect_line("the peer's QP records");
      if (line.size() < 3 || line.compare(0, 3, "qp ") != 0 ||
          !parse_qp_record(std::string_view(line).substr(3), remote[i])) {
        fail("malformed QP record from the peer: '" + line.substr(0, 120) + "'");
      }
    }
  };
  if (client_) {
    send_records();
    recv_records();
  } else {
    recv_records();
    send_records();
  }
  for (uint32_t i = 0; i < p_.qps; ++i) ep_.connect(i, remote[i], p_.mtu, o_.qp_timeout);
  if (!o_.json) {
    std::printf(
        "conduit-perf %s: %s, %u QP%s, mtu %u, %s, local %s (QPN 0x%06x) remote %s (QPN "
        "0x%06x)%s\n",
        test_name(p_.test), client_ ? "client" : "server", p_.qps, p_.qps == 1 ? "" : "s", p_.mtu,
        p_.iterations != 0 ? (std::to_string(p_.iterations) + " iterations").c_str()
                           : (std::to_string(p_.duration_s) + " s per size").c_str(),
        format_gid(gid).c_str(), ep_.record(0, gid).qpn, format_gid(remote[0].gid).c_str(),
        remote[0].qpn, p_.check ? ", checking every byte" : "");
    std::fflush(stdout);
  }
}

// --cm: the server tells the client its daemon's address, then each QP is
// connected through the connection manager, one after the other.
void Session::connect_through_cm(const Gid& gid) {
  std::string error;
  const int timeout_ms = static_cast<int>(p_.timeout_s * 1000);
  std::string host;
  if (client_) {
    const std::string line = expect_line("the server's CM address");
    if (line.compare(0, 8, "cm addr=") != 0) fail("expected 'cm addr=...', got '" + line + "'");
    host = line.substr(8);
    for (uint32_t i = 0; i < p_.qps; ++i) {
      ep_.cm_connect(i, host, o_.cm_service, p_.mtu, o_.cm_selective_repeat, timeout_ms);
    }
  } else {
    host = format_gid(gid);  // a dotted quad for an IPv4-mapped GID, else IPv6 text
    if (!ch_.send_line("cm addr=" + host, error)) fail(error);
    for (uint32_t i = 0; i < p_.qps; ++i) {
      ep_.cm_accept_one(p_.mtu, o_.cm_selective_repeat, timeout_ms);
    }
  }
  if (!o_.json) {
    std::printf(
        "conduit-perf %s: %s, %u QP%s, mtu %u, connected through the CM (service %llu, peer "
        "%s%s), QPN 0x%06x -> 0x%06x%s\n",
        test_name(p_.test), client_ ? "client" : "server", p_.qps, p_.qps == 1 ? "" : "s", p_.mtu,
        static_cast<unsigned long long>(o_.cm_service), client_ ? host.c_str() : "any",
        o_.cm_selective_repeat ? ", selective repeat offered" : "", conduit_qp_num(ep_.qps()[0].qp),
        ep_.qps()[0].remote.qpn, p_.check ? ", checking every byte" : "");
    std::fflush(stdout);
  }
}

void Session::post_receives(uint32_t qi) {
  QpSide& q = ep_.qps()[qi];
  const uint64_t target = p_.check ? layout_.rx_slots : p_.rx_depth;
  while (q.rx_posted_total - q.rx_done_total < target) {
    const uint32_t slot = static_cast<uint32_t>(q.rx_posted_total % layout_.rx_slots);
    conduit_sge sge{reinterpret_cast<uint64_t>(ep_.buffer(qi) + layout_.rx_offset(slot)),
                    static_cast<uint32_t>(layout_.slot_bytes), q.mr->lkey};
    conduit_recv_wr wr{};
    wr.wr_id = (uint64_t{qi} << 40) | slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    conduit_recv_wr* bad = nullptr;
    const int rc = conduit_post_recv(q.qp, &wr, &bad);
    if (rc == -ENOMEM) return;  // receive queue full: the next completion frees a place
    check_rc(rc, "conduit_post_recv");
    ++q.rx_posted_total;
  }
}

// Fills the buffer the message goes out of (or into, for READ) and posts it.
bool Session::post_one(uint32_t qi, uint64_t seq, uint64_t size, size_t size_index, bool signaled) {
  QpSide& q = ep_.qps()[qi];
  uint8_t* base = ep_.buffer(qi);
  conduit_sge sge{};
  sge.length = static_cast<uint32_t>(size);
  sge.lkey = q.mr->lkey;
  conduit_send_wr wr{};
  wr.wr_id = (uint64_t{qi} << 40) | seq;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = signaled ? CONDUIT_SEND_SIGNALED : 0;
  wr.rkey = q.remote.rkey;
  const uint32_t tx_slot = static_cast<uint32_t>(seq % layout_.tx_slots);
  const uint32_t rx_slot = static_cast<uint32_t>(seq % layout_.rx_slots);
  switch (p_.test) {
    case TestKind::kSendBw:
    case TestKind::kSendLat:
      wr.opcode = CONDUIT_WR_SEND;
      sge.addr = reinterpret_cast<uint64_t>(base + layout_.tx_offset(tx_slot));
      if (p_.check)
        fill_pattern(base + layout_.tx_offset(tx_slot), size, message_seed(qi, size_index, seq));
      break;
    case TestKind::kWriteBw:
      wr.opcode = CONDUIT_WR_RDMA_WRITE;
      sge.addr = reinterpret_cast<uint64_t>(base + layout_.tx_offset(tx_slot));
      wr.remote_addr = q.remote.vaddr + layout_.rx_offset(rx_slot);
      if (p_.check)
        fill_pattern(base + layout_.tx_offset(tx_slot), size, message_seed(qi, size_index, seq));
      break;
    case TestKind::kWriteLat: {
      wr.opcode = CONDUIT_WR_RDMA_WRITE;
      uint8_t* src = base + layout_.tx_offset(tx_slot);
      sge.addr = reinterpret_cast<uint64_t>(src);
      wr.remote_addr = q.remote.vaddr + layout_.rx_offset(0);
      if (p_.check) fill_pattern(src, size - 1, message_seed(qi, size_index, seq));
      src[size - 1] = round_marker(seq);
      break;
    }
    case TestKind::kAtomicBw:
    case TestKind::kAtomicLat:
      fail("the atomic tests run with --perftest only");
    case TestKind::kReadBw:
    case TestKind::kReadLat: {
      wr.opcode = CONDUIT_WR_RDMA_READ;
      sge.addr = reinterpret_cast<uint64_t>(base + layout_.rx_offset(rx_slot));
      wr.remote_addr = q.remote.vaddr + layout_.tx_offset(tx_slot);
      break;
    }
  }
  conduit_send_wr* bad = nullptr;
  const int rc = conduit_post_send(q.qp, &wr, &bad);
  if (rc == -ENOMEM) return false;  // send ring full: retry after completions
  check_rc(rc, "conduit_post_send");
  return true;
}

// Before "ready": READ sources filled, WRITE targets cleared, receives posted.
void Session::prepare_size(size_t size_index, uint64_t size) {
  for (uint32_t qi = 0; qi < p_.qps; ++qi) {
    uint8_t* base = ep_.buffer(qi);
    const bool read = p_.test == TestKind::kReadBw || p_.test == TestKind::kReadLat;
    if (read && roles_.peer_sends) {
      for (uint32_t s = 0; s < layout_.tx_slots; ++s) {
        if (p_.check) {
          fill_pattern(base + layout_.tx_offset(s), size, read_source_seed(qi, size_index, s));
        }
      }
    }
    if ((p_.test == TestKind::kWriteBw || p_.test == TestKind::kWriteLat) && roles_.peer_sends) {
      std::memset(base + layout_.rx_offset(0), 0, layout_.rx_slots * layout_.slot_bytes);
    }
    if (read && p_.check) {
      std::memset(base + layout_.rx_offset(0), 0, layout_.rx_slots * layout_.slot_bytes);
    }
    QpSide& q = ep_.qps()[qi];
    q.posted = q.completed = 0;
    q.rx_in_size = 0;
    if (roles_.receives) post_receives(qi);
  }
}

void Session::verify_written(size_t size_index, uint64_t size, uint64_t per_qp,
                             uint64_t& mismatches) {
  for (uint32_t qi = 0; qi < p_.qps; ++qi) {
    const uint8_t* base = ep_.buffer(qi);
    for (uint32_t k = 0; k < layout_.rx_slots && k < per_qp; ++k) {
      // The last message that went to slot k.
      const uint64_t seq = k + ((per_qp - 1 - k) / layout_.rx_slots) * layout_.rx_slots;
      if (!check_pattern(base + layout_.rx_offset(k), size, message_seed(qi, size_index, seq))) {
        ++mismatches;
      }
    }
  }
}

bool Session::poll_channel(std::optional<RunReport>& peer_end, std::optional<uint64_t>& verified) {
  // One line per call. Once the peer's end report is in, the peer may already have moved on
  // (its next "start" or "bye") while this side still reaps its last receive completions:
  // such a line is held for the next step, and nothing more is read in this one.
  std::string line, error;
  bool got = false;
  if (held_line_) return false;
  if (ch_.try_recv_line(line, error)) {
    got = true;
    Message m;
    if (!parse_message(line, m))
      fail("malformed message from the peer: '" + line.substr(0, 80) + "'");
    if (m.verb == "error") {
      auto reason = m.get("reason");
      fail("the peer reports an error: " + (reason ? decode_text(*reason) : "(no reason)"));
    } else if (m.verb == "end") {
      RunReport r;
      if (!parse_report(m, r))
        fail("malformed end report from the peer: '" + line.substr(0, 120) + "'");
      peer_end = r;
    } else if (m.verb == "verified") {
      auto v = m.get_u64("mismatches", 0, ~0ull);
      if (!v) fail("malformed verification report from the peer");
      verified = *v;
    } else if (peer_end && (m.verb == "start" || m.verb == "bye")) {
      held_line_ = std::move(line);
    } else {
      fail("unexpected message from the peer during the run: '" + line.substr(0, 80) + "'");
    }
  }
  if (!error.empty()) fail("out-of-band channel: " + error);
  return got;
}

void Session::run_bw(size_t size_index, uint64_t size) {
  // At most kMaxInFlightBytes per QP (and -t WRs): enough to fill the pipe, and a -D run
  // ends soon after its deadline instead of draining a gigabyte of 8 MiB messages.
  const uint32_t by_bytes =
      static_cast<uint32_t>(std::clamp<uint64_t>(kMaxInFlightBytes / size, 1, kMaxDepth));
  const uint32_t cq_limit_tx =
      std::min(by_bytes, p_.check ? std::min<uint32_t>(p_.tx_depth, p_.test == TestKind::kReadBw
                                                                        ? layout_.rx_slots
                                                                        : layout_.tx_slots)
                                  : p_.tx_depth);
  const uint32_t cq_mod = std::min(p_.cq_mod, cq_limit_tx);
  uint64_t per_qp = p_.iterations;  // 0 in -D mode until the deadline
  const uint64_t start_ns = now_ns();
  const uint64_t deadline_ns = start_ns + uint64_t{p_.duration_s} * 1'000'000'000ull;
  PeakMeter meter;
  meter.start(start_ns);
  uint64_t end_ns = 0;
  bool end_sent = false;
  std::optional<RunReport> peer_end;
  std::optional<uint64_t> verified;
  uint64_t mismatches = 0;
  uint64_t received = 0;
  uint32_t loops = 0;
  std::vector<conduit_wc> wc(64);
  progress();
  std::string error;

  auto sender_done = [&] {
    if (!roles_.sends) return true;
    if (per_qp == 0) return false;
    for (const QpSide& q : ep_.qps()) {
      if (q.completed < per_qp) return false;
    }
    return true;
  };

  for (;;) {
    bool work = false;
    if (roles_.sends && per_qp == 0 && now_ns() >= deadline_ns) {
      // -D: every QP sends as many as the busiest one, ending on a signaled message.
      uint64_t most = 1;
      for (const QpSide& q : ep_.qps()) most = std::max(most, q.posted);
      per_qp = (most + cq_mod - 1) / cq_mod * cq_mod;
    }
    if (roles_.sends) {
      for (uint32_t qi = 0; qi < p_.qps; ++qi) {
        QpSide& q = ep_.qps()[qi];
        while ((per_qp == 0 || q.posted < per_qp) && q.posted - q.completed < cq_limit_tx) {
          const uint64_t seq = q.posted;
          const bool signaled = (seq + 1) % cq_mod == 0 || seq + 1 == per_qp;
          if (!post_one(qi, seq, size, size_index, signaled)) break;
          ++q.posted;
          work = true;
        }
      }
      for (conduit_cq* cq : ep_.send_cqs()) {
        const int n = conduit_poll_cq(cq, static_cast<int>(wc.size()), wc.data());
        check_rc(n, "conduit_poll_cq (send)");
        const uint64_t t = n > 0 ? now_ns() : 0;
        for (int i = 0; i < n; ++i) {
          const conduit_wc& c = wc[static_cast<size_t>(i)];
          const uint32_t qi = static_cast<uint32_t>(c.wr_id >> 40);
          const uint64_t seq = c.wr_id & ((1ull << 40) - 1);
          if (c.status != CONDUIT_WC_SUCCESS) {
            char qpn[16];
            std::snprintf(qpn, sizeof(qpn), "0x%06x", c.qp_num);
            fail(std::string("work request on QP ") + qpn +
                 " failed: " + conduit_wc_status_str(c.status) + " (vendor_err " +
                 std::to_string(c.vendor_err) + ")");
          }
          if (qi >= p_.qps) fail("completion with an unknown wr_id");
          QpSide& q = ep_.qps()[qi];
          if (p_.test == TestKind::kReadBw && p_.check) {
            if (c.byte_len != size) ++mismatches;
            uint8_t* dst =
                ep_.buffer(qi) + layout_.rx_offset(static_cast<uint32_t>(seq % layout_.rx_slots));
            const uint32_t src_slot = static_cast<uint32_t>(seq % layout_.tx_slots);
            if (!check_pattern(dst, size, read_source_seed(qi, size_index, src_slot))) ++mismatches;
            std::memset(dst, 0, size);
          }
          meter.add(t, (seq + 1 - q.completed) * size);
          q.completed = seq + 1;
          work = true;
        }
      }
      if (!end_ns && sender_done()) end_ns = now_ns();
    }
    if (roles_.receives) {
      for (conduit_cq* cq : ep_.recv_cqs()) {
        const int n = conduit_poll_cq(cq, static_cast<int>(wc.size()), wc.data());
        check_rc(n, "conduit_poll_cq (recv)");
        for (int i = 0; i < n; ++i) {
          const conduit_wc& c = wc[static_cast<size_t>(i)];
          if (c.status != CONDUIT_WC_SUCCESS) {
            fail(std::string("receive failed: ") + conduit_wc_status_str(c.status) +
                 " (vendor_err " + std::to_string(c.vendor_err) + ")");
          }
          const uint32_t qi = static_cast<uint32_t>(c.wr_id >> 40);
          if (qi >= p_.qps) fail("receive completion with an unknown wr_id");
          QpSide& q = ep_.qps()[qi];
          if (p_.check) {
            const uint32_t slot = static_cast<uint32_t>(c.wr_id & 0xFFFFFFFFu);
            if (c.byte_len != size || !check_pattern(ep_.buffer(qi) + layout_.rx_offset(slot), size,
                                                     message_seed(qi, size_index, q.rx_in_size))) {
              ++mismatches;
            }
          }
          ++q.rx_done_total;
          ++q.rx_in_size;
          ++received;
          post_receives(qi);
          work = true;
        }
      }
    }
    if (!end_sent && sender_done()) {
      RunReport r;
      r.size_bytes = size;
      r.messages = roles_.sends ? per_qp * p_.qps : 0;
      r.elapsed_ns = roles_.sends ? end_ns - start_ns : 0;
      r.peak_bps = roles_.sends ? meter.peak_bps(end_ns) : 0;
      if (!ch_.send_line(format_message(report_message(r)), error)) fail(error);
      end_sent = true;
      // Keep r for the printout below.
      mine_report_ = r;
    }
    if (work) {
      progress();
      spins_ = 0;
    }
    if (++loops % kLoopsPerChannelPoll == 0 || !work || end_sent) {
      if (poll_channel(peer_end, verified)) progress();
    }
    const bool receive_done = !roles_.receives || (peer_end && received >= peer_end->messages);
    if (end_sent && peer_end && receive_done) break;
    if (!work) {
      // A side that neither sends nor receives sees no progress while the peer WRITEs or
      // READs; the peer watches its own QPs and reports a failure over the channel.
      if (roles_.sends || roles_.receives) {
        check_stalled(roles_.sends && !end_sent ? "sending" : "waiting for the peer");
      }
      idle();
    }
  }
  if (roles_.receives && received != peer_end->messages) {
    fail("received " + std::to_string(received) + " messages, the peer sent " +
         std::to_string(peer_end->messages));
  }
  // WRITE targets are checked once all writes completed (the writer's end report says so).
  if (p_.check && roles_.peer_writes) {
    uint64_t written_mismatches = 0;
    verify_written(size_index, size, peer_end->messages / p_.qps, written_mismatches);
    if (!ch_.send_line("verified size=" + std::to_string(size) +
                           " mismatches=" + std::to_string(written_mismatches),
                       error)) {
      fail(error);
    }
    mismatches += written_mismatches;
  }
  if (p_.check && roles_.sends && p_.test == TestKind::kWriteBw) {
    while (!verified) {
      std::string line = expect_line("the peer's verification");
      Message m;
      if (!parse_message(line, m) || m.verb != "verified" || !m.get_u64("mismatches", 0, ~0ull)) {
        fail("expected the peer's verification, got '" + line.substr(0, 80) + "'");
      }
      verified = *m.get_u64("mismatches", 0, ~0ull);
    }
    mismatches += *verified;
  }
  mismatches += peer_end->mismatches;
  mismatches_total_ += mismatches;

  // Print: this side's sending, the peer's, or both added (-b).
  std::optional<BwResult> result;
  if (roles_.sends) {
    result =
        make_bw_result(size, mine_report_.messages, mine_report_.elapsed_ns, mine_report_.peak_bps);
  }
  if (roles_.peer_sends) {
    BwResult theirs =
        make_bw_result(size, peer_end->messages, peer_end->elapsed_ns, peer_end->peak_bps);
    result = result ? combine_bidirectional(*result, theirs) : theirs;
  }
  if (o_.json) {
    std::string j = bw_json(*result, p_.test, p_.qps, p_.bidirectional);
    if (p_.check) {
      j.pop_back();
      j += ",\"check_mismatches\":" + std::to_string(mismatches) + "}";
    }
    std::printf("%s\n", j.c_str());
  } else {
    if (!header_printed_) {
      std::printf("%s\n", bw_header().c_str());
      header_printed_ = true;
    }
    std::printf("%s%s\n", bw_line(*result).c_str(),
                p_.check
                    ? (mismatches == 0
                           ? "   check: OK"
                           : ("   check: " + std::to_string(mismatches) + " MISMATCHED").c_str())
                    : "");
  }
  std::fflush(stdout);
}

void Session::run_lat(size_t size_index, uint64_t size) {
  const bool pinger = client_;
  QpSide& q = ep_.qps()[0];
  uint8_t* base = ep_.buffer(0);
  volatile uint8_t* const marker = base + layout_.rx_offset(0) + size - 1;
  const bool write = p_.test == TestKind::kWriteLat;
  const bool read = p_.test == TestKind::kReadLat;
  std::vector<uint64_t> rtt_ns;
  if (pinger && p_.iterations != 0) rtt_ns.reserve(p_.iterations);
  const uint64_t deadline_ns = now_ns() + uint64_t{p_.duration_s} * 1'000'000'000ull;
  std::vector<conduit_wc> wc(16);
  std::optional<RunReport> peer_end;
  std::optional<uint64_t> verified;
  uint64_t mismatches = 0;
  std::string error;
  uint64_t seq = 0;  // round trips done
  uint64_t outstanding = 0;
  // Without --check the payload does not matter: sends need not wait for older ACKs.
  const uint32_t tx_limit =
      p_.check ? std::min<uint32_t>(p_.tx_depth, layout_.tx_slots) : p_.tx_depth;
  progress();

  auto reap_sends = [&](bool block) {
    for (;;) {
      const int n = conduit_poll_cq(ep_.send_cqs()[0], static_cast<int>(wc.size()), wc.data());
      check_rc(n, "conduit_poll_cq (send)");
      for (int i = 0; i < n; ++i) {
        if (wc[static_cast<size_t>(i)].status != CONDUIT_WC_SUCCESS) {
          fail(std::string("send failed: ") +
               conduit_wc_status_str(wc[static_cast<size_t>(i)].status) + " (vendor_err " +
               std::to_string(wc[static_cast<size_t>(i)].vendor_err) + ")");
        }
        --outstanding;
      }
      if (n > 0) progress();
      if (!block || outstanding < tx_limit) return;
      check_stalled("waiting for a send completion");
      idle();
    }
  };
  // Waits for the peer's message number `seq`; false when the peer ended first.
  auto await_message = [&](uint64_t expected) -> bool {
    uint32_t loops = 0;
    for (;;) {
      if (write) {
        if (*marker == round_marker(expected)) {
          if (p_.check) {
            // The marker byte can become visible before the bytes before it: give them 1 ms.
            const uint64_t t0 = now_ns();
            while (!check_pattern(base + layout_.rx_offset(0), size - 1,
                                  message_seed(0, size_index, expected))) {
              if (now_ns() - t0 > 1'000'000) {
                ++mismatches;
                break;
              }
            }
          }
          progress();
          return true;
        }
      } else {
        const int n = conduit_poll_cq(ep_.recv_cqs()[0], 1, wc.data());
        check_rc(n, "conduit_poll_cq (recv)");
        if (n == 1) {
          if (wc[0].status != CONDUIT_WC_SUCCESS) {
            fail(std::string("receive failed: ") + conduit_wc_status_str(wc[0].status) +
                 " (vendor_err " + std::to_string(wc[0].vendor_err) + ")");
          }
          const uint32_t slot = static_cast<uint32_t>(wc[0].wr_id & 0xFFFFFFFFu);
          if (p_.check &&
              (wc[0].byte_len != size || !check_pattern(base + layout_.rx_offset(slot), size,
                                                        message_seed(0, size_index, expected)))) {
            ++mismatches;
          }
          ++q.rx_done_total;
          post_receives(0);
          progress();
          return true;
        }
      }
      if (++loops % kLoopsPerChannelPoll == 0) {
        poll_channel(peer_end, verified);
        if (peer_end && expected >= peer_end->messages) return false;
        check_stalled("waiting for the peer's message");
        reap_sends(false);
      }
      if (!write) {
        idle();
      } else if (o_.yield) {
        sched_yield();  // the engine yields back once a WRITE's last packet has landed
      } else if (++spins_ > kSpinsBeforeSleep) {
        // WRITEs land in memory without a completion to sleep on: nap. Measured here with
        // two adaptive daemons on two cores (write_lat p50): sched_yield 4 ms, 1 us naps 8 ms,
        // 10 us 4 ms, 25 us 0.18 ms, 50 us 0.12 ms: shorter naps starve the daemons.
        const timespec ts{0, kWriteLatNapNs};
        nanosleep(&ts, nullptr);
      }
    }
  };

  for (;;) {
    if (read) {
      // read_lat: one READ at a time from the server's memory, which needs nothing of the
      // server's process; a sample is the READ's post to its completion.
      if (!pinger) break;
      if (p_.iterations != 0 ? seq >= p_.iterations : now_ns() >= deadline_ns) break;
      const uint64_t t0 = now_ns();
      if (!post_one(0, seq, size, size_index, true)) fail("send queue full in a ping-pong");
      ++outstanding;
      while (outstanding > 0) {
        reap_sends(false);
        if (outstanding > 0) {
          check_stalled("waiting for a READ's completion");
          idle();
        }
      }
      rtt_ns.push_back(now_ns() - t0);
      const uint32_t rx_slot = static_cast<uint32_t>(seq % layout_.rx_slots);
      const uint32_t tx_slot = static_cast<uint32_t>(seq % layout_.tx_slots);
      if (p_.check && !check_pattern(base + layout_.rx_offset(rx_slot), size,
                                     read_source_seed(0, size_index, tx_slot))) {
        ++mismatches;
      }
      ++seq;
      continue;
    }
    if (pinger) {
      if (p_.iterations != 0 ? seq >= p_.iterations : now_ns() >= deadline_ns) break;
      reap_sends(outstanding >= tx_limit);
      const uint64_t t0 = now_ns();
      if (!post_one(0, seq, size, size_index, true)) fail("send queue full in a ping-pong");
      ++outstanding;
      if (!await_message(seq)) fail("the peer stopped answering");
      rtt_ns.push_back(now_ns() - t0);
      ++seq;
    } else {
      if (!await_message(seq)) break;
      reap_sends(outstanding >= tx_limit);
      if (!post_one(0, seq, size, size_index, true)) fail("send queue full in a ping-pong");
      ++outstanding;
      ++seq;
    }
  }
  while (outstanding > 0) reap_sends(true);
  if (read && !pinger) {
    // Nothing runs here while the client READs our memory, however long its -n takes (-W
    // cannot apply): its end report (its count is the run's) comes when it is done, its error
    // line when it fails, and a client that exits closes the channel.
    const int limit_ms = await_peer_ms(p_.duration_s, p_.timeout_s);
    const uint64_t since_ns = now_ns();
    while (!peer_end) {
      poll_channel(peer_end, verified);
      if (!peer_end) {
        if (limit_ms >= 0 && now_ns() - since_ns > uint64_t(limit_ms) * 1'000'000ull) {
          fail("no end report from the client " + std::to_string(limit_ms / 1000) +
               " s after its READs began (-D + -W)");
        }
        ch_.wait_readable(50);
      }
    }
    seq = peer_end->messages;
  }
  RunReport mine;
  mine.size_bytes = size;
  mine.messages = seq;
  mine.mismatches = mismatches;
  if (!ch_.send_line(format_message(report_message(mine)), error)) fail(error);
  while (!peer_end) {
    poll_channel(peer_end, verified);
    if (!peer_end) {
      check_stalled("waiting for the peer's end of the ping-pong");
      usleep(100);
    }
  }
  if (peer_end->messages != seq) {
    fail("ping-pong out of step: " + std::to_string(seq) + " here, " +
         std::to_string(peer_end->messages) + " at the peer");
  }
  mismatches += peer_end->mismatches;
  mismatches_total_ += mismatches;
  if (!pinger) {
    if (!o_.json && !header_printed_) {
      std::printf(" %llu-byte ping-pong: %llu round trips (results are printed by the client)\n",
                  static_cast<unsigned long long>(size), static_cast<unsigned long long>(seq));
    }
    return;
  }
  const LatResult r = make_lat_result(size, std::move(rtt_ns), read);
  if (o_.json) {
    std::string j = lat_json(r, p_.test);
    if (p_.check) {
      j.pop_back();
      j += ",\"check_mismatches\":" + std::to_string(mismatches) + "}";
    }
    std::printf("%s\n", j.c_str());
  } else {
    if (!header_printed_) {
      std::printf("%s\n", lat_header().c_str());
      header_printed_ = true;
    }
    std::printf("%s%s\n", lat_line(r).c_str(),
                p_.check ? (mismatches == 0 ? "   check: OK" : "   check: MISMATCHED") : "");
  }
  std::fflush(stdout);
}

void Session::run_size(size_t size_index) {
  const uint64_t size = p_.sizes[size_index];
  std::string error;
  if (client_) {
    if (!ch_.send_line("start size=" + std::to_string(size), error)) fail(error);
    prepare_size(size_index, size);
    const std::string line = expect_line("the server to get ready");
    if (line != "ready size=" + std::to_string(size)) {
      fail("expected 'ready size=" + std::to_string(size) + "', got '" + line.substr(0, 80) + "'");
    }
  } else {
    const std::string line = expect_line("the client's next size");
    if (line != "start size=" + std::to_string(size)) {
      fail("expected 'start size=" + std::to_string(size) + "', got '" + line.substr(0, 80) + "'");
    }
    prepare_size(size_index, size);
    if (!ch_.send_line("ready size=" + std::to_string(size), error)) fail(error);
  }
  if (is_latency(p_.test)) {
    run_lat(size_index, size);
  } else {
    run_bw(size_index, size);
  }
}

int Session::run() {
  client_ = !o_.is_server();
  prctl(PR_SET_TIMERSLACK, 1UL);  // 1 ns: short naps stay short
  negotiate();
  for (size_t i = 0; i < p_.sizes.size(); ++i) run_size(i);
  std::string error;
  if (client_) {
    ch_.send_line("bye", error);
  } else {
    std::string line;
    if (!held_line_) ch_.recv_line(line, 5000, error);  // "bye"; a missing one changes nothing
  }
  if (mismatches_total_ != 0) {
    std::fprintf(stderr, "conduit-perf: --check found %llu messages with wrong bytes\n",
                 static_cast<unsigned long long>(mismatches_total_));
    return 1;
  }
  return 0;
}

}  // namespace

bool open_exchange_channel(const PerfOptions& options, TcpLineChannel& ch) {
  // Starting the two sides takes a person a while: they get four -W to meet.
  const int wait_ms = static_cast<int>(options.timeout_s) * 4000;
  std::string error;
  bool ok = false;
  if (options.is_server()) {
    std::fprintf(stderr, "conduit-perf: waiting up to %d s for a client on TCP port %u\n",
                 wait_ms / 1000, static_cast<unsigned>(options.port));
    ok = TcpLineChannel::accept_one(options.port, wait_ms, ch, error);
  } else {
    ok = TcpLineChannel::connect_to(options.server, options.port, wait_ms, ch, error);
  }
  if (!ok) std::fprintf(stderr, "conduit-perf: %s\n", error.c_str());
  return ok;
}

namespace {

// Whether our conduitd's control socket takes a connection (the reason on stderr if not). A
// side whose daemon is not running says so at once, as perftest does of a missing device,
// not after its peer has come (a server waits 4 x -W for it).
bool daemon_reachable(const PerfOptions& options) {
  const char* env = std::getenv("CONDUIT_SOCKET");
  const std::string path = !options.socket_path.empty()     ? options.socket_path
                           : env != nullptr && *env != '\0' ? env
                                                            : CONDUIT_DEFAULT_SOCKET;
  proto::UniqueFd sock;
  const int rc = proto::connect_seqpacket(path, sock);
  if (rc < 0) {
    std::fprintf(stderr, "conduit-perf: %s\n", proto::connect_error_message(rc, path).c_str());
  }
  return rc >= 0;  // the descriptor on success
}

}  // namespace

int run_session(const PerfOptions& options) {
  if (!daemon_reachable(options)) return 1;
  if (options.perftest) return run_perftest_session(options);
  TcpLineChannel ch;
  if (!open_exchange_channel(options, ch)) return 1;
  try {
    Session s(options, ch);
    return s.run();
  } catch (const Failure& f) {
    std::fflush(stdout);
    std::fprintf(stderr, "conduit-perf: %s\n", f.message.c_str());
    // Tell the peer, so it stops at once instead of timing out.
    std::string ignored;
    ch.send_line("error reason=" + encode_text(f.message), ignored);
    return 1;
  }
}

}  // namespace conduit::perf
