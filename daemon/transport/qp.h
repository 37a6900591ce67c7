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
//
// The roles live in separate files, as in rxe: requester.cc (builds request
// packets), responder.cc (handles requests, emits ACK/NAK/READ responses),
// completer.cc (handles responses, timers, retries, completions). qp.cc has
// state changes, posting and the completion queue.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "transport/memory_region.h"
#include "transport/qp_attr.h"
#include "transport/tx_packet.h"
#include "transport/work_request.h"
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
  uint64_t drop_state = 0;                // arrived in RESET/INIT/ERR or a role not active
  uint64_t drop_bad_opcode = 0;           // unknown opcode, CNP, or out of message order
  uint64_t drop_bad_length = 0;           // payload length impossible for the opcode/PMTU
  uint64_t drop_stale_response = 0;       // ACK/NAK/READ response for nothing outstanding
  uint64_t drop_response_queue_full = 0;  // duplicate READ/ACK with no room to answer
  uint64_t naks_sent = 0;
  uint64_t rnr_naks_sent = 0;
  uint64_t naks_received = 0;
  uint64_t rnr_naks_received = 0;
  uint64_t timeouts = 0;
  uint64_t retries = 0;  // go-back-N rewinds
};

class Qp {
 public:
  static constexpr uint64_t kNoDeadline = std::numeric_limits<uint64_t>::max();

  // `mrs` must outlive the Qp. Allocates the queues (setup time only).
  Qp(const QpConfig& config, MemoryRegions& mrs);

  // Verbs-like modify: only the attributes in `mask` are read. Rejects
  // transitions the verbs state diagram does not have, missing required
  // attributes and out-of-range values, and then changes nothing.
  Status modify(const QpAttr& attr, uint32_t mask);
  QpState state() const { return state_; }
  const QpAttr& attr() const { return attr_; }
  uint32_t qpn() const { return config_.qpn; }

  // Post a send WR (RTS or SQD; in ERR it completes at once with a flush
  // error). SGEs are resolved now: a bad one refuses the post.
  Status post_send(const SendWr& wr);
  // Post a receive WR (INIT, RTR, RTS, SQD; flushed in ERR).
  Status post_recv(const RecvWr& wr);

  // One received packet for this QP, already validated by wire (ICRC,
  // lengths). The payload is copied out before return.
  RxResult on_packet(uint64_t now_ns, const wire::RoceHeader& hdr,
                     std::span<const uint8_t> payload);

  // The next packet to transmit, if any: responses first (ACK/NAK, READ
  // responses), then request retransmissions, then new requests within the
  // send window. The pacer calls it once per packet it may send.
  bool poll_tx(uint64_t now_ns, TxPacket& out);

  // Completions in order of completion; returns how many were written.
  size_t poll_cq(std::span<Completion> out);
  size_t cq_size() const { return cq_tail_ - cq_head_; }

  // Earliest time on_timer has work (ACK timeout, RNR wait); kNoDeadline if none.
  uint64_t next_deadline_ns() const;
  void on_timer(uint64_t now_ns);

  const QpCounters& counters() const { return counters_; }
  // Oldest unacknowledged request PSN and next new PSN (tests, telemetry).
  uint32_t una_psn() const { return una_psn_; }
  uint32_t expected_psn() const { return epsn_; }

 private:
  struct SendWqe {
    SendWr wr;
    std::array<std::span<uint8_t>, kMaxSge> seg{};
    uint32_t len_bytes = 0;
    uint32_t first_psn = 0;
    uint32_t npkts = 0;  // PSNs the WR occupies (READ: one per response packet)
  };
  struct RecvWqe {
    uint64_t wr_id = 0;
    std::array<std::span<uint8_t>, kMaxSge> seg{};
    uint8_t num_sge = 0;
    uint32_t len_bytes = 0;
  };
  // A READ the responder has accepted: kept for replay after it is answered.
  struct ReadResource {
    uint32_t first_psn = 0;
    uint32_t npkts = 0;
    std::span<const uint8_t> mem;
    uint32_t start_psn = 0;  // where the current (re)play began: its FIRST packet
    uint32_t next_psn = 0;   // next response packet to emit
    uint32_t msn = 0;        // MSN after this READ, carried in its AETHs
    uint32_t gen = 0;        // bumped on every (re)play: older FIFO items go stale
    bool active = false;     // response packets left to emit
    bool replay = false;     // the current play answers a duplicate request
    bool valid = false;
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
  void reset_all();
  void enter_error();
  void push_completion(const Completion& c);
  bool cq_has_room_for_post() const;
  SendWqe& sq_at(uint32_t index) { return sq_[index & sq_mask_]; }
  uint32_t npkts_for(uint32_t len_bytes) const;

  // requester.cc
  bool requester_poll(uint64_t now_ns, TxPacket& out);
  void build_request(SendWqe& w, uint32_t psn, TxPacket& out);
  void rewind_to(uint32_t psn);
  void recount_reads_started();

  // responder.cc
  RxResult responder_rx(const wire::RoceHeader& hdr, std::span<const uint8_t> payload);
  RxResult responder_duplicate(const wire::RoceHeader& hdr);
  RxResult responder_fatal(wire::NakCode code, uint32_t psn);
  RxResult responder_rnr(uint32_t psn);
  RxResult responder_send(const wire::RoceHeader& hdr, std::span<const uint8_t> payload);
  RxResult responder_write(const wire::RoceHeader& hdr, std::span<const uint8_t> payload);
  RxResult responder_read(const wire::RoceHeader& hdr);
  void queue_ack(wire::Aeth aeth, uint32_t psn);
  bool queue_read(uint8_t index);
  bool responder_poll(TxPacket& out);
  void build_read_response(ReadResource& r, TxPacket& out);
  bool payload_length_ok(uint32_t flags, size_t len) const;

  // completer.cc
  RxResult completer_rx(uint64_t now_ns, const wire::RoceHeader& hdr,
                        std::span<const uint8_t> payload);
  RxResult completer_ack(uint64_t now_ns, const wire::RoceHeader& hdr);
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

  QpConfig config_;
  MemoryRegions& mrs_;
  QpAttr attr_;
  QpState state_ = QpState::kReset;
  uint32_t pmtu_shift_ = 10;
  QpCounters counters_;

  // Send queue: [sq_head_, sq_tail_) posted and not completed; free-running.
  std::vector<SendWqe> sq_;
  uint32_t sq_mask_ = 0;
  uint32_t sq_head_ = 0;
  uint32_t sq_tail_ = 0;
  uint32_t next_post_psn_ = 0;  // first PSN of the next WR posted

  // Requester cursor: next request packet to send.
  uint32_t cur_wqe_ = 0;
  uint32_t cur_psn_ = 0;
  uint32_t snd_max_psn_ = 0;    // one past the highest PSN ever sent
  uint32_t reads_started_ = 0;  // READ WQEs in [sq_head_, cur_wqe_)
  uint32_t pkts_since_ack_req_ = 0;

  // Completer.
  uint32_t una_psn_ = 0;  // oldest unacknowledged request PSN
  uint8_t retry_left_ = 0;
  uint8_t rnr_retry_left_ = 0;
  bool rewound_without_progress_ = false;
  uint64_t ack_deadline_ns_ = kNoDeadline;
  uint64_t rnr_deadline_ns_ = kNoDeadline;
  uint32_t rnr_psn_ = 0;

  // Receive queue: [rq_head_, rq_tail_) posted.
  std::vector<RecvWqe> rq_;
  uint32_t rq_mask_ = 0;
  uint32_t rq_head_ = 0;
  uint32_t rq_tail_ = 0;

  // Responder.
  uint32_t epsn_ = 0;
  uint32_t msn_ = 0;
  bool nak_seq_sent_ = false;
  InMessage in_msg_ = InMessage::kNone;
  uint32_t recv_offset_ = 0;      // bytes placed into the head RQ WQE
  std::span<uint8_t> write_mem_;  // the current WRITE's target (after checks)
  uint32_t write_offset_ = 0;
  std::vector<ReadResource> reads_;  // max_dest_rd_atomic entries
  uint32_t read_next_ = 0;           // next slot to (re)use, round robin
  std::vector<Response> resp_fifo_;  // ring, 2 * 16 + 2 entries
  uint32_t resp_head_ = 0;
  uint32_t resp_tail_ = 0;

  // Completion queue ring.
  std::vector<Completion> cq_;
  uint32_t cq_mask_ = 0;
  uint32_t cq_head_ = 0;
  uint32_t cq_tail_ = 0;
};

}  // namespace conduit::transport
