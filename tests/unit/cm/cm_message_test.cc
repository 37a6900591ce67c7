// The CM message codec: round trips of every type, the exact wire layout of a
// REQ, and each way a message can be refused.
#include "cm/cm_message.h"

#include <catch2/catch.hpp>
#include <vector>

using namespace conduit::cm;

namespace {

CmMessage sample_req() {
  CmMessage m;
  m.type = CmType::kReq;
  m.src_conn = 0x01020304;
  m.service = 0x1122334455667788ull;
  m.params.qpn = 0xABCDEF;
  m.params.psn = 0x123456;
  m.params.pmtu_bytes = 4096;
  m.params.caps = kCapSelectiveRepeat;
  m.params.timeout = 14;
  m.params.retry_cnt = 7;
  m.params.rnr_retry = 6;
  m.private_len = 3;
  m.private_data[0] = 'a';
  m.private_data[1] = 'b';
  m.private_data[2] = 'c';
  return m;
}

std::vector<uint8_t> build(const CmMessage& m) {
  std::vector<uint8_t> b(kMaxMessageBytes);
  b.resize(build_cm_message(m, b.data()));
  return b;
}

CmParseError parse(const std::vector<uint8_t>& b) {
  CmMessage m;
  return parse_cm_message(b.data(), b.size(), m);
}

}  // namespace

TEST_CASE("a REQ has the documented wire layout") {
  const auto b = build(sample_req());
  REQUIRE(b.size() == 16 + 32 + 3);
  const std::vector<uint8_t> header = {0x43, 0x44, 0x43, 0x4d, 1, 1, 0, 51,
                                       0x01, 0x02, 0x03, 0x04, 0, 0, 0, 0};
  CHECK(std::vector<uint8_t>(b.begin(), b.begin() + 16) == header);
  const std::vector<uint8_t> body = {
      0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // service
      0,    0xAB, 0xCD, 0xEF, 0,    0x12, 0x34, 0x56,  // qpn, psn
      0x10, 0x00, 0x00, 0x01, 14,   7,    6,    3,     // pmtu caps timers len
      0,    0,    0,    0,    0,    0,    0,    0,    'a', 'b', 'c'};
  CHECK(std::vector<uint8_t>(b.begin() + 16, b.end()) == body);
}

TEST_CASE("every message type round-trips") {
  for (CmType t :
       {CmType::kReq, CmType::kRep, CmType::kRtu, CmType::kRej, CmType::kDreq, CmType::kDrep}) {
    CAPTURE(cm_type_name(t));
    CmMessage m = sample_req();
    m.type = t;
    if (t != CmType::kReq) m.dst_conn = 77;
    m.reason = RejectReason::kNoListener;
    const auto b = build(m);
    CmMessage got;
    REQUIRE(parse_cm_message(b.data(), b.size(), got) == CmParseError::kOk);
    CHECK(got.type == t);
    CHECK(got.src_conn == m.src_conn);
    CHECK(got.dst_conn == m.dst_conn);
    if (t == CmType::kReq || t == CmType::kRep) {
      CHECK(got.service == m.service);
      CHECK(got.params.qpn == m.params.qpn);
      CHECK(got.params.psn == m.params.psn);
      CHECK(got.params.pmtu_bytes == 4096);
      CHECK(got.params.caps == kCapSelectiveRepeat);
      CHECK(got.params.rnr_retry == 6);
      CHECK(got.private_len == 3);
      CHECK(got.private_data[2] == 'c');
    }
    if (t == CmType::kRej) CHECK(got.reason == RejectReason::kNoListener);
  }
}

TEST_CASE("trailing padding is tolerated, a length beyond the datagram is not") {
  auto b = build(sample_req());
  b.resize(b.size() + 9, 0);  // e.g. Ethernet minimum-frame padding
  CHECK(parse(b) == CmParseError::kOk);
  b = build(sample_req());
  b.pop_back();
  CHECK(parse(b) == CmParseError::kBadLength);
}

TEST_CASE("malformed messages are refused with a reason") {
  const auto good = build(sample_req());
  auto with = [&](size_t off, uint8_t v) {
    auto b = good;
    b[off] = v;
    return parse(b);
  };
  CHECK(parse({}) == CmParseError::kTooShort);
  CHECK(parse(std::vector<uint8_t>(good.begin(), good.begin() + 15)) == CmParseError::kTooShort);
  CHECK(parse(std::vector<uint8_t>(good.begin(), good.begin() + 40)) == CmParseError::kTooShort);
  CHECK(with(0, 0x00) == CmParseError::kBadMagic);
  CHECK(with(4, 2) == CmParseError::kBadVersion);
  CHECK(with(5, 0) == CmParseError::kBadType);
  CHECK(with(5, 7) == CmParseError::kBadType);
  CHECK(with(11, 0) == CmParseError::kOk);  // src_conn 0x01020300 is still non-zero
  {
    auto b = good;
    b[8] = b[9] = b[10] = b[11] = 0;
    CHECK(parse(b) == CmParseError::kBadConnId);  // src_conn 0
  }
  CHECK(with(15, 1) == CmParseError::kBadConnId);         // a REQ names no dst_conn
  CHECK(with(16 + 8, 1) == CmParseError::kBadField);      // qpn > 24 bits
  CHECK(with(16 + 12, 1) == CmParseError::kBadField);     // psn > 24 bits
  CHECK(with(16 + 16, 0x03) == CmParseError::kBadField);  // pmtu 0x0300 = 768
  CHECK(with(16 + 19, 0x02) == CmParseError::kBadField);  // unknown capability
  CHECK(with(16 + 20, 32) == CmParseError::kBadField);    // timeout exponent
  CHECK(with(16 + 21, 8) == CmParseError::kBadField);     // retry_cnt
  CHECK(with(16 + 22, 8) == CmParseError::kBadField);     // rnr_retry
  CHECK(with(16 + 23, 65) == CmParseError::kBadField);    // private_len
  CHECK(with(16 + 23, 4) == CmParseError::kBadLength);    // disagrees with length
  CHECK(with(16 + 27, 1) == CmParseError::kBadField);     // reserved
  CHECK(with(7, 200) == CmParseError::kBadLength);        // length beyond the datagram
  {
    auto b = good;  // qpn 0 and 1 are special (QP0/QP1), never an RC QP
    b[16 + 8] = b[16 + 9] = b[16 + 10] = 0;
    b[16 + 11] = 1;
    CHECK(parse(b) == CmParseError::kBadField);
  }
  CmMessage rej;
  rej.type = CmType::kRej;
  rej.src_conn = 1;
  rej.dst_conn = 2;
  rej.reason = RejectReason::kQuota;
  auto r = build(rej);
  REQUIRE(parse(r) == CmParseError::kOk);
  r[8] = r[9] = r[10] = r[11] = 0;  // a REJ without a connection (no listener) is fine
  CHECK(parse(r) == CmParseError::kOk);
  r[17] = 5;  // kTimeout is local only
  CHECK(parse(r) == CmParseError::kBadField);
  r[17] = 99;
  CHECK(parse(r) == CmParseError::kBadField);
  // A REJ's private data: its length at 18, the bytes after the reason's 4.
  rej.private_len = 3;
  rej.private_data[0] = 0x11;
  rej.private_data[2] = 0x33;
  auto p = build(rej);
  REQUIRE(p.size() == 16 + 4 + 3);
  CHECK(p[18] == 3);
  CHECK(p[22] == 0x33);
  CmMessage back;
  REQUIRE(parse_cm_message(p.data(), p.size(), back) == CmParseError::kOk);
  CHECK(back.private_len == 3);
  CHECK(back.private_data[0] == 0x11);
  CHECK(back.private_data[2] == 0x33);
  p[18] = 65;  // more than kMaxPrivateBytes
  CHECK(parse(p) == CmParseError::kBadField);
  p[18] = 4;  // more than the length says
  CHECK(parse(p) == CmParseError::kBadLength);
  p[18] = 3;
  p[19] = 1;  // reserved
  CHECK(parse(p) == CmParseError::kBadField);
  CmMessage rtu;
  rtu.type = CmType::kRtu;
  rtu.src_conn = 1;
  auto u = build(rtu);
  CHECK(parse(u) == CmParseError::kBadConnId);  // RTU without dst_conn
}
