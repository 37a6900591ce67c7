#include "perftest_session.h"

#include <conduit/conduit.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "perftest_wire.h"
#include "tcp_line_channel.h"

namespace conduit::perf {

namespace {

struct Failure {
  std::string message;
};

[[noreturn]] void fail(std::string message) { throw Failure{std::move(message)}; }

// Byte-exact I/O on the exchange socket, every wait bounded.
class Wire {
 public:
  Wire(int fd, int timeout_ms) : fd_(fd), timeout_ms_(timeout_ms) {}

  void write_all(const uint8_t* p, size_t n, const char* what) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail(std::string("writing ") + what + ": " + std::strerror(errno));
      p += w;
      n -= static_cast<size_t>(w);
    }
  }

  void read_all(uint8_t* p, size_t n, const char* what) {
    while (n > 0) {
      pollfd pfd{fd_, POLLIN, 0};
      const int pr = ::poll(&pfd, 1, timeout_ms_);
      if (pr < 0 && errno == EINTR) continue;
      if (pr == 0) fail(std::string("the peer sent no ") + what + " in time");
      const ssize_t r = ::read(fd_, p, n);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) fail(std::string("the peer closed the connection before its ") + what);
      if (r < 0) fail(std::string("reading ") + what + ": " + std::strerror(errno));
      p += r;
      n -= static_cast<size_t>(r);
    }
  }

  // One step of the exchange: ours out, theirs in (the same size). Writing first is safe
  // for either role: the messages are far smaller than the socket buffers.
  template <size_t N>
  std::array<uint8_t, N> exchange(const std::array<uint8_t, N>& mine, const char* what) {
    write_all(mine.data(), N, what);
    std::array<uint8_t, N> theirs{};
    read_all(theirs.data(), N, what);
    return theirs;
  }

 private:
  int fd_;
  int timeout_ms_;
};

const char* verb_name(TestKind t) {
  switch (t) {
    case TestKind::kSendBw:
      return "Send";
    case TestKind::kWriteBw:
      return "RDMA_Write";
    case TestKind::kReadBw:
      return "RDMA_Read";
    default:
      return "?";
  }
}

void print_record(const char* side, const QpRecord& r) {
  std::printf(" %s address: LID %#06x QPN %#08x PSN %#08x RKey %#08x VAddr %#016llx\n", side, r.lid,
              r.qpn, r.psn, r.rkey, static_cast<unsigned long long>(r.vaddr));
  std::printf(" GID: %s\n", format_gid(r.gid).c_str());
}

void print_result(const PerftestReport& r) {
  std::printf(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n");
  std::printf(" %-10llu %-10llu     %-7.2f            %-7.2f              %-7.6f\n",
              static_cast<unsigned long long>(r.size_bytes),
              static_cast<unsigned long long>(r.iterations), r.bw_peak_mib_s, r.bw_avg_mib_s,
              r.msg_rate_mpps);
}

class Session {
 public:
  Session(const PerfOptions& o, int fd) : o_(o), wire_(fd, static_cast<int>(o.timeout_s) * 1000) {}
  ~Session() {
    if (qp_ != nullptr) conduit_destroy_qp(qp_);
    if (cq_ != nullptr) conduit_destroy_cq(cq_);
    if (mr_ != nullptr) conduit_free_mr(mr_);
    if (ctx_ != nullptr) conduit_close(ctx_);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int run();

 private:
  QpRecord handshake(const char* what) {
    QpRecord peer;
    if (!parse_perftest_record(wire_.exchange(perftest_record(mine_), what), peer)) {
      fail(std::string("the peer's ") + what + " is not a perftest connection record");
    }
    return peer;
  }
  void open_resources();
  void connect(const QpRecord& peer, uint32_t mtu_bytes);
  PerftestReport drive_traffic();  // client
  uint64_t receive_sends();        // send_bw server
  int poll_one(conduit_wc& wc);    // waits up to the timeout; fails on an error completion

  const PerfOptions& o_;
  Wire wire_;
  PerftestPlan plan_{};
  uint64_t size_ = 0;
  uint64_t iters_ = 0;
  conduit_context* ctx_ = nullptr;
  conduit_mr* mr_ = nullptr;
  conduit_cq* cq_ = nullptr;
  conduit_qp* qp_ = nullptr;
  QpRecord mine_{};
  QpRecord peer_{};
  uint32_t recv_depth_ = 0;
};

void Session::open_resources() {
  conduit_context_attr attr{};
  attr.socket_path = o_.socket_path.empty() ? nullptr : o_.socket_path.c_str();
  attr.client_name = "conduit-perf-perftest";
  // The buffer: at least perftest's cycle buffer (the peer's WRITE/READ addresses wrap within
  // it) and one message, twice (perftest's layout), rounded to pages.
  const uint64_t one = std::max<uint64_t>(size_, kPerftestCycleBufferBytes);
  const uint64_t bytes = (2 * one + 4095) / 4096 * 4096;
  attr.region_bytes = bytes + (1u << 20);
  int rc = conduit_open(&attr, &ctx_);
  if (rc < 0) fail(std::string("conduit_open: ") + conduit_strerror(rc));
  rc = conduit_alloc_mr(
      ctx_, bytes,
      CONDUIT_ACCESS_LOCAL_WRITE | CONDUIT_ACCESS_REMOTE_WRITE | CONDUIT_ACCESS_REMOTE_READ, &mr_);
  if (rc < 0) fail(std::string("conduit_alloc_mr: ") + conduit_strerror(rc));
  std::memset(mr_->addr, 0x5a, bytes);
  rc = conduit_create_cq(ctx_, 512, &cq_);
  if (rc < 0) fail(std::string("conduit_create_cq: ") + conduit_strerror(rc));
  conduit_qp_init_attr qa{};
  qa.send_cq = cq_;
  qa.recv_cq = cq_;
  qa.traffic_class = o_.traffic_class.empty() ? nullptr : o_.traffic_class.c_str();
  rc = conduit_create_qp(ctx_, &qa, &qp_);
  if (rc < 0) fail(std::string("conduit_create_qp: ") + conduit_strerror(rc));

  Gid gid{};
  if (o_.gid.empty() || !parse_gid(o_.gid, gid)) {
    fail("--perftest needs -x ADDR: the address of conduitd's port (our GID)");
  }
  std::random_device rd;
  mine_.lid = 0;
  // perftest makes the peer's max_rd_atomic our out_reads (perftest_wire.h).
  mine_.out_reads = kConduitReadResponderDepth;
  mine_.qpn = conduit_qp_num(qp_);
  mine_.psn = rd() & 0xFFFFFFu;
  mine_.rkey = mr_->rkey;
  mine_.vaddr = mr_->iova;
  mine_.gid = gid;
  mine_.srqn = 0;
}

void Session::connect(const QpRecord& peer, uint32_t mtu_bytes) {
  conduit_qp_connect_attr ca{};
  ca.remote_qpn = peer.qpn;
  ca.remote_psn = peer.psn;
  ca.local_psn = mine_.psn;
  std::memcpy(ca.remote_gid, peer.gid.data(), 16);
  ca.mtu = CONDUIT_MTU_1024;
  for (uint32_t e = 1; e <= 5; ++e) {
    if ((128u << e) == mtu_bytes) ca.mtu = e;
  }
  ca.access = CONDUIT_ACCESS_REMOTE_WRITE | CONDUIT_ACCESS_REMOTE_READ;
  ca.timeout = o_.qp_timeout;
  ca.retry_cnt = 7;
  ca.rnr_retry = 7;
  ca.min_rnr_timer = 12;
  const int rc = conduit_connect_qp(qp_, &ca);
  if (rc < 0) fail(std::string("conduit_connect_qp: ") + conduit_strerror(rc));
}

int Session::poll_one(conduit_wc& wc) {
  for (;;) {
    const int n = conduit_poll_cq(cq_, 1, &wc);
    if (n < 0) fail(std::string("conduit_poll_cq: ") + conduit_strerror(n));
    if (n == 1) break;
    const int w = conduit_wait_cq(cq_, static_cast<int>(o_.timeout_s) * 1000);
    if (w < 0) fail(std::string("conduit_wait_cq: ") + conduit_strerror(w));
    if (w == 0) fail("no completion for " + std::to_string(o_.timeout_s) + " s");
  }
  if (wc.status != CONDUIT_WC_SUCCESS) {
    fail(std::string("work request failed: ") + conduit_wc_status_str(wc.status) + " (vendor_err " +
         std::to_string(wc.vendor_err) + ")");
  }
  return 1;
}

PerftestReport Session::drive_traffic() {
  const uint32_t window = std::max<uint32_t>(
      1, std::min<uint32_t>(
             {o_.effective_tx_depth(), 128,
              o_.test == TestKind::kReadBw ? std::max<uint32_t>(1, peer_.out_reads) : 128u}));
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t posted = 0, completed = 0;
  char* buf = static_cast<char*>(mr_->addr);
  while (completed < iters_) {
    while (posted < iters_ && posted - completed < window) {
      conduit_sge sge{reinterpret_cast<uint64_t>(buf), static_cast<uint32_t>(size_), mr_->lkey};
      conduit_send_wr wr{};
      wr.wr_id = posted;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.send_flags = CONDUIT_SEND_SIGNALED;
      switch (o_.test) {
        case TestKind::kSendBw:
          wr.opcode = CONDUIT_WR_SEND;
          break;
        case TestKind::kWriteBw:
          wr.opcode = CONDUIT_WR_RDMA_WRITE;
          break;
        default:
          wr.opcode = CONDUIT_WR_RDMA_READ;
          break;
      }
      wr.remote_addr = peer_.vaddr;
      wr.rkey = peer_.rkey;
      const int rc = conduit_post_send(qp_, &wr, nullptr);
      if (rc == -ENOMEM) break;  // the send queue is full: reap first
      if (rc < 0) fail(std::string("conduit_post_send: ") + conduit_strerror(rc));
      ++posted;
    }
    conduit_wc wc;
    poll_one(wc);
    ++completed;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  PerftestReport r;
  r.size_bytes = size_;
  r.iterations = iters_;
  r.bw_avg_mib_s = static_cast<double>(size_ * iters_) / secs / (1 << 20);
  r.bw_peak_mib_s = r.bw_avg_mib_s;  // no per-message timestamps: the average
  r.msg_rate_mpps = static_cast<double>(iters_) / secs / 1e6;
  return r;
}

uint64_t Session::receive_sends() {
  char* buf = static_cast<char*>(mr_->addr);
  uint64_t received = 0, posted = recv_depth_;
  while (received < iters_) {
    conduit_wc wc;
    poll_one(wc);
    if (wc.opcode != CONDUIT_WC_RECV) continue;
    if (wc.byte_len != size_) {
      fail("message " + std::to_string(received) + " has " + std::to_string(wc.byte_len) +
           " bytes, expected " + std::to_string(size_));
    }
    ++received;
    if (posted < iters_) {
      conduit_sge sge{reinterpret_cast<uint64_t>(buf), static_cast<uint32_t>(size_), mr_->lkey};
      conduit_recv_wr wr{};
      wr.wr_id = posted;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      const int rc = conduit_post_recv(qp_, &wr, nullptr);
      if (rc < 0) fail(std::string("conduit_post_recv: ") + conduit_strerror(rc));
      ++posted;
    }
  }
  return received;
}

int Session::run() {
  if (!perftest_plan(o_.test, plan_)) fail("--perftest speaks to the bandwidth tests only");
  size_ = o_.sizes.front();
  iters_ = o_.effective_iterations();
  const bool client = !o_.is_server();

  // 1-4: version, system data, MTU.
  std::string peer_version;
  if (!parse_perftest_version(wire_.exchange(perftest_version_message(), "version"),
                              peer_version)) {
    fail("the peer's version message is not perftest's");
  }
  const uint32_t cycle =
      perftest_u32_value(wire_.exchange(perftest_u32(kPerftestCycleBufferBytes), "cycle buffer"));
  wire_.exchange(perftest_u32(kPerftestCacheLineBytes), "cache line size");
  uint32_t peer_mtu = 0;
  if (!parse_perftest_mtu(wire_.exchange(perftest_mtu_message(o_.effective_mtu()), "MTU"),
                          peer_mtu)) {
    fail("the peer's MTU message is not a verbs MTU");
  }
  const uint32_t mtu = std::min(peer_mtu, o_.effective_mtu());
  (void)cycle;

  open_resources();
  std::printf("---------------------------------------------------------------------------\n");
  std::printf("                    %s BW Test (conduit-perf --perftest, peer perftest %s)\n",
              verb_name(o_.test), peer_version.c_str());
  std::printf(" Connection type : RC   Mtu : %u[B]   Number of qps : 1\n", mtu);
  std::printf("---------------------------------------------------------------------------\n");

  // 5: the first handshake carries the QP; then the barriers.
  peer_ = handshake("connection record");
  connect(peer_, mtu);
  print_record("local", mine_);
  print_record("remote", peer_);
  for (uint32_t i = 1; i < plan_.handshakes_before_traffic; ++i) {
    if (i + 1 == plan_.handshakes_before_traffic && plan_.receiver_posts_before_last && !client) {
      // send_bw's server posts its receives before the last barrier: the client sends after it.
      char* buf = static_cast<char*>(mr_->addr);
      recv_depth_ = static_cast<uint32_t>(std::min<uint64_t>(iters_, o_.effective_rx_depth()));
      for (uint32_t k = 0; k < recv_depth_; ++k) {
        conduit_sge sge{reinterpret_cast<uint64_t>(buf), static_cast<uint32_t>(size_), mr_->lkey};
        conduit_recv_wr wr{};
        wr.wr_id = k;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        const int rc = conduit_post_recv(qp_, &wr, nullptr);
        if (rc < 0) fail(std::string("conduit_post_recv: ") + conduit_strerror(rc));
      }
    }
    handshake("barrier record");
  }

  PerftestReport result;
  if (client) {
    result = drive_traffic();
  } else if (o_.test == TestKind::kSendBw) {
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t got = receive_sends();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    result.size_bytes = size_;
    result.iterations = got;
    result.bw_avg_mib_s = static_cast<double>(size_ * got) / secs / (1 << 20);
    result.bw_peak_mib_s = result.bw_avg_mib_s;
    result.msg_rate_mpps = static_cast<double>(got) / secs / 1e6;
  }

  // 6: write_bw/read_bw: a barrier, then the client's report (the server's is not used).
  if (plan_.report_exchange) {
    handshake("post-traffic record");
    PerftestReport mine = result;
    if (!client) {
      mine.size_bytes = size_;
      mine.iterations = iters_;
    }
    const auto out = perftest_report_messages(mine);
    std::array<PerftestU64, kPerftestReportFields> in{};
    for (size_t i = 0; i < kPerftestReportFields; ++i) in[i] = wire_.exchange(out[i], "report");
    if (!client) {
      if (!parse_perftest_report(in, result)) fail("the client's report is malformed");
    }
  }

  // 7: close: a handshake and "done".
  handshake("closing record");
  const std::array<uint8_t, kPerftestDoneBytes> done{'d', 'o', 'n', 'e', 0};
  wire_.write_all(done.data(), done.size(), "done");

  print_result(result);
  std::printf("---------------------------------------------------------------------------\n");
  if (result.iterations != iters_ || result.size_bytes != size_) {
    fail("the peer's run (" + std::to_string(result.iterations) + " x " +
         std::to_string(result.size_bytes) + " B) is not ours (" + std::to_string(iters_) + " x " +
         std::to_string(size_) + " B)");
  }
  return 0;
}

}  // namespace

int run_perftest_session(const PerfOptions& options) {
  TcpLineChannel ch;
  std::string error;
  const int wait_ms = static_cast<int>(options.timeout_s) * 4000;
  if (options.is_server()) {
    if (!TcpLineChannel::accept_one(options.port, wait_ms, ch, error)) {
      std::fprintf(stderr, "conduit-perf: %s\n", error.c_str());
      return 1;
    }
  } else if (!TcpLineChannel::connect_to(options.server, options.port, wait_ms, ch, error)) {
    std::fprintf(stderr, "conduit-perf: %s\n", error.c_str());
    return 1;
  }
  try {
    Session s(options, ch.native_handle());
    return s.run();
  } catch (const Failure& f) {
    std::fflush(stdout);
    std::fprintf(stderr, "conduit-perf: %s\n", f.message.c_str());
    return 1;
  }
}

}  // namespace conduit::perf
