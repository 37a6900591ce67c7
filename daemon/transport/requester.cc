// Requester: turns send WQEs into request packets (segmentation by PMTU,
// AckReq policy, send window, initiator READ depth) and rewinds for go-back-N.
// Also the fused transmit path (poll_tx_frame), which writes the common
// packets (ACK, single-packet SEND) straight into the frame.
#include <algorithm>
#include <cstring>

#include "transport/qp.h"
#include "wire/byte_order.h"
#include "wire/psn.h"

namespace conduit::transport {
namespace {

using wire::Opcode;

// Appends [offset, offset + len) of the WQE's scatter-gather list to out.payload.
void gather(const std::array<std::span<uint8_t>, kMaxSge>& seg, uint32_t num_sge, uint32_t offset,
            uint32_t len, TxPacket& out) {
  out.payload_bytes += len;
  if (num_sge == 1) {  // the common case: [offset, offset + len) lies in the one SGE
    if (len > 0) out.payload[out.payload_parts++] = seg[0].subspan(offset, len);
    return;
  }
  for (uint32_t i = 0; i < num_sge && len > 0; ++i) {
    const uint32_t sz = static_cast<uint32_t>(seg[i].size());
    if (offset >= sz) {
      offset -= sz;
      continue;
    }
    const uint32_t take = sz - offset < len ? sz - offset : len;
    out.payload[out.payload_parts++] = std::span<const uint8_t>(seg[i].data() + offset, take);
    len -= take;
    offset = 0;
  }
}

uint8_t op(Opcode o) { return static_cast<uint8_t>(o); }
constexpr uint32_t op_word(Opcode o) { return uint32_t{static_cast<uint8_t>(o)} << 24; }

// The per-call constants of writing SEND only frames (the frame stores may
// alias the template and the QP, so they are read once, before any).
struct SendFrameConsts {
  const wire::FrameTemplate& tmpl;
  size_t l2;
  // The template's fixed IPv4 sum: as it is (one frame), or for a run of
  // frames folded to 16 bits and byte-swapped once (ip_sum_be: a one's-
  // complement sum is the same in either byte order, so each frame's
  // checksum is summed with its total length as stored, with one fold).
  uint32_t ip_sum;
  bool ip_sum_be;
  bool ipv6;    // the template's headers are IPv6 (write_send_only6)
  uint32_t w1;  // BTH word 1 (dest QP) in wire byte order
};

[[gnu::always_inline]] inline SendFrameConsts send_frame_consts(const wire::FrameTemplate& tmpl,
                                                                uint32_t dest_qpn, bool run) {
  uint32_t sum = tmpl.ip_fixed_sum;
  if (run) {
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum = wire::to_be(static_cast<uint16_t>(sum));
  }
  return {tmpl, tmpl.l2_bytes, sum, run, tmpl.ipv6, wire::to_be(dest_qpn & wire::kPsnMask)};
}

// What build_request() + build_frame() of a one-packet SEND (SEND only, with
// or without immediate) take from its WQE, read before any frame byte is
// written: the frame stores may alias anything.
struct SendOnly {
  uint32_t w0 = 0;    // BTH word 0 (opcode, SE, pad count, P_Key), wire byte order
  uint32_t roce = 0;  // bytes from the BTH through the pad
  uint32_t imm = 0;
  bool has_imm = false;
  uint32_t len = 0;
  const uint8_t* src = nullptr;
};

[[gnu::always_inline]] inline SendOnly send_only(const SendWr& wr, const uint8_t* src,
                                                 uint32_t len) {
  SendOnly f;
  f.has_imm = wr.opcode == WrOpcode::kSendImm;
  const uint32_t pad = wire::pad_bytes_for(len);
  f.w0 = wire::to_be(op_word(f.has_imm ? Opcode::kSendOnlyImm : Opcode::kSendOnly) |
                     (wr.solicited ? 0x800000u : 0u) | pad << 20 | wire::kDefaultPkey);
  f.roce = wire::kBthBytes + (f.has_imm ? wire::kImmBytes : 0) + len + pad;
  f.imm = wr.imm;
  f.len = len;
  f.src = src;
  return f;
}

// The SEND only's BTH (PSN with AckReq), ImmDt, payload and zero pad at `p`.
[[gnu::always_inline]] inline void write_send_body(uint8_t* p, const SendFrameConsts& k,
                                                   const SendOnly& s, uint32_t psn) {
  std::memcpy(p, &s.w0, 4);
  std::memcpy(p + 4, &k.w1, 4);
  wire::put_be32(p + 8, 0x80000000u | psn);
  uint32_t hdr_bytes = wire::kBthBytes;
  if (s.has_imm) {
    wire::put_be32(p + wire::kBthBytes, s.imm);
    hdr_bytes += wire::kImmBytes;
  }
  wire::copy_payload(p + hdr_bytes, s.src, s.len);
  std::memset(p + hdr_bytes + s.len, 0, 4);  // pad (the ICRC overwrites the rest)
}

// write_send_only() for an IPv6 template, out of line (the IPv4 path stays
// as it was): begin_frame()'s IPv6 headers and lengths, the body, the ICRC.
// (k and s by value: their copies are made in the caller's IPv6 arm only,
// so the IPv4 arm keeps its own in registers.)
template <bool kIcrc>
[[gnu::noinline]] wire::BuildResult write_send_only6(std::span<uint8_t> out, SendFrameConsts k,
                                                     SendOnly s, uint32_t psn) {
  wire::BuildStatus st;
  uint8_t* p = wire::begin_frame_ipv6(out, k.tmpl, s.roce, st);
  if (p == nullptr) return {st, 0};
  write_send_body(p, k, s, psn);
  const size_t frame_len = wire::frame_bytes_for(k.tmpl, s.roce);
  if constexpr (kIcrc) wire::finish_frame_icrc_words(k.tmpl, out.data(), frame_len);
  return {wire::BuildStatus::kOk, frame_len};
}

// build_frame() of that SEND only, with begin_frame() and
// finish_frame_icrc_words() on the constants in hand: template headers,
// lengths, IPv4 checksum, BTH (PSN with AckReq), ImmDt, payload, pad, ICRC.
// The IPv4 length cannot exceed 65535: the payload is at most a PMTU (4096).
// On a build error nothing meaningful is in `out`. kIpv6 (the caller's
// k.ipv6, decided outside its loops): write_send_only6.
// kIcrc false: everything but the ICRC (send_run adds the ICRCs of its run after all are written).
// words: the template's 48 bytes in hand (an IPv4 template, whose copy_bytes is
// 48, and a caller that made sure every frame is at least that long).
template <bool kIcrc = true, bool kIpv6 = false>
[[gnu::always_inline]] inline wire::BuildResult write_send_only(
    std::span<uint8_t> out, const SendFrameConsts& k, const SendOnly& s, uint32_t psn,
    const wire::TemplateWords48* words = nullptr) {
  if constexpr (kIpv6) return write_send_only6<kIcrc>(out, k, s, psn);
  constexpr uint32_t kIpUdp = wire::kIpv4HeaderBytes + wire::kUdpHeaderBytes;
  const uint32_t ip_total = kIpUdp + s.roce + wire::kIcrcBytes;
  const size_t frame_len = k.l2 + ip_total;
  // The whole template is copied: its bytes after the UDP header land where
  // the BTH goes.
  if (out.size() < frame_len || (words == nullptr && out.size() < k.tmpl.copy_bytes)) {
    return {wire::BuildStatus::kBufferTooSmall, 0};
  }
  uint8_t* f = out.data();
  if (words != nullptr) {
    words->store(f);
  } else {
    wire::copy_template_bytes(f, k.tmpl);
  }
  uint8_t* ip = f + k.l2;
  const uint16_t total_be = wire::to_be(static_cast<uint16_t>(ip_total));
  std::memcpy(ip + 2, &total_be, 2);
  if (k.ip_sum_be) {
    uint32_t sum = k.ip_sum + total_be;  // both at most 0xFFFF
    sum = (sum & 0xFFFF) + (sum >> 16);
    const auto csum = static_cast<uint16_t>(~sum);
    std::memcpy(ip + 10, &csum, 2);
  } else {
    uint32_t sum = k.ip_sum + ip_total;
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum = (sum & 0xFFFF) + (sum >> 16);
    wire::put_be16(ip + 10, static_cast<uint16_t>(~sum));
  }
  wire::put_be16(ip + wire::kIpv4HeaderBytes + 4,
                 static_cast<uint16_t>(ip_total - wire::kIpv4HeaderBytes));
  write_send_body(ip + kIpUdp, k, s, psn);
  // 28 + 12 (+ 4) + payload + pad bytes: whole words, at least 40.
  if constexpr (kIcrc) {
    wire::icrc_store(wire::icrc_ipv4_datagram_words(ip, ip_total - wire::kIcrcBytes),
                     f + frame_len - wire::kIcrcBytes);
  }
  return {wire::BuildStatus::kOk, frame_len};
}

}  // namespace

bool Qp::build_request(SendWqe& w, uint32_t psn, TxPacket& out) {
  wire::RoceHeader& h = out.hdr;
  // Only the BTH and the extension headers of the chosen opcode are encoded
  // (the other RoceHeader members are ignored on build): set just those.
  h.bth = wire::Bth{};
  h.bth.dest_qp = attr_.dest_qpn;
  h.bth.psn = psn;
  const auto k = static_cast<uint32_t>(wire::psn_diff(psn, w.first_psn));
  out.payload_parts = 0;
  out.payload_bytes = 0;

  if (is_atomic(w.wr.opcode)) {
    const bool cas = w.wr.opcode == WrOpcode::kCmpSwap;
    h.bth.opcode = op(cas ? Opcode::kCompareSwap : Opcode::kFetchAdd);
    h.bth.ack_req = true;
    // AtomicETH: SwapAddData is the swap value (CmpSwap) or the addend (FetchAdd).
    h.atomic = wire::AtomicEth{w.wr.remote_addr, w.wr.rkey, cas ? w.wr.swap : w.wr.compare_add,
                               cas ? w.wr.compare_add : 0};
    pkts_since_ack_req_ = 0;
    return true;
  }
  if (w.wr.opcode == WrOpcode::kRead) {
    const uint32_t offset = k << pmtu_shift_;
    // A resent READ asks only for what is still missing (as rxe does).
    h.bth.opcode = op(Opcode::kReadRequest);
    h.bth.ack_req = true;
    h.reth = wire::Reth{w.wr.remote_addr + offset, w.wr.rkey, w.len_bytes - offset};
    pkts_since_ack_req_ = 0;
    return true;
  }
  // A SEND/WRITE's data: its SGEs resolved again if a region changed since (its region may
  // have been deregistered).
  if (w.epoch != mrs_.epoch() && !send_memory_current(w)) [[unlikely]] {
    return false;
  }
  const uint32_t offset = k * seg_bytes_;
  const uint32_t remaining = w.len_bytes - offset;
  const bool first = offset == 0;
  const bool last = remaining <= seg_bytes_;
  const uint32_t n = last ? remaining : seg_bytes_;
  const bool imm = w.wr.opcode == WrOpcode::kSendImm || w.wr.opcode == WrOpcode::kWriteImm;
  if (w.wr.opcode == WrOpcode::kSend || w.wr.opcode == WrOpcode::kSendImm) {
    if (first && last) {
      h.bth.opcode = op(imm ? Opcode::kSendOnlyImm : Opcode::kSendOnly);
    } else if (first) {
      h.bth.opcode = op(Opcode::kSendFirst);
    } else if (last) {
      h.bth.opcode = op(imm ? Opcode::kSendLastImm : Opcode::kSendLast);
    } else {
      h.bth.opcode = op(Opcode::kSendMiddle);
    }
  } else {
    if (first && last) {
      h.bth.opcode = op(imm ? Opcode::kWriteOnlyImm : Opcode::kWriteOnly);
    } else if (first) {
      h.bth.opcode = op(Opcode::kWriteFirst);
    } else if (last) {
      h.bth.opcode = op(imm ? Opcode::kWriteLastImm : Opcode::kWriteLast);
    } else {
      h.bth.opcode = op(Opcode::kWriteMiddle);
    }
    if (first) h.reth = wire::Reth{w.wr.remote_addr, w.wr.rkey, w.len_bytes};
  }
  if (last) {
    h.imm = w.wr.imm;
    // SE means something on a SEND's or a WRITE with immediate's last packet only (what
    // completes a receive); rxe sets it nowhere else.
    h.bth.solicited = w.wr.solicited && (imm || w.wr.opcode == WrOpcode::kSend);
  }
  ++pkts_since_ack_req_;
  if (last || pkts_since_ack_req_ >= config_.ack_req_every_packets) {
    h.bth.ack_req = true;
    pkts_since_ack_req_ = 0;
  }
  if (sr_) {
    SrPlacement p;
    p.va = w.wr.remote_addr;
    p.rkey = w.wr.rkey;
    p.msg_len_bytes = w.len_bytes;
    p.msg_first_psn = w.first_psn;
    p.recv_seq = w.recv_seq;
    p.encode(sr_hdr_buf_.data());
    out.payload[0] = std::span<const uint8_t>(sr_hdr_buf_);
    out.payload_parts = 1;
    out.payload_bytes = SrPlacement::kBytes;
  }
  gather(w.seg, w.wr.num_sge, offset, n, out);
  return true;
}

void Qp::request_memory_gone(const SendWqe& w) {
  if (&w == &sq_at(sq_head_)) fail(WcStatus::kLocalProtectionError);
}

uint64_t Qp::sr_base_rto_ns() const {
  const auto in_flight = static_cast<uint32_t>(wire::psn_diff(snd_max_psn_, una_psn_));
  const uint64_t rto =
      in_flight <= config_.rto_low_max_packets ? config_.rto_low_ns : config_.rto_high_ns;
  // IRN's fixed RTOs assume a NIC's steady RTT. A peer whose engine shares its core sees RTTs
  // of milliseconds now and then; RTO-high fired on every such stall and resent the window.
  return srtt_ns_ != 0 ? std::max(rto, srtt_ns_ + 4 * rttvar_ns_) : rto;
}

uint64_t Qp::retransmit_timeout_ns() const {
  const uint64_t ack_timeout = ack_timeout_ns(attr_.timeout);
  if (!sr_) return ack_timeout;
  const uint64_t base = sr_base_rto_ns();
  // Backed off up to the local ACK timeout (which never lowers the base).
  const uint64_t cap = std::max(base, ack_timeout != 0 ? ack_timeout : base << kMaxRtoBackoff);
  uint64_t rto = base;
  for (uint8_t i = 0; i < rto_backoff_ && rto < cap; ++i) rto *= 2;
  return std::min(rto, cap);
}

uint64_t Qp::rto_deadline_ns() const {
  const uint64_t d = timer_base_ns_ + retransmit_timeout_ns();
  if (!sr_ || attr_.timeout == 0) return d;
  // A backed-off RTO ends where the retry budget is charged next at the latest.
  return std::min(d, std::max(sr_charged_ns_ + ack_timeout_ns(attr_.timeout),
                              timer_base_ns_ + sr_base_rto_ns()));
}

void Qp::after_send(uint32_t psn) {
  if (wire::psn_lt(psn, snd_max_psn_)) {
    ++counters_.tx_retransmits;
    rtt_timing_ = false;  // Karn: an ACK now may answer either transmission
  }
}

// Selective repeat: a READ re-request or a hole to resend, before new data.
bool Qp::sr_retransmit_poll(TxPacket& out) {
  if (read_retry_pending_) {
    read_retry_pending_ = false;
    SendWqe* w = wqe_for_psn(read_retry_psn_);
    if (w != nullptr && expects_response(w->wr.opcode) && wire::psn_ge(read_retry_psn_, una_psn_)) {
      (void)build_request(*w, read_retry_psn_, out);  // a request: no local memory read
      after_send(read_retry_psn_);
      read_retry_mark_psn_ = snd_max_psn_;
      read_retry_marked_ = true;
      return true;
    }
  }
  if (!in_recovery_) return false;
  for (uint32_t scanned = 0; scanned < kSrWindow && wire::psn_lt(hole_cursor_, sack_high_);
       ++scanned) {
    if (wire::psn_lt(hole_cursor_, una_psn_)) hole_cursor_ = una_psn_;
    if (!wire::psn_lt(hole_cursor_, sack_high_)) break;
    const uint32_t psn = hole_cursor_;
    if (held_nak_ && !wire::psn_lt(psn, held_nak_psn_)) break;  // the peer is in ERR
    if (sacked(psn)) {
      hole_cursor_ = wire::psn_next(psn);
      continue;
    }
    SendWqe* w = wqe_for_psn(psn);
    if (w == nullptr) {
      hole_cursor_ = wire::psn_next(psn);
      continue;
    }
    if (expects_response(w->wr.opcode)) {
      // Re-request the READ from its first missing response; skip its range.
      hole_cursor_ = wire::psn_add(w->first_psn, w->npkts);
    } else {
      hole_cursor_ = wire::psn_next(psn);
    }
    if (!build_request(*w, psn, out)) [[unlikely]] {
      // Behind the head: the pass stops at it (each poll tries it again) until it is the head
      // and fails. Passed, it waited for the next RTO, which may spend the last retry first.
      request_memory_gone(*w);
      hole_cursor_ = psn;
      return false;
    }
    after_send(psn);
    resend_mark_psn_ = snd_max_psn_;
    resend_marked_ = true;
    return true;
  }
  return false;
}

bool Qp::requester_poll(uint64_t now_ns, TxPacket& out) {
  if (state_ != QpState::kRts && state_ != QpState::kSqd) return false;
  if (rnr_deadline_ns_ != kNoDeadline) return false;  // waiting out an RNR NAK
  if (sr_ && sr_retransmit_poll(out)) {
    if (ack_deadline_ns_ == kNoDeadline) {
      timer_base_ns_ = sr_charged_ns_ = now_ns;
      ack_deadline_ns_ = rto_deadline_ns();
    }
    return true;
  }
  SendWqe* w = requester_next();
  if (w == nullptr) return false;
  const uint32_t psn = cur_psn_;
  if (!build_request(*w, psn, out)) [[unlikely]] {
    request_memory_gone(*w);
    return false;
  }
  if (request_sent(now_ns, *w, psn)) {
    out.hdr.bth.ack_req = true;
    pkts_since_ack_req_ = 0;
  }
  return true;
}

Qp::SendWqe* Qp::requester_next() {
  if (cur_wqe_ == sq_tail_) return nullptr;
  const auto outstanding = static_cast<uint32_t>(wire::psn_diff(cur_psn_, una_psn_));
  if (outstanding >= tx_window_packets_) {
    // Full, or closed while a fatal NAK is held: then what lies before its PSN still goes
    // (the READ or atomic asked for again releases the NAK); the peer, in ERR, drops the rest.
    if (!held_nak_ || outstanding >= config_.window_packets ||
        !wire::psn_lt(cur_psn_, held_nak_psn_)) {
      return nullptr;
    }
  }
  SendWqe& w = sq_at(cur_wqe_);
  if (sr_ && outstanding != 0) {
    // The SACK bitmap must cover every outstanding PSN, and IRN's BDP cap.
    const uint32_t span =
        expects_response(w.wr.opcode)
            ? static_cast<uint32_t>(wire::psn_diff(wire::psn_add(w.first_psn, w.npkts), una_psn_))
            : outstanding + 1;
    if (span > kSrWindow) return nullptr;
    // BDP cap on the request data we have in flight. The PSNs of READ
    // responses still to come are data flowing the other way, and SACKed
    // packets have arrived: neither is counted (RFC 6675's pipe). Counting
    // SACKed ones stalled new data behind a hole whose resend was lost, so
    // no SACK could show the loss before the RTO.
    uint32_t read_pkts = 0;
    for (uint32_t i = sq_head_; i != cur_wqe_; ++i) {
      const SendWqe& r = sq_at(i);
      if (!expects_response(r.wr.opcode)) continue;
      const uint32_t end = wire::psn_add(r.first_psn, r.npkts);
      const uint32_t from = wire::psn_gt(una_psn_, r.first_psn) ? una_psn_ : r.first_psn;
      if (wire::psn_lt(from, end)) read_pkts += static_cast<uint32_t>(wire::psn_diff(end, from));
    }
    const uint32_t bdp_pkts = std::max(1u, config_.sr_bdp_bytes >> pmtu_shift_);
    const uint32_t not_in_flight = read_pkts + sacked_count_;
    if (outstanding - std::min(outstanding, not_in_flight) >= bdp_pkts) return nullptr;
  }
  const bool fresh_wqe = cur_psn_ == w.first_psn && wire::psn_ge(cur_psn_, snd_max_psn_);
  // SQD: finish what was started, start nothing new.
  if (fresh_wqe && state_ == QpState::kSqd) return nullptr;
  if (expects_response(w.wr.opcode) && fresh_wqe && reads_started_ >= attr_.max_rd_atomic)
    return nullptr;
  return &w;
}

bool Qp::request_sent(uint64_t now_ns, SendWqe& w, uint32_t psn) {
  after_send(psn);
  // A READ's or atomic's answer comes after its data, however long that takes: not an RTT.
  if (sr_ && !expects_response(w.wr.opcode) && !wire::psn_lt(psn, snd_max_psn_)) {
    rtt_on_send(now_ns, psn);
  }
  const uint32_t end_psn = wire::psn_add(w.first_psn, w.npkts);
  cur_psn_ = expects_response(w.wr.opcode) ? end_psn : wire::psn_next(psn);
  if (cur_psn_ == end_psn) {
    if (expects_response(w.wr.opcode)) ++reads_started_;
    ++cur_wqe_;
  }
  if (wire::psn_gt(cur_psn_, snd_max_psn_)) snd_max_psn_ = cur_psn_;
  if (ack_deadline_ns_ == kNoDeadline && (sr_ || attr_.timeout != 0)) {
    timer_base_ns_ = sr_charged_ns_ = now_ns;
    ack_deadline_ns_ = rto_deadline_ns();
  } else if (sr_) {
    // RTO-low or RTO-high depends on what is in flight now.
    ack_deadline_ns_ = rto_deadline_ns();
  }
  // The packet that fills the window asks for an ACK, or the window would
  // only reopen through the ACK timer.
  return static_cast<uint32_t>(wire::psn_diff(cur_psn_, una_psn_)) >= config_.window_packets;
}

void Qp::recount_reads_started() {
  reads_started_ = 0;
  for (uint32_t i = sq_head_; i != cur_wqe_; ++i) {
    if (expects_response(sq_at(i).wr.opcode)) ++reads_started_;
  }
}

void Qp::rewind_to(uint32_t psn) {
  uint32_t i = sq_head_;
  for (; i != sq_tail_; ++i) {
    const SendWqe& w = sq_at(i);
    if (wire::psn_lt(psn, wire::psn_add(w.first_psn, w.npkts))) break;
  }
  cur_wqe_ = i;
  cur_psn_ = psn;
  // A rewound READ restarts at a response boundary inside it; other WQEs at
  // the packet with that PSN. Before the WQE's start means its first packet.
  if (i != sq_tail_ && wire::psn_lt(psn, sq_at(i).first_psn)) cur_psn_ = sq_at(i).first_psn;
  pkts_since_ack_req_ = 0;
  recount_reads_started();
}

// The general path: poll_tx, then build_frame. Out of line, so that the
// direct paths below need no room for a TxPacket (nor its spills).
[[gnu::noinline]] wire::BuildResult Qp::poll_tx_frame_general(uint64_t now_ns,
                                                              const wire::FrameTemplate& tmpl,
                                                              std::span<uint8_t> out) {
  TxPacket pkt;
  if (!poll_tx(now_ns, pkt)) return {};
  return wire::build_frame(
      out, tmpl, pkt.hdr,
      std::span<const std::span<const uint8_t>>(pkt.payload.data(), pkt.payload_parts));
}

// The general path (poll_tx, then build_frame) for everything else; the
// direct paths repeat its checks and share its bookkeeping (requester_next,
// request_sent). Flattened: those are inlined here.
[[gnu::flatten]] wire::BuildResult Qp::poll_tx_frame(uint64_t now_ns,
                                                     const wire::FrameTemplate& tmpl,
                                                     std::span<uint8_t> out) {
  if (state_ != QpState::kReset && state_ != QpState::kInit) {
    if (resp_head_ != resp_tail_) {
      const Response& item = resp_fifo_[resp_head_ & (kRespFifoSlots - 1)];
      if (item.kind == RespItem::kAck) {
        // responder_poll()'s ACK/NAK: BTH and AETH.
        ++resp_head_;
        ++counters_.tx_packets;
        wire::BuildStatus st;
        uint8_t* p = wire::begin_frame(out, tmpl, wire::kBthBytes + wire::kAethBytes, st);
        if (p == nullptr) return {st, 0};
        wire::put_be32(p, op_word(Opcode::kAcknowledge) | wire::kDefaultPkey);
        wire::put_be32(p + 4, attr_.dest_qpn & wire::kPsnMask);
        wire::put_be32(p + 8, item.psn & wire::kPsnMask);
        wire::put_be32(p + 12, uint32_t{item.aeth.syndrome} << 24 | (item.aeth.msn & 0xFFFFFF));
        const size_t len = wire::frame_bytes_for(tmpl, wire::kBthBytes + wire::kAethBytes);
        wire::finish_frame_icrc_words(tmpl, out.data(), len);  // a 44-byte datagram
        return {wire::BuildStatus::kOk, len};
      }
    } else if (state_ == QpState::kRts && !sr_ && rnr_deadline_ns_ == kNoDeadline) {
      // requester_poll() without SR: nothing to resend out of order, so the
      // next packet is requester_next()'s. In RTS, for a SEND, only its queue
      // and window checks can refuse it; anything else (a READ at its depth
      // limit, or a SEND resolved before a region changed, included) takes the
      // general path, which asks requester_next() and resolves it again.
      if (cur_wqe_ == sq_tail_) return {};
      if (static_cast<uint32_t>(wire::psn_diff(cur_psn_, una_psn_)) >= tx_window_packets_) {
        // Full; or closed while a fatal NAK is held, and requester_next() decides.
        return held_nak_ ? poll_tx_frame_general(now_ns, tmpl, out) : wire::BuildResult{};
      }
      SendWqe* w = &sq_at(cur_wqe_);
      const WrOpcode op = w->wr.opcode;
      if (w->npkts == 1 && w->wr.num_sge <= 1 &&
          (op == WrOpcode::kSend || op == WrOpcode::kSendImm) && w->epoch == mrs_.epoch()) {
        // build_request() of a SEND only: the last packet, so it asks for an ACK.
        const uint32_t psn = cur_psn_;
        const SendOnly f = send_only(w->wr, w->seg[0].data(), w->len_bytes);
        const SendFrameConsts k = send_frame_consts(tmpl, attr_.dest_qpn, false);
        // request_sent() for a one-packet SEND, before the frame bytes are
        // written (stores through them may alias anything).
        pkts_since_ack_req_ = 0;
        request_sent(now_ns, *w, psn);  // ack_req is set already
        ++counters_.tx_packets;
        // As poll_tx() + a failed build: the packet counts as sent.
        return k.ipv6 ? write_send_only<true, true>(out, k, f, psn)
                      : write_send_only(out, k, f, psn);
      }
    }
  }
  return poll_tx_frame_general(now_ns, tmpl, out);
}

size_t Qp::poll_tx_frames(uint64_t now_ns, const wire::FrameTemplate& tmpl,
                          std::span<const std::span<uint8_t>> bufs, wire::BuildResult* results) {
  const size_t n = bufs.size();
  size_t i = 0;
  while (i < n) {
    // A run only for two packets or more: its set-up does not pay for one.
    if (resp_head_ == resp_tail_ && state_ == QpState::kRts && !sr_ &&
        rnr_deadline_ns_ == kNoDeadline && n - i >= 2 && sq_tail_ - cur_wqe_ >= 2) {
      i += send_run(now_ns, tmpl, bufs.subspan(i), results + i);
      if (i == n) break;
    }
    // Anything else (an ACK, a READ, a multi-packet WR, ...), or nothing.
    const wire::BuildResult r = poll_tx_frame(now_ns, tmpl, bufs[i]);
    if (r.ok() && r.len_bytes == 0) break;
    results[i++] = r;
  }
  return i;
}

// poll_tx_frame()'s SEND only path, once per buffer, with request_sent()'s
// bookkeeping done once for the run (the frame stores may alias any member,
// so members would be reloaded after each frame). The run is as long as the
// buffers, the queue and the window allow, up to the first WR that is not a
// SEND only. Each of its WQEs is one PSN, and the cursor's WQE starts at the
// cursor's PSN (request_sent(), rewind_to() and complete_head() keep it so),
// so the k-th frame has PSN cur_psn_ + k and the cursor moves one WQE per
// frame.
size_t Qp::send_run(uint64_t now_ns, const wire::FrameTemplate& tmpl,
                    std::span<const std::span<uint8_t>> bufs, wire::BuildResult* results) {
  const uint32_t cur = cur_wqe_;
  const uint32_t psn0 = cur_psn_;
  const auto outstanding = static_cast<uint32_t>(wire::psn_diff(psn0, una_psn_));
  if (outstanding >= tx_window_packets_) return 0;  // or a fatal NAK held: the general path
  size_t n = std::min<size_t>(
      {bufs.size(), size_t{sq_tail_ - cur}, size_t{tx_window_packets_ - outstanding}});
  const SendWqe* const sq = sq_.data();
  const uint32_t mask = sq_mask_;
  // A WQE resolved in another epoch takes the general path, which resolves it
  // again: the run ends before it. Once every WQE in the queue is of the
  // current epoch (sq_epoch_), no WQE's epoch is compared.
  const uint64_t epoch = mrs_.epoch();
  if (sq_epoch_ != epoch) [[unlikely]] {
    n = sq_current_run(cur, n, epoch);
    if (n == 0) return 0;
  }
  const SendFrameConsts k = send_frame_consts(tmpl, attr_.dest_qpn, true);
  size_t i = 0;
  // One pass per stretch of the send queue that does not wrap; the family
  // chosen once, outside the loops (IPv6's writer is a call). An IPv4
  // template's 48 bytes are read once (kWords) when every frame of the run is
  // longer: the shortest, an empty SEND, is its headers, BTH and ICRC.
  const auto write_run = [&]<bool kIpv6, bool kWords>() {
    const wire::TemplateWords48 words(tmpl);
    for (;;) {
      const auto at = static_cast<uint32_t>(i);
      const size_t end = i + std::min<size_t>(n - i, ring_run(cur + at, mask));
      const SendWqe* w = sq + ((cur + at) & mask);
      for (; i < end; ++i, ++w) {
        const WrOpcode op = w->wr.opcode;
        if (w->npkts != 1 || w->wr.num_sge > 1 ||
            (op != WrOpcode::kSend && op != WrOpcode::kSendImm)) {
          break;
        }
        const SendOnly f = send_only(w->wr, w->seg[0].data(), w->len_bytes);
        // As poll_tx_frame(): a packet whose build fails counts as sent.
        results[i] = write_send_only<false, kIpv6>(bufs[i], k, f,
                                                   wire::psn_add(psn0, static_cast<uint32_t>(i)),
                                                   kWords ? &words : nullptr);
      }
      if (i != end || i == n) break;
    }
  };
  constexpr size_t kShortestFrame =
      wire::kIpv4HeaderBytes + wire::kUdpHeaderBytes + wire::kBthBytes + wire::kIcrcBytes;
  if (k.ipv6) [[unlikely]] {
    write_run.template operator()<true, false>();
  } else if (tmpl.copy_bytes == wire::TemplateWords48::kBytes &&
             k.l2 + kShortestFrame >= wire::TemplateWords48::kBytes) [[likely]] {
    write_run.template operator()<false, true>();
  } else {
    write_run.template operator()<false, false>();
  }
  // The ICRCs in a pass of their own: no call inside the loop above, whose
  // values then stay in registers. Each frame is a datagram of whole words.
  // The family once, outside the loop; buffers and results by pointer.
  const std::span<uint8_t>* b = bufs.data();
  const wire::BuildResult* const results_end = results + i;
  if (k.ipv6) [[unlikely]] {
    for (const wire::BuildResult* r = results; r != results_end; ++r, ++b) {
      if (r->ok()) wire::finish_frame_icrc_words(tmpl, b->data(), r->len_bytes);
    }
  } else {
    const size_t l2 = k.l2;
    const size_t trailer = l2 + wire::kIcrcBytes;  // the frame's bytes outside the datagram
    for (const wire::BuildResult* r = results; r != results_end; ++r, ++b) {
      if (!r->ok()) [[unlikely]] {
        continue;
      }
      uint8_t* const ip = b->data() + l2;
      const size_t len = r->len_bytes - trailer;
      wire::icrc_store(wire::icrc_ipv4_datagram_words(ip, len), ip + len);
    }
  }
  if (i != 0) {
    // request_sent() of each: PSNs below snd_max_psn_ are retransmissions
    // (cur_psn_ never passes it), snd_max_psn_ moves to the end if that is
    // past it, and the first packet with the timer stopped starts it
    // (timeout 0, wait forever, never does).
    const auto count = static_cast<uint32_t>(i);
    const uint32_t end = wire::psn_add(psn0, count);
    const int32_t behind = wire::psn_diff(snd_max_psn_, psn0);
    if (behind > 0) counters_.tx_retransmits += std::min(static_cast<uint32_t>(behind), count);
    if (wire::psn_gt(end, snd_max_psn_)) snd_max_psn_ = end;
    cur_wqe_ = cur + count;
    cur_psn_ = end;
    pkts_since_ack_req_ = 0;
    counters_.tx_packets += count;
    if (ack_deadline_ns_ == kNoDeadline && attr_.timeout != 0) {
      timer_base_ns_ = sr_charged_ns_ = now_ns;
      ack_deadline_ns_ = now_ns + retransmit_timeout_ns();
    }
  }
  return i;
}

// Out of line: taken once after each change of the regions (and while a WQE
// of an earlier epoch is still queued). At most the queue's depth.
[[gnu::noinline]] size_t Qp::sq_current_run(uint32_t cur, size_t n, uint64_t epoch) {
  const uint32_t head = sq_head_;
  const uint32_t at_cur = cur - head;
  size_t run = n;
  bool all = true;
  for (uint32_t i = head; i != sq_tail_; ++i) {
    if (sq_at(i).epoch == epoch) continue;
    all = false;
    const uint32_t at = i - head;
    if (at >= at_cur) {  // the first from cur on: the run ends before it
      run = std::min<size_t>(run, at - at_cur);
      break;
    }
  }
  if (all) sq_epoch_ = epoch;
  return run;
}

}  // namespace conduit::transport
