// Responder: checks each request against the expected PSN, places SEND and
// RDMA WRITE payload, serves RDMA READ, and queues ACK/NAK/READ responses in
// PSN order (an ACK never overtakes READ responses for earlier PSNs).
#include <algorithm>
#include <cstring>

#include "transport/qp.h"
#include "wire/byte_order.h"
#include "wire/psn.h"

namespace conduit::transport {
namespace {

using wire::Aeth;
using wire::NakCode;
using wire::Opcode;

constexpr uint32_t kMaxReadPkts = 1u << 22;

// Copies payload into [offset, ...) of a scatter list; the caller checked room.
void scatter(const std::array<std::span<uint8_t>, kMaxSge>& seg, uint32_t num_sge, uint32_t offset,
             std::span<const uint8_t> payload) {
  if (num_sge == 1) {  // the common case: the room check covered the one SGE
    wire::copy_payload(seg[0].data() + offset, payload.data(), payload.size());
    return;
  }
  size_t done = 0;
  for (uint32_t i = 0; i < num_sge && done < payload.size(); ++i) {
    const size_t sz = seg[i].size();
    if (offset >= sz) {
      offset -= static_cast<uint32_t>(sz);
      continue;
    }
    const size_t take = std::min(sz - offset, payload.size() - done);
    std::memcpy(seg[i].data() + offset, payload.data() + done, take);
    done += take;
    offset = 0;
  }
}

}  // namespace

bool Qp::payload_length_ok(uint32_t flags, size_t len) const {
  if (!(flags & wire::kOpPayload)) return len == 0;
  if (!(flags & wire::kOpLast)) return len == attr_.pmtu_bytes;  // first, middle: full
  if (len > attr_.pmtu_bytes) return false;
  if (!(flags & wire::kOpFirst)) return len >= 1;  // last of several
  return true;                                     // only: 0..PMTU
}

RxResult Qp::responder_rx(const wire::RoceHeader& hdr, std::span<const uint8_t> payload) {
  if (sr_) return responder_sr(hdr, payload);
  const uint32_t psn = hdr.bth.psn;
  const int32_t d = wire::psn_diff(psn, epsn_);
  if (d < 0) return responder_duplicate(hdr);
  if (d > 0) {
    ++counters_.rx_out_of_sequence;
    if (!nak_seq_sent_) {  // one NAK per gap, until ePSN arrives
      nak_seq_sent_ = true;
      ++counters_.naks_sent;
      queue_ack(Aeth::nak(msn_, NakCode::kPsnSequenceError), epsn_);
    }
    return RxResult::kOutOfSequence;
  }
  const uint32_t flags = hdr.info().flags;
  if (!(flags & wire::kOpValid)) {  // an RC opcode we do not implement (FLUSH, ...)
    ++counters_.drop_bad_opcode;
    return responder_fatal(NakCode::kInvalidRequest, psn);
  }
  if (flags & wire::kOpIeth) return responder_fatal(NakCode::kInvalidRequest, psn);  // no SEND_INV
  if (flags & wire::kOpAtomic) {
    // Only between messages, and without payload.
    if (in_msg_ != InMessage::kNone || !payload.empty()) {
      return responder_fatal(NakCode::kInvalidRequest, psn);
    }
    return responder_atomic(hdr);
  }
  const bool first = flags & wire::kOpFirst;
  // Opcode sequence: middle/last only inside a message of the same kind.
  switch (in_msg_) {
    case InMessage::kNone:
      if (!first) return responder_fatal(NakCode::kInvalidRequest, psn);
      break;
    case InMessage::kSend:
      if (first || !(flags & wire::kOpSend)) return responder_fatal(NakCode::kInvalidRequest, psn);
      break;
    case InMessage::kWrite:
      if (first || !(flags & wire::kOpWrite)) return responder_fatal(NakCode::kInvalidRequest, psn);
      break;
  }
  if (!payload_length_ok(flags, payload.size())) {  // e.g. the peer's PMTU is not ours
    ++counters_.drop_bad_length;
    return responder_fatal(NakCode::kInvalidRequest, psn);
  }
  if (flags & wire::kOpSend) {
    return responder_send(flags, psn, hdr.bth.ack_req, hdr.imm, payload);
  }
  if (flags & wire::kOpWrite) return responder_write(hdr, payload);
  return responder_read(hdr);
}

// Every SEND packet comes here (from responder_rx), and the fused receive
// path inlines the same body (on_packet(RoceView) below).
[[gnu::flatten]] RxResult Qp::responder_send(uint32_t flags, uint32_t psn, bool ack_req,
                                             uint32_t imm, std::span<const uint8_t> payload) {
  return responder_send_inline(flags, psn, ack_req, imm, payload);
}

// scatter() and queue_ack() inlined: per packet they cost more in calls than in work.
[[gnu::always_inline]] inline RxResult Qp::responder_send_inline(uint32_t flags, uint32_t psn,
                                                                 bool ack_req, uint32_t imm,
                                                                 std::span<const uint8_t> payload) {
  if (flags & wire::kOpFirst) {
    if (rq_head_ == rq_tail_) return responder_rnr(psn);
    recv_offset_ = 0;
  }
  RecvWqe& r = rq_[rq_head_ & rq_mask_];
  if (r.epoch != mrs_.epoch() && !recv_memory_current(r)) return responder_recv_protection(psn);
  if (payload.size() > r.len_bytes - recv_offset_) {
    Completion c;
    c.wr_id = r.wr_id;
    c.status = WcStatus::kLocalLengthError;
    c.opcode = WcOpcode::kRecv;
    push_completion(c);
    ++rq_head_;
    return responder_fatal(NakCode::kInvalidRequest, psn);
  }
  scatter(r.seg, r.num_sge, recv_offset_, payload);
  recv_offset_ += static_cast<uint32_t>(payload.size());
  epsn_ = wire::psn_next(epsn_);
  ack_psn_ = psn;
  nak_seq_sent_ = false;
  if (flags & wire::kOpLast) {
    Completion c;
    c.wr_id = r.wr_id;
    c.opcode = WcOpcode::kRecv;
    c.len_bytes = recv_offset_;
    c.has_imm = flags & wire::kOpImm;
    c.imm = c.has_imm ? imm : 0;
    push_completion(c);
    ++rq_head_;
    msn_ = wire::psn_next(msn_);
    in_msg_ = InMessage::kNone;
  } else {
    in_msg_ = InMessage::kSend;
  }
  if (ack_req) queue_ack(Aeth::ack(msn_), psn);
  return RxResult::kAccepted;
}

RxResult Qp::responder_write(const wire::RoceHeader& hdr, std::span<const uint8_t> payload) {
  const uint32_t flags = hdr.info().flags;
  const uint32_t psn = hdr.bth.psn;
  const bool last = flags & wire::kOpLast;
  const bool imm = flags & wire::kOpImm;
  // WRITE with immediate consumes a receive WQE: RNR before touching memory.
  if (last && imm && rq_head_ == rq_tail_) return responder_rnr(psn);
  if (flags & wire::kOpFirst) {
    if (!(attr_.access_flags & kAccessRemoteWrite)) {
      return responder_fatal(NakCode::kRemoteAccessError, psn);
    }
    write_mem_ = {};
    if (hdr.reth.dma_len != 0 &&
        mrs_.lookup_remote(hdr.reth.rkey, hdr.reth.va, hdr.reth.dma_len, kAccessRemoteWrite,
                           write_mem_) != MrStatus::kOk) {
      return responder_fatal(NakCode::kRemoteAccessError, psn);
    }
    write_offset_ = 0;
    write_va_ = hdr.reth.va;
    write_rkey_ = hdr.reth.rkey;
    write_epoch_ = remote_epoch();
  } else if (write_epoch_ != remote_epoch() && !write_mem_.empty()) {
    // A region or the QP's access flags changed since the FIRST packet: the rkey may have
    // been deregistered, or remote write taken away.
    std::span<uint8_t> mem;
    if (!(attr_.access_flags & kAccessRemoteWrite) ||
        mrs_.lookup_remote(write_rkey_, write_va_, static_cast<uint32_t>(write_mem_.size()),
                           kAccessRemoteWrite, mem) != MrStatus::kOk) {
      write_mem_ = {};
      return responder_fatal(NakCode::kRemoteAccessError, psn);
    }
    write_mem_ = mem;
    write_epoch_ = remote_epoch();
  }
  if (payload.size() > write_mem_.size() - write_offset_ ||
      (last && write_offset_ + payload.size() != write_mem_.size())) {
    return responder_fatal(NakCode::kInvalidRequest, psn);  // payload vs RETH length
  }
  if (!payload.empty()) {
    std::memcpy(write_mem_.data() + write_offset_, payload.data(), payload.size());
  }
  write_offset_ += static_cast<uint32_t>(payload.size());
  epsn_ = wire::psn_next(epsn_);
  ack_psn_ = psn;
  nak_seq_sent_ = false;
  if (last) {
    if (imm) {
      Completion c;
      c.wr_id = rq_[rq_head_ & rq_mask_].wr_id;
      c.opcode = WcOpcode::kRecvWriteImm;
      c.len_bytes = write_offset_;
      c.has_imm = true;
      c.imm = hdr.imm;
      push_completion(c);
      ++rq_head_;
    }
    msn_ = wire::psn_next(msn_);
    in_msg_ = InMessage::kNone;
  } else {
    in_msg_ = InMessage::kWrite;
  }
  if (hdr.bth.ack_req) queue_ack(Aeth::ack(msn_), psn);
  return RxResult::kAccepted;
}

RxResult Qp::responder_read(const wire::RoceHeader& hdr) {
  const uint32_t psn = hdr.bth.psn;
  if (!(attr_.access_flags & kAccessRemoteRead)) {
    return responder_fatal(NakCode::kRemoteAccessError, psn);
  }
  const uint32_t len = hdr.reth.dma_len;
  const uint32_t npkts = npkts_for(len, true);
  if (npkts > kMaxReadPkts) return responder_fatal(NakCode::kInvalidRequest, psn);
  std::span<uint8_t> mem;
  if (len != 0 && mrs_.lookup_remote(hdr.reth.rkey, hdr.reth.va, len, kAccessRemoteRead, mem) !=
                      MrStatus::kOk) {
    return responder_fatal(NakCode::kRemoteAccessError, psn);
  }
  ReadResource* r = free_resource();
  if (r == nullptr) return responder_fatal(NakCode::kInvalidRequest, psn);
  if (response_queue_full()) return drop_for_response_queue();
  r->atomic = false;
  r->mem = mem;
  r->va = hdr.reth.va;
  r->rkey = hdr.reth.rkey;
  r->mem_epoch = remote_epoch();
  return start_response(*r, psn, npkts);
}

bool Qp::recv_memory_current(RecvWqe& r) {
  if (!resolve_sges_again(r.sge.data(), r.num_sge, kAccessLocalWrite, r.seg)) return false;
  r.epoch = mrs_.epoch();
  return true;
}

RxResult Qp::responder_recv_protection(uint32_t psn) {
  Completion c;
  c.wr_id = rq_[rq_head_ & rq_mask_].wr_id;
  c.status = WcStatus::kLocalProtectionError;
  c.opcode = WcOpcode::kRecv;
  push_completion(c);
  ++rq_head_;
  return responder_fatal(NakCode::kRemoteOperationalError, psn);
}

bool Qp::read_memory_current(ReadResource& r) {
  if (!r.valid) return false;  // its rkey failed before
  // An atomic's (re)play sends its saved result and touches no memory: it was executed with
  // the access it had then.
  if (!r.atomic && !(attr_.access_flags & kAccessRemoteRead)) {
    r.mem = {};
    r.valid = false;  // never replayed again
    return false;
  }
  if (r.atomic || r.mem.empty()) {  // no memory to read (zero length: no key was checked)
    r.mem_epoch = remote_epoch();
    return true;
  }
  std::span<uint8_t> mem;
  if (mrs_.lookup_remote(r.rkey, r.va, static_cast<uint32_t>(r.mem.size()), kAccessRemoteRead,
                         mem) != MrStatus::kOk) {
    r.mem = {};
    r.valid = false;
    return false;
  }
  r.mem = mem;
  r.mem_epoch = remote_epoch();
  return true;
}

Qp::ReadResource* Qp::free_resource() {
  ReadResource& r = reads_[read_next_ % attr_.max_dest_rd_atomic];
  // A slot still sending its first play means the requester exceeded our
  // responder depth; a replay of an old READ may be abandoned.
  if (r.active && !r.replay) return nullptr;
  return &r;
}

RxResult Qp::drop_for_response_queue() {
  // Answers queued for duplicates (READ replays, re-ACKs) fill it while the transmit side
  // is held back: the requester's own parts of the protocol are fine, so its resend after
  // the ACK timeout is taken, rather than failing the connection.
  ++counters_.drop_response_queue_full;
  return RxResult::kDropped;
}

RxResult Qp::start_response(ReadResource& r, uint32_t psn, uint32_t npkts) {
  const auto index = static_cast<uint8_t>(&r - reads_.data());
  msn_ = wire::psn_next(msn_);
  r.first_psn = psn;
  r.npkts = npkts;
  r.start_psn = r.next_psn = psn;
  r.msn = msn_;
  r.ack_psn = ack_psn_;
  ++r.gen;
  r.active = true;
  r.replay = false;
  r.valid = true;
  if (!queue_read(index)) {
    // Cannot happen within the responder depth (the FIFO holds 2 items per
    // READ slot); treat it as the requester overrunning us.
    r.active = false;
    return responder_fatal(NakCode::kInvalidRequest, psn);
  }
  ++read_next_;
  epsn_ = wire::psn_add(epsn_, npkts);
  nak_seq_sent_ = false;
  if (sr_) {
    // Requests that arrived ahead of this READ or atomic are now in order: ACK
    // them (after its responses, which the FIFO keeps first).
    const uint32_t end = epsn_;
    if (!sr_advance()) return responder_fatal(NakCode::kInvalidRequest, epsn_);
    if (epsn_ != end) queue_ack(Aeth::ack(msn_), wire::psn_add(epsn_, wire::kPsnMask));
  }
  return RxResult::kAccepted;
}

// Compare-and-swap or fetch-and-add on 8 aligned bytes of a region that grants
// remote atomic access. The result is kept in a responder resource (shared
// with READs, max_dest_rd_atomic of them): a duplicate request gets the saved
// value again and is never executed twice.
RxResult Qp::responder_atomic(const wire::RoceHeader& hdr) {
  const uint32_t psn = hdr.bth.psn;
  if (!(attr_.access_flags & kAccessRemoteAtomic)) {
    return responder_fatal(NakCode::kRemoteAccessError, psn);
  }
  const wire::AtomicEth& a = hdr.atomic;
  if (a.va % kAtomicBytes != 0) return responder_fatal(NakCode::kInvalidRequest, psn);
  std::span<uint8_t> mem;
  if (mrs_.lookup_remote(a.rkey, a.va, kAtomicBytes, kAccessRemoteAtomic, mem) != MrStatus::kOk) {
    return responder_fatal(NakCode::kRemoteAccessError, psn);
  }
  ReadResource* r = free_resource();
  if (r == nullptr) return responder_fatal(NakCode::kInvalidRequest, psn);
  // Before the word changes: an atomic that could not be answered would have run unseen.
  if (response_queue_full()) return drop_for_response_queue();
  // Atomic with respect to this engine and to the client's own atomics on the
  // word (the region is shared memory; both ends of it are 8-byte aligned when
  // the address is, as regions start on page boundaries).
  uint64_t orig;
  if (reinterpret_cast<uintptr_t>(mem.data()) % alignof(uint64_t) == 0) {
    auto* word = reinterpret_cast<uint64_t*>(mem.data());
    if (hdr.bth.opcode == static_cast<uint8_t>(Opcode::kCompareSwap)) {
      orig = a.compare;
      __atomic_compare_exchange_n(word, &orig, a.swap_add, false, __ATOMIC_SEQ_CST,
                                  __ATOMIC_SEQ_CST);
    } else {
      orig = __atomic_fetch_add(word, a.swap_add, __ATOMIC_SEQ_CST);
    }
  } else {
    std::memcpy(&orig, mem.data(), sizeof(orig));
    uint64_t next = orig + a.swap_add;
    if (hdr.bth.opcode == static_cast<uint8_t>(Opcode::kCompareSwap)) {
      next = orig == a.compare ? a.swap_add : orig;
    }
    std::memcpy(mem.data(), &next, sizeof(next));
  }
  r->atomic = true;
  r->atomic_orig = orig;
  r->mem = {};
  r->mem_epoch = remote_epoch();
  return start_response(*r, psn, 1);
}

bool Qp::sr_advance() {
  for (;;) {
    SrSlot& s = sr_slots_[epsn_ & (kSrWindow - 1)];
    if (!s.received) return true;
    // A packet was placed by the receive sequence number it carries; in order, its message
    // must be the next receive, one that is posted. Else the peer would complete receives
    // twice, or more than were posted (rq_head_ passing rq_tail_).
    if (s.consume_recv && (s.recv_seq != recv_seq_done_ || rq_head_ == rq_tail_)) return false;
    if (s.last) {
      msn_ = wire::psn_next(msn_);
      if (s.consume_recv) {
        Completion c;
        c.wr_id = rq_[rq_head_ & rq_mask_].wr_id;
        c.opcode = s.write_imm ? WcOpcode::kRecvWriteImm : WcOpcode::kRecv;
        c.len_bytes = s.len_bytes;
        c.has_imm = s.has_imm;
        c.imm = s.imm;
        push_completion(c);
        ++rq_head_;
        ++recv_seq_done_;
      }
    }
    s = SrSlot{};
    ack_psn_ = epsn_;  // slots are SEND/WRITE packets (READs and atomics are taken in order)
    epsn_ = wire::psn_next(epsn_);
  }
}

RxResult Qp::responder_sr(const wire::RoceHeader& hdr, std::span<const uint8_t> payload) {
  const uint32_t psn = hdr.bth.psn;
  const int32_t d = wire::psn_diff(psn, epsn_);
  if (d < 0) return responder_duplicate(hdr);
  if (d >= static_cast<int32_t>(kSrWindow)) {
    ++counters_.rx_out_of_sequence;  // beyond what we track: the requester resends
    return RxResult::kOutOfSequence;
  }
  const uint32_t flags = hdr.info().flags;
  if ((flags & (wire::kOpAtomic | wire::kOpIeth | wire::kOpRead)) || !(flags & wire::kOpValid)) {
    if (d != 0) {  // taken in order only; the requester resends it as a hole
      ++counters_.rx_out_of_sequence;
      return RxResult::kOutOfSequence;
    }
    if (!(flags & wire::kOpValid)) {  // an RC opcode we do not implement
      ++counters_.drop_bad_opcode;
      return responder_fatal(NakCode::kInvalidRequest, psn);
    }
    if (flags & wire::kOpIeth) return responder_fatal(NakCode::kInvalidRequest, psn);
    if (!payload.empty()) return responder_fatal(NakCode::kInvalidRequest, psn);
    return (flags & wire::kOpAtomic) ? responder_atomic(hdr) : responder_read(hdr);
  }
  // A packet ahead of ePSN that fails a check is not NAKed: a fatal NAK for PSN p tells the
  // requester that every request before p was executed, which is not known yet. It is
  // dropped, as a READ ahead of ePSN is, and NAKed when the requester resends it in order.
  auto sr_fatal = [&](NakCode code) {
    if (d != 0) {
      ++counters_.rx_out_of_sequence;
      return RxResult::kOutOfSequence;
    }
    return responder_fatal(code, psn);
  };
  SrSlot& slot = sr_slots_[psn & (kSrWindow - 1)];
  if (slot.received) {
    ++counters_.rx_duplicates;
    return RxResult::kDuplicate;
  }
  if (payload.size() < SrPlacement::kBytes) return sr_fatal(NakCode::kInvalidRequest);
  const SrPlacement p = SrPlacement::decode(payload.data());
  const auto data = payload.subspan(SrPlacement::kBytes);
  const int32_t k = wire::psn_diff(psn, p.msg_first_psn);
  const uint64_t offset = static_cast<uint64_t>(k) * seg_bytes_;
  if (k < 0 || offset > p.msg_len_bytes) return sr_fatal(NakCode::kInvalidRequest);
  const uint32_t remaining = p.msg_len_bytes - static_cast<uint32_t>(offset);
  const bool last = remaining <= seg_bytes_;
  if (data.size() != (last ? remaining : seg_bytes_) || last != bool(flags & wire::kOpLast) ||
      (k == 0) != bool(flags & wire::kOpFirst)) {
    return sr_fatal(NakCode::kInvalidRequest);
  }
  const bool imm = flags & wire::kOpImm;
  const bool consume_recv = (flags & wire::kOpSend) || imm;
  RecvWqe* r = nullptr;
  if (consume_recv) {
    const uint32_t idx = p.recv_seq - recv_seq_done_;
    if (idx >= kSrWindow) return sr_fatal(NakCode::kInvalidRequest);
    if (idx >= rq_tail_ - rq_head_) return responder_rnr(psn);
    r = &rq_[(rq_head_ + idx) & rq_mask_];
  }
  if (flags & wire::kOpWrite) {
    if (!(attr_.access_flags & kAccessRemoteWrite)) {
      return sr_fatal(NakCode::kRemoteAccessError);
    }
    std::span<uint8_t> mem;
    if (!data.empty() &&
        mrs_.lookup_remote(p.rkey, p.va + offset, static_cast<uint32_t>(data.size()),
                           kAccessRemoteWrite, mem) != MrStatus::kOk) {
      return sr_fatal(NakCode::kRemoteAccessError);
    }
    if (!data.empty()) std::memcpy(mem.data(), data.data(), data.size());
  } else {
    if (r->epoch != mrs_.epoch() && !recv_memory_current(*r)) {
      if (d == 0 && r == &rq_[rq_head_ & rq_mask_]) return responder_recv_protection(psn);
      return sr_fatal(NakCode::kRemoteOperationalError);
    }
    if (p.msg_len_bytes > r->len_bytes) {
      if (d == 0 && r == &rq_[rq_head_ & rq_mask_]) {
        Completion c;
        c.wr_id = r->wr_id;
        c.status = WcStatus::kLocalLengthError;
        c.opcode = WcOpcode::kRecv;
        push_completion(c);
        ++rq_head_;
      }
      return sr_fatal(NakCode::kInvalidRequest);
    }
    scatter(r->seg, r->num_sge, static_cast<uint32_t>(offset), data);
  }
  slot.received = true;
  slot.last = last;
  slot.consume_recv = consume_recv;
  slot.write_imm = (flags & wire::kOpWrite) && imm;
  slot.has_imm = imm && last;
  slot.imm = hdr.imm;
  slot.len_bytes = p.msg_len_bytes;
  slot.recv_seq = p.recv_seq;
  if (d == 0) {
    const uint32_t before = epsn_;
    if (!sr_advance()) return responder_fatal(NakCode::kInvalidRequest, epsn_);
    // Filling a hole moves ePSN by more than one: tell the requester at once.
    if (hdr.bth.ack_req || wire::psn_diff(epsn_, before) > 1) {
      queue_ack(Aeth::ack(msn_), wire::psn_add(epsn_, wire::kPsnMask));
    }
  } else {
    ++counters_.rx_out_of_sequence;
    // SACK: cumulative ACK in the BTH PSN, the arrived PSN in the MSN field.
    queue_ack(Aeth{0x60, psn}, epsn_);
  }
  return RxResult::kAccepted;
}

RxResult Qp::responder_duplicate(const wire::RoceHeader& hdr) {
  ++counters_.rx_duplicates;
  const uint32_t psn = hdr.bth.psn;
  const bool atomic = hdr.info().flags & wire::kOpAtomic;
  if (hdr.bth.opcode == static_cast<uint8_t>(Opcode::kReadRequest) || atomic) {
    // Replay from the PSN asked for, out of the saved READ state; an atomic's
    // saved result (it is not executed again).
    for (uint32_t i = 0; i < attr_.max_dest_rd_atomic; ++i) {
      ReadResource& r = reads_[i];
      if (!r.valid || r.atomic != atomic ||
          !wire::psn_in_range(psn, r.first_psn, wire::psn_add(r.first_psn, r.npkts)))
        continue;
      // A READ is answered only from memory its rkey still names: after the region was
      // deregistered the peer gets what a new READ with that rkey gets. (An atomic's replay
      // sends its saved result and touches no memory.)
      if (r.mem_epoch != remote_epoch() && !read_memory_current(r)) {
        return responder_fatal(NakCode::kRemoteAccessError, psn);
      }
      const uint32_t gen = r.gen;
      const bool active = r.active, replay = r.replay;
      const uint32_t start = r.start_psn, next = r.next_psn;
      r.start_psn = r.next_psn = psn;
      ++r.gen;
      r.active = true;
      r.replay = true;
      if (!queue_read(static_cast<uint8_t>(i))) {
        r.gen = gen;
        r.active = active;
        r.replay = replay;
        r.start_psn = start;
        r.next_psn = next;
        ++counters_.drop_response_queue_full;
        return RxResult::kDropped;
      }
      return RxResult::kDuplicate;
    }
    return RxResult::kDuplicate;  // too old to replay: the requester has it already
  }
  // The last SEND/WRITE PSN taken, at or after this one (ePSN - 1 may be a READ's or an
  // atomic's PSN: see ack_psn_).
  queue_ack(Aeth::ack(msn_), ack_psn_);
  return RxResult::kDuplicate;
}

RxResult Qp::responder_rnr(uint32_t psn) {
  ++counters_.rnr_naks_sent;
  queue_ack(Aeth::rnr_nak(msn_, attr_.min_rnr_timer), psn);
  // The requester goes back to this PSN after the RNR wait; the packets behind
  // it need no sequence NAK of their own.
  nak_seq_sent_ = true;
  return RxResult::kDropped;
}

RxResult Qp::responder_fatal(NakCode code, uint32_t psn) {
  ++counters_.naks_sent;
  queue_ack(Aeth::nak(msn_, code), psn);
  error_ = {QpError::Side::kResponder, WcStatus::kSuccess, code, psn};
  enter_error();
  return RxResult::kDropped;
}

void Qp::queue_ack(Aeth aeth, uint32_t psn) {
  constexpr uint32_t size = kRespFifoSlots;
  if (resp_tail_ != resp_head_) {
    Response& last = resp_fifo_[(resp_tail_ - 1) & (size - 1)];
    // Coalesce: a newer ACK replaces a queued ACK (it acknowledges more).
    if (last.kind == RespItem::kAck && last.aeth.type() == wire::AethType::kAck &&
        aeth.type() == wire::AethType::kAck) {
      last.aeth = aeth;
      last.psn = psn;
      return;
    }
  }
  if (resp_tail_ - resp_head_ == size) {
    ++counters_.drop_response_queue_full;
    return;
  }
  Response& item = resp_fifo_[resp_tail_ & (size - 1)];
  item.kind = RespItem::kAck;
  item.aeth = aeth;
  item.psn = psn;
  ++resp_tail_;
}

bool Qp::queue_read(uint8_t index) {
  constexpr uint32_t size = kRespFifoSlots;
  if (resp_tail_ - resp_head_ == size) return false;
  Response& item = resp_fifo_[resp_tail_ & (size - 1)];
  item.kind = RespItem::kRead;
  item.read_index = index;
  item.read_gen = reads_[index].gen;
  ++resp_tail_;
  return true;
}

void Qp::build_read_response(ReadResource& r, TxPacket& out) {
  wire::RoceHeader& h = out.hdr;
  h = wire::RoceHeader{};
  h.bth.dest_qp = attr_.dest_qpn;
  h.bth.psn = r.next_psn;
  if (r.atomic) {
    h.bth.opcode = static_cast<uint8_t>(Opcode::kAtomicAcknowledge);
    h.aeth = Aeth::ack(r.msn);
    h.atomic_ack_orig = r.atomic_orig;
    out.payload_parts = 0;
    out.payload_bytes = 0;
    r.next_psn = wire::psn_next(r.next_psn);
    r.active = false;
    r.replay = false;
    return;
  }
  const uint32_t off = static_cast<uint32_t>(wire::psn_diff(r.next_psn, r.first_psn))
                       << pmtu_shift_;
  const uint32_t remaining = static_cast<uint32_t>(r.mem.size()) - off;
  const bool last = remaining <= attr_.pmtu_bytes;
  const bool first = r.next_psn == r.start_psn;
  const uint32_t n = last ? remaining : attr_.pmtu_bytes;
  Opcode o = Opcode::kReadResponseMiddle;
  if (first && last) {
    o = Opcode::kReadResponseOnly;
  } else if (first) {
    o = Opcode::kReadResponseFirst;
  } else if (last) {
    o = Opcode::kReadResponseLast;
  }
  h.bth.opcode = static_cast<uint8_t>(o);
  h.aeth = Aeth::ack(r.msn);
  out.payload_parts = 0;
  out.payload_bytes = n;
  if (n != 0) {
    out.payload[0] = r.mem.subspan(off, n);
    out.payload_parts = 1;
  }
  r.next_psn = wire::psn_next(r.next_psn);
  if (last) {
    r.active = false;
    r.replay = false;
  }
}

uint32_t Qp::first_unsent_answer() const {
  constexpr uint32_t mask = kRespFifoSlots - 1;
  for (uint32_t i = resp_head_; i != resp_tail_; ++i) {
    const Response& item = resp_fifo_[i & mask];
    if (item.kind != RespItem::kRead) continue;
    const ReadResource& r = reads_[item.read_index];
    if (r.active && item.read_gen == r.gen) return i;
  }
  return resp_tail_;
}

void Qp::final_ack(TxPacket& out) const {
  wire::RoceHeader& h = out.hdr;
  h.bth = wire::Bth{};
  h.bth.opcode = static_cast<uint8_t>(Opcode::kAcknowledge);
  h.bth.dest_qp = attr_.dest_qpn;
  h.bth.psn = ack_psn_;  // the last SEND/WRITE taken, never a READ's or atomic's PSN
  h.aeth = Aeth::ack(msn_);
  const uint32_t i = first_unsent_answer();
  if (i != resp_tail_) {
    // A READ or atomic whose answer has not all been given out: the ACK stops before it
    // (PSN and MSN before it), as the queue would have sent it. It goes ahead of the
    // answers, which a stopping QP drops (stop_responses).
    const ReadResource& r = reads_[resp_fifo_[i & (kRespFifoSlots - 1)].read_index];
    h.bth.psn = r.ack_psn;
    h.aeth = Aeth::ack(wire::psn_add(r.msn, wire::kPsnMask));
  }
  out.payload_parts = 0;
  out.payload_bytes = 0;
}

bool Qp::responder_poll(TxPacket& out) {
  constexpr uint32_t mask = kRespFifoSlots - 1;
  while (resp_head_ != resp_tail_) {
    Response& item = resp_fifo_[resp_head_ & mask];
    if (item.kind == RespItem::kAck) {
      wire::RoceHeader& h = out.hdr;
      h.bth = wire::Bth{};  // ACK: BTH and AETH are all that is encoded
      h.bth.opcode = static_cast<uint8_t>(Opcode::kAcknowledge);
      h.bth.dest_qp = attr_.dest_qpn;
      h.bth.psn = item.psn;
      h.aeth = item.aeth;
      out.payload_parts = 0;
      out.payload_bytes = 0;
      ++resp_head_;
      return true;
    }
    ReadResource& r = reads_[item.read_index];
    if (item.read_gen != r.gen || !r.active) {
      ++resp_head_;  // superseded by a replay, or the QP went to ERR
      continue;
    }
    if (r.mem_epoch != remote_epoch() && !read_memory_current(r)) {
      // The region was deregistered (or remote read taken away) while this READ was being answered:
      // a NAK takes the place of its remaining responses. Nothing queued after it is sent (an ACK
      // or a response for a later PSN would acknowledge the unfinished READ).
      const uint32_t psn = r.next_psn;
      resp_head_ = resp_tail_;
      stop_responses();
      responder_fatal(NakCode::kRemoteAccessError, psn);
      continue;
    }
    build_read_response(r, out);
    if (!r.active) ++resp_head_;
    return true;
  }
  return false;
}

// The fused receive path: the common received packets (ACK, in-order SEND
// only) are read straight from the frame (a wire::RoceView). Everything else,
// and every condition the direct path does not cover, is decoded into a
// RoceHeader and goes through on_packet(), so both routes share one
// implementation of the protocol; the direct path only skips the RoceHeader
// round trip and the dispatch whose checks it repeats. Here, next to
// responder_send(), so that the SEND's path is one function. The transmit
// side, Qp::poll_tx_frame, is in requester.cc.
void Qp::queue_acks(Aeth aeth, uint32_t psn, uint32_t count) {
  const uint64_t dropped = counters_.drop_response_queue_full;
  queue_ack(aeth, psn);
  // Dropped: the queue is full and its last item no ACK, for the others too.
  if (counters_.drop_response_queue_full != dropped) {
    counters_.drop_response_queue_full += count - 1;
  }
}

void Qp::on_packets_burst(uint64_t now_ns, std::span<const wire::RoceView> pkts,
                          RxResult* results) {
  const size_t n = pkts.size();
  size_t i = 0;
  while (i < n) {
    // A run only for two packets or more: its set-up does not pay for one.
    if (n - i >= 2 && !sr_ && in_msg_ == InMessage::kNone &&
        (state_ == QpState::kRtr || state_ == QpState::kRts || state_ == QpState::kSqd)) {
      i += recv_run(pkts.subspan(i), results + i);
      if (i == n) break;
    }
    results[i] = on_packet(now_ns, pkts[i]);
    ++i;
  }
}

// on_packet()'s SEND only path (responder_send_inline() with the first and
// last packet of a message) per packet. Each packet it delivers takes the
// next receive WQE and completion slot and moves ePSN and the MSN by one, so
// the k-th is at rq_head_ + k, cq_tail_ + k, epsn_ + k, msn_ + k: the loop
// keeps only its index (the payload stores may alias any member), and the
// members are stored back once. A packet that would take any other way
// (another QP or opcode, out of sequence, over the PMTU, no receive posted,
// a receive too small, or one resolved before a region changed) ends the run.
size_t Qp::recv_run(std::span<const wire::RoceView> pkts, RxResult* results) {
  const uint32_t rq_head = rq_head_;
  // No receive posted for the packet after the last WQE: it takes the RNR way.
  size_t n = std::min<size_t>(pkts.size(), rq_tail_ - rq_head);
  // A receive resolved before a region changed takes the general path, which
  // resolves it again: the run ends before it. Once every receive in the
  // queue is of the current epoch (rq_epoch_), none is compared.
  const uint64_t mr_epoch = mrs_.epoch();
  if (rq_epoch_ != mr_epoch) [[unlikely]] {
    n = rq_current_run(n, mr_epoch);
    if (n == 0) return 0;
  }
  const uint32_t qpn = config_.qpn;
  const uint32_t pmtu = attr_.pmtu_bytes;
  const RecvWqe* const rq = rq_.data();
  const uint32_t rq_mask = rq_mask_;
  Completion* const cq = cq_.data();
  const uint32_t cq_mask = cq_mask_;
  const uint32_t cq_tail = cq_tail_;
  const uint32_t epsn = epsn_;
  uint32_t acks = 0;
  uint32_t last_ack = 0;  // index of the last packet that asked for an ACK
  size_t i = 0;
  // One pass per stretch in which neither the receive queue nor the CQ wraps.
  for (;;) {
    const auto at = static_cast<uint32_t>(i);
    const size_t end = i + std::min<size_t>({n - i, ring_run(rq_head + at, rq_mask),
                                             ring_run(cq_tail + at, cq_mask)});
    const RecvWqe* r = rq + ((rq_head + at) & rq_mask);
    Completion* c = cq + ((cq_tail + at) & cq_mask);
    for (; i < end; ++i, ++r, ++c) {
      const auto k = static_cast<uint32_t>(i);
      const uint8_t* b = pkts[i].bth;
      const std::span<const uint8_t> payload = pkts[i].payload;
      const uint8_t opcode = b[0];
      const uint32_t w2 = wire::get_be32(b + 8);
      if ((wire::get_be32(b + 4) & wire::kPsnMask) != qpn ||
          (opcode != static_cast<uint8_t>(Opcode::kSendOnly) &&
           opcode != static_cast<uint8_t>(Opcode::kSendOnlyImm)) ||
          (w2 & wire::kPsnMask) != wire::psn_add(epsn, k) || payload.size() > pmtu ||
          payload.size() > r->len_bytes) {
        break;
      }
      const bool imm = opcode == static_cast<uint8_t>(Opcode::kSendOnlyImm);
      // The receive completion, field by field into its slot (room: reserved
      // at post, cq_has_room_for_post), before the payload stores.
      c->wr_id = r->wr_id;
      c->status = WcStatus::kSuccess;
      c->opcode = WcOpcode::kRecv;
      c->has_imm = imm;
      c->imm = imm ? wire::get_be32(b + wire::kBthBytes) : 0;
      c->len_bytes = static_cast<uint32_t>(payload.size());
      if (r->num_sge == 1) {  // scatter()'s common case, inline
        wire::copy_payload(r->seg[0].data(), payload.data(), payload.size());
      } else {
        scatter(r->seg, r->num_sge, 0, payload);
      }
      if ((w2 >> 31) != 0) {
        ++acks;
        last_ack = k;
      }
    }
    if (i != end || i == n) break;
  }
  std::fill(results, results + i, RxResult::kAccepted);
  if (i != 0) {
    const auto count = static_cast<uint32_t>(i);
    const uint32_t msn = msn_;
    rq_head_ = rq_head + count;
    cq_tail_ = cq_tail + count;
    epsn_ = wire::psn_add(epsn, count);
    ack_psn_ = wire::psn_add(epsn, count - 1);
    msn_ = wire::psn_add(msn, count);
    recv_offset_ = static_cast<uint32_t>(pkts[i - 1].payload.size());
    nak_seq_sent_ = false;
    counters_.rx_packets += i;
    if (acks != 0) {
      // The ACK of the last packet that asked: its PSN, the MSN after it.
      queue_acks(Aeth::ack(wire::psn_add(msn, last_ack + 1)), wire::psn_add(epsn, last_ack), acks);
    }
  }
  return i;
}

// Out of line: taken once after each change of the regions (and while a
// receive of an earlier epoch is still queued). At most the queue's depth.
[[gnu::noinline]] size_t Qp::rq_current_run(size_t n, uint64_t epoch) {
  const uint32_t head = rq_head_;
  for (uint32_t i = head; i != rq_tail_; ++i) {
    if (rq_[i & rq_mask_].epoch != epoch) return std::min<size_t>(n, i - head);
  }
  rq_epoch_ = epoch;
  return n;
}

[[gnu::flatten]] RxResult Qp::on_packet(uint64_t now_ns, const wire::RoceView& pkt) {
  const uint8_t* b = pkt.bth;
  const uint8_t opcode = b[0];
  const uint32_t w2 = wire::get_be32(b + 8);
  const uint32_t psn = w2 & wire::kPsnMask;
  if ((wire::get_be32(b + 4) & wire::kPsnMask) == config_.qpn) {
    if (opcode == static_cast<uint8_t>(Opcode::kAcknowledge)) {
      // on_packet() -> completer_rx() -> completer_ack() for an ACK/NAK.
      if ((state_ == QpState::kRts || state_ == QpState::kSqd) && pkt.payload.empty()) {
        ++counters_.rx_packets;
        if (wire::psn_ge(psn, snd_max_psn_)) {
          ++counters_.drop_stale_response;
          return RxResult::kDropped;
        }
        const uint32_t a = wire::get_be32(b + wire::kBthBytes);
        return completer_ack(now_ns, psn, wire::Aeth{static_cast<uint8_t>(a >> 24), a & 0xFFFFFF});
      }
    } else if ((opcode == static_cast<uint8_t>(Opcode::kSendOnly) ||
                opcode == static_cast<uint8_t>(Opcode::kSendOnlyImm)) &&
               !sr_ && psn == epsn_ && in_msg_ == InMessage::kNone &&
               (state_ == QpState::kRtr || state_ == QpState::kRts || state_ == QpState::kSqd) &&
               pkt.payload.size() <= attr_.pmtu_bytes) {
      // on_packet() -> responder_rx() for the expected PSN outside a message:
      // every check there passes for a SEND only, which goes to responder_send().
      ++counters_.rx_packets;
      const bool imm = opcode == static_cast<uint8_t>(Opcode::kSendOnlyImm);
      return responder_send_inline(imm ? wire::opcode_info(Opcode::kSendOnlyImm).flags
                                       : wire::opcode_info(Opcode::kSendOnly).flags,
                                   psn, (w2 >> 31) != 0,
                                   imm ? wire::get_be32(b + wire::kBthBytes) : 0, pkt.payload);
    }
  }
  return on_packet_decoded(now_ns, pkt);
}

// Out of line: the direct paths above need no room for a RoceHeader.
[[gnu::noinline]] RxResult Qp::on_packet_decoded(uint64_t now_ns, const wire::RoceView& pkt) {
  wire::RoceHeader hdr;
  wire::decode_roce_header(pkt, hdr);
  return on_packet(now_ns, hdr, pkt.payload);
}

}  // namespace conduit::transport
