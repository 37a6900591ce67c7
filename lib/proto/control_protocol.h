// conduit control protocol: the messages between libconduit / conduitctl and
// conduitd's control thread over a Unix SOCK_SEQPACKET socket.
//
// One request per datagram, one reply per request, in order. Every message is
//
//   offset size field
//   0      4    magic      kControlMagic ("CDCT" as bytes)
//   4      2    version    kControlVersion; anything else is rejected
//   6      2    type       MsgType; replies set kReplyFlag
//   8      4    seq        chosen by the client, echoed in the reply
//   12     4    body_len   bytes after the header; must equal datagram size - 16
//   16     ..   body       fields in declaration order, little-endian, no padding;
//                          strings are u16 length + bytes (no NUL)
//
// A reply body starts with an i32 status: 0, then the reply's fields; or a
// negative errno, then a reason string a person can act on.
//
// File descriptors travel as SCM_RIGHTS ancillary data, always from conduitd
// to the client: the attach reply carries the region memfd, the writing end
// of the engine's doorbell (a socket) and the reading end of the
// connection-manager event pipe (kicked when a CmEvent is pending); a
// create-CQ reply carries the reading end of the CQ's wakeup pipe when the
// request asked for one (flag `wants_wakeup`). Wakeup channels are
// shm::WakeFd pairs conduitd creates: the client never hands it a descriptor
// to write to or read from, so nothing it does to one can make conduitd block.
//
// Units: sizes in bytes, offsets relative to the start of the client's region.
// Thread role: these are plain values; encoding/decoding holds no state.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "proto/cm_addr.h"

namespace conduit::proto {

inline constexpr uint32_t kControlMagic = 0x54434443;  // bytes 'C','D','C','T'
// 2: QpSummary carries cnps_rx and cnps_tx. 3: connection-manager requests
// (kCmListen .. kCmPollEvent); the attach reply carries a third descriptor.
// 4: connection-manager peers are 16-byte addresses (IPv4-mapped or IPv6).
// 5: wakeup channels are pipes and sockets conduitd creates; the create-CQ
// reply, not the request, carries the CQ's. 6: kCmReject carries private data for the
// requester.
inline constexpr uint16_t kControlVersion = 6;
inline constexpr size_t kHeaderBytes = 16;
// Largest datagram either side sends or accepts (SOCK_SEQPACKET keeps boundaries).
inline constexpr size_t kMaxMessageBytes = 64 * 1024;
inline constexpr uint16_t kReplyFlag = 0x8000;

// String field limits (bytes). Names are restricted to [A-Za-z0-9_.-].
inline constexpr size_t kMaxClientNameBytes = 64;
inline constexpr size_t kMaxClassNameBytes = 32;
inline constexpr size_t kMaxReasonBytes = 512;
inline constexpr size_t kMaxCounterNameBytes = 64;
inline constexpr size_t kMaxTextChunkBytes = 48 * 1024;
inline constexpr uint32_t kMaxListEntries = 256;  // per kListQps/kStats reply
inline constexpr uint32_t kMaxCounters = 512;

// Queue and CQ depths a client may ask for (power of two is rounded up by the daemon).
inline constexpr uint32_t kMaxQueueEntries = 1u << 16;
inline constexpr uint32_t kMax24Bit = 0xFFFFFF;  // QPN and PSN are 24-bit on the wire
// Memory keys. conduitd gives a client's MR the lkey and rkey (index << 8) | a random byte,
// with an index below kClientKeyIndexEnd; keys from kEngineKeyBase up are the engine's own
// (its inline-data buffers, kEngineKeyBase | QPN), never a client's.
inline constexpr uint32_t kEngineKeyBase = 0xFF000000u;
inline constexpr uint32_t kClientKeyIndexEnd = kEngineKeyBase >> 8;

enum class MsgType : uint16_t {
  kAttach = 1,
  kDetach = 2,
  kCreateCq = 3,
  kDestroyCq = 4,
  kCreateQp = 5,
  kDestroyQp = 6,
  kRegMr = 7,
  kDeregMr = 8,
  kModifyQp = 9,
  kQueryQp = 10,
  // Operator requests (conduitctl); need no attach.
  kStats = 11,
  kStatus = 12,
  kListQps = 13,
  kPolicyShow = 14,
  kPolicyReload = 15,
  // Connection manager (daemon-to-daemon QP set-up by service number).
  kCmListen = 16,
  kCmUnlisten = 17,
  kCmConnect = 18,
  kCmAccept = 19,
  kCmReject = 20,
  kCmDisconnect = 21,
  kCmPollEvent = 22,
};
inline constexpr uint16_t kMaxMsgType = 22;

const char* msg_type_name(MsgType t);

// Verbs numbering, so a perftest-style tool maps 1:1.
enum class QpState : uint8_t {
  kReset = 0,
  kInit = 1,
  kRtr = 2,
  kRts = 3,
  kSqd = 4,  // reported only
  kSqe = 5,  // reported only
  kError = 6,
};
const char* qp_state_name(QpState s);
// A GID as conduitctl prints it: "198.18.0.2" for an IPv4-mapped GID, RFC 5952
// IPv6 text otherwise ("fe80::c0:12"), "-" for all zeros (no peer yet).
std::string gid_string(const std::array<uint8_t, 16>& gid);

// Memory and QP access flags (same bit values as ibv_access_flags).
inline constexpr uint32_t kAccessLocalWrite = 1u << 0;
inline constexpr uint32_t kAccessRemoteWrite = 1u << 1;
inline constexpr uint32_t kAccessRemoteRead = 1u << 2;
inline constexpr uint32_t kAccessRemoteAtomic = 1u << 3;
inline constexpr uint32_t kAccessAll =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

// ModifyQp attribute mask: which QpAttr fields the request sets. Fields outside
// the mask must be zero, so a client bug shows up as an error, not a surprise.
inline constexpr uint32_t kAttrState = 1u << 0;
inline constexpr uint32_t kAttrAccess = 1u << 1;
inline constexpr uint32_t kAttrPathMtu = 1u << 2;
inline constexpr uint32_t kAttrDestQpn = 1u << 3;
inline constexpr uint32_t kAttrRqPsn = 1u << 4;
inline constexpr uint32_t kAttrSqPsn = 1u << 5;
inline constexpr uint32_t kAttrDgid = 1u << 6;
inline constexpr uint32_t kAttrTimeout = 1u << 7;
inline constexpr uint32_t kAttrRetryCnt = 1u << 8;
inline constexpr uint32_t kAttrRnrRetry = 1u << 9;
inline constexpr uint32_t kAttrMinRnrTimer = 1u << 10;
inline constexpr uint32_t kAttrMaxRdAtomic = 1u << 11;      // READs in flight as requester
inline constexpr uint32_t kAttrMaxDestRdAtomic = 1u << 12;  // READs served at once as responder
inline constexpr uint32_t kAttrAll = (1u << 13) - 1;
inline constexpr uint8_t kMaxRdAtomic = 16;  // both depths: 1..16

// Path MTU as the verbs enum: 1=256, 2=512, 3=1024, 4=2048, 5=4096 bytes.
inline constexpr uint8_t kMinPathMtu = 1;
inline constexpr uint8_t kMaxPathMtu = 5;
inline constexpr uint32_t path_mtu_bytes(uint8_t mtu_enum) { return 128u << mtu_enum; }

struct QpAttr {
  uint32_t mask = 0;  // kAttr*
  QpState state = QpState::kReset;
  uint32_t access = 0;             // kAccess*
  uint8_t path_mtu = 0;            // verbs enum, 1..5
  uint32_t dest_qpn = 0;           // remote QPN, 24 bit
  uint32_t rq_psn = 0;             // first PSN expected from the peer, 24 bit
  uint32_t sq_psn = 0;             // first PSN we send, 24 bit
  std::array<uint8_t, 16> dgid{};  // remote GID (IPv4-mapped IPv6 for RoCEv2 over IPv4)
  uint8_t timeout = 0;             // local ACK timeout 4.096 us * 2^timeout; 0..31 (0 = infinite)
  uint8_t retry_cnt = 0;           // 0..7
  uint8_t rnr_retry = 0;           // 0..7 (7 = infinite)
  uint8_t min_rnr_timer = 0;       // 0..31, IB encoding
  uint8_t max_rd_atomic = 0;       // 1..kMaxRdAtomic
  uint8_t max_dest_rd_atomic = 0;  // 1..kMaxRdAtomic
  bool operator==(const QpAttr&) const = default;
};

// ---- requests ----------------------------------------------------------------
struct AttachRequest {
  uint32_t shm_abi_version = 0;  // the region layout version the client was built for
  uint64_t region_bytes = 0;     // memory the client wants to register; 0 = daemon default
  std::string client_name;       // for logs and conduitctl; may be empty
  bool operator==(const AttachRequest&) const = default;
};
struct DetachRequest {
  bool operator==(const DetachRequest&) const = default;
};
struct CreateCqRequest {
  uint32_t entries = 0;       // 1..kMaxQueueEntries
  bool wants_wakeup = false;  // the reply carries the CQ's wakeup pipe (SCM_RIGHTS)
  bool operator==(const CreateCqRequest&) const = default;
};
struct DestroyCqRequest {
  uint32_t cq_id = 0;
  bool operator==(const DestroyCqRequest&) const = default;
};
struct CreateQpRequest {
  uint32_t send_cq = 0;
  uint32_t recv_cq = 0;
  uint32_t sq_entries = 0;    // 1..kMaxQueueEntries
  uint32_t rq_entries = 0;    // 1..kMaxQueueEntries
  std::string traffic_class;  // policy class name; empty = the policy's default class
  bool operator==(const CreateQpRequest&) const = default;
};
struct DestroyQpRequest {
  uint32_t qpn = 0;
  bool operator==(const DestroyQpRequest&) const = default;
};
struct RegMrRequest {
  uint64_t offset = 0;  // from the region base; must lie inside the region's arena
  uint64_t length = 0;  // > 0
  uint32_t access = 0;  // kAccess*
  bool operator==(const RegMrRequest&) const = default;
};
struct DeregMrRequest {
  uint32_t lkey = 0;
  bool operator==(const DeregMrRequest&) const = default;
};
struct ModifyQpRequest {
  uint32_t qpn = 0;
  QpAttr attr;
  bool operator==(const ModifyQpRequest&) const = default;
};
struct QueryQpRequest {
  uint32_t qpn = 0;
  bool operator==(const QueryQpRequest&) const = default;
};
struct StatsRequest {
  bool operator==(const StatsRequest&) const = default;
};
struct StatusRequest {
  bool operator==(const StatusRequest&) const = default;
};
struct ListQpsRequest {
  uint32_t start_qpn = 0;    // first QPN to list (paging cursor)
  uint32_t max_entries = 0;  // 1..kMaxListEntries
  bool operator==(const ListQpsRequest&) const = default;
};
struct PolicyShowRequest {
  uint64_t offset = 0;  // byte offset into the policy text (paging cursor)
  bool operator==(const PolicyShowRequest&) const = default;
};
struct PolicyReloadRequest {
  bool operator==(const PolicyReloadRequest&) const = default;
};

// ---- connection manager --------------------------------------------------------
// The daemon connects a QP to a QP behind another conduitd: the active side
// names the peer daemon's IPv4 address and a service number, the passive side
// listens on that service and accepts or rejects each request. Results and
// incoming requests arrive as CmEvents: the client fetches them with
// kCmPollEvent when the attach reply's third descriptor (an eventfd) is readable.

// Why a connection failed (CmEvent::reason); the values of the wire's REJ
// reasons (daemon/cm/cm_message.h) plus kCmTimeout.
inline constexpr uint16_t kCmNoListener = 1;  // nobody listens on that service at the peer
inline constexpr uint16_t kCmQuota = 2;       // the peer is out of connections or QPs
inline constexpr uint16_t kCmPolicy = 3;      // the peer's policy refuses it
inline constexpr uint16_t kCmRefused = 4;     // the listening application said no
inline constexpr uint16_t kCmTimeout = 5;     // no answer within the retry budget
inline constexpr uint16_t kCmInvalid = 6;     // the peer found the request invalid
inline constexpr uint16_t kCmMaxReason = 6;
inline constexpr size_t kMaxCmPrivateBytes = 64;
// A peer address of the connection-manager messages (host byte order) as a dotted quad.
inline std::string ipv4_text(uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 0xFF) + "." +
         std::to_string((ip >> 8) & 0xFF) + "." + std::to_string(ip & 0xFF);
}
// Dotted quad for an IPv4-mapped address, RFC 5952 text for IPv6.
std::string cm_addr_text(const CmAddr& a);
inline constexpr uint32_t kCmFlagSelectiveRepeat = 1u << 0;  // offer selective repeat
// Connect with the IB CM (an rdma_cm peer); on a request or connection: it came that way.
inline constexpr uint32_t kCmFlagRdmaCm = 1u << 1;
inline constexpr uint32_t kCmFlagsAll = kCmFlagSelectiveRepeat | kCmFlagRdmaCm;
// kRejected with reason kCmRefused, from conduitd only: an IB CM peer refused it as a stale
// connection (REJ reason 10): the QP is still in an older connection there, which the peer
// now ends. A flag, not a reason, so a library that does not know it still reads kCmRefused.
inline constexpr uint32_t kCmFlagStale = 1u << 2;
// kRequest, kEstablished, kRejected, from conduitd only: the peer's private data went on past
// kMaxCmPrivateBytes (IB CM: a non-zero byte later in the field, which carries no length: a
// REJ's holds 148 bytes, a REP's 196); private_data is its first kMaxCmPrivateBytes. A flag
// in a field a library does not check, so the message is unchanged (no version bump).
inline constexpr uint32_t kCmFlagPrivateTruncated = 1u << 3;

// The QP parameters a client offers when it connects or accepts.
struct CmQpOffer {
  uint32_t qpn = 0;
  uint32_t access = 0;                // kAccess*: what the peer may do to this QP
  uint8_t path_mtu = 0;               // verbs enum 1..5; 0: the daemon's transport.pmtu
  uint32_t flags = 0;                 // kCmFlag*
  std::vector<uint8_t> private_data;  // at most kMaxCmPrivateBytes, for the peer's application
  bool operator==(const CmQpOffer&) const = default;
};
struct CmListenRequest {
  uint64_t service = 0;
  bool operator==(const CmListenRequest&) const = default;
};
struct CmUnlistenRequest {
  uint64_t service = 0;
  bool operator==(const CmUnlistenRequest&) const = default;
};
struct CmConnectRequest {
  CmAddr peer{};  // the peer's conduitd (or verbs host): IPv4-mapped or IPv6
  uint64_t service = 0;
  CmQpOffer offer;
  bool operator==(const CmConnectRequest&) const = default;
};
struct CmAcceptRequest {
  uint32_t conn = 0;  // CmEvent::conn of a kCmEventRequest
  CmQpOffer offer;
  bool operator==(const CmAcceptRequest&) const = default;
};
struct CmRejectRequest {
  uint32_t conn = 0;
  uint16_t reason = kCmRefused;       // kCmRefused, kCmQuota or kCmPolicy
  std::vector<uint8_t> private_data;  // at most kMaxCmPrivateBytes, for the requester
  bool operator==(const CmRejectRequest&) const = default;
};
struct CmDisconnectRequest {
  uint32_t qpn = 0;  // the QP whose connection ends (also one whose peer already ended it)
  bool operator==(const CmDisconnectRequest&) const = default;
};
struct CmPollEventRequest {
  bool operator==(const CmPollEventRequest&) const = default;
};

// Alternative index i carries MsgType i+1.
using Request =
    std::variant<AttachRequest, DetachRequest, CreateCqRequest, DestroyCqRequest, CreateQpRequest,
                 DestroyQpRequest, RegMrRequest, DeregMrRequest, ModifyQpRequest, QueryQpRequest,
                 StatsRequest, StatusRequest, ListQpsRequest, PolicyShowRequest,
                 PolicyReloadRequest, CmListenRequest, CmUnlistenRequest, CmConnectRequest,
                 CmAcceptRequest, CmRejectRequest, CmDisconnectRequest, CmPollEventRequest>;

struct RequestMessage {
  uint32_t seq = 0;
  Request body;
  MsgType type() const { return static_cast<MsgType>(body.index() + 1); }
};

// ---- replies -------------------------------------------------------------------
struct AttachReply {
  uint32_t client_id = 0;
  uint32_t shm_abi_version = 0;  // what the daemon speaks
  uint64_t region_bytes = 0;     // size of the memfd passed along
  uint32_t max_qps = 0;          // this client's quotas
  uint32_t max_cqs = 0;
  uint32_t max_mrs = 0;
  uint64_t max_mr_bytes = 0;
  bool operator==(const AttachReply&) const = default;
};
struct DetachReply {
  bool operator==(const DetachReply&) const = default;
};
struct CreateCqReply {
  uint32_t cq_id = 0;    // also the CQ slot in the region (shm/layout.h ring table)
  uint32_t entries = 0;  // ring depth (the region's cq_depth, a power of two)
  bool operator==(const CreateCqReply&) const = default;
};
struct DestroyCqReply {
  bool operator==(const DestroyCqReply&) const = default;
};
struct CreateQpReply {
  uint32_t qpn = 0;         // 24-bit, unique in this daemon
  uint32_t qp_slot = 0;     // the QP's SQ/RQ rings in the region (shm/layout.h ring table)
  uint32_t sq_entries = 0;  // ring depths (the region's sq_depth / rq_depth)
  uint32_t rq_entries = 0;
  bool operator==(const CreateQpReply&) const = default;
};
struct DestroyQpReply {
  bool operator==(const DestroyQpReply&) const = default;
};
struct RegMrReply {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  uint64_t iova = 0;  // address peers name this MR's first byte by (RDMA remote_addr)
  bool operator==(const RegMrReply&) const = default;
};
struct DeregMrReply {
  bool operator==(const DeregMrReply&) const = default;
};
struct ModifyQpReply {
  bool operator==(const ModifyQpReply&) const = default;
};
struct QueryQpReply {
  uint32_t qpn = 0;
  std::string traffic_class;
  QpAttr attr;  // mask = kAttrAll; state is the current state
  bool operator==(const QueryQpReply&) const = default;
};
struct Counter {
  std::string name;  // [A-Za-z0-9_.-], e.g. "control.requests"
  uint64_t value = 0;
  bool operator==(const Counter&) const = default;
};
struct StatsReply {
  std::vector<Counter> counters;
  bool operator==(const StatsReply&) const = default;
};
struct StatusReply {
  std::string version;  // conduitd version
  uint64_t uptime_s = 0;
  uint8_t engine_running = 0;  // 0: control plane only
  std::string engine_state;    // one line a person reads
  uint32_t clients = 0;
  uint32_t qps = 0;
  std::string policy_path;
  bool operator==(const StatusReply&) const = default;
};
struct QpSummary {
  uint32_t qpn = 0;
  uint32_t client_id = 0;
  uint32_t pid = 0;
  QpState state = QpState::kReset;
  uint32_t dest_qpn = 0;
  std::array<uint8_t, 16> dgid{};
  std::string traffic_class;
  uint64_t rate_bps = 0;   // current DCQCN rate; 0 when unknown
  uint32_t alpha_ppm = 0;  // DCQCN alpha in parts per million
  uint64_t cnps_rx = 0;    // CNPs received: congestion on the way to the peer
  uint64_t cnps_tx = 0;    // CNPs sent: CE-marked packets from the peer
  uint64_t retransmits = 0;
  uint64_t tx_bytes = 0;
  uint64_t rx_bytes = 0;
  bool operator==(const QpSummary&) const = default;
};
struct ListQpsReply {
  std::vector<QpSummary> qps;
  uint32_t next_qpn = 0;  // 0: no more
  bool operator==(const ListQpsReply&) const = default;
};
struct PolicyShowReply {
  uint64_t total_bytes = 0;
  std::string chunk;  // text from the requested offset, at most kMaxTextChunkBytes
  bool operator==(const PolicyShowReply&) const = default;
};
struct PolicyReloadReply {
  std::string message;
  bool operator==(const PolicyReloadReply&) const = default;
};
struct CmListenReply {
  bool operator==(const CmListenReply&) const = default;
};
struct CmUnlistenReply {
  bool operator==(const CmUnlistenReply&) const = default;
};
struct CmConnectReply {
  uint32_t conn = 0;  // the connection; its outcome comes as a CmEvent
  bool operator==(const CmConnectReply&) const = default;
};
struct CmAcceptReply {
  bool operator==(const CmAcceptReply&) const = default;
};
struct CmRejectReply {
  bool operator==(const CmRejectReply&) const = default;
};
struct CmDisconnectReply {
  bool operator==(const CmDisconnectReply&) const = default;
};
enum class CmEventKind : uint8_t {
  kNone = 0,
  kRequest = 1,       // a peer connects to a service we listen on: accept or reject `conn`
  kEstablished = 2,   // `qpn` is connected (RTS) to `remote_qpn` at `peer`
  kRejected = 3,      // the connection failed before it was up; `reason` says why
  kDisconnected = 4,  // an established connection ended (our disconnect, or the peer's)
};
inline constexpr uint8_t kMaxCmEventKind = 4;
struct CmEvent {
  CmEventKind kind = CmEventKind::kNone;
  uint32_t conn = 0;
  uint32_t qpn = 0;  // our QP (kEstablished, kRejected, kDisconnected)
  CmAddr peer{};     // IPv4-mapped or IPv6
  uint64_t service = 0;
  uint32_t remote_qpn = 0;  // kRequest, kEstablished
  uint32_t pmtu_bytes = 0;  // kRequest: the peer's offer; kEstablished: negotiated
  uint32_t flags = 0;   // kCmFlag*: kRequest offered; kEstablished agreed; kRejected kCmFlagStale
  uint16_t reason = 0;  // kRejected: kCm* reason
  std::vector<uint8_t> private_data;  // kRequest, kEstablished: the peer's
  bool operator==(const CmEvent&) const = default;
};
struct CmPollEventReply {
  CmEvent event;  // kind kNone: nothing pending
  bool operator==(const CmPollEventReply&) const = default;
};

// Same alternative order as Request.
using ReplyBody =
    std::variant<AttachReply, DetachReply, CreateCqReply, DestroyCqReply, CreateQpReply,
                 DestroyQpReply, RegMrReply, DeregMrReply, ModifyQpReply, QueryQpReply, StatsReply,
                 StatusReply, ListQpsReply, PolicyShowReply, PolicyReloadReply, CmListenReply,
                 CmUnlistenReply, CmConnectReply, CmAcceptReply, CmRejectReply, CmDisconnectReply,
                 CmPollEventReply>;

struct ReplyMessage {
  uint32_t seq = 0;
  MsgType type = MsgType::kAttach;  // the request this answers
  int32_t status = 0;               // 0 or negative errno
  std::string reason;               // set when status < 0
  ReplyBody body;                   // meaningful when status == 0
};

}  // namespace conduit::proto
