// The InfiniBand connection manager's messages (IBTA vol. 1, chapter 12), as
// the Linux kernel's ib_cm and rdma_cm send them to RoCE v2 peers: 256-byte
// MADs of the CM class (0x07, class version 2, method Send) on the GSI (QP 1),
// in UD SEND_ONLY packets with a DETH (Q_Key 0x80010000). This is the second
// dialect of cm::ConnectionManager, next to conduit's native messages
// (cm_message.h): with it a verbs application on another host connects to a
// conduit listener with rdma_connect(), and a conduit client connects to an
// rdma_listen()ing one.
//
// MAD header (24 bytes): base version 1, class 0x07, class version 2, method
// 0x03, status 0, class-specific 0, transaction id (8), attribute id (REQ
// 0x0010, MRA 0x0011, REJ 0x0012, REP 0x0013, RTU 0x0014, DREQ 0x0015, DREP
// 0x0016, SIDR_REQ 0x0017, SIDR_REP 0x0018, LAP 0x0019, APR 0x001A), reserved,
// attribute modifier. The
// message body starts at byte 24; the offsets below are from there, bit fields
// from the most significant bit.
//
//   REQ  0 local comm id | 8 service id | 16 local CA GUID | 28 Q_Key |
//        32 local QPN (24) + responder resources | 36 local EECN + initiator
//        depth | 43 remote CM response timeout (5) + transport (2: RC 0) +
//        end-to-end flow control | 44 starting PSN (24) + local CM response
//        timeout (5) + retry count (3) | 48 P_Key | 50 path MTU (4) + RDC
//        exists + RNR retry count (3) | 51 max CM retries (4) + SRQ +
//        extended transport (3) | 52 primary path: LIDs, local GID (56),
//        remote GID (72), flow label, rate, traffic class, hop limit, SL,
//        local ACK timeout (95, 5 bits) | 96 alternate path (zero) |
//        140 private data (92)
//   REP  0 local comm id | 4 remote comm id | 8 Q_Key | 12 local QPN (24) |
//        20 starting PSN (24) | 24 responder resources | 25 initiator depth |
//        26 target ACK delay (5) + failover (2) + flow control | 27 RNR retry
//        count (3) + SRQ | 28 local CA GUID | 36 private data (196)
//   REJ  0 local comm id | 4 remote comm id | 8 message rejected (2) |
//        9 info length (7) | 10 reason | 12 ARI (72) | 84 private data (148)
//   MRA  0 local comm id | 4 remote comm id | 8 message MRAed (2: REQ 0, REP 1) |
//        9 service timeout (5) | 10 private data
//   RTU, DREP  0 local comm id | 4 remote comm id | 8 private data
//   DREQ       0 local comm id | 4 remote comm id | 8 remote QPN (24) | 12 private data
//   SIDR_REQ   0 request id | 4 P_Key | 8 service id | 16 private data (216)
//   SIDR_REP   0 request id | 4 status | 5 additional info length | 8 QPN (24) |
//              12 service id | 20 Q_Key | 24 additional info (72) | 96 private data (136)
//   LAP        0 local comm id | 4 remote comm id | 12 remote QPN (24) + remote CM response
//              timeout (5) | 20 alternate path (44) | 64 private data (168)
//   APR        0 local comm id | 4 remote comm id | 8 additional info length | 9 AP status |
//              12 additional info (72) | 84 private data (148)
//
// SIDR resolves a service id to a UD QP (rdma_cm's UDP and IPoIB port spaces). conduit
// has no UD QPs: every SIDR_REQ is answered with status 'unsupported', as Linux's ib_cm
// answers one that no listener matches. Nor does it run alternate paths: a LAP
// for an established connection is answered with APR 'unsupported' (IBTA's
// answer; Linux's own ib_cm drops LAP and APR on RoCE ports, and has not sent a
// LAP since ib_send_cm_lap was removed).
//
// rdma_cm maps its TCP port space to service ids 0x0000000001060000 + port
// (its IB port space to 0x00000000013F0000 + port) and starts a REQ's private
// data with a 36-byte header: version 0, IP version << 4, the source port,
// then source and destination address (IPv4 in the last 4 of 16 bytes, or
// IPv6). Such a REQ is presented to listeners as service `port`, with the
// application's private data after that header. The IB CM does not carry private-data
// lengths: a parsed message reports the whole field, cut at kMaxPrivateBytes, and says
// (private_truncated) when a byte past that was not zero: the peer sent more (a REJ's field
// holds 148 bytes, a REP's 196), of which the owner gets the first kMaxPrivateBytes.
//
// Pure: standard library only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cm/cm_message.h"

namespace conduit::cm {

inline constexpr size_t kMadBytes = 256;
inline constexpr size_t kMadHeaderBytes = 24;
inline constexpr uint8_t kMgmtClassCm = 0x07;
inline constexpr uint8_t kCmClassVersion = 2;
inline constexpr uint8_t kMadMethodSend = 0x03;
inline constexpr uint8_t kMadMethodGet = 0x01;
inline constexpr uint8_t kMadMethodSet = 0x02;
inline constexpr uint8_t kMadMethodGetResp = 0x81;
inline constexpr uint16_t kMadStatusUnsupportedMethodAttr = 0x000C;
inline constexpr uint32_t kGsiQkey = 0x80010000;
inline constexpr uint64_t kRdmaCmServiceTcp = 0x0000000001060000;  // RDMA_PS_TCP << 16
inline constexpr uint64_t kRdmaCmServiceIb = 0x00000000013F0000;   // RDMA_PS_IB << 16
inline constexpr size_t kRdmaCmHeaderBytes = 36;
// The service timeout of the MRA we send for a REQ the owner has not answered yet: Linux's
// (CM_MRA_SETTING in cm.c, CMA_CM_MRA_SETTING's low bits before): 4.096 us * 2^24 (68.7 s), which
// Linux's requester waits as cm_convert_to_ms rounds it, 2^16 ms (65.5 s), plus its path's
// timeout (ib_mra_wait_ns).
inline constexpr uint8_t kIbMraServiceTimeout = 24;
// What our REQ advertises (4.096 us * 2^n). Remote CM response timeout: how long we wait for
// the REP (1024 ms as Linux counts it, ib_cm_timeout_ns); our REQ and our active side's DREQ
// are resent after it plus twice the packet life time the REQ's primary local ACK timeout
// stands for (ib_req_resend_ns: 1088 ms for our QPs' default ACK timeout 14), as Linux's
// requester resends its REQ and every later MAD on the timeout it took from its REQ. Local:
// how soon we answer a REP (at once; 256 ms): the Linux ib_cm resends a lost REP after it and
// ignores resent REQs meanwhile, so rdma_cm's 20 (4.1 s) would hold up for 4.1 s every
// connection whose REP is lost. Max CM retries: rdma_cm's 15; our REQ and active DREQ are
// resent that many times (an unanswered REQ fails after 16 x 1.088 s, 17.4 s).
inline constexpr uint8_t kIbReqRemoteCmResponseTimeout = 18;
inline constexpr uint8_t kIbReqLocalCmResponseTimeout = 16;
inline constexpr uint8_t kIbReqMaxCmRetries = 15;
// An IB CM timeout field (4.096 us * 2^n) as Linux's ib_cm waits it: cm_convert_to_ms rounds
// it to 2^(n-8) ms, 1 ms for n up to 8 (4.096 us * 2^n is 1.024 ms * 2^(n-8), 2.4% more).
// n is a 5-bit field: only its low 5 bits count.
constexpr uint64_t ib_cm_timeout_ns(uint8_t n) {
  const unsigned field = n & 0x1Fu;
  return uint64_t{1'000'000} << (field > 8 ? field - 8 : 0);
}
// The packet life time a REQ's primary local ACK timeout stands for, as the responder reads it
// (Linux's cm_format_paths_from_req: that minus 1, 0 stays 0).
constexpr uint8_t ib_req_packet_life_time(uint8_t local_ack_timeout) {
  return static_cast<uint8_t>(local_ack_timeout - (local_ack_timeout > 0 ? 1 : 0));
}
// How often a requester resends its REQ (and, active, its DREQ): Linux's ib_send_cm_req sets
// timeout_ms = 2 x cm_convert_to_ms(path packet life time) + cm_convert_to_ms(remote CM
// response timeout), the MAD layer's wait before each of its max CM retries resends.
constexpr uint64_t ib_req_resend_ns(uint8_t remote_cm_response_timeout, uint8_t packet_life_time) {
  return 2 * ib_cm_timeout_ns(packet_life_time) + ib_cm_timeout_ns(remote_cm_response_timeout);
}
// The timeout Linux's ib_cm keeps for a connection's path, cm_av.timeout: its packet life time
// plus 1 (cm_init_av_by_path), that life time the one a REQ's primary local ACK timeout stands
// for (for our REQ: our QP's; for our REP: the peer's REQ's, as cm_format_paths_from_req reads
// it). 0 and 1 stand for 1, n for n otherwise.
constexpr uint8_t ib_path_av_timeout(uint8_t local_ack_timeout) {
  return static_cast<uint8_t>(ib_req_packet_life_time(local_ack_timeout & 0x1F) + 1);
}
// How long Linux's cm_mra_handler makes the requester (MRA of the REQ) or responder (of the REP)
// wait after an MRA: cm_convert_to_ms of its service timeout plus that of the path's av.timeout
// (ib_modify_mad: for every later resend too, until the 2024 rdma-next MAD series). Linux's own
// MRA, service timeout 24 (kIbMraServiceTimeout), with our QPs' default ACK timeout 14: 65.536 s +
// 64 ms.
constexpr uint64_t ib_mra_wait_ns(uint8_t service_timeout, uint8_t local_ack_timeout) {
  return ib_cm_timeout_ns(service_timeout) +
         ib_cm_timeout_ns(ib_path_av_timeout(local_ack_timeout));
}
// Private data an rdma_cm REQ leaves the application after its header.
inline constexpr size_t kRdmaCmReqPrivateBytes = 92 - kRdmaCmHeaderBytes;

// IB REJ reason codes (Table 109) that conduit sends or maps.
enum IbRejCode : uint16_t {
  kIbRejNoQp = 1,
  kIbRejNoResources = 3,
  kIbRejTimeout = 4,
  kIbRejUnsupported = 5,
  kIbRejInvalidServiceId = 8,
  kIbRejInvalidTransport = 9,
  kIbRejStaleConn = 10,
  kIbRejInvalidMtu = 26,
  kIbRejInsufficientRespResources = 27,
  kIbRejConsumerDefined = 28,
};
// SIDR_REP status (Table 120; Linux's ib_cm_sidr_status).
enum IbSidrStatus : uint8_t {
  kIbSidrSuccess = 0,
  kIbSidrUnsupported = 1,  // no service by that id here
};
// APR AP status (Table 116; Linux's ib_cm_apr_status).
enum IbAprStatus : uint8_t {
  kIbAprSuccess = 0,
  kIbAprUnsupported = 2,  // alternate paths are not supported
};
// The message a REJ rejects or an MRA acknowledges (REJ's "message rejected",
// MRA's "message MRAed").
enum IbCmMsg : uint8_t {
  kIbMsgReq = 0,
  kIbMsgRep = 1,
  kIbMsgOther = 2,
};
RejectReason reject_reason_from_ib(uint16_t code);
uint16_t ib_rej_code_for(RejectReason r);

// Parses one MAD (the UD payload: exactly kMadBytes, or more with trailing
// bytes ignored). REQ: m.service is the listener's service (the rdma_cm port
// or the raw service id), m.params the requester's QP (caps 0: no selective
// repeat over the IB CM). REP: m.params.pmtu_bytes is 0 (a REP carries none).
// SIDR_REQ, SIDR_REP: m.service is the raw service id. LAP: the ids only. DREQ:
// m.params.qpn is the remote QPN it names (the receiver's QP).
// A REQ conduit refuses (UC or XRC, or an rdma_cm header of another version or IP
// family) is kRefusedReq with m.src_conn, m.service and the TID filled in, for the REJ.
// ClassPortInfo (method Send) is kUnsupported; a Get or Set is kBadClass (see below).
CmParseError parse_ib_cm_mad(const uint8_t* data, size_t len, CmMessage& out);

// A MAD of any class asking Get or Set (base version 1). Linux's ib_cm takes method Send
// only; its MAD layer answers a Get or Set no agent takes (a CM ClassPortInfo Get among
// them) with the request echoed as GetResp, status 0x000C "unsupported method/attribute
// combination" (generate_unmatched_resp). build_ib_mad_unsupported_resp writes that
// answer (kMadBytes) for request; is_ib_mad_unsupported_resp recognises one.
bool is_ib_mad_get_or_set(const uint8_t* data, size_t len);
size_t build_ib_mad_unsupported_resp(const uint8_t* request, uint8_t* out);
bool is_ib_mad_unsupported_resp(const uint8_t* data, size_t len);

// What build_ib_cm_mad needs beyond the message: both ends' addresses (GIDs
// and the rdma_cm header of a REQ), our CA GUID and, for a DREQ, the peer's QPN.
struct IbCmBuildContext {
  CmAddr local_addr{};  // our address, IPv4-mapped or IPv6 (the GID the peer sees)
  CmAddr peer_addr{};
  uint64_t ca_guid = 0;
  uint32_t peer_qpn = 0;  // DREQ
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
};
// Writes m as a MAD into out (kMadBytes); returns kMadBytes. A REQ with
// m.ib.rdma_cm set gets the rdma_cm header and service id kRdmaCmServiceTcp +
// m.service (which must then be <= 0xFFFF, else 0 is returned); without it the
// service id is m.service itself.
size_t build_ib_cm_mad(const CmMessage& m, const IbCmBuildContext& ctx, uint8_t* out);

// 256, 512, 1024, 2048, 4096 <-> the IB MTU enum 1..5; 0 when not one of them.
uint8_t ib_mtu_enum(uint32_t bytes);
uint16_t ib_mtu_bytes(uint8_t mtu_enum);

}  // namespace conduit::cm
