// The control server and service, driven with raw protocol messages (what a
// buggy or hostile client could send), plus the QP state rules and peer checks.
#include <fcntl.h>
#include <poll.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <sstream>
#include <thread>

#include "control/control_server.h"
#include "control/engine_channel.h"
#include "control/qp_state_machine.h"
#include "proto/control_codec.h"
#include "proto/seqpacket.h"

using namespace conduit;
using namespace conduit::control;
using proto::QpState;

namespace {

struct Server {
  Server() {
    spdlog::set_level(spdlog::level::off);
    ControlLimits l;
    l.max_qps = 2;
    l.max_cqs = 2;
    l.max_mrs = 2;
    l.max_mr_bytes = 1 << 20;
    l.max_arena_bytes = 1 << 20;
    l.default_region_bytes = 1 << 20;
    l.sq_depth = 16;
    l.rq_depth = 16;
    l.cq_depth = 32;
    l.huge_pages = shm::HugePages::kNever;
    ServiceHooks hooks;
    hooks.version = "test";
    hooks.reload_policy = [](std::string& m) {
      m = "reloaded";
      return 0;
    };
    server =
        std::make_unique<ControlServer>(ServerConfig{path, 0600, {}, {}, {}}, l, hooks, nullptr);
    std::string err;
    REQUIRE(server->start(err) == 0);
  }
  std::string path = "/tmp/conduit-ctl-test-" + std::to_string(::getpid()) + ".sock";
  std::unique_ptr<ControlServer> server;
};

struct RawClient {
  explicit RawClient(const std::string& path) {
    REQUIRE(proto::connect_seqpacket(path, sock) >= 0);
  }
  // Sends bytes, returns the decoded reply (status) or fails the test.
  proto::ReplyMessage exchange(const std::vector<uint8_t>& bytes, std::vector<int> fds = {}) {
    REQUIRE(proto::send_datagram(sock.get(), bytes, fds) == 0);
    std::vector<uint8_t> buf;
    rx_fds.clear();
    REQUIRE(proto::recv_datagram(sock.get(), buf, rx_fds) > 0);
    proto::ReplyMessage r;
    proto::CodecError err;
    REQUIRE(proto::decode_reply(buf, r, err));
    return r;
  }
  proto::ReplyMessage request(proto::Request body, std::vector<int> fds = {}) {
    return exchange(proto::encode_request(proto::RequestMessage{++seq, std::move(body)}), fds);
  }
  bool hung_up() {
    std::vector<uint8_t> buf;
    std::vector<proto::UniqueFd> fds;
    return proto::recv_datagram(sock.get(), buf, fds) == 0;
  }
  proto::UniqueFd sock;
  std::vector<proto::UniqueFd> rx_fds;
  uint32_t seq = 0;
};

proto::AttachRequest attach_req() { return proto::AttachRequest{CONDUIT_SHM_ABI_VERSION, 0, "t"}; }

// A started ControlServer whose engine is at the other end of `ch` (the stop tests' fake
// engines): room for 4 QPs and 2 CQs, 1 MiB regions, on a socket of its own named by `tag`.
ControlLimits engine_server_limits() {
  ControlLimits l;
  l.max_qps = 4;
  l.max_cqs = 2;
  l.default_region_bytes = 1 << 20;
  l.huge_pages = shm::HugePages::kNever;
  return l;
}
ServiceHooks test_hooks() {
  ServiceHooks hooks;
  hooks.version = "test";
  return hooks;
}
struct EngineServer {
  EngineServer(const std::string& tag, EngineChannel* ch)
      : path("/tmp/conduit-ctl-" + tag + "-test-" + std::to_string(::getpid()) + ".sock"),
        server(ServerConfig{path, 0600, {}, {}, {}}, engine_server_limits(), test_hooks(), ch) {
    std::string err;
    REQUIRE(server.start(err) == 0);
  }
  std::string path;
  ControlServer server;
};

}  // namespace

TEST_CASE("attach hands over the region and doorbell; ABI mismatch is explained",
          "[control][server]") {
  Server s;
  RawClient c(s.path);
  auto r = c.request(proto::AttachRequest{CONDUIT_SHM_ABI_VERSION + 7, 0, "old"});
  CHECK(r.status == -EPROTONOSUPPORT);
  CHECK(r.reason.find("ABI mismatch") != std::string::npos);

  r = c.request(attach_req());
  REQUIRE(r.status == 0);
  CHECK(c.rx_fds.size() == 3);
  auto a = std::get<proto::AttachReply>(r.body);
  CHECK(a.max_qps == 2);
  shm::Region region;
  REQUIRE(shm::Region::attach(c.rx_fds[0].release(), &region) == 0);
  CHECK(region.size() == a.region_bytes);
  CHECK(region.layout().max_qps == 2);
  // The doorbell's writing end, the CM events' reading end.
  CHECK(shm::WakeFd::kick_socket(c.rx_fds[1].get()) == 0);
  CHECK(shm::WakeFd::drain(c.rx_fds[2].get()) == 0);
  CHECK(::write(c.rx_fds[2].get(), "x", 1) < 0);  // a pipe's reading end

  r = c.request(attach_req());
  CHECK(r.status == -EALREADY);
}

TEST_CASE("requests before attach, unknown ids and MRs outside the arena are refused",
          "[control][server]") {
  Server s;
  RawClient c(s.path);
  auto r = c.request(proto::CreateCqRequest{4, false});
  CHECK(r.status == -ENOTCONN);
  CHECK(r.reason.find("attach first") != std::string::npos);
  // Operator requests need no attach.
  r = c.request(proto::StatusRequest{});
  REQUIRE(r.status == 0);
  auto st = std::get<proto::StatusReply>(r.body);
  CHECK(st.engine_running == 0);
  CHECK(st.engine_state.find("control plane only") != std::string::npos);

  REQUIRE(c.request(attach_req()).status == 0);
  shm::Region region;
  REQUIRE(shm::Region::attach(c.rx_fds[0].release(), &region) == 0);
  const auto& l = region.layout();

  CHECK(c.request(proto::DestroyQpRequest{12345}).status == -ENOENT);
  CHECK(c.request(proto::DestroyCqRequest{9}).status == -ENOENT);
  CHECK(c.request(proto::DeregMrRequest{9}).status == -ENOENT);
  CHECK(c.request(proto::RegMrRequest{0, 4096, 0}).status == -EFAULT);  // the header page
  CHECK(c.request(proto::RegMrRequest{l.arena_offset + l.arena_size - 10, 20, 0}).status ==
        -EFAULT);
  CHECK(c.request(proto::RegMrRequest{l.arena_offset, l.arena_size, 0}).status == 0);
  // Registered bytes quota: the whole arena is already registered once.
  r = c.request(proto::RegMrRequest{l.arena_offset, 4096, 0});
  CHECK(r.status == -EDQUOT);
  CHECK(r.reason.find("clients.quotas.max_registered_memory") != std::string::npos);

  // No request takes a descriptor from the client.
  r = c.request(proto::CreateCqRequest{4, true}, {STDIN_FILENO});
  CHECK(r.status == -EINVAL);
  CHECK(r.reason.find("unexpected file descriptor") != std::string::npos);
  CHECK(c.request(proto::CreateCqRequest{64, false}).status == -EINVAL);  // deeper than 32
  auto cq = c.request(proto::CreateCqRequest{4, false});
  REQUIRE(cq.status == 0);
  CHECK(c.rx_fds.empty());  // no wakeup asked for, none sent
  const uint32_t cq_id = std::get<proto::CreateCqReply>(cq.body).cq_id;
  CHECK(c.request(proto::CreateQpRequest{cq_id, cq_id + 1, 4, 4, ""}).status == -ENOENT);
  CHECK(c.request(proto::CreateQpRequest{cq_id, cq_id, 17, 4, ""}).status == -EINVAL);
  CHECK(c.request(proto::CreateQpRequest{cq_id, cq_id, 16, 16, ""}).status == 0);

  // A CQ asked with a wakeup gets the reading end of a pipe conduitd made.
  r = c.request(proto::CreateCqRequest{4, true});
  REQUIRE(r.status == 0);
  REQUIRE(c.rx_fds.size() == 1);
  struct stat fifo {};
  REQUIRE(::fstat(c.rx_fds[0].get(), &fifo) == 0);
  CHECK(S_ISFIFO(fifo.st_mode));
  CHECK((::fcntl(c.rx_fds[0].get(), F_GETFL) & O_ACCMODE) == O_RDONLY);
}

TEST_CASE("malformed datagrams get an error reply; garbage closes the connection",
          "[control][server]") {
  Server s;
  {
    RawClient c(s.path);
    auto bytes = proto::encode_request(proto::RequestMessage{5, proto::StatusRequest{}});
    bytes[4] = 9;  // protocol version 9
    auto r = c.exchange(bytes);
    CHECK(r.status == -EPROTONOSUPPORT);
    CHECK(r.seq == 5);
    // The connection stays usable for a client that then speaks version 1.
    CHECK(c.request(proto::StatusRequest{}).status == 0);
  }
  {
    RawClient c(s.path);
    std::vector<uint8_t> junk(40, 0xAB);
    auto r = c.exchange(junk);
    CHECK(r.status == -EPROTO);
    CHECK(c.hung_up());
  }
  {
    RawClient c(s.path);
    std::vector<uint8_t> huge(proto::kMaxMessageBytes + 10, 0);
    auto r = c.exchange(huge);
    CHECK(r.status == -EMSGSIZE);
    CHECK(c.hung_up());
  }
  // The server is still healthy.
  RawClient c(s.path);
  CHECK(c.request(proto::StatusRequest{}).status == 0);
}

TEST_CASE("operator requests: stats, list, policy", "[control][server]") {
  Server s;
  RawClient c(s.path);
  REQUIRE(c.request(attach_req()).status == 0);
  auto cq = std::get<proto::CreateCqReply>(c.request(proto::CreateCqRequest{4, false}).body);
  auto qp = std::get<proto::CreateQpReply>(
      c.request(proto::CreateQpRequest{cq.cq_id, cq.cq_id, 4, 4, ""}).body);

  RawClient admin(s.path);
  auto stats = std::get<proto::StatsReply>(admin.request(proto::StatsRequest{}).body);
  auto value = [&](const std::string& name) -> int64_t {
    for (const auto& k : stats.counters) {
      if (k.name == name) return static_cast<int64_t>(k.value);
    }
    return -1;
  };
  CHECK(value("control.qps") == 1);
  CHECK(value("control.cqs") == 1);
  CHECK(value("control.clients_attached") == 1);
  CHECK(value("control.connections") == 2);

  auto list = std::get<proto::ListQpsReply>(admin.request(proto::ListQpsRequest{0, 10}).body);
  REQUIRE(list.qps.size() == 1);
  CHECK(list.qps[0].qpn == qp.qpn);
  CHECK(list.qps[0].pid == static_cast<uint32_t>(::getpid()));
  CHECK(list.next_qpn == 0);

  CHECK(admin.request(proto::PolicyShowRequest{0}).status == -EOPNOTSUPP);
  auto rel = admin.request(proto::PolicyReloadRequest{});  // we run as the daemon's uid
  REQUIRE(rel.status == 0);
  CHECK(std::get<proto::PolicyReloadReply>(rel.body).message == "reloaded");
}

TEST_CASE("a request queued behind a policy reload sees the reloaded limits", "[control][server]") {
  // The reload hook changes max_qps from 2 to 1 (as main's PolicyState::reload does through
  // update()). The client pipelines an attach right behind the reload; the hook waits until
  // that attach is in the socket, so the server reads both in one burst. The attach is
  // answered after the reload's reply and must carry the new quota.
  spdlog::set_level(spdlog::level::off);
  const std::string path = "/tmp/conduit-ctl-reload-" + std::to_string(::getpid()) + ".sock";
  ControlLimits before;
  before.max_qps = 2;
  before.max_arena_bytes = 1 << 20;
  before.default_region_bytes = 1 << 20;
  before.huge_pages = shm::HugePages::kNever;
  ControlLimits after = before;
  after.max_qps = 1;
  std::unique_ptr<ControlServer> server;
  std::atomic<bool> attach_sent{false};
  ServiceHooks hooks;
  hooks.reload_policy = [&](std::string& m) {
    for (int i = 0; i < 5000 && !attach_sent.load(); ++i) ::usleep(1000);
    server->update(ServerConfig{path, 0600, {}, {}, {}}, after);
    m = "reloaded";
    return 0;
  };
  server =
      std::make_unique<ControlServer>(ServerConfig{path, 0600, {}, {}, {}}, before, hooks, nullptr);
  std::string err;
  REQUIRE(server->start(err) == 0);

  RawClient c(path);
  const auto send = [&](proto::Request body) {
    REQUIRE(proto::send_datagram(
                c.sock.get(),
                proto::encode_request(proto::RequestMessage{++c.seq, std::move(body)}), {}) == 0);
  };
  const auto receive = [&] {
    std::vector<uint8_t> buf;
    c.rx_fds.clear();
    REQUIRE(proto::recv_datagram(c.sock.get(), buf, c.rx_fds) > 0);
    proto::ReplyMessage r;
    proto::CodecError e;
    REQUIRE(proto::decode_reply(buf, r, e));
    return r;
  };
  send(proto::PolicyReloadRequest{});
  send(attach_req());
  attach_sent = true;
  const auto rel = receive();
  REQUIRE(rel.status == 0);
  CHECK(std::get<proto::PolicyReloadReply>(rel.body).message == "reloaded");
  const auto att = receive();
  REQUIRE(att.status == 0);
  CHECK(std::get<proto::AttachReply>(att.body).max_qps == 1);
  server->stop();
}

TEST_CASE("peer credentials are checked against the policy", "[control]") {
  ServerConfig cfg;
  std::string why;
  CHECK(peer_allowed(cfg, 1234, 1234, {}, why));  // no lists: the socket mode decides
  cfg.allowed_gids = {2000};
  CHECK(peer_allowed(cfg, 0, 0, {}, why));            // root
  CHECK(peer_allowed(cfg, ::geteuid(), 5, {}, why));  // the daemon's own user
  CHECK(peer_allowed(cfg, 1234, 2000, {}, why));      // primary group
  CHECK(peer_allowed(cfg, 1234, 1, {7, 2000}, why));  // supplementary group
  CHECK_FALSE(peer_allowed(cfg, 1234, 1, {7}, why));
  CHECK(why.find("uid 1234") != std::string::npos);
  CHECK(why.find("2000") != std::string::npos);
  cfg.allowed_uids = {1234};
  CHECK(peer_allowed(cfg, 1234, 1, {}, why));
}

TEST_CASE("QP transitions follow the verbs rules", "[control][qp]") {
  std::string why;
  proto::QpAttr a;
  a.mask = proto::kAttrState | proto::kAttrAccess;
  a.state = QpState::kInit;
  a.access = proto::kAccessRemoteWrite;
  CHECK(check_qp_transition(QpState::kReset, a, why) == 0);
  CHECK(check_qp_transition(QpState::kRtr, a, why) == -EINVAL);
  CHECK(why.find("RTR -> INIT") != std::string::npos);

  proto::QpAttr rtr;
  rtr.mask = proto::kAttrState | proto::kAttrPathMtu | proto::kAttrDestQpn | proto::kAttrRqPsn;
  rtr.state = QpState::kRtr;
  rtr.path_mtu = 3;
  CHECK(check_qp_transition(QpState::kInit, rtr, why) == -EINVAL);
  CHECK(why.find("needs dgid") != std::string::npos);
  rtr.mask |= proto::kAttrDgid;
  CHECK(check_qp_transition(QpState::kInit, rtr, why) == 0);
  rtr.mask |= proto::kAttrRetryCnt;
  CHECK(check_qp_transition(QpState::kInit, rtr, why) == -EINVAL);
  CHECK(why.find("does not take retry_cnt") != std::string::npos);

  proto::QpAttr err;
  err.mask = proto::kAttrState;
  err.state = QpState::kError;
  for (auto from : {QpState::kReset, QpState::kInit, QpState::kRtr, QpState::kRts}) {
    CHECK(check_qp_transition(from, err, why) == 0);
  }
  proto::QpAttr sqd = err;
  sqd.state = QpState::kSqd;
  CHECK(check_qp_transition(QpState::kRts, sqd, why) == -EINVAL);

  QpAttrs qp;
  apply_qp_transition(qp, a);
  CHECK(qp.state == QpState::kInit);
  CHECK(qp.attr.access == proto::kAccessRemoteWrite);
  proto::QpAttr reset;
  reset.mask = proto::kAttrState;
  reset.state = QpState::kReset;
  apply_qp_transition(qp, reset);
  CHECK(qp.state == QpState::kReset);
  CHECK(qp.attr.access == 0);
}

TEST_CASE("daemon.socket_group takes a group number as well as a name", "[control]") {
  spdlog::set_level(spdlog::level::off);
  const std::string path = "/tmp/conduit-ctl-gid-" + std::to_string(::getpid()) + ".sock";
  // As root any gid can own the socket; otherwise the test's own group.
  const gid_t gid = ::geteuid() == 0 ? 4242 : ::getegid();
  {
    ControlServer server(ServerConfig{path, 0660, std::to_string(gid), {}, {}}, ControlLimits{}, {},
                         nullptr);
    std::string err;
    REQUIRE(server.start(err) == 0);
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK(st.st_gid == gid);
    server.stop();
  }
  ControlServer bad(ServerConfig{path, 0660, "no-such-group-xyz", {}, {}}, ControlLimits{}, {},
                    nullptr);
  std::string err;
  CHECK(bad.start(err) == -ENOENT);
  CHECK(err.find("socket group 'no-such-group-xyz' does not exist") != std::string::npos);
}

TEST_CASE("a connection re-attaches only after the engine released its previous attachment",
          "[control][service]") {
  // Detach hands the QP and CQ slots back through engine acks. Before the refusal, an
  // attach in between reset the slot table and the late acks then freed the new
  // attachment's slots: two QPs were handed the same rings.
  spdlog::set_level(spdlog::level::off);
  std::unique_ptr<EngineChannel> ch;
  REQUIRE(EngineChannel::create(256, &ch) == 0);
  ControlLimits l;
  l.max_qps = 4;
  l.max_cqs = 4;
  l.default_region_bytes = 1 << 20;
  l.huge_pages = shm::HugePages::kNever;
  ControlService svc(l, {}, ch.get());
  const uint32_t id = svc.open_client({});
  std::vector<proto::UniqueFd> no_fds;
  auto req = [&](proto::Request body) {
    proto::RequestMessage m;
    m.seq = 1;
    m.body = std::move(body);
    return svc.handle(id, m, no_fds).reply;
  };
  auto ack_all = [&] {
    EngineCommand cmds[16];
    uint32_t n;
    while ((n = ch->poll_commands(cmds, 16)) > 0) {
      for (uint32_t i = 0; i < n; ++i) {
        EngineEvent e;
        e.kind = EngineEventKind::kAck;
        e.cookie = cmds[i].cookie;
        e.qpn = cmds[i].qpn;
        REQUIRE(ch->post_event(e));
      }
    }
    svc.process_engine_events();
  };
  proto::AttachRequest attach;
  attach.shm_abi_version = CONDUIT_SHM_ABI_VERSION;
  auto qp = [&] {
    auto cq = req(proto::CreateCqRequest{16, false});
    REQUIRE(cq.status == 0);
    const uint32_t cq_id = std::get<proto::CreateCqReply>(cq.body).cq_id;
    auto r = req(proto::CreateQpRequest{cq_id, cq_id, 4, 4, ""});
    REQUIRE(r.status == 0);
    return std::get<proto::CreateQpReply>(r.body).qp_slot;
  };
  REQUIRE(req(attach).status == 0);
  CHECK(qp() == 0);
  REQUIRE(req(proto::DetachRequest{}).status == 0);
  REQUIRE(svc.pending_releases() > 0);  // the engine has not acked the releases
  auto again = req(attach);
  CHECK(again.status == -EBUSY);
  CHECK(again.reason.find("still releasing") != std::string::npos);
  ack_all();
  CHECK(svc.pending_releases() == 0);
  REQUIRE(req(attach).status == 0);
  ack_all();
  const uint32_t first = qp();
  const uint32_t second = qp();
  CHECK(first != second);  // each QP its own rings
}

TEST_CASE("a stop hands the engine the releases its full command ring refused",
          "[control][server]") {
  // conduitd stops the control server (every client closed: kRemoveQp for each QP, then
  // kRemoveCq, kRemoveClient) and then the engine, whose last round takes only what is in
  // its ring. Commands that did not fit stayed in the service's backlog and were lost: the
  // engine never removed those QPs nor told their peers. Here a 2-entry ring and an engine
  // that takes nothing while the server begins to stop: 7 commands do not fit.
  spdlog::set_level(spdlog::level::off);
  std::unique_ptr<EngineChannel> ch;
  REQUIRE(EngineChannel::create(2, &ch) == 0);
  std::atomic<bool> paused{false}, parked{false}, quit{false};
  std::atomic<int> removed_qps{0}, removed_cqs{0}, removed_clients{0};
  std::thread engine([&] {  // takes every command and acks it, as the engine does
    while (!quit) {
      if (paused) {
        parked = true;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        continue;
      }
      parked = false;
      EngineCommand cmds[4];
      const uint32_t n = ch->poll_commands(cmds, 4);
      for (uint32_t i = 0; i < n; ++i) {
        removed_qps += cmds[i].op == EngineOp::kRemoveQp;
        removed_cqs += cmds[i].op == EngineOp::kRemoveCq;
        removed_clients += cmds[i].op == EngineOp::kRemoveClient;
        EngineEvent e;
        e.kind = EngineEventKind::kAck;
        e.cookie = cmds[i].cookie;
        e.qpn = cmds[i].qpn;
        while (!ch->post_event(e) && !quit) std::this_thread::yield();
      }
      if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
  struct Join {
    std::atomic<bool>& quit;
    std::thread& t;
    ~Join() {
      quit = true;
      t.join();
    }
  } join{quit, engine};

  EngineServer s("stop", ch.get());
  const std::string& path = s.path;
  ControlServer& server = s.server;
  RawClient c(path);
  REQUIRE(c.request(attach_req()).status == 0);
  for (int i = 0; i < 2; ++i) {
    auto cq = c.request(proto::CreateCqRequest{16, false});
    REQUIRE(cq.status == 0);
    const uint32_t cq_id = std::get<proto::CreateCqReply>(cq.body).cq_id;
    for (int k = 0; k < 2; ++k) {
      REQUIRE(c.request(proto::CreateQpRequest{cq_id, cq_id, 4, 4, ""}).status == 0);
    }
  }
  paused = true;
  while (!parked) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // The engine takes commands again 100 ms into the stop, as a busy one would.
  std::thread resume([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    paused = false;
  });
  server.stop();
  resume.join();
  // What the ring holds now, the engine's last round takes (finish_stop).
  for (int i = 0; i < 2000 && removed_clients == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(removed_qps == 4);
  CHECK(removed_cqs == 2);
  CHECK(removed_clients == 1);
}

namespace {

// A stand-in for the engine: takes every command and acks it, after `delay` for each
// kRemoveQp (the engine's work on a removal: the flush completions of the QP's outstanding
// WRs written into the client's CQ ring, counted in `flushed_qps`, before the ack) and each
// kRemoveMr (counted in `removed_mrs`). With
// `never_ack`, takes commands and acks none (a stuck engine). With `lost_per_qp`, acks each
// kRemoveQp as the engine does when that many of the QP's flush completions found its CQ
// full, and each kRemoveClient with the client's total.
struct FakeEngine {
  FakeEngine(EngineChannel& ch, std::chrono::milliseconds delay, bool never_ack = false,
             uint32_t lost_per_qp = 0)
      : ch(ch), delay(delay), never_ack(never_ack), lost_per_qp(lost_per_qp), t([this] {
          run();
        }) {}
  ~FakeEngine() {
    quit = true;
    t.join();
  }
  void run() {
    while (!quit) {
      EngineCommand cmds[4];
      const uint32_t n = ch.poll_commands(cmds, 4);
      for (uint32_t i = 0; i < n; ++i) {
        if (cmds[i].op == EngineOp::kRemoveQp) {
          std::this_thread::sleep_for(delay);
          ++flushed_qps;
        }
        if (cmds[i].op == EngineOp::kRemoveMr) {
          std::this_thread::sleep_for(delay);
          ++removed_mrs;
        }
        if (never_ack) continue;
        EngineEvent e;
        e.kind = EngineEventKind::kAck;
        e.cookie = cmds[i].cookie;
        e.qpn = cmds[i].qpn;
        // As the engine: each removal's flush completions its full CQ lost, and the
        // client's total in its release's ack.
        if (cmds[i].op == EngineOp::kRemoveQp) {
          e.cqes_lost = lost_per_qp;
          lost_total += lost_per_qp;
        }
        if (cmds[i].op == EngineOp::kRemoveClient) e.cqes_lost = lost_total;
        while (!ch.post_event(e) && !quit) std::this_thread::yield();
      }
      if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  EngineChannel& ch;
  std::chrono::milliseconds delay;
  bool never_ack;
  uint32_t lost_per_qp;
  uint32_t lost_total = 0;  // engine thread only
  std::atomic<bool> quit{false};
  std::atomic<int> flushed_qps{0};
  std::atomic<int> removed_mrs{0};
  std::thread t;
};

// True once the peer closed `fd` (waits up to timeout_ms).
bool wait_hang_up(int fd, int timeout_ms) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, timeout_ms) > 0 && (p.revents & (POLLRDHUP | POLLHUP)) != 0;
}

}  // namespace

TEST_CASE("a stop closes a client's socket only once the engine has released its QPs",
          "[control][server]") {
  // SIGTERM: the engine's kRemoveQp writes flush completions for the client's outstanding
  // WRs into its CQ ring. conduit_poll_cq returns what the ring holds before it reports the
  // hang-up (ECONNRESET), so those completions reach a client that stops at its first error
  // only if they are in the ring before the socket closes. The socket was closed as the
  // releases were handed to the engine, before it had taken any.
  spdlog::set_level(spdlog::level::off);
  std::unique_ptr<EngineChannel> ch;
  REQUIRE(EngineChannel::create(64, &ch) == 0);
  FakeEngine engine(*ch, std::chrono::milliseconds(20));
  EngineServer s("stop2", ch.get());
  const std::string& path = s.path;
  ControlServer& server = s.server;
  RawClient c(path);
  REQUIRE(c.request(attach_req()).status == 0);
  auto cq = c.request(proto::CreateCqRequest{16, false});
  REQUIRE(cq.status == 0);
  const uint32_t cq_id = std::get<proto::CreateCqReply>(cq.body).cq_id;
  for (int k = 0; k < 4; ++k) {
    REQUIRE(c.request(proto::CreateQpRequest{cq_id, cq_id, 4, 4, ""}).status == 0);
  }
  std::thread stopper([&] { server.stop(); });
  const bool closed = wait_hang_up(c.sock.get(), 5000);
  const int flushed_at_close = engine.flushed_qps.load();
  stopper.join();
  CHECK(closed);
  CHECK(flushed_at_close == 4);
  CHECK(c.hung_up());
}

TEST_CASE("a stop warns once per client of the flush completions its full CQs lost",
          "[control][server]") {
  // The engine acks a client's release with the flush completions its QPs' removals could
  // not write into a full CQ. They were only counted (engine.cqe_dropped): nothing said
  // which client lost completions at the stop, nor how many.
  std::ostringstream log;
  auto logger =
      std::make_shared<spdlog::logger>("t", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  logger->set_pattern("%l %v");
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::info);
  struct Restore {
    std::shared_ptr<spdlog::logger> l;
    ~Restore() {
      spdlog::set_default_logger(l);
      spdlog::set_level(spdlog::level::off);
    }
  } restore{previous};
  std::unique_ptr<EngineChannel> ch;
  REQUIRE(EngineChannel::create(64, &ch) == 0);
  FakeEngine engine(*ch, std::chrono::milliseconds(0), false, /*lost_per_qp=*/3);
  EngineServer s("stop4", ch.get());
  const std::string& path = s.path;
  ControlServer& server = s.server;
  RawClient c(path);
  REQUIRE(c.request(proto::AttachRequest{CONDUIT_SHM_ABI_VERSION, 0, "lossy"}).status == 0);
  auto cq = c.request(proto::CreateCqRequest{16, false});
  REQUIRE(cq.status == 0);
  const uint32_t cq_id = std::get<proto::CreateCqReply>(cq.body).cq_id;
  for (int k = 0; k < 2; ++k) {
    REQUIRE(c.request(proto::CreateQpRequest{cq_id, cq_id, 4, 4, ""}).status == 0);
  }
  server.stop();
  CHECK(c.hung_up());
  const std::string text = log.str();
  INFO(text);
  const auto at = text.find("6 flush completions");
  REQUIRE(at != std::string::npos);
  CHECK(text.find("6 flush completions", at + 1) == std::string::npos);  // once
  const std::string line =
      text.substr(text.rfind('\n', at) + 1, text.find('\n', at) - text.rfind('\n', at) - 1);
  CHECK(line.rfind("warning ", 0) == 0);
  CHECK(line.find("'lossy'") != std::string::npos);
  CHECK(line.find("daemon's stop") != std::string::npos);
}

TEST_CASE("a stop waits for an engine that never acks the releases only so long",
          "[control][server]") {
  spdlog::set_level(spdlog::level::off);
  std::unique_ptr<EngineChannel> ch;
  REQUIRE(EngineChannel::create(64, &ch) == 0);
  FakeEngine engine(*ch, std::chrono::milliseconds(0), /*never_ack=*/true);
  EngineServer s("stop3", ch.get());
  const std::string& path = s.path;
  ControlServer& server = s.server;
  RawClient c(path);
  REQUIRE(c.request(attach_req()).status == 0);
  auto cq = c.request(proto::CreateCqRequest{16, false});
  REQUIRE(cq.status == 0);
  const uint32_t cq_id = std::get<proto::CreateCqReply>(cq.body).cq_id;
  // The engine takes the creations without answering: the service does not wait for them.
  REQUIRE(c.request(proto::CreateQpRequest{cq_id, cq_id, 4, 4, ""}).status == 0);
  const auto t0 = std::chrono::steady_clock::now();
  server.stop();
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took < std::chrono::milliseconds(ControlService::kStopBacklogMs + 1000));
  CHECK(c.hung_up());
}

TEST_CASE("a deregistration is answered only once the engine has dropped the MR",
          "[control][server]") {
  // libconduit hands a freed MR's memory out again as soon as conduit_free_mr returns. The
  // reply went out as the removal was handed to the engine, so a peer's WRITE to the old
  // rkey could still land in that memory (then another MR of the client) for as long as
  // the engine took to get to the command. ibv_dereg_mr returns once the device dropped it.
  spdlog::set_level(spdlog::level::off);
  std::unique_ptr<EngineChannel> ch;
  REQUIRE(EngineChannel::create(64, &ch) == 0);
  FakeEngine engine(*ch, std::chrono::milliseconds(30));
  EngineServer s("dereg", ch.get());
  RawClient c(s.path);
  REQUIRE(c.request(attach_req()).status == 0);
  shm::Region region;
  REQUIRE(shm::Region::attach(c.rx_fds[0].release(), &region) == 0);
  const auto& l = region.layout();
  for (int i = 0; i < 2; ++i) {
    auto r = c.request(proto::RegMrRequest{l.arena_offset, 4096, 0});
    REQUIRE(r.status == 0);
    const uint32_t lkey = std::get<proto::RegMrReply>(r.body).lkey;
    REQUIRE(c.request(proto::DeregMrRequest{lkey}).status == 0);
    CHECK(engine.removed_mrs.load() == i + 1);  // the engine took it before the reply
  }
  CHECK(c.request(proto::DeregMrRequest{12345}).status == -ENOENT);
}

TEST_CASE("a deregistration the engine does not confirm says so", "[control][server]") {
  spdlog::set_level(spdlog::level::off);
  std::unique_ptr<EngineChannel> ch;
  REQUIRE(EngineChannel::create(64, &ch) == 0);
  FakeEngine engine(*ch, std::chrono::milliseconds(0), /*never_ack=*/true);
  EngineServer s("dereg2", ch.get());
  RawClient c(s.path);
  REQUIRE(c.request(attach_req()).status == 0);
  shm::Region region;
  REQUIRE(shm::Region::attach(c.rx_fds[0].release(), &region) == 0);
  const auto& l = region.layout();
  auto r = c.request(proto::RegMrRequest{l.arena_offset, 4096, 0});
  REQUIRE(r.status == 0);
  const uint32_t lkey = std::get<proto::RegMrReply>(r.body).lkey;
  r = c.request(proto::DeregMrRequest{lkey});
  CHECK(r.status == -ETIMEDOUT);
  CHECK(r.reason.find("did not confirm") != std::string::npos);
  // The MR is gone from the service all the same (the engine drops it when it gets there).
  CHECK(c.request(proto::DeregMrRequest{lkey}).status == -ENOENT);
}
