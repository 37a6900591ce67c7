// RDMA atomics between two QPs: compare-and-swap and fetch-and-add complete
// with the remote word's old value, run exactly once at the responder when
// requests or ACKs are lost (go-back-N and selective repeat), count against
// max_rd_atomic with READs, and errors come back as the verbs statuses.
#include <algorithm>
#include <catch2/catch.hpp>
#include <random>

#include "qp_pair.h"
#include "wire/psn.h"

using namespace conduit::transport;
using namespace conduit::transport::test;
using conduit::wire::Opcode;

namespace {

void run(QpPair& p, int max_rounds = 2000) {
  for (int i = 0; i < max_rounds; ++i) {
    p.pump();
    if (!p.advance_to_deadline()) return;
  }
}

QpAttr attr(bool sr) {
  QpAttr a = default_attr();
  a.selective_repeat = sr;
  return a;
}

}  // namespace

TEST_CASE("atomics: fetch-and-add and compare-and-swap return the old value") {
  for (bool sr : {false, true}) {
    INFO("selective repeat " << sr);
    QpPair p(attr(sr));
    store_u64(p.b.mem() + 0x100, 10);
    REQUIRE(p.a.qp.post_send(make_atomic(WrOpcode::kFetchAdd, 1, 0x2000, 0x100, 5)) == Status::kOk);
    REQUIRE(p.a.qp.post_send(make_atomic(WrOpcode::kCmpSwap, 2, 0x2008, 0x100, 15, 99)) ==
            Status::kOk);
    REQUIRE(p.a.qp.post_send(make_atomic(WrOpcode::kCmpSwap, 3, 0x2010, 0x100, 15, 7)) ==
            Status::kOk);
    // A SEND behind them completes after them, in order.
    REQUIRE(p.b.qp.post_recv(make_recv(9, 0x3000, 64)) == Status::kOk);
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 4, 0x4000, 16)) == Status::kOk);
    run(p);
    auto c = p.a.drain_cq();
    REQUIRE(c.size() == 4);
    CHECK(c[0].wr_id == 1);
    CHECK(c[0].status == WcStatus::kSuccess);
    CHECK(c[0].opcode == WcOpcode::kFetchAdd);
    CHECK(c[0].len_bytes == 8);
    CHECK(c[1].opcode == WcOpcode::kCmpSwap);
    CHECK(c[2].opcode == WcOpcode::kCmpSwap);
    CHECK(c[3].opcode == WcOpcode::kSend);
    CHECK(load_u64(p.a.mem() + 0x2000) == 10);
    CHECK(load_u64(p.a.mem() + 0x2008) == 15);  // matched: 99 stored
    CHECK(load_u64(p.a.mem() + 0x2010) == 99);  // no match: nothing stored
    CHECK(load_u64(p.b.mem() + 0x100) == 99);
    CHECK(p.b.drain_cq().size() == 1);
    // On the wire: AtomicETH with SwapAdd / Compare as IB lays them out.
    const Packet& cas = p.a_to_b[1];
    CHECK(cas.hdr.bth.opcode == op(Opcode::kCompareSwap));
    CHECK(cas.hdr.atomic.va == kBase + 0x100);
    CHECK(cas.hdr.atomic.rkey == 0x8000);
    CHECK(cas.hdr.atomic.swap_add == 99);
    CHECK(cas.hdr.atomic.compare == 15);
    CHECK(cas.payload.empty());
  }
}

TEST_CASE("atomics: a lost ACK or request is retried and the atomic still runs once") {
  for (bool sr : {false, true}) {
    for (bool lose_ack : {true, false}) {
      INFO("selective repeat " << sr << ", lose the " << (lose_ack ? "ACK" : "request"));
      QpPair p(attr(sr));
      int dropped = 0;
      p.filter = [&](bool from_a, Packet& pkt) {
        const bool target = lose_ack
                                ? (!from_a && pkt.hdr.bth.opcode == op(Opcode::kAtomicAcknowledge))
                                : (from_a && pkt.hdr.bth.opcode == op(Opcode::kFetchAdd));
        if (target && dropped < 2) {
          ++dropped;
          return false;
        }
        return true;
      };
      for (uint64_t i = 0; i < 4; ++i) {
        REQUIRE(p.a.qp.post_send(make_atomic(WrOpcode::kFetchAdd, i, 0x2000 + 8 * i, 0x100, 1)) ==
                Status::kOk);
      }
      run(p);
      auto c = p.a.drain_cq();
      REQUIRE(c.size() == 4);
      for (uint64_t i = 0; i < 4; ++i) {
        CHECK(c[i].status == WcStatus::kSuccess);
        CHECK(load_u64(p.a.mem() + 0x2000 + 8 * i) == i);  // each saw the one before it
      }
      CHECK(load_u64(p.b.mem() + 0x100) == 4);  // four adds, none run twice
      CHECK(dropped == 2);
      CHECK(p.b.qp.counters().rx_duplicates + p.a.qp.counters().tx_retransmits > 0);
    }
  }
}

TEST_CASE("atomics: READs and atomics share max_rd_atomic") {
  QpAttr a = default_attr();
  a.max_rd_atomic = 2;
  QpPair p(a);
  for (uint64_t i = 0; i < 3; ++i) {
    REQUIRE(p.a.qp.post_send(make_atomic(WrOpcode::kFetchAdd, i, 0x2000 + 8 * i, 0x100, 1)) ==
            Status::kOk);
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kRead, 10 + i, 0x3000 + 64 * i, 64, 0x200)) ==
            Status::kOk);
  }
  // Without answers, no more than two are on the wire.
  TxPacket t;
  uint32_t sent = 0;
  while (p.a.qp.poll_tx(p.now_ns, t)) ++sent;
  CHECK(sent == 2);
  run(p);
  CHECK(p.a.drain_cq().size() == 6);
  CHECK(load_u64(p.b.mem() + 0x100) == 3);
}

TEST_CASE("atomics: malformed posts are refused; remote errors complete with their status") {
  QpPair p;
  SendWr w = make_atomic(WrOpcode::kFetchAdd, 1, 0x2000, 0x100, 1);
  w.sge[0].len_bytes = 4;
  CHECK(p.a.qp.post_send(w) == Status::kInvalidWr);
  w.sge[0].len_bytes = 8;
  w.num_sge = 2;
  w.sge[1] = w.sge[0];
  CHECK(p.a.qp.post_send(w) == Status::kInvalidWr);

  SECTION("unaligned remote address: invalid request") {
    REQUIRE(p.a.qp.post_send(make_atomic(WrOpcode::kFetchAdd, 2, 0x2000, 0x104, 1)) == Status::kOk);
    run(p);
    auto c = p.a.drain_cq();
    REQUIRE(c.size() == 1);
    CHECK(c[0].status == WcStatus::kRemoteInvalidRequest);
    CHECK(c[0].opcode == WcOpcode::kFetchAdd);
  }
  SECTION("peer QP without remote atomic access: remote access error") {
    QpAttr only_rw = default_attr();
    only_rw.access_flags = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
    QpPair s(only_rw);
    REQUIRE(s.a.qp.post_send(make_atomic(WrOpcode::kCmpSwap, 3, 0x2000, 0x100, 0, 1)) ==
            Status::kOk);
    run(s);
    auto c = s.a.drain_cq();
    REQUIRE(c.size() == 1);
    CHECK(c[0].status == WcStatus::kRemoteAccessError);
    CHECK(load_u64(s.b.mem() + 0x100) == 0);
  }
}

TEST_CASE("atomics: a peer's fatal error still answers the atomic and READ before it") {
  for (bool sr : {false, true}) {
    INFO("selective repeat " << sr);
    QpPair p(attr(sr));
    store_u64(p.b.mem() + 0x100, 5);
    for (uint32_t i = 0; i < 2048; ++i) p.b.mem()[0x1000 + i] = static_cast<uint8_t>(i * 3);
    REQUIRE(p.a.qp.post_send(make_atomic(WrOpcode::kFetchAdd, 1, 0x2000, 0x100, 10)) ==
            Status::kOk);
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kRead, 2, 0x4000, 2048, 0x1000)) == Status::kOk);
    SendWr w = make_wr(WrOpcode::kWrite, 3, 0, 16, 0);
    w.rkey = 0xdead;  // the responder NAKs it and goes to ERR
    REQUIRE(p.a.qp.post_send(w) == Status::kOk);
    run(p);
    // The NAK says the WRs before the WRITE completed: the atomic ran (its result comes
    // back) and the READ's data arrived, as rxe and hardware answer them.
    auto c = p.a.drain_cq();
    REQUIRE(c.size() == 3);
    CHECK(c[0].wr_id == 1);
    CHECK(c[0].status == WcStatus::kSuccess);
    CHECK(load_u64(p.a.mem() + 0x2000) == 5);
    CHECK(load_u64(p.b.mem() + 0x100) == 15);
    CHECK(c[1].wr_id == 2);
    CHECK(c[1].status == WcStatus::kSuccess);
    CHECK(std::equal(p.a.mem() + 0x4000, p.a.mem() + 0x4000 + 2048, p.b.mem() + 0x1000));
    CHECK(c[2].wr_id == 3);
    CHECK(c[2].status == WcStatus::kRemoteAccessError);
    CHECK(p.a.qp.counters().timeouts == 0);
    CHECK(p.b.qp.state() == QpState::kErr);
    CHECK(p.a.qp.state() == QpState::kErr);
  }
}

TEST_CASE("atomics: a shared counter under random loss, both recovery modes") {
  for (bool sr : {false, true}) {
    INFO("selective repeat " << sr);
    QpAttr a = attr(sr);
    a.retry_cnt = 7;
    QpPair p(a);
    std::mt19937 rng(sr ? 7 : 11);
    p.filter = [&](bool, Packet&) { return rng() % 100 >= 5; };  // 5 % loss both ways
    constexpr uint64_t kTotal = 500;
    uint64_t posted = 0, done = 0, adds = 0;
    for (int round = 0; done < kTotal && round < 200'000; ++round) {
      while (posted < kTotal && posted - done < 8) {
        const uint64_t slot = posted % 64;
        // Every third is a compare-and-swap that never matches (the counter never
        // reaches ~0): it must leave the counter alone however often it is resent.
        const bool cas = posted % 3 == 0;
        SendWr w = cas ? make_atomic(WrOpcode::kCmpSwap, posted, 0x2000 + 8 * slot, 0x100, ~0ull, 0)
                       : make_atomic(WrOpcode::kFetchAdd, posted, 0x2000 + 8 * slot, 0x100, 1);
        if (!cas) ++adds;
        REQUIRE(p.a.qp.post_send(w) == Status::kOk);
        ++posted;
      }
      p.pump();
      for (const Completion& c : p.a.drain_cq()) {
        REQUIRE(c.status == WcStatus::kSuccess);
        ++done;
      }
      p.advance_to_deadline();
      REQUIRE(p.a.qp.state() == QpState::kRts);
    }
    CHECK(done == kTotal);
    CHECK(load_u64(p.b.mem() + 0x100) == adds);
  }
}
