#include <catch2/catch.hpp>
#include <numeric>

#include "qp_pair.h"
#include "wire/psn.h"

using namespace conduit::transport;
using namespace conduit::transport::test;
using conduit::wire::Opcode;

namespace {

void fill(uint8_t* p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(seed + i * 7);
}

std::vector<uint8_t> opcodes(const std::vector<Packet>& pkts) {
  std::vector<uint8_t> v;
  for (const auto& p : pkts) v.push_back(p.hdr.bth.opcode);
  return v;
}

}  // namespace

TEST_CASE("requester: SEND is segmented by PMTU into first/middle/last") {
  QpPair p;
  fill(p.a.mem(), 3000, 1);
  REQUIRE(p.b.qp.post_recv(make_recv(7, 0x1000, 4096)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 1, 0, 3000)) == Status::kOk);
  p.pump();
  REQUIRE(p.a_to_b.size() == 3);
  CHECK(opcodes(p.a_to_b) == std::vector<uint8_t>{op(Opcode::kSendFirst), op(Opcode::kSendMiddle),
                                                  op(Opcode::kSendLast)});
  CHECK(p.a_to_b[0].hdr.bth.psn == 100);
  CHECK(p.a_to_b[1].hdr.bth.psn == 101);
  CHECK(p.a_to_b[2].hdr.bth.psn == 102);
  CHECK(p.a_to_b[0].hdr.bth.dest_qp == 0x22);
  CHECK(p.a_to_b[0].payload.size() == 1024);
  CHECK(p.a_to_b[2].payload.size() == 3000 - 2048);
  CHECK_FALSE(p.a_to_b[0].hdr.bth.ack_req);
  CHECK(p.a_to_b[2].hdr.bth.ack_req);
  CHECK(std::memcmp(p.b.mem() + 0x1000, p.a.mem(), 3000) == 0);
  auto cb = p.b.drain_cq();
  REQUIRE(cb.size() == 1);
  CHECK(cb[0].wr_id == 7);
  CHECK(cb[0].opcode == WcOpcode::kRecv);
  CHECK(cb[0].len_bytes == 3000);
  CHECK_FALSE(cb[0].has_imm);
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 1);
  CHECK(ca[0].wr_id == 1);
  CHECK(ca[0].status == WcStatus::kSuccess);
  CHECK(ca[0].opcode == WcOpcode::kSend);
  CHECK(p.a.qp.una_psn() == 103);
  CHECK(p.b.qp.expected_psn() == 103);
}

TEST_CASE("requester: SEND only, zero length, and with immediate") {
  QpPair p;
  REQUIRE(p.b.qp.post_recv(make_recv(1, 0, 64)) == Status::kOk);
  REQUIRE(p.b.qp.post_recv(make_recv(2, 0, 64)) == Status::kOk);
  REQUIRE(p.b.qp.post_recv(make_recv(3, 0, 2048)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 1, 0, 0)) == Status::kOk);
  SendWr imm = make_wr(WrOpcode::kSendImm, 2, 0, 64);
  imm.imm = 0xdeadbeef;
  imm.solicited = true;
  REQUIRE(p.a.qp.post_send(imm) == Status::kOk);
  imm = make_wr(WrOpcode::kSendImm, 3, 0, 1500);
  imm.imm = 0x01020304;
  REQUIRE(p.a.qp.post_send(imm) == Status::kOk);
  p.pump();
  CHECK(opcodes(p.a_to_b) == std::vector<uint8_t>{op(Opcode::kSendOnly), op(Opcode::kSendOnlyImm),
                                                  op(Opcode::kSendFirst),
                                                  op(Opcode::kSendLastImm)});
  CHECK(p.a_to_b[0].payload.empty());
  CHECK(p.a_to_b[1].hdr.imm == 0xdeadbeef);
  CHECK(p.a_to_b[1].hdr.bth.solicited);
  auto cb = p.b.drain_cq();
  REQUIRE(cb.size() == 3);
  CHECK(cb[0].len_bytes == 0);
  CHECK(cb[1].has_imm);
  CHECK(cb[1].imm == 0xdeadbeef);
  CHECK(cb[2].imm == 0x01020304);
  CHECK(cb[2].len_bytes == 1500);
  CHECK(p.a.drain_cq().size() == 3);
}

TEST_CASE("requester: RDMA WRITE carries a RETH on the first packet only") {
  QpPair p;
  fill(p.a.mem(), 2500, 3);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 2500, 0x8000)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 2, 0, 100, 0x20000)) == Status::kOk);
  p.pump();
  CHECK(opcodes(p.a_to_b) == std::vector<uint8_t>{op(Opcode::kWriteFirst), op(Opcode::kWriteMiddle),
                                                  op(Opcode::kWriteLast), op(Opcode::kWriteOnly)});
  CHECK(p.a_to_b[0].hdr.reth.va == kBase + 0x8000);
  CHECK(p.a_to_b[0].hdr.reth.rkey == 0x8000);
  CHECK(p.a_to_b[0].hdr.reth.dma_len == 2500);
  CHECK(p.a_to_b[3].hdr.reth.dma_len == 100);
  CHECK(std::memcmp(p.b.mem() + 0x8000, p.a.mem(), 2500) == 0);
  CHECK(std::memcmp(p.b.mem() + 0x20000, p.a.mem(), 100) == 0);
  CHECK(p.b.drain_cq().empty());  // WRITE without immediate consumes no receive
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 2);
  CHECK(ca[0].opcode == WcOpcode::kWrite);
}

TEST_CASE("requester: RDMA WRITE with immediate completes a receive") {
  QpPair p;
  fill(p.a.mem(), 2048, 9);
  REQUIRE(p.b.qp.post_recv(make_recv(77, 0, 0)) == Status::kOk);
  REQUIRE(p.b.qp.post_recv(make_recv(78, 0, 0)) == Status::kOk);
  SendWr w = make_wr(WrOpcode::kWriteImm, 1, 0, 2048, 0x4000);
  w.imm = 42;
  REQUIRE(p.a.qp.post_send(w) == Status::kOk);
  w = make_wr(WrOpcode::kWriteImm, 2, 0, 10, 0x9000);
  w.imm = 43;
  REQUIRE(p.a.qp.post_send(w) == Status::kOk);
  p.pump();
  CHECK(opcodes(p.a_to_b) == std::vector<uint8_t>{op(Opcode::kWriteFirst),
                                                  op(Opcode::kWriteLastImm),
                                                  op(Opcode::kWriteOnlyImm)});
  auto cb = p.b.drain_cq();
  REQUIRE(cb.size() == 2);
  CHECK(cb[0].wr_id == 77);
  CHECK(cb[0].opcode == WcOpcode::kRecvWriteImm);
  CHECK(cb[0].imm == 42);
  CHECK(cb[0].len_bytes == 2048);
  CHECK(cb[1].imm == 43);
  CHECK(std::memcmp(p.b.mem() + 0x4000, p.a.mem(), 2048) == 0);
}

TEST_CASE("requester: RDMA READ uses ceil(len/PMTU) PSNs, at least one") {
  QpPair p;
  fill(p.b.mem() + 0x3000, 2500, 5);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kRead, 1, 0x100, 2500, 0x3000)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kRead, 2, 0, 0, 0)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kRead, 3, 0x5000, 1024, 0x3000)) == Status::kOk);
  REQUIRE(p.b.qp.post_recv(make_recv(1, 0, 64)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 4, 0, 8)) == Status::kOk);
  p.pump();
  REQUIRE(p.a_to_b.size() == 4);
  CHECK(p.a_to_b[0].hdr.bth.opcode == op(Opcode::kReadRequest));
  CHECK(p.a_to_b[0].hdr.bth.psn == 100);
  CHECK(p.a_to_b[0].hdr.bth.ack_req);
  CHECK(p.a_to_b[0].hdr.reth.dma_len == 2500);
  CHECK(p.a_to_b[1].hdr.bth.psn == 103);  // 3 PSNs for 2500 B at 1024
  CHECK(p.a_to_b[2].hdr.bth.psn == 104);  // 1 PSN for 0 B
  CHECK(p.a_to_b[3].hdr.bth.psn == 105);
  std::vector<uint8_t> expect = {op(Opcode::kReadResponseFirst), op(Opcode::kReadResponseMiddle),
                                 op(Opcode::kReadResponseLast),  op(Opcode::kReadResponseOnly),
                                 op(Opcode::kReadResponseOnly),  op(Opcode::kAcknowledge)};
  CHECK(opcodes(p.b_to_a) == expect);
  CHECK(p.b_to_a[0].hdr.bth.psn == 100);
  CHECK(p.b_to_a[2].hdr.bth.psn == 102);
  CHECK(p.b_to_a[2].payload.size() == 2500 - 2048);
  CHECK(p.b_to_a[3].payload.empty());
  CHECK(p.b_to_a[5].hdr.bth.psn == 105);
  CHECK(std::memcmp(p.a.mem() + 0x100, p.b.mem() + 0x3000, 2500) == 0);
  CHECK(std::memcmp(p.a.mem() + 0x5000, p.b.mem() + 0x3000, 1024) == 0);
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 4);
  for (int i = 0; i < 4; ++i) {
    CHECK(ca[i].wr_id == static_cast<uint64_t>(i + 1));
    CHECK(ca[i].status == WcStatus::kSuccess);
  }
  CHECK(ca[0].opcode == WcOpcode::kRead);
  CHECK(ca[0].len_bytes == 2500);
}

TEST_CASE("requester: scatter-gather lists on both sides") {
  QpPair p;
  fill(p.a.mem(), 4000, 11);
  SendWr w = make_wr(WrOpcode::kSend, 1, 0, 0);
  w.sge[0] = Sge{kBase + 0, 100, 0x100};
  w.sge[1] = Sge{kBase + 1000, 1500, 0x100};
  w.sge[2] = Sge{kBase + 3000, 900, 0x100};
  w.num_sge = 3;
  RecvWr r = make_recv(5, 0, 0);
  r.sge[0] = Sge{kBase + 0x10000, 1000, 0x100};
  r.sge[1] = Sge{kBase + 0x20000, 2000, 0x100};
  r.num_sge = 2;
  REQUIRE(p.b.qp.post_recv(r) == Status::kOk);
  REQUIRE(p.a.qp.post_send(w) == Status::kOk);
  p.pump();
  std::vector<uint8_t> src, dst;
  src.insert(src.end(), p.a.mem(), p.a.mem() + 100);
  src.insert(src.end(), p.a.mem() + 1000, p.a.mem() + 2500);
  src.insert(src.end(), p.a.mem() + 3000, p.a.mem() + 3900);
  dst.insert(dst.end(), p.b.mem() + 0x10000, p.b.mem() + 0x10000 + 1000);
  dst.insert(dst.end(), p.b.mem() + 0x20000, p.b.mem() + 0x20000 + 1500);
  CHECK(src == dst);
  auto cb = p.b.drain_cq();
  REQUIRE(cb.size() == 1);
  CHECK(cb[0].len_bytes == 2500);
}

TEST_CASE("requester: AckReq on each last packet and at least every N packets") {
  QpPair p;  // ack_req_every_packets = 8
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 20 * 1024)) == Status::kOk);
  p.pump();
  REQUIRE(p.a_to_b.size() == 20);
  for (size_t i = 0; i < 20; ++i) {
    const bool expect = (i + 1) % 8 == 0 || i == 19;
    CHECK(p.a_to_b[i].hdr.bth.ack_req == expect);
  }
  // Three AckReqs, answered before the requester polls: one coalesced ACK.
  REQUIRE(p.b_to_a.size() == 1);
  CHECK(p.b_to_a[0].hdr.bth.psn == 119);
}

TEST_CASE("requester: unsignaled WRs complete silently") {
  QpPair p;
  SendWr w = make_wr(WrOpcode::kWrite, 1, 0, 10);
  w.signaled = false;
  REQUIRE(p.a.qp.post_send(w) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 2, 0, 10)) == Status::kOk);
  p.pump();
  auto ca = p.a.drain_cq();
  REQUIRE(ca.size() == 1);
  CHECK(ca[0].wr_id == 2);
}

TEST_CASE("requester: the send window bounds packets in flight") {
  QpConfig cfg = QpPair::make_cfg(0x11);
  cfg.window_packets = 5;
  QpPair p(default_attr(), 100, 5000, cfg);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 20 * 1024)) == Status::kOk);
  TxPacket tx;
  int sent = 0;
  while (p.a.qp.poll_tx(p.now_ns, tx)) ++sent;
  CHECK(sent == 5);
  CHECK(tx.hdr.bth.ack_req);  // the window-filling packet asks for an ACK
  // With the link delivering, all 20 complete without any timer.
  QpPair q(default_attr(), 100, 5000, cfg);
  REQUIRE(q.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 20 * 1024)) == Status::kOk);
  q.pump();
  CHECK(q.a.qp.una_psn() == 120);
  CHECK(q.a.drain_cq().size() == 1);
  CHECK(q.a.qp.counters().timeouts == 0);
}

TEST_CASE("requester: initiator depth limits outstanding READs") {
  QpAttr attr = default_attr();
  attr.max_rd_atomic = 2;
  QpPair p(attr);
  for (int i = 0; i < 4; ++i) {
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kRead, i, 0, 10)) == Status::kOk);
  }
  TxPacket tx;
  int sent = 0;
  while (p.a.qp.poll_tx(p.now_ns, tx)) ++sent;
  CHECK(sent == 2);  // (both lost: never delivered)
  for (int i = 0; i < 10 && p.pump() + p.advance_to_deadline() > 0; ++i) {
  }
  CHECK(p.a.drain_cq().size() == 4);
}

TEST_CASE("requester: SQD finishes the current WR and starts no new one") {
  QpPair p;
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 3 * 1024)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 2, 0, 10)) == Status::kOk);
  TxPacket tx;
  REQUIRE(p.a.qp.poll_tx(p.now_ns, tx));
  QpAttr a;
  a.state = QpState::kSqd;
  REQUIRE(p.a.qp.modify(a, kAttrState) == Status::kOk);
  int more = 0;
  while (p.a.qp.poll_tx(p.now_ns, tx)) ++more;
  CHECK(more == 2);
  a.state = QpState::kRts;
  REQUIRE(p.a.qp.modify(a, kAttrState) == Status::kOk);
  CHECK(p.a.qp.poll_tx(p.now_ns, tx));
  CHECK(tx.hdr.bth.opcode == op(Opcode::kWriteOnly));
}

TEST_CASE("requester: PSNs wrap at 2^24") {
  QpPair p(default_attr(), 0xFFFFFE, 0xFFFFFF);
  fill(p.a.mem(), 5000, 2);
  REQUIRE(p.b.qp.post_recv(make_recv(1, 0x10000, 8192)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 1, 0, 5000)) == Status::kOk);
  REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kRead, 2, 0x40000, 5000, 0x10000)) == Status::kOk);
  p.pump();
  CHECK(p.a_to_b[2].hdr.bth.psn == 0);
  CHECK(std::memcmp(p.b.mem() + 0x10000, p.a.mem(), 5000) == 0);
  CHECK(std::memcmp(p.a.mem() + 0x40000, p.a.mem(), 5000) == 0);
  CHECK(p.a.drain_cq().size() == 2);
  CHECK(p.a.qp.una_psn() == 0xFFFFFE + 10 - (1 << 24));
}

TEST_CASE("requester: a READ response or atomic result for a deregistered region is not written") {
  for (bool atomic : {false, true}) {
    INFO("atomic " << atomic);
    QpPair p;
    fill(p.b.mem() + 0x4000, 64, 9);
    // B's answer is held back until A's region has changed.
    std::vector<Packet> held;
    hold_b_to_a(p, held);
    const SendWr wr = atomic ? make_atomic(WrOpcode::kFetchAdd, 1, 0x1000, 0x4000, 5)
                             : make_wr(WrOpcode::kRead, 1, 0x1000, 64, 0x4000);
    REQUIRE(p.a.qp.post_send(wr) == Status::kOk);
    p.pump();
    REQUIRE(held.size() == 1);
    const uint32_t n = atomic ? kAtomicBytes : 64;
    SECTION("another region registered meanwhile: written") {
      p.a.mrs.add(kBase + kMrBytes, 4096, kAllAccess);
      CHECK(p.a.qp.on_packet(p.now_ns, held[0].hdr, held[0].payload) == RxResult::kAccepted);
      if (atomic) {
        CHECK(load_u64(p.a.mem() + 0x1000) == held[0].hdr.atomic_ack_orig);
      } else {
        CHECK(std::memcmp(p.a.mem() + 0x1000, p.b.mem() + 0x4000, n) == 0);
      }
      auto ca = p.a.drain_cq();
      REQUIRE(ca.size() == 1);
      CHECK(ca[0].status == WcStatus::kSuccess);
      CHECK(p.a.qp.state() == QpState::kRts);
    }
    SECTION("its region deregistered: local protection error, ERR") {
      REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kRead, 2, 0x2000, 64, 0x4000)) == Status::kOk);
      p.a.mrs.remove(0);
      CHECK(p.a.qp.on_packet(p.now_ns, held[0].hdr, held[0].payload) == RxResult::kAccepted);
      for (uint32_t i = 0; i < n; ++i) REQUIRE(p.a.mem()[0x1000 + i] == 0);
      auto ca = p.a.drain_cq();
      REQUIRE(ca.size() == 2);
      CHECK(ca[0].wr_id == 1);
      CHECK(ca[0].status == WcStatus::kLocalProtectionError);
      CHECK(ca[0].opcode == (atomic ? WcOpcode::kFetchAdd : WcOpcode::kRead));
      CHECK(ca[1].wr_id == 2);
      CHECK(ca[1].status == WcStatus::kWrFlushError);
      CHECK(p.a.qp.state() == QpState::kErr);
      CHECK(p.a.qp.error().status == WcStatus::kLocalProtectionError);
    }
  }
}

TEST_CASE("requester: SEND/WRITE packets are not read from a deregistered region") {
  for (bool sr : {false, true}) {
    INFO("selective repeat " << sr);
    QpAttr attr = default_attr();
    attr.selective_repeat = sr;
    QpPair p(attr);
    fill(p.a.mem(), 3000, 5);
    SECTION("a WRITE's later packets") {
      REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 3000, 0x4000)) == Status::kOk);
      TxPacket tx;
      REQUIRE(p.a.qp.poll_tx(p.now_ns, tx));
      const Packet first = copy_packet(tx);
      p.b.qp.on_packet(p.now_ns, first.hdr, first.payload);
      p.a.mrs.remove(0);
      p.pump();
      for (const auto& pkt : p.a_to_b) CHECK(pkt.payload.empty());
      CHECK(p.b.mem()[0x4000 + 2999] == 0);
      auto ca = p.a.drain_cq();
      REQUIRE(ca.size() == 1);
      CHECK(ca[0].status == WcStatus::kLocalProtectionError);
      CHECK(ca[0].opcode == WcOpcode::kWrite);
      CHECK(p.a.qp.state() == QpState::kErr);
      CHECK(p.a.qp.error().status == WcStatus::kLocalProtectionError);
    }
    SECTION("a SEND's retransmission") {
      REQUIRE(p.b.qp.post_recv(make_recv(9, 0x8000, 64)) == Status::kOk);
      REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 1, 0, 16)) == Status::kOk);
      p.filter = [](bool from_a, Packet&) { return !from_a; };  // lost
      p.pump();
      REQUIRE(p.a_to_b.size() == 1);
      p.filter = nullptr;
      p.a.mrs.remove(0);
      for (int i = 0; i < 20 && p.a.qp.state() == QpState::kRts; ++i) {
        REQUIRE(p.advance_to_deadline());
        p.pump();
      }
      CHECK(p.a_to_b.size() == 1);
      CHECK(p.a.qp.counters().tx_retransmits == 0);
      CHECK(p.b.drain_cq().empty());
      auto ca = p.a.drain_cq();
      REQUIRE(ca.size() == 1);
      CHECK(ca[0].status == WcStatus::kLocalProtectionError);
      CHECK(p.a.qp.state() == QpState::kErr);
    }
    SECTION("a WR behind others waits for them, then fails; nothing after it is sent") {
      REQUIRE(add_second_region(p) == kSecondLkey);
      REQUIRE(p.b.qp.post_recv(make_recv(9, 0x8000, 64)) == Status::kOk);
      REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 16, 0x4000)) == Status::kOk);
      REQUIRE(p.a.qp.post_send(from_second_region(make_wr(WrOpcode::kSend, 2, 0, 16), 16)) ==
              Status::kOk);
      REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kWrite, 3, 0, 16, 0x5000)) == Status::kOk);
      std::vector<Packet> held;
      hold_b_to_a(p, held);
      TxPacket tx;
      REQUIRE(p.a.qp.poll_tx(p.now_ns, tx));  // the WRITE
      const Packet w1 = copy_packet(tx);
      p.b.qp.on_packet(p.now_ns, w1.hdr, w1.payload);
      p.a.mrs.remove(1);
      p.pump();
      // The SEND is not built, nor anything after it; the WRITE is not complete yet.
      CHECK(p.a_to_b.empty());
      CHECK(p.a.drain_cq().empty());
      CHECK(p.a.qp.state() == QpState::kRts);
      REQUIRE(held.size() == 1);  // B's ACK for the WRITE
      p.a.qp.on_packet(p.now_ns, held[0].hdr, held[0].payload);
      p.pump();
      auto ca = p.a.drain_cq();
      REQUIRE(ca.size() == 3);
      CHECK(ca[0].wr_id == 1);
      CHECK(ca[0].status == WcStatus::kSuccess);
      CHECK(ca[1].wr_id == 2);
      CHECK(ca[1].status == WcStatus::kLocalProtectionError);
      CHECK(ca[2].wr_id == 3);
      CHECK(ca[2].status == WcStatus::kWrFlushError);
      CHECK(p.a.qp.state() == QpState::kErr);
      CHECK(p.b.drain_cq().empty());
      CHECK(p.b.mem()[0x5000] == 0);
    }
  }
}

TEST_CASE("requester: a WR behind the head whose region is gone is looked up once per change") {
  for (bool sr : {false, true}) {
    INFO("selective repeat " << sr);
    QpAttr attr = default_attr();
    attr.selective_repeat = sr;
    QpPair p(attr);
    REQUIRE(post_writes_middle_from_second_region(p));
    std::vector<Packet> held;
    hold_b_to_a(p, held);
    TxPacket tx;
    REQUIRE(p.a.qp.poll_tx(p.now_ns, tx));  // WRITE 1
    const Packet w1 = copy_packet(tx);
    p.b.qp.on_packet(p.now_ns, w1.hdr, w1.payload);
    p.a.mrs.remove(1);
    // Every poll finds WRITE 2 next and its region gone: one lookup per region change.
    const uint64_t before = p.a.mrs.local_lookups();
    for (int i = 0; i < 10; ++i) CHECK_FALSE(p.a.qp.poll_tx(p.now_ns, tx));
    CHECK(p.a.mrs.local_lookups() - before == 1);
    p.a.mrs.add(kBase + 2 * kMrBytes, 4096, kAllAccess);
    for (int i = 0; i < 10; ++i) CHECK_FALSE(p.a.qp.poll_tx(p.now_ns, tx));
    CHECK(p.a.mrs.local_lookups() - before == 2);
    p.pump();
    REQUIRE(held.size() == 1);  // B's ACK for WRITE 1
    p.a.qp.on_packet(p.now_ns, held[0].hdr, held[0].payload);
    p.pump();
    CHECK(wr_statuses(p.a.drain_cq()) == WcList{{1, WcStatus::kSuccess},
                                                {2, WcStatus::kLocalProtectionError},
                                                {3, WcStatus::kWrFlushError}});
    CHECK(p.a.qp.state() == QpState::kErr);
    CHECK(p.a.mrs.local_lookups() - before == 2);  // at the head it fails on what it knows
  }
}

// IBTA: the solicited event bit is only meaningful on the last packet of a SEND or of an RDMA
// WRITE with immediate (what raises a receive completion); rxe's requester sets it nowhere else.
TEST_CASE("requester: SE only on the last packet of a SEND or a WRITE with immediate") {
  QpPair p;
  for (uint64_t i = 0; i < 3; ++i) REQUIRE(p.b.qp.post_recv(make_recv(i, 0, 4096)) == Status::kOk);
  std::vector<SendWr> wrs = {make_wr(WrOpcode::kSend, 1, 0, 2000),
                             make_wr(WrOpcode::kSendImm, 2, 0, 8),
                             make_wr(WrOpcode::kWrite, 3, 0, 2000, 0x4000),
                             make_wr(WrOpcode::kWriteImm, 4, 0, 2000, 0x4000),
                             make_wr(WrOpcode::kWrite, 5, 0, 8, 0x4000),
                             make_wr(WrOpcode::kRead, 6, 0x8000, 8, 0x4000)};
  for (SendWr& w : wrs) {
    w.solicited = true;
    REQUIRE(p.a.qp.post_send(w) == Status::kOk);
  }
  p.pump();
  REQUIRE(p.a_to_b.size() == 9);
  std::vector<bool> se;
  for (const Packet& pk : p.a_to_b) se.push_back(pk.hdr.bth.solicited);
  // SEND first/last, SEND only+imm, WRITE first/last, WRITE first/last+imm, WRITE only, READ.
  CHECK(se == std::vector<bool>{false, true, true, false, false, false, true, false, false});
}
