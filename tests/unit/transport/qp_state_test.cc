#include <catch2/catch.hpp>

#include "qp_pair.h"

using namespace conduit::transport;
using namespace conduit::transport::test;

namespace {

constexpr uint32_t kRtrMask =
    kAttrState | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic | kAttrMinRnrTimer;
constexpr uint32_t kRtsMask =
    kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrMaxRdAtomic;

QpAttr with_state(QpAttr a, QpState s) {
  a.state = s;
  return a;
}

}  // namespace

TEST_CASE("qp: RESET -> INIT -> RTR -> RTS with the required attributes") {
  HeapMemoryRegions mrs;
  Qp qp(QpConfig{}, mrs);
  QpAttr a = default_attr();
  CHECK(qp.state() == QpState::kReset);
  REQUIRE(qp.modify(with_state(a, QpState::kInit), kAttrState | kAttrAccessFlags) == Status::kOk);
  CHECK(qp.state() == QpState::kInit);
  REQUIRE(qp.modify(with_state(a, QpState::kRtr), kRtrMask) == Status::kOk);
  CHECK(qp.state() == QpState::kRtr);
  REQUIRE(qp.modify(with_state(a, QpState::kRts), kRtsMask) == Status::kOk);
  CHECK(qp.state() == QpState::kRts);
  REQUIRE(qp.modify(with_state(a, QpState::kSqd), kAttrState) == Status::kOk);
  CHECK(qp.state() == QpState::kSqd);
  REQUIRE(qp.modify(with_state(a, QpState::kRts), kAttrState) == Status::kOk);
  CHECK(qp.state() == QpState::kRts);
  REQUIRE(qp.modify(with_state(a, QpState::kErr), kAttrState) == Status::kOk);
  CHECK(qp.state() == QpState::kErr);
  REQUIRE(qp.modify(with_state(a, QpState::kReset), kAttrState) == Status::kOk);
  CHECK(qp.state() == QpState::kReset);
}

TEST_CASE("qp: transitions the verbs diagram does not have are rejected") {
  HeapMemoryRegions mrs;
  Qp qp(QpConfig{}, mrs);
  QpAttr a = default_attr();
  CHECK(qp.modify(with_state(a, QpState::kRtr), kRtrMask) == Status::kInvalidTransition);
  CHECK(qp.modify(with_state(a, QpState::kRts), kRtsMask) == Status::kInvalidTransition);
  CHECK(qp.modify(with_state(a, QpState::kSqd), kAttrState) == Status::kInvalidTransition);
  CHECK(qp.modify(with_state(a, QpState::kErr), kAttrState) == Status::kInvalidTransition);
  CHECK(qp.state() == QpState::kReset);
  REQUIRE(qp.modify(with_state(a, QpState::kInit), kAttrState) == Status::kOk);
  CHECK(qp.modify(with_state(a, QpState::kRts), kRtsMask) == Status::kInvalidTransition);
  CHECK(qp.modify(with_state(a, QpState::kSqd), kAttrState) == Status::kInvalidTransition);
  REQUIRE(qp.modify(with_state(a, QpState::kRtr), kRtrMask) == Status::kOk);
  CHECK(qp.modify(with_state(a, QpState::kInit), kAttrState) == Status::kInvalidTransition);
  CHECK(qp.modify(with_state(a, QpState::kRtr), kAttrState) == Status::kInvalidTransition);
  CHECK(qp.modify(with_state(a, QpState::kSqd), kAttrState) == Status::kInvalidTransition);
  REQUIRE(qp.modify(with_state(a, QpState::kRts), kRtsMask) == Status::kOk);
  CHECK(qp.modify(with_state(a, QpState::kRtr), kAttrState) == Status::kInvalidTransition);
  CHECK(qp.modify(with_state(a, QpState::kInit), kAttrState) == Status::kInvalidTransition);
  CHECK(qp.state() == QpState::kRts);
}

TEST_CASE("qp: missing, misplaced and out-of-range attributes change nothing") {
  HeapMemoryRegions mrs;
  Qp qp(QpConfig{}, mrs);
  QpAttr a = default_attr();
  REQUIRE(qp.modify(with_state(a, QpState::kInit), kAttrState) == Status::kOk);
  CHECK(qp.modify(with_state(a, QpState::kRtr), kRtrMask & ~kAttrPathMtu) == Status::kMissingAttr);
  CHECK(qp.modify(with_state(a, QpState::kRtr), kRtrMask & ~kAttrRqPsn) == Status::kMissingAttr);
  CHECK(qp.modify(with_state(a, QpState::kRtr), kRtrMask | kAttrSqPsn) == Status::kInvalidAttr);
  for (uint32_t bad_mtu : {0u, 128u, 300u, 1500u, 8192u}) {
    QpAttr b = with_state(a, QpState::kRtr);
    b.pmtu_bytes = bad_mtu;
    CHECK(qp.modify(b, kRtrMask) == Status::kInvalidAttr);
  }
  QpAttr b = with_state(a, QpState::kRtr);
  b.rq_psn = 1u << 24;
  CHECK(qp.modify(b, kRtrMask) == Status::kInvalidAttr);
  b = with_state(a, QpState::kRtr);
  b.max_dest_rd_atomic = 0;
  CHECK(qp.modify(b, kRtrMask) == Status::kInvalidAttr);
  b = with_state(a, QpState::kRtr);
  b.min_rnr_timer = 32;
  CHECK(qp.modify(b, kRtrMask) == Status::kInvalidAttr);
  CHECK(qp.state() == QpState::kInit);
  for (uint32_t mtu : {256u, 512u, 1024u, 2048u, 4096u}) {
    HeapMemoryRegions m2;
    Qp q2(QpConfig{}, m2);
    REQUIRE(q2.modify(with_state(a, QpState::kInit), kAttrState) == Status::kOk);
    b = with_state(a, QpState::kRtr);
    b.pmtu_bytes = mtu;
    CHECK(q2.modify(b, kRtrMask) == Status::kOk);
    CHECK(q2.attr().pmtu_bytes == mtu);
  }
  REQUIRE(qp.modify(with_state(a, QpState::kRtr), kRtrMask) == Status::kOk);
  CHECK(qp.modify(with_state(a, QpState::kRts), kRtsMask & ~kAttrTimeout) == Status::kMissingAttr);
  b = with_state(a, QpState::kRts);
  b.retry_cnt = 8;
  CHECK(qp.modify(b, kRtsMask) == Status::kInvalidAttr);
  b = with_state(a, QpState::kRts);
  b.rnr_retry = 9;
  CHECK(qp.modify(b, kRtsMask) == Status::kInvalidAttr);
  b = with_state(a, QpState::kRts);
  b.timeout = 32;
  CHECK(qp.modify(b, kRtsMask) == Status::kInvalidAttr);
  b = with_state(a, QpState::kRts);
  b.max_rd_atomic = 17;
  CHECK(qp.modify(b, kRtsMask) == Status::kInvalidAttr);
  CHECK(qp.state() == QpState::kRtr);
  // RTS -> RTS may change the timeout but not the PMTU.
  REQUIRE(qp.modify(with_state(a, QpState::kRts), kRtsMask) == Status::kOk);
  b = a;
  b.timeout = 3;
  CHECK(qp.modify(b, kAttrTimeout) == Status::kOk);
  CHECK(qp.attr().timeout == 3);
  CHECK(qp.modify(b, kAttrPathMtu) == Status::kInvalidAttr);
}

TEST_CASE("qp: posting depends on the state") {
  Endpoint e(QpPair::make_cfg(1));
  CHECK(e.qp.post_recv(make_recv(1, 0, 64)) == Status::kInvalidState);
  CHECK(e.qp.post_send(make_wr(WrOpcode::kSend, 1, 0, 64)) == Status::kInvalidState);
  QpAttr a = default_attr();
  REQUIRE(e.qp.modify(with_state(a, QpState::kInit), kAttrState) == Status::kOk);
  CHECK(e.qp.post_recv(make_recv(1, 0, 64)) == Status::kOk);
  CHECK(e.qp.post_send(make_wr(WrOpcode::kSend, 1, 0, 64)) == Status::kInvalidState);
  REQUIRE(e.qp.modify(with_state(a, QpState::kRtr), kRtrMask) == Status::kOk);
  CHECK(e.qp.post_send(make_wr(WrOpcode::kSend, 1, 0, 64)) == Status::kInvalidState);
  REQUIRE(e.qp.modify(with_state(a, QpState::kRts), kRtsMask) == Status::kOk);
  CHECK(e.qp.post_send(make_wr(WrOpcode::kSend, 2, 0, 64)) == Status::kOk);
  // Bad SGEs are refused at post time.
  SendWr bad = make_wr(WrOpcode::kSend, 3, 0, 64);
  bad.sge[0].lkey = 0x999;
  CHECK(e.qp.post_send(bad) == Status::kInvalidSge);
  bad = make_wr(WrOpcode::kSend, 3, kMrBytes - 10, 64);
  CHECK(e.qp.post_send(bad) == Status::kInvalidSge);
  bad = make_wr(WrOpcode::kSend, 3, 0, 64);
  bad.num_sge = kMaxSge + 1;
  CHECK(e.qp.post_send(bad) == Status::kInvalidWr);
  // ERR: both queues flush, and later posts complete at once with a flush error.
  REQUIRE(e.qp.modify(with_state(a, QpState::kErr), kAttrState) == Status::kOk);
  CHECK(e.qp.post_send(make_wr(WrOpcode::kSend, 4, 0, 64)) == Status::kOk);
  CHECK(e.qp.post_recv(make_recv(5, 0, 64)) == Status::kOk);
  auto cq = e.drain_cq();
  REQUIRE(cq.size() == 4);
  CHECK(cq[0].wr_id == 2);
  CHECK(cq[1].wr_id == 1);
  CHECK(cq[1].opcode == WcOpcode::kRecv);
  CHECK(cq[2].wr_id == 4);
  CHECK(cq[3].wr_id == 5);
  for (const auto& c : cq) CHECK(c.status == WcStatus::kWrFlushError);
}

TEST_CASE("qp: the send queue and completion queue bound posting") {
  QpConfig cfg = QpPair::make_cfg(1);
  cfg.sq_depth = 4;
  cfg.rq_depth = 4;
  Endpoint e(cfg);
  bring_up(e.qp, default_attr(), 2, 0, 0);
  for (int i = 0; i < 4; ++i)
    CHECK(e.qp.post_send(make_wr(WrOpcode::kSend, i, 0, 8)) == Status::kOk);
  CHECK(e.qp.post_send(make_wr(WrOpcode::kSend, 9, 0, 8)) == Status::kQueueFull);
}

TEST_CASE("qp: timer helpers") {
  CHECK(ack_timeout_ns(0) == 0);
  CHECK(ack_timeout_ns(1) == 8192);
  CHECK(ack_timeout_ns(14) == 4096ull << 14);  // 67.1 ms
  CHECK(rnr_timer_ns(1) == 10'000);
  CHECK(rnr_timer_ns(0) == 655'360'000);
  CHECK(rnr_timer_ns(31) == 491'520'000);
  CHECK(rnr_timer_ns(14) == 1'280'000);
}

TEST_CASE("qp: SGEs resolved through the cached region view match the MemoryRegions lookup") {
  QpConfig cfg = QpPair::make_cfg(1);
  cfg.sq_depth = 256;
  Endpoint e(cfg);
  // A second region without local write: a READ must not land in it.
  e.mrs.add(0x900000, 4096, kAccessRemoteRead);  // lkey 0x101
  bring_up(e.qp, default_attr(), 2, 0, 0);
  // Every post alternates keys and bounds so that cache hits, misses and
  // refreshes all occur; the status must always equal a direct lookup.
  uint64_t id = 0;
  struct Case {
    uint32_t lkey;
    uint64_t addr;
    uint32_t len;
    WrOpcode op;
  };
  const Case cases[] = {
      {0x100, kBase, 64, WrOpcode::kSend},                  // fills the cache
      {0x100, kBase + 100, 64, WrOpcode::kSend},            // hit
      {0x100, kBase + kMrBytes - 64, 64, WrOpcode::kSend},  // hit, last bytes
      {0x100, kBase + kMrBytes - 63, 64, WrOpcode::kSend},  // one byte past the end
      {0x100, kBase - 1, 8, WrOpcode::kSend},               // before the start
      {0x100, kBase + kMrBytes, 0, WrOpcode::kSend},        // empty, at the end
      {0x100, kBase + kMrBytes + 1, 0, WrOpcode::kSend},    // empty, past the end
      {0x100, ~0ull - 4, 16, WrOpcode::kSend},              // address wraps
      {0x101, 0x900000, 64, WrOpcode::kSend},               // other region: readable
      {0x101, 0x900000, 64, WrOpcode::kRead},               // not locally writable
      {0x101, 0x900000 + 4000, 200, WrOpcode::kSend},       // out of bounds
      {0x100, kBase, 64, WrOpcode::kRead},                  // back: writable
      {0x999, kBase, 64, WrOpcode::kSend},                  // unknown key
  };
  for (int round = 0; round < 2; ++round) {
    for (const Case& c : cases) {
      SendWr wr = make_wr(c.op, ++id, 0, c.len);
      wr.sge[0] = Sge{c.addr, c.len, c.lkey};
      std::span<uint8_t> direct;
      const uint32_t access = c.op == WrOpcode::kRead ? kAccessLocalWrite : 0u;
      const bool ok = e.mrs.lookup_local(c.lkey, c.addr, c.len, access, direct) == MrStatus::kOk;
      INFO("lkey " << c.lkey << " addr " << c.addr << " len " << c.len);
      CHECK(e.qp.post_send(wr) == (ok ? Status::kOk : Status::kInvalidSge));
      while (e.qp.cq_size() > 0) e.drain_cq();
      if (e.qp.state() != QpState::kRts) break;
    }
  }
  // A region added later changes the epoch: the cache is not trusted across it.
  const uint64_t before = e.mrs.epoch();
  e.mrs.add(0xA00000, 4096, kAllAccess);
  CHECK(e.mrs.epoch() != before);
  SendWr wr = make_wr(WrOpcode::kSend, ++id, 0, 64);
  wr.sge[0] = Sge{0xA00000, 64, 0x102};
  CHECK(e.qp.post_send(wr) == Status::kOk);
}

TEST_CASE("qp: poll_cq returns completions in order across the ring's wrap, any span size") {
  QpConfig cfg = QpPair::make_cfg(1);
  cfg.sq_depth = 4;
  cfg.rq_depth = 4;  // completion ring of 8
  Endpoint e(cfg);
  QpAttr a = default_attr();
  REQUIRE(e.qp.modify(with_state(a, QpState::kInit), kAttrState) == Status::kOk);
  REQUIRE(e.qp.modify(with_state(a, QpState::kErr), kAttrState) == Status::kOk);
  // In ERR every post completes at once (flush error): the ring fills and
  // drains with a different span size each round, so runs start at every
  // offset and wrap.
  uint64_t posted = 0, polled = 0;
  for (size_t round = 0; round < 64; ++round) {
    const size_t fill = 1 + round % 7;
    for (size_t i = 0; i < fill; ++i) {
      REQUIRE(e.qp.post_recv(make_recv(posted, 0, 64)) == Status::kOk);
      ++posted;
    }
    const size_t span = 1 + (round * 5) % 9;
    while (polled < posted) {
      std::vector<Completion> out(span);
      const size_t n = e.qp.poll_cq(out);
      REQUIRE(n == std::min<uint64_t>(span, posted - polled));
      for (size_t i = 0; i < n; ++i) {
        CHECK(out[i].wr_id == polled + i);
        CHECK(out[i].status == WcStatus::kWrFlushError);
        CHECK(out[i].opcode == WcOpcode::kRecv);
      }
      polled += n;
    }
    CHECK(e.qp.cq_size() == 0);
  }
}

TEST_CASE("qp: RESET holds the configured defaults (the policy's transport section)") {
  HeapMemoryRegions mrs;
  QpConfig cfg;
  cfg.reset_attr.pmtu_bytes = 2048;
  cfg.reset_attr.timeout = 18;
  cfg.reset_attr.retry_cnt = 3;
  cfg.reset_attr.rnr_retry = 2;
  cfg.reset_attr.min_rnr_timer = 5;
  cfg.reset_attr.max_rd_atomic = 16;
  cfg.reset_attr.max_dest_rd_atomic = 8;
  cfg.reset_attr.dest_qpn = 77;            // not a default: RESET has none
  cfg.reset_attr.selective_repeat = true;  // negotiated per connection, never a default
  Qp qp(cfg, mrs);
  auto check_defaults = [&] {
    const QpAttr& a = qp.attr();
    CHECK(a.pmtu_bytes == 2048);
    CHECK(a.timeout == 18);
    CHECK(a.retry_cnt == 3);
    CHECK(a.rnr_retry == 2);
    CHECK(a.min_rnr_timer == 5);
    CHECK(a.max_rd_atomic == 16);
    CHECK(a.max_dest_rd_atomic == 8);
    CHECK(a.dest_qpn == 0);
    CHECK_FALSE(a.selective_repeat);
  };
  check_defaults();
  // A modify sets what it names; the rest keeps the defaults. RESET brings them back.
  QpAttr a = default_attr();
  a.state = QpState::kInit;
  REQUIRE(qp.modify(a, kAttrState | kAttrAccessFlags) == Status::kOk);
  CHECK(qp.attr().pmtu_bytes == 2048);
  CHECK(qp.attr().max_dest_rd_atomic == 8);
  a.state = QpState::kRtr;
  a.pmtu_bytes = 512;
  REQUIRE(qp.modify(a, kRtrMask) == Status::kOk);
  CHECK(qp.attr().pmtu_bytes == 512);
  CHECK(qp.attr().timeout == 18);  // RTS sets it
  a.state = QpState::kReset;
  REQUIRE(qp.modify(a, kAttrState) == Status::kOk);
  check_defaults();

  // Out-of-range defaults fall back to QpAttr's, one by one.
  QpConfig bad;
  bad.reset_attr.pmtu_bytes = 3000;
  bad.reset_attr.timeout = 40;
  bad.reset_attr.max_rd_atomic = 0;
  bad.reset_attr.retry_cnt = 5;
  Qp qb(bad, mrs);
  CHECK(qb.attr().pmtu_bytes == QpAttr{}.pmtu_bytes);
  CHECK(qb.attr().timeout == QpAttr{}.timeout);
  CHECK(qb.attr().max_rd_atomic == QpAttr{}.max_rd_atomic);
  CHECK(qb.attr().retry_cnt == 5);
}
