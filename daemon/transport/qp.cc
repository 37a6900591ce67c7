// QP state changes, posting work requests and the completion queue.
#include "transport/qp.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>

#include "wire/psn.h"

namespace conduit::transport {
namespace {

using wire::psn_mask;

// 1 GiB: a READ of it at PMTU 256 spans 2^22 PSNs, well inside the 2^23 PSN half range.
constexpr uint32_t kMaxPayloadPerWr = 1u << 30;

uint32_t round_pow2(uint32_t v) { return std::bit_ceil(v < 2 ? 2u : v); }

// Which attributes each transition requires and which it may also set
// (the verbs table, without the path/port/P_Key attributes conduit has no use for).
struct Transition {
  QpState from, to;
  uint32_t required, optional;
};
constexpr Transition kTransitions[] = {
    {QpState::kReset, QpState::kInit, 0, kAttrAccessFlags},
    {QpState::kInit, QpState::kInit, 0, kAttrAccessFlags},
    {QpState::kInit, QpState::kRtr,
     kAttrPathMtu | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic | kAttrMinRnrTimer,
     kAttrAccessFlags | kAttrSelectiveRepeat},
    {QpState::kRtr, QpState::kRts,
     kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrMaxRdAtomic,
     kAttrAccessFlags | kAttrMinRnrTimer},
    {QpState::kRts, QpState::kRts, 0,
     kAttrAccessFlags | kAttrMinRnrTimer | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry},
    {QpState::kRts, QpState::kSqd, 0, 0},
    {QpState::kSqd, QpState::kSqd, 0,
     kAttrAccessFlags | kAttrMinRnrTimer | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry |
         kAttrMaxRdAtomic | kAttrMaxDestRdAtomic},
    {QpState::kSqd, QpState::kRts, 0,
     kAttrAccessFlags | kAttrMinRnrTimer | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry},
    {QpState::kErr, QpState::kErr, 0, 0},
};

}  // namespace

const char* qp_state_name(QpState s) {
  switch (s) {
    case QpState::kReset:
      return "RESET";
    case QpState::kInit:
      return "INIT";
    case QpState::kRtr:
      return "RTR";
    case QpState::kRts:
      return "RTS";
    case QpState::kSqd:
      return "SQD";
    case QpState::kErr:
      return "ERR";
  }
  return "?";
}

const char* status_name(Status s) {
  switch (s) {
    case Status::kOk:
      return "ok";
    case Status::kInvalidState:
      return "invalid state";
    case Status::kInvalidTransition:
      return "invalid transition";
    case Status::kMissingAttr:
      return "missing attribute";
    case Status::kInvalidAttr:
      return "invalid attribute";
    case Status::kQueueFull:
      return "queue full";
    case Status::kInvalidSge:
      return "invalid SGE";
    case Status::kInvalidWr:
      return "invalid work request";
  }
  return "?";
}

const char* wc_status_name(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess:
      return "success";
    case WcStatus::kLocalLengthError:
      return "local length error";
    case WcStatus::kLocalProtectionError:
      return "local protection error";
    case WcStatus::kWrFlushError:
      return "WR flush error";
    case WcStatus::kBadResponse:
      return "bad response";
    case WcStatus::kRemoteInvalidRequest:
      return "remote invalid request";
    case WcStatus::kRemoteAccessError:
      return "remote access error";
    case WcStatus::kRemoteOperationError:
      return "remote operation error";
    case WcStatus::kRetryExceeded:
      return "retry exceeded";
    case WcStatus::kRnrRetryExceeded:
      return "RNR retry exceeded";
  }
  return "?";
}

uint64_t rnr_timer_ns(uint8_t code) {
  // IB_RNR_TIMER_* in units of 10 us; code 0 is 655.36 ms.
  static constexpr uint32_t kTens_us[32] = {65536, 1,    2,    3,     4,     6,     8,     12,
                                            16,    24,   32,   48,    64,    96,    128,   192,
                                            256,   384,  512,  768,   1024,  1536,  2048,  3072,
                                            4096,  6144, 8192, 12288, 16384, 24576, 32768, 49152};
  return static_cast<uint64_t>(kTens_us[code & 31]) * 10'000;
}

Qp::Qp(const QpConfig& config, MemoryRegions& mrs) : config_(config), mrs_(mrs) {
  config_.qpn = psn_mask(config_.qpn);
  if (config_.window_packets == 0) config_.window_packets = 1;
  if (config_.window_packets > (1u << 20)) config_.window_packets = 1u << 20;
  if (config_.ack_req_every_packets == 0) config_.ack_req_every_packets = 1;
  // Invalid RESET defaults fall back to QpAttr's own, one by one.
  QpAttr& d = config_.reset_attr;
  const QpAttr std_attr;
  const uint32_t m = d.pmtu_bytes;
  if (m < 256 || m > 4096 || !std::has_single_bit(m)) d.pmtu_bytes = std_attr.pmtu_bytes;
  if (d.timeout > 31) d.timeout = std_attr.timeout;
  if (d.retry_cnt > 7) d.retry_cnt = std_attr.retry_cnt;
  if (d.rnr_retry > 7) d.rnr_retry = std_attr.rnr_retry;
  if (d.min_rnr_timer > 31) d.min_rnr_timer = std_attr.min_rnr_timer;
  if (d.max_rd_atomic == 0 || d.max_rd_atomic > kMaxReadDepth)
    d.max_rd_atomic = std_attr.max_rd_atomic;
  if (d.max_dest_rd_atomic == 0 || d.max_dest_rd_atomic > kMaxReadDepth) {
    d.max_dest_rd_atomic = std_attr.max_dest_rd_atomic;
  }
  sq_.resize(round_pow2(config_.sq_depth));
  sq_mask_ = static_cast<uint32_t>(sq_.size()) - 1;
  rq_.resize(round_pow2(config_.rq_depth));
  rq_mask_ = static_cast<uint32_t>(rq_.size()) - 1;
  cq_.resize(round_pow2(static_cast<uint32_t>(sq_.size() + rq_.size())));
  cq_mask_ = static_cast<uint32_t>(cq_.size()) - 1;
  reads_.resize(kMaxReadDepth);
  sack_bits_.resize(kSrWindow / 64);
  sr_slots_.resize(kSrWindow);
  static_assert(kRespFifoSlots == std::bit_ceil(2 * kMaxReadDepth + 2));
  resp_fifo_.resize(kRespFifoSlots);
  reset_all();
}

void Qp::reset_all() {
  const QpAttr& d = config_.reset_attr;
  attr_ = QpAttr{};
  attr_.pmtu_bytes = d.pmtu_bytes;
  attr_.timeout = d.timeout;
  attr_.retry_cnt = d.retry_cnt;
  attr_.rnr_retry = d.rnr_retry;
  attr_.min_rnr_timer = d.min_rnr_timer;
  attr_.max_rd_atomic = d.max_rd_atomic;
  attr_.max_dest_rd_atomic = d.max_dest_rd_atomic;
  pmtu_shift_ = static_cast<uint32_t>(std::countr_zero(attr_.pmtu_bytes));
  retry_left_ = attr_.retry_cnt;
  rnr_retry_left_ = attr_.rnr_retry;
  sq_head_ = sq_tail_ = 0;
  rq_head_ = rq_tail_ = 0;
  cq_head_ = cq_tail_ = 0;
  cur_wqe_ = 0;
  reads_started_ = 0;
  pkts_since_ack_req_ = 0;
  rewound_without_progress_ = false;
  ack_deadline_ns_ = rnr_deadline_ns_ = kNoDeadline;
  last_progress_ns_ = 0;
  error_ = {};
  msn_ = 0;
  nak_seq_sent_ = false;
  in_msg_ = InMessage::kNone;
  recv_offset_ = write_offset_ = 0;
  write_mem_ = {};
  for (auto& r : reads_) r = ReadResource{};
  read_next_ = 0;
  resp_head_ = resp_tail_ = 0;
  sr_ = false;
  seg_bytes_ = attr_.pmtu_bytes;
  next_recv_seq_ = recv_seq_done_ = 0;
  in_recovery_ = read_retry_pending_ = resend_marked_ = read_retry_marked_ = false;
  acked_past_read_ = held_nak_ = false;
  tx_window_packets_ = config_.window_packets;
  for (auto& w : sack_bits_) w = 0;
  sacked_count_ = 0;
  for (auto& s : sr_slots_) s = SrSlot{};
}

void SrPlacement::encode(uint8_t* out) const {
  auto put32 = [&out](uint32_t v) {
    for (int i = 3; i >= 0; --i) *out++ = static_cast<uint8_t>(v >> (8 * i));
  };
  put32(static_cast<uint32_t>(va >> 32));
  put32(static_cast<uint32_t>(va));
  put32(rkey);
  put32(msg_len_bytes);
  put32(msg_first_psn);
  put32(recv_seq);
}

SrPlacement SrPlacement::decode(const uint8_t* in) {
  auto get32 = [&in]() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | *in++;
    return v;
  };
  SrPlacement p;
  p.va = static_cast<uint64_t>(get32()) << 32;
  p.va |= get32();
  p.rkey = get32();
  p.msg_len_bytes = get32();
  p.msg_first_psn = get32() & wire::kPsnMask;
  p.recv_seq = get32();
  return p;
}

Status Qp::modify(const QpAttr& a, uint32_t mask) {
  const QpState to = (mask & kAttrState) ? a.state : state_;
  if (to == QpState::kReset) {
    state_ = QpState::kReset;
    reset_all();
    return Status::kOk;
  }
  if (to == QpState::kErr) {
    if (state_ == QpState::kReset) return Status::kInvalidTransition;
    if (state_ != QpState::kErr) enter_error();
    // The owner stops the QP: answers still queued from before a responder error go no further.
    stop_responses();
    return Status::kOk;
  }
  const Transition* t = nullptr;
  for (const auto& cand : kTransitions) {
    if (cand.from == state_ && cand.to == to) t = &cand;
  }
  if (t == nullptr) return Status::kInvalidTransition;
  const uint32_t attrs = mask & ~kAttrState;
  if ((attrs & t->required) != t->required) return Status::kMissingAttr;
  if ((attrs & ~(t->required | t->optional)) != 0) return Status::kInvalidAttr;

  // Validate everything before changing anything.
  if (attrs & kAttrPathMtu) {
    const uint32_t m = a.pmtu_bytes;
    if (m < 256 || m > 4096 || !std::has_single_bit(m)) return Status::kInvalidAttr;
  }
  if ((attrs & kAttrDestQpn) && a.dest_qpn > wire::kPsnMask) return Status::kInvalidAttr;
  if ((attrs & kAttrRqPsn) && a.rq_psn > wire::kPsnMask) return Status::kInvalidAttr;
  if ((attrs & kAttrSqPsn) && a.sq_psn > wire::kPsnMask) return Status::kInvalidAttr;
  if ((attrs & kAttrTimeout) && a.timeout > 31) return Status::kInvalidAttr;
  if ((attrs & kAttrRetryCnt) && a.retry_cnt > 7) return Status::kInvalidAttr;
  if ((attrs & kAttrRnrRetry) && a.rnr_retry > 7) return Status::kInvalidAttr;
  if ((attrs & kAttrMinRnrTimer) && a.min_rnr_timer > 31) return Status::kInvalidAttr;
  if ((attrs & kAttrMaxRdAtomic) && (a.max_rd_atomic == 0 || a.max_rd_atomic > kMaxReadDepth))
    return Status::kInvalidAttr;
  if ((attrs & kAttrMaxDestRdAtomic) &&
      (a.max_dest_rd_atomic == 0 || a.max_dest_rd_atomic > kMaxReadDepth))
    return Status::kInvalidAttr;
  if ((attrs & kAttrAccessFlags) &&
      (a.access_flags &
       ~(kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic)) != 0)
    return Status::kInvalidAttr;

  if ((attrs & kAttrAccessFlags) && attr_.access_flags != a.access_flags) {
    attr_.access_flags = a.access_flags;
    ++access_gen_;  // requests in flight check the new flags (remote_epoch())
  }
  if (attrs & kAttrPathMtu) {
    attr_.pmtu_bytes = a.pmtu_bytes;
    pmtu_shift_ = static_cast<uint32_t>(std::countr_zero(a.pmtu_bytes));
  }
  if (attrs & kAttrDestQpn) attr_.dest_qpn = a.dest_qpn;
  if (attrs & kAttrRqPsn) {
    attr_.rq_psn = a.rq_psn;
    epsn_ = a.rq_psn;
    ack_psn_ = wire::psn_add(a.rq_psn, wire::kPsnMask);  // nothing taken yet
  }
  if (attrs & kAttrSqPsn) {
    attr_.sq_psn = a.sq_psn;
    next_post_psn_ = cur_psn_ = snd_max_psn_ = una_psn_ = a.sq_psn;
  }
  if (attrs & kAttrTimeout) attr_.timeout = a.timeout;
  if (attrs & kAttrRetryCnt) {
    attr_.retry_cnt = a.retry_cnt;
    retry_left_ = a.retry_cnt;
  }
  if (attrs & kAttrRnrRetry) {
    attr_.rnr_retry = a.rnr_retry;
    rnr_retry_left_ = a.rnr_retry;
  }
  if (attrs & kAttrMinRnrTimer) attr_.min_rnr_timer = a.min_rnr_timer;
  if (attrs & kAttrMaxRdAtomic) attr_.max_rd_atomic = a.max_rd_atomic;
  if (attrs & kAttrMaxDestRdAtomic) attr_.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (attrs & kAttrSelectiveRepeat) {
    attr_.selective_repeat = a.selective_repeat;
    sr_ = a.selective_repeat;
  }
  seg_bytes_ = sr_ ? attr_.pmtu_bytes - SrPlacement::kBytes : attr_.pmtu_bytes;
  state_ = to;
  attr_.state = to;
  return Status::kOk;
}

MrStatus Qp::resolve_local_slow(const Sge& s, uint32_t access, std::span<uint8_t>& out) {
  const MrStatus st = mrs_.lookup_local(s.lkey, s.addr, s.len_bytes, access, out);
  if (st == MrStatus::kOk) {
    mr_cache_valid_ = mrs_.local_view(s.lkey, mr_cache_);
    mr_cache_lkey_ = s.lkey;
    mr_cache_epoch_ = mrs_.epoch();
  }
  return st;
}

bool Qp::resolve_sges_again(const Sge* sge, uint32_t n, uint32_t access,
                            std::array<std::span<uint8_t>, kMaxSge>& seg) {
  for (uint32_t i = 0; i < n; ++i) {
    const Sge& s = sge[i];
    if (mrs_.lookup_local(s.lkey, s.addr, s.len_bytes, access, seg[i]) != MrStatus::kOk) {
      return false;
    }
  }
  return true;
}

bool Qp::send_memory_current(SendWqe& w) {
  const uint64_t epoch = mrs_.epoch();
  if (w.epoch == (epoch | kMemoryGone)) return false;  // found gone in this epoch already
  const uint32_t access = expects_response(w.wr.opcode) ? kAccessLocalWrite : 0u;
  const bool ok = resolve_sges_again(w.wr.sge.data(), w.wr.num_sge, access, w.seg);
  w.epoch = ok ? epoch : epoch | kMemoryGone;
  if (!ok) sq_epoch_ = kMemoryGone;  // this WQE is not of the current epoch
  return ok;
}

uint32_t Qp::npkts_for(uint32_t len_bytes, bool read) const {
  if (len_bytes == 0) return 1;
  if (read || !sr_) return ((len_bytes - 1) >> pmtu_shift_) + 1;
  return (len_bytes - 1) / seg_bytes_ + 1;
}

Qp::SendWqe* Qp::wqe_for_psn(uint32_t psn) {
  for (uint32_t i = sq_head_; i != cur_wqe_ && i != sq_tail_; ++i) {
    SendWqe& w = sq_at(i);
    if (wire::psn_in_range(psn, w.first_psn, wire::psn_add(w.first_psn, w.npkts))) return &w;
  }
  // The cursor's WQE may be partly sent.
  if (cur_wqe_ != sq_tail_) {
    SendWqe& w = sq_at(cur_wqe_);
    if (wire::psn_in_range(psn, w.first_psn, cur_psn_)) return &w;
  }
  return nullptr;
}

void Qp::sr_release_sacks(uint32_t psn) {
  {
    // Clear the SACK bits of the PSNs the cumulative ACK passes (ring reuse).
    uint32_t n = static_cast<uint32_t>(wire::psn_diff(psn, una_psn_));
    for (uint32_t p = una_psn_; n > 0 && n <= kSrWindow; --n, p = wire::psn_next(p)) {
      const uint32_t i = p & (kSrWindow - 1);
      const uint64_t bit = 1ull << (i % 64);
      if ((sack_bits_[i / 64] & bit) != 0) --sacked_count_;
      sack_bits_[i / 64] &= ~bit;
    }
    if (n > kSrWindow) {
      for (auto& w : sack_bits_) w = 0;
      sacked_count_ = 0;
    }
    if (in_recovery_ && wire::psn_ge(psn, recovery_psn_)) in_recovery_ = resend_marked_ = false;
  }
}

size_t Qp::poll_cq(std::span<Completion> out) {
  const size_t avail = cq_tail_ - cq_head_;
  const size_t n = avail < out.size() ? avail : out.size();
  if (n >= 4) return poll_cq_runs(out.data(), n);
  if (n == 1) {  // one at a time: no loop
    out[0] = cq_[cq_head_++ & cq_mask_];
    return 1;
  }
  for (size_t i = 0; i < n; ++i) out[i] = cq_[(cq_head_ + i) & cq_mask_];
  cq_head_ += static_cast<uint32_t>(n);
  return n;
}

// n completions as whole runs: up to the ring's end, then from its start.
// Out of line: the one-completion poll stays a leaf without the calls.
[[gnu::noinline]] size_t Qp::poll_cq_runs(Completion* out, size_t n) {
  const size_t from = cq_head_ & cq_mask_;
  const size_t first = std::min(n, cq_.size() - from);
  std::memcpy(out, cq_.data() + from, first * sizeof(Completion));
  if (first != n) std::memcpy(out + first, cq_.data(), (n - first) * sizeof(Completion));
  cq_head_ += static_cast<uint32_t>(n);
  return n;
}

// The WR up to its first SGE, and the SGE count: the SGEs are kept resolved in
// w.seg, and in w.wr.sge only to be resolved again after a region changed (the
// general post copies the others).
[[gnu::always_inline]] inline void Qp::keep_wr(SendWqe& w, const SendWr& wr) {
  // Trivially copyable.
  std::memcpy(static_cast<void*>(&w.wr), &wr, offsetof(SendWr, sge) + sizeof(Sge));
  w.wr.num_sge = wr.num_sge;
}

// A WQE whose WR and length are set joins the send queue: its PSNs, and the
// receive WQE it will consume at the responder (SR).
[[gnu::always_inline]] inline void Qp::enqueue_send(SendWqe& w) {
  const WrOpcode op = w.wr.opcode;
  w.epoch = mrs_.epoch();  // its SGEs were resolved just now
  w.first_psn = next_post_psn_;
  w.npkts = npkts_for(w.len_bytes, expects_response(op));  // READ: per response
  if (op == WrOpcode::kSend || op == WrOpcode::kSendImm || op == WrOpcode::kWriteImm) {
    w.recv_seq = next_recv_seq_++;
  }
  next_post_psn_ = wire::psn_add(next_post_psn_, w.npkts);
  ++sq_tail_;
}

// The common post: one SGE in the cached region, queue open. Every check of
// post_send_general() that can fail is made here first; anything else goes
// there. No calls: a leaf.
Status Qp::post_send(const SendWr& wr) {
  const uint32_t op = static_cast<uint8_t>(wr.opcode);
  if (wr.num_sge == 1 && op <= static_cast<uint8_t>(WrOpcode::kRead) &&
      (state_ == QpState::kRts || state_ == QpState::kSqd) && sq_tail_ - sq_head_ <= sq_mask_ &&
      cq_has_room_for_post() && wr.sge[0].len_bytes <= kMaxPayloadPerWr) {
    SendWqe& w = sq_at(sq_tail_);
    const uint32_t access = wr.opcode == WrOpcode::kRead ? kAccessLocalWrite : 0u;
    if (resolve_cached(wr.sge[0], access, w.seg[0])) {
      keep_wr(w, wr);
      w.len_bytes = wr.sge[0].len_bytes;
      enqueue_send(w);
      return Status::kOk;
    }
  }
  return post_send_general(wr);
}

[[gnu::noinline]] Status Qp::post_send_general(const SendWr& wr) {
  if (wr.num_sge > (sr_ ? kMaxSge - 1 : kMaxSge)) return Status::kInvalidWr;
  if (static_cast<uint8_t>(wr.opcode) > static_cast<uint8_t>(WrOpcode::kFetchAdd))
    return Status::kInvalidWr;
  // An atomic returns 8 bytes into one 8-byte SGE (as verbs requires).
  if (is_atomic(wr.opcode) && (wr.num_sge != 1 || wr.sge[0].len_bytes != kAtomicBytes))
    return Status::kInvalidWr;
  if (state_ != QpState::kRts && state_ != QpState::kSqd && state_ != QpState::kErr)
    return Status::kInvalidState;
  if (sq_tail_ - sq_head_ > sq_mask_ || !cq_has_room_for_post()) return Status::kQueueFull;

  SendWqe& w = sq_at(sq_tail_);
  keep_wr(w, wr);
  const uint32_t access = expects_response(wr.opcode) ? kAccessLocalWrite : 0u;
  uint32_t len = 0;
  for (uint32_t i = 0; i < wr.num_sge; ++i) {
    const Sge& s = wr.sge[i];
    if (s.len_bytes > kMaxPayloadPerWr - len) return Status::kInvalidWr;
    if (resolve_local(s, access, w.seg[i]) != MrStatus::kOk) return Status::kInvalidSge;
    w.wr.sge[i] = s;
    len += s.len_bytes;
  }
  w.len_bytes = len;
  if (state_ == QpState::kErr) {
    Completion c;
    c.wr_id = wr.wr_id;
    c.status = WcStatus::kWrFlushError;
    push_completion(c);
    return Status::kOk;
  }
  enqueue_send(w);
  return Status::kOk;
}

// As post_send(): the one-SGE post in the cached region, else the general one.
Status Qp::post_recv(const RecvWr& wr) {
  if (wr.num_sge == 1 && state_ != QpState::kReset && state_ != QpState::kErr &&
      rq_tail_ - rq_head_ <= rq_mask_ && cq_has_room_for_post() &&
      wr.sge[0].len_bytes <= kMaxPayloadPerWr) {
    RecvWqe& r = rq_[rq_tail_ & rq_mask_];
    if (resolve_cached(wr.sge[0], kAccessLocalWrite, r.seg[0])) {
      r.wr_id = wr.wr_id;
      r.num_sge = 1;
      r.len_bytes = wr.sge[0].len_bytes;
      r.epoch = mr_cache_epoch_;  // resolve_cached(): the current epoch
      r.sge[0] = wr.sge[0];
      ++rq_tail_;
      return Status::kOk;
    }
  }
  return post_recv_general(wr);
}

[[gnu::noinline]] Status Qp::post_recv_general(const RecvWr& wr) {
  if (wr.num_sge > kMaxSge) return Status::kInvalidWr;
  if (state_ == QpState::kReset) return Status::kInvalidState;
  if (rq_tail_ - rq_head_ > rq_mask_ || !cq_has_room_for_post()) return Status::kQueueFull;
  RecvWqe& r = rq_[rq_tail_ & rq_mask_];
  r.wr_id = wr.wr_id;
  r.num_sge = wr.num_sge;
  uint32_t len = 0;
  for (uint32_t i = 0; i < wr.num_sge; ++i) {
    const Sge& s = wr.sge[i];
    if (s.len_bytes > kMaxPayloadPerWr - len) return Status::kInvalidWr;
    if (resolve_local(s, kAccessLocalWrite, r.seg[i]) != MrStatus::kOk) return Status::kInvalidSge;
    r.sge[i] = s;
    len += s.len_bytes;
  }
  r.len_bytes = len;
  r.epoch = mrs_.epoch();
  if (state_ == QpState::kErr) {
    Completion c;
    c.wr_id = wr.wr_id;
    c.status = WcStatus::kWrFlushError;
    c.opcode = WcOpcode::kRecv;
    push_completion(c);
    return Status::kOk;
  }
  ++rq_tail_;
  return Status::kOk;
}

// The chain posts: while the QP is in a state that takes the WRs, the queues
// have room for the rest of the chain and the region cache is current, each
// one-SGE WR in the cached region is written straight into its WQE (the
// checks post_send() makes per WR that do not depend on the WR are made once);
// any other WR goes through post_send() alone, and the run starts again.
[[gnu::noinline]] const SendWr* Qp::send_chain_run(SendWqe* w, const SendWr* wr, const SendWr* last,
                                                   const MrView& view, uint32_t lkey,
                                                   uint64_t epoch, uint32_t ops, uint32_t shift,
                                                   uint32_t& psn_io) {
  const uint64_t base = view.base;
  const uint64_t size = view.bytes.size();
  uint8_t* const bytes = view.bytes.data();
  uint32_t psn = psn_io;
  for (; wr != last; ++wr, ++w) {
    const Sge& s = wr->sge[0];
    const WrOpcode op = wr->opcode;
    const uint32_t len = s.len_bytes;
    uint64_t off;
    if (wr->num_sge != 1 || static_cast<uint8_t>(op) > static_cast<uint8_t>(WrOpcode::kRead) ||
        ((ops >> static_cast<uint8_t>(op)) & 1) == 0 || len > kMaxPayloadPerWr || s.lkey != lkey ||
        !in_view(s, base, size, off)) {
      break;
    }
    w->seg[0] = std::span<uint8_t>(bytes + off, len);
    keep_wr(*w, *wr);
    w->epoch = epoch;
    w->len_bytes = len;
    w->first_psn = psn;
    // npkts_for() without SR: 1 for an empty WR.
    w->npkts = ((len - (len != 0)) >> shift) + 1;
    // No receive sequence number (enqueue_send()): only SR reads them,
    // and under SR this run takes READs only, which consume none. (SR is
    // set only on INIT -> RTR, with the queues empty since RESET.)
    psn = wire::psn_add(psn, w->npkts);
  }
  psn_io = psn;
  return wr;
}

size_t Qp::post_send_chain(std::span<const SendWr> wrs, Status& status) {
  const size_t n = wrs.size();
  size_t i = 0;
  status = Status::kOk;
  while (i < n) {
    if ((state_ == QpState::kRts || state_ == QpState::kSqd) && mr_cache_current() &&
        sq_free() >= n - i && cq_has_room_for_posts(n - i)) {
      // The opcodes this run takes (bit per WrOpcode): all five, but a READ only
      // into a writable region, and under SR only READs (npkts_for() differs).
      const uint32_t ops =
          (sr_ ? 0u : 0xFu) | ((mr_cache_.access & kAccessLocalWrite) ? 0x10u : 0u);
      const uint32_t tail = sq_tail_;
      uint32_t psn = next_post_psn_;
      // Up to where the send queue wraps (then round again).
      const size_t end = i + std::min<size_t>(n - i, ring_run(tail, sq_mask_));
      const SendWr* const first = wrs.data() + i;
      const SendWr* const wr = send_chain_run(
          sq_.data() + (tail & sq_mask_), first, wrs.data() + end, mr_cache_, mr_cache_lkey_,
          mr_cache_epoch_ /* mr_cache_current() */, ops, pmtu_shift_, psn);
      const auto taken = static_cast<size_t>(wr - first);
      i += taken;
      sq_tail_ = tail + static_cast<uint32_t>(taken);
      next_post_psn_ = psn;
      if (i == n) break;
      if (i == end) continue;  // the queue wrapped: the rest from its start
    }
    const Status st = post_send(wrs[i]);
    if (st != Status::kOk) {
      status = st;
      return i;
    }
    ++i;
  }
  return n;
}

[[gnu::noinline]] const RecvWr* Qp::recv_chain_run(RecvWqe* r, const RecvWr* wr, const RecvWr* last,
                                                   const MrView& view, uint32_t lkey,
                                                   uint64_t epoch) {
  const uint64_t base = view.base;
  const uint64_t size = view.bytes.size();
  uint8_t* const bytes = view.bytes.data();
  for (; wr != last; ++wr, ++r) {
    const Sge& s = wr->sge[0];
    uint64_t off;
    if (wr->num_sge != 1 || s.len_bytes > kMaxPayloadPerWr || s.lkey != lkey ||
        !in_view(s, base, size, off)) {
      break;
    }
    r->seg[0] = std::span<uint8_t>(bytes + off, s.len_bytes);
    r->wr_id = wr->wr_id;
    r->num_sge = 1;
    r->len_bytes = s.len_bytes;
    r->epoch = epoch;
    r->sge[0] = s;
  }
  return wr;
}

size_t Qp::post_recv_chain(std::span<const RecvWr> wrs, Status& status) {
  const size_t n = wrs.size();
  size_t i = 0;
  status = Status::kOk;
  while (i < n) {
    if (state_ != QpState::kReset && state_ != QpState::kErr && mr_cache_current() &&
        (mr_cache_.access & kAccessLocalWrite) != 0 &&
        rq_mask_ + 1 - (rq_tail_ - rq_head_) >= n - i && cq_has_room_for_posts(n - i)) {
      const uint32_t tail = rq_tail_;
      // Up to where the receive queue wraps (then round again).
      const size_t end = i + std::min<size_t>(n - i, ring_run(tail, rq_mask_));
      const RecvWr* const first = wrs.data() + i;
      const RecvWr* const wr =
          recv_chain_run(rq_.data() + (tail & rq_mask_), first, wrs.data() + end, mr_cache_,
                         mr_cache_lkey_, mr_cache_epoch_ /* mr_cache_current() */);
      const auto taken = static_cast<size_t>(wr - first);
      i += taken;
      rq_tail_ = tail + static_cast<uint32_t>(taken);
      if (i == n) break;
      if (i == end) continue;  // the queue wrapped: the rest from its start
    }
    const Status st = post_recv(wrs[i]);
    if (st != Status::kOk) {
      status = st;
      return i;
    }
    ++i;
  }
  return n;
}

void Qp::enter_error() {
  state_ = QpState::kErr;
  attr_.state = QpState::kErr;
  // At most a queue's depth each, whatever the indices say: a flush never runs 2^32 times.
  for (uint32_t n = std::min(sq_tail_ - sq_head_, sq_mask_ + 1); n > 0; --n) {
    const SendWqe& w = sq_at(sq_head_);
    Completion c;
    c.wr_id = w.wr.wr_id;
    c.status = WcStatus::kWrFlushError;
    push_completion(c);
    ++sq_head_;
  }
  sq_head_ = sq_tail_;
  for (uint32_t n = std::min(rq_tail_ - rq_head_, rq_mask_ + 1); n > 0; --n) {
    Completion c;
    c.wr_id = rq_[rq_head_ & rq_mask_].wr_id;
    c.status = WcStatus::kWrFlushError;
    c.opcode = WcOpcode::kRecv;
    push_completion(c);
    ++rq_head_;
  }
  rq_head_ = rq_tail_;
  cur_wqe_ = sq_head_;
  reads_started_ = 0;
  ack_deadline_ns_ = rnr_deadline_ns_ = kNoDeadline;
  // Queued items stay, READ responses and atomic ACKs too: a responder's fatal NAK for PSN p
  // says everything before p completed, so their answers go first (as in rxe and hardware).
  in_msg_ = InMessage::kNone;
}

void Qp::stop_responses() {
  // What is queued behind the first READ response or atomic ACK dropped here goes no further
  // either: an ACK or NAK for a later PSN would tell the requester that the READ or atomic
  // was answered (as responder_poll() does when a READ's region goes away).
  resp_tail_ = first_unsent_answer();
  for (auto& r : reads_) r.active = false;  // responder_poll skips items of inactive ones
}

RxResult Qp::on_packet(uint64_t now_ns, const wire::RoceHeader& hdr,
                       std::span<const uint8_t> payload) {
  ++counters_.rx_packets;
  const wire::OpcodeInfo& info = hdr.info();
  if (hdr.bth.dest_qp != config_.qpn) {
    ++counters_.drop_wrong_qp;
    return RxResult::kDropped;
  }
  // An RC opcode we do not implement is a request (the responses are all known): the
  // responder NAKs it as an invalid request at its expected PSN.
  const bool unsupported = !(info.flags & wire::kOpValid) && wire::is_rc_opcode(hdr.bth.opcode);
  if ((!(info.flags & wire::kOpValid) && !unsupported) || (info.flags & wire::kOpCnp)) {
    ++counters_.drop_bad_opcode;
    return RxResult::kDropped;
  }
  if ((info.flags & wire::kOpRequest) || unsupported) {
    // The responder checks a request's length against the PMTU after its PSN (a violation
    // in sequence is NAKed; a duplicate's or an early one's is not looked at).
    if (state_ != QpState::kRtr && state_ != QpState::kRts && state_ != QpState::kSqd) {
      ++counters_.drop_state;
      return RxResult::kDropped;
    }
    return responder_rx(hdr, payload);
  }
  if (state_ != QpState::kRts && state_ != QpState::kSqd) {
    ++counters_.drop_state;
    return RxResult::kDropped;
  }
  if (payload.size() > attr_.pmtu_bytes) {  // a response: nothing to answer, dropped
    ++counters_.drop_bad_length;
    return RxResult::kDropped;
  }
  return completer_rx(now_ns, hdr, payload);
}

bool Qp::poll_tx(uint64_t now_ns, TxPacket& out) {
  if (state_ == QpState::kReset || state_ == QpState::kInit) return false;
  if (responder_poll(out)) {
    ++counters_.tx_packets;
    return true;
  }
  if (requester_poll(now_ns, out)) {
    ++counters_.tx_packets;
    return true;
  }
  return false;
}

uint64_t Qp::next_deadline_ns() const {
  return ack_deadline_ns_ < rnr_deadline_ns_ ? ack_deadline_ns_ : rnr_deadline_ns_;
}

}  // namespace conduit::transport
