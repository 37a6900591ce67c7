// ConnectionManager: two managers (hosts A and B) wired back to back through a
// test network that can drop, duplicate or hold messages. Covers set-up,
// negotiation, rejects with reasons, every retry/timeout path, duplicates,
// tear-down, owners going away, and hostile REQ floods.
#include "cm/connection_manager.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <random>
#include <vector>

using namespace conduit::cm;

namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr CmPeer kA{cm_addr_v4(0xC6120001), 4792};  // 198.18.0.1
constexpr CmPeer kB{cm_addr_v4(0xC6120002), 4792};  // 198.18.0.2
constexpr uint64_t kOwnerA = 11, kOwnerB = 22;

QpParams params(uint32_t qpn, uint16_t pmtu = 4096, uint16_t caps = kCapSelectiveRepeat) {
  QpParams q;
  q.qpn = qpn;
  q.psn = qpn * 7 & 0xFFFFFF;
  q.pmtu_bytes = pmtu;
  q.caps = caps;
  return q;
}

struct Net {
  CmConfig cfg;
  ConnectionManager a{cfg}, b{cfg};
  uint64_t now = 1'000 * kMs;
  std::vector<CmAction> events_a, events_b;  // everything but kSend
  // Return false to drop a message; `to_b` tells the direction.
  std::function<bool(bool to_b, const CmAction&)> filter = [](bool, const CmAction&) {
    return true;
  };
  uint64_t delivered = 0;

  explicit Net(CmConfig c = {}) : cfg(c), a(cfg), b(cfg) {}

  // Delivers messages until both sides are quiet.
  void run() {
    for (int guard = 0; guard < 1000; ++guard) {
      bool moved = false;
      moved |= pump(a, b, kA, events_a, true);
      moved |= pump(b, a, kB, events_b, false);
      if (!moved) return;
    }
    FAIL("messages kept flowing");
  }
  bool pump(ConnectionManager& from, ConnectionManager& to, CmPeer from_addr,
            std::vector<CmAction>& events, bool to_b) {
    CmAction act[8];
    bool moved = false;
    size_t n;
    while ((n = from.poll_actions(act, 8)) > 0) {
      for (size_t i = 0; i < n; ++i) {
        moved = true;
        if (act[i].kind != CmAction::Kind::kSend) {
          events.push_back(act[i]);
          continue;
        }
        if (!filter(to_b, act[i])) continue;
        ++delivered;
        to.on_message(now, from_addr, act[i].bytes.data(), act[i].len);
      }
    }
    return moved;
  }
  // Advances time to the next deadline of either side and runs timers.
  void tick() {
    now = std::max(now, std::min(a.next_deadline_ns(), b.next_deadline_ns()));
    a.on_timer(now);
    b.on_timer(now);
    run();
  }
  // B answers every new kRequest with accept(params(200)).
  size_t answered = 0;
  void accept_all() {
    for (; answered < events_b.size(); ++answered) {
      const CmAction& e = events_b[answered];
      if (e.kind == CmAction::Kind::kRequest) {
        REQUIRE(b.accept(now, e.owner, e.conn, params(200, 1024, 0)) == 0);
      }
    }
    run();
  }
  static size_t count(const std::vector<CmAction>& v, CmAction::Kind k) {
    size_t n = 0;
    for (const auto& e : v) n += e.kind == k ? 1 : 0;
    return n;
  }
  static const CmAction* find(const std::vector<CmAction>& v, CmAction::Kind k) {
    for (const auto& e : v) {
      if (e.kind == k) return &e;
    }
    return nullptr;
  }
};

}  // namespace

TEST_CASE("connect, accept, establish on both sides with negotiated PMTU and caps") {
  Net n;
  REQUIRE(n.b.listen(42, kOwnerB) == 0);
  const uint8_t hello[] = {'h', 'i'};
  const int64_t id = n.a.connect(n.now, kOwnerA, kB, 42, params(100), hello, sizeof(hello));
  REQUIRE(id > 0);
  n.run();
  const CmAction* req = Net::find(n.events_b, CmAction::Kind::kRequest);
  REQUIRE(req != nullptr);
  CHECK(req->owner == kOwnerB);
  CHECK(req->service == 42);
  CHECK(req->remote.qpn == 100);
  CHECK(req->peer == kA);
  CHECK(req->private_len == 2);
  CHECK(req->private_data[1] == 'i');
  n.accept_all();
  const CmAction* ea = Net::find(n.events_a, CmAction::Kind::kEstablished);
  const CmAction* eb = Net::find(n.events_b, CmAction::Kind::kEstablished);
  REQUIRE(ea != nullptr);
  REQUIRE(eb != nullptr);
  CHECK(ea->conn == static_cast<uint32_t>(id));
  CHECK(ea->owner == kOwnerA);
  CHECK(ea->remote.qpn == 200);
  CHECK(ea->remote.psn == params(200).psn);
  CHECK(eb->remote.qpn == 100);
  CHECK(eb->local.qpn == 200);
  CHECK(ea->pmtu_bytes == 1024);  // min(4096, 1024)
  CHECK(eb->pmtu_bytes == 1024);
  CHECK(ea->caps == 0);  // B offers no selective repeat
  CHECK(eb->caps == 0);
  CHECK(n.a.next_deadline_ns() == UINT64_MAX);
  CHECK(n.b.next_deadline_ns() == UINT64_MAX);
  CHECK(n.a.counters().established == 1);
  CHECK(n.b.counters().established == 1);
}

TEST_CASE("a REQ for a service nobody listens on is rejected with that reason") {
  Net n;
  REQUIRE(n.a.connect(n.now, kOwnerA, kB, 7, params(100)) > 0);
  n.run();
  const CmAction* r = Net::find(n.events_a, CmAction::Kind::kRejected);
  REQUIRE(r != nullptr);
  CHECK(r->reason == RejectReason::kNoListener);
  CHECK(n.a.connection_count() == 0);
  CHECK(n.b.connection_count() == 0);
}

TEST_CASE("the listening owner can refuse, with a reason the requester sees") {
  Net n;
  REQUIRE(n.b.listen(42, kOwnerB) == 0);
  REQUIRE(n.a.connect(n.now, kOwnerA, kB, 42, params(100)) > 0);
  n.run();
  const CmAction* req = Net::find(n.events_b, CmAction::Kind::kRequest);
  REQUIRE(req != nullptr);
  CHECK(n.b.reject(n.now, kOwnerA, req->conn, RejectReason::kPolicy) == -ENOENT);  // not A's
  REQUIRE(n.b.reject(n.now, kOwnerB, req->conn, RejectReason::kPolicy) == 0);
  n.run();
  const CmAction* r = Net::find(n.events_a, CmAction::Kind::kRejected);
  REQUIRE(r != nullptr);
  CHECK(r->reason == RejectReason::kPolicy);
  CHECK(r->private_len == 0);
  CHECK(n.b.accept(n.now, kOwnerB, req->conn, params(200)) == -ENOENT);  // already answered
}

TEST_CASE("a refusal carries the listener's private data to the requester, as rdma_reject()") {
  Net n;
  REQUIRE(n.b.listen(42, kOwnerB) == 0);
  REQUIRE(n.a.connect(n.now, kOwnerA, kB, 42, params(100)) > 0);
  n.run();
  const CmAction* req = Net::find(n.events_b, CmAction::Kind::kRequest);
  REQUIRE(req != nullptr);
  uint8_t data[kMaxPrivateBytes + 1];
  for (size_t i = 0; i < sizeof data; ++i) data[i] = static_cast<uint8_t>(0xA0 + i);
  CHECK(n.b.reject(n.now, kOwnerB, req->conn, RejectReason::kRefused, data, sizeof data) ==
        -EINVAL);
  CHECK(n.b.reject(n.now, kOwnerB, req->conn, RejectReason::kRefused, nullptr, 3) == -EINVAL);
  REQUIRE(n.b.reject(n.now, kOwnerB, req->conn, RejectReason::kRefused, data, 5) == 0);
  n.run();
  const CmAction* r = Net::find(n.events_a, CmAction::Kind::kRejected);
  REQUIRE(r != nullptr);
  CHECK(r->reason == RejectReason::kRefused);
  REQUIRE(r->private_len == 5);
  CHECK(std::equal(data, data + 5, r->private_data.begin()));
  CHECK(n.a.connection_count() == 0);
}

TEST_CASE("listen: one owner per service, bounded, unlisten only by the owner") {
  CmConfig c;
  c.max_listeners = 2;
  ConnectionManager m(c);
  CHECK(m.listen(1, kOwnerA) == 0);
  CHECK(m.listen(1, kOwnerA) == 0);  // idempotent
  CHECK(m.listen(1, kOwnerB) == -EADDRINUSE);
  CHECK(m.listen(2, kOwnerB) == 0);
  CHECK(m.listen(3, kOwnerB) == -ENOSPC);
  CHECK(m.unlisten(2, kOwnerA) == -ENOENT);
  CHECK(m.unlisten(2, kOwnerB) == 0);
  CHECK(m.listen(3, kOwnerB) == 0);
}

TEST_CASE("connect refuses bad parameters") {
  ConnectionManager m(CmConfig{});
  CHECK(m.connect(0, 1, kB, 1, params(0)) == -EINVAL);
  CHECK(m.connect(0, 1, kB, 1, params(1u << 24)) == -EINVAL);
  CHECK(m.connect(0, 1, kB, 1, params(100, 1000)) == -EINVAL);
  CHECK(m.connect(0, 1, kB, 1, params(100, 1024, 0x80)) == -EINVAL);
  uint8_t big[kMaxPrivateBytes + 1] = {};
  CHECK(m.connect(0, 1, kB, 1, params(100), big, sizeof(big)) == -EINVAL);
  CHECK(m.connect(0, 1, kB, 1, params(100), nullptr, 3) == -EINVAL);
  CHECK(m.connection_count() == 0);
}

TEST_CASE("lost REQs are resent; an unreachable peer fails within the retry budget") {
  CmConfig c;
  c.retry_timeout_ns = 100 * kMs;
  c.max_retries = 3;
  Net n(c);
  n.filter = [](bool, const CmAction&) { return false; };  // B is gone
  const uint64_t t0 = n.now;
  REQUIRE(n.a.connect(n.now, kOwnerA, kB, 42, params(100)) > 0);
  n.run();
  for (int i = 0; i < 10 && Net::count(n.events_a, CmAction::Kind::kRejected) == 0; ++i) n.tick();
  const CmAction* r = Net::find(n.events_a, CmAction::Kind::kRejected);
  REQUIRE(r != nullptr);
  CHECK(r->reason == RejectReason::kTimeout);
  CHECK(n.a.counters().retransmits == 3);
  CHECK(n.a.counters().timeouts == 1);
  CHECK(n.now - t0 == 4 * 100 * kMs);  // 1 + 3 tries, each waiting one timeout
  CHECK(n.a.connection_count() == 0);
  CHECK(n.a.next_deadline_ns() == UINT64_MAX);
}

TEST_CASE("a lost REP is resent when the REQ repeats or its timer fires; one connection") {
  Net n;
  REQUIRE(n.b.listen(42, kOwnerB) == 0);
  int reps_dropped = 0;
  n.filter = [&](bool to_b, const CmAction& a) {
    if (!to_b && a.bytes[5] == static_cast<uint8_t>(CmType::kRep) && reps_dropped < 2) {
      ++reps_dropped;
      return false;
    }
    return true;
  };
  REQUIRE(n.a.connect(n.now, kOwnerA, kB, 42, params(100)) > 0);
  n.run();
  n.accept_all();
  for (int i = 0; i < 10 && Net::count(n.events_a, CmAction::Kind::kEstablished) == 0; ++i) {
    n.tick();
  }
  CHECK(reps_dropped == 2);
  CHECK(Net::count(n.events_a, CmAction::Kind::kEstablished) == 1);
  CHECK(Net::count(n.events_b, CmAction::Kind::kEstablished) == 1);
  CHECK(Net::count(n.events_b, CmAction::Kind::kRequest) == 1);  // duplicates are not new
  CHECK(n.b.connection_count() == 1);
}

TEST_CASE("a lost RTU: the passive side establishes on QP traffic or on a resent RTU") {
  SECTION("QP traffic") {
    Net n;
    REQUIRE(n.b.listen(42, kOwnerB) == 0);
    n.filter = [](bool to_b, const CmAction& a) {
      return !(to_b && a.bytes[5] == static_cast<uint8_t>(CmType::kRtu));
    };
    REQUIRE(n.a.connect(n.now, kOwnerA, kB, 42, params(100)) > 0);
    n.run();
    n.accept_all();
    REQUIRE(Net::count(n.events_a, CmAction::Kind::kEstablished) == 1);
    REQUIRE(Net::count(n.events_b, CmAction::Kind::kEstablished) == 0);
    const uint32_t conn_b = Net::find(n.events_b, CmAction::Kind::kRequest)->conn;
    n.b.on_qp_traffic(conn_b);
    n.run();
    CHECK(Net::count(n.events_b, CmAction::Kind::kEstablished) == 1);
    n.b.on_qp_traffic(conn_b);  // no second event
    n.run();
    CHECK(Net::count(n.events_b, CmAction::Kind::kEstablished) == 1);
  }
  SECTION("REP resent by B's timer, RTU answered again by A") {
    Net n;
    REQUIRE(n.b.listen(42, kOwnerB) == 0);
    int rtus = 0;
    n.filter = [&](bool to_b, const CmAction& a) {
      if (to_b && a.bytes[5] == static_cast<uint8_t>(CmType::kRtu)) return ++rtus > 1;
      return true;
    };
    REQUIRE(n.a.connect(n.now, kOwnerA, kB, 42, params(100)) > 0);
    n.run();
    n.accept_all();
    n.tick();
    CHECK(rtus == 2);
    CHECK(Net::count(n.events_b, CmAction::Kind::kEstablished) == 1);
    CHECK(Net::count(n.events_a, CmAction::Kind::kEstablished) == 1);
  }
}

TEST_CASE("disconnect: DREQ/DREP, both owners told once; a lost DREP is answered again") {
  Net n;
  REQUIRE(n.b.listen(42, kOwnerB) == 0);
  const int64_t id = n.a.connect(n.now, kOwnerA, kB, 42, params(100));
  n.run();
  n.accept_all();
  REQUIRE(Net::count(n.events_b, CmAction::Kind::kEstablished) == 1);
  int dreps = 0;
  n.filter = [&](bool to_b, const CmAction& a) {
    if (!to_b && a.bytes[5] == static_cast<uint8_t>(CmType::kDrep)) return ++dreps > 1;
    return true;
  };
  CHECK(n.a.disconnect(n.now, kOwnerB, static_cast<uint32_t>(id)) == -ENOENT);  // not B's
  REQUIRE(n.a.disconnect(n.now, kOwnerA, static_cast<uint32_t>(id)) == 0);
  n.run();
  CHECK(Net::count(n.events_b, CmAction::Kind::kDisconnected) == 1);
  CHECK(n.b.connection_count() == 0);
  CHECK(Net::count(n.events_a, CmAction::Kind::kDisconnected) == 0);  // DREP lost
  n.tick();  // DREQ again; B no longer knows it but answers DREP
  CHECK(Net::count(n.events_a, CmAction::Kind::kDisconnected) == 1);
  CHECK(n.a.connection_count() == 0);
  CHECK(Net::count(n.events_b, CmAction::Kind::kDisconnected) == 1);
}

TEST_CASE("disconnecting from a dead peer ends after the retry budget") {
  CmConfig c;
  c.max_retries = 2;
  Net n(c);
  REQUIRE(n.b.listen(42, kOwnerB) == 0);
  const int64_t id = n.a.connect(n.now, kOwnerA, kB, 42, params(100));
  n.run();
  n.accept_all();
  n.filter = [](bool, const CmAction&) { return false; };
  REQUIRE(n.a.disconnect(n.now, kOwnerA, static_cast<uint32_t>(id)) == 0);
  for (int i = 0; i < 5; ++i) n.tick();
  CHECK(Net::count(n.events_a, CmAction::Kind::kDisconnected) == 1);
  CHECK(n.a.connection_count() == 0);
}

TEST_CASE("a native DREQ is resent every retry_timeout_ns, max_retries times, on either side") {
  // Only the IB CM paces its DREQs by the REQ's fields; between two conduitd both sides keep
  // the configured pace.
  for (const bool active : {true, false}) {
    CAPTURE(active);
    CmConfig c;
    c.retry_timeout_ns = 300 * kMs;
    c.max_retries = 4;
    Net n(c);
    REQUIRE(n.b.listen(42, kOwnerB) == 0);
    const int64_t id = n.a.connect(n.now, kOwnerA, kB, 42, params(100));
    n.run();
    n.accept_all();
    REQUIRE(Net::count(n.events_a, CmAction::Kind::kEstablished) == 1);
    REQUIRE(Net::count(n.events_b, CmAction::Kind::kEstablished) == 1);
    ConnectionManager& side = active ? n.a : n.b;
    std::vector<CmAction>& events = active ? n.events_a : n.events_b;
    const uint32_t conn = active ? static_cast<uint32_t>(id)
                                 : Net::find(n.events_b, CmAction::Kind::kEstablished)->conn;
    n.filter = [](bool, const CmAction&) { return false; };  // the peer is gone
    n.now += kMs;
    REQUIRE(side.disconnect(n.now, active ? kOwnerA : kOwnerB, conn) == 0);
    n.run();
    uint32_t resends = 0;
    while (Net::count(events, CmAction::Kind::kDisconnected) == 0) {
      const uint64_t next = side.next_deadline_ns();
      REQUIRE(next != UINT64_MAX);
      CHECK(next - n.now == c.retry_timeout_ns);
      n.now = next;
      const uint64_t before = side.counters().retransmits;
      side.on_timer(n.now);
      resends += static_cast<uint32_t>(side.counters().retransmits - before);
      n.run();
      REQUIRE(resends <= 16);
    }
    CHECK(resends == c.max_retries);
    CHECK(side.connection_count() == 0);
  }
}

TEST_CASE("an owner that goes away: listeners dropped, connections torn down silently") {
  Net n;
  REQUIRE(n.b.listen(42, kOwnerB) == 0);
  n.a.connect(n.now, kOwnerA, kB, 42, params(100));
  n.run();
  n.accept_all();
  n.a.connect(n.now, kOwnerA, kB, 42, params(101));  // pending at B
  n.run();
  REQUIRE(n.b.connection_count() == 2);
  n.b.forget_owner(n.now, kOwnerB);
  n.run();
  CHECK(n.b.connection_count() == 0);
  // A learns: the established one is disconnected, the pending one rejected.
  CHECK(Net::count(n.events_a, CmAction::Kind::kDisconnected) == 1);
  CHECK(Net::count(n.events_a, CmAction::Kind::kRejected) == 1);
  CHECK(Net::count(n.events_b, CmAction::Kind::kDisconnected) == 0);  // nobody to tell
  // And the service is free again.
  CHECK(n.b.listen(42, kOwnerA) == 0);
}

TEST_CASE("a request the owner never answers expires; REQ floods are bounded") {
  CmConfig c;
  c.max_connections = 8;
  c.retry_timeout_ns = 10 * kMs;
  c.max_retries = 2;
  ConnectionManager b(c);
  REQUIRE(b.listen(42, kOwnerB) == 0);
  uint64_t now = 0;
  CmMessage req;
  req.type = CmType::kReq;
  req.service = 42;
  req.params = params(100);
  uint8_t buf[kMaxMessageBytes];
  for (uint32_t i = 1; i <= 20; ++i) {
    req.src_conn = i;
    b.on_message(now, kA, buf, build_cm_message(req, buf));
  }
  CHECK(b.connection_count() == 8);
  std::vector<CmAction> acts(64);
  size_t n = b.poll_actions(acts.data(), acts.size());
  size_t requests = 0, quota_rejects = 0;
  for (size_t i = 0; i < n; ++i) {
    if (acts[i].kind == CmAction::Kind::kRequest) ++requests;
    if (acts[i].kind == CmAction::Kind::kSend) {
      CmMessage m;
      REQUIRE(parse_cm_message(acts[i].bytes.data(), acts[i].len, m) == CmParseError::kOk);
      if (m.type == CmType::kRej && m.reason == RejectReason::kQuota) ++quota_rejects;
    }
  }
  CHECK(requests == 8);
  CHECK(quota_rejects == 12);
  now = b.next_deadline_ns();
  CHECK(now == 3 * 10 * kMs);
  b.on_timer(now);
  CHECK(b.connection_count() == 0);
  n = b.poll_actions(acts.data(), acts.size());
  size_t expired = 0;
  for (size_t i = 0; i < n; ++i) {
    expired +=
        acts[i].kind == CmAction::Kind::kRejected && acts[i].reason == RejectReason::kTimeout;
  }
  CHECK(expired == 8);
}

TEST_CASE("messages from the wrong peer or for unknown connections are counted, not obeyed") {
  Net n;
  REQUIRE(n.b.listen(42, kOwnerB) == 0);
  const int64_t id = n.a.connect(n.now, kOwnerA, kB, 42, params(100));
  n.run();
  // A forged REJ for A's pending connection, from a third host.
  CmMessage rej;
  rej.type = CmType::kRej;
  rej.src_conn = 5;
  rej.dst_conn = static_cast<uint32_t>(id);
  rej.reason = RejectReason::kRefused;
  uint8_t buf[kMaxMessageBytes];
  n.a.on_message(n.now, CmPeer{cm_addr_v4(0xC6120009), 4792}, buf, build_cm_message(rej, buf));
  CHECK(n.a.counters().rx_unknown_conn == 1);
  rej.dst_conn = 9999;
  n.a.on_message(n.now, kB, buf, build_cm_message(rej, buf));
  CHECK(n.a.counters().rx_unknown_conn == 2);
  n.a.on_message(n.now, kB, buf, 3);
  CHECK(n.a.counters().rx_malformed == 1);
  n.accept_all();
  CHECK(Net::count(n.events_a, CmAction::Kind::kEstablished) == 1);
  CHECK(Net::count(n.events_a, CmAction::Kind::kRejected) == 0);
}

TEST_CASE("many connections under random loss and duplication all settle consistently") {
  std::mt19937 rng(1234);
  CmConfig c;
  c.max_retries = 7;
  Net n(c);
  REQUIRE(n.b.listen(42, kOwnerB) == 0);
  std::vector<std::pair<bool, CmAction>> dup;
  n.filter = [&](bool to_b, const CmAction& a) {
    const unsigned r = rng() % 100;
    if (r < 10) dup.push_back({to_b, a});
    return r >= 20;  // 20 % lost
  };
  for (uint32_t q = 0; q < 50; ++q) n.a.connect(n.now, kOwnerA, kB, 42, params(100 + q));
  for (int round = 0; round < 200; ++round) {
    n.run();
    n.accept_all();
    for (auto& [to_b, a] : dup) {  // late duplicates
      (to_b ? n.b : n.a).on_message(n.now, to_b ? kA : kB, a.bytes.data(), a.len);
    }
    dup.clear();
    if (n.a.next_deadline_ns() == UINT64_MAX && n.b.next_deadline_ns() == UINT64_MAX) break;
    n.tick();
  }
  n.run();
  const size_t ea = Net::count(n.events_a, CmAction::Kind::kEstablished);
  const size_t ra = Net::count(n.events_a, CmAction::Kind::kRejected);
  CHECK(ea + ra == 50);  // every connect ends exactly once
  CHECK(ea >= 45);       // 8 tries at 20 % loss: failures are rare
  // Each connection A has up is up at B too (RTUs or resent REPs got through).
  CHECK(Net::count(n.events_b, CmAction::Kind::kEstablished) >= ea);
  CHECK(Net::count(n.events_b, CmAction::Kind::kRequest) >= ea);
}

TEST_CASE("a DREQ for a connection still waiting for its REP is answered, not obeyed") {
  ConnectionManager a(CmConfig{});
  const int64_t id = a.connect(0, kOwnerA, kB, 42, params(100));
  REQUIRE(id > 0);
  CmAction act[4];
  REQUIRE(a.poll_actions(act, 4) == 1);  // the REQ
  CmMessage dreq;
  dreq.type = CmType::kDreq;
  dreq.src_conn = 77;
  dreq.dst_conn = static_cast<uint32_t>(id);
  uint8_t buf[kMaxMessageBytes];
  a.on_message(0, kB, buf, build_cm_message(dreq, buf));
  REQUIRE(a.poll_actions(act, 4) == 1);
  CmMessage drep;
  REQUIRE(parse_cm_message(act[0].bytes.data(), act[0].len, drep) == CmParseError::kOk);
  CHECK(drep.type == CmType::kDrep);
  CHECK(drep.dst_conn == 77);  // found by the fuzzer: was 0, an unparseable DREP
  CHECK(a.connection_count() == 1);
  CHECK(a.counters().rx_unexpected == 1);
}

TEST_CASE("kEstablished carries the peer's private data: the REP's on A, the REQ's on B") {
  Net n;
  REQUIRE(n.b.listen(42, kOwnerB) == 0);
  const uint8_t req_data[] = {'r', 'e', 'q'};
  REQUIRE(n.a.connect(n.now, kOwnerA, kB, 42, params(100), req_data, sizeof(req_data)) > 0);
  n.run();
  const CmAction* req = Net::find(n.events_b, CmAction::Kind::kRequest);
  REQUIRE(req != nullptr);
  const uint8_t rep_data[] = {'r', 'e', 'p', '!'};
  REQUIRE(n.b.accept(n.now, kOwnerB, req->conn, params(200), rep_data, sizeof(rep_data)) == 0);
  n.run();
  const CmAction* ea = Net::find(n.events_a, CmAction::Kind::kEstablished);
  const CmAction* eb = Net::find(n.events_b, CmAction::Kind::kEstablished);
  REQUIRE(ea != nullptr);
  REQUIRE(eb != nullptr);
  CHECK(ea->private_len == 4);
  CHECK(ea->private_data[3] == '!');
  CHECK(eb->private_len == 3);
  CHECK(eb->private_data[2] == 'q');
  CHECK(ea->caps == kCapSelectiveRepeat);  // both offered it
}

TEST_CASE("pending requests are capped per source address and in total") {
  // A sender that never completes its REQs must not fill the connection table: at most 64
  // unanswered requests per address here (256 by default), 2048 in all; the rest get
  // REJ(quota).
  CmConfig cfg;
  cfg.max_pending_per_addr = 64;
  REQUIRE(cfg.max_pending_requests == 2048);
  ConnectionManager b{cfg};
  REQUIRE(b.listen(42, kOwnerB) == 0);
  CmMessage req;
  req.type = CmType::kReq;
  req.service = 42;
  req.params = params(100);
  uint8_t buf[kMaxMessageBytes];
  std::vector<CmAction> acts(256);
  auto flood = [&](CmPeer from, uint32_t first, uint32_t count, size_t& requests,
                   size_t& quota_rejects, uint32_t& some_conn) {
    requests = quota_rejects = 0;
    for (uint32_t i = 0; i < count; ++i) {
      req.src_conn = first + i;
      b.on_message(0, from, buf, build_cm_message(req, buf));
      for (size_t k = 0, n = b.poll_actions(acts.data(), acts.size()); k < n; ++k) {
        if (acts[k].kind == CmAction::Kind::kRequest) {
          ++requests;
          some_conn = acts[k].conn;
        }
        CmMessage m;
        if (acts[k].kind == CmAction::Kind::kSend &&
            parse_cm_message(acts[k].bytes.data(), acts[k].len, m) == CmParseError::kOk &&
            m.type == CmType::kRej && m.reason == RejectReason::kQuota) {
          ++quota_rejects;
        }
      }
    }
  };
  size_t requests = 0, rejects = 0;
  uint32_t conn = 0;
  flood(kA, 1, 100, requests, rejects, conn);
  CHECK(requests == 64);
  CHECK(rejects == 36);
  CHECK(b.counters().requests_over_cap == 36);
  // Answering one makes room for one more from that address.
  REQUIRE(b.accept(0, kOwnerB, conn, params(200)) == 0);
  flood(kA, 1000, 2, requests, rejects, conn);
  CHECK(requests == 1);
  CHECK(rejects == 1);
  // Another port of the same address shares its quota; other addresses have their own.
  flood(CmPeer{kA.addr, 9999}, 2000, 1, requests, rejects, conn);
  CHECK(requests == 0);
  size_t total = 64;
  for (uint32_t host = 3; host < 40; ++host) {
    flood(CmPeer{cm_addr_v4(0xC6120000 + host), 4792}, 1, 64, requests, rejects, conn);
    total += requests;
  }
  CHECK(total == 2048);
  CHECK(b.connection_count() == 2048 + 1);  // and the accepted one
}

TEST_CASE("a REJ for a connection the active side took as established ends it") {
  // B accepts, then gives up before A's RTU arrives (its QP failed: the engine calls
  // disconnect() in kRepSent, which sends REJ). A established on the REP; without this it would
  // stay connected to a QP that is gone.
  Net n;
  REQUIRE(n.b.listen(42, kOwnerB) == 0);
  n.filter = [](bool to_b, const CmAction& a) {
    return !(to_b && a.bytes[5] == static_cast<uint8_t>(CmType::kRtu));
  };
  const int64_t id = n.a.connect(n.now, kOwnerA, kB, 42, params(100));
  REQUIRE(id > 0);
  n.run();
  n.accept_all();
  REQUIRE(Net::count(n.events_a, CmAction::Kind::kEstablished) == 1);
  const uint32_t conn_b = Net::find(n.events_b, CmAction::Kind::kRequest)->conn;
  REQUIRE(n.b.disconnect(n.now, kOwnerB, conn_b) == 0);
  n.run();
  CHECK(Net::count(n.events_a, CmAction::Kind::kDisconnected) == 1);
  CHECK(n.a.connection_count() == 0);
  CHECK(n.b.connection_count() == 0);
}
