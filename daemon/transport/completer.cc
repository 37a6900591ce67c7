// Completer: handles ACK/NAK and READ responses, completes send WQEs in
// order, runs the local ACK and RNR timers, and spends the retry budgets
// (go-back-N). When a budget runs out the QP goes to ERR and every
// outstanding WR is flushed: nothing waits forever.
#include <cstring>
#include <optional>

#include "transport/qp.h"
#include "wire/psn.h"

namespace conduit::transport {

namespace {

WcOpcode wc_opcode(WrOpcode op) {
  switch (op) {
    case WrOpcode::kSend:
    case WrOpcode::kSendImm:
      return WcOpcode::kSend;
    case WrOpcode::kWrite:
    case WrOpcode::kWriteImm:
      return WcOpcode::kWrite;
    case WrOpcode::kRead:
      return WcOpcode::kRead;
    case WrOpcode::kCmpSwap:
      return WcOpcode::kCmpSwap;
    case WrOpcode::kFetchAdd:
      return WcOpcode::kFetchAdd;
  }
  return WcOpcode::kSend;
}

WcStatus nak_status(uint8_t code) {
  switch (static_cast<wire::NakCode>(code)) {
    case wire::NakCode::kInvalidRequest:
      return WcStatus::kRemoteInvalidRequest;
    case wire::NakCode::kRemoteAccessError:
      return WcStatus::kRemoteAccessError;
    case wire::NakCode::kRemoteOperationalError:
      return WcStatus::kRemoteOperationError;
    default:
      return WcStatus::kBadResponse;  // RD codes and reserved values on an RC QP
  }
}

}  // namespace

void Qp::complete_head(WcStatus status) {
  SendWqe& w = sq_at(sq_head_);
  if (status != WcStatus::kSuccess || w.wr.signaled) {
    Completion c;
    c.wr_id = w.wr.wr_id;
    c.status = status;
    c.opcode = wc_opcode(w.wr.opcode);
    c.len_bytes = w.len_bytes;
    push_completion(c);
  }
  if (cur_wqe_ == sq_head_) {
    // Completed before the cursor passed it again (a rewind was overtaken).
    ++cur_wqe_;
    const uint32_t end = wire::psn_add(w.first_psn, w.npkts);
    if (wire::psn_lt(cur_psn_, end)) cur_psn_ = end;
  } else if (expects_response(w.wr.opcode)) {
    --reads_started_;
  }
  ++sq_head_;
}

void Qp::complete_through(uint32_t psn) {
  // First the WQEs the cursor has passed, on locals: complete_head() of
  // each with its cursor and READ branches not taken, the completion
  // written field by field into its slot (room: reserved at post,
  // cq_has_room_for_post). The slot stores may alias the members, which
  // would be reloaded per WQE.
  const uint32_t stop = cur_wqe_;  // sq_head_ <= cur_wqe_ <= sq_tail_
  uint32_t head = sq_head_;
  if (head != stop) {
    const SendWqe* const sq = sq_.data();
    const uint32_t sq_mask = sq_mask_;
    Completion* const cq = cq_.data();
    const uint32_t cq_mask = cq_mask_;
    uint32_t cq_tail = cq_tail_;
    do {
      const SendWqe& w = sq[head & sq_mask];
      const WrOpcode op = w.wr.opcode;
      if (expects_response(op)) break;  // only its responses complete it
      if (wire::psn_gt(wire::psn_add(w.first_psn, w.npkts - 1), psn)) break;
      if (w.wr.signaled) {
        Completion& c = cq[cq_tail & cq_mask];
        c.wr_id = w.wr.wr_id;
        c.status = WcStatus::kSuccess;
        c.opcode = wc_opcode(op);
        c.has_imm = false;
        c.imm = 0;
        c.len_bytes = w.len_bytes;
        ++cq_tail;
      }
      ++head;
    } while (head != stop);
    sq_head_ = head;
    cq_tail_ = cq_tail;
  }
  while (sq_head_ != sq_tail_) {
    const SendWqe& w = sq_at(sq_head_);
    if (expects_response(w.wr.opcode)) return;  // only its responses complete it
    const uint32_t last = wire::psn_add(w.first_psn, w.npkts - 1);
    if (wire::psn_gt(last, psn)) return;
    complete_head(WcStatus::kSuccess);
  }
}

bool Qp::advance_una(uint64_t now_ns, uint32_t psn) {
  complete_through(psn);
  uint32_t target = wire::psn_next(psn);
  bool blocked = false;
  if (sq_head_ != sq_tail_ && expects_response(sq_at(sq_head_).wr.opcode)) {
    // Only READ responses move una_psn_ through a READ: stop at the point the
    // responses have reached. Acknowledging more means responses were lost.
    const SendWqe& r = sq_at(sq_head_);
    const uint32_t have = wire::psn_gt(una_psn_, r.first_psn) ? una_psn_ : r.first_psn;
    if (wire::psn_gt(target, have)) {
      target = have;
      blocked = true;
      // SR resends only the READ: remember how far the peer has acknowledged, the ACK
      // does not come again.
      if (sr_ && (!acked_past_read_ || wire::psn_gt(psn, acked_past_read_psn_))) {
        acked_past_read_ = true;
        acked_past_read_psn_ = psn;
      }
    }
  }
  if (wire::psn_gt(target, una_psn_)) {
    set_una(target);
    on_progress(now_ns);
  }
  return blocked;
}

void Qp::rtt_on_ack(uint64_t now_ns) {
  if (!rtt_timing_ || !wire::psn_gt(una_psn_, rtt_psn_)) return;
  rtt_timing_ = false;
  const uint64_t r = now_ns > rtt_sent_ns_ ? now_ns - rtt_sent_ns_ : 1;
  if (srtt_ns_ == 0) {
    srtt_ns_ = r;
    rttvar_ns_ = r / 2;
  } else {
    const uint64_t err = srtt_ns_ > r ? srtt_ns_ - r : r - srtt_ns_;
    rttvar_ns_ = (3 * rttvar_ns_ + err) / 4;
    srtt_ns_ = (7 * srtt_ns_ + r) / 8;
  }
}

void Qp::on_progress(uint64_t now_ns) {
  last_progress_ns_ = now_ns;
  if (sr_) {
    rtt_on_ack(now_ns);
    rto_backoff_ = 0;
  }
  retry_left_ = attr_.retry_cnt;
  sr_charged_ns_ = now_ns;
  rnr_retry_left_ = attr_.rnr_retry;
  rewound_without_progress_ = false;
  if (wire::psn_lt(cur_psn_, una_psn_)) rewind_to(una_psn_);
  if (una_psn_ == snd_max_psn_ || (!sr_ && attr_.timeout == 0) || rnr_deadline_ns_ != kNoDeadline) {
    ack_deadline_ns_ = kNoDeadline;
  } else {
    timer_base_ns_ = now_ns;
    ack_deadline_ns_ = rto_deadline_ns();
  }
}

bool Qp::consume_retry(uint64_t now_ns) {
  (void)now_ns;
  if (retry_left_ == 0) {
    fail(WcStatus::kRetryExceeded);
    return false;
  }
  --retry_left_;
  return true;
}

void Qp::sequence_retry(uint64_t now_ns) {
  // Responses sent before our last rewind keep arriving; one rewind per
  // round of progress is enough (the ACK timer covers a lost retransmission).
  if (rewound_without_progress_ || rnr_deadline_ns_ != kNoDeadline) return;
  if (sr_) {
    // Only READ responses are taken in order under SR: ask again for the
    // missing part of the READ at una_psn_, and resend nothing else.
    rewound_without_progress_ = true;
    read_retry_pending_ = true;
    read_retry_psn_ = una_psn_;
    return;
  }
  if (!consume_retry(now_ns)) return;
  ++counters_.retries;
  rewind_to(una_psn_);
  rewound_without_progress_ = true;
  if (attr_.timeout != 0) ack_deadline_ns_ = now_ns + ack_timeout_ns(attr_.timeout);
}

void Qp::fail(WcStatus status) {
  error_ = {QpError::Side::kRequester, status, {}, una_psn_};
  if (sq_head_ != sq_tail_) complete_head(status);
  enter_error();
  stop_responses();  // the peer is gone or in ERR itself: nobody takes the answers
}

RxResult Qp::completer_rx(uint64_t now_ns, const wire::RoceHeader& hdr,
                          std::span<const uint8_t> payload) {
  const uint32_t flags = hdr.info().flags;
  // Nothing at or beyond snd_max was ever asked for.
  if (wire::psn_ge(hdr.bth.psn, snd_max_psn_)) {
    ++counters_.drop_stale_response;
    return RxResult::kDropped;
  }
  if (flags & wire::kOpRead) return completer_read_response(now_ns, hdr, payload);
  if (hdr.bth.opcode == static_cast<uint8_t>(wire::Opcode::kAcknowledge)) {
    return completer_ack(now_ns, hdr.bth.psn, hdr.aeth);
  }
  return completer_atomic_ack(now_ns, hdr);
}

// Flattened: the ACK path's helpers (advance_una, complete_through, ...)
// inlined into it; per packet they cost more in calls than in work.
[[gnu::flatten]] RxResult Qp::completer_ack(uint64_t now_ns, uint32_t psn, wire::Aeth aeth) {
  switch (aeth.type()) {
    case wire::AethType::kAck: {
      if (wire::psn_lt(psn, una_psn_)) {
        ++counters_.rx_duplicates;
        return RxResult::kDuplicate;
      }
      // An ACK past an unfinished READ means its responses were lost.
      if (advance_una(now_ns, psn)) {
        if (sr_) sr_read_evidence(psn);
        sequence_retry(now_ns);
      }
      return RxResult::kAccepted;
    }
    case wire::AethType::kRnrNak: {
      ++counters_.rnr_naks_received;
      if (wire::psn_lt(psn, una_psn_)) {
        ++counters_.rx_duplicates;
        return RxResult::kDuplicate;
      }
      // Under SR the NAKed packet may have arrived out of order: its PSN says
      // nothing about the ones before it.
      if (!sr_ && wire::psn_gt(psn, una_psn_) &&
          advance_una(now_ns, wire::psn_add(psn, wire::kPsnMask))) {
        sequence_retry(now_ns);
        return RxResult::kAccepted;
      }
      if (rnr_deadline_ns_ != kNoDeadline && rnr_psn_ == psn) return RxResult::kDuplicate;
      if (rnr_retry_left_ == 0) {
        fail(WcStatus::kRnrRetryExceeded);
        return RxResult::kAccepted;
      }
      if (attr_.rnr_retry != 7) --rnr_retry_left_;
      rnr_psn_ = psn;
      rnr_deadline_ns_ = now_ns + rnr_timer_ns(aeth.value());
      ack_deadline_ns_ = kNoDeadline;
      rewind_to(psn);
      return RxResult::kAccepted;
    }
    case wire::AethType::kNak: {
      ++counters_.naks_received;
      if (wire::psn_lt(psn, una_psn_)) {
        ++counters_.rx_duplicates;
        return RxResult::kDuplicate;
      }
      // Everything before the NAKed PSN was received and executed: a sequence NAK's PSN is
      // the responder's ePSN, and a fatal NAK is only sent for the request at ePSN (under SR
      // too: one that fails out of order is dropped, and NAKed when resent in order). The
      // SEND/WRITEs before it complete; a READ or atomic before it still missing its answer
      // is asked for again (as rxe), not completed by a NAK that is not about it. A fatal
      // NAK is then kept until that answer comes (apply_ack_held_by_response()): the peer
      // is in ERR and does not NAK again.
      bool blocked = false;
      if (wire::psn_gt(psn, una_psn_)) {
        blocked = advance_una(now_ns, wire::psn_add(psn, wire::kPsnMask));
      }
      if (sr_ && aeth.value() == static_cast<uint8_t>(wire::NakCode::kPsnSequenceError)) {
        if (blocked) {
          sr_read_evidence(aeth.msn);
          sequence_retry(now_ns);
        }
        sr_sack(now_ns, psn, aeth.msn);
      } else if (aeth.value() == static_cast<uint8_t>(wire::NakCode::kPsnSequenceError)) {
        sequence_retry(now_ns);
      } else if (blocked) {
        held_nak_ = true;
        held_nak_psn_ = psn;
        held_nak_code_ = aeth.value();
        tx_window_packets_ = 0;  // nothing new at or past psn (requester_next())
        sequence_retry(now_ns);
      } else {
        fail(nak_status(aeth.value()));
      }
      return RxResult::kAccepted;
    }
    case wire::AethType::kReserved:
      break;
  }
  ++counters_.drop_bad_opcode;
  return RxResult::kDropped;
}

std::optional<RxResult> Qp::response_prologue(uint64_t now_ns, const wire::RoceHeader& hdr) {
  const uint32_t psn = hdr.bth.psn;
  if (wire::psn_lt(psn, una_psn_)) {
    ++counters_.rx_duplicates;
    return RxResult::kDuplicate;
  }
  // A NAK comes as an Acknowledge: a response's AETH can only say ACK.
  if ((hdr.info().flags & wire::kOpAeth) && hdr.aeth.type() != wire::AethType::kAck) {
    ++counters_.drop_bad_opcode;
    return RxResult::kDropped;
  }
  // A response acknowledges every request before it.
  if (advance_una(now_ns, wire::psn_add(psn, wire::kPsnMask))) {
    if (sr_) sr_read_evidence(psn);
    sequence_retry(now_ns);  // an earlier READ or atomic is missing its answer
    ++counters_.rx_out_of_sequence;
    return RxResult::kOutOfSequence;
  }
  if (sq_head_ == sq_tail_) {
    ++counters_.drop_stale_response;
    return RxResult::kDropped;
  }
  return std::nullopt;
}

RxResult Qp::completer_read_response(uint64_t now_ns, const wire::RoceHeader& hdr,
                                     std::span<const uint8_t> payload) {
  const uint32_t psn = hdr.bth.psn;
  const uint32_t flags = hdr.info().flags;
  if (auto early = response_prologue(now_ns, hdr)) return *early;
  SendWqe& w = sq_at(sq_head_);
  if (w.wr.opcode != WrOpcode::kRead ||
      !wire::psn_in_range(psn, w.first_psn, wire::psn_add(w.first_psn, w.npkts))) {
    ++counters_.drop_stale_response;
    return RxResult::kDropped;
  }
  if (wire::psn_lt(una_psn_, w.first_psn)) {
    set_una(w.first_psn);
    on_progress(now_ns);
  }
  if (psn != una_psn_) {
    ++counters_.rx_out_of_sequence;
    sequence_retry(now_ns);
    return RxResult::kOutOfSequence;
  }
  const uint32_t off = static_cast<uint32_t>(wire::psn_diff(psn, w.first_psn)) << pmtu_shift_;
  const uint32_t remaining = w.len_bytes - off;
  const bool last = remaining <= attr_.pmtu_bytes;
  const uint32_t n = last ? remaining : attr_.pmtu_bytes;
  if (payload.size() != n || last != static_cast<bool>(flags & wire::kOpLast)) {
    ++counters_.drop_bad_length;
    return RxResult::kDropped;
  }
  // Scatter into the local SGEs (checked for local write at post time, and again if a region
  // changed since: a deregistered one fails the WR, as rxe's do_read with LOC_PROT_ERR).
  if (w.epoch != mrs_.epoch() && !send_memory_current(w)) [[unlikely]] {
    fail(WcStatus::kLocalProtectionError);
    return RxResult::kAccepted;
  }
  uint32_t skip = off;
  size_t done = 0;
  for (uint32_t i = 0; i < w.wr.num_sge && done < n; ++i) {
    const uint32_t sz = static_cast<uint32_t>(w.seg[i].size());
    if (skip >= sz) {
      skip -= sz;
      continue;
    }
    const size_t take = std::min<size_t>(sz - skip, n - done);
    std::memcpy(w.seg[i].data() + skip, payload.data() + done, take);
    done += take;
    skip = 0;
  }
  set_una(wire::psn_next(psn));
  if (last) complete_head(WcStatus::kSuccess);
  on_progress(now_ns);
  if (last) apply_ack_held_by_response(now_ns);
  return RxResult::kAccepted;
}

void Qp::apply_ack_held_by_response(uint64_t now_ns) {
  if (acked_past_read_) {
    // The READ or atomic was what held back an acknowledgement already received.
    acked_past_read_ = false;
    if (wire::psn_ge(acked_past_read_psn_, una_psn_) &&
        wire::psn_lt(acked_past_read_psn_, snd_max_psn_) &&
        advance_una(now_ns, acked_past_read_psn_)) {
      sequence_retry(now_ns);
      return;  // another READ or atomic holds it (and a NAK behind it) back
    }
  }
  if (!held_nak_) return;
  if (wire::psn_lt(held_nak_psn_, una_psn_)) {  // its WR completed otherwise: not about it
    held_nak_ = false;
    tx_window_packets_ = config_.window_packets;
    return;
  }
  // Every request before the NAKed PSN was executed (as for a NAK not held back).
  if (advance_una(now_ns, wire::psn_add(held_nak_psn_, wire::kPsnMask))) {
    sequence_retry(now_ns);  // another READ or atomic before it is still missing its answer
    return;
  }
  held_nak_ = false;
  tx_window_packets_ = config_.window_packets;
  fail(nak_status(held_nak_code_));
}

RxResult Qp::completer_atomic_ack(uint64_t now_ns, const wire::RoceHeader& hdr) {
  if (hdr.bth.opcode != static_cast<uint8_t>(wire::Opcode::kAtomicAcknowledge)) {
    ++counters_.drop_bad_opcode;
    return RxResult::kDropped;
  }
  const uint32_t psn = hdr.bth.psn;
  if (auto early = response_prologue(now_ns, hdr)) return *early;
  SendWqe& w = sq_at(sq_head_);
  if (!is_atomic(w.wr.opcode) || w.first_psn != psn) {
    ++counters_.drop_stale_response;
    return RxResult::kDropped;
  }
  if (wire::psn_lt(una_psn_, w.first_psn)) {
    set_una(w.first_psn);
    on_progress(now_ns);
  }
  // The value the remote address held before the operation, in host order, into
  // the 8-byte local SGE (checked for local write at post time, and again if a region
  // changed since, as for a READ response).
  if (w.epoch != mrs_.epoch() && !send_memory_current(w)) [[unlikely]] {
    fail(WcStatus::kLocalProtectionError);
    return RxResult::kAccepted;
  }
  const uint64_t orig = hdr.atomic_ack_orig;
  std::memcpy(w.seg[0].data(), &orig, sizeof(orig));
  set_una(wire::psn_next(psn));
  complete_head(WcStatus::kSuccess);
  on_progress(now_ns);
  apply_ack_held_by_response(now_ns);
  return RxResult::kAccepted;
}

void Qp::on_timer(uint64_t now_ns) {
  if (state_ != QpState::kRts && state_ != QpState::kSqd) return;
  if (rnr_deadline_ns_ <= now_ns) {
    rnr_deadline_ns_ = kNoDeadline;
    rewind_to(wire::psn_lt(rnr_psn_, una_psn_) ? una_psn_ : rnr_psn_);
    if (una_psn_ != snd_max_psn_ && attr_.timeout != 0) {
      ack_deadline_ns_ = now_ns + ack_timeout_ns(attr_.timeout);
    }
  }
  if (ack_deadline_ns_ <= now_ns) {
    ++counters_.timeouts;
    if (una_psn_ == snd_max_psn_) {
      ack_deadline_ns_ = kNoDeadline;
      return;
    }
    // The head's memory was found gone when a packet of it was built behind the head: it
    // fails on that (request_memory_gone()), not on a retry budget spent meanwhile.
    if (sq_head_ != sq_tail_ && sq_at(sq_head_).epoch == (mrs_.epoch() | kMemoryGone)) {
      fail(WcStatus::kLocalProtectionError);
      return;
    }
    if (!sr_) {
      if (!consume_retry(now_ns)) return;
    } else if (attr_.timeout != 0 && now_ns >= sr_charged_ns_ &&
               now_ns - sr_charged_ns_ >= ack_timeout_ns(attr_.timeout)) {
      if (!consume_retry(now_ns)) return;
      sr_charged_ns_ = now_ns;
    }
    ++counters_.retries;
    rewound_without_progress_ = true;
    if (sr_) {
      if (rto_backoff_ < kMaxRtoBackoff) ++rto_backoff_;
      rtt_timing_ = false;
      // Everything unacknowledged counts as lost, SACKed or not: a resent
      // SACKed packet is a duplicate the responder answers with its
      // cumulative ACK, which is what went missing if nothing else did.
      for (auto& w : sack_bits_) w = 0;
      sacked_count_ = 0;
      in_recovery_ = true;
      recovery_psn_ = snd_max_psn_;
      hole_cursor_ = una_psn_;
      sack_high_ = snd_max_psn_;
      resend_marked_ = false;
    } else {
      rewind_to(una_psn_);
    }
    timer_base_ns_ = now_ns;
    ack_deadline_ns_ = rto_deadline_ns();
  }
}

void Qp::defer_timers(uint64_t stall_ns) {
  if (ack_deadline_ns_ == kNoDeadline) return;
  ack_deadline_ns_ =
      stall_ns < kNoDeadline - ack_deadline_ns_ ? ack_deadline_ns_ + stall_ns : kNoDeadline - 1;
  timer_base_ns_ += stall_ns;  // SR re-derives the deadline from it
  sr_charged_ns_ += stall_ns;
  rtt_sent_ns_ += stall_ns;  // an ACK that waited for our engine is not the path's RTT
}

void Qp::sr_read_evidence(uint32_t psn) {
  if (read_retry_marked_ &&
      wire::psn_ge(psn, wire::psn_add(read_retry_mark_psn_, kSrReorderPackets))) {
    read_retry_marked_ = false;
    rewound_without_progress_ = false;
  }
}

void Qp::sr_sack(uint64_t now_ns, uint32_t cum_psn, uint32_t sacked_psn) {
  (void)now_ns;
  (void)cum_psn;
  if (!wire::psn_in_range(sacked_psn, una_psn_, snd_max_psn_)) return;
  const uint32_t i = sacked_psn & (kSrWindow - 1);
  const uint64_t bit = 1ull << (i % 64);
  if ((sack_bits_[i / 64] & bit) == 0) ++sacked_count_;
  sack_bits_[i / 64] |= bit;
  const uint32_t high = wire::psn_next(sacked_psn);
  if (!in_recovery_) {
    in_recovery_ = true;
    recovery_psn_ = snd_max_psn_;
    hole_cursor_ = una_psn_;
    sack_high_ = high;
  } else {
    if (wire::psn_gt(high, sack_high_)) sack_high_ = high;
    if (resend_marked_ &&
        wire::psn_ge(sacked_psn, wire::psn_add(resend_mark_psn_, kSrReorderPackets))) {
      // Sent after every resend so far, and here: another pass over the holes left.
      resend_marked_ = false;
      hole_cursor_ = una_psn_;
    }
  }
}

}  // namespace conduit::transport
