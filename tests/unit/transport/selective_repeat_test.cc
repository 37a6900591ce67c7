#include <catch2/catch.hpp>

#include "qp_pair.h"
#include "wire/psn.h"

using namespace conduit::transport;
using namespace conduit::transport::test;
using conduit::wire::Opcode;

namespace {

QpAttr sr_attr() {
  QpAttr a = default_attr();
  a.selective_repeat = true;
  return a;
}

void fill(uint8_t* p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(seed + i * 13);
}

void run(QpPair& p) {
  for (int i = 0; i < 1000; ++i) {
    p.pump();
    if (!p.advance_to_deadline()) return;
  }
}

// Drops each listed A->B PSN the first time it is sent.
std::function<bool(bool, Packet&)> drop_once(std::vector<uint32_t> psns) {
  auto dropped = std::make_shared<std::vector<uint32_t>>();
  return [psns, dropped](bool from_a, Packet& pkt) {
    if (!from_a) return true;
    for (uint32_t x : psns) {
      if (pkt.hdr.bth.psn == x &&
          std::find(dropped->begin(), dropped->end(), x) == dropped->end()) {
        dropped->push_back(x);
        return false;
      }
    }
    return true;
  };
}

}  // namespace

TEST_CASE("selective repeat: every packet carries its placement, PMTU - 24 data bytes each") {
  QpPair p(sr_attr());
  fill(p.a.mem(), 3000, 1);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 3000, 0x9000)) == Status::kOk);
  p.pump();
  REQUIRE(p.a_to_b.size() == 3);
  CHECK(p.a_to_b[0].hdr.bth.opcode == op(Opcode::kWriteFirst));
  CHECK(p.a_to_b[1].hdr.bth.opcode == op(Opcode::kWriteMiddle));
  CHECK(p.a_to_b[2].hdr.bth.opcode == op(Opcode::kWriteLast));
  for (const auto& pkt : p.a_to_b) CHECK(pkt.payload.size() == 1024);
  const SrPlacement s = SrPlacement::decode(p.a_to_b[1].payload.data());
  CHECK(s.va == kBase + 0x9000);
  CHECK(s.rkey == 0x8000);
  CHECK(s.msg_len_bytes == 3000);
  CHECK(s.msg_first_psn == 100);
  CHECK(std::memcmp(p.a_to_b[1].payload.data() + 24, p.a.mem() + 1000, 1000) == 0);
  CHECK(std::memcmp(p.b.mem() + 0x9000, p.a.mem(), 3000) == 0);
}

TEST_CASE("selective repeat: the responder places out-of-order packets and only holes are resent") {
  QpPair p(sr_attr());
  fill(p.a.mem(), 5000, 7);
  p.filter = drop_once({101});
  REQUIRE(p.b.qp.post_recv(make_recv(1, 0x20000, 8192)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 1, 0, 5000)) == Status::kOk);
  run(p);
  // 5 packets, plus 101 once more.
  REQUIRE(p.a_to_b.size() == 6);
  CHECK(p.a_to_b[5].hdr.bth.psn == 101);
  CHECK(p.a.qp.counters().tx_retransmits == 1);
  CHECK(p.a.qp.counters().timeouts == 0);
  // SACKs: NAK syndrome 0x60, BTH PSN = cumulative (101), MSN field = arrived PSN.
  int sacks = 0;
  for (const auto& pkt : p.b_to_a) {
    if (pkt.hdr.aeth.syndrome == 0x60) {
      CHECK(pkt.hdr.bth.psn == 101);
      CHECK(pkt.hdr.aeth.msn == static_cast<uint32_t>(102 + sacks));
      ++sacks;
    }
  }
  CHECK(sacks == 3);
  auto cb = p.b.drain_cq();
  REQUIRE(cb.size() == 1);
  CHECK(cb[0].len_bytes == 5000);
  CHECK(std::memcmp(p.b.mem() + 0x20000, p.a.mem(), 5000) == 0);
  REQUIRE(p.a.drain_cq().size() == 1);
}

TEST_CASE("selective repeat: completions stay in PSN order") {
  QpPair p(sr_attr());
  bool allow = false;
  p.filter = [&](bool from_a, Packet& pkt) { return allow || !from_a || pkt.hdr.bth.psn != 100; };
  REQUIRE(p.b.qp.post_recv(make_recv(1, 0, 4096)) == Status::kOk);
  REQUIRE(p.b.qp.post_recv(make_recv(2, 0x8000, 4096)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 1, 0, 1500)) == Status::kOk);
  SendWr w = make_wr(WrOpcode::kSendImm, 2, 0, 10);
  w.imm = 99;
  REQUIRE(p.a.qp.post_send(w) == Status::kOk);
  p.pump();
  CHECK(p.b.qp.counters().rx_out_of_sequence == 2);  // 101 and 102 placed ahead of 100
  CHECK(p.b.drain_cq().empty());                     // but nothing completes before 100 arrives
  allow = true;
  run(p);
  auto cb = p.b.drain_cq();
  REQUIRE(cb.size() == 2);
  CHECK(cb[0].wr_id == 1);
  CHECK(cb[0].len_bytes == 1500);
  CHECK(cb[1].wr_id == 2);
  CHECK(cb[1].imm == 99);
}

TEST_CASE("selective repeat: a READ behind a hole is taken in order, after the hole") {
  QpPair p(sr_attr());
  fill(p.b.mem() + 0x4000, 3000, 3);
  p.filter = drop_once({100});
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 100, 0x100)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kRead, 2, 0x1000, 3000, 0x4000)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 3, 0, 100, 0x200)) == Status::kOk);
  run(p);
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 3);
  for (const auto& c : ca) CHECK(c.status == WcStatus::kSuccess);
  CHECK(std::memcmp(p.a.mem() + 0x1000, p.b.mem() + 0x4000, 3000) == 0);
}

TEST_CASE("selective repeat: RTO-low with few packets in flight, RTO-high with many") {
  QpConfig cfg = QpPair::make_cfg(0x11);
  QpPair p(sr_attr(), 100, 5000, cfg);
  p.filter = [](bool from_a, Packet&) { return !from_a; };
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 10)) == Status::kOk);
  const uint64_t t0 = p.now_ns;
  p.pump();
  CHECK(p.a.qp.next_deadline_ns() == t0 + cfg.rto_low_ns);
  QpPair q(sr_attr(), 100, 5000, cfg);
  q.filter = [](bool from_a, Packet&) { return !from_a; };
  REQUIRE(q.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 10 * 1000)) == Status::kOk);
  q.pump();
  CHECK(q.a.qp.next_deadline_ns() == q.now_ns + cfg.rto_high_ns);
}

TEST_CASE("selective repeat: the BDP cap bounds outstanding packets") {
  QpConfig cfg = QpPair::make_cfg(0x11);
  cfg.sr_bdp_bytes = 8 * 1024;  // 8 packets at PMTU 1024
  QpPair p(sr_attr(), 100, 5000, cfg);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 50 * 1000)) == Status::kOk);
  TxPacket tx;
  int sent = 0;
  while (p.a.qp.poll_tx(p.now_ns, tx)) ++sent;
  CHECK(sent == 8);
}

TEST_CASE(
    "selective repeat: an RNR NAK for an out-of-order packet acknowledges nothing before it") {
  QpPair p(sr_attr());
  p.filter = drop_once({100});
  REQUIRE(p.b.qp.post_recv(make_recv(1, 0, 64)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 1, 0, 10)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 2, 0, 10)) == Status::kOk);
  p.pump();
  CHECK(p.b.qp.counters().rnr_naks_sent >= 1);
  CHECK(p.a.qp.una_psn() == 100);
  CHECK(p.a.drain_cq().empty());
  REQUIRE(p.b.qp.post_recv(make_recv(2, 0x100, 64)) == Status::kOk);
  run(p);
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 2);
  CHECK(ca[0].status == WcStatus::kSuccess);
  CHECK(ca[1].status == WcStatus::kSuccess);
  auto cb = p.b.drain_cq();
  REQUIRE(cb.size() == 2);
  CHECK(cb[0].wr_id == 1);
  CHECK(cb[1].wr_id == 2);
}

TEST_CASE("selective repeat: RTOs resend early, the retry budget runs on the local ACK timeout") {
  // A dead link: the RTO (RTO-low, 100 us here) resends and doubles each time, but the QP
  // fails only after retry_cnt + 1 ACK timeouts without progress (4.2 ms each at timeout 10),
  // as under go-back-N; charging a retry per RTO failed SR QPs after about half a millisecond
  // of a descheduled peer.
  QpAttr attr = sr_attr();
  QpPair p(attr);
  std::vector<uint64_t> sent_at;
  p.filter = [&](bool from_a, Packet&) {
    if (from_a) sent_at.push_back(p.now_ns);
    return false;
  };
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 10)) == Status::kOk);
  const uint64_t t0 = p.now_ns;
  std::vector<Completion> done;
  for (int i = 0; i < 10000 && done.empty(); ++i) {
    p.pump();
    done = p.a.drain_cq();
    if (!done.empty() || !p.advance_to_deadline()) break;
  }
  REQUIRE(done.size() == 1);
  CHECK(done[0].status == WcStatus::kRetryExceeded);
  const uint64_t elapsed = p.now_ns - t0;
  const uint64_t period = ack_timeout_ns(attr.timeout);
  CHECK(elapsed >= (attr.retry_cnt + 1) * period);
  CHECK(elapsed <= (attr.retry_cnt + 1) * period + QpPair::make_cfg(0x11).rto_high_ns);
  // The resends back off: 100, 200, 400, 800, 1600 us apart, then up to the first point the
  // budget is charged (4.19 ms after the first send), then one local ACK timeout apart; the
  // expiry that finds the budget spent fails the QP and sends nothing.
  const uint64_t rto_low = QpPair::make_cfg(0x11).rto_low_ns;
  REQUIRE(sent_at.size() == 1 + 5 + size_t{attr.retry_cnt});
  for (size_t i = 0; i < 5; ++i) CHECK(sent_at[i + 1] - sent_at[i] == rto_low << i);
  CHECK(sent_at[6] - sent_at[0] == period);
  for (size_t i = 6; i + 1 < sent_at.size(); ++i) CHECK(sent_at[i + 1] - sent_at[i] == period);
  CHECK(p.a.qp.rto_backoff() > 0);
}

namespace {

// SR pair whose B -> A packets (ACKs, SACKs) wait in `held` until deliver() hands them to A.
struct HeldAcks {
  QpPair p;
  std::vector<Packet> held;
  explicit HeldAcks(QpConfig cfg = QpPair::make_cfg(0x11)) : p(sr_attr(), 100, 5000, cfg) {
    p.filter = [this](bool from_a, Packet& pkt) {
      if (from_a) return true;
      held.push_back(pkt);
      return false;
    };
  }
  void deliver() {
    for (const Packet& pkt : held) p.a.qp.on_packet(p.now_ns, pkt.hdr, pkt.payload);
    held.clear();
  }
  // A 10-packet WRITE (RTO-high applies) whose ACK reaches A `rtt_ns` after it was sent.
  void write_acked_after(uint64_t rtt_ns, uint64_t wr_id) {
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, wr_id, 0, 10 * 1000)) == Status::kOk);
    p.pump();
    REQUIRE(!held.empty());
    p.now_ns += rtt_ns;
    deliver();
    REQUIRE(p.a.qp.una_psn() == p.a.qp.send_max_psn());
  }
};

}  // namespace

TEST_CASE("selective repeat: the RTO follows the measured RTT, and never falls below RTO-high") {
  const QpConfig cfg = QpPair::make_cfg(0x11);
  HeldAcks h(cfg);
  CHECK(h.p.a.qp.srtt_ns() == 0);
  // The first sample: SRTT = R, RTTVAR = R / 2 (RFC 6298 2.2), RTO = R + 4 R / 2 = 900 us.
  h.write_acked_after(300'000, 1);
  CHECK(h.p.a.qp.srtt_ns() == 300'000);
  CHECK(h.p.a.qp.rttvar_ns() == 150'000);
  REQUIRE(h.p.a.qp.post_send(make_wr(WrOpcode::kWrite, 2, 0, 10 * 1000)) == Status::kOk);
  h.p.pump();
  CHECK(h.p.a.qp.next_deadline_ns() == h.p.now_ns + 900'000);
  // An ACK 600 us later is not a timeout any more (RTO-high alone, 320 us, fired here and
  // resent the whole window).
  h.p.now_ns += 600'000;
  h.p.a.qp.on_timer(h.p.now_ns);
  CHECK(h.p.a.qp.counters().timeouts == 0);
  h.deliver();
  // RTTVAR = 3/4 150 + 1/4 |300 - 600| = 187.5 us, SRTT = 7/8 300 + 1/8 600 = 337.5 us.
  CHECK(h.p.a.qp.srtt_ns() == 337'500);
  CHECK(h.p.a.qp.rttvar_ns() == 187'500);
  // Steady 20 us RTTs: the estimate falls, and RTO-high is the floor again.
  for (uint64_t id = 3; id < 60; ++id) h.write_acked_after(20'000, id);
  CHECK(h.p.a.qp.srtt_ns() < 25'000);
  REQUIRE(h.p.a.qp.post_send(make_wr(WrOpcode::kWrite, 99, 0, 10 * 1000)) == Status::kOk);
  h.p.pump();
  CHECK(h.p.a.qp.next_deadline_ns() == h.p.now_ns + cfg.rto_high_ns);
  CHECK(h.p.a.qp.counters().tx_retransmits == 0);
}

TEST_CASE("selective repeat: a READ's responses give no RTT sample") {
  // Its last response arrives after all of its data, however long that takes to send.
  HeldAcks h;
  REQUIRE(h.p.a.qp.post_send(make_wr(WrOpcode::kRead, 1, 0x4000, 10 * 1000)) == Status::kOk);
  h.p.pump();
  REQUIRE(!h.held.empty());
  h.p.now_ns += 200'000;
  h.deliver();
  REQUIRE(h.p.a.qp.una_psn() == h.p.a.qp.send_max_psn());
  CHECK(h.p.a.qp.srtt_ns() == 0);
  h.write_acked_after(50'000, 2);
  CHECK(h.p.a.qp.srtt_ns() == 50'000);
}

TEST_CASE("selective repeat: a resent PSN gives no RTT sample, and progress ends the backoff") {
  HeldAcks h;
  h.write_acked_after(100'000, 1);
  const uint64_t srtt = h.p.a.qp.srtt_ns();
  const uint64_t rttvar = h.p.a.qp.rttvar_ns();
  REQUIRE(srtt == 100'000);
  // The next WRITE's ACK is late: two RTOs expire (the second after twice the first), the
  // window is resent each time, and the ACK that finally comes may answer either
  // transmission: Karn's rule takes no sample from it.
  REQUIRE(h.p.a.qp.post_send(make_wr(WrOpcode::kWrite, 2, 0, 10 * 1000)) == Status::kOk);
  h.p.pump();
  const uint64_t rto = h.p.a.qp.next_deadline_ns() - h.p.now_ns;
  CHECK(rto == std::max<uint64_t>(QpPair::make_cfg(0x11).rto_high_ns, srtt + 4 * rttvar));
  h.p.now_ns += rto;
  h.p.a.qp.on_timer(h.p.now_ns);
  h.p.pump();
  CHECK(h.p.a.qp.rto_backoff() == 1);
  CHECK(h.p.a.qp.next_deadline_ns() == h.p.now_ns + 2 * rto);
  h.p.now_ns += 2 * rto;
  h.p.a.qp.on_timer(h.p.now_ns);
  h.p.pump();
  CHECK(h.p.a.qp.rto_backoff() == 2);
  CHECK(h.p.a.qp.counters().timeouts == 2);
  h.p.now_ns += 50'000;
  h.deliver();
  CHECK(h.p.a.qp.una_psn() == h.p.a.qp.send_max_psn());
  CHECK(h.p.a.qp.srtt_ns() == srtt);
  CHECK(h.p.a.qp.rttvar_ns() == rttvar);
  CHECK(h.p.a.qp.rto_backoff() == 0);
  // The next WRITE is timed again, from its first transmission.
  h.write_acked_after(200'000, 3);
  CHECK(h.p.a.qp.srtt_ns() == (7 * srtt + 200'000) / 8);
}

namespace {

// Drops each listed A->B PSN the first `times` times it is sent.
std::function<bool(bool, Packet&)> drop_a_to_b(uint32_t psn, int times) {
  auto left = std::make_shared<int>(times);
  return [psn, left](bool from_a, Packet& pkt) {
    if (!from_a || pkt.hdr.bth.psn != psn || *left == 0) return true;
    --*left;
    return false;
  };
}

}  // namespace

TEST_CASE("selective repeat: SACKed packets do not count against the BDP cap") {
  QpConfig cfg = QpPair::make_cfg(0x11);
  cfg.sr_bdp_bytes = 8 * 1024;  // 8 packets at PMTU 1024
  QpPair p(sr_attr(), 100, 5000, cfg);
  bool allow = false;
  p.filter = [&](bool from_a, Packet& pkt) { return allow || !from_a || pkt.hdr.bth.psn != 100; };
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 20 * 1000)) == Status::kOk);
  p.pump();
  // 100..107 went first; 101..107 were SACKed while 100 stayed missing, so they left the
  // pipe and new data followed (counting them stalled the QP until the RTO).
  uint32_t highest = 0;
  for (const auto& pkt : p.a_to_b) highest = std::max(highest, pkt.hdr.bth.psn);
  CHECK(highest == 119);
  CHECK(p.a.qp.una_psn() == 100);
  allow = true;
  run(p);
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 1);
  CHECK(ca[0].status == WcStatus::kSuccess);
}

TEST_CASE("selective repeat: a resent hole lost again is resent once later packets arrive") {
  QpConfig cfg = QpPair::make_cfg(0x11);
  cfg.sr_bdp_bytes = 8 * 1024;
  QpPair p(sr_attr(), 100, 5000, cfg);
  fill(p.a.mem(), 30 * 1000, 5);
  p.filter = drop_a_to_b(101, 2);  // the first transmission and the first resend
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 30 * 1000, 0x1000)) == Status::kOk);
  run(p);
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 1);
  CHECK(ca[0].status == WcStatus::kSuccess);
  CHECK(std::memcmp(p.b.mem() + 0x1000, p.a.mem(), 30 * 1000) == 0);
  // Packets sent after the first resend were SACKed: the second resend followed without
  // waiting for an RTO.
  CHECK(p.a.qp.counters().timeouts == 0);
  int sent_101 = 0;
  for (const auto& pkt : p.a_to_b) sent_101 += pkt.hdr.bth.psn == 101;
  CHECK(sent_101 == 3);
}

TEST_CASE("selective repeat: a READ re-request whose response is lost again is repeated") {
  QpPair p(sr_attr());
  fill(p.b.mem() + 0x4000, 500, 9);
  // PSN 100: a READ with one response; then one-packet WRITEs.
  auto left = std::make_shared<int>(2);
  p.filter = [left](bool from_a, Packet& pkt) {
    if (from_a || pkt.hdr.bth.psn != 100 || *left == 0) return true;
    if (pkt.hdr.bth.opcode != op(Opcode::kReadResponseOnly)) return true;
    --*left;  // the response and the response to the first re-request
    return false;
  };
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kRead, 1, 0x1000, 500, 0x4000)) == Status::kOk);
  for (uint64_t i = 0; i < 5; ++i) {
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 2 + i, 0, 100, 0x100)) == Status::kOk);
  }
  // The WRITEs' ACK passes the READ: re-requested once, and that response is lost too.
  p.pump();
  CHECK(p.a.drain_cq().empty());
  // WRITEs sent after the re-request are acknowledged while the READ still has nothing:
  // it is asked for again at once, not after an RTO.
  for (uint64_t i = 5; i < 20; ++i) {
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 2 + i, 0, 100, 0x100)) == Status::kOk);
  }
  run(p);
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 21);
  for (const auto& c : ca) CHECK(c.status == WcStatus::kSuccess);
  CHECK(std::memcmp(p.a.mem() + 0x1000, p.b.mem() + 0x4000, 500) == 0);
  CHECK(p.a.qp.counters().timeouts == 0);
}

TEST_CASE("selective repeat: an ACK past an unfinished READ completes its WRs with the READ") {
  QpPair p(sr_attr());
  fill(p.b.mem() + 0x4000, 500, 4);
  auto left = std::make_shared<int>(1);
  p.filter = [left](bool from_a, Packet& pkt) {
    if (from_a || *left == 0 || pkt.hdr.bth.opcode != op(Opcode::kReadResponseOnly)) return true;
    --*left;
    return false;
  };
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kRead, 1, 0x1000, 500, 0x4000)) == Status::kOk);
  for (uint64_t i = 0; i < 5; ++i) {
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 2 + i, 0, 100, 0x100)) == Status::kOk);
  }
  run(p);
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 6);
  for (const auto& c : ca) CHECK(c.status == WcStatus::kSuccess);
  CHECK(std::memcmp(p.a.mem() + 0x1000, p.b.mem() + 0x4000, 500) == 0);
  // Only the READ was asked for again; the WRITEs' ACK, held back by it, completed them.
  CHECK(p.a.qp.counters().timeouts == 0);
  CHECK(p.a.qp.counters().tx_retransmits == 1);
}

TEST_CASE("selective repeat: a SEND that is not the next receive in sequence is invalid") {
  // A hostile or broken peer names receive WQEs freely in the placement header: the
  // responder must not complete more receives than were posted, or another one than named.
  Endpoint b(QpPair::make_cfg(0x22));
  bring_up(b.qp, sr_attr(), 0x11, 5000, 100);
  auto send = [&b](uint32_t psn, uint32_t recv_seq) {
    conduit::wire::RoceHeader h;
    h.bth.opcode = op(Opcode::kSendOnly);
    h.bth.dest_qp = 0x22;
    h.bth.psn = psn;
    h.bth.ack_req = true;
    SrPlacement p;
    p.msg_len_bytes = 8;
    p.msg_first_psn = psn;
    p.recv_seq = recv_seq;
    std::vector<uint8_t> payload(SrPlacement::kBytes + 8, static_cast<uint8_t>(psn));
    p.encode(payload.data());
    return b.qp.on_packet(0, h, payload);
  };
  auto last_tx = [&b] {
    Packet last;
    TxPacket t;
    while (b.qp.poll_tx(0, t)) last = copy_packet(t);
    return last;
  };

  SECTION("one receive posted, six SENDs all naming it") {
    REQUIRE(b.qp.post_recv(make_recv(7, 0, 64)) == Status::kOk);
    for (uint32_t psn = 101; psn <= 105; ++psn) CHECK(send(psn, 0) == RxResult::kAccepted);
    // PSN 100 fills the hole: it completes the receive; 101 names it again.
    send(100, 0);
    auto c = b.drain_cq();
    REQUIRE(c.size() == 1);
    CHECK(c[0].wr_id == 7);
    CHECK(c[0].status == WcStatus::kSuccess);
    CHECK(b.qp.state() == QpState::kErr);
    CHECK(b.qp.expected_psn() == 101);
    const Packet nak = last_tx();
    CHECK(nak.hdr.bth.opcode == op(Opcode::kAcknowledge));
    CHECK(nak.hdr.bth.psn == 101);
    CHECK(nak.hdr.aeth.syndrome == 0x61);
    // The receive queue is sane: a post in ERR completes at once with a flush error.
    REQUIRE(b.qp.post_recv(make_recv(8, 0, 64)) == Status::kOk);
    c = b.drain_cq();
    REQUIRE(c.size() == 1);
    CHECK(c[0].wr_id == 8);
    CHECK(c[0].status == WcStatus::kWrFlushError);
  }
  SECTION("two receives posted, the first SEND names the second") {
    REQUIRE(b.qp.post_recv(make_recv(7, 0, 64)) == Status::kOk);
    REQUIRE(b.qp.post_recv(make_recv(8, 64, 64)) == Status::kOk);
    send(100, 1);
    CHECK(b.qp.state() == QpState::kErr);
    CHECK(last_tx().hdr.aeth.syndrome == 0x61);
    // Neither completes as if it held the SEND: both are flushed.
    auto c = b.drain_cq();
    REQUIRE(c.size() == 2);
    CHECK(c[0].status == WcStatus::kWrFlushError);
    CHECK(c[1].status == WcStatus::kWrFlushError);
  }
}

TEST_CASE("selective repeat: a request failing its checks out of order is NAKed only in order") {
  QpPair p(sr_attr());
  p.filter = drop_once({100});  // the first WRITE is lost once: the bad one arrives ahead
  fill(p.a.mem(), 16, 7);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 16, 0x9000)) == Status::kOk);
  SendWr bad = make_wr(WrOpcode::kWrite, 2, 0, 16);
  bad.rkey = 0x8123;
  REQUIRE(p.a.qp.post_send(bad) == Status::kOk);
  run(p);
  // B executed the first WRITE before it NAKed the second: A's success for it is true.
  CHECK(std::equal(p.a.mem(), p.a.mem() + 16, p.b.mem() + 0x9000));
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 2);
  CHECK(ca[0].wr_id == 1);
  CHECK(ca[0].status == WcStatus::kSuccess);
  CHECK(ca[1].wr_id == 2);
  CHECK(ca[1].status == WcStatus::kRemoteAccessError);
  CHECK(p.b.qp.state() == QpState::kErr);
  CHECK(p.b.qp.error().psn == 101);
  CHECK(p.b.qp.counters().naks_sent == 1);
}

TEST_CASE("selective repeat: a WR whose resend finds its region gone fails with local protection") {
  // A retry budget the next RTO spends (none, and a local ACK timeout shorter than RTO-low):
  // the WR fails on its memory once it is the head, without waiting for that RTO, and if the
  // RTO comes first it fails on its memory too (it ended with retry exceeded there).
  QpAttr attr = sr_attr();
  attr.retry_cnt = 0;
  attr.timeout = 4;  // 65.5 us
  QpPair p(attr);
  REQUIRE(post_writes_middle_from_second_region(p));
  TxPacket tx;
  std::vector<Packet> first;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(p.a.qp.poll_tx(p.now_ns, tx));
    first.push_back(copy_packet(tx));
  }
  p.a.mrs.remove(1);  // WRITE 2's region, before its resend
  // Only WRITE 3 arrives: B SACKs it, and A resends the holes before it.
  std::vector<Packet> to_a;
  p.filter = [&to_a](bool from_a, Packet& pkt) {
    if (from_a) return true;
    to_a.push_back(pkt);
    return false;
  };
  p.b.qp.on_packet(p.now_ns, first[2].hdr, first[2].payload);
  p.pump();
  REQUIRE(to_a.size() == 1);  // the SACK
  p.a.qp.on_packet(p.now_ns, to_a[0].hdr, to_a[0].payload);
  to_a.clear();
  const uint64_t lookups = p.a.mrs.local_lookups();
  p.pump();  // WRITE 1 resent; WRITE 2, behind it, not
  for (int i = 0; i < 5; ++i) CHECK_FALSE(p.a.qp.poll_tx(p.now_ns, tx));
  CHECK(p.a.mrs.local_lookups() - lookups == 2);  // once each since the region change
  REQUIRE(p.a_to_b.size() == 1);
  CHECK(p.a_to_b[0].hdr.bth.psn == 100);
  CHECK(p.a.drain_cq().empty());
  REQUIRE(to_a.size() == 1);  // B's ACK of WRITE 1
  p.filter = nullptr;
  p.a.qp.on_packet(p.now_ns, to_a[0].hdr, to_a[0].payload);
  SECTION("polled next: it fails at once") {
    p.pump();
    CHECK(p.a.qp.counters().timeouts == 0);
  }
  SECTION("the RTO first: it fails on its memory, not on the retry budget the RTO spends") {
    REQUIRE(p.advance_to_deadline());
    CHECK(p.a.qp.counters().timeouts == 1);
  }
  CHECK(wr_statuses(p.a.drain_cq()) == WcList{{1, WcStatus::kSuccess},
                                              {2, WcStatus::kLocalProtectionError},
                                              {3, WcStatus::kWrFlushError}});
  CHECK(p.a.qp.state() == QpState::kErr);
  CHECK(p.a.qp.error().status == WcStatus::kLocalProtectionError);
  for (const auto& pkt : p.a_to_b) CHECK(pkt.hdr.bth.psn != 101);
}
