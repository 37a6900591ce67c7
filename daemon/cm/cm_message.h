// conduit's native connection-manager messages: what two daemons exchange over
// UDP (policy port.cm_udp_port, 4792 by default) to connect a QP on one host
// to a QP on another without an out-of-band channel of the application's own.
//
// Every message, in network byte order:
//
//   off  size  field
//    0    4    magic      0x4344434d ("CDCM")
//    4    1    version    1
//    5    1    type       REQ 1, REP 2, RTU 3, REJ 4, DREQ 5, DREP 6
//    6    2    length     bytes of the whole message (header, body, private data)
//    8    4    src_conn   the sender's connection id (0 only in a REJ sent without one)
//   12    4    dst_conn   the receiver's connection id (0 in a REQ)
//   16         body:
//     REQ, REP (32 bytes + private data):
//   16    8    service    the listener's service number (REP echoes it)
//   24    4    qpn        24 bits
//   28    4    psn        24 bits: the first PSN the sender's QP will send
//   32    2    pmtu       bytes: 256, 512, 1024, 2048 or 4096
//   34    2    caps       bit 0: selective repeat; other bits 0
//   36    1    timeout    local ACK timeout exponent (4.096 us * 2^n), 0..31
//   37    1    retry_cnt  0..7
//   38    1    rnr_retry  0..7
//   39    1    private_len 0..kMaxPrivateBytes
//   40    8    reserved   0
//   48    n    private data (application bytes, as rdma_cm's private data)
//     REJ (4 bytes + private data):
//   16    2    reason     RejectReason
//   18    1    private_len 0..kMaxPrivateBytes (the listener's, as rdma_reject()'s); a
//                         daemon before it sent 0 here and refuses a REJ with any
//   19    1    reserved   0
//   20    n    private data
//     RTU, DREQ, DREP: no body.
//
// parse_cm_message() validates everything before it fills a CmMessage; a
// message it refuses names the reason, and the caller counts it.
// Pure: standard library only.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "proto/cm_addr.h"

namespace conduit::cm {

inline constexpr uint32_t kCmMagic = 0x4344434d;
inline constexpr uint8_t kCmVersion = 1;
inline constexpr size_t kHeaderBytes = 16;
inline constexpr size_t kParamsBytes = 32;
inline constexpr size_t kRejectBytes = 4;
inline constexpr size_t kMaxPrivateBytes = 64;
inline constexpr size_t kMaxMessageBytes = kHeaderBytes + kParamsBytes + kMaxPrivateBytes;
inline constexpr uint16_t kCapSelectiveRepeat = 1u << 0;
inline constexpr uint16_t kKnownCaps = kCapSelectiveRepeat;

// kMra, the SIDR messages, LAP and APR exist in the IB CM only (ib_cm_mad.h): the native codec
// refuses them.
enum class CmType : uint8_t {
  kReq = 1,
  kRep = 2,
  kRtu = 3,
  kRej = 4,
  kDreq = 5,
  kDrep = 6,
  kMra = 7,
  kSidrReq = 8,  // service id resolution (UD): src_conn is the request id, service the id
  kSidrRep = 9,  // dst_conn is the request id it answers
  kLap = 10,     // load alternate path (its path is not parsed)
  kApr = 11,     // alternate path response
};
const char* cm_type_name(CmType t);

// Why a connection was refused; the requesting client sees it.
enum class RejectReason : uint16_t {
  kNoListener = 1,  // nobody listens on that service at the peer
  kQuota = 2,       // the peer is out of connections (or its client of QPs)
  kPolicy = 3,      // the peer's policy refuses it (bad PMTU, capabilities...)
  kRefused = 4,     // the listening application said no
  kTimeout = 5,     // no answer within the retry budget (local, never on the wire)
  kInvalid = 6,     // the peer found the request malformed
};
const char* reject_reason_name(RejectReason r);
bool is_wire_reject_reason(uint16_t v);  // the values a REJ may carry

// What one side offers for its QP.
struct QpParams {
  uint32_t qpn = 0;  // 24 bits
  uint32_t psn = 0;  // 24 bits
  uint16_t pmtu_bytes = 1024;
  uint16_t caps = 0;     // kCap*
  uint8_t timeout = 14;  // local ACK timeout exponent
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  // READ/atomic depths: the sender's max_rd_atomic (initiator depth) and
  // max_dest_rd_atomic (responder resources). Carried by the IB CM only
  // (ib_cm_mad.h); 0 in a native message: each side uses its QP's defaults.
  uint8_t initiator_depth = 0;
  uint8_t responder_resources = 0;
};
bool valid_pmtu(uint32_t bytes);
// An IB CM connection's READ/atomic depths: our initiator depth no deeper than
// the peer's responder resources and our responder resources no more than its
// initiator depth (at least 1 each, so a READ is never stuck behind a zero).
void cap_depths(QpParams& local, const QpParams& remote);

// A connection manager peer's address in the form of a RoCE v2 GID (proto/cm_addr.h): the
// same type the control protocol hands to clients.
using proto::cm_addr_ipv4;
using proto::cm_addr_v4;
using proto::CmAddr;

// What only the IB CM dialect (ib_cm_mad.h) carries. Zero for native messages.
struct IbCmFields {
  uint64_t tid = 0;      // MAD transaction id: a reply echoes the request's
  uint64_t ca_guid = 0;  // REQ/REP: the sender's local CA GUID
  // REQ: rdma_cm's header (its private data starts with it: the TCP or IB
  // port space), IPv4 or IPv6.
  bool rdma_cm = false;
  uint16_t rdma_cm_src_port = 0;
  CmAddr src_addr{};      // REQ: the requester's address (cma header, or its GID)
  CmAddr dst_addr{};      // REQ: the address it asked for
  uint16_t rej_code = 0;  // REJ: the IB reason code as on the wire (Table 109)
  // REJ: which message it rejects (0 REQ, 1 REP, 2 other): Linux finds a REJ of its REQ
  // without our id, any other with it, so one sent after our REP must not say REQ.
  uint8_t rej_message = 0;
  // REQ: how long the requester waits for our answer before it resends its REQ
  // (4.096 us * 2^n) and how often it resends: how long a pending request must live.
  uint8_t req_response_timeout = 0;
  uint8_t req_max_retries = 0;
  // REQ: the requester's local CM response timeout: how soon it answers our REP (4.096 us *
  // 2^n), so how long we wait before we resend the REP (as Linux's cm_req_handler).
  uint8_t req_local_response_timeout = 0;
  // MRA ("message received, wait"): which message (0 REQ, 1 REP, 2 other) and
  // how long the sender asks us to wait: 4.096 us * 2^mra_timeout.
  uint8_t mra_message = 0;
  uint8_t mra_timeout = 0;
  uint8_t sidr_status = 0;  // SIDR_REP: IbSidrStatus
  uint8_t apr_status = 0;   // APR: IbAprStatus
};

struct CmMessage {
  CmType type = CmType::kReq;
  uint32_t src_conn = 0;
  uint32_t dst_conn = 0;
  // REQ/REP:
  uint64_t service = 0;
  QpParams params;
  uint8_t private_len = 0;
  std::array<uint8_t, kMaxPrivateBytes> private_data{};
  // IB CM (parsed): the field held more than private_data keeps, a non-zero byte past
  // kMaxPrivateBytes (a REJ's 148-byte field, a REP's 196: rdma_reject() or rdma_accept()
  // with more than 64 bytes). The IB CM carries no length, so that is all there is to know.
  bool private_truncated = false;
  // REJ:
  RejectReason reason = RejectReason::kRefused;
  IbCmFields ib;
};

enum class CmParseError : uint8_t {
  kOk = 0,
  kTooShort,  // shorter than the header or than its type's body
  kBadMagic,
  kBadVersion,
  kBadType,
  kBadLength,    // length field disagrees with the datagram
  kBadConnId,    // src_conn 0 (but in a REJ), or dst_conn set in a REQ / missing elsewhere
  kBadField,     // qpn/psn beyond 24 bits, PMTU, caps, timers, private_len, reason, reserved
  kBadClass,     // IB CM: not a MAD of the CM class, version 2, method Send
  kUnsupported,  // IB CM: a valid MAD conduit does not act on (ClassPortInfo Send...)
  kRefusedReq,   // IB CM: a REQ conduit refuses with REJ (UC/XRC, bad rdma_cm header)
};
const char* cm_parse_error_name(CmParseError e);

CmParseError parse_cm_message(const uint8_t* data, size_t len, CmMessage& out);
// Writes m into out (kMaxMessageBytes is always enough); returns the length.
size_t build_cm_message(const CmMessage& m, uint8_t* out);

}  // namespace conduit::cm
