// The IB CM dialect: the MAD codec (ib_cm_mad.h) against MADs the Linux
// kernel's ib_cm sent (captured from rdmacm-utils' rdma_client/rdma_server on
// Soft-RoCE against conduitd, tests/interop/rdma_cm_test.sh), refusals of bad
// MADs, the GSI framing (wire/gsi.h), and two ConnectionManagers speaking it.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "cm/connection_manager.h"
#include "cm/ib_cm_mad.h"
#include "wire/gsi.h"
#include "wire/icrc.h"

using namespace conduit::cm;

namespace {

std::vector<uint8_t> bytes_from_hex(const std::string& hex) {
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out[i / 2] = static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

// A MAD from its leading bytes (the rest zero).
std::vector<uint8_t> mad_from_hex(const std::string& hex) {
  std::vector<uint8_t> out = bytes_from_hex(hex);
  out.resize(kMadBytes, 0);
  return out;
}

// Sent by the kernel (198.18.200.2) for rdma_client's rdma_connect() to 198.18.200.1:7471.
const std::string kKernelReq =
    "0107020300000000000000023e4e8d030010000000000000038d4e3e000000000000000001061d2f505400fffe"
    "c64e4a00000000000000000000118000000080000000a0998787a7ffff37f0ffffffff00000000000000000000"
    "ffffc612c80200000000000000000000ffffc612c8011d2920000040009800000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000040923d000000000000000000000000c612"
    "c802000000000000000000000000c612c801";
// The kernel's REP to conduitd's REQ (rdma_server accepting).
const std::string kKernelRep =
    "01070203000000000000000245e766190013000000000000008d4e3e45e76619000000000000120000000000800a"
    "e400101078e0505400fffec64e4a";
const std::string kKernelRtu = "0107020300000000000000023e4e8d030014000000000000038d4e3e45e76617";
const std::string kKernelDreq =
    "0107020300000000000000023e4e8d030015000000000000038d4e3e45e76617f5cd3b";
const std::string kKernelDrep = "01070203000000000000000345e766190016000000000000008d4e3e45e76619";
// The kernel's REJ for a REQ to a port nobody listens on: invalid service id (8).
const std::string kKernelRej =
    "01070203000000000000000145e7661800120000000000000000000045e7661800000008";

// A whole GSI datagram (IPv6 + UDP + BTH + DETH + MAD + ICRC) the kernel sent: rping -c -a
// fe80::c0:1%eth0 on rxe in the interop VM (rdma_cm_test.sh, step rping6-vmclient): its
// REQ to conduitd's address6, port 7178. rxe sends a zero UDP checksum.
const std::string kKernelReq6Datagram =
    "6000000001201140fe80000000000000505400fffec635c6fe800000000000000000000000c00001d87212b701"
    "2000006400ffff000000018000000e8001000000000001010702030000000000000002b1db9749001000000000"
    "00004997dbb1000000000000000001061c0a505400fffec635c600000000000000000000160100000001000000"
    "a0b576c0a7ffff37f0fffffffffe80000000000000505400fffec635c6fe800000000000000000000000c00001"
    "3857c0000040009800000000000000000000000000000000000000000000000000000000000000000000000000"
    "000000000000000060a04efe80000000000000505400fffec635c6fe800000000000000000000000c000010000"
    "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "000000000000000000325169d9";

uint32_t be24_at(const std::vector<uint8_t>& b, size_t off) {
  return uint32_t{b[off]} << 16 | uint32_t{b[off + 1]} << 8 | b[off + 2];
}

CmMessage parse_ok(const std::vector<uint8_t>& mad) {
  CmMessage m;
  REQUIRE(parse_ib_cm_mad(mad.data(), mad.size(), m) == CmParseError::kOk);
  return m;
}

}  // namespace

TEST_CASE("ib_cm: the kernel's REQ from rdma_connect()", "[cm][ib]") {
  const CmMessage m = parse_ok(mad_from_hex(kKernelReq));
  CHECK(m.type == CmType::kReq);
  CHECK(m.src_conn == 0x038d4e3e);
  CHECK(m.dst_conn == 0);
  CHECK(m.ib.tid == 0x000000023e4e8d03ull);
  CHECK(m.service == 7471);  // rdma_cm's TCP port space: the port
  CHECK(m.ib.rdma_cm);
  CHECK(m.ib.rdma_cm_src_port == 0x923d);
  CHECK(m.ib.src_addr == cm_addr_v4(0xC612C802));  // 198.18.200.2
  CHECK(m.ib.dst_addr == cm_addr_v4(0xC612C801));
  CHECK(m.ib.ca_guid == 0x505400fffec64e4aull);
  CHECK(m.params.qpn == 0x11);
  CHECK(m.params.psn == 0x998787);
  CHECK(m.params.pmtu_bytes == 1024);
  CHECK(m.params.retry_cnt == 7);
  CHECK(m.params.rnr_retry == 7);
  CHECK(m.params.timeout == 19);
  CHECK(m.ib.req_response_timeout == 20);  // rdma_cm's CMA_CM_RESPONSE_TIMEOUT, both
  CHECK(m.ib.req_local_response_timeout == 20);
  CHECK(m.ib.req_max_retries == 15);
  CHECK(m.params.responder_resources == 128);
  CHECK(m.params.initiator_depth == 128);
  CHECK(m.params.caps == 0);
  CHECK(m.private_len == kRdmaCmReqPrivateBytes);  // the whole field: no length on the wire
}

TEST_CASE("ib_cm: the kernel's REP, RTU, DREQ, DREP and REJ", "[cm][ib]") {
  CmMessage rep = parse_ok(mad_from_hex(kKernelRep));
  CHECK(rep.type == CmType::kRep);
  CHECK(rep.src_conn == 0x008d4e3e);
  CHECK(rep.dst_conn == 0x45e76619);
  CHECK(rep.params.qpn == 0x12);
  CHECK(rep.params.psn == 0x800ae4);
  CHECK(rep.params.responder_resources == 16);
  CHECK(rep.params.initiator_depth == 16);
  CHECK(rep.params.rnr_retry == 7);
  CHECK(rep.params.pmtu_bytes == 0);  // a REP carries none
  CHECK(rep.ib.ca_guid == 0x505400fffec64e4aull);

  CmMessage rtu = parse_ok(mad_from_hex(kKernelRtu));
  CHECK(rtu.type == CmType::kRtu);
  CHECK(rtu.src_conn == 0x038d4e3e);
  CHECK(rtu.dst_conn == 0x45e76617);
  CmMessage dreq = parse_ok(mad_from_hex(kKernelDreq));
  CHECK(dreq.type == CmType::kDreq);
  CHECK(dreq.dst_conn == 0x45e76617);
  CmMessage drep = parse_ok(mad_from_hex(kKernelDrep));
  CHECK(drep.type == CmType::kDrep);
  CHECK(drep.ib.tid == 0x0000000345e76619ull);
  CmMessage rej = parse_ok(mad_from_hex(kKernelRej));
  CHECK(rej.type == CmType::kRej);
  CHECK(rej.src_conn == 0);  // refused before the kernel made an id
  CHECK(rej.dst_conn == 0x45e76618);
  CHECK(rej.ib.rej_code == kIbRejInvalidServiceId);
  CHECK(rej.reason == RejectReason::kNoListener);
}

TEST_CASE("ib_cm: our REQ has the kernel's layout", "[cm][ib]") {
  // The kernel's REQ, rebuilt from what we parsed, differs only where we choose
  // otherwise (flow label, remote CM response timeout's companions, vendor bits).
  const CmMessage k = parse_ok(mad_from_hex(kKernelReq));
  IbCmBuildContext ctx;
  ctx.local_addr = k.ib.src_addr;
  ctx.peer_addr = k.ib.dst_addr;
  ctx.ca_guid = k.ib.ca_guid;
  std::vector<uint8_t> ours(kMadBytes);
  REQUIRE(build_ib_cm_mad(k, ctx, ours.data()) == kMadBytes);
  const std::vector<uint8_t> theirs = mad_from_hex(kKernelReq);
  // Every byte but the CM response timeouts (ours are shorter: see ib_cm_mad.cc), the
  // end-to-end flow control bit (we set it, rdma_client did not) and the primary path's flow
  // label and rate (the kernel hashes a flow label; we name 10 Gb/s).
  for (size_t off = 0; off < kMadBytes; ++off) {
    const size_t body = off - kMadHeaderBytes;
    if (off >= kMadHeaderBytes && (body == 43 || body == 47 || (body >= 88 && body <= 91))) {
      continue;
    }
    INFO("MAD byte " << off);
    CHECK(ours[off] == theirs[off]);
  }
  const uint8_t ours43 = ours[kMadHeaderBytes + 43], theirs43 = theirs[kMadHeaderBytes + 43];
  const uint8_t ours47 = ours[kMadHeaderBytes + 47], theirs47 = theirs[kMadHeaderBytes + 47];
  CHECK((ours43 & 0x06) == (theirs43 & 0x06));  // transport service: RC
  CHECK((ours47 & 0x07) == (theirs47 & 0x07));  // retry count
  CHECK(theirs43 >> 3 == 20);                   // rdma_cm's response timeouts: 4.3 s
  CHECK(theirs47 >> 3 == 20);
  CHECK(ours43 >> 3 == 18);  // we wait ~1.07 s for the REP
  CHECK(ours47 >> 3 == 16);  // and answer a REP at once (268 ms): a lost REP comes again soon
  CmMessage again;
  REQUIRE(parse_ib_cm_mad(ours.data(), ours.size(), again) == CmParseError::kOk);
  CHECK(again.service == 7471);
  CHECK(again.params.qpn == k.params.qpn);
  CHECK(again.params.psn == k.params.psn);
  CHECK(again.params.timeout == k.params.timeout);
  CHECK(again.ib.src_addr == k.ib.src_addr);
  CHECK(again.ib.dst_addr == k.ib.dst_addr);
}

TEST_CASE("ib_cm: the kernel's REQ over IPv6: its ICRC, its rdma_cm header and GIDs",
          "[cm][ib][ipv6]") {
  const std::vector<uint8_t> d = bytes_from_hex(kKernelReq6Datagram);
  REQUIRE(d.size() == 48 + 12 + 8 + kMadBytes + 4);
  std::span<const uint8_t> mad;
  uint32_t src_qp = 0;
  REQUIRE(conduit::wire::parse_gsi(std::span<const uint8_t>(d.data(), 48),
                                   std::span<const uint8_t>(d.data() + 48, d.size() - 48), mad,
                                   src_qp) == conduit::wire::GsiDrop::kNone);
  CHECK(src_qp == 1);
  CmMessage m;
  REQUIRE(parse_ib_cm_mad(mad.data(), mad.size(), m) == CmParseError::kOk);
  CHECK(m.type == CmType::kReq);
  CHECK(m.ib.rdma_cm);
  CHECK(m.service == 7178);
  const CmAddr vm = {0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xFF, 0xFE, 0xC6, 0x35, 0xC6};
  const CmAddr conduitd = {0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xC0, 0, 0x01};
  CHECK(m.ib.src_addr == vm);
  CHECK(m.ib.dst_addr == conduitd);
  CHECK(m.params.qpn == 0x16);
  CHECK(m.params.pmtu_bytes == 1024);
  // The primary path's GIDs are the same addresses, as conduit writes them.
  CHECK(std::memcmp(mad.data() + kMadHeaderBytes + 56, vm.data(), 16) == 0);
  CHECK(std::memcmp(mad.data() + kMadHeaderBytes + 72, conduitd.data(), 16) == 0);
  // Rebuilt by conduit from what it parsed, the rdma_cm header is byte for byte the kernel's.
  IbCmBuildContext ctx;
  ctx.local_addr = m.ib.src_addr;
  ctx.peer_addr = m.ib.dst_addr;
  std::vector<uint8_t> ours(kMadBytes);
  REQUIRE(build_ib_cm_mad(m, ctx, ours.data()) == kMadBytes);
  CHECK(std::memcmp(ours.data() + kMadHeaderBytes + 140, mad.data() + kMadHeaderBytes + 140,
                    kRdmaCmHeaderBytes) == 0);
  CHECK(std::memcmp(ours.data() + kMadHeaderBytes + 56, mad.data() + kMadHeaderBytes + 56, 32) ==
        0);
  // One flipped address bit and rxe's ICRC no longer matches.
  std::vector<uint8_t> bad = d;
  bad[8 + 15] ^= 1;
  CHECK(conduit::wire::parse_gsi(std::span<const uint8_t>(bad.data(), 48),
                                 std::span<const uint8_t>(bad.data() + 48, bad.size() - 48), mad,
                                 src_qp) == conduit::wire::GsiDrop::kIcrc);
}

TEST_CASE("ib_cm: an rdma_cm REQ between IPv6 addresses", "[cm][ib][ipv6]") {
  const CmAddr ours = {0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xC0, 0, 0x11};
  const CmAddr theirs = {0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xFF, 0xFE, 0x12, 0x34, 0x56};
  CmMessage m;
  m.type = CmType::kReq;
  m.src_conn = 0x1234;
  m.service = 7174;
  m.params.qpn = 0x11;
  m.params.psn = 0x222;
  m.params.pmtu_bytes = 1024;
  m.ib.rdma_cm = true;
  m.ib.rdma_cm_src_port = 0x8001;
  m.private_len = 3;
  m.private_data[0] = 'a';
  IbCmBuildContext ctx;
  ctx.local_addr = ours;
  ctx.peer_addr = theirs;
  std::vector<uint8_t> mad(kMadBytes);
  REQUIRE(build_ib_cm_mad(m, ctx, mad.data()) == kMadBytes);
  const uint8_t* body = mad.data() + kMadHeaderBytes;
  // The primary path's GIDs are the addresses themselves (not IPv4-mapped) ...
  CHECK(std::memcmp(body + 56, ours.data(), 16) == 0);
  CHECK(std::memcmp(body + 72, theirs.data(), 16) == 0);
  // ... and rdma_cm's header says IPv6 and carries all 16 bytes of each.
  const uint8_t* priv = body + 140;
  CHECK(priv[0] == 0);
  CHECK(priv[1] == 0x60);
  CHECK((priv[2] << 8 | priv[3]) == 0x8001);
  CHECK(std::memcmp(priv + 4, ours.data(), 16) == 0);
  CHECK(std::memcmp(priv + 20, theirs.data(), 16) == 0);
  CHECK(priv[36] == 'a');
  const CmMessage back = parse_ok(mad);
  CHECK(back.ib.rdma_cm);
  CHECK(back.service == 7174);
  CHECK(back.ib.src_addr == ours);
  CHECK(back.ib.dst_addr == theirs);
  // IPv4 ends keep the IPv4 header: mapped GIDs, the address in the last 4 bytes.
  ctx.local_addr = cm_addr_v4(0xC6120001);
  ctx.peer_addr = cm_addr_v4(0xC6120002);
  REQUIRE(build_ib_cm_mad(m, ctx, mad.data()) == kMadBytes);
  CHECK(priv[1] == 0x40);
  CHECK(std::memcmp(body + 56, ctx.local_addr.data(), 16) == 0);
  CHECK(std::all_of(priv + 4, priv + 16, [](uint8_t b) { return b == 0; }));
  CHECK((priv[16] == 198 && priv[17] == 18 && priv[18] == 0 && priv[19] == 1));
  CHECK(parse_ok(mad).ib.dst_addr == cm_addr_v4(0xC6120002));
}

TEST_CASE("ib_cm: every message round-trips", "[cm][ib]") {
  IbCmBuildContext ctx;
  ctx.local_addr = cm_addr_v4(0xC6120001);
  ctx.peer_addr = cm_addr_v4(0xC6120002);
  ctx.ca_guid = 0x1122334455667788ull;
  ctx.peer_qpn = 0x123456;
  for (CmType t :
       {CmType::kReq, CmType::kRep, CmType::kRtu, CmType::kRej, CmType::kDreq, CmType::kDrep}) {
    CmMessage m;
    m.type = t;
    m.src_conn = 0xA1B2C3D4;
    m.dst_conn = t == CmType::kReq ? 0 : 0x01020304;
    m.service = 0x0000000012345678ull;  // a raw IB service id: no rdma_cm header
    m.params.qpn = 0xABCDEF;
    m.params.psn = 0x654321;
    m.params.pmtu_bytes = 4096;
    m.params.timeout = 17;
    m.params.retry_cnt = 5;
    m.params.rnr_retry = 6;
    m.params.responder_resources = 4;
    m.params.initiator_depth = 8;
    m.reason = RejectReason::kRefused;
    m.ib.tid = 0x0102030405060708ull;
    m.private_len = 9;
    std::memcpy(m.private_data.data(), "rdma-data", 9);
    std::vector<uint8_t> buf(kMadBytes);
    REQUIRE(build_ib_cm_mad(m, ctx, buf.data()) == kMadBytes);
    CmMessage p = parse_ok(buf);
    INFO(cm_type_name(t));
    CHECK(p.type == t);
    CHECK(p.src_conn == m.src_conn);
    CHECK(p.dst_conn == m.dst_conn);
    CHECK(p.ib.tid == m.ib.tid);
    if (t == CmType::kReq || t == CmType::kRep) {
      CHECK(p.params.qpn == m.params.qpn);
      CHECK(p.params.psn == m.params.psn);
      CHECK(p.params.rnr_retry == m.params.rnr_retry);
      CHECK(p.params.responder_resources == 4);
      CHECK(p.params.initiator_depth == 8);
      CHECK(p.ib.ca_guid == ctx.ca_guid);
      CHECK(std::memcmp(p.private_data.data(), "rdma-data", 9) == 0);
    }
    if (t == CmType::kReq) {
      CHECK(p.service == m.service);
      CHECK_FALSE(p.ib.rdma_cm);
      CHECK(p.params.pmtu_bytes == 4096);
      CHECK(p.params.timeout == 17);
      CHECK(p.params.retry_cnt == 5);
    }
    if (t == CmType::kRej) {
      CHECK(p.ib.rej_code == kIbRejConsumerDefined);
      CHECK(p.reason == RejectReason::kRefused);
    }
    if (t == CmType::kDreq) CHECK(be24_at(buf, 24 + 8) == 0x123456);
  }
}

TEST_CASE("ib_cm: an rdma_cm REQ takes ports only, and 56 bytes of private data", "[cm][ib]") {
  CmMessage m;
  m.type = CmType::kReq;
  m.src_conn = 7;
  m.service = 0x10000;
  m.params.qpn = 99;
  m.ib.rdma_cm = true;
  std::vector<uint8_t> buf(kMadBytes);
  CHECK(build_ib_cm_mad(m, IbCmBuildContext{}, buf.data()) == 0);
  m.service = 18515;
  m.private_len = 60;  // more than the field leaves: cut at 56
  std::memset(m.private_data.data(), 0xAB, 60);
  REQUIRE(build_ib_cm_mad(m, IbCmBuildContext{}, buf.data()) == kMadBytes);
  CmMessage p = parse_ok(buf);
  CHECK(p.service == 18515);
  CHECK(p.ib.rdma_cm);
  CHECK(p.private_len == 56);
  CHECK(p.private_data[55] == 0xAB);
}

TEST_CASE("ib_cm: bad MADs are refused with a reason", "[cm][ib]") {
  const std::vector<uint8_t> req = mad_from_hex(kKernelReq);
  CmMessage m;
  auto parse = [&m](std::vector<uint8_t> b) { return parse_ib_cm_mad(b.data(), b.size(), m); };
  CHECK(parse(std::vector<uint8_t>(req.begin(), req.begin() + 255)) == CmParseError::kTooShort);
  for (size_t at : {0u, 1u, 2u, 3u}) {
    auto b = req;
    b[at] ^= 0x40;
    CHECK(parse(b) == CmParseError::kBadClass);
  }
  auto b = req;
  b[17] = 0x01;  // ClassPortInfo, method Send (a Get is answered: see its test)
  CHECK(parse(b) == CmParseError::kUnsupported);
  b[17] = 0x1A;  // APR (the connection manager counts it: we send no LAP)
  CHECK(parse(b) == CmParseError::kBadConnId);  // the REQ's reserved word: no remote comm id
  b[24 + 7] = 1;
  CHECK(parse(b) == CmParseError::kOk);
  b[17] = 0x77;
  CHECK(parse(b) == CmParseError::kBadType);
  // REQs conduit refuses with REJ: the ids and service are read for it.
  for (const auto& [at, value] : {std::pair<size_t, uint8_t>{24 + 43, 0xA2},  // UC
                                  {24 + 51, 0xF3},                            // XRC
                                  {24 + 140, 1},        // rdma_cm header version
                                  {24 + 141, 0x50}}) {  // IP version 5
    INFO("byte " << at);
    b = req;
    b[at] = value;
    CHECK(parse(b) == CmParseError::kRefusedReq);
    CHECK(m.src_conn == 0x038d4e3e);
    CHECK(m.service == 7471);
    CHECK(m.ib.tid == 0x000000023e4e8d03ull);
  }
  b = req;
  b[24 + 50] = 0x77;  // path MTU 7
  CHECK(parse(b) == CmParseError::kBadField);
  b = req;
  b[24 + 34] = 1;  // QPN 1
  b[24 + 32] = b[24 + 33] = 0;
  CHECK(parse(b) == CmParseError::kBadField);
  b = req;
  std::memset(b.data() + 24, 0, 4);  // local comm id 0
  CHECK(parse(b) == CmParseError::kBadConnId);
  b = mad_from_hex(kKernelRtu);
  std::memset(b.data() + 28, 0, 4);  // RTU without the remote comm id
  CHECK(parse(b) == CmParseError::kBadConnId);
}

TEST_CASE("gsi: UD SEND_ONLY to QP 1 round-trips with a valid ICRC", "[cm][ib][wire]") {
  using namespace conduit::wire;
  std::vector<uint8_t> dgram(28 + kGsiPacketBytes + 4, 0);
  // IPv4 (no options) + UDP headers; the ICRC covers them (masked fields aside).
  dgram[0] = 0x45;
  dgram[8] = 64;
  dgram[9] = 17;
  const std::vector<uint8_t> mad = mad_from_hex(kKernelReq);
  write_gsi_packet(dgram.data() + 28, 0x123456, mad.data());
  finish_gsi_icrc(dgram.data());
  std::span<const uint8_t> ip_udp(dgram.data(), 28);
  std::span<const uint8_t> payload(dgram.data() + 28, dgram.size() - 28);
  std::span<const uint8_t> got;
  uint32_t src_qp = 0;
  REQUIRE(parse_gsi(ip_udp, payload, got, src_qp) == GsiDrop::kNone);
  CHECK(src_qp == 1);
  CHECK(std::memcmp(got.data(), mad.data(), kMadBytes) == 0);
  auto broken = dgram;
  broken[28 + 12 + 8 + 40] ^= 1;  // a MAD bit
  CHECK(parse_gsi(std::span<const uint8_t>(broken.data(), 28),
                  std::span<const uint8_t>(broken.data() + 28, broken.size() - 28), got,
                  src_qp) == GsiDrop::kIcrc);
  auto wrong = dgram;
  wrong[28 + 12] = 0x12;  // another Q_Key
  finish_gsi_icrc(wrong.data());
  CHECK(parse_gsi(std::span<const uint8_t>(wrong.data(), 28),
                  std::span<const uint8_t>(wrong.data() + 28, wrong.size() - 28), got,
                  src_qp) == GsiDrop::kQkey);
  wrong = dgram;
  wrong[28] = 0x04;  // RC SEND_ONLY
  finish_gsi_icrc(wrong.data());
  CHECK(parse_gsi(std::span<const uint8_t>(wrong.data(), 28),
                  std::span<const uint8_t>(wrong.data() + 28, wrong.size() - 28), got,
                  src_qp) == GsiDrop::kHeader);
  CHECK(parse_gsi(ip_udp, payload.first(payload.size() - 1), got, src_qp) == GsiDrop::kTooShort);
}

TEST_CASE("gsi: over IPv6, the ICRC takes rxe's IPv6 masking", "[cm][ib][wire][ipv6]") {
  using namespace conduit::wire;
  constexpr size_t kHdr = 48;  // IPv6 (no extension headers) + UDP
  std::vector<uint8_t> dgram(kHdr + kGsiPacketBytes + 4, 0);
  dgram[0] = 0x60;
  dgram[4] = static_cast<uint8_t>((8 + kGsiPacketBytes + 4) >> 8);
  dgram[5] = static_cast<uint8_t>(8 + kGsiPacketBytes + 4);
  dgram[6] = 17;
  dgram[7] = 64;
  for (size_t i = 8; i < 40; ++i) dgram[i] = static_cast<uint8_t>(0xA0 + i);  // addresses
  dgram[42] = 0x12;  // UDP destination port 4791
  dgram[43] = 0xB7;
  const std::vector<uint8_t> mad = mad_from_hex(kKernelReq);
  write_gsi_packet(dgram.data() + kHdr, 7, mad.data());
  finish_gsi_icrc(dgram.data());
  CHECK(icrc_load(dgram.data() + dgram.size() - 4) ==
        icrc_ipv6(std::span<const uint8_t>(dgram.data(), dgram.size() - 4)));
  auto parse = [](const std::vector<uint8_t>& d) {
    std::span<const uint8_t> got;
    uint32_t src_qp = 0;
    return parse_gsi(std::span<const uint8_t>(d.data(), kHdr),
                     std::span<const uint8_t>(d.data() + kHdr, d.size() - kHdr), got, src_qp);
  };
  CHECK(parse(dgram) == GsiDrop::kNone);
  auto masked = dgram;
  masked[7] = 3;     // hop limit: masked, as a router changes it
  masked[1] |= 0xF;  // flow label: masked
  CHECK(parse(masked) == GsiDrop::kNone);
  auto broken = dgram;
  broken[8] ^= 1;  // a source address bit: covered
  CHECK(parse(broken) == GsiDrop::kIcrc);
}

namespace {

// Two managers speaking the IB CM to each other (host A active, B passive).
struct IbPair {
  static constexpr CmPeer kA{cm_addr_v4(0xC6120001), 0, true}, kB{cm_addr_v4(0xC6120002), 0, true};
  static CmConfig config(const CmAddr& addr, uint32_t first_id) {
    CmConfig c;
    c.local_addr4 = addr;
    c.ca_guid = addr[15];
    c.first_conn_id = first_id;
    return c;
  }
  ConnectionManager a{config(kA.addr, 0x1000)}, b{config(kB.addr, 0x2000)};
  uint64_t now = 1'000'000'000;
  std::vector<CmAction> events_a, events_b;
  int drop_next_rep = 0;

  void run() {
    for (int guard = 0; guard < 100; ++guard) {
      if (!pump(a, b, kA, events_a) && !pump(b, a, kB, events_b)) return;
    }
    FAIL("messages kept flowing");
  }
  bool pump(ConnectionManager& from, ConnectionManager& to, CmPeer from_addr,
            std::vector<CmAction>& events) {
    CmAction act[8];
    bool moved = false;
    for (size_t n; (n = from.poll_actions(act, 8)) > 0;) {
      for (size_t i = 0; i < n; ++i) {
        moved = true;
        if (act[i].kind != CmAction::Kind::kSend) {
          events.push_back(act[i]);
          continue;
        }
        REQUIRE(act[i].peer.ib);
        REQUIRE(act[i].len == kMadBytes);
        if (act[i].bytes[17] == 0x13 && drop_next_rep > 0) {
          --drop_next_rep;
          continue;
        }
        to.on_message(now, from_addr, act[i].bytes.data(), act[i].len);
      }
    }
    return moved;
  }
  const CmAction* last(const std::vector<CmAction>& ev, CmAction::Kind k) {
    for (auto it = ev.rbegin(); it != ev.rend(); ++it) {
      if (it->kind == k) return &*it;
    }
    return nullptr;
  }
};

QpParams ib_params(uint32_t qpn, uint32_t psn, uint8_t initiator, uint8_t responder) {
  QpParams q;
  q.qpn = qpn;
  q.psn = psn;
  q.pmtu_bytes = 4096;
  q.initiator_depth = initiator;
  q.responder_resources = responder;
  return q;
}

// B listens on service 7471 (owner 22), A (owner 11) connects with `params` and B sees the
// request: both connection ids.
struct Requested {
  int64_t a_conn = 0;
  uint32_t b_conn = 0;
};
Requested request(IbPair& n, const QpParams& params) {
  REQUIRE(n.b.listen(7471, 22) == 0);
  const int64_t a_conn = n.a.connect(n.now, 11, IbPair::kB, 7471, params);
  REQUIRE(a_conn > 0);
  n.run();
  const CmAction* req = n.last(n.events_b, CmAction::Kind::kRequest);
  REQUIRE(req != nullptr);
  return {a_conn, req->conn};
}

// B listens, A connects and its REQ arrives; A's connection and B's MRA of the REQ ("wait
// 2^24 x 4 us", as B's rdma_cm sends it while its application takes its time).
struct RequestAndMra {
  int64_t conn = 0;     // A's
  uint32_t b_conn = 0;  // B's, for the request
  std::vector<uint8_t> mra;
};
// An MRA from comm id src to dst acknowledging `message` (kIbMsgReq, kIbMsgRep) with
// `service_timeout`, as a MAD.
std::vector<uint8_t> mra_mad(uint32_t src, uint32_t dst, uint8_t message, uint8_t service_timeout) {
  CmMessage mra;
  mra.type = CmType::kMra;
  mra.src_conn = src;
  mra.dst_conn = dst;
  mra.ib.mra_message = message;
  mra.ib.mra_timeout = service_timeout;
  std::vector<uint8_t> out(kMadBytes);
  REQUIRE(build_ib_cm_mad(mra, IbCmBuildContext{}, out.data()) == kMadBytes);
  return out;
}
RequestAndMra request_and_mra(IbPair& n) {
  RequestAndMra r;
  const Requested req = request(n, ib_params(0x10, 5, 1, 1));
  r.conn = req.a_conn;
  r.b_conn = req.b_conn;
  r.mra = mra_mad(req.b_conn, static_cast<uint32_t>(r.conn), kIbMsgReq, 24);
  return r;
}

}  // namespace

TEST_CASE("ib_cm: two managers connect, agree on PSNs and depths, disconnect", "[cm][ib]") {
  IbPair n;
  REQUIRE(n.b.listen(7471, 22) == 0);
  // A expects B to start at PSN 100; it may keep 16 READs out and serve 16.
  const int64_t conn = n.a.connect(n.now, 11, IbPair::kB, 7471, ib_params(0x10, 100, 16, 16));
  REQUIRE(conn > 0);
  n.run();
  const CmAction* req = n.last(n.events_b, CmAction::Kind::kRequest);
  REQUIRE(req != nullptr);
  CHECK(req->service == 7471);
  CHECK(req->peer == IbPair::kA);
  CHECK(req->remote.qpn == 0x10);
  CHECK(req->private_len == kRdmaCmReqPrivateBytes);
  // B serves 2 READs and keeps 4 out (the engine caps them against the request first).
  QpParams local = ib_params(0x20, 200, 4, 2);
  cap_depths(local, req->remote);
  CHECK(local.initiator_depth == 4);
  CHECK(local.responder_resources == 2);
  n.drop_next_rep = 1;  // the first REP is lost: A resends its REQ, B its REP
  REQUIRE(n.b.accept(n.now, 22, req->conn, local) == 0);
  QpParams b_local, b_remote;
  REQUIRE(n.b.params(req->conn, b_local, b_remote));
  CHECK(b_local.psn == 100);   // B sends where A asked
  CHECK(b_remote.psn == 200);  // and expects what its REP names
  n.run();
  n.now += 1'100'000'000;  // past our REQ's timeout, 1024 ms + 2 x 32 ms
  n.a.on_timer(n.now);
  n.run();
  const CmAction* ea = n.last(n.events_a, CmAction::Kind::kEstablished);
  const CmAction* eb = n.last(n.events_b, CmAction::Kind::kEstablished);
  REQUIRE(ea != nullptr);
  REQUIRE(eb != nullptr);
  CHECK(n.a.counters().retransmits == 1);
  CHECK(n.a.counters().established == 1);
  CHECK(n.b.counters().established == 1);
  CHECK(ea->local.psn == 200);   // A sends where B's REP said
  CHECK(ea->remote.psn == 100);  // and expects what it asked for
  CHECK(ea->remote.qpn == 0x20);
  CHECK(eb->remote.qpn == 0x10);
  CHECK(ea->local.initiator_depth == 2);  // B serves 2
  CHECK(ea->local.responder_resources == 4);
  CHECK(ea->pmtu_bytes == 4096);
  CHECK(ea->caps == 0);
  // A hangs up: DREQ, DREP.
  REQUIRE(n.a.disconnect(n.now, 11, static_cast<uint32_t>(conn)) == 0);
  n.run();
  CHECK(n.last(n.events_b, CmAction::Kind::kDisconnected) != nullptr);
  CHECK(n.last(n.events_a, CmAction::Kind::kDisconnected) != nullptr);
  CHECK(n.a.connection_count() == 0);
  CHECK(n.b.connection_count() == 0);
  CHECK(n.a.counters().rx_malformed + n.b.counters().rx_malformed == 0);
}

TEST_CASE("ib_cm: refusals reach the requester with their reason", "[cm][ib]") {
  IbPair n;
  REQUIRE(n.a.connect(n.now, 11, IbPair::kB, 7471, ib_params(0x10, 1, 1, 1)) > 0);
  n.run();
  const CmAction* rej = n.last(n.events_a, CmAction::Kind::kRejected);
  REQUIRE(rej != nullptr);
  CHECK(rej->reason == RejectReason::kNoListener);
  REQUIRE(n.b.listen(7471, 22) == 0);
  REQUIRE(n.a.connect(n.now, 11, IbPair::kB, 7471, ib_params(0x11, 1, 1, 1)) > 0);
  n.run();
  const CmAction* req = n.last(n.events_b, CmAction::Kind::kRequest);
  REQUIRE(req != nullptr);
  REQUIRE(n.b.reject(n.now, 22, req->conn, RejectReason::kRefused) == 0);
  n.run();
  rej = n.last(n.events_a, CmAction::Kind::kRejected);
  REQUIRE(rej != nullptr);
  CHECK(rej->reason == RejectReason::kRefused);
  // An rdma_cm request leaves 56 bytes of private data.
  std::vector<uint8_t> priv(57, 1);
  CHECK(n.a.connect(n.now, 11, IbPair::kB, 7471, ib_params(0x12, 1, 1, 1), priv.data(), 57) ==
        -EINVAL);
  CHECK(n.a.connect(n.now, 11, IbPair::kB, 7471, ib_params(0x12, 1, 1, 1), priv.data(), 56) > 0);
  // A MAD of another class, or an APR (we send no LAP), is counted, not acted on.
  std::vector<uint8_t> mad = mad_from_hex(kKernelRtu);
  mad[1] = 0x03;  // SA class
  n.b.on_message(n.now, IbPair::kA, mad.data(), mad.size());
  mad[1] = kMgmtClassCm;
  mad[17] = 0x1A;  // APR
  n.b.on_message(n.now, IbPair::kA, mad.data(), mad.size());
  CHECK(n.b.counters().rx_malformed == 1);
  CHECK(n.b.counters().rx_unsupported == 1);
}

TEST_CASE("ib_cm: an MRA makes the requester wait as asked, then resend", "[cm][ib]") {
  IbPair n;
  // B's application takes its time; B says so (as rdma_cm does): an MRA of the REQ, 2^24 x 4 us.
  const RequestAndMra started = request_and_mra(n);
  const std::vector<uint8_t>& buf = started.mra;
  CmMessage back = parse_ok(buf);
  CHECK(back.type == CmType::kMra);
  CHECK(back.ib.mra_timeout == 24);
  n.a.on_message(n.now, IbPair::kB, buf.data(), buf.size());
  CHECK(n.a.counters().mra_received == 1);
  // Without it A would have resent after 1.088 s; now it waits as Linux's cm_mra_handler:
  // 2^16 ms for the service timeout 24 plus 64 ms for its path (our QP's ACK timeout 14).
  const uint64_t asked = n.a.next_deadline_ns() - n.now;
  CHECK(asked == 65'600'000'000ull);
  CHECK(n.a.counters().retransmits == 0);
  n.now += 5'000'000'000ull;
  n.a.on_timer(n.now);
  CHECK(n.last(n.events_a, CmAction::Kind::kRejected) == nullptr);
  CHECK(n.a.counters().retransmits == 0);
  // B accepts within the wait: A connects.
  REQUIRE(n.b.accept(n.now, 22, started.b_conn, ib_params(0x20, 9, 1, 1)) == 0);
  n.run();
  CHECK(n.last(n.events_a, CmAction::Kind::kEstablished) != nullptr);
  // An MRA for a connection not waiting for anything is unexpected.
  n.a.on_message(n.now, IbPair::kB, buf.data(), buf.size());
  CHECK(n.a.counters().rx_unexpected == 1);
}

namespace {

std::vector<CmAction> drain(ConnectionManager& m) {
  std::vector<CmAction> out;
  CmAction a[8];
  for (size_t n; (n = m.poll_actions(a, 8)) > 0;) out.insert(out.end(), a, a + n);
  return out;
}

// The MADs among actions whose attribute is attr (0x12: REJ).
std::vector<std::vector<uint8_t>> mads(const std::vector<CmAction>& acts, uint8_t attr) {
  std::vector<std::vector<uint8_t>> out;
  for (const auto& a : acts) {
    if (a.kind == CmAction::Kind::kSend && a.bytes[17] == attr) {
      out.emplace_back(a.bytes.begin(), a.bytes.begin() + a.len);
    }
  }
  return out;
}

size_t count_kind(const std::vector<CmAction>& acts, CmAction::Kind k) {
  return static_cast<size_t>(
      std::count_if(acts.begin(), acts.end(), [k](const CmAction& a) { return a.kind == k; }));
}

constexpr uint8_t kAttrRej = 0x12;
// REJ body fields (from the MAD's start): message rejected (2 bits), reason.
uint8_t rej_message(const std::vector<uint8_t>& mad) { return mad[24 + 8] >> 6; }
uint16_t rej_code(const std::vector<uint8_t>& mad) {
  return static_cast<uint16_t>(mad[24 + 10] << 8 | mad[24 + 11]);
}

}  // namespace

TEST_CASE("ib_cm: the passive side runs the REQ's path MTU, or refuses it with REJ(invalid MTU)",
          "[cm][ib]") {
  // The IB REP carries no MTU: the requester runs the one it asked for, so the passive side
  // must run that one too (a smaller one would fail every message between the two).
  IbPair n;
  REQUIRE(n.b.listen(7471, 22) == 0);
  QpParams a_local = ib_params(0x10, 1, 1, 1);
  a_local.pmtu_bytes = 1024;
  REQUIRE(n.a.connect(n.now, 11, IbPair::kB, 7471, a_local) > 0);
  n.run();
  const CmAction* req = n.last(n.events_b, CmAction::Kind::kRequest);
  REQUIRE(req != nullptr);
  CHECK(req->remote.pmtu_bytes == 1024);
  // B could carry 4096: it still runs 1024.
  REQUIRE(n.b.accept(n.now, 22, req->conn, ib_params(0x20, 2, 1, 1)) == 0);
  n.run();
  const CmAction* ea = n.last(n.events_a, CmAction::Kind::kEstablished);
  const CmAction* eb = n.last(n.events_b, CmAction::Kind::kEstablished);
  REQUIRE(ea != nullptr);
  REQUIRE(eb != nullptr);
  CHECK(ea->pmtu_bytes == 1024);
  CHECK(eb->pmtu_bytes == 1024);

  // A asks for 4096; B's port carries 1024 at most: B refuses with REJ(invalid MTU) rather
  // than run a smaller PMTU than A.
  REQUIRE(n.a.connect(n.now, 11, IbPair::kB, 7471, ib_params(0x11, 1, 1, 1)) > 0);
  n.run();
  req = n.last(n.events_b, CmAction::Kind::kRequest);
  REQUIRE(req != nullptr);
  CHECK(req->remote.pmtu_bytes == 4096);
  QpParams small = ib_params(0x21, 2, 1, 1);
  small.pmtu_bytes = 1024;
  CHECK(n.b.accept(n.now, 22, req->conn, small) == -EMSGSIZE);
  const std::vector<CmAction> out = drain(n.b);
  const auto rejs = mads(out, kAttrRej);
  REQUIRE(rejs.size() == 1);
  CHECK(rej_code(rejs[0]) == kIbRejInvalidMtu);
  CHECK(rej_message(rejs[0]) == 0);  // a REQ
  CHECK(mads(out, 0x13).empty());    // no REP
  n.a.on_message(n.now, IbPair::kB, rejs[0].data(), rejs[0].size());
  n.run();
  const CmAction* rej = n.last(n.events_a, CmAction::Kind::kRejected);
  REQUIRE(rej != nullptr);
  CHECK(rej->reason == RejectReason::kPolicy);
  CHECK(n.b.connection_count() == 1);  // the first connection only
  CHECK(n.b.accept(n.now, 22, req->conn, small) == -ENOENT);
}

TEST_CASE("ib_cm: a REJ names the message it rejects: the REQ, or (after our REP) other",
          "[cm][ib]") {
  // Linux looks a REJ of a REQ up without the sender's id: one sent after our REP must say
  // "other" (2), or Linux drops it and stays connected.
  IbPair n;
  REQUIRE(n.b.listen(7471, 22) == 0);
  REQUIRE(n.a.connect(n.now, 11, IbPair::kB, 7471, ib_params(0x10, 1, 1, 1)) > 0);
  n.run();
  const CmAction* req = n.last(n.events_b, CmAction::Kind::kRequest);
  REQUIRE(req != nullptr);
  REQUIRE(n.b.reject(n.now, 22, req->conn, RejectReason::kRefused) == 0);
  auto rejs = mads(drain(n.b), kAttrRej);
  REQUIRE(rejs.size() == 1);
  CHECK(rej_message(rejs[0]) == 0);
  CHECK(rej_code(rejs[0]) == kIbRejConsumerDefined);

  REQUIRE(n.a.connect(n.now, 11, IbPair::kB, 7471, ib_params(0x11, 1, 1, 1)) > 0);
  n.run();
  req = n.last(n.events_b, CmAction::Kind::kRequest);
  REQUIRE(req != nullptr);
  REQUIRE(n.b.accept(n.now, 22, req->conn, ib_params(0x21, 2, 1, 1)) == 0);
  CHECK(mads(drain(n.b), 0x13).size() == 1);  // the REP, lost on the way
  REQUIRE(n.b.disconnect(n.now, 22, req->conn) == 0);
  rejs = mads(drain(n.b), kAttrRej);
  REQUIRE(rejs.size() == 1);
  CHECK(rej_message(rejs[0]) == 2);
  // The parser reads the field back.
  CmMessage m = parse_ok(rejs[0]);
  CHECK(m.type == CmType::kRej);
}

TEST_CASE("ib_cm: a pending request outlives the requester's REQ resends, then REJ(timeout)",
          "[cm][ib]") {
  // The kernel's REQ (rdma_cm on rxe): remote CM response timeout 20, primary local ACK
  // timeout 19 (packet life time 18, CMA_IBOE_PACKET_LIFETIME in 6.1), 15 CM retries. Its
  // ib_send_cm_req resends it every cm_convert_to_ms(20) + 2 x cm_convert_to_ms(18) = 4096 +
  // 2 x 1024 ms = 6.144 s, so for 16 x 6.144 s = 98.3 s (not 16 x 4.3 s = 68.7 s: a resend
  // after that would be taken for a new request). Each resend is the same request.
  IbPair n;
  REQUIRE(n.b.listen(7471, 22) == 0);
  const std::vector<uint8_t> req_mad = mad_from_hex(kKernelReq);
  REQUIRE(req_mad[24 + 43] >> 3 == 20);
  REQUIRE(req_mad[24 + 95] >> 3 == 19);
  n.b.on_message(n.now, IbPair::kA, req_mad.data(), req_mad.size());
  std::vector<CmAction> out = drain(n.b);
  REQUIRE(count_kind(out, CmAction::Kind::kRequest) == 1);
  const uint32_t conn = out[0].conn;
  const uint64_t t0 = n.now;
  const uint64_t wait = n.b.next_deadline_ns() - t0;
  CHECK(wait == 16 * 6'144'000'000ull);
  for (int i = 1; i <= 15; ++i) {
    n.now = t0 + uint64_t(i) * 6'144'000'000ull;
    n.b.on_timer(n.now);
    n.b.on_message(n.now, IbPair::kA, req_mad.data(), req_mad.size());
    out = drain(n.b);
    INFO("resend " << i);
    CHECK(count_kind(out, CmAction::Kind::kRequest) == 0);
    CHECK(count_kind(out, CmAction::Kind::kRejected) == 0);
    CHECK(mads(out, kAttrRej).empty());
  }
  CHECK(n.b.connection_count() == 1);
  // Nobody answers: the request expires, and the requester is told why.
  n.now = n.b.next_deadline_ns();
  n.b.on_timer(n.now);
  out = drain(n.b);
  const auto rejs = mads(out, kAttrRej);
  REQUIRE(rejs.size() == 1);
  CHECK(rej_code(rejs[0]) == kIbRejTimeout);
  CHECK(rej_message(rejs[0]) == 0);
  CHECK(count_kind(out, CmAction::Kind::kRejected) == 1);
  CHECK(n.b.connection_count() == 0);
  CHECK(n.b.accept(n.now, 22, conn, ib_params(0x20, 2, 1, 1)) == -ENOENT);

  // A requester asking for the longest wait (2^31 x 4 us, 15 retries) is bounded.
  std::vector<uint8_t> slow = req_mad;
  slow[24 + 43] = static_cast<uint8_t>(31 << 3 | (slow[24 + 43] & 0x7));
  slow[24 + 3] ^= 1;  // another comm id
  n.b.on_message(n.now, IbPair::kA, slow.data(), slow.size());
  REQUIRE(count_kind(drain(n.b), CmAction::Kind::kRequest) == 1);
  CHECK(n.b.next_deadline_ns() - n.now == 120'000'000'000ull);
  // One with the RoCE packet life time of Linux after 6.1 (16: local ACK timeout 17) and a
  // 1 s response timeout (18), 3 retries: 4 x (1024 + 2 x 256) ms. No shorter than our own
  // native budget, (max_retries + 1) x retry_timeout_ns = 1.2 s.
  std::vector<uint8_t> quick = req_mad;
  quick[24 + 43] = static_cast<uint8_t>(18 << 3 | (quick[24 + 43] & 0x7));
  quick[24 + 95] = static_cast<uint8_t>(17 << 3 | (quick[24 + 95] & 0x7));
  quick[24 + 51] = static_cast<uint8_t>(3 << 4 | (quick[24 + 51] & 0xF));
  quick[24 + 3] ^= 4;   // another comm id
  quick[24 + 34] ^= 4;  // and QP
  n.b.on_message(n.now, IbPair::kA, quick.data(), quick.size());
  REQUIRE(count_kind(drain(n.b), CmAction::Kind::kRequest) == 1);
  CHECK(n.b.next_deadline_ns() - n.now == 4 * 1'536'000'000ull);

  // An accepted, established connection: a late resend of its REQ is no new request either.
  slow[24 + 3] ^= 2;
  slow[24 + 34] ^= 1;  // from another QP (the pending one's would be stale)
  n.b.on_message(n.now, IbPair::kA, slow.data(), slow.size());
  out = drain(n.b);
  REQUIRE(count_kind(out, CmAction::Kind::kRequest) == 1);
  const CmAction r = *std::find_if(
      out.begin(), out.end(), [](const CmAction& a) { return a.kind == CmAction::Kind::kRequest; });
  REQUIRE(n.b.accept(n.now, 22, r.conn, ib_params(0x20, 2, 1, 1)) == 0);
  n.b.on_qp_traffic(r.conn);
  drain(n.b);
  n.b.on_message(n.now, IbPair::kA, slow.data(), slow.size());
  CHECK(count_kind(drain(n.b), CmAction::Kind::kRequest) == 0);
}

TEST_CASE("ib_cm: one MRA per message is honoured; repeated MRAs do not wait forever", "[cm][ib]") {
  IbPair n;
  const std::vector<uint8_t> buf = request_and_mra(n).mra;
  // B never answers but says "wait" to every REQ (re)sent: A honours the first only, then
  // resends within its budget and gives up.
  bool failed = false;
  for (int i = 0; i < 40 && !failed; ++i) {
    n.a.on_message(n.now, IbPair::kB, buf.data(), buf.size());
    n.now = n.a.next_deadline_ns();
    n.a.on_timer(n.now);
    for (const auto& a : drain(n.a)) failed |= a.kind == CmAction::Kind::kRejected;
  }
  CHECK(failed);
  CHECK(n.a.counters().mra_received == 1);
  CHECK(n.a.connection_count() == 0);
}

TEST_CASE("ib_cm: Linux's REJ(timeout) without our id ends the request it names", "[cm][ib]") {
  // A Linux requester that gives up sends REJ(timeout) with remote comm id 0 (it never saw
  // ours): it is matched by the peer and the peer's own id.
  for (const bool accepted : {false, true}) {
    INFO((accepted ? "after our REP" : "request pending"));
    IbPair n;
    REQUIRE(n.b.listen(7471, 22) == 0);
    const std::vector<uint8_t> req_mad = mad_from_hex(kKernelReq);
    n.b.on_message(n.now, IbPair::kA, req_mad.data(), req_mad.size());
    std::vector<CmAction> out = drain(n.b);
    REQUIRE(count_kind(out, CmAction::Kind::kRequest) == 1);
    const uint32_t conn = out[0].conn;
    if (accepted) {
      QpParams local = ib_params(0x20, 2, 1, 1);
      local.pmtu_bytes = 1024;
      REQUIRE(n.b.accept(n.now, 22, conn, local) == 0);
      drain(n.b);
    }
    std::vector<uint8_t> rej(kMadBytes, 0);
    std::copy(req_mad.begin(), req_mad.begin() + 24, rej.begin());  // header, tid
    rej[17] = kAttrRej;
    std::copy(req_mad.begin() + 24, req_mad.begin() + 28, rej.begin() + 24);  // its comm id
    rej[24 + 11] = kIbRejTimeout;
    rej[24 + 9] = 8 << 1;  // ARI: its CA GUID
    std::copy(req_mad.begin() + 24 + 16, req_mad.begin() + 24 + 24, rej.begin() + 24 + 12);
    CmMessage m;
    CHECK(parse_ib_cm_mad(rej.data(), rej.size(), m) == CmParseError::kOk);
    n.b.on_message(n.now, IbPair::kA, rej.data(), rej.size());
    CHECK(n.b.counters().rx_malformed == 0);
    out = drain(n.b);
    REQUIRE(count_kind(out, CmAction::Kind::kRejected) == 1);
    CHECK(out[0].reason == RejectReason::kTimeout);
    CHECK(n.b.connection_count() == 0);
    // Any other REJ without our id is still malformed.
    rej[24 + 11] = kIbRejConsumerDefined;
    CHECK(parse_ib_cm_mad(rej.data(), rej.size(), m) == CmParseError::kBadConnId);
  }
}

namespace {

// A MAD's big-endian fields, read at IBTA offsets (independent of the codec under test).
uint32_t be32_at(const std::vector<uint8_t>& b, size_t off) {
  return uint32_t{b[off]} << 24 | uint32_t{b[off + 1]} << 16 | uint32_t{b[off + 2]} << 8 |
         b[off + 3];
}
uint64_t be64_at(const std::vector<uint8_t>& b, size_t off) {
  return uint64_t{be32_at(b, off)} << 32 | be32_at(b, off + 4);
}
uint16_t attr_of(const std::vector<uint8_t>& mad) {
  return static_cast<uint16_t>(mad[16] << 8 | mad[17]);
}

// A SIDR_REQ as Linux's rdma_cm sends it to resolve a UDP port (cma_resolve_ib_udp): request
// id 0x12345678, TID 0x0000000712345678, service id RDMA_PS_UDP << 16 | 7174, then rdma_cm's
// header (198.18.0.1:0x9000 -> 198.18.0.2).
const std::string kSidrReq =
    "01070203000000000000000712345678001700000000000012345678ffff00000000000001111c06"
    "00409000000000000000000000000000c6120001000000000000000000000000c6120002";

// One established IB connection between A (active, QP 0x10) and B (QP 0x20).
struct Connected {
  uint32_t a_conn = 0;
  uint32_t b_conn = 0;
};
Connected connect_pair(IbPair& n) {
  const auto [a_conn, b_conn] = request(n, ib_params(0x10, 1, 1, 1));
  REQUIRE(n.b.accept(n.now, 22, b_conn, ib_params(0x20, 2, 1, 1)) == 0);
  n.run();
  REQUIRE(n.last(n.events_a, CmAction::Kind::kEstablished) != nullptr);
  REQUIRE(n.last(n.events_b, CmAction::Kind::kEstablished) != nullptr);
  return {static_cast<uint32_t>(a_conn), b_conn};
}

}  // namespace

TEST_CASE("ib_cm: a SIDR_REQ gets one SIDR_REP 'unsupported' per request, ids and TID echoed",
          "[cm][ib]") {
  // Without an answer rdma_cm retries its SIDR_REQ for about 65 s. conduit has no UD QPs, so
  // no service resolves here: it answers as Linux's ib_cm does when no listener matches the
  // service id, with status 1 (IB_SIDR_UNSUPPORTED). An RC listener on the same port number
  // does not change that (rdma_cm's UDP port space is another service id).
  IbPair n;
  REQUIRE(n.b.listen(7174, 22) == 0);
  const std::vector<uint8_t> req = mad_from_hex(kSidrReq);
  for (int i = 0; i < 2; ++i) {
    INFO("request " << i << " (the second a retry)");
    n.b.on_message(n.now, IbPair::kA, req.data(), req.size());
    const std::vector<CmAction> out = drain(n.b);
    REQUIRE(out.size() == 1);  // one reply per request, and no request for the listener
    REQUIRE(out[0].kind == CmAction::Kind::kSend);
    CHECK(out[0].peer == IbPair::kA);
    REQUIRE(out[0].len == kMadBytes);  // no larger than the request
    const std::vector<uint8_t> rep(out[0].bytes.begin(), out[0].bytes.begin() + out[0].len);
    CHECK(rep[0] == 1);  // base version, CM class 2, Send
    CHECK(rep[1] == kMgmtClassCm);
    CHECK(rep[2] == 2);
    CHECK(rep[3] == kMadMethodSend);
    CHECK(be32_at(rep, 4) == 0);                      // status, class specific
    CHECK(be64_at(rep, 8) == 0x0000000712345678ull);  // the request's TID
    CHECK(attr_of(rep) == 0x0018);                    // SIDR_REP
    // IBTA Table 120: request id, status, additional info length, QPN, service id, Q_Key.
    CHECK(be32_at(rep, 24 + 0) == 0x12345678u);
    CHECK(rep[24 + 4] == 1);
    CHECK(rep[24 + 5] == 0);
    CHECK(be32_at(rep, 24 + 8) == 0);
    CHECK(be64_at(rep, 24 + 12) == 0x0000000001111c06ull);
    CHECK(be32_at(rep, 24 + 20) == 0);
    CHECK(std::all_of(rep.begin() + 24 + 24, rep.end(), [](uint8_t b) { return b == 0; }));
    const CmMessage back = parse_ok(rep);  // and our own codec reads it back
    CHECK(back.type == CmType::kSidrRep);
    CHECK(back.dst_conn == 0x12345678u);
    CHECK(back.ib.sidr_status == kIbSidrUnsupported);
    // A SIDR_REP coming to us answers nothing we sent: counted, not acted on.
    n.a.on_message(n.now, IbPair::kB, rep.data(), rep.size());
    CHECK(drain(n.a).empty());
    CHECK(n.a.counters().rx_unsupported == uint64_t(i + 1));
  }
  // IPoIB's port space too; nothing is kept per request.
  std::vector<uint8_t> ipoib = req;
  ipoib[24 + 12] = 0x00;
  ipoib[24 + 13] = 0x02;
  n.b.on_message(n.now, IbPair::kA, ipoib.data(), ipoib.size());
  const auto reps = mads(drain(n.b), 0x18);
  REQUIRE(reps.size() == 1);
  CHECK(reps[0][24 + 4] == 1);
  CHECK(be64_at(reps[0], 24 + 12) == 0x0000000000021c06ull);
  CHECK(n.b.connection_count() == 0);
  CHECK(n.b.counters().rx_malformed == 0);
  CHECK(n.b.counters().rx_unsupported == 0);
  CHECK(n.b.counters().sidr_unsupported == 3);
  CHECK(n.b.counters().tx_messages == 3);
}

TEST_CASE("ib_cm: a LAP for an established connection gets APR 'unsupported'; others dropped",
          "[cm][ib]") {
  // conduit runs no alternate paths. A LAP (IBTA Table 115) for a connection it has is answered
  // with APR status 2 (IB_CM_APR_UNSUPPORTED), its TID echoed, and the connection stays up.
  IbPair n;
  const Connected c = connect_pair(n);
  std::vector<uint8_t> lap(kMadBytes, 0);
  lap[0] = 1;
  lap[1] = kMgmtClassCm;
  lap[2] = 2;
  lap[3] = kMadMethodSend;
  const uint64_t tid = 0x0000000a0000beefull;
  for (int i = 0; i < 8; ++i) lap[8 + i] = static_cast<uint8_t>(tid >> (56 - 8 * i));
  lap[17] = 0x19;
  auto put32_at = [](std::vector<uint8_t>& mad, size_t off, uint32_t v) {
    for (int i = 0; i < 4; ++i) mad[off + i] = static_cast<uint8_t>(v >> (24 - 8 * i));
  };
  put32_at(lap, 24 + 0, c.a_conn);                // local comm id: the sender's
  put32_at(lap, 24 + 4, c.b_conn);                // remote comm id: ours
  put32_at(lap, 24 + 12, 0x20u << 8 | 20u << 3);  // remote QPN (B's) + CM response timeout
  lap[24 + 24 + 15] = 0x11;                       // an alternate path's GIDs
  lap[24 + 40 + 15] = 0x22;
  n.b.on_message(n.now, IbPair::kA, lap.data(), lap.size());
  std::vector<CmAction> out = drain(n.b);
  const auto aprs = mads(out, 0x1A);
  REQUIRE(aprs.size() == 1);
  REQUIRE(out.size() == 1);
  CHECK(out[0].peer == IbPair::kA);
  CHECK(be64_at(aprs[0], 8) == tid);
  // IBTA Table 116: local comm id (ours), remote comm id (theirs), info length, AP status.
  CHECK(be32_at(aprs[0], 24 + 0) == c.b_conn);
  CHECK(be32_at(aprs[0], 24 + 4) == c.a_conn);
  CHECK(aprs[0][24 + 8] == 0);
  CHECK(aprs[0][24 + 9] == 2);
  const CmMessage back = parse_ok(aprs[0]);  // and our own codec reads it back
  CHECK(back.type == CmType::kApr);
  CHECK(back.ib.apr_status == kIbAprUnsupported);
  CHECK(n.b.connection_count() == 1);
  CHECK(n.last(n.events_b, CmAction::Kind::kDisconnected) == nullptr);
  // A LAP for a connection we do not have, or from another peer, is dropped and counted.
  const uint64_t unknown = n.b.counters().rx_unknown_conn;
  std::vector<uint8_t> stray = lap;
  stray[24 + 7] ^= 0x40;  // another remote comm id
  n.b.on_message(n.now, IbPair::kA, stray.data(), stray.size());
  const CmPeer other{cm_addr_v4(0xC6120009), 0, true};
  n.b.on_message(n.now, other, lap.data(), lap.size());
  CHECK(drain(n.b).empty());
  CHECK(n.b.counters().rx_unknown_conn == unknown + 2);
  CHECK(n.b.counters().lap_unsupported == 1);
  CHECK(n.b.counters().rx_unsupported == 0);
  // Before the connection is established there is no path to migrate: nothing is sent.
  IbPair p;
  const Requested req = request(p, ib_params(0x10, 1, 1, 1));
  std::vector<uint8_t> early = lap;
  put32_at(early, 24 + 4, req.b_conn);  // A's comm id is the same (both pairs start at 0x1000)
  p.b.on_message(p.now, IbPair::kA, early.data(), early.size());
  CHECK(mads(drain(p.b), 0x1A).empty());
  CHECK(p.b.counters().rx_unexpected == 1);
}

TEST_CASE("ib_cm: a REJ after our RTU ends the connection we took as established", "[cm][ib]") {
  // The passive side gives up between its REP and our RTU (its application goes away: Linux's
  // ib_cm then sends REJ(consumer defined, 'other'), as conduit does): the active side,
  // established on the REP, must not stay connected to a QP that is gone. Linux's cm_rej_handler
  // enters timewait on it in ESTABLISHED.
  IbPair n;
  const uint32_t b_conn = request(n, ib_params(0x10, 1, 1, 1)).b_conn;
  REQUIRE(n.b.accept(n.now, 22, b_conn, ib_params(0x20, 2, 1, 1)) == 0);
  const auto reps = mads(drain(n.b), 0x13);
  REQUIRE(reps.size() == 1);
  n.a.on_message(n.now, IbPair::kB, reps[0].data(), reps[0].size());
  std::vector<CmAction> out = drain(n.a);  // kEstablished and the RTU, which is lost
  REQUIRE(count_kind(out, CmAction::Kind::kEstablished) == 1);
  REQUIRE(n.b.disconnect(n.now, 22, b_conn) == 0);
  const auto rejs = mads(drain(n.b), kAttrRej);
  REQUIRE(rejs.size() == 1);
  CHECK(rej_message(rejs[0]) == 2);
  n.a.on_message(n.now, IbPair::kB, rejs[0].data(), rejs[0].size());
  out = drain(n.a);
  CHECK(count_kind(out, CmAction::Kind::kDisconnected) == 1);
  CHECK(n.a.connection_count() == 0);
  CHECK(n.a.next_deadline_ns() == UINT64_MAX);
}

TEST_CASE("ib_cm: a REQ from a QP we hold connected under another comm id: REJ(stale), DREQ",
          "[cm][ib]") {
  // The peer's QP 0x10 is connected to our QP 0x20. A new REQ from that QP under another comm
  // id means the peer lost the old connection (restarted, or our DREP and its DREQs were lost)
  // and reuses the QP. Linux's cm_match_req answers REJ 'stale connection' (10) to the REQ and
  // sends DREQ for the old connection; a second connection to the same QP would be wrong.
  IbPair n;
  const Connected c = connect_pair(n);
  const int64_t again = n.a.connect(n.now, 11, IbPair::kB, 7471, ib_params(0x10, 5, 1, 1));
  REQUIRE(again > 0);
  const auto reqs = mads(drain(n.a), 0x10);
  REQUIRE(reqs.size() == 1);
  n.b.on_message(n.now, IbPair::kA, reqs[0].data(), reqs[0].size());
  const std::vector<CmAction> out = drain(n.b);
  CHECK(count_kind(out, CmAction::Kind::kRequest) == 0);
  const auto rejs = mads(out, kAttrRej);
  REQUIRE(rejs.size() == 1);
  CHECK(rej_code(rejs[0]) == 10);
  CHECK(rej_message(rejs[0]) == 0);                    // it rejects the REQ
  CHECK(be32_at(rejs[0], 24 + 0) == 0);                // no comm id of ours for it
  CHECK(be32_at(rejs[0], 24 + 4) == uint32_t(again));  // the new request's
  CHECK(be64_at(rejs[0], 8) == be64_at(reqs[0], 8));   // its TID
  const auto dreqs = mads(out, 0x15);
  REQUIRE(dreqs.size() == 1);
  CHECK(be32_at(dreqs[0], 24 + 0) == c.b_conn);
  CHECK(be32_at(dreqs[0], 24 + 4) == c.a_conn);
  // The requester learns why; the old connection ends on both sides once the DREP is back.
  n.a.on_message(n.now, IbPair::kB, rejs[0].data(), rejs[0].size());
  n.a.on_message(n.now, IbPair::kB, dreqs[0].data(), dreqs[0].size());
  n.run();
  CHECK(n.last(n.events_a, CmAction::Kind::kRejected) != nullptr);
  CHECK(n.last(n.events_a, CmAction::Kind::kDisconnected) != nullptr);
  CHECK(n.last(n.events_b, CmAction::Kind::kDisconnected) != nullptr);
  CHECK(n.a.connection_count() == 0);
  CHECK(n.b.connection_count() == 0);
  // A REQ from another QP of the same host is a new request as before.
  REQUIRE(n.a.connect(n.now, 11, IbPair::kB, 7471, ib_params(0x11, 5, 1, 1)) > 0);
  n.run();
  CHECK(n.b.connection_count() == 1);
}

TEST_CASE(
    "ib_cm: a QP whose connection here is being set up or torn down is stale too; "
    "once it is over it is not (no timewait)",
    "[cm][ib]") {
  // Linux's ib_cm keeps a remote QPN in its table from the REQ (passive) or REP (active) until
  // the connection enters timewait: cm_match_req and cm_rep_handler refuse a REQ or REP from
  // that QP under another comm id as stale in every state before. The DREQ goes only to an
  // established connection (ib_send_cm_dreq does nothing in the others). cm_enter_timewait
  // takes the QPN out of the table (cm_remove_remote), so a REQ reusing it after the DREP is a
  // new request.
  auto new_req_from_qp_0x10 = [](IbPair& n) {
    REQUIRE(n.a.connect(n.now, 11, IbPair::kB, 7471, ib_params(0x10, 5, 1, 1)) > 0);
    const auto reqs = mads(drain(n.a), 0x10);
    REQUIRE(reqs.size() == 1);
    n.b.on_message(n.now, IbPair::kA, reqs[0].data(), reqs[0].size());
    return drain(n.b);
  };
  SECTION("its request pending here") {
    IbPair n;
    const Requested first = request(n, ib_params(0x10, 1, 1, 1));
    const std::vector<CmAction> out = new_req_from_qp_0x10(n);
    CHECK(count_kind(out, CmAction::Kind::kRequest) == 0);
    const auto rejs = mads(out, kAttrRej);
    REQUIRE(rejs.size() == 1);
    CHECK(rej_code(rejs[0]) == kIbRejStaleConn);
    CHECK(rej_message(rejs[0]) == 0);
    CHECK(mads(out, 0x15).empty());  // nothing to disconnect
    CHECK(n.b.counters().stale_requests == 1);
    // The first request is untouched: its owner may still accept it.
    REQUIRE(n.b.accept(n.now, 22, first.b_conn, ib_params(0x20, 2, 1, 1)) == 0);
  }
  SECTION("our REP out") {
    IbPair n;
    const Requested first = request(n, ib_params(0x10, 1, 1, 1));
    REQUIRE(n.b.accept(n.now, 22, first.b_conn, ib_params(0x20, 2, 1, 1)) == 0);
    drain(n.b);  // the REP is lost
    const std::vector<CmAction> out = new_req_from_qp_0x10(n);
    CHECK(count_kind(out, CmAction::Kind::kRequest) == 0);
    CHECK(mads(out, kAttrRej).size() == 1);
    CHECK(n.b.connection_count() == 1);
  }
  SECTION("our DREQ out") {
    IbPair n;
    const Connected c = connect_pair(n);
    REQUIRE(n.b.disconnect(n.now, 22, c.b_conn) == 0);
    drain(n.b);  // the DREQ is lost
    const std::vector<CmAction> out = new_req_from_qp_0x10(n);
    CHECK(count_kind(out, CmAction::Kind::kRequest) == 0);
    const auto rejs = mads(out, kAttrRej);
    REQUIRE(rejs.size() == 1);
    CHECK(rej_code(rejs[0]) == kIbRejStaleConn);
    CHECK(mads(out, 0x15).empty());  // no second DREQ: ours is on its way
    CHECK(n.b.connection_count() == 1);
  }
  SECTION("a REP from a QP whose connection here is being torn down") {
    // A's QP 0x10 is connected to B's QP 0x20. A hangs up (its DREQ is lost), connects again
    // from QP 0x11, and B answers from QP 0x20 (B still holds the old connection, on another
    // QP of A's): A refuses the REP as stale.
    IbPair n;
    const Connected c = connect_pair(n);
    REQUIRE(n.a.disconnect(n.now, 11, c.a_conn) == 0);
    drain(n.a);
    const int64_t again = n.a.connect(n.now, 11, IbPair::kB, 7471, ib_params(0x11, 5, 1, 1));
    REQUIRE(again > 0);
    n.run();
    const CmAction* req = n.last(n.events_b, CmAction::Kind::kRequest);
    REQUIRE(req != nullptr);
    REQUIRE(n.b.accept(n.now, 22, req->conn, ib_params(0x20, 7, 1, 1)) == 0);
    const auto reps = mads(drain(n.b), 0x13);
    REQUIRE(reps.size() == 1);
    n.a.on_message(n.now, IbPair::kB, reps[0].data(), reps[0].size());
    const std::vector<CmAction> out = drain(n.a);
    CHECK(count_kind(out, CmAction::Kind::kEstablished) == 0);
    const auto rejs = mads(out, kAttrRej);
    REQUIRE(rejs.size() == 1);
    CHECK(rej_code(rejs[0]) == kIbRejStaleConn);
    CHECK(rej_message(rejs[0]) == 1);
    CHECK(mads(out, 0x15).empty());  // the old one's DREQ is already out
    CHECK(count_kind(out, CmAction::Kind::kRejected) == 1);
    CHECK(n.a.counters().stale_replies == 1);
  }
  SECTION("the connection over: a REQ reusing its QP is a new request") {
    IbPair n;
    const Connected c = connect_pair(n);
    REQUIRE(n.a.disconnect(n.now, 11, c.a_conn) == 0);
    n.run();
    REQUIRE(n.b.connection_count() == 0);
    const std::vector<CmAction> out = new_req_from_qp_0x10(n);
    CHECK(count_kind(out, CmAction::Kind::kRequest) == 1);
    CHECK(mads(out, kAttrRej).empty());
    CHECK(n.b.counters().stale_requests == 0);
  }
}

TEST_CASE("ib_cm: crossing DREQs: each side answers the other's, both owners told once",
          "[cm][ib]") {
  // Both ends hang up at once (Linux's ib_cm in DREQ_SENT answers a DREQ too). The DREPs then
  // find no connection and are counted.
  IbPair n;
  const Connected c = connect_pair(n);
  REQUIRE(n.a.disconnect(n.now, 11, c.a_conn) == 0);
  REQUIRE(n.b.disconnect(n.now, 22, c.b_conn) == 0);
  const auto dreq_a = mads(drain(n.a), 0x15);
  const auto dreq_b = mads(drain(n.b), 0x15);
  REQUIRE(dreq_a.size() == 1);
  REQUIRE(dreq_b.size() == 1);
  n.b.on_message(n.now, IbPair::kA, dreq_a[0].data(), dreq_a[0].size());
  n.a.on_message(n.now, IbPair::kB, dreq_b[0].data(), dreq_b[0].size());
  const std::vector<CmAction> out_a = drain(n.a), out_b = drain(n.b);
  const auto drep_a = mads(out_a, 0x16), drep_b = mads(out_b, 0x16);
  REQUIRE(drep_a.size() == 1);
  REQUIRE(drep_b.size() == 1);
  CHECK(be64_at(drep_a[0], 8) == be64_at(dreq_b[0], 8));  // each echoes the DREQ's TID
  CHECK(be64_at(drep_b[0], 8) == be64_at(dreq_a[0], 8));
  CHECK(count_kind(out_a, CmAction::Kind::kDisconnected) == 1);
  CHECK(count_kind(out_b, CmAction::Kind::kDisconnected) == 1);
  n.a.on_message(n.now, IbPair::kB, drep_b[0].data(), drep_b[0].size());
  n.b.on_message(n.now, IbPair::kA, drep_a[0].data(), drep_a[0].size());
  CHECK(drain(n.a).empty());
  CHECK(drain(n.b).empty());
  CHECK(n.a.connection_count() == 0);
  CHECK(n.b.connection_count() == 0);
  CHECK(n.a.counters().rx_unknown_conn == 1);
  CHECK(n.b.counters().rx_unknown_conn == 1);
  // A DREQ for a connection we never had is answered with a DREP all the same (as Linux's
  // cm_issue_drep): the ids swapped, the TID echoed.
  std::vector<uint8_t> lost = dreq_a[0];
  lost[24 + 7] ^= 0x10;
  n.b.on_message(n.now, IbPair::kA, lost.data(), lost.size());
  const auto drep = mads(drain(n.b), 0x16);
  REQUIRE(drep.size() == 1);
  CHECK(be32_at(drep[0], 24 + 0) == be32_at(lost, 24 + 4));
  CHECK(be32_at(drep[0], 24 + 4) == be32_at(lost, 24 + 0));
  CHECK(be64_at(drep[0], 8) == be64_at(lost, 8));
}

TEST_CASE("ib_cm: abandoning our REQ tells the listener with REJ(timeout), as Linux does",
          "[cm][ib]") {
  // Linux's cm_destroy_id in REQ_SENT sends REJ(timeout), its CA GUID as the ARI and no remote
  // id (it has none yet); the listener finds its request by that GUID and our comm id and
  // drops it, instead of handing it to its application to accept into a dead end.
  IbPair n;
  REQUIRE(n.b.listen(7471, 22) == 0);
  const int64_t a_conn = n.a.connect(n.now, 11, IbPair::kB, 7471, ib_params(0x10, 1, 1, 1));
  REQUIRE(a_conn > 0);
  const auto reqs = mads(drain(n.a), 0x10);
  REQUIRE(reqs.size() == 1);
  n.b.on_message(n.now, IbPair::kA, reqs[0].data(), reqs[0].size());
  REQUIRE(count_kind(drain(n.b), CmAction::Kind::kRequest) == 1);
  REQUIRE(n.a.disconnect(n.now, 11, static_cast<uint32_t>(a_conn)) == 0);
  const auto rejs = mads(drain(n.a), kAttrRej);
  REQUIRE(rejs.size() == 1);
  CHECK(rej_code(rejs[0]) == kIbRejTimeout);
  CHECK(rej_message(rejs[0]) == 2);  // Linux's cm_format_rej: 'other' from REQ_SENT
  CHECK(be32_at(rejs[0], 24 + 0) == uint32_t(a_conn));
  CHECK(be32_at(rejs[0], 24 + 4) == 0);
  CHECK(rejs[0][24 + 9] >> 1 == 8);                               // ARI length
  CHECK(be64_at(rejs[0], 24 + 12) == be64_at(reqs[0], 24 + 16));  // = the REQ's CA GUID
  CHECK(be64_at(rejs[0], 8) == be64_at(reqs[0], 8));              // the REQ's TID
  n.b.on_message(n.now, IbPair::kA, rejs[0].data(), rejs[0].size());
  const std::vector<CmAction> out = drain(n.b);
  CHECK(count_kind(out, CmAction::Kind::kRejected) == 1);
  CHECK(n.b.connection_count() == 0);
  CHECK(n.a.connection_count() == 0);
}

TEST_CASE("ib_cm: REJ reasons map to what an rdma_cm user sees", "[cm][ib]") {
  // rdma_cm reports any REJ as REJECTED with the IB reason as status, and librdmacm's
  // rdma_connect() returns ECONNREFUSED for it: a refusal (kRefused), not EINVAL, unless a
  // more precise reason applies.
  CHECK(reject_reason_from_ib(kIbRejStaleConn) == RejectReason::kRefused);
  CHECK(reject_reason_from_ib(30) == RejectReason::kRefused);   // duplicate local comm id
  CHECK(reject_reason_from_ib(100) == RejectReason::kRefused);  // beyond the table
  CHECK(reject_reason_from_ib(kIbRejConsumerDefined) == RejectReason::kRefused);
  CHECK(reject_reason_from_ib(kIbRejInvalidServiceId) == RejectReason::kNoListener);
  CHECK(reject_reason_from_ib(kIbRejTimeout) == RejectReason::kTimeout);
  CHECK(reject_reason_from_ib(kIbRejNoResources) == RejectReason::kQuota);
  CHECK(reject_reason_from_ib(kIbRejInvalidMtu) == RejectReason::kPolicy);
  CHECK(reject_reason_from_ib(12) == RejectReason::kInvalid);  // invalid GID
  CHECK(reject_reason_from_ib(31) == RejectReason::kInvalid);  // invalid class version
  // The stale REQ test's requester: it learns 'refused', and the REJ's own code, which tells
  // its client the truth (a stale connection, not the application's no).
  IbPair n;
  connect_pair(n);
  REQUIRE(n.a.connect(n.now, 11, IbPair::kB, 7471, ib_params(0x10, 5, 1, 1)) > 0);
  n.run();
  const CmAction* rej = n.last(n.events_a, CmAction::Kind::kRejected);
  REQUIRE(rej != nullptr);
  CHECK(rej->reason == RejectReason::kRefused);
  CHECK(rej->ib_rej_code == kIbRejStaleConn);
  // An application's refusal carries its code too (consumer defined); a native REJ none.
  IbPair p;
  const Requested r = request(p, ib_params(0x10, 1, 1, 1));
  REQUIRE(p.b.reject(p.now, 22, r.b_conn, RejectReason::kRefused) == 0);
  p.run();
  rej = p.last(p.events_a, CmAction::Kind::kRejected);
  REQUIRE(rej != nullptr);
  CHECK(rej->reason == RejectReason::kRefused);
  CHECK(rej->ib_rej_code == kIbRejConsumerDefined);
  CmConfig cfg;
  ConnectionManager a(cfg);
  const CmPeer peer{cm_addr_v4(0xC6120002), 4792, false};
  const int64_t conn = a.connect(0, 11, peer, 7, ib_params(0x10, 1, 0, 0));
  REQUIRE(conn > 0);
  drain(a);
  CmMessage m;
  m.type = CmType::kRej;
  m.src_conn = 5;
  m.dst_conn = static_cast<uint32_t>(conn);
  m.reason = RejectReason::kRefused;
  uint8_t buf[kMaxMessageBytes];
  a.on_message(0, peer, buf, build_cm_message(m, buf));
  const std::vector<CmAction> out = drain(a);
  REQUIRE(count_kind(out, CmAction::Kind::kRejected) == 1);
  CHECK(out[0].reason == RejectReason::kRefused);
  CHECK(out[0].ib_rej_code == 0);
}

TEST_CASE("ib_cm: a REJ's private data reaches the requester's owner, as rdma_cm's REJECTED event",
          "[cm][ib]") {
  // A verbs listener's rdma_reject(id, data, len) puts data in the REJ's private data field
  // (148 bytes at body offset 84); rdma_cm hands the whole field to the requester's
  // application (an NVMe-oF host reads the target's status there). Ours, cut at
  // kMaxPrivateBytes.
  IbPair n;
  const int64_t conn = n.a.connect(n.now, 11, IbPair::kB, 4420, ib_params(0x10, 1, 1, 1));
  REQUIRE(conn > 0);
  const auto reqs = mads(drain(n.a), 0x10);
  REQUIRE(reqs.size() == 1);
  std::vector<uint8_t> rej(kMadBytes, 0);
  std::copy(reqs[0].begin(), reqs[0].begin() + 24, rej.begin());  // header, our TID
  rej[17] = kAttrRej;
  rej[24 + 3] = 0x77;                                                           // its comm id
  std::copy(reqs[0].begin() + 24, reqs[0].begin() + 28, rej.begin() + 24 + 4);  // ours
  rej[24 + 11] = kIbRejConsumerDefined;
  rej[24 + 84] = 0x00;  // struct nvme_rdma_cm_rej: recfmt 0, status 0x0006 (little endian)
  rej[24 + 85] = 0x00;
  rej[24 + 86] = 0x06;
  rej[24 + 87] = 0x00;
  rej[24 + 84 + 63] = 0xEE;  // the last byte we keep
  n.a.on_message(n.now, IbPair::kB, rej.data(), rej.size());
  const std::vector<CmAction> out = drain(n.a);
  REQUIRE(count_kind(out, CmAction::Kind::kRejected) == 1);
  const CmAction& r = out[0];
  CHECK(r.conn == uint32_t(conn));
  CHECK(r.reason == RejectReason::kRefused);
  REQUIRE(r.private_len == kMaxPrivateBytes);
  CHECK(r.private_data[2] == 0x06);
  CHECK(r.private_data[63] == 0xEE);
  // Our codec writes a REJ's private data where it reads it.
  CmMessage m = parse_ok(rej);
  uint8_t buf[kMadBytes];
  REQUIRE(build_ib_cm_mad(m, IbCmBuildContext{}, buf) == kMadBytes);
  CHECK(buf[24 + 86] == 0x06);
  CHECK(parse_ok(std::vector<uint8_t>(buf, buf + kMadBytes)).private_data == m.private_data);
  // A REJ of ours carries none.
  IbPair p;
  const Requested q = request(p, ib_params(0x10, 1, 1, 1));
  REQUIRE(p.b.reject(p.now, 22, q.b_conn, RejectReason::kRefused) == 0);
  p.run();
  const CmAction* mine = p.last(p.events_a, CmAction::Kind::kRejected);
  REQUIRE(mine != nullptr);
  CHECK(std::all_of(mine->private_data.begin(), mine->private_data.end(),
                    [](uint8_t b) { return b == 0; }));
  // Unless the owner gives some, as rdma_reject(id, data, len): in the REJ's private data
  // field (body offset 84), which the requester's owner gets whole (cut at kMaxPrivateBytes).
  IbPair d;
  const Requested qd = request(d, ib_params(0x10, 1, 1, 1));
  const uint8_t status[4] = {0x00, 0x00, 0x06, 0x00};  // an NVMe-oF target's nvme_rdma_cm_rej
  REQUIRE(d.b.reject(d.now, 22, qd.b_conn, RejectReason::kRefused, status, sizeof status) == 0);
  const std::vector<CmAction> sent = drain(d.b);
  const auto rejs = mads(sent, kAttrRej);
  REQUIRE(rejs.size() == 1);
  CHECK(rej_code(rejs[0]) == kIbRejConsumerDefined);
  CHECK(rejs[0][24 + 86] == 0x06);
  CHECK(std::all_of(rejs[0].begin() + 24 + 88, rejs[0].end(), [](uint8_t b) { return b == 0; }));
  d.a.on_message(d.now, IbPair::kB, rejs[0].data(), rejs[0].size());
  const std::vector<CmAction> got = drain(d.a);
  REQUIRE(count_kind(got, CmAction::Kind::kRejected) == 1);
  CHECK(got[0].reason == RejectReason::kRefused);
  CHECK(got[0].private_len == kMaxPrivateBytes);  // the IB CM carries no length
  CHECK(got[0].private_data[2] == 0x06);
}

TEST_CASE("ib_cm: after an MRA every later resend of that message waits as the MRA asked",
          "[cm][ib]") {
  // Linux's cm_mra_handler stretches the MAD's timeout (ib_modify_mad) for all its remaining
  // retries, not the next one only: the responder's application is known to be deciding, so
  // a lost answer is waited for at the MRA's pace (65.536 s + 64 ms for Linux's 24 and our
  // QPs' default ACK timeout 14; at most max_mra_wait_ns each), the retry budget unchanged, so
  // a responder that never decides still fails us.
  IbPair n;
  const RequestAndMra started = request_and_mra(n);
  n.a.on_message(n.now, IbPair::kB, started.mra.data(), started.mra.size());
  constexpr uint64_t kWait = 65'600'000'000ull;
  uint64_t resends = 0;
  bool failed = false;
  while (!failed) {
    const uint64_t next = n.a.next_deadline_ns();
    REQUIRE(next != UINT64_MAX);
    CHECK(next - n.now == kWait);  // each wait, the first and every one after a resend
    n.now = next;
    n.a.on_timer(n.now);
    for (const auto& a : drain(n.a)) {
      resends += a.kind == CmAction::Kind::kSend && a.bytes[17] == 0x10;
      failed |= a.kind == CmAction::Kind::kRejected;
    }
    REQUIRE(resends <= 15);
  }
  CHECK(resends == 15);  // our REQ's max CM retries, as without an MRA
  CHECK(n.a.connection_count() == 0);
  // A DREQ is a new message: an MRA of the REQ does not stretch its resends, which go at
  // our REQ's pace (its remote CM response timeout, 1024 ms, plus twice its packet life time).
  IbPair m;
  const Connected c = connect_pair(m);
  REQUIRE(m.a.disconnect(m.now, 11, c.a_conn) == 0);
  CHECK(m.a.next_deadline_ns() - m.now == 1'088'000'000ull);
}

namespace {

// After an MRA: Linux's cm_mra_handler hands ib_modify_mad cm_convert_to_ms(the MRA's service
// timeout) + cm_convert_to_ms(the id's av.timeout), the path's packet life time + 1
// (cm_init_av_by_path): for our REQ the one its primary local ACK timeout stands for, for our
// REP the one the peer's REQ's does (cm_format_paths_from_req: that minus 1). Ours, no shorter
// than retry_timeout_ns (200 ms) and no longer than max_mra_wait_ns (120 s).
struct MraWait {
  uint8_t ack_timeout;  // the REQ's primary local ACK timeout (the active QP's)
  uint8_t service_timeout;
  uint64_t wait_ns;
};
std::vector<MraWait> mra_waits() {
  return {
      // ACK timeout 14 (our QPs' default): av.timeout 14, 64 ms.
      {14, 0, 200'000'000ull},  // 1 ms + 64 ms, under the floor
      {14, 9, 200'000'000ull},  // 2 ms + 64 ms, under the floor
      {14, 16, 320'000'000ull},
      {14, 24, 65'600'000'000ull},   // Linux's own MRA (CM_MRA_SETTING): 65.536 s + 64 ms
      {14, 31, 120'000'000'000ull},  // 2^23 ms (2.3 h) asked: the cap
      // ACK timeout 19 (rdma_cm's over RoCE in Linux 6.1): av.timeout 19, 2048 ms.
      {19, 0, 2'049'000'000ull},
      {19, 9, 2'050'000'000ull},
      {19, 16, 2'304'000'000ull},
      {19, 24, 67'584'000'000ull},
      {19, 31, 120'000'000'000ull},
      // ACK timeout 0: packet life time 0, av.timeout 1, 1 ms.
      {0, 24, 65'537'000'000ull},
      // ACK timeout 23: av.timeout 23, 2^15 ms; Linux's MRA still honoured in full.
      {23, 24, 98'304'000'000ull},
      {31, 24, 120'000'000'000ull},  // av.timeout 31, 2^23 ms: the cap
  };
}

}  // namespace

TEST_CASE(
    "ib_cm: an MRA makes us wait cm_convert_to_ms of its service timeout plus that of the "
    "path's timeout, as Linux's cm_mra_handler, for our REQ and our REP",
    "[cm][ib]") {
  for (const MraWait& k : mra_waits()) {
    CAPTURE(k.ack_timeout, k.service_timeout, k.wait_ns);
    // `cm` gets the MRA from `from` 300 ms after its message went (the wait counts from the
    // MRA), waits k.wait_ns, resends the message (MAD attribute `attr`) and waits as long again.
    const auto expect_waits = [&k](IbPair& n, ConnectionManager& cm, const auto& from,
                                   const std::vector<uint8_t>& mra, uint8_t attr) {
      n.now += 300'000'000;
      cm.on_message(n.now, from, mra.data(), mra.size());
      REQUIRE(cm.counters().mra_received == 1);
      CHECK(cm.next_deadline_ns() - n.now == k.wait_ns);
      n.now = cm.next_deadline_ns();
      cm.on_timer(n.now);
      CHECK(mads(drain(cm), attr).size() == 1);
      CHECK(cm.next_deadline_ns() - n.now == k.wait_ns);
    };
    {
      INFO("our REQ: the path's timeout is the one our REQ's ACK timeout stands for");
      IbPair n;
      QpParams q = ib_params(0x10, 5, 1, 1);
      q.timeout = k.ack_timeout;
      const Requested r = request(n, q);
      const std::vector<uint8_t> mra =
          mra_mad(r.b_conn, static_cast<uint32_t>(r.a_conn), kIbMsgReq, k.service_timeout);
      expect_waits(n, n.a, IbPair::kB, mra, 0x10);
    }
    {
      INFO("our REP: the path's timeout is the one the peer's REQ's ACK timeout stands for");
      IbPair n;
      QpParams q = ib_params(0x10, 5, 1, 1);
      q.timeout = k.ack_timeout;
      const Requested r = request(n, q);
      REQUIRE(n.b.accept(n.now, 22, r.b_conn, ib_params(0x20, 2, 1, 1)) == 0);
      REQUIRE(mads(drain(n.b), 0x13).size() == 1);  // the REP, lost
      const std::vector<uint8_t> mra =
          mra_mad(static_cast<uint32_t>(r.a_conn), r.b_conn, kIbMsgRep, k.service_timeout);
      expect_waits(n, n.b, IbPair::kA, mra, 0x13);
    }
  }
}

TEST_CASE("ib_cm: an MRA keeps the resends already made: the retry budget is the REQ's, as Linux",
          "[cm][ib]") {
  // Linux's ib_cm sends its delayed MRA in answer to a resent REQ, so the requester has
  // resent at least once when the MRA arrives. cm_mra_handler only changes the MAD's timeout
  // (ib_modify_mad); the retries it made still count. Starting over at 0 would give a
  // responder that keeps saying "wait" one resend (and one 65.6 s wait) more per MRA.
  IbPair n;
  const RequestAndMra started = request_and_mra(n);
  n.now = n.a.next_deadline_ns();
  n.a.on_timer(n.now);  // the first resend, 1.088 s after the REQ
  REQUIRE(mads(drain(n.a), 0x10).size() == 1);
  REQUIRE(n.a.counters().retransmits == 1);
  n.a.on_message(n.now, IbPair::kB, started.mra.data(), started.mra.size());
  REQUIRE(n.a.counters().mra_received == 1);
  CHECK(n.a.next_deadline_ns() - n.now == 65'600'000'000ull);
  uint64_t resends = 1;
  bool failed = false;
  while (!failed) {
    n.now = n.a.next_deadline_ns();
    REQUIRE(n.now != UINT64_MAX);
    n.a.on_timer(n.now);
    for (const auto& a : drain(n.a)) {
      resends += a.kind == CmAction::Kind::kSend && a.bytes[17] == 0x10;
      failed |= a.kind == CmAction::Kind::kRejected;
    }
    REQUIRE(resends <= 16);
  }
  CHECK(resends == 15);  // our REQ's max CM retries in all, the one before the MRA included
  CHECK(n.a.counters().retransmits == 15);
  CHECK(n.a.connection_count() == 0);
}

TEST_CASE("ib_cm: a resent REQ the owner has not answered gets an MRA, as Linux's delayed MRA",
          "[cm][ib]") {
  // rdma_cm queues ib_cm's delayed MRA for a REQ its application has not accepted yet
  // (IB_CM_MRA_FLAG_DELAY); cm_dup_req_handler sends it for each resent REQ: the requester
  // then waits as asked instead of resending every 6.1 s and giving up after 98.3 s. Linux's
  // MRA always asks for 2^24 x 4.096 us (CM_MRA_SETTING, CMA_CM_MRA_SETTING before; its
  // cm_mra_handler waits it as 2^16 ms, 65.5 s, plus its path's timeout), whatever the request
  // has left; so does ours. The MRA makes the request live max_ib_request_wait_ns.
  IbPair n;
  REQUIRE(n.b.listen(7471, 22) == 0);
  const std::vector<uint8_t> req_mad = mad_from_hex(kKernelReq);
  const uint64_t t0 = n.now;
  n.b.on_message(n.now, IbPair::kA, req_mad.data(), req_mad.size());
  std::vector<CmAction> out = drain(n.b);
  REQUIRE(count_kind(out, CmAction::Kind::kRequest) == 1);
  const uint32_t conn = out[0].conn;
  CHECK(n.b.next_deadline_ns() - t0 == 98'304'000'000ull);  // the REQ's own 16 x 6.144 s
  // The first resend, 6.144 s later.
  n.now = t0 + 6'144'000'000ull;
  n.b.on_message(n.now, IbPair::kA, req_mad.data(), req_mad.size());
  out = drain(n.b);
  REQUIRE(out.size() == 1);
  CHECK(out[0].peer == IbPair::kA);
  auto mras = mads(out, 0x11);
  REQUIRE(mras.size() == 1);
  const std::vector<uint8_t>& mra = mras[0];
  CHECK(be64_at(mra, 8) == be64_at(req_mad, 8));        // the REQ's TID
  CHECK(be32_at(mra, 24 + 0) == conn);                  // our comm id
  CHECK(be32_at(mra, 24 + 4) == be32_at(req_mad, 24));  // the requester's
  CHECK(mra[24 + 8] >> 6 == 0);                         // it acknowledges the REQ
  const uint8_t timeout = mra[24 + 9] >> 3;
  CHECK(timeout == kIbMraServiceTimeout);
  CHECK(timeout == 24);  // 65.5 s as Linux waits it, not the 113.9 s the request has left
  CHECK(n.b.next_deadline_ns() == t0 + 120'000'000'000ull);
  const CmMessage back = parse_ok(mra);
  CHECK(back.type == CmType::kMra);
  CHECK(back.ib.mra_timeout == 24);
  CHECK(std::all_of(mra.begin() + 24 + 10, mra.end(), [](uint8_t b) { return b == 0; }));
  // Another resend (after the MRA's wait a Linux requester would not resend this soon; any
  // is answered): the same MRA, 40 s before the request expires.
  n.now = t0 + 80'000'000'000ull;
  n.b.on_timer(n.now);
  n.b.on_message(n.now, IbPair::kA, req_mad.data(), req_mad.size());
  mras = mads(drain(n.b), 0x11);
  REQUIRE(mras.size() == 1);
  CHECK(mras[0][24 + 9] >> 3 == 24);
  CHECK(n.b.counters().mra_sent == 2);
  // The owner answers after the REQ's own 98.3 s, within the MRA's wait: the REP goes out.
  n.now = t0 + 100'000'000'000ull;
  n.b.on_timer(n.now);
  CHECK(count_kind(drain(n.b), CmAction::Kind::kRejected) == 0);
  QpParams local = ib_params(0x20, 2, 1, 1);
  local.pmtu_bytes = 1024;
  REQUIRE(n.b.accept(n.now, 22, conn, local) == 0);
  CHECK(mads(drain(n.b), 0x13).size() == 1);
  // Between two conduits: A's REQ is resent after 1.088 s, B's MRA makes it wait 65.6 s.
  IbPair p;
  const Requested r = request(p, ib_params(0x10, 1, 1, 1));
  p.now = p.a.next_deadline_ns();
  p.a.on_timer(p.now);
  p.run();
  CHECK(p.b.counters().mra_sent == 1);
  CHECK(p.a.counters().mra_received == 1);
  CHECK(p.a.next_deadline_ns() - p.now == 65'600'000'000ull);
  REQUIRE(p.b.accept(p.now, 22, r.b_conn, ib_params(0x20, 2, 1, 1)) == 0);
  p.run();
  CHECK(p.last(p.events_a, CmAction::Kind::kEstablished) != nullptr);
}

TEST_CASE("ib_cm: a DREQ naming another QP than ours is dropped, as Linux's cm_dreq_handler",
          "[cm][ib]") {
  IbPair n;
  const Connected c = connect_pair(n);
  REQUIRE(n.a.disconnect(n.now, 11, c.a_conn) == 0);
  const auto dreqs = mads(drain(n.a), 0x15);
  REQUIRE(dreqs.size() == 1);
  CHECK(be24_at(dreqs[0], 24 + 8) == 0x20);  // ours names B's QP
  std::vector<uint8_t> wrong = dreqs[0];
  wrong[24 + 10] = 0x21;  // QP 0x21: not the QP of B's connection
  n.b.on_message(n.now, IbPair::kA, wrong.data(), wrong.size());
  CHECK(drain(n.b).empty());  // no DREP, no disconnect
  CHECK(n.b.counters().dreq_qpn_mismatch == 1);
  CHECK(n.b.connection_count() == 1);
  // The right one ends it.
  n.b.on_message(n.now, IbPair::kA, dreqs[0].data(), dreqs[0].size());
  const std::vector<CmAction> out = drain(n.b);
  CHECK(mads(out, 0x16).size() == 1);
  CHECK(count_kind(out, CmAction::Kind::kDisconnected) == 1);
  CHECK(n.b.connection_count() == 0);
}

TEST_CASE("ib_cm: a REP from a QP we hold connected under another comm id: REJ(stale), DREQ",
          "[cm][ib]") {
  // A's QP 0x10 is connected to B's QP 0x20. A connects again (QP 0x11) and B answers from
  // QP 0x20 under a new comm id: B lost the old connection and reuses the QP. Linux's
  // cm_rep_handler answers REJ 'stale connection' (10) for the REP and sends DREQ for the old
  // connection; A's new request fails with that reason (as rdma_cm's REJECTED: ECONNREFUSED).
  IbPair n;
  const Connected c = connect_pair(n);
  const int64_t again = n.a.connect(n.now, 11, IbPair::kB, 7471, ib_params(0x11, 5, 1, 1));
  REQUIRE(again > 0);
  n.run();
  const CmAction* req = n.last(n.events_b, CmAction::Kind::kRequest);
  REQUIRE(req != nullptr);
  REQUIRE(req->conn != c.b_conn);
  REQUIRE(n.b.accept(n.now, 22, req->conn, ib_params(0x20, 7, 1, 1)) == 0);
  const auto reps = mads(drain(n.b), 0x13);
  REQUIRE(reps.size() == 1);
  n.a.on_message(n.now, IbPair::kB, reps[0].data(), reps[0].size());
  const std::vector<CmAction> out = drain(n.a);
  CHECK(count_kind(out, CmAction::Kind::kEstablished) == 0);
  CHECK(mads(out, 0x14).empty());  // no RTU
  const auto rejs = mads(out, kAttrRej);
  REQUIRE(rejs.size() == 1);
  CHECK(rej_code(rejs[0]) == kIbRejStaleConn);
  CHECK(rej_message(rejs[0]) == 1);                    // it rejects the REP
  CHECK(be32_at(rejs[0], 24 + 0) == uint32_t(again));  // our id
  CHECK(be32_at(rejs[0], 24 + 4) == req->conn);        // B's new one
  const auto dreqs = mads(out, 0x15);
  REQUIRE(dreqs.size() == 1);
  CHECK(be32_at(dreqs[0], 24 + 0) == c.a_conn);
  CHECK(be32_at(dreqs[0], 24 + 4) == c.b_conn);
  REQUIRE(count_kind(out, CmAction::Kind::kRejected) == 1);
  for (const auto& a : out) {
    if (a.kind == CmAction::Kind::kRejected) {
      CHECK(a.conn == uint32_t(again));
      CHECK(a.reason == RejectReason::kRefused);
      CHECK(a.ib_rej_code == kIbRejStaleConn);  // the client is told why
    }
  }
  CHECK(n.a.counters().stale_replies == 1);
  // B's new connection ends on the REJ, the old one on the DREQ.
  n.b.on_message(n.now, IbPair::kA, rejs[0].data(), rejs[0].size());
  n.b.on_message(n.now, IbPair::kA, dreqs[0].data(), dreqs[0].size());
  n.run();
  CHECK(n.a.connection_count() == 0);
  CHECK(n.b.connection_count() == 0);
}

TEST_CASE("ib_cm: a Get or Set MAD (CM ClassPortInfo...) gets GetResp 'unsupported', as Linux",
          "[cm][ib]") {
  // Linux's ib_cm registers method Send only; its MAD layer answers a Get/Set no agent takes
  // with the request echoed, method GetResp, status 0x000C (generate_unmatched_resp).
  IbPair n;
  std::vector<uint8_t> get = mad_from_hex(kKernelRtu);
  get[3] = 0x01;                   // Get
  get[16] = 0x00, get[17] = 0x01;  // ClassPortInfo
  get[24] = 0xAB;                  // some attribute data, echoed
  n.b.on_message(n.now, IbPair::kA, get.data(), get.size());
  std::vector<CmAction> out = drain(n.b);
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].kind == CmAction::Kind::kSend);
  CHECK(out[0].peer == IbPair::kA);
  REQUIRE(out[0].len == kMadBytes);
  std::vector<uint8_t> resp(out[0].bytes.begin(), out[0].bytes.begin() + kMadBytes);
  CHECK(resp[3] == 0x81);
  CHECK(resp[4] == 0x00);
  CHECK(resp[5] == 0x0C);
  std::vector<uint8_t> expect = get;
  expect[3] = 0x81;
  expect[5] = 0x0C;
  CHECK(resp == expect);  // the rest echoed: TID, attribute, its data
  CHECK(is_ib_mad_unsupported_resp(resp.data(), resp.size()));
  CHECK(n.b.counters().mad_get_unsupported == 1);
  // A Set, and a Get of another class (no agent at Linux either), likewise.
  get[3] = 0x02;
  n.b.on_message(n.now, IbPair::kA, get.data(), get.size());
  get[3] = 0x01;
  get[1] = 0x04;  // performance management
  n.b.on_message(n.now, IbPair::kA, get.data(), get.size());
  CHECK(drain(n.b).size() == 2);
  // A response is never answered (two of us cannot loop), nor is a Send we do not take.
  n.a.on_message(n.now, IbPair::kB, resp.data(), resp.size());
  get[1] = kMgmtClassCm;
  get[3] = kMadMethodSend;
  n.a.on_message(n.now, IbPair::kB, get.data(), get.size());
  CHECK(drain(n.a).empty());
  CHECK(n.a.counters().rx_unsupported == 1);
  CHECK(n.a.counters().rx_malformed == 1);
}

TEST_CASE("ib_cm: a UC/XRC REQ or a bad rdma_cm header gets the REJ Linux sends", "[cm][ib]") {
  // Linux's ib_cm hands such a REQ to the rdma_cm listener of its service id, which refuses it
  // (cma_check_req_qp_type; cma_save_ip_info fails on another header version): ib_cm then
  // sends REJ 'consumer defined' (28). With no listener ib_cm itself sends REJ 'invalid
  // service id' (8). Silence would leave the requester resending for a minute.
  for (const bool listening : {true, false}) {
    INFO((listening ? "a listener" : "no listener"));
    IbPair n;
    if (listening) REQUIRE(n.b.listen(7471, 22) == 0);
    const std::vector<uint8_t> req = mad_from_hex(kKernelReq);
    for (const auto& [at, value] : {std::pair<size_t, uint8_t>{24 + 43, 0xA2},  // UC
                                    {24 + 51, 0xF3},                            // XRC
                                    {24 + 140, 1}}) {  // rdma_cm header version 1
      INFO("byte " << at);
      std::vector<uint8_t> bad = req;
      bad[at] = value;
      n.b.on_message(n.now, IbPair::kA, bad.data(), bad.size());
      const std::vector<CmAction> out = drain(n.b);
      CHECK(count_kind(out, CmAction::Kind::kRequest) == 0);
      const auto rejs = mads(out, kAttrRej);
      REQUIRE(rejs.size() == 1);
      CHECK(rej_code(rejs[0]) == (listening ? kIbRejConsumerDefined : kIbRejInvalidServiceId));
      CHECK(rej_message(rejs[0]) == 0);
      CHECK(be32_at(rejs[0], 24 + 0) == 0);
      CHECK(be32_at(rejs[0], 24 + 4) == 0x038d4e3eu);
      CHECK(be64_at(rejs[0], 8) == be64_at(req, 8));
    }
    CHECK(n.b.connection_count() == 0);
    CHECK(n.b.counters().requests_refused == 3);
    CHECK(n.b.counters().rx_malformed == 0);
  }
}

TEST_CASE("cm: unsolicited replies are rate-limited by a token bucket", "[cm][ib]") {
  // A SIDR_REQ, a REQ for no listener or a DREQ for no connection is answered without any
  // state: from a spoofed source, each answer goes to a victim. At most a burst, then the
  // configured rate; the rest are counted, not sent.
  CmConfig cfg = IbPair::config(IbPair::kB.addr, 1);
  cfg.unsolicited_replies_per_s = 10;  // one per 100 ms
  cfg.unsolicited_reply_burst = 3;
  ConnectionManager b(cfg);
  uint64_t now = 5'000'000'000;
  const std::vector<uint8_t> sidr = mad_from_hex(kSidrReq);
  const std::vector<uint8_t> req = mad_from_hex(kKernelReq);  // port 7471: nobody listens
  auto sent = [&b] {
    size_t k = 0;
    for (const auto& a : drain(b)) k += a.kind == CmAction::Kind::kSend;
    return k;
  };
  for (int i = 0; i < 5; ++i) b.on_message(now, IbPair::kA, sidr.data(), sidr.size());
  CHECK(sent() == 3);  // the burst
  CHECK(b.counters().replies_suppressed == 2);
  b.on_message(now, IbPair::kA, req.data(), req.size());
  CHECK(sent() == 0);  // the same bucket for REJ(no listener)
  now += 100'000'000;  // one token back
  b.on_message(now, IbPair::kA, req.data(), req.size());
  b.on_message(now, IbPair::kA, req.data(), req.size());
  CHECK(sent() == 1);
  now += 10'000'000'000;  // refills up to the burst only
  for (int i = 0; i < 5; ++i) b.on_message(now, IbPair::kA, req.data(), req.size());
  CHECK(sent() == 3);
  CHECK(b.counters().replies_suppressed == 2 + 1 + 1 + 2);
  CHECK(b.counters().sidr_unsupported == 5);  // each request still counted
  // 0 per second: no limit.
  cfg.unsolicited_replies_per_s = 0;
  ConnectionManager open(cfg);
  for (int i = 0; i < 500; ++i) open.on_message(now, IbPair::kA, sidr.data(), sidr.size());
  size_t k = 0;
  for (const auto& a : drain(open)) k += a.kind == CmAction::Kind::kSend;
  CHECK(k == 500);
}

namespace {
// The kernel's REQ (rdma_connect()) to a listener of owner 22 on B, with the REQ's local CM
// response timeout and max CM retries as given (the kernel's own: 20, 15), accepted with a
// 1024-byte MTU; B's REP is out. Returns B's connection id.
uint32_t accept_kernel_req(IbPair& n, uint8_t timeout = 20, uint8_t retries = 15) {
  REQUIRE(n.b.listen(7471, 22) == 0);
  std::vector<uint8_t> req = mad_from_hex(kKernelReq);
  REQUIRE(req[24 + 47] >> 3 == 20);  // the kernel's: local CM response timeout 20
  REQUIRE(req[24 + 51] >> 4 == 15);  // max CM retries 15
  req[24 + 47] = static_cast<uint8_t>(timeout << 3 | (req[24 + 47] & 0x7));
  req[24 + 51] = static_cast<uint8_t>(retries << 4 | (req[24 + 51] & 0xF));
  n.b.on_message(n.now, IbPair::kA, req.data(), req.size());
  const std::vector<CmAction> out = drain(n.b);
  REQUIRE(count_kind(out, CmAction::Kind::kRequest) == 1);
  QpParams local = ib_params(0x20, 2, 1, 1);
  local.pmtu_bytes = 1024;
  REQUIRE(n.b.accept(n.now, 22, out[0].conn, local) == 0);
  REQUIRE(mads(drain(n.b), 0x13).size() == 1);
  return out[0].conn;
}

// Runs b's timers until it reports `end`, checking each wait is `interval_ns`; returns how
// many times the MAD with attribute `attr` was resent meanwhile.
uint64_t count_resends(ConnectionManager& b, uint64_t& now, uint8_t attr, CmAction::Kind end,
                       uint64_t interval_ns) {
  uint64_t resends = 0;
  bool over = false;
  while (!over) {
    const uint64_t next = b.next_deadline_ns();
    REQUIRE(next != UINT64_MAX);
    CHECK(next - now == interval_ns);
    now = next;
    b.on_timer(now);
    for (const auto& a : drain(b)) {
      resends += a.kind == CmAction::Kind::kSend && a.bytes[17] == attr;
      over |= a.kind == end;
    }
    REQUIRE(resends <= 16);
  }
  return resends;
}

// The active side's resend pace (our REQ's, then our DREQ's): what our REQ advertises, 18
// (4.096 us x 2^18, 1.07 s) and 15 retries, bounded by A's retry_timeout_ns below and its
// max_ib_rep_timeout_ns above. The default, floor and cap cases, with the interval expected.
struct ActivePace {
  uint64_t retry_timeout_ns;
  uint64_t max_ib_rep_timeout_ns;
  uint8_t qp_timeout;  // our REQ's primary local ACK timeout
  uint64_t interval_ns;
};
// Linux's ib_send_cm_req timeout_ms: cm_convert_to_ms(18) = 1024 ms plus twice that of the
// packet life time our REQ's local ACK timeout stands for (it minus 1, 1 ms below 9), bounded
// by retry_timeout_ns (below) and max_ib_rep_timeout_ns (above).
std::vector<ActivePace> active_paces() {
  const CmConfig defaults;
  const uint64_t lo = defaults.retry_timeout_ns;
  const uint64_t hi = defaults.max_ib_rep_timeout_ns;
  return {{lo, hi, 14, 1'088'000'000ull},          {lo, hi, 17, 1'536'000'000ull},
          {lo, hi, 19, 3'072'000'000ull},          {lo, hi, 0, 1'026'000'000ull},
          {lo, hi, 9, 1'026'000'000ull},           {lo, hi, 10, 1'028'000'000ull},
          {lo, hi, 31, 30'000'000'000ull},         {2'000'000'000ull, hi, 14, 2'000'000'000ull},
          {lo, 500'000'000ull, 14, 500'000'000ull}};
}

// A, configured for the pace `k`, connects (owner 11) to B's service 7471 and sends its REQ,
// which advertises the remote CM response timeout 18, max CM retries 15 and k's local ACK
// timeout. Returns A's connection id and the REQ (drained from A, not delivered).
struct PacedReq {
  int64_t conn = 0;
  std::vector<uint8_t> mad;
};
PacedReq connect_paced(IbPair& n, const ActivePace& k) {
  CmConfig cfg = IbPair::config(IbPair::kA.addr, 0x1000);
  cfg.retry_timeout_ns = k.retry_timeout_ns;
  cfg.max_ib_rep_timeout_ns = k.max_ib_rep_timeout_ns;
  n.a = ConnectionManager(cfg);
  PacedReq r;
  QpParams local = ib_params(0x10, 1, 1, 1);
  local.timeout = k.qp_timeout;
  r.conn = n.a.connect(n.now, 11, IbPair::kB, 7471, local);
  REQUIRE(r.conn > 0);
  const auto reqs = mads(drain(n.a), 0x10);
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0][24 + 43] >> 3 == 18);            // remote CM response timeout
  CHECK(reqs[0][24 + 51] >> 4 == 15);            // max CM retries
  CHECK(reqs[0][24 + 95] >> 3 == k.qp_timeout);  // primary local ACK timeout
  r.mad = reqs[0];
  return r;
}
}  // namespace

TEST_CASE("ib_cm: our REP is resent on the REQ's CM response timeout and retries, as Linux",
          "[cm][ib]") {
  // Linux's cm_req_handler keeps the REQ's local CM response timeout (timeout_ms =
  // cm_convert_to_ms(n) = 2^(n-8) ms, 1 ms below 9: not 4.096 us x 2^n) and max CM retries, and
  // ib_send_cm_rep sends the REP with them: rdma_cm's REQ (20: 4096 ms, 15 retries) has its
  // REP resent every 4.096 s, 15 times, before the passive side gives up. No packet life time
  // is added on this side (the REQ's, 18 in the kernel's REQ, would make it 6.1 s). Bounded
  // here: no faster than retry_timeout_ns, no slower than max_ib_rep_timeout_ns.
  struct Case {
    uint8_t timeout;
    uint8_t retries;
    uint64_t interval_ns;
  };
  for (const Case k :
       {Case{20, 15, 4'096'000'000ull}, Case{0, 3, 200'000'000ull}, Case{31, 2, 30'000'000'000ull},
        Case{16, 0, 256'000'000ull}, Case{19, 1, 2'048'000'000ull}}) {
    CAPTURE(k.timeout, k.retries);
    IbPair n;
    accept_kernel_req(n, k.timeout, k.retries);
    const uint64_t resends =
        count_resends(n.b, n.now, 0x13, CmAction::Kind::kRejected, k.interval_ns);
    CHECK(resends == k.retries);
    CHECK(n.b.connection_count() == 0);
  }
}

TEST_CASE("ib_cm: a DREQ before our REP is dropped, as Linux's cm_dreq_handler; after it, DREP",
          "[cm][ib]") {
  // Linux's cm_dreq_handler processes a DREQ in REP_SENT, MRA_REP_RCVD, ESTABLISHED and
  // DREQ_SENT, answers one in TIMEWAIT (or for no id) with a DREP, and drops it in any other
  // state: REQ_RCVD and MRA_REQ_SENT (the request not answered yet) among them.
  IbPair n;
  const Requested r = request(n, ib_params(0x10, 1, 1, 1));
  CmMessage dreq;
  dreq.type = CmType::kDreq;
  dreq.src_conn = static_cast<uint32_t>(r.a_conn);
  dreq.dst_conn = r.b_conn;
  dreq.ib.tid = 0x99;
  std::vector<uint8_t> mad(kMadBytes);
  REQUIRE(build_ib_cm_mad(dreq, IbCmBuildContext{}, mad.data()) == kMadBytes);
  n.b.on_message(n.now, IbPair::kA, mad.data(), mad.size());
  CHECK(drain(n.b).empty());  // no DREP, no event
  CHECK(n.b.counters().dreq_dropped == 1);
  CHECK(n.b.counters().dreq_qpn_mismatch == 0);
  CHECK(n.b.connection_count() == 1);
  // The request is still the owner's to answer: accepted, it connects.
  REQUIRE(n.b.accept(n.now, 22, r.b_conn, ib_params(0x20, 2, 1, 1)) == 0);
  // Our REP is out (REP_SENT): a DREQ naming our QP ends it, with a DREP.
  const auto reps = mads(drain(n.b), 0x13);
  REQUIRE(reps.size() == 1);
  IbCmBuildContext to_b;
  to_b.peer_qpn = 0x20;
  REQUIRE(build_ib_cm_mad(dreq, to_b, mad.data()) == kMadBytes);
  n.b.on_message(n.now, IbPair::kA, mad.data(), mad.size());
  std::vector<CmAction> out = drain(n.b);
  CHECK(mads(out, 0x16).size() == 1);
  CHECK(count_kind(out, CmAction::Kind::kDisconnected) == 1);
  CHECK(n.b.connection_count() == 0);
  CHECK(n.b.counters().dreq_dropped == 1);
  // Gone here (Linux's TIMEWAIT, or no id): a repeated DREQ gets a DREP again.
  n.b.on_message(n.now, IbPair::kA, mad.data(), mad.size());
  CHECK(mads(drain(n.b), 0x16).size() == 1);

  // Our REQ not answered yet: the DREQ names no connection Linux would find (the remote id
  // is unset), so it gets a DREP as one for no connection, and our request goes on.
  IbPair m;
  REQUIRE(m.b.listen(7471, 22) == 0);
  const int64_t a_conn = m.a.connect(m.now, 11, IbPair::kB, 7471, ib_params(0x10, 1, 1, 1));
  REQUIRE(a_conn > 0);
  REQUIRE(mads(drain(m.a), 0x10).size() == 1);
  dreq.src_conn = 0x777;
  dreq.dst_conn = static_cast<uint32_t>(a_conn);
  IbCmBuildContext to_a;
  to_a.peer_qpn = 0x10;
  REQUIRE(build_ib_cm_mad(dreq, to_a, mad.data()) == kMadBytes);
  m.a.on_message(m.now, IbPair::kB, mad.data(), mad.size());
  out = drain(m.a);
  CHECK(mads(out, 0x16).size() == 1);
  CHECK(count_kind(out, CmAction::Kind::kRejected) == 0);
  CHECK(m.a.connection_count() == 1);
  CHECK(m.a.counters().dreq_dropped == 0);
}

TEST_CASE("ib_cm: the passive side's DREQ is resent on the REQ's CM response timeout and retries",
          "[cm][ib]") {
  // Linux's cm_req_handler sets the passive id's timeout_ms from the REQ's local CM response
  // timeout and its max_cm_retries from the REQ's max CM retries; cm_send_dreq_locked sends
  // the DREQ with that timeout (cm_alloc_msg: those retries), as it did the REP. rdma_cm's
  // REQ (20, 15) has the DREQ of an accepted connection resent every 4.096 s (cm_convert_to_ms:
  // 2^(20-8) ms), 15 times. Bounded as the REP's: no faster than retry_timeout_ns, no slower
  // than max_ib_rep_timeout_ns.
  struct Case {
    uint8_t timeout;
    uint8_t retries;
    uint64_t interval_ns;
  };
  for (const Case k :
       {Case{20, 15, 4'096'000'000ull}, Case{0, 3, 200'000'000ull}, Case{31, 2, 30'000'000'000ull},
        Case{16, 0, 256'000'000ull}, Case{19, 1, 2'048'000'000ull}}) {
    CAPTURE(k.timeout, k.retries);
    IbPair n;
    const uint32_t conn = accept_kernel_req(n, k.timeout, k.retries);
    n.b.on_qp_traffic(conn);  // as good as the RTU
    REQUIRE(count_kind(drain(n.b), CmAction::Kind::kEstablished) == 1);
    n.now += 1'000'000;
    REQUIRE(n.b.disconnect(n.now, 22, conn) == 0);
    REQUIRE(mads(drain(n.b), 0x15).size() == 1);
    const uint64_t resends =
        count_resends(n.b, n.now, 0x15, CmAction::Kind::kDisconnected, k.interval_ns);
    CHECK(resends == k.retries);
    CHECK(n.b.connection_count() == 0);
  }
}

TEST_CASE(
    "ib_cm: an owner that goes away sends an IB peer one DREQ, unrepeated, as Linux's "
    "cm_destroy_id",
    "[cm][ib]") {
  // Linux destroys an established id with one DREQ and puts it in timewait at once: no
  // resends, and the peer's QPN is free for a new REQ. Resending at the REQ's pace (rdma_cm:
  // every 4.3 s, 15 times) would hold the connection, and REJ(stale) a REQ from that QP, for
  // a minute after the client is gone.
  IbPair n;
  const uint32_t conn = accept_kernel_req(n);
  n.b.on_qp_traffic(conn);
  REQUIRE(count_kind(drain(n.b), CmAction::Kind::kEstablished) == 1);
  n.now += 1'000'000;
  n.b.forget_owner(n.now, 22);
  const std::vector<CmAction> gone = drain(n.b);
  CHECK(mads(gone, 0x15).size() == 1);
  CHECK(count_kind(gone, CmAction::Kind::kDisconnected) == 0);  // nobody to tell
  CHECK(n.b.connection_count() == 0);
  CHECK(n.b.next_deadline_ns() == UINT64_MAX);
  CHECK(n.b.counters().dreq_owner_gone == 1);
  // The same REQ again (the peer's QP reconnecting): a new request, not REJ(stale).
  REQUIRE(n.b.listen(7471, 23) == 0);
  n.now += 1'000'000;
  const std::vector<uint8_t> req = mad_from_hex(kKernelReq);
  n.b.on_message(n.now, IbPair::kA, req.data(), req.size());
  const std::vector<CmAction> again = drain(n.b);
  CHECK(count_kind(again, CmAction::Kind::kRequest) == 1);
  CHECK(mads(again, 0x12).empty());
}

TEST_CASE(
    "ib_cm: the active side's DREQ is resent on our REQ's remote CM response timeout and "
    "retries, as Linux",
    "[cm][ib]") {
  // Linux's ib_send_cm_req sets the requesting id's timeout_ms from the REQ's remote CM
  // response timeout plus twice the path's packet life time, each through cm_convert_to_ms
  // (2^(n-8) ms, 1 ms below 9), and its max_cm_retries from the ULP's (rdma_cm: 20 and 15, as
  // its REQ says); cm_rep_handler changes neither, and cm_send_dreq_locked sends the DREQ with
  // that timeout (cm_alloc_msg: those retries). Ours go at what our REQ advertised: remote CM
  // response timeout 18 (1024 ms), packet life time its primary local ACK timeout minus 1 (as
  // the responder reads it, cm_format_paths_from_req: 13 for our QPs' default 14, 32 ms), so
  // 1024 + 2 x 32 = 1088 ms, and 15 retries, bounded as the passive side's.
  for (const ActivePace& k : active_paces()) {
    CAPTURE(k.retry_timeout_ns, k.max_ib_rep_timeout_ns, k.qp_timeout);
    IbPair n;
    REQUIRE(n.b.listen(7471, 22) == 0);
    const PacedReq ours = connect_paced(n, k);
    n.b.on_message(n.now, IbPair::kA, ours.mad.data(), ours.mad.size());
    n.run();
    const CmAction* req = n.last(n.events_b, CmAction::Kind::kRequest);
    REQUIRE(req != nullptr);
    REQUIRE(n.b.accept(n.now, 22, req->conn, ib_params(0x20, 2, 1, 1)) == 0);
    n.run();
    REQUIRE(n.last(n.events_a, CmAction::Kind::kEstablished) != nullptr);
    REQUIRE(n.a.disconnect(n.now, 11, static_cast<uint32_t>(ours.conn)) == 0);
    REQUIRE(mads(drain(n.a), 0x15).size() == 1);
    const uint64_t resends =
        count_resends(n.a, n.now, 0x15, CmAction::Kind::kDisconnected, k.interval_ns);
    CHECK(resends == 15);
    CHECK(n.a.connection_count() == 0);
  }
}

TEST_CASE(
    "ib_cm: our REQ is resent on the remote CM response timeout and max CM retries it "
    "advertises, as Linux's ib_send_cm_req",
    "[cm][ib]") {
  // Linux's ib_send_cm_req sends its REQ MAD with timeout_ms = the REQ's remote CM response
  // timeout plus twice the primary path's packet life time, each through cm_convert_to_ms
  // (2^(n-8) ms, 1 ms below 9), and retries = its max CM retries (cm_alloc_msg); when they run
  // out, cm_process_send_error reports IB_CM_REQ_ERROR (rdma_cm: UNREACHABLE, -ETIMEDOUT) and
  // sends nothing. Ours goes at what it advertises: 18 (1024 ms), twice the packet life time
  // its primary local ACK timeout stands for (that minus 1, as the responder's
  // cm_format_paths_from_req reads it: 13 for our QPs' default 14, 2 x 32 ms), and 15
  // retries, bounded as the DREQ's: a responder that neither answers nor MRAs
  // (cm_dup_req_handler drops a resent REQ in REQ_RCVD) is waited for 16 x 1.088 s, not
  // 6 x 200 ms.
  for (const ActivePace& k : active_paces()) {
    CAPTURE(k.retry_timeout_ns, k.max_ib_rep_timeout_ns, k.qp_timeout);
    IbPair n;  // B never hears of it
    const uint64_t t0 = n.now;
    const PacedReq ours = connect_paced(n, k);
    uint64_t resends = 0;
    const CmAction* failed = nullptr;
    std::vector<CmAction> out;
    while (failed == nullptr) {
      const uint64_t next = n.a.next_deadline_ns();
      REQUIRE(next != UINT64_MAX);
      CHECK(next - n.now == k.interval_ns);
      n.now = next;
      n.a.on_timer(n.now);
      out = drain(n.a);
      for (const auto& r : mads(out, 0x10)) {
        ++resends;
        CHECK(r == ours.mad);  // the same REQ, its TID too
      }
      CHECK(mads(out, kAttrRej).empty());  // as Linux: no REJ when the retries run out
      for (const auto& e : out) {
        if (e.kind == CmAction::Kind::kRejected) failed = &e;
      }
      REQUIRE(resends <= 16);
    }
    CHECK(resends == 15);
    CHECK(failed->conn == static_cast<uint32_t>(ours.conn));
    CHECK(failed->reason == RejectReason::kTimeout);
    CHECK(n.now - t0 == 16 * k.interval_ns);
    CHECK(n.a.counters().retransmits == 15);
    CHECK(n.a.counters().timeouts == 1);
    CHECK(n.a.connection_count() == 0);
    CHECK(n.a.next_deadline_ns() == UINT64_MAX);
  }
}

TEST_CASE(
    "ib_cm: our REQ resent at its pace, an MRA stretches the next; abandoned, the listener "
    "gets REJ(timeout)",
    "[cm][ib]") {
  // B's owner takes its time: A resends its REQ after 1.088 s, B answers the resend with an
  // MRA (as Linux's cm_dup_req_handler in MRA_REQ_SENT), A then waits as asked (capped); A's
  // owner gives up meanwhile: REJ(timeout) with the REQ's TID, and B drops the request (as
  // Linux's cm_destroy_id in MRA_REQ_RCVD).
  IbPair n;
  const uint64_t t0 = n.now;
  const Requested r = request(n, ib_params(0x10, 1, 1, 1));
  CHECK(n.a.next_deadline_ns() - t0 == 1'088'000'000ull);
  n.now = t0 + 500'000'000;
  n.a.on_timer(n.now);
  CHECK(drain(n.a).empty());  // nothing resent before the REQ's timeout
  n.now = n.a.next_deadline_ns();
  n.a.on_timer(n.now);
  const auto resent = mads(drain(n.a), 0x10);
  REQUIRE(resent.size() == 1);
  n.b.on_message(n.now, IbPair::kA, resent[0].data(), resent[0].size());
  const auto mras = mads(drain(n.b), 0x11);
  REQUIRE(mras.size() == 1);
  n.a.on_message(n.now, IbPair::kB, mras[0].data(), mras[0].size());
  CHECK(n.a.counters().mra_received == 1);
  CHECK(n.a.next_deadline_ns() - n.now == 65'600'000'000ull);
  n.now += 10'000'000'000ull;
  n.a.on_timer(n.now);
  CHECK(mads(drain(n.a), 0x10).empty());
  REQUIRE(n.a.disconnect(n.now, 11, static_cast<uint32_t>(r.a_conn)) == 0);
  const auto rejs = mads(drain(n.a), kAttrRej);
  REQUIRE(rejs.size() == 1);
  CHECK(rej_code(rejs[0]) == kIbRejTimeout);
  CHECK(be64_at(rejs[0], 8) == be64_at(resent[0], 8));  // the REQ's TID
  CHECK(be32_at(rejs[0], 24 + 0) == uint32_t(r.a_conn));
  CHECK(be32_at(rejs[0], 24 + 4) == 0);
  CHECK(n.a.connection_count() == 0);
  n.b.on_message(n.now, IbPair::kA, rejs[0].data(), rejs[0].size());
  CHECK(count_kind(drain(n.b), CmAction::Kind::kRejected) == 1);
  CHECK(n.b.connection_count() == 0);
  CHECK(n.b.accept(n.now, 22, r.b_conn, ib_params(0x20, 2, 1, 1)) == -ENOENT);
}

TEST_CASE("ib_cm: a REJ with more than 64 bytes of private data: the first 64, and said so",
          "[cm][ib]") {
  // rdma_reject(id, data, len) takes up to 148 bytes (IB_CM_REJ_PRIVATE_DATA_SIZE) and the IB
  // CM carries no length: the requester's rdma_cm hands over the whole field. Ours keeps the
  // first kMaxPrivateBytes (the public conduit_cm_conn holds 64) and flags a field that went
  // on past them (a non-zero byte there), so the owner knows what it holds is a prefix.
  for (const size_t sent : {size_t{64}, size_t{65}, size_t{100}, size_t{148}}) {
    CAPTURE(sent);
    IbPair n;
    const int64_t conn = n.a.connect(n.now, 11, IbPair::kB, 4420, ib_params(0x10, 1, 1, 1));
    REQUIRE(conn > 0);
    const auto reqs = mads(drain(n.a), 0x10);
    REQUIRE(reqs.size() == 1);
    std::vector<uint8_t> rej(kMadBytes, 0);
    std::copy(reqs[0].begin(), reqs[0].begin() + 24, rej.begin());
    rej[17] = kAttrRej;
    rej[24 + 3] = 0x77;
    std::copy(reqs[0].begin() + 24, reqs[0].begin() + 28, rej.begin() + 24 + 4);
    rej[24 + 11] = kIbRejConsumerDefined;
    for (size_t i = 0; i < sent; ++i) rej[24 + 84 + i] = static_cast<uint8_t>(i + 1);
    CHECK(parse_ok(rej).private_truncated == (sent > kMaxPrivateBytes));
    n.a.on_message(n.now, IbPair::kB, rej.data(), rej.size());
    const std::vector<CmAction> out = drain(n.a);
    REQUIRE(count_kind(out, CmAction::Kind::kRejected) == 1);
    CHECK(out[0].private_len == kMaxPrivateBytes);
    CHECK(out[0].private_data[0] == 1);
    CHECK(out[0].private_data[63] == 64);
    CHECK(out[0].private_truncated == (sent > kMaxPrivateBytes));
  }
  // A REP's 196-byte field, rdma_accept() with 100 bytes: the same on kEstablished.
  IbPair e;
  const Requested q = request(e, ib_params(0x10, 1, 1, 1));
  std::vector<uint8_t> data(kMaxPrivateBytes, 0x5A);
  REQUIRE(e.b.accept(e.now, 22, q.b_conn, ib_params(0x20, 2, 1, 1), data.data(), data.size()) == 0);
  auto reps = mads(drain(e.b), 0x13);
  REQUIRE(reps.size() == 1);
  CHECK(!parse_ok(reps[0]).private_truncated);  // ours never goes past 64
  reps[0][24 + 36 + 99] = 0x01;
  e.a.on_message(e.now, IbPair::kB, reps[0].data(), reps[0].size());
  const std::vector<CmAction> up = drain(e.a);
  REQUIRE(count_kind(up, CmAction::Kind::kEstablished) == 1);
  for (const CmAction& a : up) {
    if (a.kind == CmAction::Kind::kEstablished) CHECK(a.private_truncated);
  }
}
