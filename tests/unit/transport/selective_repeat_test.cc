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
  // A dead link: every RTO (100 us here) resends, but the QP fails only after retry_cnt + 1
  // ACK timeouts without progress (4.2 ms each at timeout 10), as under go-back-N; charging a
  // retry per RTO failed SR QPs after about half a millisecond of a descheduled peer.
  QpAttr attr = sr_attr();
  QpPair p(attr);
  p.filter = [](bool, Packet&) { return false; };
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
  // Every RTO in between resent the packet.
  CHECK(p.a.qp.counters().retries >= (attr.retry_cnt + 1) * period / 320'000);
}
