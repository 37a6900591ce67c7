#include "perftest_session.h"

#include <conduit/conduit.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "perf_report.h"
#include "perf_runner.h"
#include "perftest_wire.h"
#include "tcp_line_channel.h"

namespace conduit::perf {

namespace {

// write_lat polls a byte in memory: spin this often, then nap between looks (a spinning
// process starves the daemons on a small machine; perf_runner.cc has the measurements).
// With -Y it yields between looks instead, and polls the CQ where it would sleep on it.
constexpr uint32_t kSpinsBeforeNap = 2000;
constexpr long kNapNs = 50'000;
// Latency: our messages whose completion has not come yet, at most.
constexpr uint64_t kLatSendWindow = 8;
// One CQ serves every QP: each gets an equal share of it for its sends in flight and its
// posted receives (conduitd's CQ rings hold 1024 entries).
constexpr uint32_t kCqEntries = 1024;
// A work request's id: the QP's index in the top 16 bits, a sequence number below.
constexpr unsigned kWrIdQpShift = 48;

struct Failure {
  std::string message;
};

[[noreturn]] void fail(std::string message) { throw Failure{std::move(message)}; }

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// The exchange's transport. One step: our n bytes out, the peer's n bytes in (perftest's
// client sends first, its server answers). False when the peer has gone first and
// `tolerate_gone`; fails otherwise. Every wait is bounded by the timeout, except where it is
// -1: then only by the peer's going (await_peer_ms()).
class Channel {
 public:
  explicit Channel(int timeout_ms) : timeout_ms_(timeout_ms) {}
  virtual ~Channel() = default;
  virtual bool exchange_bytes(const uint8_t* mine, uint8_t* theirs, size_t n, const char* what,
                              bool tolerate_gone) = 0;
  // perftest's "done" after the closing handshake (TCP only; -R sends none).
  virtual void send_done() = 0;
  // How long the next steps wait for the peer's bytes; -1: as long as the peer is there.
  void set_timeout_ms(int ms) { timeout_ms_ = ms; }

  template <size_t N>
  std::array<uint8_t, N> exchange(const std::array<uint8_t, N>& mine, const char* what) {
    std::array<uint8_t, N> theirs{};
    exchange_bytes(mine.data(), theirs.data(), N, what, false);
    return theirs;
  }

 protected:
  int timeout_ms_;
};

// perftest's TCP socket.
class TcpWire final : public Channel {
 public:
  TcpWire(int fd, int timeout_ms) : Channel(timeout_ms), fd_(fd) {}

  // Writing first is safe for either role: the messages are far smaller than the socket
  // buffers.
  bool exchange_bytes(const uint8_t* mine, uint8_t* theirs, size_t n, const char* what,
                      bool tolerate_gone) override {
    return write_all(mine, n, what, tolerate_gone) && read_all(theirs, n, what, tolerate_gone);
  }
  void send_done() override {
    static constexpr uint8_t kDone[kPerftestDoneBytes] = {'d', 'o', 'n', 'e', 0};
    write_all(kDone, sizeof kDone, "done", true);
  }

 private:
  // False when the peer has gone (EPIPE, ECONNRESET) and `tolerate_gone`; fails otherwise.
  bool write_all(const uint8_t* p, size_t n, const char* what, bool tolerate_gone) {
    while (n > 0) {
      const ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && tolerate_gone && (errno == EPIPE || errno == ECONNRESET)) return false;
      if (w <= 0) fail(std::string("writing ") + what + ": " + std::strerror(errno));
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }

  // False when the peer closed (or reset) the connection first and `tolerate_gone`.
  bool read_all(uint8_t* p, size_t n, const char* what, bool tolerate_gone) {
    while (n > 0) {
      pollfd pfd{fd_, POLLIN, 0};
      const int pr = ::poll(&pfd, 1, timeout_ms_);
      if (pr < 0 && errno == EINTR) continue;
      if (pr == 0) fail(std::string("the peer sent no ") + what + " in time");
      const ssize_t r = ::read(fd_, p, n);
      if (r < 0 && errno == EINTR) continue;
      if (tolerate_gone && (r == 0 || (r < 0 && errno == ECONNRESET))) return false;
      if (r == 0) fail(std::string("the peer closed the connection before its ") + what);
      if (r < 0) fail(std::string("reading ") + what + ": " + std::strerror(errno));
      p += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  }

  int fd_;
};

// perftest -R: the exchange as SENDs on an rdma_cm connection of its own (perftest_wire.h).
// perftest keeps one 56-byte receive posted and re-posts it after each message, so the steps
// alternate strictly: the client sends and then receives, the server receives and then sends.
class CmWire final : public Channel {
 public:
  static constexpr uint32_t kSlot = 64;  // a receive or send buffer: the largest message, 56 B

  CmWire(conduit_context* ctx, bool client, int timeout_ms) : Channel(timeout_ms), client_(client) {
    int rc = conduit_create_cq(ctx, 8, &cq_);
    if (rc < 0) fail(std::string("conduit_create_cq (exchange): ") + conduit_strerror(rc));
    rc = conduit_alloc_mr(ctx, 4096, CONDUIT_ACCESS_LOCAL_WRITE, &mr_);
    if (rc < 0) fail(std::string("conduit_alloc_mr (exchange): ") + conduit_strerror(rc));
    conduit_qp_init_attr qa{};
    qa.send_cq = cq_;
    qa.recv_cq = cq_;
    rc = conduit_create_qp(ctx, &qa, &qp_);
    if (rc < 0) fail(std::string("conduit_create_qp (exchange): ") + conduit_strerror(rc));
    post_receive();  // before the connection: the peer's client sends at once
  }
  ~CmWire() override {
    if (qp_ != nullptr) conduit_destroy_qp(qp_);  // the peer's comm connection gets a DREQ
    if (mr_ != nullptr) conduit_free_mr(mr_);
    if (cq_ != nullptr) conduit_destroy_cq(cq_);
  }
  CmWire(const CmWire&) = delete;
  CmWire& operator=(const CmWire&) = delete;

  conduit_qp* qp() const { return qp_; }

  bool exchange_bytes(const uint8_t* mine, uint8_t* theirs, size_t n, const char* what,
                      bool tolerate_gone) override {
    if (client_)
      return send(mine, n, what, tolerate_gone) && receive(theirs, n, what, tolerate_gone);
    return receive(theirs, n, what, tolerate_gone) && send(mine, n, what, tolerate_gone);
  }
  void send_done() override {}

 private:
  uint8_t* recv_buf() const { return static_cast<uint8_t*>(mr_->addr); }
  uint8_t* send_buf() const { return static_cast<uint8_t*>(mr_->addr) + kSlot; }

  void post_receive() {
    conduit_sge sge{reinterpret_cast<uintptr_t>(recv_buf()), kSlot, mr_->lkey};
    conduit_recv_wr wr{};
    wr.wr_id = 1;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    conduit_recv_wr* bad = nullptr;
    const int rc = conduit_post_recv(qp_, &wr, &bad);
    if (rc < 0) fail(std::string("conduit_post_recv (exchange): ") + conduit_strerror(rc));
  }

  bool send(const uint8_t* p, size_t n, const char* what, bool tolerate_gone) {
    std::memcpy(send_buf(), p, n);
    conduit_sge sge{reinterpret_cast<uintptr_t>(send_buf()), static_cast<uint32_t>(n), mr_->lkey};
    conduit_send_wr wr{};
    wr.wr_id = 2;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = CONDUIT_WR_SEND;
    wr.send_flags = CONDUIT_SEND_SIGNALED;
    conduit_send_wr* bad = nullptr;
    const int rc = conduit_post_send(qp_, &wr, &bad);
    if (rc < 0) fail(std::string("conduit_post_send (") + what + "): " + conduit_strerror(rc));
    sent_ = false;
    return wait(sent_, what, tolerate_gone);
  }

  bool receive(uint8_t* p, size_t n, const char* what, bool tolerate_gone) {
    if (!wait(received_, what, tolerate_gone)) return false;
    received_ = false;
    if (received_len_ != n) {
      fail(std::string("the peer's ") + what + " has " + std::to_string(received_len_) +
           " bytes, not " + std::to_string(n));
    }
    std::memcpy(p, recv_buf(), n);
    post_receive();
    return true;
  }

  // Reaps the CQ until `flag` is set. The peer's next message may complete before our send's
  // ACK does: either completion is noted as it comes. A disconnected peer (its process ended)
  // has gone: what it sent before is reaped first.
  bool wait(bool& flag, const char* what, bool tolerate_gone) {
    const uint64_t until = now_ns() + uint64_t(std::max(timeout_ms_, 0)) * 1'000'000ull;
    bool disconnected = false;
    for (;;) {
      conduit_wc wc{};
      int n;
      while ((n = conduit_poll_cq(cq_, 1, &wc)) == 1) {
        if (wc.status != CONDUIT_WC_SUCCESS) {
          if (tolerate_gone) return false;
          fail(std::string("the exchange's ") + what +
               " failed: " + conduit_wc_status_str(wc.status));
        }
        if (wc.opcode == CONDUIT_WC_SEND) sent_ = true;
        if (wc.opcode == CONDUIT_WC_RECV) {
          received_ = true;
          received_len_ = wc.byte_len;
        }
      }
      if (n < 0) fail(std::string("conduit_poll_cq (exchange): ") + conduit_strerror(n));
      if (flag) return true;
      if (disconnected) {
        if (tolerate_gone) return false;
        fail(std::string("the peer closed the exchange's connection before its ") + what);
      }
      disconnected = conduit_wait_disconnect(qp_, 0) == 0;
      if (disconnected) continue;  // one more look at the CQ
      if (timeout_ms_ >= 0 && now_ns() >= until) {
        fail(std::string("the peer sent no ") + what + " in time");
      }
      if (const int w = conduit_wait_cq(cq_, 20); w < 0) {
        fail(std::string("conduit_wait_cq (exchange): ") + conduit_strerror(w));
      }
    }
  }

  const bool client_;
  conduit_cq* cq_ = nullptr;
  conduit_mr* mr_ = nullptr;
  conduit_qp* qp_ = nullptr;
  bool sent_ = false;
  bool received_ = false;
  uint32_t received_len_ = 0;
};

// A count sampled over a DurationWindow: feed it the clock and the running count.
// /proc/stat's cpu times now (--cpu_util); zeros when it cannot be read.
CpuTimes read_cpu_times() {
  CpuTimes t;
  if (FILE* f = std::fopen("/proc/stat", "r")) {
    char line[256];
    if (std::fgets(line, sizeof line, f) != nullptr) parse_proc_stat_cpu(line, t);
    std::fclose(f);
  }
  return t;
}

class DurationSample {
 public:
  // read_cpu (--cpu_util): note /proc/stat's times where the sample begins and ends.
  explicit DurationSample(const DurationWindow& w, bool read_cpu = false)
      : w_(w), read_cpu_(read_cpu) {}
  // False once the window has ended.
  bool update(uint64_t now_ns, uint64_t count) {
    if (!begun_ && now_ns >= w_.sample_begin_ns) {
      begun_ = true;
      begin_ns_ = now_ns;
      begin_count_ = count;
      if (read_cpu_) cpu_begin_ = read_cpu_times();
    }
    if (begun_ && !ended_ && now_ns >= w_.sample_end_ns) {
      ended_ = true;
      end_ns_ = now_ns;
      end_count_ = count;
      if (read_cpu_) cpu_end_ = read_cpu_times();
    }
    return now_ns < w_.end_ns;
  }
  double cpu_util() const { return ended_ ? perftest_cpu_util(cpu_begin_, cpu_end_) : 0; }
  bool sampled() const { return ended_; }  // the sampled part is over
  uint64_t count() const { return ended_ ? end_count_ - begin_count_ : 0; }
  uint64_t nanoseconds() const { return ended_ ? end_ns_ - begin_ns_ : 0; }
  double seconds() const { return static_cast<double>(nanoseconds()) / 1e9; }
  // Milliseconds to sleep at most: up to the next boundary, within [1, 100].
  int wait_ms(uint64_t now_ns) const {
    const uint64_t next = !begun_ ? w_.sample_begin_ns : !ended_ ? w_.sample_end_ns : w_.end_ns;
    const uint64_t ms = next > now_ns ? (next - now_ns) / 1'000'000 : 0;
    return static_cast<int>(std::clamp<uint64_t>(ms, 1, 100));
  }

 private:
  DurationWindow w_;
  bool begun_ = false;
  bool ended_ = false;
  uint64_t begin_ns_ = 0, end_ns_ = 0, begin_count_ = 0, end_count_ = 0;
  bool read_cpu_ = false;
  CpuTimes cpu_begin_{}, cpu_end_{};
};

const char* const kRule = kPerftestResultLine;  // perftest's RESULT_LINE

// cpu: --cpu_util's column (the util this side measured, 0 when it sampled nothing, as
// perftest's calc_cpu_util).
void print_bw_header(bool gbits, bool cpu, PerftestOutput output) {
  if (output != PerftestOutput::kFull) return;  // --output: the numbers only
  std::printf("%s%s\n", perftest_bw_header(gbits).c_str(), perftest_cpu_util_header(cpu).c_str());
}

void print_bw_result(const PerftestReport& r, bool gbits, bool cpu, double cpu_util,
                     PerftestOutput output) {
  if (output != PerftestOutput::kFull) {
    std::printf("%s\n", perftest_bw_output(r, output).c_str());
  } else {
    std::printf("%s%s\n", perftest_bw_line(r, gbits).c_str(),
                perftest_cpu_util_column(cpu, cpu_util).c_str());
  }
  std::fflush(stdout);
}

class Session {
 public:
  // fd: perftest's TCP exchange; -1 with -R (rdma_cm: the exchange is a connection of its own).
  Session(const PerfOptions& o, int fd) : o_(o), client_(!o.is_server()) {
    if (fd >= 0) wire_ = std::make_unique<TcpWire>(fd, timeout_ms());
  }
  ~Session() {
    for (QpSide& q : qps_) {
      if (q.qp != nullptr) conduit_destroy_qp(q.qp);
    }
    wire_.reset();  // -R: its QP, before the context goes
    if (cq_ != nullptr) conduit_destroy_cq(cq_);
    if (mr_ != nullptr) conduit_free_mr(mr_);
    if (ctx_ != nullptr) conduit_close(ctx_);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int run();

 private:
  // One QP of the session: its records, and its share of the current size's traffic.
  struct QpSide {
    conduit_qp* qp = nullptr;
    QpRecord mine{};
    QpRecord peer{};
    uint64_t rx_posted = 0;  // receives of this size posted, and completed
    uint64_t rx_done = 0;
    uint64_t rx_idle = 0;         // completed and not posted again yet (--recv_post_list: in lists)
    uint64_t tx_posted = 0;       // bandwidth client: messages of this size posted
    uint64_t tx_outstanding = 0;  // sends posted whose completion has not been seen
    // Per signaled send in flight, the sends its completion stands for (itself and the
    // unsignaled ones before it: -Q, -l), oldest first; and the unsignaled ones since the last.
    std::deque<uint64_t> tx_batches;
    uint64_t tx_unsignaled = 0;
    void reset_tx() {
      tx_posted = tx_outstanding = tx_unsignaled = 0;
      tx_batches.clear();
    }
    // A send was posted, signaled or not.
    void posted_send(bool signaled) {
      ++tx_outstanding;
      if (!signaled) {
        ++tx_unsignaled;
        return;
      }
      tx_batches.push_back(tx_unsignaled + 1);
      tx_unsignaled = 0;
    }
  };

  QpRecord handshake(const QpRecord& mine, const char* what) {
    handshake_ns_ = now_ns();
    QpRecord peer;
    const bool ok =
        rdma_cm_ ? parse_perftest_cm_record(wire_->exchange(perftest_cm_record(mine), what), peer)
                 : parse_perftest_record(wire_->exchange(perftest_record(mine), what), peer);
    if (!ok) fail(std::string("the peer's ") + what + " is not a perftest connection record");
    return peer;
  }
  int timeout_ms() const { return static_cast<int>(o_.timeout_s) * 1000; }
  void open_resources(uint64_t max_size);
  void connect(QpSide& q, uint32_t mtu_bytes);
  // -R: connects `qp` through rdma_cm (the IB CM): as the client to the server's port, retried
  // while nothing listens there yet; as the server, with the next request to our port.
  void cm_connect(conduit_qp* qp, uint32_t access, uint32_t mtu_bytes, const char* what);
  // -R: the exchange's own connection (the first one made), then the version and the rest.
  void open_cm_exchange();
  // -R: the test QPs, one connection each, between two handshakes of zeros (perftest's syncs).
  void cm_connect_qps(uint32_t mtu_bytes);
  void close_exchange();
  // The report step: ours out, the peer's in (false: malformed). The iterations are 8 bytes,
  // or 4 with --dont_xchg_versions (perftest_report_steps()).
  bool exchange_report(const PerftestReport& mine, PerftestReport& theirs) {
    const bool iters64 = !o_.dont_xchg_versions;
    const auto out = perftest_report_steps(mine, iters64);
    std::vector<std::vector<uint8_t>> in;
    for (const auto& m : out) {
      in.emplace_back(m.size());
      wire_->exchange_bytes(m.data(), in.back().data(), m.size(), "report", false);
    }
    return parse_perftest_report_steps(in, iters64, theirs);
  }

  uint8_t* tx_area() const { return static_cast<uint8_t*>(mr_->addr); }
  uint8_t* rx_area() const { return static_cast<uint8_t*>(mr_->addr) + half_; }
  // Each QP's share of the CQ: the most sends in flight or receives posted it may have.
  // send_bw -b: a QP has its sends and its receives on the CQ at once: half each.
  uint32_t cq_share() const {
    const uint32_t halves = duplex_ && o_.test == TestKind::kSendBw ? 2 : 1;
    return kCqEntries / static_cast<uint32_t>(qps_.size()) / halves;
  }
  // The header's values (perftest_test_info()): the send window and moderation bw_client()
  // and bw_duplex_send() run with (a READ's window also within the peer's out_reads, which
  // comes later), the receives kPostReceives posts, one message in flight for a latency test.
  PerftestRunValues run_values(uint32_t mtu, const std::string& peer_version) const {
    PerftestRunValues v;
    v.server = !client_;
    v.mtu = mtu;
    const bool lat = is_latency(o_.test);
    v.tx_depth =
        lat ? 1
            : std::max<uint32_t>(1, std::min<uint32_t>({o_.effective_tx_depth(), 128, cq_share()}));
    v.rx_depth = static_cast<uint32_t>(std::min<uint64_t>(
        {duration_ ? UINT64_MAX : iters_, o_.effective_rx_depth(), uint64_t{cq_share()}}));
    v.post_list = lat ? 1 : std::min(o_.post_list, v.tx_depth);
    v.cq_mod = lat ? 1 : perftest_session_cq_mod(perftest_cq_mod(o_), o_.post_list, v.tx_depth);
    v.inline_size = std::min(o_.inline_size, kConduitMaxInline);
    v.out_reads = perftest_out_reads(o_);
    v.peer_version = peer_version;
    return v;
  }
  // --out_json: the file perftest writes where it prints a result (the last one stays).
  void write_json(const std::string& text) const {
    if (!o_.out_json) return;
    if (!perftest_write_json_file(o_.out_json_file, text)) {
      std::fprintf(stderr, "failed to open %s\n", o_.out_json_file.c_str());  // perftest's
    }
  }
  // A bandwidth result: its line (or --output's number) and, with --out_json, its file.
  void report_bw(const PerftestReport& r) const {
    print_bw_result(r, o_.report_gbits, o_.cpu_util, cpu_util_, o_.output);
    write_json(perftest_json_bw(o_, values_, r, o_.cpu_util ? cpu_util_ : -1));
  }
  // Posts n receives of `size` on QP qi, chained in one conduit_post_recv (--recv_post_list).
  void post_receives(size_t qi, uint64_t size, uint32_t n);
  // False when the send queue is full (reap first).
  bool post_one_send(size_t qi, uint64_t size, uint64_t seq, bool signaled);
  // -l: posts n WRs (messages first_seq ..) chained in one conduit_post_send, signaled as
  // perftest_signaled() says with `cq_mod`; returns how many were posted (fewer: the send queue
  // filled).
  uint32_t post_send_list(size_t qi, uint64_t size, uint64_t first_seq, uint32_t n, uint32_t cq_mod,
                          bool unbounded);
  // Message `seq` of QP qi: its WR, whose one SGE is `sge`.
  void make_send_wr(size_t qi, uint64_t size, uint64_t seq, bool signaled, conduit_send_wr& wr,
                    conduit_sge& sge);
  // Takes every completion there is (fails on an error completion); counts them. Returns
  // how many it took.
  int reap();
  // Waits for a completion, at most the timeout; fails without one.
  void wait_completion(const char* what);
  // -D: waits for a completion at most `ms`; fails only when nothing has moved for -W s.
  void wait_completion_for(int ms, const char* what) {
    if (o_.yield) {
      yield_for_completion(ms);
    } else if (const int w = conduit_wait_cq(cq_, ms); w < 0) {
      fail(std::string("conduit_wait_cq: ") + conduit_strerror(w));
    }
    check_stalled(what);
  }
  // -Y: reaps, with sched_yield() between looks, until a completion has come (true) or `ms`
  // have passed. No conduit_wait_cq: that arms the CQ's wake-up, so the engine would kick.
  bool yield_for_completion(int ms) {
    const uint64_t until = now_ns() + uint64_t(ms) * 1'000'000ull;
    for (;;) {
      if (reap() > 0) return true;
      if (now_ns() >= until) return false;
      sched_yield();
    }
  }
  void note_progress() { last_progress_ns_ = now_ns(); }
  void check_stalled(const char* what) const {
    if (now_ns() - last_progress_ns_ > uint64_t{o_.timeout_s} * 1'000'000'000ull) {
      fail(std::string("no progress for ") + std::to_string(o_.timeout_s) + " s " + what);
    }
  }

  // What perftest reports as #iterations: -n on every QP.
  uint64_t total_iters() const { return iters_ * qps_.size(); }
  uint64_t outstanding_total() const {
    uint64_t n = 0;
    for (const QpSide& q : qps_) n += q.tx_outstanding;
    return n;
  }
  // Signaled sends in flight, all QPs: what can still complete.
  uint64_t signaled_outstanding() const {
    uint64_t n = 0;
    for (const QpSide& q : qps_) n += q.tx_batches.size();
    return n;
  }
  // The READs in flight every peer QP takes (they all advertise the same).
  uint32_t peer_out_reads() const {
    uint32_t r = qps_[0].peer.out_reads;
    for (const QpSide& q : qps_) r = std::min<uint32_t>(r, q.peer.out_reads);
    return r;
  }

  // Posts on every QP in turn (so the QPs start together) until its window is full or its -n
  // are posted (`unbounded`, -D: no count); true when anything was posted. Sets `busy` when a
  // QP still has messages to post or to complete.
  // Every cq_mod-th send is signaled (perftest_session_cq_mod()).
  bool fill_send_windows(uint64_t size, uint32_t window, uint32_t cq_mod, bool unbounded,
                         bool& busy);
  PerftestReport bw_client(uint64_t size);  // SEND/WRITE/READ, -n messages per QP
  PerftestReport bw_server(uint64_t size);  // send_bw: receives -n messages per QP
  // send_bw -b: sends -n and receives -n per QP at once (the server sends once the client's
  // first message is in, as perftest's run_iter_bi).
  PerftestReport bw_duplex_send(uint64_t size);
  // One size of a latency test: -n round trips (`iters`), or -D's report (`duration`).
  struct LatOutcome {
    LatResult iters;
    LatDurationResult duration;
  };
  LatOutcome latency(uint64_t size);       // the ping-pong, either role
  LatOutcome read_latency(uint64_t size);  // read_lat: the client's READs, one at a time
  // -D, latency: the window sampled (started by `running`), and whether it is still open.
  bool lat_running(std::optional<DurationSample>& sample, bool start, uint64_t count);

  const PerfOptions& o_;
  std::unique_ptr<Channel> wire_;
  const bool client_;
  const bool rdma_cm_ = o_.perftest_rdma_cm;  // -R
  const bool duration_ = o_.duration_s != 0;  // -D: for a time instead of -n messages
  const bool duplex_ = o_.bidirectional;      // -b: both sides send
  PerftestPlan plan_{};
  std::vector<uint64_t> sizes_;
  uint64_t iters_ = 0;
  uint64_t half_ = 0;  // bytes in each half of the MR
  conduit_context* ctx_ = nullptr;
  conduit_mr* mr_ = nullptr;
  conduit_cq* cq_ = nullptr;
  std::vector<QpSide> qps_;                // -q of them (latency: one)
  std::vector<conduit_send_wr> list_wrs_;  // -l: the list being posted, and its SGEs
  std::vector<conduit_sge> list_sges_;
  std::vector<conduit_recv_wr> recv_wrs_;  // --recv_post_list: the receives being posted
  std::vector<conduit_sge> recv_sges_;
  uint32_t recv_list_ = 1;  // --recv_post_list, within the receives posted per QP
  // The size being received, and its receives completed on all QPs.
  uint64_t rx_size_ = 0;
  uint64_t rx_done_total_ = 0;
  uint64_t tx_done_total_ = 0;  // send completions, all QPs
  uint64_t rx_last_ns_ = 0;     // when the last message arrived
  uint64_t handshake_ns_ = 0;   // when we sent our latest handshake record
  uint64_t last_progress_ns_ = 0;
  double cpu_util_ = 0;       // --cpu_util: this side's, over its last -D sample (bw or latency)
  PerftestRunValues values_;  // the header's values (run_values()), for --out_json's too
  // -D, latency, once the sampled part is over: an error completion means the peer has gone
  // (ib_write_lat 4.5 exits at its time, its QP with it), which ends our run instead of
  // failing it.
  bool peer_may_go_ = false;
  bool peer_gone_ = false;
};

void Session::open_resources(uint64_t max_size) {
  conduit_context_attr attr{};
  attr.socket_path = o_.socket_path.empty() ? nullptr : o_.socket_path.c_str();
  attr.client_name = "conduit-perf-perftest";
  // Each half holds at least perftest's cycle buffer (the peer's WRITE/READ addresses wrap
  // within it) and the largest message, rounded to pages.
  half_ = (std::max<uint64_t>(max_size, kPerftestCycleBufferBytes) + 4095) / 4096 * 4096;
  qps_.resize(o_.qps);
  // The MR, then room for the rings the daemon places in the region (per QP, as conduit-perf's
  // own mode reserves).
  attr.region_bytes = 2 * half_ + (1u << 20) + uint64_t{o_.qps} * (256u << 10);
  if (rdma_cm_) attr.region_bytes += (256u << 10) + 4096;  // -R: the exchange's QP and buffer
  int rc = conduit_open(&attr, &ctx_);
  if (rc < 0) fail(std::string("conduit_open: ") + conduit_strerror(rc));
  rc = conduit_alloc_mr(ctx_, 2 * half_,
                        CONDUIT_ACCESS_LOCAL_WRITE | CONDUIT_ACCESS_REMOTE_WRITE |
                            CONDUIT_ACCESS_REMOTE_READ | CONDUIT_ACCESS_REMOTE_ATOMIC,
                        &mr_);
  if (rc < 0) fail(std::string("conduit_alloc_mr: ") + conduit_strerror(rc));
  std::memset(tx_area(), 0x5a, half_);
  // write_lat waits for the peer's counter (1, 2, ...) in the last byte of a message: start at 0.
  std::memset(rx_area(), 0, half_);
  rc = conduit_create_cq(ctx_, kCqEntries, &cq_);
  if (rc < 0) fail(std::string("conduit_create_cq: ") + conduit_strerror(rc));
  conduit_qp_init_attr qa{};
  qa.send_cq = cq_;
  qa.recv_cq = cq_;
  qa.traffic_class = o_.traffic_class.empty() ? nullptr : o_.traffic_class.c_str();
  for (QpSide& q : qps_) {
    rc = conduit_create_qp(ctx_, &qa, &q.qp);
    if (rc < 0) fail(std::string("conduit_create_qp: ") + conduit_strerror(rc));
  }

  Gid gid{};
  if (o_.gid.empty() || !parse_gid(o_.gid, gid)) {
    fail("--perftest needs -x ADDR: the address of conduitd's port (our GID)");
  }
  std::random_device rd;
  for (QpSide& q : qps_) {
    QpRecord& m = q.mine;
    m.lid = 0;
    // perftest makes the peer's max_rd_atomic our out_reads (perftest_wire.h).
    m.out_reads = perftest_out_reads(o_);
    m.qpn = conduit_qp_num(q.qp);
    m.psn = rd() & 0xFFFFFFu;
    m.rkey = mr_->rkey;
    // Every QP's peer writes into / reads from the second half (the bandwidth tests do not
    // look at what lands there).
    m.vaddr = mr_->iova + half_;
    m.gid = gid;
    m.srqn = 0;
  }
}

void Session::connect(QpSide& q, uint32_t mtu_bytes) {
  const QpRecord& peer = q.peer;
  conduit_qp_connect_attr ca{};
  ca.remote_qpn = peer.qpn;
  ca.remote_psn = peer.psn;
  ca.local_psn = q.mine.psn;
  std::memcpy(ca.remote_gid, peer.gid.data(), 16);
  ca.mtu = CONDUIT_MTU_1024;
  for (uint32_t e = 1; e <= 5; ++e) {
    if ((128u << e) == mtu_bytes) ca.mtu = e;
  }
  ca.access =
      CONDUIT_ACCESS_REMOTE_WRITE | CONDUIT_ACCESS_REMOTE_READ | CONDUIT_ACCESS_REMOTE_ATOMIC;
  ca.timeout = o_.qp_timeout;
  ca.retry_cnt = 7;
  ca.rnr_retry = 7;
  ca.min_rnr_timer = 12;
  // As perftest: our READs in flight are the peer's out_reads (its responder's depth).
  ca.max_rd_atomic = static_cast<uint8_t>(std::clamp<uint32_t>(peer.out_reads, 1, 16));
  // And the depth we advertised as out_reads (-o) is what our responder holds.
  ca.max_dest_rd_atomic = static_cast<uint8_t>(q.mine.out_reads);
  const int rc = conduit_connect_qp(q.qp, &ca);
  if (rc < 0) fail(std::string("conduit_connect_qp: ") + conduit_strerror(rc));
}

void Session::post_receives(size_t qi, uint64_t size, uint32_t n) {
  QpSide& q = qps_[qi];
  recv_sges_.assign(n, conduit_sge{reinterpret_cast<uint64_t>(rx_area()),
                                   static_cast<uint32_t>(size), mr_->lkey});
  recv_wrs_.assign(n, conduit_recv_wr{});
  for (uint32_t i = 0; i < n; ++i) {
    conduit_recv_wr& wr = recv_wrs_[i];
    wr.wr_id = uint64_t{qi} << kWrIdQpShift | (q.rx_posted + i);
    wr.sg_list = &recv_sges_[i];
    wr.num_sge = 1;
    wr.next = i + 1 < n ? &recv_wrs_[i + 1] : nullptr;
  }
  conduit_recv_wr* bad = nullptr;
  const int rc = conduit_post_recv(q.qp, recv_wrs_.data(), &bad);
  if (rc < 0) fail(std::string("conduit_post_recv: ") + conduit_strerror(rc));
  q.rx_posted += n;
}

bool Session::post_one_send(size_t qi, uint64_t size, uint64_t seq, bool signaled) {
  QpSide& q = qps_[qi];
  conduit_sge sge{};
  conduit_send_wr wr{};
  make_send_wr(qi, size, seq, signaled, wr, sge);
  const int rc = conduit_post_send(q.qp, &wr, nullptr);
  if (rc == -ENOMEM) return false;
  if (rc < 0) fail(std::string("conduit_post_send: ") + conduit_strerror(rc));
  q.posted_send(signaled);
  return true;
}

uint32_t Session::post_send_list(size_t qi, uint64_t size, uint64_t first_seq, uint32_t n,
                                 uint32_t cq_mod, bool unbounded) {
  QpSide& q = qps_[qi];
  std::vector<conduit_sge>& sges = list_sges_;
  std::vector<conduit_send_wr>& wrs = list_wrs_;
  sges.assign(n, conduit_sge{});
  wrs.assign(n, conduit_send_wr{});
  for (uint32_t i = 0; i < n; ++i) {
    make_send_wr(qi, size, first_seq + i,
                 perftest_signaled(first_seq + i, iters_, cq_mod, unbounded), wrs[i], sges[i]);
    wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
  }
  conduit_send_wr* bad = nullptr;
  const int rc = conduit_post_send(q.qp, wrs.data(), &bad);
  if (rc < 0 && rc != -ENOMEM) fail(std::string("conduit_post_send: ") + conduit_strerror(rc));
  // -ENOMEM: the send queue filled part way; those before `bad` are posted.
  const uint32_t posted = rc == 0 || bad == nullptr ? n : static_cast<uint32_t>(bad - wrs.data());
  for (uint32_t i = 0; i < posted; ++i)
    q.posted_send((wrs[i].send_flags & CONDUIT_SEND_SIGNALED) != 0);
  return posted;
}

void Session::make_send_wr(size_t qi, uint64_t size, uint64_t seq, bool signaled,
                           conduit_send_wr& wr, conduit_sge& sge) {
  const QpSide& q = qps_[qi];
  sge = conduit_sge{reinterpret_cast<uint64_t>(tx_area()), static_cast<uint32_t>(size), mr_->lkey};
  wr = conduit_send_wr{};
  wr.wr_id = uint64_t{qi} << kWrIdQpShift | seq;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = signaled ? CONDUIT_SEND_SIGNALED : 0;
  if (perftest_inline(o_, size)) wr.send_flags |= CONDUIT_SEND_INLINE;  // -I
  switch (o_.test) {
    case TestKind::kSendBw:
    case TestKind::kSendLat:
      wr.opcode = CONDUIT_WR_SEND;
      break;
    case TestKind::kWriteBw:
    case TestKind::kWriteLat:
      wr.opcode = CONDUIT_WR_RDMA_WRITE;
      break;
    case TestKind::kReadBw:
    case TestKind::kReadLat:
      wr.opcode = CONDUIT_WR_RDMA_READ;
      break;
    case TestKind::kAtomicBw:
    case TestKind::kAtomicLat:
      // As ib_atomic_bw and ib_atomic_lat: every operation on the first word of the peer's buffer
      // (page aligned), the old value into ours. Fetch-and-add adds 1; compare-and-swap compares
      // with 0 and stores 1.
      wr.opcode = o_.atomic_cas ? CONDUIT_WR_ATOMIC_CMP_AND_SWP : CONDUIT_WR_ATOMIC_FETCH_AND_ADD;
      sge.length = 8;
      wr.compare_add = o_.atomic_cas ? 0 : 1;
      wr.swap = o_.atomic_cas ? 1 : 0;
      break;
  }
  wr.remote_addr = q.peer.vaddr;
  wr.rkey = q.peer.rkey;
}

int Session::reap() {
  conduit_wc wc[16];
  int taken = 0;
  for (;;) {
    const int n = conduit_poll_cq(cq_, 16, wc);
    if (n < 0) fail(std::string("conduit_poll_cq: ") + conduit_strerror(n));
    for (int i = 0; i < n; ++i) {
      const conduit_wc& c = wc[i];
      if (c.status != CONDUIT_WC_SUCCESS && peer_may_go_) {
        peer_gone_ = true;
        continue;
      }
      if (c.status != CONDUIT_WC_SUCCESS) {
        fail(std::string(c.opcode == CONDUIT_WC_RECV ? "a receive" : "a work request") +
             " failed: " + conduit_wc_status_str(c.status) + " (vendor_err " +
             std::to_string(c.vendor_err) + ")");
      }
      const uint64_t qi = c.wr_id >> kWrIdQpShift;
      if (qi >= qps_.size()) fail("a completion names no QP of ours");
      QpSide& q = qps_[qi];
      if (c.opcode == CONDUIT_WC_RECV) {
        if (c.byte_len != rx_size_) {
          fail("message " + std::to_string(q.rx_done) + " on QP " + std::to_string(qi) + " has " +
               std::to_string(c.byte_len) + " bytes, expected " + std::to_string(rx_size_));
        }
        rx_last_ns_ = now_ns();
        ++q.rx_done;
        ++rx_done_total_;
        // Each QP's peer sends -n, or (-D) until its time is up: posted again one by one, or
        // with --recv_post_list in lists.
        ++q.rx_idle;
        if (const uint32_t n =
                perftest_recv_list_to_post(q.rx_idle, q.rx_posted, iters_, recv_list_, duration_)) {
          post_receives(qi, rx_size_, n);
          q.rx_idle -= n;
        }
      } else if (!q.tx_batches.empty()) {
        // A signaled send: it and the unsignaled ones before it are done (perftest counts
        // cq_mod per completion).
        const uint64_t done = std::min(q.tx_batches.front(), q.tx_outstanding);
        q.tx_batches.pop_front();
        q.tx_outstanding -= done;
        tx_done_total_ += done;
      }
      note_progress();
    }
    taken += n;
    if (n < 16) return taken;
  }
}

void Session::wait_completion(const char* what) {
  const int ms = static_cast<int>(o_.timeout_s) * 1000;
  const int w = o_.yield ? int{yield_for_completion(ms)} : conduit_wait_cq(cq_, ms);
  if (w < 0) fail(std::string("conduit_wait_cq: ") + conduit_strerror(w));
  if (w == 0) fail("no completion for " + std::to_string(o_.timeout_s) + " s " + what);
}

bool Session::fill_send_windows(uint64_t size, uint32_t window, uint32_t cq_mod, bool unbounded,
                                bool& busy) {
  bool posted = false;
  for (size_t qi = 0; qi < qps_.size(); ++qi) {
    QpSide& q = qps_[qi];
    // -l: lists of up to that many WRs, chained in one post (perftest's post_list).
    for (;;) {
      const uint32_t n = perftest_next_list(q.tx_posted, iters_, q.tx_outstanding, window,
                                            o_.post_list, unbounded);
      if (n == 0) break;
      const uint32_t done =
          n == 1
              ? uint32_t{post_one_send(qi, size, q.tx_posted,
                                       perftest_signaled(q.tx_posted, iters_, cq_mod, unbounded))}
              : post_send_list(qi, size, q.tx_posted, n, cq_mod, unbounded);
      q.tx_posted += done;
      posted = posted || done > 0;
      if (done < n) break;  // the send queue is full: reap first
    }
    busy = busy || q.tx_posted < iters_ || q.tx_outstanding > 0;
  }
  return posted;
}

PerftestReport Session::bw_client(uint64_t size) {
  // Per QP, as perftest: -n messages each, at most -t in flight (READs: the peer's out_reads),
  // within the QP's share of the CQ.
  const uint32_t window = std::max<uint32_t>(
      1, std::min<uint32_t>({o_.effective_tx_depth(), 128, cq_share(),
                             o_.test == TestKind::kReadBw || o_.test == TestKind::kAtomicBw
                                 ? std::max<uint32_t>(1, peer_out_reads())
                                 : 128u}));
  // -Q, -l: perftest's CQ moderation, within the window.
  const uint32_t cq_mod = perftest_session_cq_mod(perftest_cq_mod(o_), o_.post_list, window);
  const auto t0 = std::chrono::steady_clock::now();
  for (QpSide& q : qps_) q.reset_tx();
  note_progress();
  DurationSample sample(perftest_duration_window(now_ns(), o_.duration_s, perftest_margin_s(o_)),
                        o_.cpu_util);
  for (;;) {
    // -D: post until the time is up, counting what completes in the sampled part.
    if (duration_ && !sample.update(now_ns(), tx_done_total_)) break;
    bool busy = false;  // a message still to post or to complete
    const bool can_post = fill_send_windows(size, window, cq_mod, duration_, busy);
    if (!busy) break;
    const uint64_t before = outstanding_total();
    reap();
    // Nothing completed and nothing more could be posted: sleep on the CQ.
    if (!can_post && outstanding_total() == before) {
      if (duration_) {
        wait_completion_for(sample.wait_ms(now_ns()), "for the messages sent");
      } else {
        wait_completion("for the messages sent");
      }
    }
  }
  if (duration_) {
    // Time is up: let what is in flight complete (the peer still takes it), then report. Sends
    // after the last signaled one (-Q, -l) complete unseen.
    while (signaled_outstanding() > 0) {
      const uint64_t before = signaled_outstanding();
      reap();
      if (signaled_outstanding() == before) wait_completion("for the last messages sent");
    }
    cpu_util_ = sample.cpu_util();
    return perftest_rate_report(size, sample.count(), sample.seconds(), sample.count(),
                                o_.report_gbits);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return perftest_rate_report(size, total_iters(), secs, total_iters(), o_.report_gbits);
}

PerftestReport Session::bw_server(uint64_t size) {
  // The receives of this size were posted before the barrier (kPostReceives). Messages may have
  // come in since, so time from our barrier record (the peer sends once it has it) to the last
  // arrival: completions reaped in a batch would make the first arrival's time meaningless.
  // Each QP's receives stop at -n, so -n x QPs in all means -n on every QP.
  note_progress();
  if (duration_) {
    // -D, as perftest's server: the clock starts with the first message.
    while (rx_done_total_ == 0) {
      reap();
      if (rx_done_total_ == 0) wait_completion("for the peer's first message");
    }
    DurationSample sample(perftest_duration_window(now_ns(), o_.duration_s, perftest_margin_s(o_)),
                          o_.cpu_util);
    for (;;) {
      const uint64_t now = now_ns();
      if (!sample.update(now, rx_done_total_)) break;
      const uint64_t before = rx_done_total_;
      reap();
      if (rx_done_total_ == before) {
        wait_completion_for(sample.wait_ms(now), "waiting for the peer's messages");
      }
    }
    cpu_util_ = sample.cpu_util();
    return perftest_rate_report(size, sample.count(), sample.seconds(), sample.count(),
                                o_.report_gbits);
  }
  while (rx_done_total_ < total_iters()) {
    const uint64_t before = rx_done_total_;
    reap();
    if (rx_done_total_ == before) wait_completion("for the peer's messages");
  }
  const double secs = static_cast<double>(rx_last_ns_ - handshake_ns_) / 1e9;
  return perftest_rate_report(size, rx_done_total_, secs, rx_done_total_, o_.report_gbits);
}

PerftestReport Session::bw_duplex_send(uint64_t size) {
  const uint32_t window =
      std::max<uint32_t>(1, std::min<uint32_t>({o_.effective_tx_depth(), 128, cq_share()}));
  const uint32_t cq_mod = perftest_session_cq_mod(perftest_cq_mod(o_), o_.post_list, window);
  const auto t0 = std::chrono::steady_clock::now();
  for (QpSide& q : qps_) q.reset_tx();
  note_progress();
  for (;;) {
    bool busy = rx_done_total_ < total_iters();
    // The server holds its sends until the client's traffic has begun: its receives were
    // posted before the barrier, the client's perhaps not yet when the barrier returns here.
    const bool may_send = client_ || rx_done_total_ > 0;
    const bool can_post = may_send && fill_send_windows(size, window, cq_mod, false, busy);
    if (!busy) break;
    const uint64_t before_tx = tx_done_total_, before_rx = rx_done_total_;
    reap();
    if (!can_post && tx_done_total_ == before_tx && rx_done_total_ == before_rx) {
      wait_completion("for the messages sent and the peer's");
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return perftest_rate_report(size, total_iters(), secs, total_iters(), o_.report_gbits);
}

bool Session::lat_running(std::optional<DurationSample>& sample, bool start, uint64_t count) {
  if (!duration_) return true;
  if (!sample && start) {
    // --cpu_util: /proc/stat where the sample begins and ends, as perftest's catch_alarm does
    // for the latency tests too.
    sample.emplace(perftest_duration_window(now_ns(), o_.duration_s, perftest_margin_s(o_)),
                   o_.cpu_util);
  }
  if (!sample) return true;
  const bool open = sample->update(now_ns(), count);
  peer_may_go_ = sample->sampled();
  return open && !peer_gone_;
}

Session::LatOutcome Session::latency(uint64_t size) {
  if (o_.test == TestKind::kReadLat || o_.test == TestKind::kAtomicLat) return read_latency(size);
  const bool write = o_.test == TestKind::kWriteLat;
  const bool starter = plan_.server_starts != client_;
  volatile uint8_t* const counter_in = rx_area() + size - 1;  // write_lat: the peer's counter
  uint8_t* const counter_out = tx_area() + size - 1;
  std::vector<uint64_t> posted_at;
  if (!duration_) posted_at.reserve(iters_);
  QpSide& q0 = qps_[0];  // latency tests run one QP
  q0.reset_tx();
  note_progress();
  // -D, as perftest: write_lat's clock starts now and counts our WRITEs completed; send_lat's
  // starts with the first message in (set_on_first_rx_packet) and counts the messages in.
  std::optional<DurationSample> sample;
  auto running = [&] {
    return lat_running(sample, write || q0.rx_done > 0, write ? tx_done_total_ : q0.rx_done);
  };

  // Message k (1..n) of the peer has arrived: its counter (write_lat), or k receives done.
  auto arrived = [&](uint64_t k) {
    return write ? *counter_in == static_cast<uint8_t>(k) : q0.rx_done >= k;
  };
  // False when -D's time is up first.
  auto await = [&](uint64_t k) {
    uint32_t spins = 0;
    for (;;) {
      reap();
      if (arrived(k)) {
        note_progress();
        return true;
      }
      if (!running()) return false;
      check_stalled("waiting for the peer's message");
      if (write && o_.yield) {
        sched_yield();  // the engine yields back once a WRITE's last packet has landed
      } else if (write) {
        if (++spins > kSpinsBeforeNap) {
          const timespec ts{0, kNapNs};
          nanosleep(&ts, nullptr);
        }
      } else if (duration_) {
        wait_completion_for(sample ? sample->wait_ms(now_ns()) : 100,
                            "waiting for the peer's message");
      } else {
        wait_completion("waiting for the peer's message");
      }
    }
  };
  for (uint64_t k = 1; duration_ || k <= iters_; ++k) {
    if (!starter && !await(k)) break;
    // The answers may come back before the ACKs of our messages: keep the send queue short.
    while (q0.tx_outstanding >= kLatSendWindow) {
      reap();
      if (q0.tx_outstanding >= kLatSendWindow) wait_completion("for the messages sent");
    }
    if (!running()) break;
    if (!duration_) posted_at.push_back(now_ns());
    *counter_out = static_cast<uint8_t>(k);  // perftest's write_lat counter; harmless for SEND
    if (!post_one_send(0, size, k, true)) fail("the send queue is full in a ping-pong");
    if (starter && !await(k)) break;
  }
  if (duration_) {
    // Time is up. perftest does not wait for its last messages' completions (ib_write_lat 4.5
    // exits at once): neither do we; the QP goes with the session.
    const uint64_t n = sample ? sample->count() : 0;
    cpu_util_ = sample ? sample->cpu_util() : 0;
    return {{}, make_lat_duration_result(size, n, sample ? sample->nanoseconds() : 0)};
  }
  while (q0.tx_outstanding > 0) {
    reap();
    if (q0.tx_outstanding > 0) wait_completion("for the last messages sent");
  }
  // Like perftest: a sample is the time between two posts (one round trip). The side that
  // starts leaves out its first one: it includes the peer's start-up (perftest measures its
  // CPU clock before its loop, ~0.1 s in the emulated VM), which perftest's own starter,
  // measuring its clock at the same time, does not see.
  std::vector<uint64_t> rtt_ns;
  const size_t first = starter && posted_at.size() > 2 ? 2 : 1;
  for (size_t i = first; i < posted_at.size(); ++i) {
    rtt_ns.push_back(posted_at[i] - posted_at[i - 1]);
  }
  LatOutcome out;
  out.iters = make_lat_result(size, std::move(rtt_ns));
  out.iters.iterations = iters_;
  return out;
}

Session::LatOutcome Session::read_latency(uint64_t size) {
  // As ib_read_lat: one READ at a time; a sample is the time from one post to the next, i.e.
  // a whole round trip (not halved), and the first READ is a sample like the others. -D: the
  // clock starts now and counts the READs completed.
  QpSide& q0 = qps_[0];
  std::vector<uint64_t> posted_at;
  if (!duration_) posted_at.reserve(iters_ + 1);
  q0.reset_tx();
  note_progress();
  std::optional<DurationSample> sample;
  for (uint64_t k = 1; duration_ || k <= iters_; ++k) {
    if (!lat_running(sample, true, tx_done_total_)) break;
    if (!duration_) posted_at.push_back(now_ns());
    if (!post_one_send(0, size, k, true)) fail("the send queue is full in a ping-pong");
    while (q0.tx_outstanding > 0) {
      reap();
      if (q0.tx_outstanding > 0) wait_completion("for a READ's or atomic's completion");
    }
  }
  LatOutcome out;
  if (duration_) {
    out.duration = make_lat_duration_result(size, sample->count(), sample->nanoseconds(), true);
    cpu_util_ = sample->cpu_util();
    return out;
  }
  posted_at.push_back(now_ns());
  std::vector<uint64_t> rtt_ns;
  for (size_t i = 1; i < posted_at.size(); ++i) rtt_ns.push_back(posted_at[i] - posted_at[i - 1]);
  out.iters = make_lat_result(size, std::move(rtt_ns), true);
  out.iters.iterations = iters_;
  return out;
}

void Session::close_exchange() {
  // perftest's close: a handshake, then "done" (5 bytes), not waiting for the peer's. A peer
  // that has already closed the socket (ib_write_lat 4.5 exits after its traffic) or resets it
  // is done as well: its traffic is over.
  // With -R the same without the "done"; a peer gone means its comm connection ended.
  QpRecord r;
  if (rdma_cm_) {
    const PerftestCmRecord out = perftest_cm_record(qps_[0].mine);
    PerftestCmRecord in{};
    if (!wire_->exchange_bytes(out.data(), in.data(), in.size(), "closing record", true)) return;
    if (!parse_perftest_cm_record(in, r)) {
      fail("the peer's closing record is not a connection record");
    }
    return;
  }
  const PerftestRecord out = perftest_record(qps_[0].mine);
  PerftestRecord in{};
  if (!wire_->exchange_bytes(out.data(), in.data(), in.size(), "closing record", true)) return;
  if (!parse_perftest_record(in, r)) fail("the peer's closing record is not a connection record");
  wire_->send_done();
}

void Session::cm_connect(conduit_qp* qp, uint32_t access, uint32_t mtu_bytes, const char* what) {
  conduit_cm_param cp{};
  cp.access = access;
  cp.mtu = CONDUIT_MTU_1024;
  for (uint32_t e = 1; e <= 5; ++e) {
    if ((128u << e) == mtu_bytes) cp.mtu = e;
  }
  cp.flags = CONDUIT_CM_RDMA_CM;
  // Starting the two sides takes a person a while: four -W to meet, as over TCP.
  const int wait_ms = timeout_ms() * 4;
  if (client_) {
    // perftest's server listens for its test QPs only after it has answered the first sync
    // (and not at all before it starts): a reject for "no listener" is retried.
    const uint64_t until = now_ns() + uint64_t(wait_ms) * 1'000'000ull;
    for (;;) {
      const int rc =
          conduit_connect_service(qp, o_.server.c_str(), o_.port, &cp, timeout_ms(), nullptr);
      if (rc == 0) return;
      if (rc != -ECONNREFUSED || now_ns() >= until) {
        fail(std::string("connecting the ") + what + " (rdma_cm, port " + std::to_string(o_.port) +
             "): " + conduit_strerror(rc));
      }
      ::usleep(50'000);
    }
  }
  conduit_cm_request req{};
  int rc = conduit_get_request(ctx_, wait_ms, &req);
  if (rc < 0) {
    fail(std::string("no rdma_cm request for the ") + what + ": " + conduit_strerror(rc));
  }
  if ((req.peer_flags & CONDUIT_CM_RDMA_CM) == 0) {
    conduit_reject(ctx_, &req, CONDUIT_CM_REJ_REFUSED);
    fail(std::string("the request for the ") + what + " is not an rdma_cm one");
  }
  rc = conduit_accept(qp, &req, &cp, timeout_ms(), nullptr);
  if (rc < 0) fail(std::string("accepting the ") + what + ": " + conduit_strerror(rc));
}

void Session::open_cm_exchange() {
  auto w = std::make_unique<CmWire>(ctx_, client_, timeout_ms());
  conduit_qp* qp = w->qp();
  wire_ = std::move(w);
  if (!client_) {
    // One listener for the exchange's connection and, after it, the test QPs'.
    const int rc = conduit_listen(ctx_, o_.port);
    if (rc < 0) fail(std::string("conduit_listen: ") + conduit_strerror(rc));
    std::fprintf(stderr,
                 "conduit-perf: waiting up to %d s for a perftest -R client (rdma_cm, port %u)\n",
                 timeout_ms() * 4 / 1000, static_cast<unsigned>(o_.port));
  }
  cm_connect(qp, 0, 1024, "exchange's connection");
}

void Session::cm_connect_qps(uint32_t mtu_bytes) {
  const PerftestCmRecord zeros{};
  wire_->exchange(zeros, "sync before the rdma_cm connections");
  for (QpSide& q : qps_) {
    cm_connect(
        q.qp,
        CONDUIT_ACCESS_REMOTE_WRITE | CONDUIT_ACCESS_REMOTE_READ | CONDUIT_ACCESS_REMOTE_ATOMIC,
        mtu_bytes, "test QP");
    // The PSN our side sends from, as the CM settled it (for the printed record). The ACK
    // timeout is the policy's transport.timeout (-u applies to manual connections only: RTS ->
    // RTS does not take it, as in verbs).
    conduit_qp_attr a{};
    if (conduit_query_qp(q.qp, &a) == 0) q.mine.psn = a.sq_psn;
  }
  wire_->exchange(zeros, "sync after the rdma_cm connections");
}

int Session::run() {
  sizes_ = o_.sizes;
  iters_ = o_.effective_iterations();
  const bool lat = is_latency(o_.test);
  const uint64_t max_size = *std::max_element(sizes_.begin(), sizes_.end());
  if (rdma_cm_) {
    // -R: the exchange runs on a connection of its own, made first.
    open_resources(max_size);
    open_cm_exchange();
  }

  // 1-4: version, system data, MTU; none with --dont_xchg_versions (perftest skips them all:
  // the peer's version is then unknown, "" here, 0 to perftest).
  std::string peer_version;
  if (!o_.dont_xchg_versions) {
    const PerftestRunShape mine = perftest_run_shape(o_);
    const PerftestVersion theirs = wire_->exchange(perftest_version_message(mine), "version");
    if (!parse_perftest_version(theirs, peer_version)) {
      fail("the peer's version message is not perftest's");
    }
    // A conduit-perf peer says what it runs (perftest does not): refuse what would fail later.
    if (const auto peer = parse_perftest_run_shape(theirs)) {
      const std::string differ = perftest_shape_mismatch(mine, *peer);
      if (!differ.empty()) {
        fail("the peer (conduit-perf --perftest) runs another test: " + differ +
             " (perftest tells the server nothing of the client's test, -b, -s/-a, -n/-D and "
             "-q: give both sides the same)");
      }
    }
  }
  // The duplex plan depends on the peer's version (one barrier per size).
  if (!(duplex_ ? perftest_duplex_plan(o_.test, sizes_.size(), peer_version, plan_)
                : perftest_plan(o_.test, !client_, sizes_.size(), plan_))) {
    fail("--perftest runs the latency tests without -b");
  }
  uint32_t peer_mtu = o_.effective_mtu();  // --dont_xchg_versions: our own, as perftest
  if (!o_.dont_xchg_versions) {
    wire_->exchange(perftest_u32(kPerftestCycleBufferBytes), "cycle buffer");
    wire_->exchange(perftest_u32(kPerftestCacheLineBytes), "cache line size");
    if (!parse_perftest_mtu(wire_->exchange(perftest_mtu_message(o_.effective_mtu()), "MTU"),
                            peer_mtu)) {
      fail("the peer's MTU message is not a verbs MTU");
    }
  }
  const uint32_t mtu = std::min(peer_mtu, o_.effective_mtu());

  // --output: perftest prints none of its header, addresses or rules, only the numbers.
  const bool full = o_.output == PerftestOutput::kFull;
  if (rdma_cm_) {
    // As perftest's -R: the header first (on the server ending "Waiting for client rdma_cm QP
    // to connect"), then the test QPs' connections. The QPs were opened before the exchange.
    values_ = run_values(mtu, peer_version);
    if (full) {
      std::printf("%s", perftest_test_info(o_, values_).c_str());
      std::fflush(stdout);
    }
    cm_connect_qps(mtu);
  } else {
    open_resources(max_size);
    values_ = run_values(mtu, peer_version);
    if (full) std::printf("%s", perftest_test_info(o_, values_).c_str());
  }

  size_t next_rx = 0, next_traffic = 0;
  bool header = false;
  PerftestReport last;  // bandwidth: the last size's (what write/read_bw report)
  for (const PerftestStep step : plan_.steps) {
    if (step == PerftestStep::kAwaitPeer) {
      // The peer WRITEs, READs or runs atomics on our memory, which completes nothing here: its
      // next handshake comes when its run is over, however long -n makes it (or -D's time).
      wire_->set_timeout_ms(await_peer_ms(o_.duration_s, o_.timeout_s));
      continue;  // the step after it waits so, then the timeout is -W again
    }
    switch (step) {
      case PerftestStep::kConnect:
        // perftest sends its QPs' records in order and pairs its QP i with ours.
        for (QpSide& q : qps_) q.peer = handshake(q.mine, "connection record");
        for (QpSide& q : qps_) {
          if (!rdma_cm_) connect(q, mtu);  // -R: rdma_cm connected them
        }
        if (full) {
          std::vector<QpRecord> mine, peers;
          for (const QpSide& q : qps_) {
            mine.push_back(q.mine);
            peers.push_back(q.peer);
          }
          std::printf("%s", perftest_address_text(mine, peers, o_.test).c_str());
        }
        break;
      case PerftestStep::kBarrier:
        handshake(qps_[0].mine, "barrier record");
        break;
      case PerftestStep::kRecords:
        for (const QpSide& q : qps_) handshake(q.mine, "connection record (again)");
        break;
      case PerftestStep::kPostReceives: {
        // Posted before the barrier that lets the peer send (perftest does the same).
        rx_size_ = sizes_.at(next_rx++);
        rx_done_total_ = 0;
        const uint64_t depth = std::min<uint64_t>(
            {duration_ ? UINT64_MAX : iters_, o_.effective_rx_depth(), uint64_t{cq_share()}});
        // --recv_post_list: in lists of N, as perftest's ctx_set_recv_wqes (N within the
        // depth, so that the lists can be posted again before the receives run out).
        recv_list_ = static_cast<uint32_t>(std::clamp<uint64_t>(o_.recv_post_list, 1, depth));
        for (size_t qi = 0; qi < qps_.size(); ++qi) {
          QpSide& q = qps_[qi];
          q.rx_posted = q.rx_done = q.rx_idle = 0;
          while (q.rx_posted < depth) {
            post_receives(
                qi, rx_size_,
                static_cast<uint32_t>(std::min<uint64_t>(recv_list_, depth - q.rx_posted)));
          }
        }
        break;
      }
      case PerftestStep::kTraffic: {
        const uint64_t size = sizes_.at(next_traffic++);
        if (!header && full) {
          std::printf("%s", kRule);
          if (lat) {
            std::printf("%s\n", (duration_ ? perftest_lat_duration_header(o_.cpu_util)
                                           : perftest_lat_header())
                                    .c_str());
          } else {
            print_bw_header(o_.report_gbits, o_.cpu_util, o_.output);
          }
          header = true;
        }
        if (lat) {
          const LatOutcome r = latency(size);
          std::printf(
              "%s\n",
              !full ? perftest_lat_output(duration_ ? r.duration.avg_us : r.iters.avg_us).c_str()
              : duration_ ? perftest_lat_duration_line(r.duration, o_.cpu_util, cpu_util_).c_str()
                          : perftest_lat_line(r.iters).c_str());
          std::fflush(stdout);
          const double cpu = o_.cpu_util ? cpu_util_ : -1;
          write_json(duration_ ? perftest_json_lat_duration(o_, values_, r.duration, cpu)
                               : perftest_json_lat(o_, values_, r.iters, cpu));
        } else if (duplex_) {
          // -b: both sides send; the line comes with the reports (mine plus the peer's).
          last = o_.test == TestKind::kSendBw ? bw_duplex_send(size) : bw_client(size);
          if (perftest_no_peak(o_, !client_)) last.bw_peak = 0;
        } else {
          last = client_ ? bw_client(size) : bw_server(size);
          if (perftest_no_peak(o_, !client_)) last.bw_peak = 0;
          report_bw(last);
          if (!duration_ && last.iterations != total_iters()) {
            fail("received " + std::to_string(last.iterations) + " messages of " +
                 std::to_string(size) + " B, expected " + std::to_string(total_iters()));
          }
        }
        break;
      }
      case PerftestStep::kReport: {
        if (duplex_) {
          // -b: each side's report of its own sending; each prints the sum, as perftest.
          PerftestReport theirs;
          if (!exchange_report(last, theirs)) fail("the peer's report is malformed");
          // -D: each side counts its own sends in its own window; only the size must agree.
          // The line shows this side's count and the sum of both rates, as perftest's.
          if ((!duration_ && theirs.iterations != last.iterations) ||
              theirs.size_bytes != last.size_bytes) {
            fail("the peer's run (" + std::to_string(theirs.iterations) + " x " +
                 std::to_string(theirs.size_bytes) + " B) is not ours (" +
                 std::to_string(last.iterations) + " x " + std::to_string(last.size_bytes) + " B)");
          }
          PerftestReport both = last;
          both.bw_peak += theirs.bw_peak;
          both.bw_avg += theirs.bw_avg;
          both.msg_rate_mpps += theirs.msg_rate_mpps;
          report_bw(both);
          if (perftest_report_both_printed(o_)) {
            // One size only (not -a), whatever --output says, as perftest's.
            std::printf("%s", perftest_report_both_text(last, theirs, o_.report_gbits, kRule,
                                                        o_.cpu_util ? cpu_util_ : -1, o_.output)
                                  .c_str());
            std::fflush(stdout);
            // perftest prints the local and the remote line through print_full_bw_report, each
            // rewriting the file: the remote one stays.
            write_json(perftest_json_bw(o_, values_, theirs, o_.cpu_util ? cpu_util_ : -1));
          }
          break;
        }
        // The client's report (the last size's); the server's is not used.
        PerftestReport mine = last;
        if (!client_) {
          mine.size_bytes = sizes_.back();
          mine.iterations = total_iters();
        }
        PerftestReport theirs;
        const bool ok = exchange_report(mine, theirs);
        if (!client_) {
          if (!ok) fail("the client's report is malformed");
          last = theirs;
          if (full) std::printf("%s", kRule);
          print_bw_header(o_.report_gbits, o_.cpu_util, o_.output);
          report_bw(last);
          // -D: the client's count is its own; only the size is ours to compare.
          if ((!duration_ && last.iterations != total_iters()) ||
              last.size_bytes != sizes_.back()) {
            fail("the peer's run (" + std::to_string(last.iterations) + " x " +
                 std::to_string(last.size_bytes) + " B) is not ours (" +
                 std::to_string(total_iters()) + " x " + std::to_string(sizes_.back()) + " B)");
          }
        }
        break;
      }
      case PerftestStep::kClose:
        close_exchange();
        break;
      case PerftestStep::kAwaitPeer:
        break;  // handled above
    }
    wire_->set_timeout_ms(timeout_ms());
  }
  if (full) std::printf("%s", kRule);
  return 0;
}

}  // namespace

int run_perftest_session(const PerfOptions& options) {
  TcpLineChannel ch;
  std::printf("%s", perftest_parser_remarks(options).c_str());  // whatever --output says
  if (options.is_server() && options.output == PerftestOutput::kFull) {
    // As perftest's server, before it waits (scripts start the client when they see it).
    std::printf("%s", perftest_waiting_banner().c_str());
    std::fflush(stdout);
  }
  if (!options.perftest_rdma_cm && !open_exchange_channel(options, ch)) return 1;
  try {
    Session s(options, options.perftest_rdma_cm ? -1 : ch.native_handle());
    return s.run();
  } catch (const Failure& f) {
    std::fflush(stdout);
    std::fprintf(stderr, "conduit-perf: %s\n", f.message.c_str());
    return 1;
  }
}

}  // namespace conduit::perf
