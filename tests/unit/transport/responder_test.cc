#include <catch2/catch.hpp>
#include <cstring>
#include <utility>

#include "qp_pair.h"
#include "wire/byte_order.h"
#include "wire/psn.h"

using namespace conduit::transport;
using namespace conduit::transport::test;
using conduit::wire::AethType;
using conduit::wire::NakCode;
using conduit::wire::Opcode;
using conduit::wire::RoceHeader;

namespace {

// A responder (QP 0x22, expecting PSN 100) fed hand-made requests.
struct Responder {
  Endpoint e{QpPair::make_cfg(0x22)};
  uint64_t now_ns = 1000;
  explicit Responder(QpAttr a = default_attr()) { bring_up(e.qp, a, 0x11, 7000, 100); }

  RxResult rx(Opcode o, uint32_t psn, std::vector<uint8_t> payload = {}, bool ack_req = true,
              conduit::wire::Reth reth = {}, uint32_t imm = 0) {
    RoceHeader h;
    h.bth.opcode = op(o);
    h.bth.dest_qp = 0x22;
    h.bth.psn = psn;
    h.bth.ack_req = ack_req;
    h.reth = reth;
    h.imm = imm;
    return e.qp.on_packet(now_ns, h, payload);
  }
  std::vector<Packet> tx() {
    std::vector<Packet> v;
    TxPacket t;
    while (e.qp.poll_tx(now_ns, t)) v.push_back(copy_packet(t));
    return v;
  }
  // What goes out is one NAK, for psn, with code.
  void expect_one_nak(uint32_t psn, NakCode code) {
    auto t = tx();
    REQUIRE(t.size() == 1);
    CHECK(t[0].hdr.bth.psn == psn);
    CHECK(t[0].hdr.aeth.type() == AethType::kNak);
    CHECK(t[0].hdr.aeth.value() == static_cast<uint8_t>(code));
  }
};

std::vector<uint8_t> bytes(size_t n, uint8_t v = 0xAB) { return std::vector<uint8_t>(n, v); }

conduit::wire::Reth reth(uint64_t off, uint32_t len, uint32_t rkey = 0x8000) {
  return conduit::wire::Reth{kBase + off, rkey, len};
}

}  // namespace

TEST_CASE("responder: in-order SEND is ACKed with the MSN") {
  Responder r;
  REQUIRE(r.e.qp.post_recv(make_recv(1, 0, 100)) == Status::kOk);
  CHECK(r.rx(Opcode::kSendOnly, 100, bytes(10)) == RxResult::kAccepted);
  auto t = r.tx();
  REQUIRE(t.size() == 1);
  CHECK(t[0].hdr.bth.opcode == op(Opcode::kAcknowledge));
  CHECK(t[0].hdr.bth.psn == 100);
  CHECK(t[0].hdr.bth.dest_qp == 0x11);
  CHECK(t[0].hdr.aeth.type() == AethType::kAck);
  CHECK(t[0].hdr.aeth.msn == 1);
  CHECK(r.e.qp.expected_psn() == 101);
}

TEST_CASE("responder: a duplicate SEND is re-ACKed and not delivered twice") {
  Responder r;
  REQUIRE(r.e.qp.post_recv(make_recv(1, 0, 100)) == Status::kOk);
  REQUIRE(r.e.qp.post_recv(make_recv(2, 0, 100)) == Status::kOk);
  CHECK(r.rx(Opcode::kSendOnly, 100, bytes(10)) == RxResult::kAccepted);
  r.tx();
  CHECK(r.rx(Opcode::kSendOnly, 100, bytes(10), false) == RxResult::kDuplicate);
  auto t = r.tx();
  REQUIRE(t.size() == 1);
  CHECK(t[0].hdr.bth.psn == 100);  // ePSN - 1
  CHECK(t[0].hdr.aeth.type() == AethType::kAck);
  CHECK(r.e.drain_cq().size() == 1);
  CHECK(r.e.qp.counters().rx_duplicates == 1);
}

TEST_CASE("responder: one sequence NAK per gap, carrying the expected PSN") {
  Responder r;
  REQUIRE(r.e.qp.post_recv(make_recv(1, 0, 100)) == Status::kOk);
  CHECK(r.rx(Opcode::kSendOnly, 102, bytes(1)) == RxResult::kOutOfSequence);
  CHECK(r.rx(Opcode::kSendOnly, 103, bytes(1)) == RxResult::kOutOfSequence);
  CHECK(r.rx(Opcode::kSendOnly, 150, bytes(1)) == RxResult::kOutOfSequence);
  auto t = r.tx();
  REQUIRE(t.size() == 1);
  CHECK(t[0].hdr.bth.psn == 100);
  CHECK(t[0].hdr.aeth.type() == AethType::kNak);
  CHECK(t[0].hdr.aeth.value() == static_cast<uint8_t>(NakCode::kPsnSequenceError));
  CHECK(t[0].hdr.aeth.syndrome == 0x60);
  // ePSN arrives: the next gap gets its own NAK.
  CHECK(r.rx(Opcode::kSendOnly, 100, bytes(1)) == RxResult::kAccepted);
  r.tx();
  CHECK(r.rx(Opcode::kSendOnly, 105, bytes(1)) == RxResult::kOutOfSequence);
  t = r.tx();
  REQUIRE(t.size() == 1);
  CHECK(t[0].hdr.bth.psn == 101);
  CHECK(t[0].hdr.aeth.syndrome == 0x60);
}

TEST_CASE("responder: RNR NAK with the min RNR timer when no receive is posted") {
  QpAttr a = default_attr();
  a.min_rnr_timer = 14;
  Responder r(a);
  CHECK(r.rx(Opcode::kSendFirst, 100, bytes(1024), false) == RxResult::kDropped);
  auto t = r.tx();
  REQUIRE(t.size() == 1);
  CHECK(t[0].hdr.aeth.type() == AethType::kRnrNak);
  CHECK(t[0].hdr.aeth.value() == 14);
  CHECK(t[0].hdr.aeth.syndrome == 0x20 + 14);
  CHECK(t[0].hdr.bth.psn == 100);
  CHECK(r.e.qp.expected_psn() == 100);
  // Packets behind it get no sequence NAK.
  CHECK(r.rx(Opcode::kSendLast, 101, bytes(1)) == RxResult::kOutOfSequence);
  CHECK(r.tx().empty());
  // WRITE with immediate needs a receive too.
  CHECK(r.rx(Opcode::kWriteOnlyImm, 100, bytes(4), true, reth(0, 4)) == RxResult::kDropped);
  t = r.tx();
  REQUIRE(t.size() == 1);
  CHECK(t[0].hdr.aeth.type() == AethType::kRnrNak);
  CHECK(r.e.qp.counters().rnr_naks_sent == 2);
  // With a receive posted, the message goes through.
  REQUIRE(r.e.qp.post_recv(make_recv(1, 0, 4096)) == Status::kOk);
  CHECK(r.rx(Opcode::kSendFirst, 100, bytes(1024), false) == RxResult::kAccepted);
  CHECK(r.rx(Opcode::kSendLast, 101, bytes(1)) == RxResult::kAccepted);
}

TEST_CASE("responder: RDMA WRITE is placed only after the rkey, bounds and access check") {
  struct Case {
    const char* what;
    uint32_t qp_access;
    conduit::wire::Reth reth;
  };
  const Case cases[] = {
      {"bad rkey", kAllAccess, reth(0, 16, 0x8005)},
      {"out of bounds", kAllAccess, reth(kMrBytes - 8, 16)},
      {"below the region", kAllAccess, {kBase - 8, 0x8000, 16}},
      {"QP without remote write", kAccessRemoteRead, reth(0, 16)},
  };
  for (const auto& c : cases) {
    SECTION(c.what) {
      QpAttr a = default_attr();
      a.access_flags = c.qp_access;
      Responder r(a);
      REQUIRE(r.e.qp.post_recv(make_recv(9, 0, 16)) == Status::kOk);
      CHECK(r.rx(Opcode::kWriteOnly, 100, bytes(16, 0x5A), true, c.reth) == RxResult::kDropped);
      auto t = r.tx();
      REQUIRE(t.size() == 1);
      CHECK(t[0].hdr.aeth.syndrome == 0x62);
      CHECK(t[0].hdr.bth.psn == 100);
      CHECK(r.e.qp.state() == QpState::kErr);
      for (uint32_t i = 0; i < 32; ++i) CHECK(r.e.mem()[i] == 0);
      auto cq = r.e.drain_cq();
      REQUIRE(cq.size() == 1);
      CHECK(cq[0].status == WcStatus::kWrFlushError);
    }
  }
  SECTION("region without remote write") {
    Responder r;
    r.e.mrs.add(0x900000, 4096, kAccessLocalWrite | kAccessRemoteRead);  // rkey 0x8001
    CHECK(r.rx(Opcode::kWriteOnly, 100, bytes(16), true, {0x900000, 0x8001, 16}) ==
          RxResult::kDropped);
    auto t = r.tx();
    REQUIRE(t.size() == 1);
    CHECK(t[0].hdr.aeth.syndrome == 0x62);
  }
}

TEST_CASE("responder: WRITE payload beyond the RETH length is an invalid request") {
  Responder r;
  CHECK(r.rx(Opcode::kWriteFirst, 100, bytes(1024), false, reth(0, 1500)) == RxResult::kAccepted);
  CHECK(r.rx(Opcode::kWriteLast, 101, bytes(1000)) == RxResult::kDropped);
  auto t = r.tx();
  REQUIRE(t.size() == 1);
  CHECK(t[0].hdr.aeth.syndrome == 0x61);
  CHECK(r.e.qp.state() == QpState::kErr);
  // Why, for the daemon's log: the NAK it sent and the request's PSN.
  CHECK(r.e.qp.error().side == QpError::Side::kResponder);
  CHECK(r.e.qp.error().nak == conduit::wire::NakCode::kInvalidRequest);
  CHECK(r.e.qp.error().psn == 101);
}

TEST_CASE("responder: a SEND larger than the receive is a local length error") {
  Responder r;
  REQUIRE(r.e.qp.post_recv(make_recv(1, 0, 1500)) == Status::kOk);
  REQUIRE(r.e.qp.post_recv(make_recv(2, 0, 1500)) == Status::kOk);
  CHECK(r.rx(Opcode::kSendFirst, 100, bytes(1024), false) == RxResult::kAccepted);
  CHECK(r.rx(Opcode::kSendLast, 101, bytes(1000)) == RxResult::kDropped);
  auto t = r.tx();
  REQUIRE(t.size() == 1);
  CHECK(t[0].hdr.aeth.syndrome == 0x61);
  CHECK(r.e.qp.state() == QpState::kErr);
  auto cq = r.e.drain_cq();
  REQUIRE(cq.size() == 2);
  CHECK(cq[0].wr_id == 1);
  CHECK(cq[0].status == WcStatus::kLocalLengthError);
  CHECK(cq[1].wr_id == 2);
  CHECK(cq[1].status == WcStatus::kWrFlushError);
}

TEST_CASE("responder: opcode sequence and payload length are checked") {
  SECTION("middle without first") {
    Responder r;
    REQUIRE(r.e.qp.post_recv(make_recv(1, 0, 4096)) == Status::kOk);
    CHECK(r.rx(Opcode::kSendMiddle, 100, bytes(1024)) == RxResult::kDropped);
    CHECK(r.tx()[0].hdr.aeth.syndrome == 0x61);
  }
  SECTION("a new SEND inside a WRITE") {
    Responder r;
    REQUIRE(r.e.qp.post_recv(make_recv(1, 0, 4096)) == Status::kOk);
    CHECK(r.rx(Opcode::kWriteFirst, 100, bytes(1024), false, reth(0, 4096)) == RxResult::kAccepted);
    CHECK(r.rx(Opcode::kSendOnly, 101, bytes(10)) == RxResult::kDropped);
    CHECK(r.tx()[0].hdr.aeth.syndrome == 0x61);
  }
  SECTION("a first packet shorter than the PMTU") {
    Responder r;
    REQUIRE(r.e.qp.post_recv(make_recv(1, 0, 4096)) == Status::kOk);
    CHECK(r.rx(Opcode::kSendFirst, 100, bytes(1000)) == RxResult::kDropped);
    CHECK(r.tx()[0].hdr.aeth.syndrome == 0x61);
  }
  SECTION("a READ request with payload") {
    Responder r;
    CHECK(r.rx(Opcode::kReadRequest, 100, bytes(4), true, reth(0, 4)) == RxResult::kDropped);
    CHECK(r.tx()[0].hdr.aeth.syndrome == 0x61);
  }
  SECTION("payload above the PMTU (a peer with a larger PMTU)") {
    Responder r;
    REQUIRE(r.e.qp.post_recv(make_recv(1, 0, 4096)) == Status::kOk);
    CHECK(r.rx(Opcode::kSendOnly, 100, bytes(1025)) == RxResult::kDropped);
    auto t = r.tx();
    REQUIRE(t.size() == 1);
    CHECK(t[0].hdr.bth.psn == 100);
    CHECK(t[0].hdr.aeth.syndrome == 0x61);
    CHECK(r.e.qp.counters().drop_bad_length == 1);
  }
}

// PSN rules come first (IBTA 9.7.5.1, rxe's check_psn before check_length): only a request
// at the expected PSN is judged by its length.
TEST_CASE("responder: a length violation out of sequence or duplicated is not NAKed for it") {
  Responder r;
  REQUIRE(r.e.qp.post_recv(make_recv(1, 0, 4096)) == Status::kOk);
  REQUIRE(r.rx(Opcode::kSendOnly, 100, bytes(8)) == RxResult::kAccepted);
  r.tx();
  CHECK(r.rx(Opcode::kSendOnly, 100, bytes(2048)) == RxResult::kDuplicate);
  auto t = r.tx();
  REQUIRE(t.size() == 1);
  CHECK(t[0].hdr.aeth.type() == AethType::kAck);
  CHECK(r.rx(Opcode::kWriteOnly, 105, bytes(2048), true, reth(0x10000, 2048)) ==
        RxResult::kOutOfSequence);
  t = r.tx();
  REQUIRE(t.size() == 1);
  CHECK(t[0].hdr.aeth.syndrome == 0x60);  // sequence error, for ePSN 101
  CHECK(t[0].hdr.bth.psn == 101);
  CHECK(r.e.qp.state() == QpState::kRts);
  // In sequence, a WRITE above the PMTU is invalid, and nothing of it is written.
  CHECK(r.rx(Opcode::kWriteOnly, 101, bytes(2048), true, reth(0x10000, 2048)) ==
        RxResult::kDropped);
  t = r.tx();
  REQUIRE(t.size() == 1);
  CHECK(t[0].hdr.bth.psn == 101);
  CHECK(t[0].hdr.aeth.syndrome == 0x61);
  CHECK(r.e.mem()[0x10000] == 0);
  CHECK(r.e.qp.state() == QpState::kErr);
}

// Opcodes newer peers send (rxe: FLUSH 0x1C, ATOMIC_WRITE 0x1D) and reserved ones: IBTA
// 9.7.5.1.5 answers them with NAK Invalid Request, so the requester fails at once.
TEST_CASE("responder: an RC opcode we do not implement is NAKed Invalid Request in sequence") {
  Responder r;
  RoceHeader h;
  h.bth.dest_qp = 0x22;
  h.bth.ack_req = true;
  SECTION("ahead of the expected PSN: a sequence NAK, as any request") {
    h.bth.opcode = 0x1C;
    h.bth.psn = 101;
    CHECK(r.e.qp.on_packet(r.now_ns, h, bytes(28)) == RxResult::kOutOfSequence);
    auto t = r.tx();
    REQUIRE(t.size() == 1);
    CHECK(t[0].hdr.aeth.syndrome == 0x60);
    CHECK(r.e.qp.state() == QpState::kRts);
  }
  SECTION("at the expected PSN, decoded") {
    h.bth.opcode = 0x1D;
    h.bth.psn = 100;
    CHECK(r.e.qp.on_packet(r.now_ns, h, bytes(24)) == RxResult::kDropped);
    auto t = r.tx();
    REQUIRE(t.size() == 1);
    CHECK(t[0].hdr.bth.psn == 100);
    CHECK(t[0].hdr.aeth.syndrome == 0x61);
    CHECK(r.e.qp.state() == QpState::kErr);
    CHECK(r.e.qp.counters().drop_bad_opcode == 1);
  }
  SECTION("at the expected PSN, as a view (what the engine passes on)") {
    uint8_t pkt[conduit::wire::kBthBytes + 28] = {0x1C, 0,    0xFF, 0xFF, 0, 0,
                                                  0,    0x22, 0x80, 0,    0, 100};
    conduit::wire::RoceView v;
    v.bth = pkt;
    v.info = &conduit::wire::opcode_info(pkt[0]);
    v.payload = std::span<const uint8_t>(pkt + conduit::wire::kBthBytes, 28);
    CHECK(r.e.qp.on_packet(r.now_ns, v) == RxResult::kDropped);
    auto t = r.tx();
    REQUIRE(t.size() == 1);
    CHECK(t[0].hdr.bth.psn == 100);
    CHECK(t[0].hdr.aeth.syndrome == 0x61);
    CHECK(r.e.qp.state() == QpState::kErr);
  }
  SECTION("another transport's opcode is still dropped unseen") {
    h.bth.opcode = 0x24;  // UC SEND_ONLY
    h.bth.psn = 100;
    CHECK(r.e.qp.on_packet(r.now_ns, h, {}) == RxResult::kDropped);
    CHECK(r.tx().empty());
    CHECK(r.e.qp.state() == QpState::kRts);
  }
}

TEST_CASE("responder: SEND with invalidate is answered with NAK invalid request") {
  Responder r;
  REQUIRE(r.e.qp.post_recv(make_recv(1, 0, 4096)) == Status::kOk);
  CHECK(r.rx(Opcode::kSendOnlyInvalidate, 100) == RxResult::kDropped);
  auto t = r.tx();
  REQUIRE(t.size() == 1);
  CHECK(t[0].hdr.aeth.syndrome == 0x61);
  CHECK(r.e.qp.state() == QpState::kErr);
}

namespace {

RxResult rx_atomic(Responder& r, Opcode o, uint32_t psn, uint64_t off, uint64_t swap_add,
                   uint64_t compare = 0, uint32_t rkey = 0x8000,
                   std::vector<uint8_t> payload = {}) {
  RoceHeader h;
  h.bth.opcode = op(o);
  h.bth.dest_qp = 0x22;
  h.bth.psn = psn;
  h.bth.ack_req = true;
  h.atomic = conduit::wire::AtomicEth{kBase + off, rkey, swap_add, compare};
  return r.e.qp.on_packet(r.now_ns, h, payload);
}

}  // namespace

TEST_CASE("responder: compare-and-swap and fetch-and-add run once and answer the old value") {
  Responder r;
  store_u64(r.e.mem() + 64, 41);
  CHECK(rx_atomic(r, Opcode::kFetchAdd, 100, 64, 1) == RxResult::kAccepted);
  CHECK(load_u64(r.e.mem() + 64) == 42);
  // Compare does not match: nothing stored, the old value answered.
  CHECK(rx_atomic(r, Opcode::kCompareSwap, 101, 64, 7, 41) == RxResult::kAccepted);
  CHECK(load_u64(r.e.mem() + 64) == 42);
  CHECK(rx_atomic(r, Opcode::kCompareSwap, 102, 64, 7, 42) == RxResult::kAccepted);
  CHECK(load_u64(r.e.mem() + 64) == 7);
  // Wrap-around of the addition is the word's, as on a NIC.
  store_u64(r.e.mem() + 128, ~0ull);
  CHECK(rx_atomic(r, Opcode::kFetchAdd, 103, 128, 2) == RxResult::kAccepted);
  CHECK(load_u64(r.e.mem() + 128) == 1);
  auto t = r.tx();
  REQUIRE(t.size() == 4);
  const uint64_t want[] = {41, 42, 42, ~0ull};
  for (uint32_t i = 0; i < 4; ++i) {
    INFO(i);
    CHECK(t[i].hdr.bth.opcode == op(Opcode::kAtomicAcknowledge));
    CHECK(t[i].hdr.bth.psn == 100 + i);
    CHECK(t[i].hdr.aeth.type() == AethType::kAck);
    CHECK(t[i].hdr.aeth.msn == 1 + i);
    CHECK(t[i].hdr.atomic_ack_orig == want[i]);
    CHECK(t[i].payload.empty());
  }
  CHECK(r.e.qp.expected_psn() == 104);

  // A duplicate (its ACK was lost) gets the saved value; the word is not touched again.
  CHECK(rx_atomic(r, Opcode::kFetchAdd, 100, 64, 1) == RxResult::kDuplicate);
  t = r.tx();
  REQUIRE(t.size() == 1);
  CHECK(t[0].hdr.bth.opcode == op(Opcode::kAtomicAcknowledge));
  CHECK(t[0].hdr.bth.psn == 100);
  CHECK(t[0].hdr.atomic_ack_orig == 41);
  CHECK(t[0].hdr.aeth.msn == 1);
  CHECK(load_u64(r.e.mem() + 64) == 7);
  // A READ request with an atomic's PSN does not replay the atomic as data.
  CHECK(r.rx(Opcode::kReadRequest, 101, {}, true, reth(0, 8)) == RxResult::kDuplicate);
  CHECK(r.tx().empty());
  // A duplicate older than every saved result is dropped (the requester has it).
  const uint32_t depth = default_attr().max_dest_rd_atomic;
  for (uint32_t i = 0; i < depth; ++i) {
    REQUIRE(rx_atomic(r, Opcode::kFetchAdd, 104 + i, 256, 1) == RxResult::kAccepted);
  }
  (void)r.tx();
  CHECK(load_u64(r.e.mem() + 256) == depth);
  CHECK(rx_atomic(r, Opcode::kFetchAdd, 100, 64, 1) == RxResult::kDuplicate);
  CHECK(r.tx().empty());
  CHECK(load_u64(r.e.mem() + 64) == 7);
  CHECK(r.e.qp.state() == QpState::kRts);
}

TEST_CASE(
    "responder: a new atomic that finds no room for its answer is not run, and is taken "
    "when resent") {
  Responder r;
  store_u64(r.e.mem() + 64, 10);
  store_u64(r.e.mem() + 128, 20);
  REQUIRE(rx_atomic(r, Opcode::kFetchAdd, 100, 64, 1) == RxResult::kAccepted);
  // The requester resends it while nothing is transmitted: each replay queues an answer,
  // until the response queue is full.
  while (r.e.qp.counters().drop_response_queue_full == 0) {
    REQUIRE(rx_atomic(r, Opcode::kFetchAdd, 100, 64, 1) != RxResult::kAccepted);
  }
  CHECK(rx_atomic(r, Opcode::kFetchAdd, 101, 128, 5) == RxResult::kDropped);
  CHECK(load_u64(r.e.mem() + 128) == 20);  // not run: its answer could not have been sent
  CHECK(r.e.qp.state() == QpState::kRts);
  CHECK(r.e.qp.expected_psn() == 101);
  (void)r.tx();
  // Resent after the ACK timeout, it runs once.
  CHECK(rx_atomic(r, Opcode::kFetchAdd, 101, 128, 5) == RxResult::kAccepted);
  CHECK(load_u64(r.e.mem() + 128) == 25);
  auto t = r.tx();
  REQUIRE(t.size() == 1);
  CHECK(t[0].hdr.atomic_ack_orig == 20);
  CHECK(load_u64(r.e.mem() + 64) == 11);
}

TEST_CASE("responder: atomic access, alignment and framing errors are NAKed") {
  SECTION("QP without remote atomic access") {
    QpAttr a = default_attr();
    a.access_flags = kAccessRemoteWrite | kAccessRemoteRead;
    Responder r(a);
    CHECK(rx_atomic(r, Opcode::kFetchAdd, 100, 0, 1) == RxResult::kDropped);
    CHECK(r.tx()[0].hdr.aeth.syndrome == 0x62);
  }
  SECTION("region without remote atomic access") {
    Responder r;
    // Remote lookups read the region's access each time (only local views are cached).
    r.e.mrs.region(0).access = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
    CHECK(rx_atomic(r, Opcode::kFetchAdd, 100, 0, 1) == RxResult::kDropped);
    CHECK(r.tx()[0].hdr.aeth.syndrome == 0x62);
  }
  SECTION("bad rkey, out of bounds") {
    Responder r;
    CHECK(rx_atomic(r, Opcode::kCompareSwap, 100, 0, 1, 0, 0x8100) == RxResult::kDropped);
    CHECK(r.tx()[0].hdr.aeth.syndrome == 0x62);
    Responder s;
    CHECK(rx_atomic(s, Opcode::kFetchAdd, 100, kMrBytes, 1) == RxResult::kDropped);
    CHECK(s.tx()[0].hdr.aeth.syndrome == 0x62);
  }
  SECTION("unaligned address: invalid request") {
    Responder r;
    CHECK(rx_atomic(r, Opcode::kFetchAdd, 100, 4, 1) == RxResult::kDropped);
    CHECK(r.tx()[0].hdr.aeth.syndrome == 0x61);
    CHECK(load_u64(r.e.mem() + 0) == 0);
  }
  SECTION("payload, or inside a SEND: invalid request") {
    Responder r;
    CHECK(rx_atomic(r, Opcode::kFetchAdd, 100, 0, 1, 0, 0x8000, bytes(8)) == RxResult::kDropped);
    CHECK(r.tx()[0].hdr.aeth.syndrome == 0x61);
    Responder s;
    REQUIRE(s.e.qp.post_recv(make_recv(1, 0x1000, 4096)) == Status::kOk);
    CHECK(s.rx(Opcode::kSendFirst, 100, bytes(1024)) == RxResult::kAccepted);
    CHECK(rx_atomic(s, Opcode::kFetchAdd, 101, 0, 1) == RxResult::kDropped);
    auto t = s.tx();
    CHECK(t.back().hdr.aeth.syndrome == 0x61);
    CHECK(load_u64(s.e.mem() + 0) == 0);
  }
}

TEST_CASE("responder: READ access errors") {
  SECTION("bad rkey") {
    Responder r;
    CHECK(r.rx(Opcode::kReadRequest, 100, {}, true, reth(0, 16, 0x8100)) == RxResult::kDropped);
    CHECK(r.tx()[0].hdr.aeth.syndrome == 0x62);
  }
  SECTION("QP without remote read") {
    QpAttr a = default_attr();
    a.access_flags = kAccessRemoteWrite;
    Responder r(a);
    CHECK(r.rx(Opcode::kReadRequest, 100, {}, true, reth(0, 16)) == RxResult::kDropped);
    CHECK(r.tx()[0].hdr.aeth.syndrome == 0x62);
  }
  SECTION("out of bounds") {
    Responder r;
    CHECK(r.rx(Opcode::kReadRequest, 100, {}, true, reth(kMrBytes, 1)) == RxResult::kDropped);
    CHECK(r.tx()[0].hdr.aeth.syndrome == 0x62);
  }
}

TEST_CASE("responder: READ responses, ordering with ACKs, and replay of a duplicate READ") {
  Responder r;
  for (uint32_t i = 0; i < 3000; ++i) r.e.mem()[i] = static_cast<uint8_t>(i * 13);
  REQUIRE(r.e.qp.post_recv(make_recv(1, 0x10000, 64)) == Status::kOk);
  CHECK(r.rx(Opcode::kReadRequest, 100, {}, true, reth(0, 3000)) == RxResult::kAccepted);
  CHECK(r.rx(Opcode::kSendOnly, 103, bytes(5)) == RxResult::kAccepted);
  auto t = r.tx();
  REQUIRE(t.size() == 4);
  CHECK(t[0].hdr.bth.opcode == op(Opcode::kReadResponseFirst));
  CHECK(t[0].hdr.aeth.msn == 1);
  CHECK(t[1].hdr.bth.opcode == op(Opcode::kReadResponseMiddle));
  CHECK(t[2].hdr.bth.opcode == op(Opcode::kReadResponseLast));
  CHECK(t[2].hdr.bth.psn == 102);
  CHECK(t[3].hdr.bth.opcode == op(Opcode::kAcknowledge));  // after the READ's responses
  CHECK(t[3].hdr.bth.psn == 103);
  CHECK(t[3].hdr.aeth.msn == 2);
  // The requester lost the middle response and asks again from PSN 101.
  CHECK(r.rx(Opcode::kReadRequest, 101, {}, true, reth(1024, 3000 - 1024)) == RxResult::kDuplicate);
  t = r.tx();
  REQUIRE(t.size() == 2);
  CHECK(t[0].hdr.bth.opcode == op(Opcode::kReadResponseFirst));
  CHECK(t[0].hdr.bth.psn == 101);
  CHECK(t[0].payload == std::vector<uint8_t>(r.e.mem() + 1024, r.e.mem() + 2048));
  CHECK(t[1].hdr.bth.opcode == op(Opcode::kReadResponseLast));
  CHECK(t[1].hdr.bth.psn == 102);
  CHECK(r.e.qp.expected_psn() == 104);
}

TEST_CASE("responder: more READs than the responder depth is an invalid request") {
  QpAttr a = default_attr();
  a.max_dest_rd_atomic = 2;
  Responder r(a);
  CHECK(r.rx(Opcode::kReadRequest, 100, {}, true, reth(0, 16)) == RxResult::kAccepted);
  CHECK(r.rx(Opcode::kReadRequest, 101, {}, true, reth(0, 16)) == RxResult::kAccepted);
  CHECK(r.rx(Opcode::kReadRequest, 102, {}, true, reth(0, 16)) == RxResult::kDropped);
  // The two READs taken before it are still answered, ahead of the NAK: it tells the
  // requester that everything before PSN 102 completed.
  auto t = r.tx();
  REQUIRE(t.size() == 3);
  CHECK(t[0].hdr.bth.opcode == op(Opcode::kReadResponseOnly));
  CHECK(t[0].hdr.bth.psn == 100);
  CHECK(t[1].hdr.bth.opcode == op(Opcode::kReadResponseOnly));
  CHECK(t[1].hdr.bth.psn == 101);
  CHECK(t[2].hdr.bth.opcode == op(Opcode::kAcknowledge));
  CHECK(t[2].hdr.bth.psn == 102);
  CHECK(t[2].hdr.aeth.syndrome == 0x61);
}

TEST_CASE("responder: a fatal error still answers the READs and atomics taken before it") {
  Responder r;
  for (uint32_t i = 0; i < 3072; ++i) r.e.mem()[i] = static_cast<uint8_t>(i * 7);
  store_u64(r.e.mem() + 0x2000, 5);
  CHECK(r.rx(Opcode::kReadRequest, 100, {}, true, reth(0, 3072)) == RxResult::kAccepted);
  CHECK(rx_atomic(r, Opcode::kFetchAdd, 103, 0x2000, 10) == RxResult::kAccepted);

  SECTION("answers in PSN order, then the NAK; nothing taken after it") {
    // A WRITE with a bad rkey: remote access error, the QP goes to ERR.
    CHECK(r.rx(Opcode::kWriteOnly, 104, bytes(4), true, reth(0x3000, 4, 0xdead)) ==
          RxResult::kDropped);
    CHECK(r.e.qp.state() == QpState::kErr);
    CHECK(r.rx(Opcode::kReadRequest, 104, {}, true, reth(0, 16)) == RxResult::kDropped);
    CHECK(rx_atomic(r, Opcode::kFetchAdd, 100, 0x2000, 10) == RxResult::kDropped);
    auto t = r.tx();
    REQUIRE(t.size() == 5);
    for (uint32_t i = 0; i < 3; ++i) {
      INFO(i);
      CHECK(t[i].hdr.bth.psn == 100 + i);
      CHECK(t[i].payload == std::vector<uint8_t>(r.e.mem() + i * 1024, r.e.mem() + (i + 1) * 1024));
    }
    CHECK(t[0].hdr.bth.opcode == op(Opcode::kReadResponseFirst));
    CHECK(t[2].hdr.bth.opcode == op(Opcode::kReadResponseLast));
    CHECK(t[3].hdr.bth.opcode == op(Opcode::kAtomicAcknowledge));
    CHECK(t[3].hdr.bth.psn == 103);
    CHECK(t[3].hdr.atomic_ack_orig == 5);
    CHECK(t[4].hdr.bth.opcode == op(Opcode::kAcknowledge));
    CHECK(t[4].hdr.bth.psn == 104);
    CHECK(t[4].hdr.aeth.syndrome == 0x62);
    CHECK(t[4].hdr.aeth.msn == 2);
    CHECK(load_u64(r.e.mem() + 0x2000) == 15);  // executed once
    CHECK(r.tx().empty());
  }
  SECTION("the owner's modify to ERR stops them, and the NAK behind them") {
    CHECK(r.rx(Opcode::kWriteOnly, 104, bytes(4), true, reth(0x3000, 4, 0xdead)) ==
          RxResult::kDropped);
    QpAttr err;
    err.state = QpState::kErr;
    REQUIRE(r.e.qp.modify(err, kAttrState) == Status::kOk);
    // The NAK for 104 would say the READ and the atomic were answered.
    CHECK(r.tx().empty());
  }
  SECTION("the owner's modify to ERR after the answers went: the NAK still goes") {
    CHECK(r.rx(Opcode::kWriteOnly, 104, bytes(4), true, reth(0x3000, 4, 0xdead)) ==
          RxResult::kDropped);
    TxPacket t;
    for (int i = 0; i < 4; ++i) REQUIRE(r.e.qp.poll_tx(r.now_ns, t));
    CHECK(t.hdr.bth.opcode == op(Opcode::kAtomicAcknowledge));
    QpAttr err;
    err.state = QpState::kErr;
    REQUIRE(r.e.qp.modify(err, kAttrState) == Status::kOk);
    auto rest = r.tx();
    REQUIRE(rest.size() == 1);
    CHECK(rest[0].hdr.aeth.syndrome == 0x62);
  }
  SECTION("RESET drops everything") {
    CHECK(r.rx(Opcode::kWriteOnly, 104, bytes(4), true, reth(0x3000, 4, 0xdead)) ==
          RxResult::kDropped);
    QpAttr reset;
    reset.state = QpState::kReset;
    REQUIRE(r.e.qp.modify(reset, kAttrState) == Status::kOk);
    CHECK(r.tx().empty());
  }
}

TEST_CASE("responder: packets in the wrong state or for another QP are dropped") {
  Responder r;
  RoceHeader h;
  h.bth.opcode = op(Opcode::kSendOnly);
  h.bth.dest_qp = 0x23;
  h.bth.psn = 100;
  CHECK(r.e.qp.on_packet(0, h, {}) == RxResult::kDropped);
  CHECK(r.e.qp.counters().drop_wrong_qp == 1);
  h.bth.dest_qp = 0x22;
  h.bth.opcode = 0x81;  // CNP: not for the transport
  CHECK(r.e.qp.on_packet(0, h, {}) == RxResult::kDropped);
  h.bth.opcode = 0x42;  // unknown
  CHECK(r.e.qp.on_packet(0, h, {}) == RxResult::kDropped);
  CHECK(r.e.qp.counters().drop_bad_opcode == 2);
  Endpoint init(QpPair::make_cfg(0x22));
  QpAttr a;
  a.state = QpState::kInit;
  REQUIRE(init.qp.modify(a, kAttrState) == Status::kOk);
  h.bth.opcode = op(Opcode::kSendOnly);
  CHECK(init.qp.on_packet(0, h, {}) == RxResult::kDropped);
  CHECK(init.qp.counters().drop_state == 1);
}

// Deregistering a region revokes the peer's access at once, also to requests taken before:
// nothing the responder saved (a READ's memory, a WRITE's target) outlives the rkey.
TEST_CASE("responder: a duplicate READ of a deregistered region is NAKed, not replayed") {
  Responder r;
  std::memcpy(r.e.mem(), "public-data-0000", 16);
  REQUIRE(r.rx(Opcode::kReadRequest, 100, {}, true, reth(0, 16)) == RxResult::kAccepted);
  auto t = r.tx();
  REQUIRE(t.size() == 1);
  CHECK(t[0].payload == std::vector<uint8_t>(r.e.mem(), r.e.mem() + 16));

  SECTION("another region registered meanwhile: the rkey still names it, the replay goes out") {
    r.e.mrs.add(kBase + kMrBytes, 4096, kAllAccess);
    std::memcpy(r.e.mem(), "new-data-0000000", 16);
    CHECK(r.rx(Opcode::kReadRequest, 100, {}, true, reth(0, 16)) == RxResult::kDuplicate);
    t = r.tx();
    REQUIRE(t.size() == 1);
    CHECK(t[0].hdr.bth.opcode == op(Opcode::kReadResponseOnly));
    CHECK(t[0].payload == std::vector<uint8_t>(r.e.mem(), r.e.mem() + 16));
    CHECK(r.e.qp.state() == QpState::kRts);
  }
  SECTION("its region deregistered and the memory reused: Remote Access Error") {
    r.e.mrs.remove(0);
    std::memcpy(r.e.mem(), "SECRET-after-drg", 16);
    for (int i = 0; i < 3; ++i) {
      CHECK(r.rx(Opcode::kReadRequest, 100, {}, true, reth(0, 16)) != RxResult::kAccepted);
      t = r.tx();
      for (const Packet& p : t) CHECK(p.hdr.bth.opcode == op(Opcode::kAcknowledge));
      if (i == 0) {
        REQUIRE(t.size() == 1);
        CHECK(t[0].hdr.bth.psn == 100);
        CHECK(t[0].hdr.aeth.type() == AethType::kNak);
        CHECK(t[0].hdr.aeth.value() == static_cast<uint8_t>(NakCode::kRemoteAccessError));
      }
    }
    CHECK(r.e.qp.state() == QpState::kErr);
    CHECK(r.e.qp.error().nak == NakCode::kRemoteAccessError);
  }
}

TEST_CASE("responder: a READ being answered stops with a NAK when its region is deregistered") {
  Responder r;
  REQUIRE(r.e.qp.post_recv(make_recv(1, 0x8000, 64)) == Status::kOk);
  REQUIRE(r.rx(Opcode::kReadRequest, 100, {}, true, reth(0, 4096)) == RxResult::kAccepted);
  REQUIRE(r.rx(Opcode::kSendOnly, 104, bytes(8)) == RxResult::kAccepted);  // ACK queued after
  TxPacket first;
  REQUIRE(r.e.qp.poll_tx(r.now_ns, first));
  CHECK(first.hdr.bth.opcode == op(Opcode::kReadResponseFirst));
  r.e.mrs.remove(0);
  auto t = r.tx();
  // One NAK at the first response not sent; the SEND's ACK would acknowledge past the READ.
  REQUIRE(t.size() == 1);
  CHECK(t[0].hdr.bth.opcode == op(Opcode::kAcknowledge));
  CHECK(t[0].hdr.bth.psn == 101);
  CHECK(t[0].hdr.aeth.type() == AethType::kNak);
  CHECK(t[0].hdr.aeth.value() == static_cast<uint8_t>(NakCode::kRemoteAccessError));
  CHECK(r.e.qp.state() == QpState::kErr);
  // Nor is it replayed later.
  CHECK(r.rx(Opcode::kReadRequest, 100, {}, true, reth(0, 4096)) == RxResult::kDropped);
  CHECK(r.tx().empty());
}

TEST_CASE("responder: a WRITE's later packets do not reach a region deregistered meanwhile") {
  Responder r;
  REQUIRE(r.rx(Opcode::kWriteFirst, 100, bytes(1024, 0x11), false, reth(0, 3072)) ==
          RxResult::kAccepted);
  SECTION("another region registered meanwhile: the WRITE goes on") {
    r.e.mrs.add(kBase + kMrBytes, 4096, kAllAccess);
    CHECK(r.rx(Opcode::kWriteMiddle, 101, bytes(1024, 0x22), false) == RxResult::kAccepted);
    CHECK(r.rx(Opcode::kWriteLast, 102, bytes(1024, 0x33)) == RxResult::kAccepted);
    CHECK(r.e.mem()[1024] == 0x22);
    CHECK(r.e.mem()[3071] == 0x33);
    auto t = r.tx();
    REQUIRE(t.size() == 1);
    CHECK(t[0].hdr.aeth.type() == AethType::kAck);
  }
  SECTION("its region deregistered: Remote Access Error, nothing written") {
    r.e.mrs.remove(0);
    CHECK(r.rx(Opcode::kWriteMiddle, 101, bytes(1024, 0x22), false) == RxResult::kDropped);
    CHECK(r.e.mem()[1024] == 0);
    r.expect_one_nak(101, NakCode::kRemoteAccessError);
    CHECK(r.e.qp.state() == QpState::kErr);
    CHECK(r.rx(Opcode::kWriteLast, 102, bytes(1024, 0x33)) == RxResult::kDropped);
    CHECK(r.e.mem()[2048] == 0);
  }
}

TEST_CASE("responder: the requester of a READ whose region went away gets Remote Access Error") {
  QpPair p;
  SECTION("the response lost, the READ resent after deregistration") {
    bool drop = true;
    p.filter = [&](bool from_a, Packet&) { return from_a || !std::exchange(drop, false); };
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kRead, 1, 0, 16, 0x1000)) == Status::kOk);
    p.pump();
    p.b.mrs.remove(0);
    REQUIRE(p.advance_to_deadline());  // A's ACK timeout: the READ again
    p.pump();
  }
  SECTION("deregistered between two of its responses") {
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kRead, 1, 0, 4096, 0x1000)) == Status::kOk);
    p.pump(2);  // the request and the first response
    p.b.mrs.remove(0);
    p.pump();
  }
  auto c = p.a.drain_cq();
  REQUIRE(c.size() == 1);
  CHECK(c[0].wr_id == 1);
  CHECK(c[0].status == WcStatus::kRemoteAccessError);
  CHECK(p.b.qp.state() == QpState::kErr);
}

TEST_CASE("responder: a stopping QP never ACKs past READ or atomic answers it did not send") {
  Responder r;
  REQUIRE(r.e.qp.post_recv(make_recv(1, 0x8000, 64)) == Status::kOk);
  REQUIRE(r.rx(Opcode::kSendOnly, 100, bytes(8)) == RxResult::kAccepted);  // ACK 100, MSN 1
  REQUIRE(r.rx(Opcode::kReadRequest, 101, {}, true, reth(0, 4096)) == RxResult::kAccepted);
  REQUIRE(r.e.qp.post_recv(make_recv(2, 0x9000, 64)) == Status::kOk);
  REQUIRE(r.rx(Opcode::kSendOnly, 105, bytes(8)) == RxResult::kAccepted);  // ACK queued after
  TxPacket t;
  REQUIRE(r.e.qp.poll_tx(r.now_ns, t));  // the SEND's ACK
  CHECK(t.hdr.bth.psn == 100);
  REQUIRE(r.e.qp.poll_tx(r.now_ns, t));  // the READ's first response
  CHECK(t.hdr.bth.opcode == op(Opcode::kReadResponseFirst));

  SECTION("the final ACK covers only what precedes the unfinished READ") {
    TxPacket fin;
    r.e.qp.final_ack(fin);
    CHECK(fin.hdr.bth.opcode == op(Opcode::kAcknowledge));
    CHECK(fin.hdr.aeth.type() == AethType::kAck);
    CHECK(fin.hdr.bth.psn == 100);
    CHECK(fin.hdr.aeth.msn == 1);
  }
  SECTION("stopped: the queued ACK behind the dropped READ responses is not sent") {
    QpAttr err;
    err.state = QpState::kErr;
    REQUIRE(r.e.qp.modify(err, kAttrState) == Status::kOk);
    CHECK(r.tx().empty());
    CHECK_FALSE(r.e.qp.responses_queued());
  }
  SECTION("once the READ is answered the final ACK covers everything taken") {
    auto rest = r.tx();
    REQUIRE(rest.size() == 4);
    CHECK(rest[3].hdr.bth.psn == 105);
    TxPacket fin;
    r.e.qp.final_ack(fin);
    CHECK(fin.hdr.bth.psn == 105);
    CHECK(fin.hdr.aeth.msn == 3);
  }
}

TEST_CASE("responder: a stopping QP's final ACK stops before a queued atomic answer") {
  Responder r;
  RoceHeader h;
  h.bth.opcode = op(Opcode::kFetchAdd);
  h.bth.dest_qp = 0x22;
  h.bth.psn = 100;
  h.atomic = conduit::wire::AtomicEth{kBase + 0x100, 0x8000, 1, 0};
  REQUIRE(r.e.qp.on_packet(r.now_ns, h, {}) == RxResult::kAccepted);
  TxPacket fin;
  r.e.qp.final_ack(fin);
  CHECK(fin.hdr.bth.psn == 99);
  CHECK(fin.hdr.aeth.msn == 0);
}

namespace {
void set_access(Qp& qp, uint32_t access) {
  QpAttr a;
  a.access_flags = access;
  REQUIRE(qp.modify(a, kAttrAccessFlags) == Status::kOk);
}
}  // namespace

TEST_CASE("responder: a WRITE's later packets are checked against the QP's access flags") {
  Responder r;
  REQUIRE(r.rx(Opcode::kWriteFirst, 100, bytes(1024, 0x11), false, reth(0, 3072)) ==
          RxResult::kAccepted);
  SECTION("the flags changed, remote write still granted: the WRITE goes on") {
    set_access(r.e.qp, kAccessLocalWrite | kAccessRemoteWrite);
    CHECK(r.rx(Opcode::kWriteMiddle, 101, bytes(1024, 0x22), false) == RxResult::kAccepted);
    CHECK(r.rx(Opcode::kWriteLast, 102, bytes(1024, 0x33)) == RxResult::kAccepted);
    CHECK(r.e.mem()[3071] == 0x33);
    CHECK(r.e.qp.state() == QpState::kRts);
  }
  SECTION("remote write taken away: Remote Access Error, nothing more written") {
    set_access(r.e.qp, kAccessLocalWrite | kAccessRemoteRead);
    CHECK(r.rx(Opcode::kWriteMiddle, 101, bytes(1024, 0x22), false) == RxResult::kDropped);
    CHECK(r.e.mem()[1024] == 0);
    r.expect_one_nak(101, NakCode::kRemoteAccessError);
    CHECK(r.e.qp.state() == QpState::kErr);
  }
}

TEST_CASE("responder: READs are checked against the QP's access flags when replayed or answered") {
  Responder r;
  std::memcpy(r.e.mem(), "public-data-0000", 16);
  SECTION("a duplicate READ after remote read was taken away: NAKed, not replayed") {
    REQUIRE(r.rx(Opcode::kReadRequest, 100, {}, true, reth(0, 16)) == RxResult::kAccepted);
    REQUIRE(r.tx().size() == 1);
    set_access(r.e.qp, kAccessLocalWrite | kAccessRemoteWrite);
    CHECK(r.rx(Opcode::kReadRequest, 100, {}, true, reth(0, 16)) != RxResult::kAccepted);
    auto t = r.tx();
    REQUIRE(t.size() == 1);
    CHECK(t[0].hdr.bth.opcode == op(Opcode::kAcknowledge));
    CHECK(t[0].hdr.aeth.type() == AethType::kNak);
    CHECK(t[0].hdr.aeth.value() == static_cast<uint8_t>(NakCode::kRemoteAccessError));
    CHECK(r.e.qp.state() == QpState::kErr);
  }
  SECTION("a duplicate READ after an unrelated change of the flags is replayed") {
    REQUIRE(r.rx(Opcode::kReadRequest, 100, {}, true, reth(0, 16)) == RxResult::kAccepted);
    REQUIRE(r.tx().size() == 1);
    set_access(r.e.qp, kAccessLocalWrite | kAccessRemoteRead);
    CHECK(r.rx(Opcode::kReadRequest, 100, {}, true, reth(0, 16)) == RxResult::kDuplicate);
    auto t = r.tx();
    REQUIRE(t.size() == 1);
    CHECK(t[0].hdr.bth.opcode == op(Opcode::kReadResponseOnly));
  }
  SECTION("a READ being answered stops with a NAK") {
    REQUIRE(r.rx(Opcode::kReadRequest, 100, {}, true, reth(0, 4096)) == RxResult::kAccepted);
    TxPacket first;
    REQUIRE(r.e.qp.poll_tx(r.now_ns, first));
    set_access(r.e.qp, 0);
    r.expect_one_nak(101, NakCode::kRemoteAccessError);
  }
}

TEST_CASE("responder: a posted receive whose region was deregistered is not written") {
  Responder r;
  REQUIRE(r.e.qp.post_recv(make_recv(1, 0x8000, 4096)) == Status::kOk);
  SECTION("another region registered meanwhile: the SEND lands") {
    r.e.mrs.add(kBase + kMrBytes, 4096, kAllAccess);
    CHECK(r.rx(Opcode::kSendOnly, 100, bytes(8, 0x5a)) == RxResult::kAccepted);
    CHECK(r.e.mem()[0x8000] == 0x5a);
    auto c = r.e.drain_cq();
    REQUIRE(c.size() == 1);
    CHECK(c[0].status == WcStatus::kSuccess);
  }
  SECTION("its region deregistered before the SEND: local protection error, NAK") {
    r.e.mrs.remove(0);
    CHECK(r.rx(Opcode::kSendOnly, 100, bytes(8, 0x5a)) == RxResult::kDropped);
    CHECK(r.e.mem()[0x8000] == 0);
    auto c = r.e.drain_cq();
    REQUIRE(c.size() >= 1);
    CHECK(c[0].wr_id == 1);
    CHECK(c[0].opcode == WcOpcode::kRecv);
    CHECK(c[0].status == WcStatus::kLocalProtectionError);
    r.expect_one_nak(100, NakCode::kRemoteOperationalError);
    CHECK(r.e.qp.state() == QpState::kErr);
  }
  SECTION("its region deregistered in the middle of the SEND: the rest is not written") {
    CHECK(r.rx(Opcode::kSendFirst, 100, bytes(1024, 0x11), false) == RxResult::kAccepted);
    r.e.mrs.remove(0);
    CHECK(r.rx(Opcode::kSendLast, 101, bytes(8, 0x22)) == RxResult::kDropped);
    CHECK(r.e.mem()[0x8000 + 1024] == 0);
    auto c = r.e.drain_cq();
    REQUIRE(c.size() >= 1);
    CHECK(c[0].status == WcStatus::kLocalProtectionError);
    auto t = r.tx();
    REQUIRE(t.size() == 1);
    CHECK(t[0].hdr.bth.psn == 101);
    CHECK(t[0].hdr.aeth.value() == static_cast<uint8_t>(NakCode::kRemoteOperationalError));
  }
}

TEST_CASE(
    "responder: a SEND into a deregistered receive: the requester gets Remote Operational Error") {
  for (bool sr : {false, true}) {
    INFO("selective repeat " << sr);
    QpAttr attr = default_attr();
    attr.selective_repeat = sr;
    QpPair p(attr);
    REQUIRE(p.b.qp.post_recv(make_recv(1, 0x8000, 64)) == Status::kOk);
    p.b.mrs.remove(0);
    REQUIRE(p.a.qp.post_send(make_wr(WrOpcode::kSend, 7, 0, 16)) == Status::kOk);
    p.pump();
    auto ca = p.a.drain_cq();
    REQUIRE(ca.size() == 1);
    CHECK(ca[0].status == WcStatus::kRemoteOperationError);
    auto cb = p.b.drain_cq();
    REQUIRE(cb.size() == 1);
    CHECK(cb[0].status == WcStatus::kLocalProtectionError);
  }
}

// rxe's completer completes a READ or atomic WR with an ACKNOWLEDGE whose PSN is that WR's last
// PSN (COMPST_WRITE_SEND -> COMP_ACK): its data or result never written. So an ACK we send for
// anything but the request it answers carries the PSN of the last SEND/WRITE packet taken, as
// rxe's own responder does since "IB/rxe: fix for duplicate request processing and ack psns".
TEST_CASE("responder: an ACK for a duplicate or a stop never carries a READ's or atomic's PSN") {
  Responder r;
  REQUIRE(r.e.qp.post_recv(make_recv(1, 0x8000, 64)) == Status::kOk);
  REQUIRE(r.e.qp.post_recv(make_recv(2, 0x9000, 64)) == Status::kOk);

  SECTION("a duplicate WRITE behind a READ: the WRITE's PSN") {
    REQUIRE(r.rx(Opcode::kWriteOnly, 100, bytes(16), true, reth(0x4000, 16)) ==
            RxResult::kAccepted);
    REQUIRE(r.rx(Opcode::kReadRequest, 101, {}, true, reth(0, 2048)) == RxResult::kAccepted);
    REQUIRE(r.tx().size() == 3);  // ACK 100, READ responses 101 and 102
    // The requester lost the ACK and the READ's responses and goes back to PSN 100.
    CHECK(r.rx(Opcode::kWriteOnly, 100, bytes(16), true, reth(0x4000, 16)) == RxResult::kDuplicate);
    auto t = r.tx();
    REQUIRE(t.size() == 1);
    CHECK(t[0].hdr.bth.opcode == op(Opcode::kAcknowledge));
    CHECK(t[0].hdr.bth.psn == 100);  // not 102, the READ's last PSN
    CHECK(t[0].hdr.aeth.type() == AethType::kAck);
    CHECK(t[0].hdr.aeth.msn == 2);
    // The final ACK of a QP that stops says the same.
    TxPacket fin;
    r.e.qp.final_ack(fin);
    CHECK(fin.hdr.bth.psn == 100);
    CHECK(fin.hdr.aeth.msn == 2);
  }
  SECTION("a duplicate SEND behind an atomic: the SEND's PSN") {
    REQUIRE(r.rx(Opcode::kSendOnly, 100, bytes(8)) == RxResult::kAccepted);
    REQUIRE(rx_atomic(r, Opcode::kFetchAdd, 101, 64, 1) == RxResult::kAccepted);
    REQUIRE(r.tx().size() == 2);
    CHECK(r.rx(Opcode::kSendOnly, 100, bytes(8)) == RxResult::kDuplicate);
    auto t = r.tx();
    REQUIRE(t.size() == 1);
    CHECK(t[0].hdr.bth.opcode == op(Opcode::kAcknowledge));
    CHECK(t[0].hdr.bth.psn == 100);  // not 101, the atomic's
    TxPacket fin;
    r.e.qp.final_ack(fin);
    CHECK(fin.hdr.bth.psn == 100);
  }
  SECTION("SENDs and READs interleaved, and a burst of SEND onlys") {
    REQUIRE(r.rx(Opcode::kSendOnly, 100, bytes(8)) == RxResult::kAccepted);
    REQUIRE(r.rx(Opcode::kReadRequest, 101, {}, true, reth(0, 16)) == RxResult::kAccepted);
    REQUIRE(r.rx(Opcode::kReadRequest, 102, {}, true, reth(0, 16)) == RxResult::kAccepted);
    (void)r.tx();
    CHECK(r.rx(Opcode::kSendOnly, 100, bytes(8)) == RxResult::kDuplicate);
    auto t = r.tx();
    REQUIRE(t.size() == 1);
    CHECK(t[0].hdr.bth.psn == 100);  // not 102
    // Two SEND onlys through the burst call, then a READ: the second SEND's PSN.
    std::vector<std::vector<uint8_t>> frames;
    std::vector<conduit::wire::RoceView> views;
    for (uint32_t psn : {103u, 104u}) {
      uint8_t* f = frames.emplace_back(conduit::wire::kBthBytes + 8, 0).data();
      f[0] = op(Opcode::kSendOnly);
      conduit::wire::put_be32(f + 4, 0x22);
      conduit::wire::put_be32(f + 8, 0x80000000u | psn);
    }
    for (auto& f : frames) {
      conduit::wire::RoceView v{};
      v.bth = f.data();
      v.info = &conduit::wire::opcode_info(Opcode::kSendOnly);
      v.payload = std::span<const uint8_t>(f.data() + conduit::wire::kBthBytes, 8);
      views.push_back(v);
    }
    REQUIRE(r.e.qp.post_recv(make_recv(3, 0xA000, 64)) == Status::kOk);
    RxResult res[2];
    r.e.qp.on_packets(r.now_ns, views, res);
    REQUIRE(res[0] == RxResult::kAccepted);
    REQUIRE(res[1] == RxResult::kAccepted);
    REQUIRE(r.rx(Opcode::kReadRequest, 105, {}, true, reth(0, 16)) == RxResult::kAccepted);
    (void)r.tx();
    CHECK(r.rx(Opcode::kSendOnly, 103, bytes(8)) == RxResult::kDuplicate);
    t = r.tx();
    REQUIRE(t.size() == 1);
    CHECK(t[0].hdr.bth.psn == 104);  // not 105
  }
}
