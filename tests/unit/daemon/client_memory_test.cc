// ClientMemory as the QPs' memory: lookups, and the local_view cache the QPs
// keep of the last local key (invalidated by every MR change).
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "engine/client_memory.h"
#include "transport/qp.h"

using namespace conduit;
using namespace conduit::engine;
using namespace conduit::transport;

TEST_CASE("client memory: local_view is the MR lookup_local slices, epoch moves on every change",
          "[client_memory]") {
  std::vector<uint8_t> region(1 << 16);
  ClientMemory mem;
  const uint64_t e0 = mem.epoch();
  REQUIRE(mem.add_mr(region, 0x10, 0x20, 0x7000'0000, 4096, 8192, kAccessLocalWrite));
  const uint64_t e1 = mem.epoch();
  REQUIRE(e1 != e0);
  MrView v;
  REQUIRE(mem.local_view(0x10, v));
  REQUIRE(v.base == 0x7000'0000);
  REQUIRE(v.bytes.data() == region.data() + 4096);
  REQUIRE(v.bytes.size() == 8192);
  REQUIRE(v.access == kAccessLocalWrite);
  std::span<uint8_t> out;
  REQUIRE(mem.lookup_local(0x10, 0x7000'0000 + 100, 50, kAccessLocalWrite, out) == MrStatus::kOk);
  REQUIRE(out.data() == v.bytes.data() + 100);
  REQUIRE_FALSE(mem.local_view(0x11, v));

  std::vector<uint8_t> buf(256);
  REQUIRE(mem.add_local_buffer(0x30, buf));
  REQUIRE(mem.epoch() != e1);
  const uint64_t e2 = mem.epoch();
  REQUIRE(mem.remove_mr(0x10));
  REQUIRE(mem.epoch() != e2);
  REQUIRE_FALSE(mem.local_view(0x10, v));
  REQUIRE_FALSE(mem.remove_mr(0x10));
}

TEST_CASE("client memory: a QP's cached region dies with the MR", "[client_memory]") {
  std::vector<uint8_t> region(1 << 16);
  ClientMemory mem;
  REQUIRE(mem.add_mr(region, 0x10, 0x20, 0x1000, 0, 4096, kAccessLocalWrite));
  QpConfig cfg;
  cfg.qpn = 0x99;
  Qp qp(cfg, mem);
  QpAttr a;
  a.pmtu_bytes = 1024;
  a.dest_qpn = 0x98;
  a.state = QpState::kInit;
  REQUIRE(qp.modify(a, kAttrState) == Status::kOk);
  RecvWr r;
  r.sge[0] = Sge{0x1000, 64, 0x10};
  r.num_sge = 1;
  REQUIRE(qp.post_recv(r) == Status::kOk);  // resolved and cached
  REQUIRE(qp.post_recv(r) == Status::kOk);  // from the cache
  r.sge[0] = Sge{0x1000 + 4096 - 8, 16, 0x10};
  REQUIRE(qp.post_recv(r) == Status::kInvalidSge);  // past the end, cache or not
  REQUIRE(mem.remove_mr(0x10));
  r.sge[0] = Sge{0x1000, 64, 0x10};
  REQUIRE(qp.post_recv(r) == Status::kInvalidSge);  // the cached view is stale
  // The key again, now over other bytes of the region and read-only.
  REQUIRE(mem.add_mr(region, 0x10, 0x20, 0x1000, 8192, 4096, 0));
  REQUIRE(qp.post_recv(r) == Status::kInvalidSge);  // a receive needs local write
}

// kRemoveMr is ClientMemory::remove_mr: from then on the peer reaches none of the MR's bytes,
// also through a READ or WRITE the QP took before (a READ's saved memory, a WRITE's target).
TEST_CASE("client memory: remote access ends with the MR, for requests taken before too",
          "[client_memory]") {
  std::vector<uint8_t> region(1 << 20);
  ClientMemory mem;
  const uint32_t lkey = 0x1234, rkey = 0x5678;
  const uint64_t off = 0x10000;
  REQUIRE(mem.add_mr(region, lkey, rkey, off, off, 4096,
                     kAccessLocalWrite | kAccessRemoteRead | kAccessRemoteWrite));
  QpConfig cfg;
  cfg.qpn = 0x22;
  Qp qp(cfg, mem);
  QpAttr a;
  a.access_flags = kAccessRemoteRead | kAccessRemoteWrite;
  a.pmtu_bytes = 1024;
  a.dest_qpn = 0x11;
  a.rq_psn = 100;
  a.state = QpState::kInit;
  REQUIRE(qp.modify(a, kAttrState | kAttrAccessFlags) == Status::kOk);
  a.state = QpState::kRtr;
  REQUIRE(qp.modify(a, kAttrState | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn |
                           kAttrMaxDestRdAtomic | kAttrMinRnrTimer) == Status::kOk);
  auto request = [&](wire::Opcode o, uint32_t psn, uint32_t len, std::vector<uint8_t> payload) {
    wire::RoceHeader h;
    h.bth.opcode = static_cast<uint8_t>(o);
    h.bth.dest_qp = 0x22;
    h.bth.psn = psn;
    h.bth.ack_req = true;
    h.reth = wire::Reth{off, rkey, len};
    return qp.on_packet(1000, h, payload);
  };
  auto sent = [&] {
    std::vector<TxPacket> v;
    TxPacket t;
    while (qp.poll_tx(1000, t)) v.push_back(t);
    return v;
  };

  SECTION("a duplicate READ") {
    REQUIRE(request(wire::Opcode::kReadRequest, 100, 16, {}) == RxResult::kAccepted);
    REQUIRE(sent().size() == 1);
    REQUIRE(mem.remove_mr(lkey));
    std::memcpy(region.data() + off, "SECRET-after-drg", 16);
    CHECK(request(wire::Opcode::kReadRequest, 100, 16, {}) == RxResult::kDropped);
    const auto t = sent();
    REQUIRE(t.size() == 1);
    CHECK(t[0].payload_bytes == 0);
    CHECK(t[0].hdr.aeth.syndrome ==
          (0x60 | static_cast<uint8_t>(wire::NakCode::kRemoteAccessError)));
  }
  SECTION("the rest of a WRITE") {
    REQUIRE(request(wire::Opcode::kWriteFirst, 100, 2048, std::vector<uint8_t>(1024, 1)) ==
            RxResult::kAccepted);
    REQUIRE(mem.remove_mr(lkey));
    CHECK(request(wire::Opcode::kWriteLast, 101, 0, std::vector<uint8_t>(1024, 2)) ==
          RxResult::kDropped);
    CHECK(region[off + 1024] == 0);
  }
  CHECK(qp.state() == QpState::kErr);
}
