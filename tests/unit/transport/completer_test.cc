#include <catch2/catch.hpp>

#include "qp_pair.h"
#include "wire/frame.h"
#include "wire/psn.h"

using namespace conduit::transport;
using namespace conduit::transport::test;
using conduit::wire::AethType;
using conduit::wire::Opcode;
namespace wire = conduit::wire;

namespace {

void fill(uint8_t* p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(seed + i * 31);
}

// Runs the pair (packets, then timers) until nothing is left to do.
void run(QpPair& p, int max_rounds = 1000) {
  for (int i = 0; i < max_rounds; ++i) {
    p.pump();
    if (!p.advance_to_deadline()) return;
  }
}

}  // namespace

TEST_CASE("completer: one ACK completes every WR up to its PSN") {
  QpPair p;
  int acks_seen = 0;
  // Drop the first two ACKs, if the responder sends them separately.
  p.filter = [&](bool from_a, Packet&) { return from_a || ++acks_seen >= 3; };
  for (int i = 0; i < 3; ++i) {
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, i, 0, 100)) == Status::kOk);
    TxPacket tx;
    REQUIRE(p.a.qp.poll_tx(p.now_ns, tx));
    Packet pkt = copy_packet(tx);
    CHECK(p.b.qp.on_packet(p.now_ns, pkt.hdr, pkt.payload) == RxResult::kAccepted);
    p.pump();  // one ACK each
  }
  CHECK(acks_seen == 3);
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(ca[i].wr_id == static_cast<uint64_t>(i));
  CHECK(p.a.qp.next_deadline_ns() == Qp::kNoDeadline);
}

TEST_CASE("completer: go-back-N after a sequence NAK") {
  QpPair p;
  fill(p.a.mem(), 8 * 1024, 1);
  bool dropped = false;
  p.filter = [&](bool from_a, Packet& pkt) {
    if (from_a && pkt.hdr.bth.psn == 102 && !dropped) {
      dropped = true;
      return false;
    }
    return true;
  };
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 8 * 1024, 0x40000)) == Status::kOk);
  p.pump();
  CHECK(p.a.qp.counters().naks_received == 1);
  CHECK(p.a.qp.counters().retries == 1);
  CHECK(p.b.qp.counters().naks_sent == 1);
  // 8 first sends, then 102..107 again.
  REQUIRE(p.a_to_b.size() == 14);
  CHECK(p.a_to_b[8].hdr.bth.psn == 102);
  CHECK(p.a_to_b[8].hdr.bth.opcode == op(Opcode::kWriteMiddle));
  CHECK(std::memcmp(p.b.mem() + 0x40000, p.a.mem(), 8 * 1024) == 0);
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 1);
  CHECK(ca[0].status == WcStatus::kSuccess);
}

TEST_CASE("completer: local ACK timeout retransmits from the oldest unacknowledged PSN") {
  QpPair p;
  int drops = 0;
  p.filter = [&](bool from_a, Packet& pkt) {
    if (from_a && pkt.hdr.bth.psn == 101 && drops == 0) {
      ++drops;
      return false;
    }
    return true;
  };
  REQUIRE(p.b.qp.post_recv(make_recv(1, 0, 64)) == Status::kOk);
  REQUIRE(p.b.qp.post_recv(make_recv(2, 0, 64)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 1, 0, 10)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 2, 0, 10)) == Status::kOk);
  const uint64_t t0 = p.now_ns;
  p.pump();
  CHECK(p.a.drain_cq().size() == 1);
  // The last packet vanished: no NAK can come; the timer must fire.
  CHECK(p.a.qp.next_deadline_ns() == t0 + ack_timeout_ns(10));
  REQUIRE(p.advance_to_deadline());
  CHECK(p.a.qp.counters().timeouts == 1);
  p.pump();
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 1);
  CHECK(ca[0].wr_id == 2);
  CHECK(p.b.drain_cq().size() == 2);
  CHECK(p.a.qp.next_deadline_ns() == Qp::kNoDeadline);
}

TEST_CASE("completer: retry budget exhausted -> retry exceeded, ERR, flush, no hang") {
  QpPair p;  // retry_cnt 3
  p.filter = [](bool from_a, Packet&) { return !from_a; };
  for (int i = 0; i < 4; ++i) {
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, i, 0, 3000)) == Status::kOk);
  }
  const uint64_t t0 = p.now_ns;
  run(p);
  CHECK(p.a.qp.state() == QpState::kErr);
  CHECK(p.a.qp.counters().timeouts == 4);  // the first try + 3 retries, each timed out
  CHECK(p.now_ns - t0 == 4 * ack_timeout_ns(10));
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 4);
  CHECK(ca[0].wr_id == 0);
  CHECK(ca[0].status == WcStatus::kRetryExceeded);
  for (int i = 1; i < 4; ++i) CHECK(ca[i].status == WcStatus::kWrFlushError);
  CHECK(p.a.qp.next_deadline_ns() == Qp::kNoDeadline);
  // Why, for the daemon's log: the requester's oldest WR, at its first PSN; nothing was ever
  // acknowledged.
  CHECK(p.a.qp.error().side == QpError::Side::kRequester);
  CHECK(p.a.qp.error().status == WcStatus::kRetryExceeded);
  CHECK(p.a.qp.error().psn == p.a.qp.una_psn());
  CHECK(p.a.qp.last_progress_ns() == 0);
  CHECK(p.b.qp.error().side == QpError::Side::kNone);
}

TEST_CASE("completer: the error record names the PSN the peer stopped at; RESET clears it") {
  QpPair p;  // retry_cnt 3
  int seen = 0;
  // The first message goes through and is acknowledged; nothing after it does.
  p.filter = [&](bool from_a, Packet&) { return !from_a || ++seen <= 1; };
  for (int i = 0; i < 3; ++i) {
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, i, 0, 10)) == Status::kOk);
  }
  const uint32_t first = p.a.qp.una_psn();
  run(p);
  REQUIRE(p.a.qp.state() == QpState::kErr);
  CHECK(p.a.qp.error().side == QpError::Side::kRequester);
  CHECK(p.a.qp.error().psn == (first + 1));
  CHECK(p.a.qp.last_progress_ns() != 0);
  CHECK(p.a.qp.send_max_psn() == first + 3);
  QpAttr reset;
  reset.state = QpState::kReset;
  REQUIRE(p.a.qp.modify(reset, kAttrState) == Status::kOk);
  CHECK(p.a.qp.error().side == QpError::Side::kNone);
  CHECK(p.a.qp.last_progress_ns() == 0);
}

TEST_CASE("completer: progress resets the retry budget") {
  QpPair p;  // retry_cnt 3
  // Every message's only packet is dropped 3 times: 3 retries each, never 4 in a row.
  std::map<uint32_t, int> drops;
  p.filter = [&](bool from_a, Packet& pkt) { return !from_a || ++drops[pkt.hdr.bth.psn] > 3; };
  for (int i = 0; i < 5; ++i) {
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, i, 0, 10)) == Status::kOk);
  }
  run(p);
  CHECK(p.a.qp.state() == QpState::kRts);
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 5);
  for (const auto& c : ca) CHECK(c.status == WcStatus::kSuccess);
}

TEST_CASE("completer: defer_timers moves the ACK timer out, and does nothing without one") {
  QpPair p;
  p.a.qp.defer_timers(5'000'000);  // nothing outstanding: no timer to move
  CHECK(p.a.qp.next_deadline_ns() == Qp::kNoDeadline);
  p.filter = [](bool from_a, Packet&) { return !from_a; };  // nothing reaches b
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 10)) == Status::kOk);
  const uint64_t t0 = p.now_ns;
  p.pump();
  REQUIRE(p.a.qp.next_deadline_ns() == t0 + ack_timeout_ns(10));
  p.a.qp.defer_timers(5'000'000);  // its owner was descheduled for 5 ms
  CHECK(p.a.qp.next_deadline_ns() == t0 + ack_timeout_ns(10) + 5'000'000);
  p.now_ns = t0 + ack_timeout_ns(10);
  p.a.qp.on_timer(p.now_ns);
  CHECK(p.a.qp.counters().timeouts == 0);
  REQUIRE(p.advance_to_deadline());
  CHECK(p.a.qp.counters().timeouts == 1);
  CHECK(p.now_ns == t0 + ack_timeout_ns(10) + 5'000'000);
}

TEST_CASE("completer: RNR NAK waits the RNR timer, then resends") {
  QpPair p;  // min_rnr_timer 1 = 10 us
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 1, 0, 10)) == Status::kOk);
  p.pump();
  CHECK(p.a.qp.counters().rnr_naks_received == 1);
  CHECK(p.a.qp.next_deadline_ns() == p.now_ns + 10'000);
  TxPacket tx;
  CHECK_FALSE(p.a.qp.poll_tx(p.now_ns, tx));  // nothing before the RNR timer
  REQUIRE(p.b.qp.post_recv(make_recv(1, 0, 64)) == Status::kOk);
  REQUIRE(p.advance_to_deadline());
  p.pump();
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 1);
  CHECK(ca[0].status == WcStatus::kSuccess);
}

TEST_CASE("completer: RNR retry exhausted -> RNR retry exceeded") {
  QpPair p;  // rnr_retry 3
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 1, 0, 10)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 2, 0, 10)) == Status::kOk);
  run(p);
  CHECK(p.a.qp.counters().rnr_naks_received == 4);
  CHECK(p.a.qp.state() == QpState::kErr);
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 2);
  CHECK(ca[0].status == WcStatus::kRnrRetryExceeded);
  CHECK(ca[1].status == WcStatus::kWrFlushError);
}

TEST_CASE("completer: rnr_retry 7 retries forever") {
  QpAttr a = default_attr();
  a.rnr_retry = 7;
  QpPair p(a);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 1, 0, 10)) == Status::kOk);
  for (int i = 0; i < 50; ++i) {
    p.pump();
    REQUIRE(p.advance_to_deadline());
  }
  CHECK(p.a.qp.counters().rnr_naks_received == 50);
  CHECK(p.a.qp.state() == QpState::kRts);
  REQUIRE(p.b.qp.post_recv(make_recv(1, 0, 64)) == Status::kOk);
  run(p);
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 1);
  CHECK(ca[0].status == WcStatus::kSuccess);
}

TEST_CASE("completer: remote access error and invalid request complete with an error") {
  SECTION("access error") {
    QpPair p;
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 10)) == Status::kOk);
    SendWr bad = make_wr(WrOpcode::kWrite, 2, 0, 10);
    bad.rkey = 0x8123;
    REQUIRE(p.a.qp.post_send(bad) == Status::kOk);
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kRead, 3, 0, 10)) == Status::kOk);
    run(p);
    auto ca = p.a.drain_cq();
    REQUIRE(ca.size() == 3);
    CHECK(ca[0].status == WcStatus::kSuccess);
    CHECK(ca[1].wr_id == 2);
    CHECK(ca[1].status == WcStatus::kRemoteAccessError);
    CHECK(ca[2].status == WcStatus::kWrFlushError);
    CHECK(p.a.qp.state() == QpState::kErr);
    CHECK(p.b.qp.state() == QpState::kErr);
  }
  SECTION("invalid request") {
    QpPair p;
    REQUIRE(p.b.qp.post_recv(make_recv(1, 0, 16)) == Status::kOk);
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 1, 0, 100)) == Status::kOk);
    run(p);
    auto ca = p.a.drain_cq();
    REQUIRE(ca.size() == 1);
    CHECK(ca[0].status == WcStatus::kRemoteInvalidRequest);
    auto cb = p.b.drain_cq();
    REQUIRE(cb.size() == 1);
    CHECK(cb[0].status == WcStatus::kLocalLengthError);
  }
}

TEST_CASE("completer: a lost READ response is asked for again from where it stopped") {
  QpPair p;
  fill(p.b.mem(), 5000, 4);
  bool dropped = false;
  p.filter = [&](bool from_a, Packet& pkt) {
    if (!from_a && pkt.hdr.bth.psn == 102 && !dropped) {
      dropped = true;
      return false;
    }
    return true;
  };
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kRead, 1, 0x1000, 5000, 0)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 2, 0, 10, 0x50000)) == Status::kOk);
  run(p);
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 2);
  CHECK(ca[0].status == WcStatus::kSuccess);
  CHECK(ca[1].status == WcStatus::kSuccess);
  CHECK(std::memcmp(p.a.mem() + 0x1000, p.b.mem(), 5000) == 0);
  // The second READ request starts at PSN 102 and asks for the rest.
  bool found = false;
  for (const auto& pkt : p.a_to_b) {
    if (pkt.hdr.bth.opcode == op(Opcode::kReadRequest) && pkt.hdr.bth.psn == 102) {
      found = true;
      CHECK(pkt.hdr.reth.va == kBase + 2048);
      CHECK(pkt.hdr.reth.dma_len == 5000 - 2048);
    }
  }
  CHECK(found);
}

TEST_CASE("completer: stale and impossible responses are ignored") {
  QpPair p;
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 10)) == Status::kOk);
  p.pump();
  conduit::wire::RoceHeader h;
  h.bth.opcode = op(Opcode::kAcknowledge);
  h.bth.dest_qp = 0x11;
  h.bth.psn = 500;  // never sent
  h.aeth = conduit::wire::Aeth::ack(0);
  CHECK(p.a.qp.on_packet(p.now_ns, h, {}) == RxResult::kDropped);
  h.bth.psn = 50;  // long ago
  CHECK(p.a.qp.on_packet(p.now_ns, h, {}) != RxResult::kAccepted);
  h.bth.opcode = op(Opcode::kReadResponseOnly);
  h.bth.psn = 100;
  CHECK(p.a.qp.on_packet(p.now_ns, h, {}) != RxResult::kAccepted);
  CHECK(p.a.qp.state() == QpState::kRts);
  CHECK(p.a.drain_cq().size() == 1);
}

TEST_CASE("completer: a fatal NAK first completes the SEND/WRITEs before its PSN, both modes") {
  for (bool sr : {false, true}) {
    INFO("selective repeat " << sr);
    QpAttr attr = default_attr();
    attr.selective_repeat = sr;
    QpPair p(attr);
    // Every ACK is lost: only the NAK tells A that B executed the WRs before it.
    p.filter = [](bool from_a, Packet& pkt) {
      return from_a || pkt.hdr.aeth.type() != AethType::kAck;
    };
    REQUIRE(p.b.qp.post_recv(make_recv(1, 0, 64)) == Status::kOk);
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 1, 0, 16)) == Status::kOk);
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 2, 0, 3000, 0x4000)) == Status::kOk);
    SendWr bad = make_wr(WrOpcode::kWrite, 3, 0, 16);
    bad.rkey = 0x8123;
    REQUIRE(p.a.qp.post_send(bad) == Status::kOk);
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 4, 0, 16)) == Status::kOk);
    p.pump();
    CHECK(wr_statuses(p.a.drain_cq()) == WcList{{1, WcStatus::kSuccess},
                                                {2, WcStatus::kSuccess},
                                                {3, WcStatus::kRemoteAccessError},
                                                {4, WcStatus::kWrFlushError}});
    CHECK(p.a.qp.state() == QpState::kErr);
    CHECK(p.a.qp.error().status == WcStatus::kRemoteAccessError);
    CHECK(p.a.qp.counters().timeouts == 0);
  }
}

TEST_CASE("completer: a fatal NAK past a READ missing its responses retries the READ, as rxe") {
  for (bool sr : {false, true}) {
    INFO("selective repeat " << sr);
    QpAttr attr = default_attr();
    attr.selective_repeat = sr;
    QpPair p(attr);
    // The READ's only response is lost; the NAK behind it arrives.
    p.filter = [](bool from_a, Packet& pkt) {
      return from_a || pkt.hdr.bth.opcode != op(Opcode::kReadResponseOnly);
    };
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 16, 0x100)) == Status::kOk);
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kRead, 2, 0x4000, 16, 0x1000)) == Status::kOk);
    SendWr bad = make_wr(WrOpcode::kWrite, 3, 0, 16);
    bad.rkey = 0x8123;
    REQUIRE(p.a.qp.post_send(bad) == Status::kOk);
    run(p);
    // The WRITE before the READ completes; the READ's data never came, so it is neither a
    // success nor the NAK's error: it is asked for again, and fails when B (in ERR) never
    // answers. The NAKed WRITE is flushed behind it.
    CHECK(wr_statuses(p.a.drain_cq()) == WcList{{1, WcStatus::kSuccess},
                                                {2, WcStatus::kRetryExceeded},
                                                {3, WcStatus::kWrFlushError}});
  }
}

TEST_CASE("completer: a fatal NAK behind a READ missing its response is kept until the READ ends") {
  for (int mode = 0; mode < 4; ++mode) {
    const bool sr = mode & 1;
    const bool atomic = mode & 2;  // an atomic whose result is late too, between the two
    INFO("selective repeat " << sr << ", atomic " << atomic);
    QpAttr attr = default_attr();
    attr.selective_repeat = sr;
    QpPair p(attr);
    fill(p.b.mem() + 0x1000, 16, 3);
    // The READ's response is late: held back until the NAK behind it has arrived.
    std::vector<Packet> late;
    p.filter = [&late](bool from_a, Packet& pkt) {
      if (from_a || (pkt.hdr.bth.opcode != op(Opcode::kReadResponseOnly) &&
                     pkt.hdr.bth.opcode != op(Opcode::kAtomicAcknowledge))) {
        return true;
      }
      late.push_back(pkt);
      return false;
    };
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kRead, 1, 0x4000, 16, 0x1000)) == Status::kOk);
    if (atomic) {
      REQUIRE(p.a.qp.post_send(make_atomic(WrOpcode::kFetchAdd, 9, 0x5000, 0x3000, 1)) ==
              Status::kOk);
    }
    SendWr bad = make_wr(WrOpcode::kWrite, 2, 0, 16);
    bad.rkey = 0x8123;
    REQUIRE(p.a.qp.post_send(bad) == Status::kOk);
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 3, 0, 16, 0x2000)) == Status::kOk);
    p.pump();
    REQUIRE(p.b.qp.state() == QpState::kErr);  // B NAKed the WRITE: it answers nothing more
    CHECK(p.a.qp.counters().naks_received == 1);
    CHECK(p.a.drain_cq().empty());
    REQUIRE(late.size() == (atomic ? 2u : 1u));
    CHECK(p.a.qp.on_packet(p.now_ns, late[0].hdr, late[0].payload) == RxResult::kAccepted);
    p.pump();
    if (atomic) {  // the NAK waits for the atomic's result too
      CHECK(p.a.qp.state() == QpState::kRts);
      CHECK(p.a.qp.on_packet(p.now_ns, late[1].hdr, late[1].payload) == RxResult::kAccepted);
    }
    run(p);
    WcList want{{1, WcStatus::kSuccess}};
    if (atomic) want.emplace_back(9, WcStatus::kSuccess);
    want.insert(want.end(), {{2, WcStatus::kRemoteAccessError}, {3, WcStatus::kWrFlushError}});
    CHECK(wr_statuses(p.a.drain_cq()) == want);
    CHECK(std::memcmp(p.a.mem() + 0x4000, p.b.mem() + 0x1000, 16) == 0);
    CHECK(p.a.qp.state() == QpState::kErr);
    CHECK(p.a.qp.error().status == WcStatus::kRemoteAccessError);
    CHECK(p.a.qp.counters().timeouts == 0);
  }
}

TEST_CASE("completer: while a fatal NAK is held, nothing at or past its PSN is sent, both modes") {
  for (bool sr : {false, true}) {
    INFO("selective repeat " << sr);
    QpAttr attr = default_attr();
    attr.selective_repeat = sr;
    QpPair p(attr);
    fill(p.b.mem() + 0x1000, 16, 3);
    // The READ's response is late; every request A sends once the NAK behind it is in is logged.
    std::vector<Packet> late;
    std::vector<uint32_t> psns_after_nak;
    bool nak_in = false;
    p.filter = [&](bool from_a, Packet& pkt) {
      if (from_a) {
        if (nak_in) psns_after_nak.push_back(pkt.hdr.bth.psn);
        return true;
      }
      if (pkt.hdr.bth.opcode == op(Opcode::kReadResponseOnly)) {
        late.push_back(pkt);
        return false;
      }
      if (pkt.hdr.bth.opcode == op(Opcode::kAcknowledge) && pkt.hdr.aeth.type() == AethType::kNak) {
        nak_in = true;
      }
      return true;
    };
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kRead, 1, 0x4000, 16, 0x1000)) == Status::kOk);
    SendWr bad = make_wr(WrOpcode::kWrite, 2, 0, 16);  // PSN 101
    bad.rkey = 0x8123;
    REQUIRE(p.a.qp.post_send(bad) == Status::kOk);
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 3, 0, 16, 0x2000)) == Status::kOk);
    p.pump();
    REQUIRE(nak_in);
    REQUIRE(p.b.qp.state() == QpState::kErr);
    REQUIRE(late.size() == 1);
    const uint32_t nak_psn = 101;
    // More WRs while it is held: 64-byte SENDs (the fused burst path's) and a WRITE.
    for (uint64_t id = 4; id < 8; ++id) {
      REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, id, 64 * id, 64)) == Status::kOk);
    }
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 8, 0, 3000, 0x8000)) == Status::kOk);
    // A's frames through the burst call, and after two timer expiries (which resend the READ).
    wire::ParseOptions popt;
    popt.pmtu_bytes = 1024;
    const wire::FrameTemplate t = wire::make_frame_template(wire::FrameAddr{});
    auto a_frames = [&] {
      std::vector<std::vector<uint8_t>> bufs(8, std::vector<uint8_t>(2048));
      std::vector<std::span<uint8_t>> rooms(bufs.begin(), bufs.end());
      std::vector<wire::BuildResult> res(bufs.size());
      for (size_t n; (n = p.a.qp.poll_tx_frames(p.now_ns, t, rooms, res.data())) != 0;) {
        for (size_t i = 0; i < n; ++i) {
          REQUIRE(res[i].ok());
          wire::ParsedFrame pf;
          REQUIRE(wire::parse_frame(std::span<const uint8_t>(bufs[i].data(), res[i].len_bytes),
                                    popt, pf) == wire::DropReason::kNone);
          psns_after_nak.push_back(pf.hdr.bth.psn);  // B is in ERR: it would drop them
        }
      }
    };
    a_frames();
    for (int i = 0; i < 2; ++i) {
      REQUIRE(p.advance_to_deadline());
      a_frames();
    }
    CHECK(p.a.qp.state() == QpState::kRts);
    for (uint32_t psn : psns_after_nak) CHECK(psn < nak_psn);                    // no wrap here
    CHECK(std::count(psns_after_nak.begin(), psns_after_nak.end(), 100u) >= 1);  // the READ
    // The READ's answer releases the NAK: the same completions as without the new WRs.
    CHECK(p.a.qp.on_packet(p.now_ns, late[0].hdr, late[0].payload) == RxResult::kAccepted);
    CHECK(wr_statuses(p.a.drain_cq()) == WcList{{1, WcStatus::kSuccess},
                                                {2, WcStatus::kRemoteAccessError},
                                                {3, WcStatus::kWrFlushError},
                                                {4, WcStatus::kWrFlushError},
                                                {5, WcStatus::kWrFlushError},
                                                {6, WcStatus::kWrFlushError},
                                                {7, WcStatus::kWrFlushError},
                                                {8, WcStatus::kWrFlushError}});
    CHECK(std::memcmp(p.a.mem() + 0x4000, p.b.mem() + 0x1000, 16) == 0);
    CHECK(p.a.qp.state() == QpState::kErr);
    CHECK(p.a.qp.error().status == WcStatus::kRemoteAccessError);
  }
}
