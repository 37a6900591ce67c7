#include "cm/ib_cm_mad.h"

#include <algorithm>
#include <cstring>

#include "cm/cm_bytes.h"

namespace conduit::cm {
namespace {

using bytes::get16;
using bytes::get24;
using bytes::get32;
using bytes::get64;
using bytes::put16;
using bytes::put24;
using bytes::put32;
using bytes::put64;

enum AttrId : uint16_t {
  kAttrClassPortInfo = 0x0001,
  kAttrReq = 0x0010,
  kAttrMra = 0x0011,
  kAttrRej = 0x0012,
  kAttrRep = 0x0013,
  kAttrRtu = 0x0014,
  kAttrDreq = 0x0015,
  kAttrDrep = 0x0016,
  kAttrSidrReq = 0x0017,
  kAttrSidrRep = 0x0018,
  kAttrLap = 0x0019,
  kAttrApr = 0x001A,
};

// Body offsets (from the end of the MAD header) and field sizes.
constexpr size_t kReqPrivateAt = 140;
constexpr size_t kReqPrivateBytes = 92;
constexpr size_t kRepPrivateAt = 36;
constexpr size_t kRejAriAt = 12;
constexpr uint8_t kRejAriGuidBytes = 8;
constexpr size_t kRejPrivateAt = 84;
constexpr size_t kRejPrivateBytes = 148;
constexpr uint8_t kRdmaCmVersion = 0x00;
constexpr uint16_t kPermissiveLid = 0xFFFF;
constexpr uint8_t kTargetAckDelay = 15;
constexpr uint8_t kRate10Gbps = 3;

bool is_rdma_cm_service(uint64_t sid) {
  const uint64_t space = sid & ~uint64_t{0xFFFF};
  return space == kRdmaCmServiceTcp || space == kRdmaCmServiceIb;
}

void copy_private(const uint8_t* field, size_t field_bytes, CmMessage& out) {
  const size_t n = std::min(field_bytes, kMaxPrivateBytes);
  std::memcpy(out.private_data.data(), field, n);
  out.private_len = static_cast<uint8_t>(n);
  out.private_truncated =
      std::any_of(field + n, field + field_bytes, [](uint8_t v) { return v != 0; });
}

CmAddr addr_at(const uint8_t* p) {
  CmAddr a;
  std::memcpy(a.data(), p, a.size());
  return a;
}

CmParseError parse_req(const uint8_t* b, CmMessage& out) {
  out.type = CmType::kReq;
  out.src_conn = get32(b + 0);
  out.dst_conn = 0;
  if (out.src_conn == 0) return CmParseError::kBadConnId;
  const uint64_t sid = get64(b + 8);
  out.ib.ca_guid = get64(b + 16);
  QpParams& p = out.params;
  p.qpn = get24(b + 32);
  p.responder_resources = b[35];
  p.initiator_depth = b[39];
  out.ib.req_response_timeout = b[43] >> 3;
  const uint8_t transport = (b[43] >> 1) & 0x3;
  p.psn = get24(b + 44);
  out.ib.req_local_response_timeout = b[47] >> 3;
  p.retry_cnt = b[47] & 0x7;
  p.pmtu_bytes = ib_mtu_bytes(b[50] >> 4);
  p.rnr_retry = b[50] & 0x7;
  out.ib.req_max_retries = b[51] >> 4;
  const bool srq = (b[51] >> 3) & 1;
  const uint8_t ext_transport = b[51] & 0x7;
  p.timeout = b[95] >> 3;
  p.caps = 0;
  const uint8_t* priv = b + kReqPrivateAt;
  out.service = is_rdma_cm_service(sid) ? sid & 0xFFFF : sid;
  // RC only: UC, RD and XRC connections are not conduit's. Refused (the service and ids
  // are filled in for the REJ), as a Linux rdma_cm listener refuses another QP type.
  if (transport != 0 || ext_transport != 0) return CmParseError::kRefusedReq;
  (void)srq;  // the requester's own receive queue: nothing for us to do
  if (p.qpn < 2 || p.pmtu_bytes == 0) return CmParseError::kBadField;
  out.ib.src_addr = addr_at(b + 56);
  out.ib.dst_addr = addr_at(b + 72);
  if (is_rdma_cm_service(sid)) {
    // rdma_cm's header: version 0, IPv4 or IPv6, then the addresses it connects
    // between (IPv4 in the last 4 of 16 bytes). Another version or family: refused, as
    // Linux's rdma_cm refuses it (cma_save_ip_info fails, ib_cm sends REJ).
    const uint8_t ip_version = priv[1] >> 4;
    if (priv[0] != kRdmaCmVersion || (ip_version != 4 && ip_version != 6)) {
      return CmParseError::kRefusedReq;
    }
    out.ib.rdma_cm = true;
    out.ib.rdma_cm_src_port = get16(priv + 2);
    if (ip_version == 4) {
      out.ib.src_addr = cm_addr_v4(get32(priv + 4 + 12));
      out.ib.dst_addr = cm_addr_v4(get32(priv + 20 + 12));
    } else {
      out.ib.src_addr = addr_at(priv + 4);
      out.ib.dst_addr = addr_at(priv + 20);
    }
    copy_private(priv + kRdmaCmHeaderBytes, kRdmaCmReqPrivateBytes, out);
  } else {
    copy_private(priv, kReqPrivateBytes, out);
  }
  return CmParseError::kOk;
}

CmParseError parse_rep(const uint8_t* b, CmMessage& out) {
  out.type = CmType::kRep;
  out.src_conn = get32(b + 0);
  out.dst_conn = get32(b + 4);
  if (out.src_conn == 0 || out.dst_conn == 0) return CmParseError::kBadConnId;
  QpParams& p = out.params;
  p.qpn = get24(b + 12);
  p.psn = get24(b + 20);
  p.responder_resources = b[24];
  p.initiator_depth = b[25];
  p.rnr_retry = b[27] >> 5;
  p.pmtu_bytes = 0;
  p.caps = 0;
  out.ib.ca_guid = get64(b + 28);
  if (p.qpn < 2) return CmParseError::kBadField;
  copy_private(b + kRepPrivateAt, 196, out);
  return CmParseError::kOk;
}

}  // namespace

uint8_t ib_mtu_enum(uint32_t bytes) {
  switch (bytes) {
    case 256:
      return 1;
    case 512:
      return 2;
    case 1024:
      return 3;
    case 2048:
      return 4;
    case 4096:
      return 5;
    default:
      return 0;
  }
}

uint16_t ib_mtu_bytes(uint8_t mtu_enum) {
  return mtu_enum >= 1 && mtu_enum <= 5 ? static_cast<uint16_t>(128u << mtu_enum) : 0;
}

RejectReason reject_reason_from_ib(uint16_t code) {
  switch (code) {
    case kIbRejInvalidServiceId:
      return RejectReason::kNoListener;
    case kIbRejConsumerDefined:
      return RejectReason::kRefused;
    case kIbRejNoQp:
    case kIbRejNoResources:
      return RejectReason::kQuota;
    case kIbRejTimeout:
      return RejectReason::kTimeout;
    case kIbRejUnsupported:
    case kIbRejInvalidTransport:
    case kIbRejInvalidMtu:
    case kIbRejInsufficientRespResources:
      return RejectReason::kPolicy;
    default:
      // The requester's own fields the peer found wrong: comm id or instance (6, 7), the
      // primary or alternate path (12..25), RNR retry count (29), class version (31), flow
      // labels (32, 33).
      if (code == 6 || code == 7 || (code >= 12 && code <= 25) || code == 29 ||
          (code >= 31 && code <= 33)) {
        return RejectReason::kInvalid;
      }
      // Anything else (stale connection, duplicate comm id, vendor codes...) is the peer's
      // refusal: rdma_cm reports every REJ as REJECTED, which librdmacm's rdma_connect()
      // returns as ECONNREFUSED.
      return RejectReason::kRefused;
  }
}

uint16_t ib_rej_code_for(RejectReason r) {
  switch (r) {
    case RejectReason::kNoListener:
      return kIbRejInvalidServiceId;
    case RejectReason::kQuota:
      return kIbRejNoResources;
    case RejectReason::kPolicy:
      return kIbRejUnsupported;
    case RejectReason::kRefused:
      return kIbRejConsumerDefined;
    case RejectReason::kTimeout:
      return kIbRejTimeout;
    case RejectReason::kInvalid:
      return kIbRejUnsupported;
  }
  return kIbRejConsumerDefined;
}

bool is_ib_mad_get_or_set(const uint8_t* data, size_t len) {
  return len >= kMadBytes && data[0] == 1 && (data[3] == kMadMethodGet || data[3] == kMadMethodSet);
}

size_t build_ib_mad_unsupported_resp(const uint8_t* request, uint8_t* out) {
  std::memcpy(out, request, kMadBytes);
  out[3] = kMadMethodGetResp;
  put16(out + 4, kMadStatusUnsupportedMethodAttr);
  return kMadBytes;
}

bool is_ib_mad_unsupported_resp(const uint8_t* data, size_t len) {
  return len >= kMadBytes && data[0] == 1 && data[3] == kMadMethodGetResp &&
         get16(data + 4) == kMadStatusUnsupportedMethodAttr;
}

CmParseError parse_ib_cm_mad(const uint8_t* data, size_t len, CmMessage& out) {
  if (len < kMadBytes) return CmParseError::kTooShort;
  if (data[0] != 1 || data[1] != kMgmtClassCm || data[2] != kCmClassVersion ||
      data[3] != kMadMethodSend) {
    return CmParseError::kBadClass;
  }
  out = CmMessage{};
  out.ib.tid = get64(data + 8);
  const uint16_t attr = get16(data + 16);
  const uint8_t* b = data + kMadHeaderBytes;
  switch (attr) {
    case kAttrReq:
      return parse_req(b, out);
    case kAttrRep:
      return parse_rep(b, out);
    case kAttrRtu:
    case kAttrDrep:
    case kAttrDreq:
      out.type = attr == kAttrRtu    ? CmType::kRtu
                 : attr == kAttrDreq ? CmType::kDreq
                                     : CmType::kDrep;
      out.src_conn = get32(b + 0);
      out.dst_conn = get32(b + 4);
      if (attr == kAttrDreq) out.params.qpn = get24(b + 8);  // the receiver's QP
      return out.src_conn == 0 || out.dst_conn == 0 ? CmParseError::kBadConnId : CmParseError::kOk;
    case kAttrRej:
      out.type = CmType::kRej;
      out.src_conn = get32(b + 0);
      out.dst_conn = get32(b + 4);
      out.ib.rej_message = b[8] >> 6;
      out.ib.rej_code = get16(b + 10);
      out.reason = reject_reason_from_ib(out.ib.rej_code);
      // rdma_reject()'s private data (an NVMe-oF target's status, say): rdma_cm hands the
      // whole field to the requester's application, as we do.
      copy_private(b + kRejPrivateAt, kRejPrivateBytes, out);
      // The local id may be 0 (a REQ refused before an id was made). The remote one only
      // in the Linux requester's REJ(timeout) for a REQ it gave up on before any REP: its
      // own id names the request then.
      if (out.dst_conn == 0 && (out.ib.rej_code != kIbRejTimeout || out.src_conn == 0)) {
        return CmParseError::kBadConnId;
      }
      return CmParseError::kOk;
    case kAttrMra:
      out.type = CmType::kMra;
      out.src_conn = get32(b + 0);
      out.dst_conn = get32(b + 4);
      out.ib.mra_message = b[8] >> 6;
      out.ib.mra_timeout = b[9] >> 3;
      return out.dst_conn == 0 ? CmParseError::kBadConnId : CmParseError::kOk;
    case kAttrSidrReq:
      // Any request id: Linux's are a random operand xor an index, 0 included.
      out.type = CmType::kSidrReq;
      out.src_conn = get32(b + 0);
      out.service = get64(b + 8);
      return CmParseError::kOk;
    case kAttrLap:
      out.type = CmType::kLap;
      out.src_conn = get32(b + 0);
      out.dst_conn = get32(b + 4);
      return out.src_conn == 0 || out.dst_conn == 0 ? CmParseError::kBadConnId : CmParseError::kOk;
    case kAttrSidrRep:
      out.type = CmType::kSidrRep;
      out.dst_conn = get32(b + 0);
      out.ib.sidr_status = b[4];
      out.service = get64(b + 12);
      return CmParseError::kOk;
    case kAttrApr:
      out.type = CmType::kApr;
      out.src_conn = get32(b + 0);
      out.dst_conn = get32(b + 4);
      out.ib.apr_status = b[9];
      return out.src_conn == 0 || out.dst_conn == 0 ? CmParseError::kBadConnId : CmParseError::kOk;
    case kAttrClassPortInfo:
      return CmParseError::kUnsupported;
    default:
      return CmParseError::kBadType;
  }
}

size_t build_ib_cm_mad(const CmMessage& m, const IbCmBuildContext& ctx, uint8_t* out) {
  std::memset(out, 0, kMadBytes);
  out[0] = 1;
  out[1] = kMgmtClassCm;
  out[2] = kCmClassVersion;
  out[3] = kMadMethodSend;
  put64(out + 8, m.ib.tid);
  uint8_t* b = out + kMadHeaderBytes;
  put32(b + 0, m.src_conn);
  const QpParams& p = m.params;
  switch (m.type) {
    case CmType::kReq: {
      put16(out + 16, kAttrReq);
      uint64_t sid = m.service;
      if (m.ib.rdma_cm) {
        if (m.service > 0xFFFF) return 0;
        sid = kRdmaCmServiceTcp | m.service;
      }
      put64(b + 8, sid);
      put64(b + 16, ctx.ca_guid);
      put24(b + 32, p.qpn);
      b[35] = p.responder_resources;
      b[39] = p.initiator_depth;
      b[43] = static_cast<uint8_t>(kIbReqRemoteCmResponseTimeout << 3 | 1);  // RC, e2e flow control
      put24(b + 44, p.psn);
      b[47] = static_cast<uint8_t>(kIbReqLocalCmResponseTimeout << 3 | (p.retry_cnt & 0x7));
      put16(b + 48, 0xFFFF);  // the default P_Key
      b[50] = static_cast<uint8_t>(ib_mtu_enum(p.pmtu_bytes) << 4 | (p.rnr_retry & 0x7));
      b[51] = static_cast<uint8_t>(kIbReqMaxCmRetries << 4);
      put16(b + 52, kPermissiveLid);
      put16(b + 54, kPermissiveLid);
      std::memcpy(b + 56, ctx.local_addr.data(), 16);
      std::memcpy(b + 72, ctx.peer_addr.data(), 16);
      b[91] = kRate10Gbps;
      b[92] = ctx.traffic_class;
      b[93] = ctx.hop_limit;
      b[95] = static_cast<uint8_t>((p.timeout & 0x1F) << 3);
      uint8_t* priv = b + kReqPrivateAt;
      size_t room = kReqPrivateBytes;
      if (m.ib.rdma_cm) {
        // rdma_cm's header: IPv4 when both ends are IPv4-mapped (the address in
        // the last 4 bytes of each field, the rest zero), else IPv6.
        uint32_t local4 = 0;
        uint32_t peer4 = 0;
        priv[0] = kRdmaCmVersion;
        put16(priv + 2, m.ib.rdma_cm_src_port);
        if (cm_addr_ipv4(ctx.local_addr, local4) && cm_addr_ipv4(ctx.peer_addr, peer4)) {
          priv[1] = 4 << 4;
          put32(priv + 4 + 12, local4);
          put32(priv + 20 + 12, peer4);
        } else {
          priv[1] = 6 << 4;
          std::memcpy(priv + 4, ctx.local_addr.data(), 16);
          std::memcpy(priv + 20, ctx.peer_addr.data(), 16);
        }
        priv += kRdmaCmHeaderBytes;
        room -= kRdmaCmHeaderBytes;
      }
      std::memcpy(priv, m.private_data.data(), std::min<size_t>(m.private_len, room));
      break;
    }
    case CmType::kRep:
      put16(out + 16, kAttrRep);
      put32(b + 4, m.dst_conn);
      put24(b + 12, p.qpn);
      put24(b + 20, p.psn);
      b[24] = p.responder_resources;
      b[25] = p.initiator_depth;
      b[26] = static_cast<uint8_t>(kTargetAckDelay << 3);
      b[27] = static_cast<uint8_t>((p.rnr_retry & 0x7) << 5);
      put64(b + 28, ctx.ca_guid);
      std::memcpy(b + kRepPrivateAt, m.private_data.data(), m.private_len);
      break;
    case CmType::kRej: {
      put16(out + 16, kAttrRej);
      put32(b + 4, m.dst_conn);
      b[8] = static_cast<uint8_t>((m.ib.rej_message & 0x3) << 6);
      const uint16_t code = m.ib.rej_code != 0 ? m.ib.rej_code : ib_rej_code_for(m.reason);
      put16(b + 10, code);
      if (code == kIbRejTimeout) {
        // As Linux's: the ARI of a REJ(timeout) is the sender's CA GUID, by which (with
        // the sender's comm id) Linux looks the connection up.
        b[9] = kRejAriGuidBytes << 1;
        put64(b + kRejAriAt, ctx.ca_guid);
      }
      std::memcpy(b + kRejPrivateAt, m.private_data.data(),
                  std::min<size_t>(m.private_len, kMaxPrivateBytes));
      break;
    }
    case CmType::kRtu:
      put16(out + 16, kAttrRtu);
      put32(b + 4, m.dst_conn);
      break;
    case CmType::kDreq:
      put16(out + 16, kAttrDreq);
      put32(b + 4, m.dst_conn);
      put24(b + 8, ctx.peer_qpn);
      break;
    case CmType::kDrep:
      put16(out + 16, kAttrDrep);
      put32(b + 4, m.dst_conn);
      break;
    case CmType::kSidrReq:
      put16(out + 16, kAttrSidrReq);
      put16(b + 4, 0xFFFF);  // the default P_Key
      put64(b + 8, m.service);
      break;
    case CmType::kSidrRep:
      // QPN, Q_Key and additional information stay 0: conduit only ever refuses.
      put16(out + 16, kAttrSidrRep);
      put32(b + 0, m.dst_conn);  // the request id it answers
      b[4] = m.ib.sidr_status;
      put64(b + 12, m.service);
      break;
    case CmType::kLap:
      // The ids and the peer's QPN; no alternate path (conduit never asks for one).
      put16(out + 16, kAttrLap);
      put32(b + 4, m.dst_conn);
      put24(b + 12, ctx.peer_qpn);
      break;
    case CmType::kApr:
      put16(out + 16, kAttrApr);
      put32(b + 4, m.dst_conn);
      b[9] = m.ib.apr_status;
      break;
    case CmType::kMra:
      put16(out + 16, kAttrMra);
      put32(b + 4, m.dst_conn);
      b[8] = static_cast<uint8_t>((m.ib.mra_message & 0x3) << 6);
      b[9] = static_cast<uint8_t>((m.ib.mra_timeout & 0x1F) << 3);
      break;
  }
  return kMadBytes;
}

}  // namespace conduit::cm
