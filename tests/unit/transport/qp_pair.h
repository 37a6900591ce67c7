// Test fixture: two QPs wired back to back through a packet list the test
// can inspect, drop from and reorder. Time only moves when the test says so.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "transport/heap_memory_regions.h"
#include "transport/qp.h"

namespace conduit::transport::test {

struct Packet {
  wire::RoceHeader hdr;
  std::vector<uint8_t> payload;
};

inline Packet copy_packet(const TxPacket& tx) {
  Packet p{tx.hdr, {}};
  for (uint32_t i = 0; i < tx.payload_parts; ++i) {
    p.payload.insert(p.payload.end(), tx.payload[i].begin(), tx.payload[i].end());
  }
  return p;
}

inline constexpr uint64_t kBase = 0x10000;
inline constexpr uint32_t kMrBytes = 1 << 20;
inline constexpr uint32_t kAllAccess =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

struct Endpoint {
  HeapMemoryRegions mrs;
  Qp qp;
  explicit Endpoint(const QpConfig& cfg) : qp(cfg, mrs) {
    mrs.add(kBase, kMrBytes, kAllAccess);  // lkey 0x100, rkey 0x8000
  }
  uint8_t* mem() { return mrs.region(0).bytes.data(); }
  std::vector<Completion> drain_cq() {
    std::vector<Completion> out(256);
    out.resize(qp.poll_cq(out));
    return out;
  }
};

inline QpAttr default_attr() {
  QpAttr a;
  a.access_flags = kAllAccess;
  a.pmtu_bytes = 1024;
  a.timeout = 10;  // 4.2 ms
  a.retry_cnt = 3;
  a.rnr_retry = 3;
  a.min_rnr_timer = 1;  // 10 us
  return a;
}

// RESET -> INIT -> RTR -> RTS with `a`, talking to `remote_qpn`.
inline void bring_up(Qp& qp, QpAttr a, uint32_t remote_qpn, uint32_t sq_psn, uint32_t rq_psn) {
  a.dest_qpn = remote_qpn;
  a.sq_psn = sq_psn;
  a.rq_psn = rq_psn;
  a.state = QpState::kInit;
  qp.modify(a, kAttrState | kAttrAccessFlags);
  a.state = QpState::kRtr;
  qp.modify(a, kAttrState | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic |
                   kAttrMinRnrTimer | kAttrSelectiveRepeat);
  a.state = QpState::kRts;
  qp.modify(
      a, kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrMaxRdAtomic);
}

struct QpPair {
  Endpoint a;
  Endpoint b;
  uint64_t now_ns = 1'000'000;
  // Return false to drop the packet. `from_a` tells the direction.
  std::function<bool(bool from_a, Packet&)> filter;
  std::vector<Packet> a_to_b;  // log of everything A sent (after filter decisions too)
  std::vector<Packet> b_to_a;

  explicit QpPair(QpAttr attr = default_attr(), uint32_t psn_a = 100, uint32_t psn_b = 5000,
                  QpConfig cfg_a = make_cfg(0x11), QpConfig cfg_b = make_cfg(0x22))
      : a(cfg_a), b(cfg_b) {
    bring_up(a.qp, attr, cfg_b.qpn, psn_a, psn_b);
    bring_up(b.qp, attr, cfg_a.qpn, psn_b, psn_a);
  }
  static QpConfig make_cfg(uint32_t qpn) {
    QpConfig c;
    c.qpn = qpn;
    c.sq_depth = 64;
    c.rq_depth = 64;
    c.window_packets = 256;
    c.ack_req_every_packets = 8;
    return c;
  }

  // Moves packets both ways until neither side has anything to send.
  // Returns the number of packets moved.
  size_t pump(size_t max_packets = 1'000'000) {
    size_t moved = 0;
    bool any = true;
    while (any && moved < max_packets) {
      any = false;
      TxPacket tx;
      while (moved < max_packets && a.qp.poll_tx(now_ns, tx)) {
        any = true;
        ++moved;
        Packet p = copy_packet(tx);
        a_to_b.push_back(p);
        if (!filter || filter(true, p)) b.qp.on_packet(now_ns, p.hdr, p.payload);
      }
      while (moved < max_packets && b.qp.poll_tx(now_ns, tx)) {
        any = true;
        ++moved;
        Packet p = copy_packet(tx);
        b_to_a.push_back(p);
        if (!filter || filter(false, p)) a.qp.on_packet(now_ns, p.hdr, p.payload);
      }
    }
    return moved;
  }

  // Advances time to the earliest deadline of either QP and fires timers.
  bool advance_to_deadline() {
    const uint64_t d = std::min(a.qp.next_deadline_ns(), b.qp.next_deadline_ns());
    if (d == Qp::kNoDeadline) return false;
    if (d > now_ns) now_ns = d;
    a.qp.on_timer(now_ns);
    b.qp.on_timer(now_ns);
    return true;
  }
};

inline SendWr make_wr(WrOpcode op, uint64_t wr_id, uint64_t local_off, uint32_t len,
                      uint64_t remote_off = 0) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sge[0] = Sge{kBase + local_off, len, 0x100};
  wr.num_sge = 1;
  wr.remote_addr = kBase + remote_off;
  wr.rkey = 0x8000;
  return wr;
}

// An 8-byte atomic on the remote word at remote_off; the original lands at local_off.
inline SendWr make_atomic(WrOpcode op, uint64_t wr_id, uint64_t local_off, uint64_t remote_off,
                          uint64_t compare_add, uint64_t swap = 0) {
  SendWr wr = make_wr(op, wr_id, local_off, kAtomicBytes, remote_off);
  wr.compare_add = compare_add;
  wr.swap = swap;
  return wr;
}

inline uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void store_u64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, sizeof(v)); }

inline RecvWr make_recv(uint64_t wr_id, uint64_t off, uint32_t len) {
  RecvWr wr;
  wr.wr_id = wr_id;
  wr.sge[0] = Sge{kBase + off, len, 0x100};
  wr.num_sge = 1;
  return wr;
}

inline uint8_t op(wire::Opcode o) { return static_cast<uint8_t>(o); }

// Completions as (wr_id, status) in order: one CHECK against the expected list.
using WcList = std::vector<std::pair<uint64_t, WcStatus>>;
inline WcList wr_statuses(const std::vector<Completion>& cs) {
  WcList out;
  for (const Completion& c : cs) out.emplace_back(c.wr_id, c.status);
  return out;
}

// B's packets to A are kept in `held` instead of delivered; A's pass.
inline void hold_b_to_a(QpPair& p, std::vector<Packet>& held) {
  p.filter = [&held](bool from_a, Packet& pkt) {
    if (from_a) return true;
    held.push_back(pkt);
    return false;
  };
}

// A second region of A's, right after the first (lkey 0x101), and a WR reading its
// first `len` bytes: the region a test deregisters under a WR in flight.
inline constexpr uint32_t kSecondLkey = 0x101;
inline uint32_t add_second_region(QpPair& p) {
  return p.a.mrs.add(kBase + kMrBytes, 4096, kAllAccess).lkey;  // kSecondLkey
}
inline SendWr from_second_region(SendWr wr, uint32_t len) {
  wr.sge[0] = Sge{kBase + kMrBytes, len, kSecondLkey};
  return wr;
}
// That region, then WRITEs 1, 2 and 3 of 16 bytes to B's 0x4000, 0x5000 and 0x6000, WRITE 2
// from it: whether all of that was taken.
inline bool post_writes_middle_from_second_region(QpPair& p) {
  return add_second_region(p) == kSecondLkey &&
         p.a.qp.post_send(make_wr(WrOpcode::kWrite, 1, 0, 16, 0x4000)) == Status::kOk &&
         p.a.qp.post_send(from_second_region(make_wr(WrOpcode::kWrite, 2, 0, 16, 0x5000), 16)) ==
             Status::kOk &&
         p.a.qp.post_send(make_wr(WrOpcode::kWrite, 3, 0, 16, 0x6000)) == Status::kOk;
}

}  // namespace conduit::transport::test
