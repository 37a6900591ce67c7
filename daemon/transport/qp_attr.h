// QP states and the verbs-like attributes that move a QP between them.
#pragma once

#include <cstdint>

namespace conduit::transport {

enum class QpState : uint8_t { kReset, kInit, kRtr, kRts, kSqd, kErr };

const char* qp_state_name(QpState s);

// Bits of the modify mask: which QpAttr members the call sets (ibv_qp_attr_mask).
enum QpAttrMask : uint32_t {
  kAttrState = 1u << 0,
  kAttrAccessFlags = 1u << 1,  // remote access the QP allows (MrAccess bits)
  kAttrPathMtu = 1u << 2,
  kAttrDestQpn = 1u << 3,
  kAttrRqPsn = 1u << 4,
  kAttrSqPsn = 1u << 5,
  kAttrTimeout = 1u << 6,
  kAttrRetryCnt = 1u << 7,
  kAttrRnrRetry = 1u << 8,
  kAttrMinRnrTimer = 1u << 9,
  kAttrMaxRdAtomic = 1u << 10,      // initiator depth: READs this QP has outstanding
  kAttrMaxDestRdAtomic = 1u << 11,  // responder depth: READs it serves at once
  kAttrSelectiveRepeat = 1u << 12,  // both ends are conduit and agreed on SR (see qp.h)
};

// READ/atomic requests a QP keeps in flight at most, as requester
// (max_rd_atomic) and as responder (max_dest_rd_atomic).
inline constexpr uint32_t kMaxReadDepth = 16;

struct QpAttr {
  QpState state = QpState::kReset;
  uint32_t access_flags = 0;
  uint32_t pmtu_bytes = 1024;      // 256, 512, 1024, 2048 or 4096
  uint32_t dest_qpn = 0;           // 24 bits
  uint32_t rq_psn = 0;             // 24 bits: first PSN the responder expects
  uint32_t sq_psn = 0;             // 24 bits: first PSN the requester sends
  uint8_t timeout = 14;            // local ACK timeout 4.096 us * 2^timeout; 0 = none
  uint8_t retry_cnt = 7;           // 0..7
  uint8_t rnr_retry = 7;           // 0..7, 7 = infinite
  uint8_t min_rnr_timer = 12;      // 5-bit IB_RNR_TIMER code the responder sends
  uint8_t max_rd_atomic = 4;       // 1..16
  uint8_t max_dest_rd_atomic = 4;  // 1..16
  bool selective_repeat = false;   // IRN-style selective repeat instead of go-back-N
};

// Fixed at creation (not modifiable): queue sizes and datapath knobs.
struct QpConfig {
  uint32_t qpn = 0;         // 24 bits, this QP's number
  uint32_t sq_depth = 256;  // send WRs outstanding (rounded up to a power of 2)
  uint32_t rq_depth = 256;  // receive WRs posted (rounded up to a power of 2)
  // Request PSNs in flight (sent, not acknowledged); the policy's transport.window. A go-back-N
  // loss resends all of them, and a receiver off its core takes only its RX ring's worth.
  uint32_t window_packets = 1024;
  uint32_t ack_req_every_packets = 64;  // AckReq at least this often (and on every last)
  // Selective repeat only (IRN): outstanding request bytes are capped at one
  // BDP, and the retransmission timer is rto_low_ns while at most
  // rto_low_max_packets are in flight, rto_high_ns otherwise.
  uint32_t sr_bdp_bytes = 131072;
  uint64_t rto_low_ns = 100'000;
  uint64_t rto_high_ns = 320'000;
  uint32_t rto_low_max_packets = 3;
  // The attributes the QP has in RESET, before a modify sets them (the
  // policy's transport defaults; QpAttr's own defaults otherwise). Only the
  // values count: state, PSNs, QPN, access and selective_repeat start as in
  // QpAttr{} whatever they are here.
  QpAttr reset_attr;
};

// Local ACK timeout in ns for the 5-bit exponent (0 = no timer: returns 0).
constexpr uint64_t ack_timeout_ns(uint8_t timeout) {
  return timeout == 0 ? 0 : 4096ull << (timeout & 31);
}

// IB_RNR_TIMER code to ns (code 0 is the longest, 655.36 ms).
uint64_t rnr_timer_ns(uint8_t code);

}  // namespace conduit::transport
