#include "message_workload.h"

#include <cstring>

namespace conduit::transport::sim {
namespace {

// Region indices (lkey 0x100 + i, rkey 0x8000 + i).
constexpr uint32_t kPool = 0;
constexpr uint32_t kReadSlots = 1;   // on A
constexpr uint32_t kWriteSlots = 1;  // on B
constexpr uint32_t kRecvSlots = 2;   // on B

uint64_t slot_addr(uint32_t region, uint64_t slot) {
  return region_base(region) + slot * MessageWorkload::kMaxMessageBytes;
}

}  // namespace

uint64_t checksum(const uint8_t* p, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001B3ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

MessageWorkload::MessageWorkload(Sim& sim, uint64_t messages, uint64_t seed)
    : sim_(sim), rng_(seed), messages_(messages) {
  const uint32_t all = kAccessLocalWrite | kAccessRemoteRead | kAccessRemoteWrite;
  for (Endpoint* e : {&sim.a(), &sim.b()}) {
    auto& pool = e->mrs.add(region_base(kPool), kPoolBytes, all);
    for (auto& byte : pool.bytes) byte = static_cast<uint8_t>(rng_.next());
  }
  sim.a().mrs.add(region_base(kReadSlots), kSlots * kMaxMessageBytes, all);
  sim.b().mrs.add(region_base(kWriteSlots), kSlots * kMaxMessageBytes, all);
  sim.b().mrs.add(region_base(kRecvSlots), kSlots * kMaxMessageBytes, all);
  msgs_.reserve(messages);
  for (uint32_t i = 0; i < kSlots; ++i) {
    RecvWr r;
    r.wr_id = recv_posted_;
    r.sge[0] =
        Sge{slot_addr(kRecvSlots, recv_posted_ % kSlots), kMaxMessageBytes, 0x100 + kRecvSlots};
    r.num_sge = 1;
    if (sim.b().qp.post_recv(r) != Status::kOk) fail("initial post_recv");
    ++recv_posted_;
  }
}

uint32_t MessageWorkload::pick_len() {
  // Skewed so 10,000 messages stay a few MB per link setting: most are small,
  // a few reach the full 1 MiB (and 0 B appears too).
  const double u = rng_.uniform();
  if (u < 0.03) return 0;
  if (u < 0.75) return static_cast<uint32_t>(1 + rng_.below(256));
  if (u < 0.95) return static_cast<uint32_t>(1 + rng_.below(8192));
  if (u < 0.997) return static_cast<uint32_t>(1 + rng_.below(65536));
  if (u < 0.999) return static_cast<uint32_t>(1 + rng_.below(kMaxMessageBytes));
  return kMaxMessageBytes;
}

void MessageWorkload::post_next() {
  const uint64_t id = posted_;
  Msg m;
  m.op = static_cast<WrOpcode>(rng_.below(5));
  m.len = pick_len();
  m.src_off = static_cast<uint32_t>(rng_.below(kPoolBytes - m.len + 1));
  m.imm = static_cast<uint32_t>(rng_.next());
  Endpoint& src = m.op == WrOpcode::kRead ? sim_.b() : sim_.a();
  m.checksum = checksum(src.mrs.region(kPool).bytes.data() + m.src_off, m.len);
  SendWr wr;
  wr.wr_id = id;
  wr.opcode = m.op;
  wr.imm = m.imm;
  wr.num_sge = 1;
  const uint64_t slot = id % kSlots;
  if (m.op == WrOpcode::kRead) {
    wr.sge[0] = Sge{slot_addr(kReadSlots, slot), m.len, 0x100 + kReadSlots};
    wr.remote_addr = region_base(kPool) + m.src_off;
    wr.rkey = 0x8000 + kPool;
  } else {
    wr.sge[0] = Sge{region_base(kPool) + m.src_off, m.len, 0x100 + kPool};
    wr.remote_addr = slot_addr(kWriteSlots, slot);
    wr.rkey = 0x8000 + kWriteSlots;
  }
  const Status s = sim_.a().qp.post_send(wr);
  if (s != Status::kOk) {
    fail(std::string("post_send: ") + status_name(s));
    return;
  }
  if (m.op == WrOpcode::kSend || m.op == WrOpcode::kSendImm || m.op == WrOpcode::kWriteImm) {
    recv_expected_.push_back(id);
  }
  msgs_.push_back(m);
  ++posted_;
}

void MessageWorkload::fail(std::string what) {
  if (error_.empty()) error_ = std::move(what);
}

void MessageWorkload::step() {
  Completion cq[64];
  // Requester side: in posting order, every one successful.
  for (size_t n; (n = sim_.a().qp.poll_cq(cq)) > 0;) {
    for (size_t i = 0; i < n; ++i) {
      const Completion& c = cq[i];
      if (c.wr_id != completed_) {
        return fail("A: completion for wr " + std::to_string(c.wr_id) + ", expected " +
                    std::to_string(completed_));
      }
      if (c.status != WcStatus::kSuccess) {
        return fail("A: wr " + std::to_string(c.wr_id) + " completed with " +
                    wc_status_name(c.status));
      }
      const Msg& m = msgs_[c.wr_id];
      const uint64_t slot = c.wr_id % kSlots;
      if (m.op == WrOpcode::kWrite || m.op == WrOpcode::kWriteImm) {
        const uint8_t* dst =
            sim_.b().mrs.region(kWriteSlots).bytes.data() + slot * kMaxMessageBytes;
        if (checksum(dst, m.len) != m.checksum) return fail("WRITE data mismatch");
      } else if (m.op == WrOpcode::kRead) {
        const uint8_t* dst = sim_.a().mrs.region(kReadSlots).bytes.data() + slot * kMaxMessageBytes;
        if (checksum(dst, m.len) != m.checksum) return fail("READ data mismatch");
      }
      payload_bytes_ += m.len;
      ++completed_;
    }
  }
  // Responder side: receives in order, with the right length, immediate and bytes.
  for (size_t n; (n = sim_.b().qp.poll_cq(cq)) > 0;) {
    for (size_t i = 0; i < n; ++i) {
      const Completion& c = cq[i];
      if (c.status != WcStatus::kSuccess) {
        return fail(std::string("B: receive completed with ") + wc_status_name(c.status));
      }
      if (recv_expected_.empty()) return fail("B: unexpected receive completion");
      if (c.wr_id != recv_completed_) return fail("B: receive completion out of order");
      const Msg& m = msgs_[recv_expected_.front()];
      const bool imm = m.op != WrOpcode::kSend;
      if (c.has_imm != imm || (imm && c.imm != m.imm)) return fail("B: immediate data wrong");
      if (c.len_bytes != m.len) return fail("B: receive length wrong");
      if (m.op == WrOpcode::kWriteImm) {
        if (c.opcode != WcOpcode::kRecvWriteImm) return fail("B: opcode wrong");
      } else {
        const uint8_t* dst =
            sim_.b().mrs.region(kRecvSlots).bytes.data() + (c.wr_id % kSlots) * kMaxMessageBytes;
        if (c.opcode != WcOpcode::kRecv || checksum(dst, m.len) != m.checksum) {
          return fail("B: SEND data mismatch");
        }
      }
      recv_expected_.pop_front();
      ++recv_completed_;
      RecvWr r;
      r.wr_id = recv_posted_;
      r.sge[0] =
          Sge{slot_addr(kRecvSlots, recv_posted_ % kSlots), kMaxMessageBytes, 0x100 + kRecvSlots};
      r.num_sge = 1;
      if (sim_.b().qp.post_recv(r) != Status::kOk) return fail("B: post_recv");
      ++recv_posted_;
    }
  }
  while (error_.empty() && posted_ < messages_ && posted_ - completed_ < kSlots) post_next();
}

WorkloadResult MessageWorkload::result() const {
  WorkloadResult r;
  r.messages_completed = completed_;
  r.recv_completed = recv_completed_;
  r.payload_bytes = payload_bytes_;
  r.sim_time_ns = sim_.now_ns();
  r.first_error = error_;
  return r;
}

}  // namespace conduit::transport::sim
