// An RC queue pair: requester, responder and completer of one connection.
//
// Pure protocol logic for the engine's poll loop. Time is passed in; packets
// to send, completions and the next timer deadline are pulled out. Nothing
// here allocates after construction, throws, logs or blocks. One engine
// thread owns a Qp; it is not thread-safe.
//
// Engine loop per QP:
//   qp.post_send(wr) / qp.post_recv(wr)      work requests from the client
//   qp.on_packet(now, hdr, payload)          every parsed RX packet for this QP
//   while (pacer allows && qp.poll_tx(now, pkt)) build_frame(pkt) and send
//   n = qp.poll_cq(span)                     completions for the client
//   if (now >= qp.next_deadline_ns()) qp.on_timer(now)
// (daemon/engine makes the per-burst forms of the first three: post_send /
// post_recv of a chain, on_packets with a view per packet, poll_tx_frames
// into a burst of frame buffers.)
//
// Selective repeat (QpAttr::selective_repeat, conduit peers only). Go-back-N
// is the default and what a verbs peer gets. With SR:
//  - Every SEND/RDMA WRITE packet's payload starts with a 24-byte placement
//    header (SrPlacement below, big-endian): message VA and rkey (WRITE),
//    message length, the message's first PSN and its receive sequence number
//    (SEND and WRITE with immediate: which receive WQE it consumes). Each
//    packet then carries PMTU - 24 data bytes, so the responder can place any
//    packet on its own: offset = (PSN - first PSN) * (PMTU - 24). Opcodes and
//    RETH/ImmDt stay as in RC, so tshark still decodes the packets.
//  - The responder accepts request packets up to kSrWindow PSNs ahead of
//    ePSN, places them, and answers each out-of-order one with a NAK
//    (sequence error) whose BTH PSN is ePSN (the cumulative ACK) and whose
//    AETH MSN field carries the PSN of the packet that arrived (the SACK).
//    Completions are still delivered in PSN order, as ePSN passes them.
//    READ requests are only accepted in order, and so is a request that fails a
//    check: ahead of ePSN it is dropped, not NAKed (a fatal NAK for PSN p says every
//    request before p was executed), and NAKed when it is resent in order.
//  - The requester keeps a SACK bitmap; on the first SACK it enters
//    recovery and resends only the holes below the highest SACKed PSN
//    before any new data, until the cumulative ACK passes the PSN that was
//    next at entry. One timer: RTO-low while <= rto_low_max_packets are in
//    flight, RTO-high otherwise, or the measured RTT's RTO (RFC 6298:
//    SRTT + 4 RTTVAR, Karn's rule) when that is longer; doubled on each
//    expiry without progress (at most the local ACK timeout); on expiry
//    every unacknowledged PSN is resent (SACK bits are dropped: a resent
//    SACKed packet draws the cumulative ACK). New request packets in flight
//    are capped at sr_bdp_bytes / PMTU and at kSrWindow PSNs. A SEND/WRITE
//    WR may have at most kMaxSge - 1 SGEs (the header takes one gather slot).
//  - READ responses are still taken in order; a gap in them re-requests the
//    READ from the first missing response only (not what follows it).
//
// The roles live in separate files, as in rxe: requester.cc (builds request
// packets), responder.cc (handles requests, emits ACK/NAK/READ responses),
// completer.cc (handles responses, timers, retries, completions). qp.cc has
// state changes, posting and the completion queue.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "transport/memory_region.h"
#include "transport/qp_attr.h"
#include "transport/tx_packet.h"
#include "transport/work_request.h"
#include "wire/frame.h"
#include "wire/roce_header.h"

namespace conduit::transport {

enum class Status : uint8_t {
  kOk,
  kInvalidState,       // not allowed in the QP's current state
  kInvalidTransition,  // modify: no such state transition
  kMissingAttr,        // modify: a required attribute is not in the mask
  kInvalidAttr,        // modify: an attribute out of range or not allowed here
  kQueueFull,          // SQ, RQ or the completion queue has no room
  kInvalidSge,         // post: an SGE's key, bounds or access is wrong
  kInvalidWr,          // post: bad opcode, too many SGEs, length too big
};

const char* status_name(Status s);

// What on_packet did with a packet. Everything but kAccepted is counted.
enum class RxResult : uint8_t {
  kAccepted,
  kDuplicate,      // behind the expected PSN: re-ACKed or READ replayed
  kOutOfSequence,  // ahead of the expected PSN: NAKed (once per gap) and dropped
  kDropped,        // see QpCounters for the reason
};

struct QpCounters {
  uint64_t tx_packets = 0;
  uint64_t tx_retransmits = 0;  // request packets sent again
  uint64_t rx_packets = 0;
  uint64_t rx_duplicates = 0;
  uint64_t rx_out_of_sequence = 0;
  uint64_t drop_wrong_qp = 0;
  uint64_t drop_state = 0;  // arrived in RESET/INIT/ERR or a role not active
  // Unknown opcode or CNP; a request with an RC opcode we do not implement, in sequence, is
  // also NAKed (Invalid Request).
  uint64_t drop_bad_opcode = 0;
  // Payload length impossible for the opcode/PMTU; a request in sequence is also NAKed
  // (Invalid Request).
  uint64_t drop_bad_length = 0;
  uint64_t drop_stale_response = 0;       // ACK/NAK/READ response for nothing outstanding
  uint64_t drop_response_queue_full = 0;  // duplicate READ/ACK with no room to answer
  uint64_t naks_sent = 0;
  uint64_t rnr_naks_sent = 0;
  uint64_t naks_received = 0;
  uint64_t rnr_naks_received = 0;
  uint64_t timeouts = 0;
  uint64_t retries = 0;  // go-back-N rewinds
};

// Why a QP went to ERR by itself, for its owner's log. kNone: it did not (or its owner moved it
// there with modify).
struct QpError {
  enum class Side : uint8_t { kNone, kRequester, kResponder };
  Side side = Side::kNone;
  WcStatus status = WcStatus::kSuccess;                // requester: its oldest WR's completion
  wire::NakCode nak = wire::NakCode::kInvalidRequest;  // responder: the NAK sent to the peer
  uint32_t psn = 0;  // requester: the oldest unacknowledged PSN; responder: the request's
};

// Per-packet placement data in selective-repeat mode (start of the payload).
struct SrPlacement {
  static constexpr uint32_t kBytes = 24;
  uint64_t va = 0;  // WRITE: the message's remote address
  uint32_t rkey = 0;
  uint32_t msg_len_bytes = 0;
  uint32_t msg_first_psn = 0;
  uint32_t recv_seq = 0;  // SEND / WRITE with immediate: receive WQE number

  void encode(uint8_t* out) const;
  static SrPlacement decode(const uint8_t* in);
};

class Qp {
 public:
  static constexpr uint64_t kNoDeadline = std::numeric_limits<uint64_t>::max();
  // Selective repeat: PSNs tracked beyond the cumulative ACK, on both sides.
  static constexpr uint32_t kSrWindow = 1024;
  // SR: how many later packets must arrive before a resent hole counts as lost again.
  static constexpr uint32_t kSrReorderPackets = 3;
  // SR: RTO doublings without progress at most (when the local ACK timeout does not cap it).
  static constexpr uint8_t kMaxRtoBackoff = 10;

  // `mrs` must outlive the Qp. Allocates the queues (setup time only).
  Qp(const QpConfig& config, MemoryRegions& mrs);

  // Verbs-like modify: only the attributes in `mask` are read. Rejects
  // transitions the verbs state diagram does not have, missing required
  // attributes and out-of-range values, and then changes nothing.
  Status modify(const QpAttr& attr, uint32_t mask);
  QpState state() const { return state_; }
  const QpAttr& attr() const { return attr_; }
  const QpConfig& config() const { return config_; }
  uint32_t qpn() const { return config_.qpn; }

  // Post a send WR (RTS or SQD; in ERR it completes at once with a flush
  // error). SGEs are resolved now: a bad one refuses the post. The WR is
  // copied; the memory its SGEs name must stay registered until it completes.
  // They are resolved again before that memory is used after a region changed:
  // a WR whose region was deregistered meanwhile sends nothing more from it
  // (SEND/WRITE) or writes nothing into it (READ response, atomic result); it
  // completes with a local protection error once the WRs before it have, and
  // the QP goes to ERR.
  Status post_send(const SendWr& wr);
  // Post a receive WR (INIT, RTR, RTS, SQD; flushed in ERR). SGEs are resolved now, and
  // again when a SEND lands after a region changed: a receive whose region was
  // deregistered meanwhile completes with a local protection error (the SEND is NAKed
  // Remote Operational Error) instead of being written.
  Status post_recv(const RecvWr& wr);
  // A chain of WRs, as ibv_post_send / ibv_post_recv take one: exactly
  // post_send() / post_recv() of each in order until one is refused. Returns
  // how many were posted; `status` is the refusal of wrs[returned] (kOk when
  // all were). The checks that hold for the whole chain (state, queue room,
  // the cached region) are made once per chain, not once per WR.
  size_t post_send(std::span<const SendWr> wrs, Status& status) {
    if (wrs.size() == 1) {  // a chain's set-up does not pay for one WR
      status = post_send(wrs[0]);
      return status == Status::kOk ? 1 : 0;
    }
    return post_send_chain(wrs, status);
  }
  // Send WRs the send queue has room for (posting more is refused as kQueueFull).
  size_t sq_free() const { return size_t{sq_mask_} + 1 - (sq_tail_ - sq_head_); }
  size_t post_recv(std::span<const RecvWr> wrs, Status& status) {
    if (wrs.size() == 1) {
      status = post_recv(wrs[0]);
      return status == Status::kOk ? 1 : 0;
    }
    return post_recv_chain(wrs, status);
  }

  // One received packet for this QP, already validated by wire (ICRC,
  // lengths). The payload is copied out before return.
  RxResult on_packet(uint64_t now_ns, const wire::RoceHeader& hdr,
                     std::span<const uint8_t> payload);

  // The next packet to transmit, if any: responses first (ACK/NAK, READ
  // responses), then request retransmissions, then new requests within the
  // send window. The pacer calls it once per packet it may send.
  bool poll_tx(uint64_t now_ns, TxPacket& out);

  // The fused datapath. Each behaves exactly as its general counterpart
  // (same state changes, counters, completions and frame bytes); the common
  // packets take a direct path: an ACK, a single-packet SEND (go-back-N, one
  // SGE) and an in-order SEND only are written into or read from the frame
  // without a RoceHeader in between.
  //
  // on_packet() for a packet parsed into a view (wire::parse_frame /
  // parse_roce with a RoceView): the view's bytes must stay valid for the call.
  RxResult on_packet(uint64_t now_ns, const wire::RoceView& pkt);
  // An RX burst for this QP: exactly on_packet(now, pkts[i]) for each in
  // order, results[i] its result. A run of in-order SEND only packets is
  // delivered with the responder's PSN, MSN and queue indexes in registers,
  // and the ACKs they ask for coalesce as queued one by one.
  void on_packets(uint64_t now_ns, std::span<const wire::RoceView> pkts, RxResult* results) {
    if (pkts.size() == 1) {  // a burst's set-up does not pay for one packet
      results[0] = on_packet(now_ns, pkts[0]);
      return;
    }
    on_packets_burst(now_ns, pkts, results);
  }
  // poll_tx() followed by wire::build_frame(out, tmpl, ...): the next packet
  // as a whole frame at the front of `out`. len_bytes 0 and status kOk when
  // there is nothing to send; on a build error the packet is consumed, as
  // with poll_tx() and a failed build (the transport's timers resend it).
  wire::BuildResult poll_tx_frame(uint64_t now_ns, const wire::FrameTemplate& tmpl,
                                  std::span<uint8_t> out);
  // A TX burst: exactly poll_tx_frame() into bufs[0], bufs[1], ... until it
  // has nothing to send or the buffers run out. results[i] is its result for
  // bufs[i] (a frame, or a build error that consumed the packet); returns how
  // many buffers were used. A run of single-packet SENDs is written with the
  // requester's cursor, window and timer kept in registers for the run.
  size_t poll_tx_frames(uint64_t now_ns, const wire::FrameTemplate& tmpl,
                        std::span<const std::span<uint8_t>> bufs, wire::BuildResult* results);

  // Completions in order of completion; returns how many were written.
  size_t poll_cq(std::span<Completion> out);
  size_t cq_size() const { return cq_tail_ - cq_head_; }

  // Earliest time on_timer has work (ACK timeout, RNR wait); kNoDeadline if none.
  uint64_t next_deadline_ns() const;
  void on_timer(uint64_t now_ns);
  // The owner could not run for stall_ns (its thread was descheduled, or a
  // sleep overran): no response could be received or handled meanwhile, so
  // the ACK timer moves out by that much rather than count it against the
  // peer. The RNR wait, which the peer asked for, is left alone.
  void defer_timers(uint64_t stall_ns);

  const QpCounters& counters() const { return counters_; }
  const QpError& error() const { return error_; }
  // When the peer last acknowledged something new (0: never); the retransmission timeout that
  // applies now.
  uint64_t last_progress_ns() const { return last_progress_ns_; }
  uint64_t retransmit_timeout() const { return retransmit_timeout_ns(); }
  // Selective repeat: the smoothed RTT and its variation measured from ACKs (RFC 6298; 0
  // before the first sample), and how many RTOs in a row expired without progress.
  uint64_t srtt_ns() const { return srtt_ns_; }
  uint64_t rttvar_ns() const { return rttvar_ns_; }
  uint32_t rto_backoff() const { return rto_backoff_; }
  // One past the highest request PSN sent.
  uint32_t send_max_psn() const { return snd_max_psn_; }
  // Oldest unacknowledged request PSN and next new PSN (tests, telemetry).
  uint32_t una_psn() const { return una_psn_; }
  uint32_t expected_psn() const { return epsn_; }
  // Whether the responder has answers queued that poll_tx() has not given out yet.
  bool responses_queued() const { return resp_head_ != resp_tail_; }
  // An ACK for everything the responder has taken (ePSN - 1, the current MSN), to send
  // at once: what a QP that stops (disconnect, destroy) sends ahead of the DREQ, so that
  // its peer's requester completes what arrived here instead of waiting behind the
  // disconnect for ACKs still queued, or losing them with the QP. It stops before the
  // first READ or atomic whose answer is still queued here (the stop drops it): an ACK
  // past it would say it was answered. (Answers given out by poll_tx() and not yet on the
  // wire are the caller's to send first.)
  void final_ack(TxPacket& out) const;

 private:
  struct SendWqe {
    SendWr wr;  // with its SGEs, which seg was resolved from
    std::array<std::span<uint8_t>, kMaxSge> seg{};
    // mrs_.epoch() when seg was resolved: building a SEND/WRITE packet or taking a READ
    // response or atomic result after a region changed resolves wr.sge again (one compare
    // per packet otherwise), so it never reads or writes a region deregistered meanwhile.
    // That epoch | kMemoryGone when they no longer resolved: not looked up again until a
    // region changes again.
    uint64_t epoch = 0;
    uint32_t len_bytes = 0;
    uint32_t first_psn = 0;
    uint32_t npkts = 0;     // PSNs the WR occupies (READ: one per response packet)
    uint32_t recv_seq = 0;  // SR: receive WQE it consumes at the responder
  };
  // SendWqe::epoch's mark for memory found gone (epochs count changes: never this high).
  static constexpr uint64_t kMemoryGone = uint64_t{1} << 63;
  // SR responder: one request PSN received ahead of (or at) ePSN.
  struct SrSlot {
    bool received = false;
    bool last = false;
    bool consume_recv = false;  // a packet of a message that takes a receive WQE
    bool write_imm = false;
    bool has_imm = false;
    uint32_t imm = 0;
    uint32_t len_bytes = 0;
    uint32_t recv_seq = 0;  // consume_recv: the receive WQE it names
  };
  struct RecvWqe {
    uint64_t wr_id = 0;
    std::array<std::span<uint8_t>, kMaxSge> seg{};
    uint8_t num_sge = 0;
    uint32_t len_bytes = 0;
    // mrs_.epoch() when seg was resolved, and the SGEs it was resolved from: a SEND that
    // lands after a region changed resolves them again (one compare per packet otherwise),
    // so it never writes into a region deregistered meanwhile.
    uint64_t epoch = 0;
    std::array<Sge, kMaxSge> sge{};
  };
  // A READ the responder has accepted: kept for replay after it is answered.
  struct ReadResource {
    uint32_t first_psn = 0;
    uint32_t npkts = 0;
    std::span<const uint8_t> mem;
    // What mem was resolved from, and remote_epoch() then: a (re)play after a region or the
    // QP's access flags changed resolves the rkey and checks remote read again, so a
    // deregistered region is never read for the peer, nor one remote read was taken from.
    uint64_t va = 0;
    uint32_t rkey = 0;
    uint64_t mem_epoch = 0;
    uint32_t start_psn = 0;  // where the current (re)play began: its FIRST packet
    uint32_t next_psn = 0;   // next response packet to emit
    uint32_t msn = 0;        // MSN after this READ, carried in its AETHs
    uint32_t ack_psn = 0;    // ack_psn_ when it was taken: final_ack()'s PSN while it is unsent
    uint32_t gen = 0;        // bumped on every (re)play: older FIFO items go stale
    bool active = false;     // response packets left to emit
    bool replay = false;     // the current play answers a duplicate request
    bool valid = false;
    bool atomic = false;       // an atomic's result (one ACK), not a READ
    uint64_t atomic_orig = 0;  // the value before the atomic: what a replay returns
  };
  enum class RespItem : uint8_t { kAck, kRead };
  struct Response {
    RespItem kind = RespItem::kAck;
    uint8_t read_index = 0;
    uint32_t read_gen = 0;
    wire::Aeth aeth;
    uint32_t psn = 0;
  };
  enum class InMessage : uint8_t { kNone, kSend, kWrite };

  // qp.cc
  // An SGE through the cached region view when it covers it, else through
  // mrs_ (which then refreshes the cache).
  MrStatus resolve_local(const Sge& s, uint32_t access, std::span<uint8_t>& out) {
    if (resolve_cached(s, access, out)) return MrStatus::kOk;
    return resolve_local_slow(s, access, out);
  }
  // The cached region's part of resolve_local(): true (and out set) when it
  // covers the SGE, as lookup_local() would.
  bool resolve_cached(const Sge& s, uint32_t access, std::span<uint8_t>& out) const {
    if (mr_cache_valid_ && s.lkey == mr_cache_lkey_ && mrs_.epoch() == mr_cache_epoch_ &&
        s.addr >= mr_cache_.base) {
      // Overflow-safe: offsets, never addr + len.
      const uint64_t off = s.addr - mr_cache_.base;
      const uint64_t size = mr_cache_.bytes.size();
      if (off <= size && s.len_bytes <= size - off &&
          (mr_cache_.access & access & kAccessLocalWrite) == (access & kAccessLocalWrite)) {
        out = std::span<uint8_t>(mr_cache_.bytes.data() + off, s.len_bytes);
        return true;
      }
    }
    return false;
  }
  // resolve_cached()'s bounds check with the view's base and size in hand
  // (the chain posts): the SGE's bytes lie in [base, base + size) from `off`.
  static bool in_view(const Sge& s, uint64_t base, uint64_t size, uint64_t& off) {
    if (s.addr < base) return false;
    off = s.addr - base;  // overflow-safe: offsets, never addr + len
    return off <= size && s.len_bytes <= size - off;
  }
  // What the responder's remote-key checks depend on: the regions (mrs_.epoch()) and the
  // QP's access flags (access_gen_). Both only grow, so the sum changes when either does: a
  // WRITE in progress or a READ (re)play checks again on one integer compare per packet.
  uint64_t remote_epoch() const { return mrs_.epoch() + access_gen_; }
  // The cached region view is current (resolve_cached() may use it).
  bool mr_cache_current() const { return mr_cache_valid_ && mrs_.epoch() == mr_cache_epoch_; }
  MrStatus resolve_local_slow(const Sge& s, uint32_t access, std::span<uint8_t>& out);
  // A send WQE's memory after a region changed (epoch): its SGEs resolved again with the
  // access the post checked (local write for a READ's or atomic's destination). False when
  // one no longer resolves (its region was deregistered), then without a lookup until a
  // region changes again (a WR behind the head is asked on every poll).
  bool send_memory_current(SendWqe& w);
  // SGEs looked up again (after a region changed) into seg: false when one no longer
  // resolves with `access`. send_memory_current() and recv_memory_current() use it.
  bool resolve_sges_again(const Sge* sge, uint32_t n, uint32_t access,
                          std::array<std::span<uint8_t>, kMaxSge>& seg);
  void reset_all();
  // ERR: both queues flushed. READ responses and atomic ACKs already queued are still
  // sent (a responder error's NAK follows them) until stop_responses(), which drops them
  // and everything queued after them.
  void enter_error();
  void stop_responses();
  // The free-running index of the first response item that is a READ response or atomic
  // ACK still to be sent; resp_tail_ when there is none.
  uint32_t first_unsent_answer() const;
  size_t poll_cq_runs(Completion* out, size_t n);
  Status post_send_general(const SendWr& wr);
  static void keep_wr(SendWqe& w, const SendWr& wr);
  void enqueue_send(SendWqe& w);
  Status post_recv_general(const RecvWr& wr);
  // The chain posts and RX burst for two elements or more.
  size_t post_send_chain(std::span<const SendWr> wrs, Status& status);
  size_t post_recv_chain(std::span<const RecvWr> wrs, Status& status);
  // post_send_chain()'s loop over [wr, last) into the WQEs from w on, as
  // recv_chain_run(): `ops` the opcodes it takes (bit per WrOpcode), `shift`
  // the PMTU's, psn the first PSN (moved past the WRs taken).
  static const SendWr* send_chain_run(SendWqe* w, const SendWr* wr, const SendWr* last,
                                      const MrView& view, uint32_t lkey, uint64_t epoch,
                                      uint32_t ops, uint32_t shift, uint32_t& psn);
  // post_recv_chain()'s loop over [wr, last) into the WQEs from r on: a leaf
  // (no call: its constants stay in registers). Returns the first WR it did
  // not take (last when it took them all).
  static const RecvWr* recv_chain_run(RecvWqe* r, const RecvWr* wr, const RecvWr* last,
                                      const MrView& view, uint32_t lkey, uint64_t epoch);
  void on_packets_burst(uint64_t now_ns, std::span<const wire::RoceView> pkts, RxResult* results);
  void push_completion(const Completion& c) {
    // Cannot overflow: posting reserves a slot per WR (cq_has_room_for_post).
    cq_[cq_tail_ & cq_mask_] = c;
    ++cq_tail_;
  }
  bool cq_has_room_for_post() const {
    // Every outstanding WR yields at most one completion: reserve room for all.
    const uint32_t pending = (cq_tail_ - cq_head_) + (sq_tail_ - sq_head_) + (rq_tail_ - rq_head_);
    return pending <= cq_mask_;  // cq_ holds cq_mask_ + 1 entries
  }
  // The same for n more WRs (a chain).
  bool cq_has_room_for_posts(size_t n) const {
    const uint32_t pending = (cq_tail_ - cq_head_) + (sq_tail_ - sq_head_) + (rq_tail_ - rq_head_);
    return pending + n <= size_t{cq_mask_} + 1;
  }
  SendWqe& sq_at(uint32_t index) { return sq_[index & sq_mask_]; }
  // The slots from ring index `at` to the end of a ring of mask + 1 slots: that
  // many consecutive indices from `at` are consecutive in memory, so a burst
  // loop walks them with a pointer (no mask, no multiply per element) and
  // starts a new run where the ring wraps.
  static constexpr uint32_t ring_run(uint32_t at, uint32_t mask) { return mask + 1 - (at & mask); }
  uint32_t npkts_for(uint32_t len_bytes, bool read) const;
  uint32_t seg_bytes_for(WrOpcode op) const {
    return expects_response(op) ? attr_.pmtu_bytes : seg_bytes_;
  }
  SendWqe* wqe_for_psn(uint32_t psn);
  void set_una(uint32_t psn) {
    if (sr_) sr_release_sacks(psn);
    una_psn_ = psn;
  }
  // SR: the SACK bits of the PSNs from una_psn_ up to psn cleared, recovery left.
  void sr_release_sacks(uint32_t psn);
  bool sacked(uint32_t psn) const {
    const uint32_t i = psn & (kSrWindow - 1);
    return (sack_bits_[i / 64] >> (i % 64)) & 1;
  }

  // requester.cc
  bool requester_poll(uint64_t now_ns, TxPacket& out);
  wire::BuildResult poll_tx_frame_general(uint64_t now_ns, const wire::FrameTemplate& tmpl,
                                          std::span<uint8_t> out);
  // poll_tx_frames()'s run of single-packet SENDs (RTS, no SR, no response
  // queued, no RNR wait): as many as the buffers, the queue and the window
  // allow; returns how many buffers it used.
  size_t send_run(uint64_t now_ns, const wire::FrameTemplate& tmpl,
                  std::span<const std::span<uint8_t>> bufs, wire::BuildResult* results);
  // send_run() when sq_epoch_ is not `epoch`: how many of the n WQEs from cur
  // on were resolved in `epoch` (the run stops at the first that was not);
  // sets sq_epoch_ to `epoch` when every WQE in the queue was.
  size_t sq_current_run(uint32_t cur, size_t n, uint64_t epoch);
  bool sr_retransmit_poll(TxPacket& out);
  void after_send(uint32_t psn);
  uint64_t retransmit_timeout_ns() const;
  // Selective repeat's RTO before backoff: RTO-low or RTO-high, or the RTT estimate's RTO
  // when that is longer.
  uint64_t sr_base_rto_ns() const;
  // When the retransmission timer started at timer_base_ns_ expires: base + RTO, and for
  // selective repeat a backed-off RTO never past the next point the retry budget is charged
  // (so a QP fails after retry_cnt + 1 local ACK timeouts without progress, as under
  // go-back-N).
  uint64_t rto_deadline_ns() const;
  // Selective repeat's RTT sample: a new PSN sent at now_ns is timed if none is; rtt_on_ack()
  // takes the sample once una_psn_ has passed it.
  void rtt_on_send(uint64_t now_ns, uint32_t psn) {
    if (rtt_timing_) return;
    rtt_timing_ = true;
    rtt_psn_ = psn;
    rtt_sent_ns_ = now_ns;
  }
  void rtt_on_ack(uint64_t now_ns);
  // False (nothing built) when a SEND/WRITE's memory is gone: see request_memory_gone().
  bool build_request(SendWqe& w, uint32_t psn, TxPacket& out);
  // A request packet of w could not be built, its region deregistered: at the head of the
  // send queue w completes with a local protection error and the QP goes to ERR (as rxe's
  // requester, whose completer fails the QP with the WQE's LOC_PROT_ERR). Behind the head
  // nothing more is sent from w, nor after it but SR's new data when w was a hole being
  // resent; w is tried again on each poll (without a lookup: send_memory_current()) and fails
  // once it is the head, or when the retransmission timer finds it there.
  void request_memory_gone(const SendWqe& w);
  // The WQE requester_poll() sends from next (go-back-N and SR new data),
  // after the window, SR, SQD and READ-depth checks; nullptr when none.
  SendWqe* requester_next();
  // Bookkeeping after request packet `psn` of w was built: retransmit count,
  // cursor, highest PSN sent, timer. True when the packet fills the window
  // (it must ask for an ACK).
  bool request_sent(uint64_t now_ns, SendWqe& w, uint32_t psn);
  void rewind_to(uint32_t psn);
  void recount_reads_started();

  // responder.cc
  RxResult responder_rx(const wire::RoceHeader& hdr, std::span<const uint8_t> payload);
  RxResult responder_duplicate(const wire::RoceHeader& hdr);
  RxResult responder_fatal(wire::NakCode code, uint32_t psn);
  RxResult responder_rnr(uint32_t psn);
  RxResult responder_send(uint32_t flags, uint32_t psn, bool ack_req, uint32_t imm,
                          std::span<const uint8_t> payload);
  RxResult responder_send_inline(uint32_t flags, uint32_t psn, bool ack_req, uint32_t imm,
                                 std::span<const uint8_t> payload);
  RxResult on_packet_decoded(uint64_t now_ns, const wire::RoceView& pkt);
  RxResult responder_write(const wire::RoceHeader& hdr, std::span<const uint8_t> payload);
  RxResult responder_read(const wire::RoceHeader& hdr);
  RxResult responder_atomic(const wire::RoceHeader& hdr);
  // The responder resource the next READ or atomic takes; nullptr when the
  // requester has more outstanding than max_dest_rd_atomic.
  ReadResource* free_resource();
  // Records the request in `r`, queues its answer and moves ePSN past it.
  RxResult start_response(ReadResource& r, uint32_t psn, uint32_t npkts);
  // A new READ or atomic at ePSN when no answer fits the response FIFO: not taken (the
  // requester resends it), counted in drop_response_queue_full.
  bool response_queue_full() const { return resp_tail_ - resp_head_ == kRespFifoSlots; }
  RxResult drop_for_response_queue();
  RxResult responder_sr(const wire::RoceHeader& hdr, std::span<const uint8_t> payload);
  // Moves ePSN over the slots received in order, completing receives. False when the slot
  // at ePSN names a receive WQE that is not the next one posted (the caller NAKs it).
  bool sr_advance();
  void queue_ack(wire::Aeth aeth, uint32_t psn);
  // `count` queue_ack() calls of which this is the last (the earlier ones
  // coalesce into it, or are dropped as it is).
  void queue_acks(wire::Aeth aeth, uint32_t psn, uint32_t count);
  // on_packets()'s run of in-order SEND only packets (no SR, no message in
  // progress, a state that takes requests): returns how many it delivered.
  size_t recv_run(std::span<const wire::RoceView> pkts, RxResult* results);
  // recv_run() when rq_epoch_ is not `epoch`: how many of the n receive WQEs
  // from rq_head_ on were resolved in `epoch` (the run stops at the first that
  // was not); sets rq_epoch_ to `epoch` when every WQE in the queue was.
  size_t rq_current_run(size_t n, uint64_t epoch);
  bool queue_read(uint8_t index);
  // A receive WQE's memory after a region changed (epoch): its SGEs resolved again. False
  // when one no longer resolves for local write (its region was deregistered).
  bool recv_memory_current(RecvWqe& r);
  // A SEND found the head receive WQE's memory gone: it completes with a local protection
  // error and the SEND is NAKed Remote Operational Error (as rxe's malformed-WQE case).
  RxResult responder_recv_protection(uint32_t psn);
  // A READ resource's memory after a region changed (epoch): resolved again from its rkey.
  // False when the rkey no longer grants it (the region was deregistered).
  bool read_memory_current(ReadResource& r);
  bool responder_poll(TxPacket& out);
  void build_read_response(ReadResource& r, TxPacket& out);
  bool payload_length_ok(uint32_t flags, size_t len) const;

  // completer.cc
  RxResult completer_rx(uint64_t now_ns, const wire::RoceHeader& hdr,
                        std::span<const uint8_t> payload);
  RxResult completer_ack(uint64_t now_ns, uint32_t psn, wire::Aeth aeth);
  RxResult completer_atomic_ack(uint64_t now_ns, const wire::RoceHeader& hdr);
  // What READ responses and atomic ACKs check first: a result when the packet
  // is dealt with (duplicate, bad AETH, an earlier answer missing, nothing
  // outstanding); nullopt when the send queue's head should take it.
  std::optional<RxResult> response_prologue(uint64_t now_ns, const wire::RoceHeader& hdr);
  // After a READ's last response or an atomic ACK: an ACK or a fatal NAK that arrived past it.
  void apply_ack_held_by_response(uint64_t now_ns);
  RxResult completer_read_response(uint64_t now_ns, const wire::RoceHeader& hdr,
                                   std::span<const uint8_t> payload);
  // Completes SEND/WRITE WQEs whose last PSN <= psn; stops at a READ.
  void complete_through(uint32_t psn);
  // Acknowledges every PSN <= psn, except that only READ responses move
  // una_psn_ through a READ. True when psn reaches into a READ's missing part.
  bool advance_una(uint64_t now_ns, uint32_t psn);
  void complete_head(WcStatus status);
  void on_progress(uint64_t now_ns);
  // A sequence problem (NAK, ACK past an unfinished READ, READ response gap):
  // go back to una_psn_ unless a rewind without progress is already under way.
  void sequence_retry(uint64_t now_ns);
  bool consume_retry(uint64_t now_ns);
  void fail(WcStatus status);
  void sr_sack(uint64_t now_ns, uint32_t cum_psn, uint32_t sacked_psn);
  // SR: a response for `psn` arrived; if it left after the last READ re-request, that
  // re-request may be repeated.
  void sr_read_evidence(uint32_t psn);

  QpConfig config_;
  MemoryRegions& mrs_;
  // The region of the last local key resolved, valid while mrs_.epoch() ==
  // mr_cache_epoch_ (see MemoryRegions::local_view).
  bool mr_cache_valid_ = false;
  uint32_t mr_cache_lkey_ = 0;
  uint64_t mr_cache_epoch_ = 0;
  MrView mr_cache_;
  QpAttr attr_;
  // Bumped by a modify that changes attr_.access_flags; never reset (see remote_epoch()).
  uint64_t access_gen_ = 0;
  QpState state_ = QpState::kReset;
  uint32_t pmtu_shift_ = 10;
  bool sr_ = false;
  uint32_t seg_bytes_ = 1024;  // data bytes per SEND/WRITE packet (SR: PMTU - 24)
  QpCounters counters_;

  // Send queue: [sq_head_, sq_tail_) posted and not completed; free-running.
  std::vector<SendWqe> sq_;
  uint32_t sq_mask_ = 0;
  uint32_t sq_head_ = 0;
  uint32_t sq_tail_ = 0;
  uint32_t next_post_psn_ = 0;  // first PSN of the next WR posted
  // When it equals mrs_.epoch(), every WQE in [sq_head_, sq_tail_) has that
  // epoch (was resolved in it): send_run() then compares no WQE's epoch. Only
  // sq_current_run() sets it, after looking at every WQE; a post writes the
  // current epoch into its WQE, which keeps it true, and send_memory_current()
  // is only asked about a WQE of another epoch, so it was not (it clears it
  // anyway when it finds memory gone). Epochs count changes: never kMemoryGone.
  uint64_t sq_epoch_ = kMemoryGone;

  // Requester cursor: next request packet to send.
  uint32_t cur_wqe_ = 0;
  uint32_t cur_psn_ = 0;
  uint32_t snd_max_psn_ = 0;  // one past the highest PSN ever sent
  // The send window the requester's paths compare against: config_.window_packets, or 0
  // while a fatal NAK is held (held_nak_), so that the fused paths, which compare anyway,
  // send nothing new then; requester_next() lets only what lies before its PSN go.
  uint32_t tx_window_packets_ = 0;
  uint32_t reads_started_ = 0;  // READ WQEs in [sq_head_, cur_wqe_)
  uint32_t pkts_since_ack_req_ = 0;
  uint32_t next_recv_seq_ = 0;  // SR: receive WQEs our SENDs / WRITE_IMMs consume
  std::array<uint8_t, SrPlacement::kBytes> sr_hdr_buf_{};  // payload piece 0 in SR
  // SR loss recovery.
  std::vector<uint64_t> sack_bits_;  // kSrWindow bits indexed by PSN
  uint32_t sacked_count_ = 0;        // bits set in sack_bits_: arrived, not in flight
  bool in_recovery_ = false;
  uint32_t recovery_psn_ = 0;  // leave recovery when una_psn_ passes it
  uint32_t hole_cursor_ = 0;   // next PSN to consider resending
  uint32_t sack_high_ = 0;     // one past the highest SACKed PSN: holes lie below it
  // A resent hole lost again: snd_max_psn_ when the last hole was resent. Packets from it on
  // left after every resend so far; a SACK kSrReorderPackets past it while holes remain means
  // those resends were lost too (not just late), and the holes are resent again without
  // waiting for the RTO.
  uint32_t resend_mark_psn_ = 0;
  bool resend_marked_ = false;
  bool read_retry_pending_ = false;
  uint32_t read_retry_psn_ = 0;
  // The same for a READ re-request: snd_max_psn_ when it left. An ACK or SACK
  // kSrReorderPackets past it while the READ's responses are still missing allows
  // another re-request (the re-request or its responses were lost).
  uint32_t read_retry_mark_psn_ = 0;
  bool read_retry_marked_ = false;
  // SR: the highest PSN the peer acknowledged beyond an unfinished READ at una_psn_; applied
  // when that READ completes.
  uint32_t acked_past_read_psn_ = 0;
  bool acked_past_read_ = false;
  // Both modes: a fatal NAK for held_nak_psn_ that arrived while a READ or atomic before it
  // still missed its answer. The peer is in ERR and will not NAK again: once the READs and
  // atomics before that PSN complete, the WR it names completes with the NAK's error.
  // Meanwhile only request packets before that PSN are sent (tx_window_packets_ is 0): the
  // READ or atomic asked for again, and what lies between; the peer would drop the rest.
  uint32_t held_nak_psn_ = 0;
  uint8_t held_nak_code_ = 0;
  bool held_nak_ = false;

  // Completer.
  uint32_t una_psn_ = 0;  // oldest unacknowledged request PSN
  uint8_t retry_left_ = 0;
  uint8_t rnr_retry_left_ = 0;
  bool rewound_without_progress_ = false;
  uint64_t ack_deadline_ns_ = kNoDeadline;
  uint64_t timer_base_ns_ = 0;  // when the retransmission timer was last (re)started
  uint64_t last_progress_ns_ = 0;
  QpError error_;
  // Selective repeat: when the retry budget was last charged, or progress made. RTO-low/high
  // expiries resend at once but charge the budget at most once per local ACK timeout, so the
  // QP fails after (retry_cnt + 1) ACK timeouts without progress, as under go-back-N (and
  // never with timeout 0), not after retry_cnt RTOs of 100-320 us.
  uint64_t sr_charged_ns_ = 0;
  // Selective repeat's RTT estimate (RFC 6298). One new SEND/WRITE PSN at a time is timed from
  // its first transmission to the cumulative ACK that covers it; a retransmission while it is
  // timed voids the sample (Karn). rto_backoff_ doubles the RTO per expiry without progress.
  uint64_t srtt_ns_ = 0;
  uint64_t rttvar_ns_ = 0;
  uint64_t rtt_sent_ns_ = 0;
  uint32_t rtt_psn_ = 0;
  bool rtt_timing_ = false;
  uint8_t rto_backoff_ = 0;
  uint64_t rnr_deadline_ns_ = kNoDeadline;
  uint32_t rnr_psn_ = 0;

  // Receive queue: [rq_head_, rq_tail_) posted.
  std::vector<RecvWqe> rq_;
  uint32_t rq_mask_ = 0;
  uint32_t rq_head_ = 0;
  uint32_t rq_tail_ = 0;
  // As sq_epoch_ for [rq_head_, rq_tail_): recv_run() compares no receive's
  // epoch while it equals mrs_.epoch(). Posts and recv_memory_current() only
  // ever write the current epoch into a WQE; only rq_current_run() sets it.
  uint64_t rq_epoch_ = kMemoryGone;

  // Responder.
  uint32_t epsn_ = 0;
  uint32_t msn_ = 0;
  // The PSN of the last SEND/WRITE packet taken (rq_psn - 1 before any): what an ACK that
  // answers no request of its own carries (a duplicate's, the final ACK). Never a READ's or
  // atomic's PSN: rxe's completer completes a READ or atomic WR with an ACK of its last PSN,
  // its data or result never written (rxe's own responder acknowledges duplicates with the
  // same PSN, its resp.ack_psn).
  uint32_t ack_psn_ = 0;
  bool nak_seq_sent_ = false;
  InMessage in_msg_ = InMessage::kNone;
  uint32_t recv_offset_ = 0;      // bytes placed into the head RQ WQE
  std::span<uint8_t> write_mem_;  // the current WRITE's target (after checks)
  uint32_t write_offset_ = 0;
  // The current WRITE's RETH and remote_epoch() when write_mem_ was resolved: a later packet
  // of the WRITE checks remote write and resolves the rkey again when any region or the
  // access flags changed (one compare per packet otherwise), so it never writes into a
  // region deregistered meanwhile, nor after remote write was taken away.
  uint64_t write_va_ = 0;
  uint32_t write_rkey_ = 0;
  uint64_t write_epoch_ = 0;
  std::vector<ReadResource> reads_;  // max_dest_rd_atomic entries
  uint32_t read_next_ = 0;           // next slot to (re)use, round robin
  // Ring of kRespFifoSlots: 2 items per READ slot (16) + 2, rounded up to a
  // power of 2; a constant, so the index masks are too.
  static constexpr uint32_t kRespFifoSlots = 64;
  std::vector<Response> resp_fifo_;
  std::vector<SrSlot> sr_slots_;  // SR: kSrWindow entries indexed by PSN
  uint32_t recv_seq_done_ = 0;    // SR: receive WQEs consumed so far
  uint32_t resp_head_ = 0;
  uint32_t resp_tail_ = 0;

  // Completion queue ring.
  std::vector<Completion> cq_;
  uint32_t cq_mask_ = 0;
  uint32_t cq_head_ = 0;
  uint32_t cq_tail_ = 0;
};

}  // namespace conduit::transport
