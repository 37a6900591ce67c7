#include "cm/cm_message.h"

#include <algorithm>
#include <cstring>

#include "cm/cm_bytes.h"

namespace conduit::cm {
namespace {

using bytes::all_zero;
using bytes::get16;
using bytes::get32;
using bytes::get64;
using bytes::put16;
using bytes::put32;
using bytes::put64;

bool has_params(CmType t) { return t == CmType::kReq || t == CmType::kRep; }

size_t body_bytes(CmType t) {
  if (has_params(t)) return kParamsBytes;
  return t == CmType::kRej ? kRejectBytes : 0;
}

}  // namespace

const char* cm_type_name(CmType t) {
  switch (t) {
    case CmType::kReq:
      return "REQ";
    case CmType::kRep:
      return "REP";
    case CmType::kRtu:
      return "RTU";
    case CmType::kRej:
      return "REJ";
    case CmType::kDreq:
      return "DREQ";
    case CmType::kDrep:
      return "DREP";
    case CmType::kMra:
      return "MRA";
    case CmType::kSidrReq:
      return "SIDR_REQ";
    case CmType::kSidrRep:
      return "SIDR_REP";
    case CmType::kLap:
      return "LAP";
    case CmType::kApr:
      return "APR";
  }
  return "?";
}

const char* reject_reason_name(RejectReason r) {
  switch (r) {
    case RejectReason::kNoListener:
      return "no listener on that service";
    case RejectReason::kQuota:
      return "the peer is out of connections";
    case RejectReason::kPolicy:
      return "refused by the peer's policy";
    case RejectReason::kRefused:
      return "refused by the listening application";
    case RejectReason::kTimeout:
      return "no answer from the peer";
    case RejectReason::kInvalid:
      return "the peer found the request invalid";
  }
  return "unknown reason";
}

bool is_wire_reject_reason(uint16_t v) {
  return v >= static_cast<uint16_t>(RejectReason::kNoListener) &&
         v <= static_cast<uint16_t>(RejectReason::kInvalid) &&
         v != static_cast<uint16_t>(RejectReason::kTimeout);
}

bool valid_pmtu(uint32_t bytes) {
  return bytes == 256 || bytes == 512 || bytes == 1024 || bytes == 2048 || bytes == 4096;
}

const char* cm_parse_error_name(CmParseError e) {
  switch (e) {
    case CmParseError::kOk:
      return "ok";
    case CmParseError::kTooShort:
      return "too short";
    case CmParseError::kBadMagic:
      return "bad magic";
    case CmParseError::kBadVersion:
      return "unsupported version";
    case CmParseError::kBadType:
      return "unknown message type";
    case CmParseError::kBadLength:
      return "length field mismatch";
    case CmParseError::kBadConnId:
      return "bad connection id";
    case CmParseError::kBadField:
      return "field out of range";
    case CmParseError::kBadClass:
      return "not a CM MAD";
    case CmParseError::kUnsupported:
      return "CM message not supported";
    case CmParseError::kRefusedReq:
      return "CM request refused (transport or rdma_cm header)";
  }
  return "?";
}

void cap_depths(QpParams& local, const QpParams& remote) {
  auto cap = [](uint8_t ours, uint8_t theirs) {
    return static_cast<uint8_t>(std::max(1, std::min<int>(ours, theirs)));
  };
  local.initiator_depth = cap(local.initiator_depth, remote.responder_resources);
  local.responder_resources = cap(local.responder_resources, remote.initiator_depth);
}

CmParseError parse_cm_message(const uint8_t* data, size_t len, CmMessage& out) {
  if (len < kHeaderBytes) return CmParseError::kTooShort;
  if (get32(data) != kCmMagic) return CmParseError::kBadMagic;
  if (data[4] != kCmVersion) return CmParseError::kBadVersion;
  const uint8_t type = data[5];
  if (type < static_cast<uint8_t>(CmType::kReq) || type > static_cast<uint8_t>(CmType::kDrep)) {
    return CmParseError::kBadType;
  }
  CmMessage m;
  m.type = static_cast<CmType>(type);
  const size_t body = body_bytes(m.type);
  if (len < kHeaderBytes + body) return CmParseError::kTooShort;
  // Trailing bytes after `length` (Ethernet padding) are tolerated; a length
  // beyond the datagram is not.
  const size_t length = get16(data + 6);
  if (length > len || length < kHeaderBytes + body) return CmParseError::kBadLength;
  m.src_conn = get32(data + 8);
  m.dst_conn = get32(data + 12);
  // A REJ may come from no connection at all (no listener, quota).
  if (m.src_conn == 0 && m.type != CmType::kRej) return CmParseError::kBadConnId;
  if ((m.type == CmType::kReq) != (m.dst_conn == 0)) return CmParseError::kBadConnId;
  const uint8_t* b = data + kHeaderBytes;
  if (has_params(m.type)) {
    m.service = get64(b);
    QpParams& q = m.params;
    q.qpn = get32(b + 8);
    q.psn = get32(b + 12);
    q.pmtu_bytes = get16(b + 16);
    q.caps = get16(b + 18);
    q.timeout = b[20];
    q.retry_cnt = b[21];
    q.rnr_retry = b[22];
    m.private_len = b[23];
    if (q.qpn > 0xFFFFFF || q.qpn < 2 || q.psn > 0xFFFFFF || !valid_pmtu(q.pmtu_bytes) ||
        (q.caps & ~kKnownCaps) != 0 || q.timeout > 31 || q.retry_cnt > 7 || q.rnr_retry > 7 ||
        m.private_len > kMaxPrivateBytes || !all_zero(b + 24, 8)) {
      return CmParseError::kBadField;
    }
    if (length != kHeaderBytes + kParamsBytes + m.private_len) return CmParseError::kBadLength;
    std::memcpy(m.private_data.data(), b + kParamsBytes, m.private_len);
  } else if (m.type == CmType::kRej) {
    const uint16_t reason = get16(b);
    m.private_len = b[2];
    if (!is_wire_reject_reason(reason) || m.private_len > kMaxPrivateBytes || b[3] != 0) {
      return CmParseError::kBadField;
    }
    m.reason = static_cast<RejectReason>(reason);
    if (length != kHeaderBytes + kRejectBytes + m.private_len) return CmParseError::kBadLength;
    std::memcpy(m.private_data.data(), b + kRejectBytes, m.private_len);
  } else if (length != kHeaderBytes) {
    return CmParseError::kBadLength;
  }
  out = m;
  return CmParseError::kOk;
}

size_t build_cm_message(const CmMessage& m, uint8_t* out) {
  const uint8_t private_len =
      (has_params(m.type) || m.type == CmType::kRej) && m.private_len <= kMaxPrivateBytes
          ? m.private_len
          : uint8_t{0};
  const size_t len = kHeaderBytes + body_bytes(m.type) + private_len;
  std::memset(out, 0, len);
  put32(out, kCmMagic);
  out[4] = kCmVersion;
  out[5] = static_cast<uint8_t>(m.type);
  put16(out + 6, static_cast<uint16_t>(len));
  put32(out + 8, m.src_conn);
  put32(out + 12, m.dst_conn);
  uint8_t* b = out + kHeaderBytes;
  if (has_params(m.type)) {
    put64(b, m.service);
    put32(b + 8, m.params.qpn);
    put32(b + 12, m.params.psn);
    put16(b + 16, m.params.pmtu_bytes);
    put16(b + 18, m.params.caps);
    b[20] = m.params.timeout;
    b[21] = m.params.retry_cnt;
    b[22] = m.params.rnr_retry;
    b[23] = private_len;
    std::memcpy(b + kParamsBytes, m.private_data.data(), private_len);
  } else if (m.type == CmType::kRej) {
    put16(b, static_cast<uint16_t>(m.reason));
    b[2] = private_len;
    std::memcpy(b + kRejectBytes, m.private_data.data(), private_len);
  }
  return len;
}

}  // namespace conduit::cm
