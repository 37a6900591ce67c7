// libconduit against a real control server (daemon/control) on a temporary
// socket, with a test engine thread on the command ring.
#include <conduit/conduit.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <conduit/conduit.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "control/control_server.h"
#include "proto/control_codec.h"
#include "proto/seqpacket.h"
#include "shm/doorbell.h"
#include "shm/region.h"
#include "test_engine.h"

using namespace conduit;
using namespace std::chrono_literals;

namespace {

std::string temp_socket_path() {
  static int n = 0;
  return "/tmp/conduit-test-" + std::to_string(::getpid()) + "-" + std::to_string(++n) + ".sock";
}

struct Daemon {
  explicit Daemon(control::ControlLimits limits = small_limits(), bool with_engine = true) {
    spdlog::set_level(spdlog::level::warn);
    if (with_engine) {
      REQUIRE(control::EngineChannel::create(256, &channel) == 0);
      engine = std::make_unique<test::TestEngine>(*channel);
    }
    control::ServerConfig cfg;
    cfg.socket_path = path;
    control::ServiceHooks hooks;
    hooks.version = "test";
    hooks.policy_text = [] { return std::string("classes:\n  bulk: {}\n"); };
    hooks.class_exists = [](const std::string& c) { return c == "bulk"; };
    server = std::make_unique<control::ControlServer>(cfg, limits, hooks, channel.get());
    std::string err;
    REQUIRE(server->start(err) == 0);
  }
  ~Daemon() {
    server->stop();
    engine.reset();
  }
  static control::ControlLimits small_limits() {
    control::ControlLimits l;
    l.max_qps = 4;
    l.max_cqs = 4;
    l.max_mrs = 8;
    l.max_mr_bytes = 4 << 20;
    l.max_arena_bytes = 4 << 20;
    l.default_region_bytes = 1 << 20;
    l.sq_depth = 64;
    l.rq_depth = 64;
    l.cq_depth = 128;
    l.huge_pages = shm::HugePages::kNever;
    return l;
  }
  std::string path = temp_socket_path();
  std::unique_ptr<control::EngineChannel> channel;
  std::unique_ptr<test::TestEngine> engine;
  std::unique_ptr<control::ControlServer> server;
};

conduit_context* open_ctx(const std::string& path, uint64_t region_bytes = 0) {
  conduit_context_attr attr{};
  attr.socket_path = path.c_str();
  attr.region_bytes = region_bytes;
  attr.client_name = "unit-test";
  conduit_context* ctx = nullptr;
  int rc = conduit_open(&attr, &ctx);
  INFO(conduit_strerror(rc));
  REQUIRE(rc == 0);
  return ctx;
}

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return pred();
}

}  // namespace

TEST_CASE("no daemon: the error names the socket", "[lib]") {
  conduit_context_attr attr{};
  std::string path = "/tmp/conduit-test-nobody-listens.sock";
  attr.socket_path = path.c_str();
  conduit_context* ctx = nullptr;
  int rc = conduit_open(&attr, &ctx);
  CHECK(rc == -ENOENT);
  CHECK(ctx == nullptr);
  std::string msg = conduit_strerror(rc);
  CHECK(msg.find("conduitd is not running") != std::string::npos);
  CHECK(msg.find(path) != std::string::npos);
  // A different error code gets the generic text, not the stale message.
  CHECK(std::string(conduit_strerror(-EINVAL)).find(path) == std::string::npos);
}

TEST_CASE("socket is created with the configured mode", "[lib][control]") {
  Daemon d;
  struct stat st {};
  REQUIRE(::stat(d.path.c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 0777) == 0660);
  // A second daemon on the same path refuses to steal it.
  control::ControlServer second(control::ServerConfig{d.path, 0660, {}, {}, {}},
                                Daemon::small_limits(), {}, nullptr);
  std::string err;
  CHECK(second.start(err) == -EADDRINUSE);
  CHECK(err.find("already serving") != std::string::npos);
}

TEST_CASE("READ depths travel with a modify, by the verbs rules", "[lib][control]") {
  Daemon d;
  conduit_context* ctx = open_ctx(d.path);
  conduit_cq* cq = nullptr;
  REQUIRE(conduit_create_cq(ctx, 32, &cq) == 0);
  conduit_qp_init_attr qa{};
  qa.send_cq = cq;
  qa.recv_cq = cq;
  conduit_qp* qp = nullptr;
  REQUIRE(conduit_create_qp(ctx, &qa, &qp) == 0);
  conduit_qp_attr a{};
  a.state = CONDUIT_QPS_INIT;
  REQUIRE(conduit_modify_qp(qp, &a, CONDUIT_QP_STATE) == 0);
  a = {};
  a.state = CONDUIT_QPS_RTR;
  a.path_mtu = CONDUIT_MTU_1024;
  a.dest_qpn = 0x42;
  a.dgid[10] = a.dgid[11] = 0xff;
  a.dgid[12] = 198;
  a.dgid[13] = 18;
  a.dgid[15] = 2;
  const uint32_t rtr = CONDUIT_QP_STATE | CONDUIT_QP_PATH_MTU | CONDUIT_QP_DEST_QPN |
                       CONDUIT_QP_RQ_PSN | CONDUIT_QP_DGID;
  // The requester depth belongs to RTR -> RTS, as in verbs; out of range is refused too.
  a.max_rd_atomic = 2;
  int rc = conduit_modify_qp(qp, &a, rtr | CONDUIT_QP_MAX_QP_RD_ATOMIC);
  CHECK(rc == -EINVAL);
  CHECK(std::string(conduit_strerror(rc)).find("max_rd_atomic") != std::string::npos);
  a.max_rd_atomic = 0;
  a.max_dest_rd_atomic = 17;
  rc = conduit_modify_qp(qp, &a, rtr | CONDUIT_QP_MAX_DEST_RD_ATOMIC);
  CHECK(rc == -EINVAL);
  CHECK(std::string(conduit_strerror(rc)).find("max_dest_rd_atomic") != std::string::npos);
  a.max_dest_rd_atomic = 8;
  REQUIRE(conduit_modify_qp(qp, &a, rtr | CONDUIT_QP_MAX_DEST_RD_ATOMIC) == 0);
  a = {};
  a.state = CONDUIT_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 2;
  REQUIRE(conduit_modify_qp(qp, &a,
                            CONDUIT_QP_STATE | CONDUIT_QP_SQ_PSN | CONDUIT_QP_TIMEOUT |
                                CONDUIT_QP_RETRY_CNT | CONDUIT_QP_RNR_RETRY |
                                CONDUIT_QP_MAX_QP_RD_ATOMIC) == 0);
  REQUIRE(conduit_query_qp(qp, &a) == 0);
  CHECK(a.state == CONDUIT_QPS_RTS);
  CHECK(a.max_rd_atomic == 2);
  CHECK(a.max_dest_rd_atomic == 8);
  // The engine got both depths with their transitions.
  CHECK(eventually(
      [&] {
        int seen = 0;
        for (const auto& cmd : d.engine->commands()) {
          if (cmd.op != control::EngineOp::kModifyQp) continue;
          if ((cmd.attr.mask & proto::kAttrMaxDestRdAtomic) && cmd.attr.max_dest_rd_atomic == 8) {
            ++seen;
          }
          if ((cmd.attr.mask & proto::kAttrMaxRdAtomic) && cmd.attr.max_rd_atomic == 2) ++seen;
        }
        return seen == 2;
      },
      1s));
  CHECK(conduit_destroy_qp(qp) == 0);
  CHECK(conduit_destroy_cq(cq) == 0);
  CHECK(conduit_close(ctx) == 0);
}

TEST_CASE("open, register, create, connect, query, destroy", "[lib][control]") {
  Daemon d;
  conduit_context* ctx = open_ctx(d.path);
  conduit_mr* mr = nullptr;
  REQUIRE(conduit_alloc_mr(ctx, 10000, CONDUIT_ACCESS_LOCAL_WRITE | CONDUIT_ACCESS_REMOTE_WRITE,
                           &mr) == 0);
  CHECK(mr->length == 10000);
  CHECK(reinterpret_cast<uintptr_t>(mr->addr) % 4096 == 0);
  CHECK(mr->lkey != mr->rkey);
  conduit_cq* cq = nullptr;
  REQUIRE(conduit_create_cq(ctx, 32, &cq) == 0);
  conduit_qp_init_attr qa{};
  qa.send_cq = cq;
  qa.recv_cq = cq;
  qa.traffic_class = "bulk";
  conduit_qp* qp = nullptr;
  REQUIRE(conduit_create_qp(ctx, &qa, &qp) == 0);
  const uint32_t qpn = conduit_qp_num(qp);
  CHECK(qpn >= 2);
  CHECK(qpn <= 0xFFFFFF);

  conduit_qp_attr a{};
  REQUIRE(conduit_query_qp(qp, &a) == 0);
  CHECK(a.state == CONDUIT_QPS_RESET);

  conduit_qp_connect_attr ca{};
  ca.remote_qpn = 0x123456;
  ca.remote_psn = 0xABCDE;
  ca.local_psn = 0x111;
  ca.remote_gid[10] = 0xff;
  ca.remote_gid[11] = 0xff;
  ca.remote_gid[12] = 198;
  ca.remote_gid[13] = 18;
  ca.remote_gid[15] = 2;
  ca.mtu = CONDUIT_MTU_4096;
  ca.timeout = 14;
  ca.retry_cnt = 7;
  ca.rnr_retry = 7;
  ca.min_rnr_timer = 12;
  ca.access = CONDUIT_ACCESS_REMOTE_WRITE;
  REQUIRE(conduit_connect_qp(qp, &ca) == 0);
  REQUIRE(conduit_query_qp(qp, &a) == 0);
  CHECK(a.state == CONDUIT_QPS_RTS);
  CHECK(a.dest_qpn == 0x123456);
  CHECK(a.rq_psn == 0xABCDE);
  CHECK(a.sq_psn == 0x111);
  CHECK(a.path_mtu == CONDUIT_MTU_4096);
  CHECK(a.dgid[12] == 198);
  CHECK(a.timeout == 14);
  CHECK(a.access == CONDUIT_ACCESS_REMOTE_WRITE);

  // The engine heard about every step, in order.
  control::EngineCommand c;
  REQUIRE(d.engine->wait_for(control::EngineOp::kAddQp, 0, 1s, &c));
  CHECK(c.qpn == qpn);
  CHECK(std::string(c.traffic_class) == "bulk");
  REQUIRE(d.engine->wait_for(control::EngineOp::kAddMr, 0, 1s, &c));
  CHECK(c.lkey == mr->lkey);
  CHECK(c.length == 10000);
  auto modifies = [&] {
    int n = 0;
    for (const auto& cmd : d.engine->commands()) n += cmd.op == control::EngineOp::kModifyQp;
    return n;
  };
  CHECK(eventually([&] { return modifies() == 3; }, 1s));

  // Connecting again from RTS is refused with the verbs rule as the reason.
  int rc = conduit_connect_qp(qp, &ca);
  CHECK(rc == -EINVAL);
  CHECK(std::string(conduit_strerror(rc)).find("RTS -> INIT") != std::string::npos);

  // A CQ in use cannot be destroyed.
  rc = conduit_destroy_cq(cq);
  CHECK(rc == -EBUSY);
  CHECK(conduit_destroy_qp(qp) == 0);
  CHECK(conduit_destroy_cq(cq) == 0);
  CHECK(conduit_free_mr(mr) == 0);
  CHECK(conduit_close(ctx) == 0);
  CHECK(d.engine->wait_for(control::EngineOp::kRemoveClient, 0, 1s));
}

TEST_CASE("quotas give clear errors", "[lib][control]") {
  Daemon d;
  conduit_context* ctx = nullptr;
  conduit_context_attr attr{};
  attr.socket_path = d.path.c_str();
  attr.region_bytes = 64 << 20;  // above max_mr_bytes (4 MiB)
  int rc = conduit_open(&attr, &ctx);
  CHECK(rc == -EDQUOT);
  CHECK(std::string(conduit_strerror(rc)).find("quota exceeded") != std::string::npos);

  ctx = open_ctx(d.path, 2 << 20);
  // The limits the context was laid out with (small_limits()).
  conduit_context_limits lim{};
  REQUIRE(conduit_query_context(ctx, &lim) == 0);
  CHECK(lim.max_qps == 4);
  CHECK(lim.max_cqs == 4);
  CHECK(lim.max_send_wr == 64);
  CHECK(lim.max_recv_wr == 64);
  CHECK(lim.max_cqe == 128);
  CHECK(lim.max_inline_data == CONDUIT_SHM_MAX_INLINE);
  CHECK(lim.region_bytes == 2 << 20);
  CHECK(conduit_query_context(ctx, nullptr) == -EINVAL);
  CHECK(conduit_query_context(nullptr, &lim) == -EINVAL);

  conduit_cq* cq = nullptr;
  // Deeper than the CQ rings: refused, naming the policy key.
  rc = conduit_create_cq(ctx, 129, &cq);
  CHECK(rc == -EINVAL);
  CHECK(std::string(conduit_strerror(rc)).find("clients.quotas.max_cqe") != std::string::npos);
  REQUIRE(conduit_create_cq(ctx, 128, &cq) == 0);
  REQUIRE(conduit_destroy_cq(cq) == 0);
  REQUIRE(conduit_create_cq(ctx, 8, &cq) == 0);
  conduit_qp_init_attr qa{};
  qa.send_cq = cq;
  qa.recv_cq = cq;
  std::vector<conduit_qp*> qps;
  for (int i = 0; i < 4; ++i) {
    conduit_qp* qp = nullptr;
    REQUIRE(conduit_create_qp(ctx, &qa, &qp) == 0);
    qps.push_back(qp);
  }
  conduit_qp* extra = nullptr;
  rc = conduit_create_qp(ctx, &qa, &extra);
  CHECK(rc == -EDQUOT);
  CHECK(std::string(conduit_strerror(rc)).find("4 QPs per client") != std::string::npos);
  // A queue deeper than the rings is refused (checked before the quota frees up).
  CHECK(conduit_destroy_qp(qps.back()) == 0);
  qps.pop_back();
  qa.max_send_wr = 65;
  rc = conduit_create_qp(ctx, &qa, &extra);
  CHECK(rc == -EINVAL);
  CHECK(std::string(conduit_strerror(rc)).find("clients.quotas.max_send_wr") != std::string::npos);
  qa.max_send_wr = 64;
  qa.max_recv_wr = 65;
  CHECK(conduit_create_qp(ctx, &qa, &extra) == -EINVAL);
  qa.max_send_wr = qa.max_recv_wr = 0;

  // Unknown traffic class.
  CHECK(conduit_destroy_qp(qps.back()) == 0);
  qps.pop_back();
  qa.traffic_class = "gold";
  rc = conduit_create_qp(ctx, &qa, &extra);
  CHECK(rc == -ENOENT);
  CHECK(std::string(conduit_strerror(rc)).find("'gold'") != std::string::npos);

  // The region is 2 MiB: a 3 MiB MR does not fit locally.
  conduit_mr* mr = nullptr;
  rc = conduit_alloc_mr(ctx, 3 << 20, 0, &mr);
  CHECK(rc == -ENOMEM);
  // Freed memory is reusable.
  REQUIRE(conduit_alloc_mr(ctx, 2 << 20, 0, &mr) == 0);
  CHECK(conduit_free_mr(mr) == 0);
  REQUIRE(conduit_alloc_mr(ctx, 2 << 20, 0, &mr) == 0);
  CHECK(conduit_free_mr(mr) == 0);
  CHECK(conduit_close(ctx) == 0);
}

TEST_CASE("one region larger than max_region_size is refused; the area may be larger",
          "[lib][control]") {
  control::ControlLimits l = Daemon::small_limits();
  l.max_mr_length = 1 << 20;  // policy clients.quotas.max_region_size
  Daemon d(l);
  conduit_context* ctx = open_ctx(d.path, 4 << 20);  // the whole max_registered_memory
  conduit_mr* mr = nullptr;
  int rc = conduit_alloc_mr(ctx, 2 << 20, 0, &mr);
  CHECK(rc == -EDQUOT);
  const std::string msg = conduit_strerror(rc);
  CHECK(msg.find("max_region_size") != std::string::npos);
  CHECK(msg.find("1 MiB") != std::string::npos);
  // Regions up to the limit, several of them, fill the area.
  conduit_mr* a = nullptr;
  conduit_mr* b = nullptr;
  REQUIRE(conduit_alloc_mr(ctx, 1 << 20, 0, &a) == 0);
  REQUIRE(conduit_alloc_mr(ctx, 1 << 20, 0, &b) == 0);
  CHECK(conduit_free_mr(a) == 0);
  CHECK(conduit_free_mr(b) == 0);
  CHECK(conduit_close(ctx) == 0);
}

// The engine's side of a client's CQ (in the daemon's own mapping of the region):
// publish a completion, and kick the CQ's wakeup pipe when the client sleeps.
struct EngineCqSide {
  EngineCqSide(const control::EngineCommand& add_client, const control::EngineCommand& add_cq)
      : event_fd(add_cq.event_fd) {
    const shm::RegionLayout& layout = *add_client.layout;
    auto desc = layout.ring_desc(layout.cq_ring(add_cq.cq_slot));
    auto* ctrl = reinterpret_cast<conduit_shm_ring_ctrl*>(add_client.region + desc.ctrl_offset);
    auto* slots = reinterpret_cast<conduit_shm_cqe*>(add_client.region + desc.slots_offset);
    ring.emplace(ctrl, slots, desc.capacity, shm::load_prod(ctrl));
    line = reinterpret_cast<conduit_shm_wakeup*>(add_client.region +
                                                 layout.cq_wakeup_offset(add_cq.cq_slot));
  }
  bool publish(const conduit_shm_cqe& e) {
    if (!ring->try_enqueue(e)) return false;
    if (shm::producer_should_kick(line)) shm::WakeFd::kick_pipe(event_fd);
    return true;
  }
  // n completions that found the ring full: counted in the CQ's line, then the kick.
  void lose(uint32_t n) {
    lost += n;
    shm::producer_store_lost(line, lost);
    if (shm::producer_should_kick(line)) shm::WakeFd::kick_pipe(event_fd);
  }
  uint32_t lost = 0;
  int event_fd;
  std::optional<shm::SpscProducer<conduit_shm_cqe>> ring;
  conduit_shm_wakeup* line = nullptr;
};

// conduit_poll_cq's hang-up check is a poll(2) of the control socket alone for POLLRDHUP.
// A test arms a hook that runs once at that moment (what the engine did between the CQ's
// empty dequeue and the check); every other poll(2) of this program goes to the kernel.
namespace {
std::function<void()> g_at_hangup_check;
std::atomic<bool> g_at_hangup_check_armed{false};
}  // namespace

// glibc declares poll's array write-only (access attribute); it is read here as the kernel does.
// (GCC's warning: clang has no such group and refuses an unknown one under -Werror.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
extern "C" int poll(pollfd* fds, nfds_t n, int timeout_ms) {
  if (n == 1 && fds[0].events == POLLRDHUP && g_at_hangup_check_armed.exchange(false)) {
    g_at_hangup_check();
  }
  timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1'000'000L};
  return static_cast<int>(::syscall(SYS_ppoll, fds, n, timeout_ms < 0 ? nullptr : &ts, nullptr, 0));
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

TEST_CASE("post and poll through the rings with the engine's side played by the test",
          "[lib][control]") {
  Daemon d;
  conduit::Context ctx(d.path, 1 << 20, "rings");
  auto mr = ctx.alloc_mr(8192, CONDUIT_ACCESS_LOCAL_WRITE);
  auto cq = ctx.create_cq(16);
  auto qp = ctx.create_qp(cq, cq);

  control::EngineCommand add_client, add_qp, add_cq;
  REQUIRE(d.engine->wait_for(control::EngineOp::kAddClient, 0, 1s, &add_client));
  REQUIRE(d.engine->wait_for(control::EngineOp::kAddQp, 0, 1s, &add_qp));
  REQUIRE(d.engine->wait_for(control::EngineOp::kAddCq, 0, 1s, &add_cq));
  const shm::RegionLayout& layout = *add_client.layout;

  // Engine view of the QP's SQ (in the daemon's own mapping of the region).
  auto desc = layout.ring_desc(layout.sq_ring(add_qp.qp_slot));
  auto* ctrl = reinterpret_cast<conduit_shm_ring_ctrl*>(add_client.region + desc.ctrl_offset);
  auto* slots = reinterpret_cast<conduit_shm_send_wr*>(add_client.region + desc.slots_offset);
  shm::SpscConsumer<conduit_shm_send_wr> sq(ctrl, slots, desc.capacity, shm::load_cons(ctrl));

  // Arm the engine's wakeup line so the client must ring the doorbell.
  auto* engine_line =
      reinterpret_cast<conduit_shm_wakeup*>(add_client.region + layout.engine_wakeup_offset());
  shm::consumer_arm_wakeup(engine_line);

  conduit_sge sge[2] = {mr.sge(100, 50), mr.sge(4096, 10)};
  conduit_send_wr wr{};
  wr.wr_id = 77;
  wr.sg_list = sge;
  wr.num_sge = 2;
  wr.opcode = CONDUIT_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = CONDUIT_SEND_SIGNALED;
  wr.imm_data = 0xC0FFEE;
  wr.remote_addr = 0x1000;
  wr.rkey = 0x4242;
  qp.post_send(wr);

  conduit_shm_send_wr got{};
  REQUIRE(sq.try_dequeue(&got));
  CHECK(got.wr_id == 77);
  CHECK(got.opcode == CONDUIT_SHM_WR_RDMA_WRITE_WITH_IMM);
  CHECK(got.flags == CONDUIT_SHM_SEND_SIGNALED);
  CHECK(got.num_sge == 2);
  CHECK(got.u.sg_list[0].offset == 100);
  CHECK(got.u.sg_list[0].length == 50);
  CHECK(got.u.sg_list[0].lkey == mr.lkey());
  CHECK(got.u.sg_list[1].offset == 4096);
  CHECK(got.imm_data == 0xC0FFEE);
  CHECK(got.rkey == 0x4242);
  // The doorbell was kicked (the line was armed) and the line cleared.
  CHECK(shm::WakeFd::drain(add_client.doorbell_fd) >= 1);
  CHECK(engine_line->needs_wakeup == 0);

  // An SGE outside its MR never reaches the ring.
  conduit_sge bad = mr.sge(8000, 500);
  wr.sg_list = &bad;
  wr.num_sge = 1;
  conduit_send_wr* bad_wr = nullptr;
  int rc = conduit_post_send(qp.get(), &wr, &bad_wr);
  CHECK(rc == -EINVAL);
  CHECK(bad_wr == &wr);
  CHECK(std::string(conduit_strerror(rc)).find("outside its memory region") != std::string::npos);
  CHECK(sq.available() == 0);

  // Atomics: the operands in u.atomic, the 8-byte target as the one SGE.
  conduit_sge target = mr.sge(256, 8);
  conduit_send_wr at{};
  at.wr_id = 78;
  at.sg_list = &target;
  at.num_sge = 1;
  at.opcode = CONDUIT_WR_ATOMIC_CMP_AND_SWP;
  at.send_flags = CONDUIT_SEND_SIGNALED;
  at.remote_addr = 0x2008;
  at.rkey = 0x4343;
  at.compare_add = 5;
  at.swap = 6;
  qp.post_send(at);
  REQUIRE(sq.try_dequeue(&got));
  CHECK(got.opcode == CONDUIT_SHM_WR_ATOMIC_CMP_AND_SWP);
  CHECK(got.num_sge == 1);
  CHECK(got.u.atomic.sge.offset == 256);
  CHECK(got.u.atomic.sge.length == 8);
  CHECK(got.u.atomic.sge.lkey == mr.lkey());
  CHECK(got.u.atomic.compare_add == 5);
  CHECK(got.u.atomic.swap == 6);
  CHECK(got.remote_addr == 0x2008);
  CHECK(got.rkey == 0x4343);
  at.opcode = CONDUIT_WR_ATOMIC_FETCH_AND_ADD;  // has no swap value: not carried
  qp.post_send(at);
  REQUIRE(sq.try_dequeue(&got));
  CHECK(got.u.atomic.swap == 0);
  // Unaligned, not 8 bytes, inline: refused before the ring.
  for (int variant = 0; variant < 3; ++variant) {
    conduit_send_wr b = at;
    conduit_sge t = target;
    b.sg_list = &t;
    if (variant == 0) b.remote_addr = 0x2004;
    if (variant == 1) t.length = 16;
    if (variant == 2) b.send_flags |= CONDUIT_SEND_INLINE;
    rc = conduit_post_send(qp.get(), &b, nullptr);
    CHECK(rc == -EINVAL);
    CHECK(std::string(conduit_strerror(rc)).find("an atomic takes one 8-byte SGE") !=
          std::string::npos);
  }
  CHECK(sq.available() == 0);

  // Engine side of the CQ: publish a completion while the client waits on it.
  EngineCqSide engine_cq(add_client, add_cq);
  std::thread producer([&] {
    std::this_thread::sleep_for(50ms);
    conduit_shm_cqe e{};
    e.wr_id = 77;
    e.status = CONDUIT_SHM_WC_SUCCESS;
    e.opcode = CONDUIT_SHM_WC_RDMA_WRITE;
    e.qp_num = add_qp.qpn;
    REQUIRE(engine_cq.publish(e));
  });
  auto t0 = std::chrono::steady_clock::now();
  CHECK(cq.wait(5000));
  producer.join();
  CHECK(std::chrono::steady_clock::now() - t0 < 4s);
  std::vector<conduit_wc> wc(4);
  REQUIRE(cq.poll(wc) == 1);
  CHECK(wc[0].wr_id == 77);
  CHECK(wc[0].status == CONDUIT_WC_SUCCESS);
  CHECK(wc[0].opcode == CONDUIT_WC_RDMA_WRITE);
  CHECK(wc[0].qp_num == qp.qpn());
  CHECK_FALSE(cq.wait(20));  // nothing more: times out
}

namespace {
conduit_shm_cqe flush_cqe(uint64_t wr_id, uint32_t qpn) {
  conduit_shm_cqe e{};
  e.wr_id = wr_id;
  e.status = CONDUIT_SHM_WC_WR_FLUSH_ERR;
  e.opcode = CONDUIT_SHM_WC_RECV;
  e.qp_num = qpn;
  return e;
}
}  // namespace

TEST_CASE("conduit_poll_cq reports a CQ overrun once, after the completions before it",
          "[lib][control]") {
  // The engine loses completions that cannot wait for room (a rejected WR's, a removed QP's
  // flush completions) when the CQ ring is full, and counts them in the CQ's wakeup line.
  // conduit_poll_cq returned 0 for ever after: the application never learnt that WRs it
  // posted would not complete (verbs: a CQ overrun, IBV_EVENT_CQ_ERR).
  Daemon d;
  conduit::Context ctx(d.path, 1 << 20, "overrun");
  auto cq = ctx.create_cq(16);
  auto qp = ctx.create_qp(cq, cq);
  control::EngineCommand add_client, add_cq;
  REQUIRE(d.engine->wait_for(control::EngineOp::kAddClient, 0, 1s, &add_client));
  REQUIRE(d.engine->wait_for(control::EngineOp::kAddCq, 0, 1s, &add_cq));
  EngineCqSide engine_cq(add_client, add_cq);
  conduit_wc wc[4];
  CHECK(conduit_poll_cq(cq.get(), 4, wc) == 0);

  // Three completions written, then two lost: the three first (in two polls), then the
  // overrun once, then the CQ carries on.
  for (uint64_t i = 1; i <= 3; ++i) REQUIRE(engine_cq.publish(flush_cqe(i, qp.qpn())));
  engine_cq.lose(2);
  CHECK(conduit_poll_cq(cq.get(), 2, wc) == 2);
  CHECK(wc[0].wr_id == 1);
  CHECK(wc[1].wr_id == 2);
  CHECK(conduit_poll_cq(cq.get(), 4, wc) == 1);
  CHECK(wc[0].wr_id == 3);
  int rc = conduit_poll_cq(cq.get(), 4, wc);
  CHECK(rc == -EOVERFLOW);
  const std::string msg = conduit_strerror(rc);
  CHECK(msg.find("lost 2 completion") != std::string::npos);
  CHECK(msg.find("will never complete") != std::string::npos);
  CHECK(conduit_poll_cq(cq.get(), 4, wc) == 0);  // once
  CHECK(conduit_poll_cq(cq.get(), 4, wc) == 0);
  REQUIRE(engine_cq.publish(flush_cqe(4, qp.qpn())));
  CHECK(conduit_poll_cq(cq.get(), 4, wc) == 1);
  CHECK(conduit_poll_cq(cq.get(), 4, wc) == 0);

  // A waiter does not sleep through an overrun: the kick wakes it, and it returns > 0 so
  // that the caller polls and sees it.
  CHECK(conduit_wait_cq(cq.get(), 20) == 0);
  std::thread loser([&] {
    std::this_thread::sleep_for(50ms);
    engine_cq.lose(1);
  });
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(conduit_wait_cq(cq.get(), 5000) == 1);
  loser.join();
  CHECK(std::chrono::steady_clock::now() - t0 < 4s);
  CHECK(conduit_wait_cq(cq.get(), 0) == 1);  // still unreported: no sleep
  conduit_cq* one[1] = {cq.get()};
  CHECK(conduit_wait_cqs(one, 1, 0) == 1);
  rc = conduit_poll_cq(cq.get(), 4, wc);
  CHECK(rc == -EOVERFLOW);
  CHECK(std::string(conduit_strerror(rc)).find("lost 1 completion") != std::string::npos);
  CHECK(conduit_wait_cq(cq.get(), 20) == 0);  // reported: a waiter sleeps again
  CHECK(conduit_wait_cqs(one, 1, 20) == 0);

  // The C++ wrapper throws it as an Error, once.
  engine_cq.lose(1);
  std::vector<conduit_wc> v(4);
  try {
    cq.poll(v);
    FAIL("no overrun reported");
  } catch (const conduit::Error& e) {
    CHECK(e.code() == -EOVERFLOW);
  }
  CHECK(cq.poll(v) == 0);

  // The count is free running: it wraps.
  engine_cq.lost = UINT32_MAX;
  engine_cq.lose(0);
  CHECK(conduit_poll_cq(cq.get(), 4, wc) == -EOVERFLOW);
  engine_cq.lose(2);  // wraps to 1
  rc = conduit_poll_cq(cq.get(), 4, wc);
  CHECK(rc == -EOVERFLOW);
  CHECK(std::string(conduit_strerror(rc)).find("lost 2 completion") != std::string::npos);
  CHECK(conduit_poll_cq(cq.get(), 4, wc) == 0);
}

TEST_CASE("conduit_wait_cqs wakes for a completion on any of several CQs", "[lib][control]") {
  Daemon d;
  conduit::Context ctx(d.path, 1 << 20, "wait-cqs");
  auto cq0 = ctx.create_cq(4);
  auto cq1 = ctx.create_cq(4);
  auto cq2 = ctx.create_cq(4);
  control::EngineCommand add_client;
  REQUIRE(d.engine->wait_for(control::EngineOp::kAddClient, 0, 1s, &add_client));
  // The third CQ's slot, as the engine sees it.
  // kAddCq is not waited on by the control server: the third may still be in flight.
  const auto cqs = d.engine->wait_for_n(control::EngineOp::kAddCq, 3, 2s);
  REQUIRE(cqs.size() == 3);
  EngineCqSide engine_cq(add_client, cqs[2]);

  conduit_cq* all[3] = {cq0.get(), cq1.get(), cq2.get()};
  CHECK(conduit_wait_cqs(all, 3, 20) == 0);  // nothing yet: times out
  std::thread producer([&] {
    std::this_thread::sleep_for(50ms);
    conduit_shm_cqe e{};
    e.wr_id = 9;
    e.status = CONDUIT_SHM_WC_SUCCESS;
    e.opcode = CONDUIT_SHM_WC_RECV;
    REQUIRE(engine_cq.publish(e));
  });
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = conduit_wait_cqs(all, 3, 5000);
  producer.join();
  CHECK(rc == 1);
  // Woken by the kick, not by the 5 s timeout (the armed line made the engine kick).
  CHECK(std::chrono::steady_clock::now() - t0 < 4s);
  std::vector<conduit_wc> wc(4);
  CHECK(cq0.poll(wc) == 0);  // poll() shrinks wc to what arrived
  wc.resize(4);
  CHECK(cq1.poll(wc) == 0);
  wc.resize(4);
  REQUIRE(cq2.poll(wc) == 1);
  CHECK(wc[0].wr_id == 9);

  // Bad arguments are errors with a reason.
  CHECK(conduit_wait_cqs(all, 0, 0) == -EINVAL);
  CHECK(conduit_wait_cqs(all, CONDUIT_MAX_WAIT_CQS + 1, 0) == -EINVAL);
  conduit::Context other(d.path, 1 << 20, "other");
  auto foreign = other.create_cq(4);
  conduit_cq* mixed[2] = {cq0.get(), foreign.get()};
  const int mixed_rc = conduit_wait_cqs(mixed, 2, 0);
  CHECK(mixed_rc == -EINVAL);
  CHECK(std::string(conduit_strerror(mixed_rc)).find("different contexts") != std::string::npos);
}

TEST_CASE("a killed client is released within one second", "[lib][control]") {
  Daemon d;
  std::string exe = (std::filesystem::path(TEST_HELPER_DIR) / "hangup_client").string();
  int out[2];
  REQUIRE(::pipe(out) == 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  char* argv[] = {exe.data(), d.path.data(), nullptr};
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv, environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  // A failed REQUIRE below must not leave the client waiting for its SIGKILL (the test would
  // then hang until meson's timeout).
  struct KillOnExit {
    pid_t pid;
    ~KillOnExit() {
      if (pid > 0 && ::kill(pid, SIGKILL) == 0) ::waitpid(pid, nullptr, 0);
    }
  } guard{pid};
  FILE* f = ::fdopen(out[0], "r");
  unsigned qa = 0, qb = 0;
  REQUIRE(std::fscanf(f, "ready %u %u", &qa, &qb) == 2);
  std::fclose(f);
  REQUIRE(d.server->clients() == 1);
  REQUIRE(d.server->qps() == 2);

  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  guard.pid = 0;
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(eventually([&] { return d.server->clients() == 0 && d.server->qps() == 0; }, 1s));
  // The engine was told: both QPs removed (to ERROR, flushed), then the client.
  CHECK(d.engine->wait_for(control::EngineOp::kRemoveClient, 0, 1s));
  CHECK(std::chrono::steady_clock::now() - t0 < 1s);
  int removed = 0;
  for (const auto& c : d.engine->commands()) {
    if (c.op == control::EngineOp::kRemoveQp && (c.qpn == qa || c.qpn == qb)) ++removed;
  }
  CHECK(removed == 2);

  // Another client is untouched and the daemon keeps serving.
  conduit::Context other(d.path);
  auto cq = other.create_cq(4);
  CHECK(d.server->clients() == 1);
}

TEST_CASE("daemon stopped: a waiting client gets an error, not a hang", "[lib][control]") {
  Daemon d;
  conduit::Context ctx(d.path);
  auto cq = ctx.create_cq(4);
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    d.server->stop();
  });
  auto t0 = std::chrono::steady_clock::now();
  int rc = conduit_wait_cq(cq.get(), -1);  // forever, unless the daemon goes away
  stopper.join();
  CHECK(rc == -ECONNRESET);
  CHECK(std::string(conduit_strerror(rc)).find("conduitd closed the connection") !=
        std::string::npos);
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  // Later control calls fail cleanly too.
  conduit_cq* other = nullptr;
  rc = conduit_create_cq(ctx.get(), 4, &other);
  CHECK(rc < 0);
}

namespace {
// A client of a running daemon, to be stopped: its context, a CQ of 4 and a QP on it, and the
// CQ as the engine sees it (from the kAddClient and kAddCq the engine got), where a test
// plays the engine's side (its flush completions, the completions it loses).
struct StoppingClient {
  static EngineCqSide engine_side_of(Daemon& daemon) {
    control::EngineCommand add_client, add_cq;
    REQUIRE(daemon.engine->wait_for(control::EngineOp::kAddClient, 0, 1s, &add_client));
    REQUIRE(daemon.engine->wait_for(control::EngineOp::kAddCq, 0, 1s, &add_cq));
    return EngineCqSide(add_client, add_cq);
  }
  Daemon d;
  conduit::Context ctx{d.path};
  conduit::CompletionQueue cq = ctx.create_cq(4);
  conduit::QueuePair qp = ctx.create_qp(cq, cq);
  EngineCqSide engine_cq = engine_side_of(d);
};
}  // namespace

TEST_CASE_METHOD(StoppingClient, "daemon stopped: a busy poller gets an error from conduit_poll_cq",
                 "[lib][control]") {
  conduit_wc wc[4];
  CHECK(conduit_poll_cq(cq.get(), 4, wc) == 0);  // alive: nothing to poll, no error
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    d.server->stop();
  });
  const auto t0 = std::chrono::steady_clock::now();
  int rc = 0;
  while (rc == 0 && std::chrono::steady_clock::now() - t0 < 5s) {
    rc = conduit_poll_cq(cq.get(), 4, wc);  // never waits: only polls
  }
  stopper.join();
  CHECK(rc == -ECONNRESET);
  CHECK(std::string(conduit_strerror(rc)).find("conduitd closed the connection") !=
        std::string::npos);
  // Remembered: the next poll and post fail at once.
  CHECK(conduit_poll_cq(cq.get(), 4, wc) == -ECONNRESET);
  conduit_recv_wr rwr{};
  CHECK(conduit_post_recv(qp.get(), &rwr, nullptr) == -ECONNRESET);
}

TEST_CASE_METHOD(StoppingClient,
                 "daemon stopped: a busy poller gets its QPs' flush completions before ECONNRESET",
                 "[lib][control]") {
  // conduitd's stop releases every client: the engine's kRemoveQp writes WR_FLUSH_ERR
  // completions for the QP's outstanding WRs into its CQ ring. conduit_poll_cq returns what
  // the ring holds before it reports the hang-up, so a client that stops at its first error
  // sees them only if the daemon closes the socket after the engine wrote them.
  d.engine->before_ack([&](const control::EngineCommand& c) {
    if (c.op != control::EngineOp::kRemoveQp) return;
    std::this_thread::sleep_for(20ms);  // an engine busy with its other QPs
    engine_cq.publish(flush_cqe(5, c.qpn));
  });
  conduit_wc wc[4];
  CHECK(conduit_poll_cq(cq.get(), 4, wc) == 0);
  std::thread stopper([&] {
    std::this_thread::sleep_for(50ms);
    d.server->stop();
  });
  const auto t0 = std::chrono::steady_clock::now();
  int rc = 0;
  while (rc == 0 && std::chrono::steady_clock::now() - t0 < 5s) {
    rc = conduit_poll_cq(cq.get(), 4, wc);
  }
  stopper.join();
  d.engine->before_ack({});
  REQUIRE(rc == 1);  // not -ECONNRESET first
  CHECK(wc[0].wr_id == 5);
  CHECK(wc[0].status == CONDUIT_WC_WR_FLUSH_ERR);
  CHECK(wc[0].qp_num == qp.qpn());
  rc = 0;  // then the daemon is gone
  while (rc == 0 && std::chrono::steady_clock::now() - t0 < 5s) {
    rc = conduit_poll_cq(cq.get(), 4, wc);
  }
  CHECK(rc == -ECONNRESET);
}

TEST_CASE_METHOD(
    StoppingClient,
    "daemon stopped: a poller gets the flush completions, then the overrun, then ECONNRESET",
    "[lib][control]") {
  // conduitd's stop removes the client's QPs: the flush completions its full CQ cannot take
  // are lost (counted in the CQ's line) before the engine acks and the socket closes. A
  // poller that stops at its first error must see the overrun before ECONNRESET: some WRs
  // will never complete, which ECONNRESET alone does not say of those it already had.
  d.engine->before_ack([&](const control::EngineCommand& c) {
    if (c.op != control::EngineOp::kRemoveQp) return;
    engine_cq.publish(flush_cqe(5, c.qpn));
    engine_cq.lose(3);
  });
  std::thread stopper([&] {
    std::this_thread::sleep_for(50ms);
    d.server->stop();
  });
  conduit_wc wc[4];
  std::vector<int> rcs;  // every non-zero result, in order
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < 5s) {
    const int rc = conduit_poll_cq(cq.get(), 4, wc);
    if (rc == 0) continue;
    rcs.push_back(rc);
    if (rc == 1) CHECK(wc[0].wr_id == 5);
    if (rc == -ECONNRESET) break;
  }
  stopper.join();
  d.engine->before_ack({});
  CHECK(rcs == std::vector<int>{1, -EOVERFLOW, -ECONNRESET});
  CHECK(conduit_poll_cq(cq.get(), 4, wc) == -ECONNRESET);
}

TEST_CASE_METHOD(StoppingClient,
                 "conduit_poll_cq returns a completion that landed just before it saw the hang-up",
                 "[lib][control]") {
  // The daemon writes a QP's flush completions and then closes the socket; a poller's empty
  // dequeue can come before the write and its hang-up check after the close. The completion
  // is in the ring when the hang-up is seen: it comes first, then ECONNRESET.
  // The engine keeps the client's region (acks its kRemoveClient) only once the test is
  // done: the stop closes the socket after its budget, the daemon's mapping stays.
  // (Shared with the engine's thread, which may still be in the hook when the test ends.)
  auto done = std::make_shared<std::atomic<bool>>(false);
  d.engine->before_ack([done](const control::EngineCommand& c) {
    if (c.op != control::EngineOp::kRemoveClient) return;
    const auto t0 = std::chrono::steady_clock::now();
    while (!*done && std::chrono::steady_clock::now() - t0 < 10s) {
      std::this_thread::sleep_for(1ms);
    }
  });
  d.server->stop();
  g_at_hangup_check = [&] { engine_cq.publish(flush_cqe(9, qp.qpn())); };
  g_at_hangup_check_armed = true;
  conduit_wc wc[4];
  int rc = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (rc == 0 && std::chrono::steady_clock::now() - t0 < 5s) {
    rc = conduit_poll_cq(cq.get(), 4, wc);
  }
  CHECK_FALSE(g_at_hangup_check_armed);  // the hook ran
  CHECK(rc == 1);
  CHECK(wc[0].wr_id == 9);
  CHECK(conduit_poll_cq(cq.get(), 4, wc) == -ECONNRESET);
  *done = true;
  g_at_hangup_check_armed = false;
  g_at_hangup_check = nullptr;
  d.engine->before_ack({});
}

TEST_CASE("control plane without an engine still serves and says so", "[lib][control]") {
  Daemon d(Daemon::small_limits(), /*with_engine=*/false);
  conduit::Context ctx(d.path);
  auto cq = ctx.create_cq(4);
  auto qp = ctx.create_qp(cq, cq);
  CHECK(qp.query().state == CONDUIT_QPS_RESET);
  try {
    conduit::Context too_big(d.path, 1ull << 40);
    FAIL("expected a quota error");
  } catch (const conduit::Error& e) {
    CHECK(e.code() == -EDQUOT);
    CHECK(std::string(e.what()).find("conduit_open") != std::string::npos);
  }
}

TEST_CASE("connection manager: clients.allowed_peers refuses IPv4 and IPv6 peers outside it",
          "[lib][control][cm]") {
  control::ControlLimits limits = Daemon::small_limits();
  limits.cm_allowed_peers.push_back({0xC6120000, 0xFFFF0000});  // 198.18.0.0/16
  limits.cm_allowed_peers6.push_back(
      {{0xFD, 0, 0, 0x12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 32});  // fd00:12::/32
  Daemon d(limits);
  conduit_context* ctx = open_ctx(d.path);
  control::EngineCommand add;
  REQUIRE(d.engine->wait_for(control::EngineOp::kAddClient, 0, 2s, &add));
  REQUIRE(conduit_listen(ctx, 5) == 0);
  struct Case {
    proto::CmAddr peer;
    bool allowed;
  };
  const Case cases[] = {
      {proto::cm_addr_v4(0xC6120102), true},                              // 198.18.1.2
      {proto::cm_addr_v4(0xC6130102), false},                             // 198.19.1.2
      {{0xFD, 0, 0, 0x12, 0xAB, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, true},  // fd00:12:ab00::1
      {{0xFD, 0, 0, 0x13, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, false},    // fd00:13::1
      {{0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, false},    // fe80::1
  };
  uint32_t conn = 100;
  for (const Case& c : cases) {
    INFO("case " << (conn - 100));
    control::EngineEvent ev;
    ev.kind = control::EngineEventKind::kCmEvent;
    ev.client_id = add.client_id;
    ev.cm.kind = proto::CmEventKind::kRequest;
    ev.cm.conn = ++conn;
    ev.cm.peer = c.peer;
    ev.cm.service = 5;
    ev.cm.remote_qpn = 0x1234;
    ev.cm.pmtu_bytes = 1024;
    d.engine->inject(ev);
    conduit_cm_request req{};
    if (c.allowed) {
      REQUIRE(conduit_get_request(ctx, 2000, &req) == 0);
      CHECK(req.id == conn);
      CHECK(std::memcmp(req.peer_gid, c.peer.data(), 16) == 0);
    } else {
      // The daemon answers for the listener, which never sees the request.
      control::EngineCommand rej;
      bool seen = false;
      for (int i = 0; i < 500 && !seen; ++i) {
        seen = d.engine->last(control::EngineOp::kCmReject, add.client_id, &rej) &&
               rej.cm.conn == conn;
        if (!seen) std::this_thread::sleep_for(2ms);
      }
      REQUIRE(seen);
      CHECK(rej.cm.reason == proto::kCmPolicy);
      CHECK(conduit_get_request(ctx, 50, &req) == -ETIMEDOUT);
    }
  }
  conduit_close(ctx);
}

TEST_CASE("connection manager: requests, rejects with reasons, established", "[lib][control][cm]") {
  Daemon d;
  conduit_context* ctx = open_ctx(d.path);
  control::EngineCommand add;
  REQUIRE(d.engine->wait_for(control::EngineOp::kAddClient, 0, 2s, &add));
  conduit_cq* cq = nullptr;
  REQUIRE(conduit_create_cq(ctx, 32, &cq) == 0);
  conduit_qp_init_attr qa{};
  qa.send_cq = cq;
  qa.recv_cq = cq;
  conduit_qp* qp = nullptr;
  REQUIRE(conduit_create_qp(ctx, &qa, &qp) == 0);
  const uint32_t qpn = conduit_qp_num(qp);

  REQUIRE(conduit_listen(ctx, 5) == 0);
  control::EngineCommand cmd;
  REQUIRE(d.engine->wait_for(control::EngineOp::kCmListen, add.client_id, 2s, &cmd));
  CHECK(cmd.cm.service == 5);

  // Nothing pending: a wait with a timeout ends with ETIMEDOUT.
  conduit_cm_request req{};
  CHECK(conduit_get_request(ctx, 50, &req) == -ETIMEDOUT);

  control::EngineEvent ev;
  ev.kind = control::EngineEventKind::kCmEvent;
  ev.client_id = add.client_id;
  ev.cm.kind = proto::CmEventKind::kRequest;
  ev.cm.conn = 9;
  ev.cm.peer = proto::cm_addr_v4(0xC6120002);
  ev.cm.service = 5;
  ev.cm.remote_qpn = 0x1234;
  ev.cm.pmtu_bytes = 4096;
  ev.cm.private_len = 3;
  std::memcpy(ev.cm.private_data, "abc", 3);
  d.engine->inject(ev);
  REQUIRE(conduit_get_request(ctx, 2000, &req) == 0);
  CHECK(req.id == 9);
  CHECK(req.service == 5);
  CHECK(req.peer_ipv4 == 0xC6120002);
  CHECK(std::memcmp(req.peer_gid, proto::cm_addr_v4(0xC6120002).data(), 16) == 0);
  CHECK(req.peer_qpn == 0x1234);
  CHECK(req.private_len == 3);
  CHECK(std::memcmp(req.private_data, "abc", 3) == 0);
  CHECK(conduit_reject(ctx, &req, CONDUIT_CM_REJ_NO_LISTENER) == -EINVAL);
  REQUIRE(conduit_reject(ctx, &req, CONDUIT_CM_REJ_POLICY) == 0);
  REQUIRE(d.engine->wait_for(control::EngineOp::kCmReject, add.client_id, 2s, &cmd));
  CHECK(cmd.cm.conn == 9);
  CHECK(cmd.cm.reason == proto::kCmPolicy);
  CHECK(cmd.cm.private_len == 0);
  // With private data for the requester (rdma_reject()'s): it reaches the engine whole.
  ev.cm.conn = 10;
  d.engine->inject(ev);
  REQUIRE(conduit_get_request(ctx, 2000, &req) == 0);
  REQUIRE(req.id == 10);
  uint8_t data[CONDUIT_CM_MAX_PRIVATE + 1] = {};
  for (size_t i = 0; i < sizeof data; ++i) data[i] = static_cast<uint8_t>(i + 1);
  CHECK(conduit_reject_data(ctx, &req, CONDUIT_CM_REJ_REFUSED, data, sizeof data) == -EINVAL);
  CHECK(std::string(conduit_strerror(-EINVAL)).find("exceeds 64") != std::string::npos);
  CHECK(conduit_reject_data(ctx, &req, CONDUIT_CM_REJ_REFUSED, nullptr, 2) == -EINVAL);
  REQUIRE(conduit_reject_data(ctx, &req, CONDUIT_CM_REJ_REFUSED, data, CONDUIT_CM_MAX_PRIVATE) ==
          0);
  for (int i = 0; i < 1000; ++i) {  // the newest reject, once the engine has it
    if (d.engine->last(control::EngineOp::kCmReject, add.client_id, &cmd) && cmd.cm.conn == 10) {
      break;
    }
    std::this_thread::sleep_for(2ms);
  }
  CHECK(cmd.cm.conn == 10);
  CHECK(cmd.cm.reason == proto::kCmRefused);
  REQUIRE(cmd.cm.private_len == CONDUIT_CM_MAX_PRIVATE);
  CHECK(std::memcmp(cmd.cm.private_data, data, CONDUIT_CM_MAX_PRIVATE) == 0);

  // The active side: each reject reason reaches the caller as its errno and text.
  // An IB CM peer's REJ 'stale connection' is a refusal too (rdma_cm: REJECTED), but not the
  // application's: the text says what it is.
  struct Case {
    uint16_t reason;
    int err;
    const char* text;
    uint32_t flags = 0;
    const char* not_text = nullptr;
  };
  for (const Case& c :
       {Case{proto::kCmNoListener, -ECONNREFUSED, "no listener"},
        Case{proto::kCmRefused, -ECONNREFUSED, "refused by the listening", 0, "stale"},
        Case{proto::kCmRefused, -ECONNREFUSED, "as a stale connection",
             proto::kCmFlagStale | proto::kCmFlagRdmaCm, "listening application"},
        Case{proto::kCmQuota, -EDQUOT, "quota"}, Case{proto::kCmPolicy, -EPERM, "policy"},
        Case{proto::kCmTimeout, -ETIMEDOUT, "no answer"}}) {
    ev = {};
    ev.kind = control::EngineEventKind::kCmEvent;
    ev.client_id = add.client_id;
    ev.cm.kind = proto::CmEventKind::kRejected;
    ev.cm.conn = test::TestEngine::kCmConn;
    ev.cm.qpn = qpn;
    ev.cm.reason = c.reason;
    ev.cm.flags = c.flags;
    d.engine->reply_to(control::EngineOp::kCmConnect, ev);
    const int rc = conduit_connect_service(qp, "198.18.0.2", 7, nullptr, 2000, nullptr);
    INFO(conduit_strerror(rc));
    CHECK(rc == c.err);
    CHECK(std::string(conduit_strerror(rc)).find(c.text) != std::string::npos);
    if (c.not_text != nullptr) {
      CHECK(std::string(conduit_strerror(rc)).find(c.not_text) == std::string::npos);
    }
    CHECK(std::string(conduit_strerror(rc)).find("198.18.0.2 service 7") != std::string::npos);
  }
  // A verbs peer's rdma_reject() private data comes back in out.
  {
    ev = {};
    ev.kind = control::EngineEventKind::kCmEvent;
    ev.client_id = add.client_id;
    ev.cm.kind = proto::CmEventKind::kRejected;
    ev.cm.conn = test::TestEngine::kCmConn;
    ev.cm.qpn = qpn;
    ev.cm.peer = proto::cm_addr_v4(0xC6120002);
    ev.cm.reason = proto::kCmRefused;
    ev.cm.flags = proto::kCmFlagRdmaCm;
    ev.cm.private_len = 4;
    std::memcpy(ev.cm.private_data, "\x00\x00\x06\x00", 4);
    d.engine->reply_to(control::EngineOp::kCmConnect, ev);
    conduit_cm_conn rej_out;
    std::memset(&rej_out, 0xAB, sizeof rej_out);
    const int rc = conduit_connect_service(qp, "198.18.0.2", 7, nullptr, 2000, &rej_out);
    CHECK(rc == -ECONNREFUSED);
    CHECK(rej_out.private_len == 4);
    CHECK(rej_out.private_data[2] == 0x06);
    CHECK(rej_out.flags == 0);
    CHECK(rej_out.peer_ipv4 == 0xC6120002);
    CHECK(rej_out.remote_qpn == 0);
    CHECK(rej_out.mtu_bytes == 0);
    // The peer's went on past CONDUIT_CM_MAX_PRIVATE (an rdma_reject() of 100 bytes): the
    // first 64, and the flag that says so.
    ev.cm.flags = proto::kCmFlagRdmaCm | proto::kCmFlagPrivateTruncated;
    ev.cm.private_len = CONDUIT_CM_MAX_PRIVATE;
    std::memset(ev.cm.private_data, 0x11, CONDUIT_CM_MAX_PRIVATE);
    d.engine->reply_to(control::EngineOp::kCmConnect, ev);
    std::memset(&rej_out, 0xAB, sizeof rej_out);
    CHECK(conduit_connect_service(qp, "198.18.0.2", 7, nullptr, 2000, &rej_out) == -ECONNREFUSED);
    CHECK(rej_out.private_len == CONDUIT_CM_MAX_PRIVATE);
    CHECK(rej_out.private_data[63] == 0x11);
    CHECK(rej_out.flags == CONDUIT_CM_PRIVATE_TRUNCATED);
  }
  REQUIRE(d.engine->wait_for(control::EngineOp::kCmConnect, add.client_id, 2s, &cmd));
  CHECK(cmd.qpn == qpn);
  CHECK(cmd.cm.peer == proto::cm_addr_v4(0xC6120002));
  CHECK(cmd.cm.service == 7);
  CHECK(cmd.cm.access == proto::kAccessAll);
  CHECK(cmd.cm.pmtu_bytes == 0);  // no MTU in the offer: the engine takes the policy's

  // Established: the QP table follows what the engine did.
  ev = {};
  ev.kind = control::EngineEventKind::kCmEvent;
  ev.client_id = add.client_id;
  ev.cm.kind = proto::CmEventKind::kEstablished;
  ev.cm.conn = test::TestEngine::kCmConn;
  ev.cm.qpn = qpn;
  ev.cm.peer = proto::cm_addr_v4(0xC6120002);
  ev.cm.remote_qpn = 0x4321;
  ev.cm.pmtu_bytes = 2048;
  ev.cm.flags = proto::kCmFlagSelectiveRepeat;
  ev.cm.sq_psn = 100;
  ev.cm.rq_psn = 200;
  d.engine->reply_to(control::EngineOp::kCmConnect, ev);
  conduit_cm_param param{};
  // CONDUIT_CM_PRIVATE_TRUNCATED is only ever an output; an application that passes a
  // request's peer_flags on as its own (with it set) is not refused for it, and it goes no
  // further.
  param.flags = CONDUIT_CM_SELECTIVE_REPEAT | CONDUIT_CM_PRIVATE_TRUNCATED;
  param.mtu = CONDUIT_MTU_4096;
  conduit_cm_conn conn{};
  REQUIRE(conduit_connect_service(qp, "198.18.0.2", 7, &param, 2000, &conn) == 0);
  REQUIRE(d.engine->last(control::EngineOp::kCmConnect, add.client_id, &cmd));
  CHECK(cmd.cm.flags == proto::kCmFlagSelectiveRepeat);
  CHECK(conn.remote_qpn == 0x4321);
  CHECK(conn.mtu_bytes == 2048);
  CHECK(conn.flags == CONDUIT_CM_SELECTIVE_REPEAT);
  conduit_qp_attr a{};
  REQUIRE(conduit_query_qp(qp, &a) == 0);
  CHECK(a.state == CONDUIT_QPS_RTS);
  CHECK(a.dest_qpn == 0x4321);
  CHECK(a.sq_psn == 100);
  CHECK(a.rq_psn == 200);
  CHECK(a.path_mtu == CONDUIT_MTU_2048);
  CHECK(a.dgid[15] == 2);
  CHECK(conn.peer_ipv4 == 0xC6120002);
  // Connected now: another connect is refused by the daemon before the engine.
  CHECK(conduit_connect_service(qp, "198.18.0.2", 7, nullptr, 100, nullptr) == -EISCONN);
  REQUIRE(conduit_disconnect(qp) == 0);
  REQUIRE(d.engine->wait_for(control::EngineOp::kCmDisconnect, add.client_id, 2s, &cmd));
  CHECK(cmd.qpn == qpn);
  // As rdma_disconnect: the engine moved the QP to ERR, and the daemon's QP table says so.
  REQUIRE(conduit_query_qp(qp, &a) == 0);
  CHECK(a.state == CONDUIT_QPS_ERR);
  CHECK(conduit_disconnect(qp) == -ENOTCONN);
  CHECK(conduit_connect_service(qp, "", 7, nullptr, 100, nullptr) == -EINVAL);

  // IPv6: a request from an IPv6 peer has no IPv4 address, and a connect to an
  // IPv6 address (a zone index is dropped) reaches the engine as that address.
  const proto::CmAddr v6 = {0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xC0, 0, 0x12};
  ev = {};
  ev.kind = control::EngineEventKind::kCmEvent;
  ev.client_id = add.client_id;
  ev.cm.kind = proto::CmEventKind::kRequest;
  ev.cm.conn = 10;
  ev.cm.peer = v6;
  ev.cm.service = 5;
  ev.cm.remote_qpn = 0x1235;
  ev.cm.pmtu_bytes = 1024;
  d.engine->inject(ev);
  REQUIRE(conduit_get_request(ctx, 2000, &req) == 0);
  CHECK(req.id == 10);
  CHECK(req.peer_ipv4 == 0);
  CHECK(std::memcmp(req.peer_gid, v6.data(), 16) == 0);
  conduit_qp* qp6 = nullptr;
  REQUIRE(conduit_create_qp(ctx, &qa, &qp6) == 0);
  ev = {};
  ev.kind = control::EngineEventKind::kCmEvent;
  ev.client_id = add.client_id;
  ev.cm.kind = proto::CmEventKind::kRejected;
  ev.cm.conn = test::TestEngine::kCmConn;
  ev.cm.qpn = conduit_qp_num(qp6);
  ev.cm.reason = proto::kCmNoListener;
  d.engine->reply_to(control::EngineOp::kCmConnect, ev);
  const int rc6 = conduit_connect_service(qp6, "fe80::c0:12%eth0", 7, nullptr, 2000, nullptr);
  CHECK(rc6 == -ECONNREFUSED);
  CHECK(std::string(conduit_strerror(rc6)).find("fe80::c0:12 service 7") != std::string::npos);
  REQUIRE(d.engine->last(control::EngineOp::kCmConnect, add.client_id, &cmd));
  CHECK(cmd.qpn == conduit_qp_num(qp6));
  CHECK(cmd.cm.peer == v6);
  CHECK(conduit_connect_service(qp6, "fe80::zz", 7, nullptr, 100, nullptr) == -EINVAL);
  conduit_close(ctx);
}

namespace {
// The engine's side of a QP's send queue (in the daemon's own mapping of the region).
shm::SpscConsumer<conduit_shm_send_wr> engine_sq(const control::EngineCommand& add_client,
                                                 const control::EngineCommand& add_qp) {
  const shm::RegionLayout& layout = *add_client.layout;
  auto desc = layout.ring_desc(layout.sq_ring(add_qp.qp_slot));
  auto* ctrl = reinterpret_cast<conduit_shm_ring_ctrl*>(add_client.region + desc.ctrl_offset);
  auto* slots = reinterpret_cast<conduit_shm_send_wr*>(add_client.region + desc.slots_offset);
  return shm::SpscConsumer<conduit_shm_send_wr>(ctrl, slots, desc.capacity, shm::load_cons(ctrl));
}
}  // namespace

TEST_CASE("inline sends: the byte count cannot wrap, num_sge is within the limit, bad_wr",
          "[lib][control]") {
  // The inline check summed the SGE lengths in 32 bits: 8 + 0xFFFFFFF8 wrapped to 0, passed
  // the 96-byte limit and copied 4 GiB into the 96-byte entry on the stack. num_sge was not
  // checked at all on the inline path (7 SGEs were taken, a NULL sg_list was read).
  Daemon d;
  conduit::Context ctx(d.path, 1 << 20, "inline");
  auto cq = ctx.create_cq(16);
  auto qp = ctx.create_qp(cq, cq);
  control::EngineCommand add_client, add_qp;
  REQUIRE(d.engine->wait_for(control::EngineOp::kAddClient, 0, 1s, &add_client));
  REQUIRE(d.engine->wait_for(control::EngineOp::kAddQp, 0, 1s, &add_qp));
  auto sq = engine_sq(add_client, add_qp);

  uint8_t payload[CONDUIT_SHM_MAX_INLINE + 8];
  for (size_t i = 0; i < sizeof(payload); ++i) payload[i] = static_cast<uint8_t>(i);
  const auto at = [&](size_t off) { return reinterpret_cast<uint64_t>(payload + off); };
  conduit_sge sges[CONDUIT_MAX_SGE + 1];
  for (int i = 0; i <= CONDUIT_MAX_SGE; ++i) {
    sges[i] = conduit_sge{at(static_cast<size_t>(i)), 1, 0};
  }
  conduit_send_wr wr{};
  wr.wr_id = 1;
  wr.opcode = CONDUIT_WR_SEND;
  wr.send_flags = CONDUIT_SEND_INLINE | CONDUIT_SEND_SIGNALED;
  wr.sg_list = sges;

  // Up to CONDUIT_MAX_SGE SGEs, as for any other send.
  wr.num_sge = CONDUIT_MAX_SGE + 1;
  conduit_send_wr* bad = nullptr;
  int rc = conduit_post_send(qp.get(), &wr, &bad);
  CHECK(rc == -EINVAL);
  CHECK(bad == &wr);
  CHECK(std::string(conduit_strerror(rc)).find("num_sge 7") != std::string::npos);
  CHECK(sq.available() == 0);
  wr.num_sge = CONDUIT_MAX_SGE;
  CHECK(conduit_post_send(qp.get(), &wr, &bad) == 0);
  conduit_shm_send_wr got{};
  REQUIRE(sq.try_dequeue(&got));
  CHECK(got.inline_len == CONDUIT_MAX_SGE);
  CHECK(got.u.inline_data[5] == 5);

  // A chain whose middle WR is bad: the one before it is posted, bad_wr is the bad one.
  conduit_sge first{at(0), CONDUIT_SHM_MAX_INLINE, 0};
  conduit_sge wrapping[2] = {{at(0), 8, 0}, {at(8), 0xFFFFFFF8u, 0}};
  conduit_sge after{at(0), 4, 0};
  conduit_send_wr w3 = wr;
  w3.wr_id = 3;
  w3.sg_list = &after;
  w3.num_sge = 1;
  conduit_send_wr w2 = wr;
  w2.wr_id = 2;
  w2.sg_list = wrapping;
  w2.num_sge = 2;
  w2.next = &w3;
  conduit_send_wr w1 = wr;
  w1.sg_list = &first;
  w1.num_sge = 1;
  w1.next = &w2;
  rc = conduit_post_send(qp.get(), &w1, &bad);
  CHECK(rc == -EINVAL);
  CHECK(bad == &w2);
  CHECK(std::string(conduit_strerror(rc)).find("inline data over 96 bytes") != std::string::npos);
  REQUIRE(sq.available() == 1);
  REQUIRE(sq.try_dequeue(&got));
  CHECK(got.wr_id == 1);
  CHECK(got.inline_len == CONDUIT_SHM_MAX_INLINE);
  CHECK(std::memcmp(got.u.inline_data, payload, CONDUIT_SHM_MAX_INLINE) == 0);

  // One byte over, and a NULL sg_list, are refused too.
  conduit_sge over{at(0), CONDUIT_SHM_MAX_INLINE + 1, 0};
  w2.sg_list = &over;
  w2.num_sge = 1;
  w2.next = nullptr;
  CHECK(conduit_post_send(qp.get(), &w2, &bad) == -EINVAL);
  w2.sg_list = nullptr;
  rc = conduit_post_send(qp.get(), &w2, &bad);
  CHECK(rc == -EINVAL);
  CHECK(std::string(conduit_strerror(rc)).find("sg_list is NULL") != std::string::npos);
  CHECK(sq.available() == 0);
}
TEST_CASE("conduit_strerror describes the call that just failed, not an older failure",
          "[lib][control]") {
  // Argument checks that returned a bare -EINVAL left the thread's message of an earlier
  // -EINVAL in place: conduit_strerror then described that older call.
  Daemon d;
  conduit::Context ctx(d.path, 1 << 20, "strerror");
  auto cq = ctx.create_cq(16);
  auto qp = ctx.create_qp(cq, cq);
  conduit_send_wr wr{};
  wr.wr_id = 5;
  wr.opcode = 99;
  conduit_recv_wr rwr{};
  conduit_wc wc[1];
  const auto stale = [&] {
    const int rc = conduit_post_send(qp.get(), &wr, nullptr);
    REQUIRE(rc == -EINVAL);
    REQUIRE(std::string(conduit_strerror(rc)).find("unknown opcode") != std::string::npos);
  };
  const auto fresh = [](int rc) {
    CHECK(rc == -EINVAL);
    const std::string msg = conduit_strerror(rc);
    INFO(msg);
    CHECK(msg.find("unknown opcode") == std::string::npos);
  };
  stale();
  fresh(conduit_poll_cq(nullptr, 1, wc));
  stale();
  fresh(conduit_poll_cq(cq.get(), 1, nullptr));
  stale();
  fresh(conduit_poll_cq(cq.get(), -1, wc));
  stale();
  fresh(conduit_wait_cq(nullptr, 0));
  stale();
  fresh(conduit_post_send(nullptr, &wr, nullptr));
  stale();
  fresh(conduit_post_recv(nullptr, &rwr, nullptr));
}
TEST_CASE("conduit_alloc_mr: a length the region cannot hold is -ENOMEM, whatever its size",
          "[lib][control]") {
  // The arena allocator rounded the length up to pages in 64 bits: the 4095 largest lengths
  // wrapped to 0 and "fit", and conduitd's refusal of the wrapping registration came back
  // as -EINVAL instead of the documented -ENOMEM.
  Daemon d;
  conduit_context* ctx = open_ctx(d.path, 1 << 20);
  conduit_mr* mr = nullptr;
  for (const size_t len : {SIZE_MAX, SIZE_MAX - 4094, SIZE_MAX - 4095, size_t{(1 << 20) + 1}}) {
    INFO(len);
    const int rc = conduit_alloc_mr(ctx, len, CONDUIT_ACCESS_LOCAL_WRITE, &mr);
    CHECK(rc == -ENOMEM);
    CHECK(std::string(conduit_strerror(rc)).find("no free block") != std::string::npos);
  }
  // The whole arena is still there.
  REQUIRE(conduit_alloc_mr(ctx, 1 << 20, CONDUIT_ACCESS_LOCAL_WRITE, &mr) == 0);
  CHECK(conduit_alloc_mr(ctx, 1, CONDUIT_ACCESS_LOCAL_WRITE, &mr) == -ENOMEM);
  CHECK(conduit_alloc_mr(ctx, 0, CONDUIT_ACCESS_LOCAL_WRITE, &mr) == -EINVAL);
  CHECK(conduit_close(ctx) == 0);
}
namespace {
size_t open_fds() {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n;
}
}  // namespace

TEST_CASE("failing opens and creates leave no descriptor behind", "[lib][control]") {
  Daemon d;
  const size_t base = open_fds();
  // At most as many as before: a leak adds one. (Fewer is fine: a descriptor an earlier
  // test case left to a thread may be closed meanwhile.)
  const auto settled = [](size_t want) {
    eventually([&] { return open_fds() <= want; }, 1s);
    return open_fds();
  };
  conduit_context* ctx = nullptr;
  conduit_context_attr attr{};
  attr.socket_path = "/nonexistent/conduitd.sock";
  CHECK(conduit_open(&attr, &ctx) < 0);
  CHECK(settled(base) <= base);
  attr.socket_path = d.path.c_str();
  attr.region_bytes = 64 << 20;  // over quota: refused by conduitd
  CHECK(conduit_open(&attr, &ctx) == -EDQUOT);
  CHECK(settled(base) <= base);

  ctx = open_ctx(d.path, 1 << 20);
  const size_t opened = open_fds();
  conduit_cq* cqs[4] = {};
  conduit_cq* extra = nullptr;
  CHECK(conduit_create_cq(ctx, 1u << 20, &extra) == -EINVAL);  // deeper than max_cqe
  CHECK(settled(opened) <= opened);
  for (auto& c : cqs) REQUIRE(conduit_create_cq(ctx, 4, &c) == 0);
  const size_t with_cqs = open_fds();
  CHECK(conduit_create_cq(ctx, 4, &extra) == -EDQUOT);
  CHECK(settled(with_cqs) <= with_cqs);
  conduit_qp_init_attr qa{};
  qa.send_cq = cqs[0];
  qa.recv_cq = cqs[1];
  qa.max_send_wr = 1u << 20;  // deeper than the rings
  conduit_qp* qp = nullptr;
  CHECK(conduit_create_qp(ctx, &qa, &qp) == -EINVAL);
  qa.max_send_wr = 0;
  qa.traffic_class = "nosuchclass";
  CHECK(conduit_create_qp(ctx, &qa, &qp) == -ENOENT);
  CHECK(settled(with_cqs) <= with_cqs);
  conduit_mr* mr = nullptr;
  CHECK(conduit_alloc_mr(ctx, 1 << 21, CONDUIT_ACCESS_LOCAL_WRITE, &mr) == -ENOMEM);
  CHECK(conduit_alloc_mr(ctx, 4096, 1u << 20, &mr) == -EINVAL);  // unknown access bit
  CHECK(settled(with_cqs) <= with_cqs);
  CHECK(conduit_close(ctx) == 0);
  CHECK(settled(base) <= base);
}

TEST_CASE("a corrupt CQ producer index is -EPIPE, never a read outside the ring",
          "[lib][control]") {
  Daemon d;
  conduit::Context ctx(d.path, 1 << 20, "cq-index");
  auto cq = ctx.create_cq(16);
  control::EngineCommand add_client, add_cq;
  REQUIRE(d.engine->wait_for(control::EngineOp::kAddClient, 0, 1s, &add_client));
  REQUIRE(d.engine->wait_for(control::EngineOp::kAddCq, 0, 1s, &add_cq));
  EngineCqSide engine_cq(add_client, add_cq);
  conduit_shm_cqe e{};
  e.wr_id = 9;
  REQUIRE(engine_cq.publish(e));
  conduit_wc wc[4];
  REQUIRE(conduit_poll_cq(cq.get(), 4, wc) == 1);
  // One past a full ring ahead of the consumer: more entries than slots.
  const shm::RegionLayout& layout = *add_client.layout;
  auto desc = layout.ring_desc(layout.cq_ring(add_cq.cq_slot));
  auto* ctrl = reinterpret_cast<conduit_shm_ring_ctrl*>(add_client.region + desc.ctrl_offset);
  std::atomic_ref<uint32_t>(ctrl->prod)
      .store(shm::load_cons(ctrl) + desc.capacity + 1, std::memory_order_release);
  int rc = conduit_poll_cq(cq.get(), 4, wc);
  CHECK(rc == -EPIPE);
  CHECK(std::string(conduit_strerror(rc)).find("corrupt") != std::string::npos);
  CHECK(conduit_poll_cq(cq.get(), 4, wc) == -EPIPE);  // sticky
  CHECK(conduit_wait_cq(cq.get(), 0) == -EPIPE);
  CHECK(conduit_wait_cq(cq.get(), -1) == -EPIPE);  // no sleep on a broken ring
  // Behind the consumer is as impossible (the index wraps, the check is modulo 2^32).
  auto cq2 = ctx.create_cq(16);
  const auto added = d.engine->wait_for_n(control::EngineOp::kAddCq, 2, 1s);
  REQUIRE(added.size() == 2);
  const control::EngineCommand& add_cq2 = added[1];
  auto desc2 = layout.ring_desc(layout.cq_ring(add_cq2.cq_slot));
  auto* ctrl2 = reinterpret_cast<conduit_shm_ring_ctrl*>(add_client.region + desc2.ctrl_offset);
  std::atomic_ref<uint32_t>(ctrl2->prod)
      .store(shm::load_cons(ctrl2) - 1, std::memory_order_release);
  conduit_cq* both[2] = {cq2.get(), cq.get()};
  CHECK(conduit_wait_cqs(both, 2, 100) == -EPIPE);
  CHECK(conduit_poll_cq(cq2.get(), 4, wc) == -EPIPE);
}

TEST_CASE("a reply that comes after its call timed out is skipped, not taken for the next call's",
          "[lib][control]") {
  // A control call gives conduitd 10 s (SO_RCVTIMEO) and returns -ETIMEDOUT. conduitd's late
  // reply then sat in the socket: the next call read it, found the wrong sequence number and
  // failed with -EPROTO, leaving its own reply for the call after it, and so on: every later
  // control call of the context failed. Replies older than the call's request are skipped.
  // A fake conduitd plays it without the 10 s: it answers the CQ creation with a stale reply
  // (sequence number one less, carrying a descriptor as a CQ reply does) before the right one.
  const std::string path = temp_socket_path();
  proto::UniqueFd listener(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  REQUIRE(listener.valid());
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path.c_str());
  REQUIRE(::bind(listener.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);
  REQUIRE(::listen(listener.get(), 1) == 0);
  shm::RegionConfig cfg;
  cfg.max_qps = 1;
  cfg.max_cqs = 2;
  cfg.sq_depth = cfg.rq_depth = cfg.cq_depth = 16;
  cfg.arena_bytes = 1 << 16;
  cfg.huge_pages = shm::HugePages::kNever;
  shm::Region region;
  REQUIRE(shm::Region::create(cfg, &region) == 0);
  std::vector<proto::MsgType> served;
  std::thread server([&] {
    proto::UniqueFd s(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!s.valid()) return;
    shm::WakeFd doorbell_w, doorbell_r, cm_w, cm_r, cq_w, cq_r;
    shm::WakeFd::create(shm::WakeFd::Kind::kSocket, &doorbell_w, &doorbell_r);
    shm::WakeFd::create(shm::WakeFd::Kind::kPipe, &cm_w, &cm_r);
    shm::WakeFd::create(shm::WakeFd::Kind::kPipe, &cq_w, &cq_r);
    const auto answer = [&](uint32_t seq, proto::MsgType type, proto::ReplyBody body,
                            std::vector<int> fds) {
      proto::ReplyMessage r;
      r.seq = seq;
      r.type = type;
      r.body = std::move(body);
      proto::send_datagram(s.get(), proto::encode_reply(r), fds);
    };
    for (;;) {
      std::vector<uint8_t> buf;
      std::vector<proto::UniqueFd> fds;
      if (proto::recv_datagram(s.get(), buf, fds) <= 0) return;
      proto::RequestMessage req;
      proto::CodecError err;
      if (!proto::decode_request(buf, req, err)) return;
      served.push_back(req.type());
      switch (req.type()) {
        case proto::MsgType::kAttach: {
          proto::AttachReply a;
          a.client_id = 1;
          a.shm_abi_version = CONDUIT_SHM_ABI_VERSION;
          a.region_bytes = region.layout().region_size;
          answer(req.seq, req.type(), a, {region.fd(), doorbell_r.fd(), cm_r.fd()});
          break;
        }
        case proto::MsgType::kCreateCq:
          answer(req.seq - 1, req.type(), proto::CreateCqReply{0, 16}, {cq_r.fd()});
          answer(req.seq, req.type(), proto::CreateCqReply{1, 16}, {cq_r.fd()});
          break;
        case proto::MsgType::kDestroyCq:
          answer(req.seq, req.type(), proto::DestroyCqReply{}, {});
          break;
        case proto::MsgType::kDetach:
          answer(req.seq, req.type(), proto::DetachReply{}, {});
          return;
        default:
          proto::send_datagram(s.get(), proto::encode_reply(proto::make_error_reply(
                                            req.type(), req.seq, -ENOSYS, "not in this test")));
      }
    }
  });
  conduit_context* ctx = open_ctx(path);
  conduit_cq* cq = nullptr;
  const size_t fds_before = open_fds();
  int rc = conduit_create_cq(ctx, 4, &cq);
  INFO(conduit_strerror(rc));
  CHECK(rc == 0);
  CHECK(open_fds() == fds_before + 1);  // the stale reply's descriptor was closed
  CHECK(conduit_destroy_cq(cq) == 0);   // and the call after it gets its own reply
  CHECK(conduit_close(ctx) == 0);
  server.join();
  CHECK(served == std::vector<proto::MsgType>{proto::MsgType::kAttach, proto::MsgType::kCreateCq,
                                              proto::MsgType::kDestroyCq, proto::MsgType::kDetach});
  ::unlink(path.c_str());
}

TEST_CASE("a QP's CQs must belong to its context", "[lib][control]") {
  // conduit_create_qp sent the CQs' slot numbers without looking at whose they were: a CQ of
  // another context named this context's CQ in the same slot, and the QP completed into a
  // CQ the caller never gave it (verbs refuses a CQ of another context with EINVAL).
  Daemon d;
  conduit_context* a = open_ctx(d.path, 1 << 20);
  conduit_context* b = open_ctx(d.path, 1 << 20);
  conduit_cq* cq_a = nullptr;
  conduit_cq* cq_b = nullptr;
  REQUIRE(conduit_create_cq(a, 4, &cq_a) == 0);
  REQUIRE(conduit_create_cq(b, 4, &cq_b) == 0);
  conduit_qp_init_attr qa{};
  qa.send_cq = cq_a;
  qa.recv_cq = cq_b;
  conduit_qp* qp = nullptr;
  int rc = conduit_create_qp(b, &qa, &qp);
  CHECK(rc == -EINVAL);
  CHECK(std::string(conduit_strerror(rc)).find("another context") != std::string::npos);
  if (rc == 0) CHECK(conduit_destroy_qp(qp) == 0);
  qa.send_cq = cq_b;
  qa.recv_cq = cq_a;
  rc = conduit_create_qp(b, &qa, &qp);
  CHECK(rc == -EINVAL);
  if (rc == 0) CHECK(conduit_destroy_qp(qp) == 0);
  qa.recv_cq = cq_b;
  REQUIRE(conduit_create_qp(b, &qa, &qp) == 0);
  CHECK(conduit_destroy_qp(qp) == 0);
  CHECK(conduit_close(b) == 0);
  CHECK(conduit_close(a) == 0);
}
