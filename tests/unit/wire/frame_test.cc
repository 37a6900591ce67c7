#include "wire/frame.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "pcap_file.h"
#include "wire/icrc.h"

using namespace conduit::wire;

namespace {

using Bytes = std::vector<uint8_t>;

FrameAddr test_addr(bool vlan, bool ipv6 = false) {
  FrameAddr a;
  if (ipv6) {
    a.ipv6 = true;
    a.src_ip6 = {0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};        // fe80::1
    a.dst_ip6 = {0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02};  // 2001:db8::2
    a.flow_label = 0xABCDE;
  }
  a.dst_mac = {0x02, 0, 0, 0, 0, 0x02};
  a.src_mac = {0x02, 0, 0, 0, 0, 0x01};
  a.has_vlan = vlan;
  a.vlan_tci = vlan ? 0x6064 : 0;  // PCP 3, VID 100
  a.src_ip = 0xC6120001;           // 198.18.0.1
  a.dst_ip = 0xC6120002;
  a.src_port = udp_sport_for_qp(0x11, 0xABC);
  a.dscp = 26;
  a.ecn = kEcnEct0;
  a.ip_id = 0;
  if (ipv6) a.src_ip = a.dst_ip = 0;  // IPv4 fields: not on the wire
  return a;
}

RoceHeader random_header(uint8_t opcode, std::mt19937_64& rng) {
  RoceHeader h;
  h.bth.opcode = opcode;
  h.bth.solicited = rng() & 1;
  h.bth.mig_req = rng() & 1;
  h.bth.pkey = 0xFFFF;
  h.bth.fecn = rng() & 1;
  h.bth.becn = rng() & 1;
  h.bth.dest_qp = static_cast<uint32_t>(rng()) & 0xFFFFFF;
  h.bth.ack_req = rng() & 1;
  h.bth.psn = static_cast<uint32_t>(rng()) & 0xFFFFFF;
  h.reth = Reth{rng(), static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng())};
  h.aeth = Aeth{static_cast<uint8_t>(rng()), static_cast<uint32_t>(rng()) & 0xFFFFFF};
  h.imm = static_cast<uint32_t>(rng());
  h.ieth_rkey = static_cast<uint32_t>(rng());
  h.atomic = AtomicEth{rng(), static_cast<uint32_t>(rng()), rng(), rng()};
  h.atomic_ack_orig = rng();
  return h;
}

// The fields the opcode carries must survive; the others must come back zero.
void check_same(const RoceHeader& sent, const RoceHeader& got) {
  const OpcodeInfo& info = sent.info();
  CHECK(got.bth.opcode == sent.bth.opcode);
  CHECK(got.bth.solicited == sent.bth.solicited);
  CHECK(got.bth.mig_req == sent.bth.mig_req);
  CHECK(got.bth.pad_count == sent.bth.pad_count);
  CHECK(got.bth.pkey == sent.bth.pkey);
  CHECK(got.bth.fecn == sent.bth.fecn);
  CHECK(got.bth.becn == sent.bth.becn);
  CHECK(got.bth.dest_qp == sent.bth.dest_qp);
  CHECK(got.bth.ack_req == sent.bth.ack_req);
  CHECK(got.bth.psn == sent.bth.psn);
  const Reth reth = info.reth_offset ? sent.reth : Reth{};
  CHECK(got.reth.va == reth.va);
  CHECK(got.reth.rkey == reth.rkey);
  CHECK(got.reth.dma_len == reth.dma_len);
  const Aeth aeth = info.aeth_offset ? sent.aeth : Aeth{};
  CHECK(got.aeth.syndrome == aeth.syndrome);
  CHECK(got.aeth.msn == aeth.msn);
  CHECK(got.imm == (info.imm_offset ? sent.imm : 0));
  CHECK(got.ieth_rkey == (info.ieth_offset ? sent.ieth_rkey : 0));
  const AtomicEth at = info.atomic_eth_offset ? sent.atomic : AtomicEth{};
  CHECK(got.atomic.va == at.va);
  CHECK(got.atomic.rkey == at.rkey);
  CHECK(got.atomic.swap_add == at.swap_add);
  CHECK(got.atomic.compare == at.compare);
  CHECK(got.atomic_ack_orig == (info.atomic_ack_eth_offset ? sent.atomic_ack_orig : 0));
}

void check_same_addr(const FrameAddr& a, const FrameAddr& b) {
  CHECK(a.dst_mac == b.dst_mac);
  CHECK(a.src_mac == b.src_mac);
  CHECK(a.has_vlan == b.has_vlan);
  CHECK(a.vlan_tci == b.vlan_tci);
  CHECK(a.src_ip == b.src_ip);
  CHECK(a.dst_ip == b.dst_ip);
  CHECK(a.src_port == b.src_port);
  CHECK(a.dst_port == b.dst_port);
  CHECK(a.dscp == b.dscp);
  CHECK(a.ecn == b.ecn);
  CHECK(a.ttl == b.ttl);
  CHECK(a.ip_id == b.ip_id);
  CHECK(a.ipv6 == b.ipv6);
  CHECK(a.src_ip6 == b.src_ip6);
  CHECK(a.dst_ip6 == b.dst_ip6);
  CHECK(a.flow_label == b.flow_label);
}

Bytes build(const FrameAddr& addr, RoceHeader& hdr, const Bytes& payload) {
  Bytes out(frame_bytes(hdr, payload.size(), addr.has_vlan, addr.ipv6));
  const BuildResult r = build_frame(out, addr, hdr, PayloadGather(payload));
  REQUIRE(r.ok());
  REQUIRE(r.len_bytes == out.size());
  return out;
}

// Wraps raw BTH.. bytes (without ICRC) into a frame with correct lengths, IP
// checksum and ICRC, so each test can break exactly one thing.
Bytes wrap(const Bytes& roce) {
  RoceHeader ack;
  ack.bth.opcode = static_cast<uint8_t>(Opcode::kAcknowledge);
  Bytes f = build(test_addr(false), ack, {});
  f.resize(14 + 28);
  f.insert(f.end(), roce.begin(), roce.end());
  f.resize(f.size() + 4);
  const size_t ip_total = f.size() - 14;
  f[16] = static_cast<uint8_t>(ip_total >> 8);
  f[17] = static_cast<uint8_t>(ip_total);
  f[38] = static_cast<uint8_t>((ip_total - 20) >> 8);
  f[39] = static_cast<uint8_t>(ip_total - 20);
  f[24] = f[25] = 0;
  uint32_t sum = 0;
  for (size_t i = 14; i < 34; i += 2) sum += uint32_t{f[i]} << 8 | f[i + 1];
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  f[24] = static_cast<uint8_t>(~sum >> 8);
  f[25] = static_cast<uint8_t>(~sum);
  icrc_store(icrc_ipv4(std::span<const uint8_t>(f.data() + 14, ip_total - 4)),
             f.data() + f.size() - 4);
  return f;
}

// Re-derives lengths, IP checksum and ICRC of a frame after a test edited it.
Bytes rewrap(const Bytes& frame) { return wrap(Bytes(frame.begin() + 42, frame.end() - 4)); }

DropReason parse(const Bytes& f, const ParseOptions& opt = {}) {
  ParsedFrame pf;
  return parse_frame(f, opt, pf);
}

Bytes bth(uint8_t opcode, uint8_t pad, size_t extra_zero_bytes) {
  Bytes b = {opcode, static_cast<uint8_t>(pad << 4), 0xFF, 0xFF, 0, 0, 0, 0x11, 0x80, 0, 0, 1};
  b.resize(b.size() + extra_zero_bytes);
  return b;
}

}  // namespace

TEST_CASE("frame: build -> parse round trip for every opcode, VLAN, IPv6, pad and length") {
  std::mt19937_64 rng(42);
  int opcodes = 0;
  for (int op = 0; op < 256; ++op) {
    const OpcodeInfo& info = opcode_info(static_cast<uint8_t>(op));
    if (!info.has(kOpValid)) continue;
    ++opcodes;
    const std::vector<size_t> lens =
        info.has(kOpPayload) ? std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7, 255, 256, 1021, 4096}
                             : std::vector<size_t>{0};
    for (const int variant : {0, 1, 2, 3}) {
      const bool vlan = (variant & 1) != 0;
      const bool ipv6 = (variant & 2) != 0;
      for (const size_t len : lens) {
        INFO("opcode " << info.name << " vlan " << vlan << " ipv6 " << ipv6 << " len " << len);
        Bytes payload(len);
        for (auto& b : payload) b = static_cast<uint8_t>(rng());
        const FrameAddr addr = test_addr(vlan, ipv6);
        RoceHeader hdr = random_header(static_cast<uint8_t>(op), rng);
        if (info.has(kOpCnp)) hdr = make_cnp_header(0x123456);
        RoceHeader hdr_t = hdr;
        const Bytes f = build(addr, hdr, payload);
        CHECK(hdr.bth.pad_count == pad_bytes_for(len));
        // The per-QP template and the payload-span builder give the same bytes.
        {
          const std::span<const uint8_t> seg(payload);
          const FrameTemplate tmpl = make_frame_template(addr);
          Bytes ft(f.size() + 7, 0xEE);
          const BuildResult rt = build_frame(ft, tmpl, hdr_t, std::span(&seg, len ? 1 : 0));
          REQUIRE(rt.ok());
          CHECK(rt.len_bytes == f.size());
          ft.resize(rt.len_bytes);
          CHECK(ft == f);
          CHECK(hdr_t.bth.pad_count == hdr.bth.pad_count);
          Bytes fs(f.size());
          RoceHeader hdr_s = hdr;
          REQUIRE(build_frame_spans(fs, addr, hdr_s, std::span(&seg, len ? 1 : 0)).ok());
          CHECK(fs == f);
          Bytes small(f.size() - 1);
          CHECK(build_frame(small, tmpl, hdr_t, std::span(&seg, len ? 1 : 0)).status ==
                BuildStatus::kBufferTooSmall);
        }
        const size_t ip_udp = ipv6 ? 48 : 28;
        CHECK(f.size() ==
              (vlan ? 18u : 14u) + ip_udp + info.header_bytes + len + pad_bytes_for(len) + 4);
        ParseOptions opt;
        opt.pmtu_bytes = 0;  // lengths here ignore the first/middle rule
        ParsedFrame pf;
        REQUIRE(parse_frame(f, opt, pf) == DropReason::kNone);
        check_same(hdr, pf.hdr);
        check_same_addr(addr, pf.addr);
        CHECK(Bytes(pf.payload.begin(), pf.payload.end()) == payload);
        CHECK(pf.payload.data() >= f.data());
        // parse_roce from the UDP payload gives the same result.
        const size_t l2 = vlan ? 18 : 14;
        ParsedFrame pr;
        REQUIRE(parse_roce(std::span<const uint8_t>(f.data() + l2, ip_udp),
                           std::span<const uint8_t>(f.data() + l2 + ip_udp, f.size() - l2 - ip_udp),
                           opt, pr) == DropReason::kNone);
        check_same(hdr, pr.hdr);
        CHECK(pr.payload.size() == len);
      }
    }
  }
  CHECK(opcodes == 24);
}

TEST_CASE("frame: payload gathered from several segments equals one contiguous copy") {
  Bytes payload(1000);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7);
  RoceHeader h1;
  h1.bth.opcode = static_cast<uint8_t>(Opcode::kSendOnly);
  RoceHeader h2 = h1;
  const FrameAddr addr = test_addr(false);
  const Bytes one = build(addr, h1, payload);
  PayloadGather g;
  const std::span<const uint8_t> p(payload);
  REQUIRE(g.add(p.subspan(0, 3)));
  REQUIRE(g.add(p.subspan(3, 0)));  // empty: takes no slot
  REQUIRE(g.add(p.subspan(3, 500)));
  REQUIRE(g.add(p.subspan(503, 1)));
  REQUIRE(g.add(p.subspan(504)));
  CHECK_FALSE(g.add(p.subspan(0, 1)));
  CHECK(g.count() == 4);
  CHECK(g.len_bytes() == 1000);
  Bytes two(one.size());
  REQUIRE(build_frame(two, addr, h2, g).ok());
  CHECK(one == two);
}

TEST_CASE("frame: wire layout of IPv4, UDP and BTH") {
  RoceHeader h;
  h.bth.opcode = static_cast<uint8_t>(Opcode::kSendOnlyImm);
  h.bth.solicited = true;
  h.bth.dest_qp = 0xABCDEF;
  h.bth.psn = 0x123456;
  h.bth.ack_req = true;
  h.imm = 0x01020304;
  FrameAddr addr = test_addr(true);
  addr.ip_id = 0x1234;
  const Bytes f = build(addr, h, Bytes(5, 0xEE));
  CHECK(f[12] == 0x81);
  CHECK(f[13] == 0x00);
  CHECK(f[14] == 0x60);  // TCI
  CHECK(f[15] == 0x64);
  CHECK(f[16] == 0x08);
  const uint8_t* ip = f.data() + 18;
  CHECK(ip[0] == 0x45);
  CHECK(ip[1] == (26 << 2 | 2));  // DSCP 26, ECT(0)
  CHECK((ip[2] << 8 | ip[3]) == 20 + 8 + 12 + 4 + 8 + 4);
  CHECK((ip[4] << 8 | ip[5]) == 0x1234);
  CHECK(ip[6] == 0x40);  // DF
  CHECK(ip[7] == 0x00);
  CHECK(ip[8] == 64);
  CHECK(ip[9] == 17);
  const uint8_t* udp = ip + 20;
  CHECK((udp[2] << 8 | udp[3]) == 4791);
  CHECK((udp[4] << 8 | udp[5]) == 8 + 12 + 4 + 8 + 4);
  CHECK(udp[6] == 0);
  CHECK(udp[7] == 0);
  const uint8_t* b = udp + 8;
  CHECK(b[0] == 0x05);
  CHECK(b[1] == (0x80 | 3 << 4));  // SE, pad 3, TVer 0
  CHECK(b[2] == 0xFF);
  CHECK(b[4] == 0);
  CHECK(b[5] == 0xAB);
  CHECK(b[7] == 0xEF);
  CHECK(b[8] == 0x80);
  CHECK(b[9] == 0x12);
  CHECK(b[11] == 0x56);
  CHECK(b[12] == 1);  // ImmDt, big-endian as given
  CHECK(b[15] == 4);
  CHECK(b[16] == 0xEE);
  CHECK(b[21] == 0);  // pad
  CHECK(b[23] == 0);
}

TEST_CASE("frame: CNP matches the ConnectX-4 Lx capture byte for byte") {
  FrameAddr addr;
  addr.src_ip = 0x0A001101;
  addr.dst_ip = 0x0A001201;
  addr.src_port = 0;
  addr.dscp = 0xC2 >> 2;
  addr.ecn = 0xC2 & 3;
  addr.ip_id = 0x718C;
  Bytes f(14 + 60);
  const BuildResult r = build_cnp(f, addr, 0x118);
  REQUIRE(r.ok());
  REQUIRE(r.len_bytes == f.size());
  const Bytes want_ip = {0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11,
                         0x91, 0x61, 0x0a, 0x00, 0x11, 0x01, 0x0a, 0x00, 0x12, 0x01,
                         0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00, 0x81, 0x00,
                         0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00};
  CHECK(Bytes(f.begin() + 14, f.begin() + 54) == want_ip);
  CHECK(Bytes(f.begin() + 54, f.begin() + 70) == Bytes(16, 0));
  CHECK(Bytes(f.begin() + 70, f.end()) == Bytes{0x82, 0xfd, 0x00, 0x2a});
  ParsedFrame pf;
  REQUIRE(parse_frame(f, {}, pf) == DropReason::kNone);
  CHECK(pf.hdr.info().has(kOpCnp));
  CHECK(pf.hdr.bth.becn);
  CHECK_FALSE(pf.hdr.bth.fecn);
  CHECK(pf.hdr.bth.dest_qp == 0x118);
  CHECK(pf.hdr.bth.psn == 0);
  CHECK(pf.payload.empty());
  CHECK(pf.addr.ecn == kEcnEct0);
  CHECK(pf.addr.dscp == 48);
}

TEST_CASE("frame: a CE-marked copy still parses; ToS/TTL rewrites are fine") {
  RoceHeader h;
  h.bth.opcode = static_cast<uint8_t>(Opcode::kWriteOnly);
  h.reth = Reth{0x1000, 7, 3};
  Bytes f = build(test_addr(false), h, Bytes{1, 2, 3});
  // A router marks CE and decrements the TTL, fixing the IP checksum
  // incrementally (RFC 1624) as a switch would.
  f[15] |= kEcnCe;
  f[22] -= 1;
  f[24] = f[25] = 0;
  uint32_t sum = 0;
  for (size_t i = 14; i < 34; i += 2) sum += uint32_t{f[i]} << 8 | f[i + 1];
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  f[24] = static_cast<uint8_t>(~sum >> 8);
  f[25] = static_cast<uint8_t>(~sum);
  ParsedFrame pf;
  REQUIRE(parse_frame(f, {}, pf) == DropReason::kNone);
  CHECK(pf.addr.ecn == kEcnCe);
  CHECK(pf.addr.ttl == 63);
}

TEST_CASE("frame: atomics parse cleanly so the responder can refuse them") {
  std::mt19937_64 rng(1);
  for (const Opcode op : {Opcode::kCompareSwap, Opcode::kFetchAdd, Opcode::kAtomicAcknowledge}) {
    RoceHeader h = random_header(static_cast<uint8_t>(op), rng);
    const Bytes f = build(test_addr(false), h, {});
    ParsedFrame pf;
    REQUIRE(parse_frame(f, {}, pf) == DropReason::kNone);
    CHECK(pf.hdr.info().has(op == Opcode::kAtomicAcknowledge ? kOpResponse : kOpAtomic));
    check_same(h, pf.hdr);
  }
  // An atomic request that is too short for its AtomicETH is truncated, not misread.
  CHECK(parse(wrap(bth(0x13, 0, 24))) == DropReason::kTruncated);
}

TEST_CASE("frame: build errors") {
  RoceHeader h;
  Bytes big(70000);
  Bytes out(80000);
  h.bth.opcode = 0x24;  // UC SEND_ONLY: not ours
  CHECK(build_frame(out, test_addr(false), h, {}).status == BuildStatus::kBadOpcode);
  CHECK(frame_bytes(h, 0, false) == 0);
  h.bth.opcode = static_cast<uint8_t>(Opcode::kAcknowledge);
  CHECK(build_frame(out, test_addr(false), h, PayloadGather(Bytes(1))).status ==
        BuildStatus::kPayloadNotAllowed);
  h.bth.opcode = static_cast<uint8_t>(Opcode::kReadRequest);
  CHECK(build_frame(out, test_addr(false), h, PayloadGather(Bytes(4))).status ==
        BuildStatus::kPayloadNotAllowed);
  h.bth.opcode = static_cast<uint8_t>(Opcode::kSendOnly);
  CHECK(build_frame(out, test_addr(false), h, PayloadGather(big)).status ==
        BuildStatus::kPayloadTooLong);
  const size_t need = frame_bytes(h, 100, true);
  Bytes small(need - 1);
  const BuildResult r = build_frame(small, test_addr(true), h, PayloadGather(Bytes(100)));
  CHECK(r.status == BuildStatus::kBufferTooSmall);
  CHECK(r.len_bytes == 0);
  CHECK(std::string(build_status_name(BuildStatus::kBufferTooSmall)) == "buffer_too_small");
}

TEST_CASE("frame: every drop reason") {
  std::set<DropReason> seen;
  auto expect = [&](const Bytes& f, DropReason want, const ParseOptions& opt = {}) {
    INFO("want " << drop_reason_name(want));
    CHECK(parse(f, opt) == want);
    seen.insert(want);
  };
  RoceHeader h;
  h.bth.opcode = static_cast<uint8_t>(Opcode::kSendOnly);
  h.bth.dest_qp = 0x11;
  const Bytes good = build(test_addr(false), h, Bytes(64, 0x5A));
  expect(good, DropReason::kNone);
  RoceHeader hv = h;
  const Bytes good_vlan = build(test_addr(true), hv, Bytes(64, 0x5A));
  expect(good_vlan, DropReason::kNone);

  expect(Bytes(good.begin(), good.begin() + 13), DropReason::kTruncated);
  expect(Bytes(good_vlan.begin(), good_vlan.begin() + 17), DropReason::kTruncated);
  expect(Bytes(good.begin(), good.begin() + 33), DropReason::kTruncated);
  expect(wrap(Bytes(11, 0)), DropReason::kTruncated);     // no room for BTH + ICRC
  expect(wrap(bth(0x06, 0, 8)), DropReason::kTruncated);  // WRITE_FIRST without its RETH

  Bytes f = good;
  f[12] = 0x88;  // 802.1 local experimental: neither IPv4 nor IPv6
  f[13] = 0xB5;
  expect(f, DropReason::kEtherType);
  f = good;
  f[12] = 0x86;  // IPv6 EtherType over an IPv4 header
  f[13] = 0xDD;
  expect(f, DropReason::kIpVersion);
  f = good_vlan;
  f[16] = 0x81;  // a second (QinQ) tag
  expect(f, DropReason::kEtherType);

  f = good;
  f[14] = 0x65;
  expect(f, DropReason::kIpVersion);
  f[14] = 0x46;
  expect(f, DropReason::kIpOptions);

  f = good;
  f[17] += 1;  // one byte longer than the frame
  expect(f, DropReason::kIpTotalLength);
  f = good;
  f[16] = 0;
  f[17] = 27;
  expect(f, DropReason::kIpTotalLength);

  f = good;
  f[25] ^= 1;
  expect(f, DropReason::kIpChecksum);
  ParseOptions no_csum;
  no_csum.verify_ip_checksum = false;
  expect(f, DropReason::kNone, no_csum);

  // The remaining IP/UDP edits keep a valid IP checksum (no_csum) so the
  // intended check is the one that fires.
  f = good;
  f[20] |= 0x20;  // MF
  expect(f, DropReason::kIpFragment, no_csum);
  f = good;
  f[21] = 1;  // fragment offset
  expect(f, DropReason::kIpFragment, no_csum);
  f = good;
  f[23] = 6;
  expect(f, DropReason::kIpProtocol, no_csum);
  f = good;
  f[39] += 1;
  expect(f, DropReason::kUdpLength);
  f = good;
  f[37] += 1;
  expect(f, DropReason::kUdpPort);
  ParseOptions other_port;
  other_port.udp_dst_port = 4792;
  expect(good, DropReason::kUdpPort, other_port);

  f = good;
  f[43] |= 0x01;
  expect(rewrap(f), DropReason::kBthVersion);
  f = good;
  f[42] = 0x24;  // UC SEND_ONLY
  expect(rewrap(f), DropReason::kOpcode);
  f[42] = 0x64;  // UD SEND_ONLY
  expect(rewrap(f), DropReason::kOpcode);
  f[42] = 0x1C;  // RC FLUSH: not implemented, for the QP to NAK
  expect(rewrap(f), DropReason::kOpcodeUnsupported);

  ParseOptions pk;
  pk.pkey = 0x8001;
  expect(good, DropReason::kPkey, pk);
  pk.check_pkey = false;
  expect(good, DropReason::kNone, pk);
  pk.check_pkey = true;
  pk.pkey = 0x7FFF;  // limited member vs our full-member 0xFFFF: allowed
  expect(good, DropReason::kNone, pk);

  expect(wrap(bth(0x04, 3, 0)), DropReason::kPadCount);     // pad 3, no bytes
  expect(wrap(bth(0x04, 2, 4)), DropReason::kNone);         // 2 payload + 2 pad
  expect(wrap(bth(0x04, 0, 3)), DropReason::kLength);       // not 4-byte aligned
  expect(wrap(bth(0x11, 0, 4 + 4)), DropReason::kLength);   // ACK with a payload
  expect(wrap(bth(0x11, 1, 4)), DropReason::kLength);       // ACK with a pad count
  expect(wrap(bth(0x0C, 0, 16 + 4)), DropReason::kLength);  // READ request with payload
  expect(wrap(bth(0x81, 0, 20)), DropReason::kLength);      // CNP body too long
  expect(wrap(bth(0x81, 0, 12)), DropReason::kTruncated);   // CNP body too short

  ParseOptions mtu;
  mtu.pmtu_bytes = 256;
  expect(wrap(bth(0x04, 0, 256)), DropReason::kNone, mtu);
  expect(wrap(bth(0x04, 0, 260)), DropReason::kPayloadTooLong, mtu);
  expect(wrap(bth(0x00, 0, 256)), DropReason::kNone, mtu);
  expect(wrap(bth(0x00, 0, 252)), DropReason::kPayloadNotPmtu, mtu);  // SEND_FIRST short
  expect(wrap(bth(0x01, 0, 128)), DropReason::kPayloadNotPmtu, mtu);  // SEND_MIDDLE short
  expect(wrap(bth(0x07, 0, 128)), DropReason::kPayloadNotPmtu, mtu);  // WRITE_MIDDLE short
  expect(wrap(bth(0x0E, 0, 128)), DropReason::kPayloadNotPmtu, mtu);  // READ_RESP_MIDDLE
  expect(wrap(bth(0x02, 0, 128)), DropReason::kNone, mtu);            // SEND_LAST may be short
  expect(wrap(bth(0x0D, 0, 4 + 256)), DropReason::kNone, mtu);        // READ_RESP_FIRST
  mtu.pmtu_bytes = 0;
  expect(wrap(bth(0x01, 0, 128)), DropReason::kNone, mtu);

  f = good;
  f[60] ^= 0x10;  // payload bit flip
  expect(f, DropReason::kIcrc);
  f = good;
  f[f.size() - 1] ^= 0x01;
  expect(f, DropReason::kIcrc);
  f = good;
  f[42] = 0x11;  // corrupted opcode: counted as corruption, not as a length error
  expect(f, DropReason::kIcrc);
  ParseOptions no_icrc;
  no_icrc.verify_icrc = false;
  f = good;
  f[60] ^= 0x10;
  expect(f, DropReason::kNone, no_icrc);

  CHECK(seen.size() == kDropReasonCount);
}

// IBTA 9.7.5.1.5, as rxe: an unsupported or reserved opcode in sequence is answered with NAK
// Invalid Request, so the parser hands such a packet on instead of dropping it unseen.
TEST_CASE("frame: an RC opcode we do not implement is handed on with its BTH") {
  for (const uint8_t opcode : {0x15, 0x18, 0x1C, 0x1D, 0x1F}) {
    INFO("opcode " << int(opcode));
    Bytes roce = bth(opcode, 0, 28);  // FLUSH / ATOMIC_WRITE carry extension headers
    roce[5] = 0x12;                   // DestQP 0x120011
    roce[10] = 0x34;                  // PSN 0x3401
    const Bytes f = wrap(roce);
    RoceView v;
    REQUIRE(parse_frame(f, ParseOptions{}, v) == DropReason::kOpcodeUnsupported);
    REQUIRE(v.bth == f.data() + 42);
    CHECK(v.opcode() == opcode);
    CHECK(v.dest_qp() == 0x120011);
    CHECK(v.psn() == 0x3401);
    CHECK_FALSE(v.info->has(kOpValid));
    CHECK(v.payload.data() == f.data() + 42 + kBthBytes);
    CHECK(v.payload.size() == 28);
    ParsedFrame pf;
    REQUIRE(parse_frame(f, ParseOptions{}, pf) == DropReason::kOpcodeUnsupported);
    CHECK(pf.hdr.bth.opcode == opcode);
    CHECK(pf.hdr.bth.psn == 0x3401);
    CHECK(pf.addr.src_ip == test_addr(false).src_ip);
    // The checks before and after the opcode's still apply.
    Bytes bad = f;
    bad[60] ^= 1;
    CHECK(parse(bad) == DropReason::kIcrc);
    ParseOptions pk;
    pk.pkey = 0x8001;
    CHECK(parse(f, pk) == DropReason::kPkey);
  }
  // Other transports' opcodes are no RC QP's business.
  CHECK(parse(wrap(bth(0x24, 0, 0))) == DropReason::kOpcode);  // UC SEND_ONLY
  CHECK(parse(wrap(bth(0xA0, 0, 0))) == DropReason::kOpcode);  // reserved transport
}

TEST_CASE("frame: drop reason names are distinct and stable") {
  std::set<std::string> names;
  for (size_t i = 0; i < kDropReasonCount; ++i) {
    const std::string n = drop_reason_name(static_cast<DropReason>(i));
    CHECK(n != "unknown");
    names.insert(n);
  }
  CHECK(names.size() == kDropReasonCount);
  CHECK(std::string(drop_reason_name(DropReason::kIcrc)) == "icrc");
  CHECK(std::string(drop_reason_name(DropReason::kCount)) == "unknown");
}

TEST_CASE("frame: parse_roce needs the IP/UDP headers to verify the ICRC") {
  RoceHeader h;
  h.bth.opcode = static_cast<uint8_t>(Opcode::kSendOnly);
  const Bytes f = build(test_addr(false), h, Bytes(8, 1));
  const std::span<const uint8_t> udp_payload(f.data() + 42, f.size() - 42);
  ParsedFrame pf;
  CHECK(parse_roce({}, udp_payload, {}, pf) == DropReason::kIcrc);
  ParseOptions no_icrc;
  no_icrc.verify_icrc = false;
  CHECK(parse_roce({}, udp_payload, no_icrc, pf) == DropReason::kNone);
  CHECK(pf.payload.size() == 8);
  // Headers held apart from the payload (not contiguous in memory).
  for (const size_t len : {size_t{0}, size_t{3}, size_t{8}, size_t{100}, size_t{1500}}) {
    RoceHeader hw;
    hw.bth.opcode = static_cast<uint8_t>(Opcode::kWriteOnlyImm);
    const Bytes fw = build(test_addr(false), hw, Bytes(len, 7));
    const Bytes headers(fw.begin() + 14, fw.begin() + 42);
    const Bytes payload(fw.begin() + 42, fw.end());
    INFO("len " << len);
    CHECK(parse_roce(headers, payload, {}, pf) == DropReason::kNone);
    Bytes bad = headers;
    bad[16] ^= 1;  // destination IP is covered by the ICRC
    CHECK(parse_roce(bad, payload, {}, pf) == DropReason::kIcrc);
    bad = headers;
    bad[1] ^= 0xFF;  // ToS is not
    CHECK(parse_roce(bad, payload, {}, pf) == DropReason::kNone);
  }
}

TEST_CASE("frame: pad_bytes_for and frame_bytes") {
  CHECK(pad_bytes_for(0) == 0);
  CHECK(pad_bytes_for(1) == 3);
  CHECK(pad_bytes_for(2) == 2);
  CHECK(pad_bytes_for(3) == 1);
  CHECK(pad_bytes_for(4) == 0);
  RoceHeader h;
  h.bth.opcode = static_cast<uint8_t>(Opcode::kAcknowledge);
  CHECK(frame_bytes(h, 0, false) == 62);  // the size of rxe's ACKs in the captures
  h.bth.opcode = static_cast<uint8_t>(Opcode::kSendOnly);
  CHECK(frame_bytes(h, 64, false) == 122);
  CHECK(frame_bytes(h, 64, true) == 126);
}

TEST_CASE("frame: UDP source port follows Linux's flow-label formula") {
  // Values from an independent evaluation of rdma_calc_flow_label() and
  // rdma_flow_label_to_udp_sport() (include/rdma/ib_verbs.h).
  CHECK(udp_sport_for_qp(0, 0) == 0xC000);
  CHECK(udp_sport_for_qp(0x11, 0xABC) == 0xF67E);
  CHECK(udp_sport_for_qp(0xFFFFFF, 0xFFFFFF) == 0xFF21);
  CHECK(udp_sport_for_qp(1234, 5678) == 0xE991);
  // rdma_calc_flow_label() itself, the IPv6 flow label of a QP's frames.
  CHECK(flow_label_for_qp(0x11, 0xABC) == 0xB67C);
  CHECK(flow_label_for_qp(0xFFFFFF, 0xFFFFFF) == 0xFFF1E);
  CHECK(flow_label_for_qp(1234, 5678) == 0xAE9BA);
  for (uint32_t q = 1; q < 5000; q += 7) {
    const uint16_t p = udp_sport_for_qp(q, q * 3 + 1);
    CHECK(p >= 0xC000);
    CHECK(udp_sport_for_qp(q, q * 3 + 1) == p);  // constant per QP pair
  }
}

TEST_CASE("frame: every RoCE frame in the rxe captures parses") {
  size_t n = 0;
  for (const char* name : {"rxe-perftest-send-write.pcap", "rxe-rc-pingpong.pcap"}) {
    std::vector<test::Frame> frames;
    std::string error;
    REQUIRE(test::read_pcap(std::string(CONDUIT_WIRE_TEST_DATA) + "/" + name, frames, error));
    for (const auto& f : frames) {
      if (f.size() < 42 || f[12] != 0x08 || f[13] != 0 || f[23] != 17 || f[36] != 0x12 ||
          f[37] != 0xB7) {
        continue;
      }
      ++n;
      ParsedFrame pf;
      REQUIRE(parse_frame(f, {}, pf) == DropReason::kNone);
      if (n == 1) {  // perftest frame 22 as tshark decodes it
        CHECK(pf.hdr.bth.opcode == 4);
        CHECK(pf.hdr.bth.dest_qp == 0x11);
        CHECK(pf.hdr.bth.psn == 2573252);
        CHECK(pf.payload.size() == 64);
        CHECK(pf.addr.src_port == 49441);
      }
      if (pf.hdr.bth.opcode == static_cast<uint8_t>(Opcode::kAcknowledge)) {
        CHECK(pf.hdr.aeth.type() == AethType::kAck);
        CHECK(pf.hdr.aeth.value() == kAethCreditsUnlimited);
      }
    }
  }
  CHECK(n == 32);
}

namespace {
void fix_ip_checksum(Bytes& f, size_t l2) {
  f[l2 + 10] = f[l2 + 11] = 0;
  uint32_t sum = 0;
  for (size_t i = l2; i < l2 + 20; i += 2) sum += uint32_t{f[i]} << 8 | f[i + 1];
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  f[l2 + 10] = static_cast<uint8_t>(~sum >> 8);
  f[l2 + 11] = static_cast<uint8_t>(~sum);
}
}  // namespace

TEST_CASE("frame: parse_frame with an RxExpect equals the full parser on every frame") {
  std::mt19937_64 rng(7);
  std::vector<uint8_t> valid_ops;
  for (int op = 0; op < 256; ++op) {
    if (opcode_info(static_cast<uint8_t>(op)).has(kOpValid)) valid_ops.push_back(op);
  }
  constexpr uint32_t kQpn = 0xABC;
  size_t accepted = 0, dropped = 0, matched = 0, matched6 = 0;
  for (int round = 0; round < 40000; ++round) {
    const bool vlan = (rng() & 3) == 0;
    const bool v6 = (rng() & 1) != 0;
    const FrameAddr sender = test_addr(vlan, v6);
    ParseOptions opt;
    opt.pmtu_bytes = std::vector<uint32_t>{0, 256, 1024, 4096}[rng() & 3];
    opt.check_pkey = (rng() & 7) != 0;
    opt.pkey = (rng() & 7) == 0 ? 0x7FFF : kDefaultPkey;
    opt.verify_ip_checksum = (rng() & 7) != 0;
    opt.verify_icrc = (rng() & 15) != 0;
    if ((rng() & 15) == 0) opt.udp_dst_port = 1234;
    const uint16_t exp_pkey = (rng() & 7) == 0 ? 0x1234 : kDefaultPkey;
    const RxExpect exp = make_rx_expect(sender, kQpn, opt, exp_pkey);
    // A frame from this sender (or a slightly different one), then mutations.
    FrameAddr a = sender;
    if ((rng() & 7) == 0) a.ttl = 63;
    if ((rng() & 7) == 0) a.ecn = kEcnCe;
    if ((rng() & 15) == 0) a.ip_id = 7;
    if ((rng() & 15) == 0) a.src_ip ^= 1;
    if ((rng() & 15) == 0) a.src_ip6[15] ^= 1;
    if ((rng() & 15) == 0) a.dst_ip6[0] ^= 0x80;
    if ((rng() & 7) == 0) a.flow_label ^= 0x55;
    const uint8_t op = valid_ops[rng() % valid_ops.size()];
    RoceHeader h = random_header(op, rng);
    h.bth.pkey = (rng() & 7) == 0 ? static_cast<uint16_t>(rng()) : exp_pkey;
    h.bth.dest_qp = (rng() & 7) == 0 ? kQpn + 1 : kQpn;
    if (opcode_info(op).has(kOpCnp)) h = make_cnp_header(kQpn, h.bth.pkey);
    size_t len = 0;
    if (opcode_info(op).has(kOpPayload)) {
      len = std::vector<size_t>{0, 1, 3, 4, 64, 255, 256, 1024, 1500}[rng() % 9];
    }
    Bytes payload(len);
    for (auto& b : payload) b = static_cast<uint8_t>(rng());
    Bytes f = build(a, h, payload);
    const size_t l2 = vlan ? 18 : 14;
    const size_t ip_udp = v6 ? 48 : 28;
    switch (rng() % 8) {
      case 0:  // as built
        break;
      case 1: {  // one bit flipped anywhere
        const size_t i = rng() % f.size();
        f[i] ^= static_cast<uint8_t>(1u << (rng() & 7));
        break;
      }
      case 2: {  // a bit flipped in the headers, IPv4 checksum made right again
        const size_t i = rng() % (l2 + ip_udp + 12);
        f[i] ^= static_cast<uint8_t>(1u << (rng() & 7));
        if (!v6 && i >= l2 && i < l2 + 20 && f.size() >= l2 + 20) fix_ip_checksum(f, l2);
        break;
      }
      case 3:  // truncated
        f.resize(rng() % f.size());
        break;
      case 4:  // Ethernet padding after the IPv4 datagram
        f.resize(f.size() + rng() % 20, 0);
        break;
      case 5: {  // lengths changed consistently (IPv4 total or IPv6 payload, and UDP)
        const int delta = static_cast<int>(rng() % 9) - 4;
        if (v6) {
          const uint32_t len = (uint32_t{f[l2 + 4]} << 8 | f[l2 + 5]) + delta;
          f[l2 + 4] = f[l2 + 44] = static_cast<uint8_t>(len >> 8);
          f[l2 + 5] = f[l2 + 45] = static_cast<uint8_t>(len);
          break;
        }
        const uint32_t total = (uint32_t{f[l2 + 2]} << 8 | f[l2 + 3]) + delta;
        f[l2 + 2] = static_cast<uint8_t>(total >> 8);
        f[l2 + 3] = static_cast<uint8_t>(total);
        f[l2 + 24] = static_cast<uint8_t>((total - 20) >> 8);
        f[l2 + 25] = static_cast<uint8_t>(total - 20);
        fix_ip_checksum(f, l2);
        break;
      }
      case 6:  // BTH TVer, pad count or opcode byte
        f[l2 + ip_udp + (rng() & 1)] ^= static_cast<uint8_t>(rng());
        break;
      default:  // a frame from another sender's template (not the expected one)
        f = build(test_addr((rng() & 1) != 0 ? !vlan : vlan, (rng() & 1) != 0 ? !v6 : v6), h,
                  payload);
        break;
    }
    RoceView full, fast, matched_view;
    const DropReason r_full = parse_frame(f, opt, full);
    const DropReason r_fast = parse_frame(f, exp, fast);
    INFO("round " << round << " opcode " << int(op) << " vlan " << vlan << " size " << f.size());
    REQUIRE(r_fast == r_full);
    // Without the fallback: a match decides as the full parser does.
    DropReason r_matched = DropReason::kCount;
    if (parse_frame_matched(f, exp, matched_view, r_matched)) {
      ++matched;
      matched6 += v6 ? 1 : 0;
      REQUIRE(r_matched == r_full);
      if (r_full == DropReason::kNone) {
        CHECK(matched_view.bth == full.bth);
        CHECK(matched_view.payload.data() == full.payload.data());
        CHECK(matched_view.payload.size() == full.payload.size());
      }
    } else {
      CHECK(r_matched == DropReason::kCount);  // untouched
    }
    if (r_full == DropReason::kNone) {
      ++accepted;
      CHECK(fast.bth == full.bth);
      CHECK(fast.info == full.info);
      CHECK(fast.payload.data() == full.payload.data());
      CHECK(fast.payload.size() == full.payload.size());
    } else {
      ++dropped;
    }
  }
  CHECK(accepted > 10000);
  CHECK(dropped > 10000);
  CHECK(matched > 10000);
  CHECK(matched6 > 5000);
}

TEST_CASE("frame: rx_expect_require_byte narrows the frames that match, nothing else") {
  const FrameAddr sender = test_addr(true);
  const ParseOptions opt;
  RoceHeader h;
  h.bth.opcode = static_cast<uint8_t>(Opcode::kAcknowledge);
  h.bth.dest_qp = 0xABC;
  const Bytes good = build(sender, h, {});
  RxExpect exp = make_rx_expect(sender, 0xABC, opt);
  RoceView v;
  DropReason why = DropReason::kCount;
  REQUIRE(parse_frame_matched(good, exp, v, why));
  CHECK(why == DropReason::kNone);
  // The VID bits of the tag (14, 15) and the UDP checksum (18 + 26, 27).
  CHECK(rx_expect_require_byte(exp, 14, 0x0F, 0x00));
  CHECK(rx_expect_require_byte(exp, 15, 0xFF, 0x64));
  CHECK(rx_expect_require_byte(exp, 44, 0xFF, 0));
  CHECK(rx_expect_require_byte(exp, 45, 0xFF, 0));
  CHECK_FALSE(rx_expect_require_byte(exp, 5, 0xFF, 0));   // a MAC byte: no word covers it
  CHECK_FALSE(rx_expect_require_byte(exp, 58, 0xFF, 0));  // after the BTH
  REQUIRE(exp.usable);
  CHECK(parse_frame_matched(good, exp, v, why));
  Bytes other_vid = good;
  other_vid[15] ^= 1;
  CHECK_FALSE(parse_frame_matched(other_vid, exp, v, why));
  Bytes other_pcp = good;
  other_pcp[14] ^= 0x20;  // priority bits: not required
  CHECK(parse_frame_matched(other_pcp, exp, v, why));
  Bytes udp_csum = good;
  udp_csum[45] = 1;
  CHECK_FALSE(parse_frame_matched(udp_csum, exp, v, why));
  // parse_frame(RxExpect) still gives the full parser's verdict for both.
  CHECK(parse_frame(udp_csum, exp, v) == parse_frame(udp_csum, opt, v));
  CHECK(parse_frame(other_vid, exp, v) == DropReason::kNone);
  // A requirement that contradicts one the expectation has: nothing matches.
  RxExpect contradiction = make_rx_expect(sender, 0xABC, opt);
  CHECK(rx_expect_require_byte(contradiction, 12, 0xFF, 0x08));  // TPID is 0x81
  CHECK_FALSE(contradiction.usable);
  CHECK_FALSE(parse_frame_matched(good, contradiction, v, why));
}

TEST_CASE("frame: an IPv6 RxExpect compares its four words, and require_byte reaches them") {
  for (const bool vlan : {false, true}) {
    INFO("vlan " << vlan);
    const FrameAddr sender = test_addr(vlan, true);
    const size_t l2 = vlan ? 18 : 14;
    RoceHeader h;
    h.bth.opcode = static_cast<uint8_t>(Opcode::kAcknowledge);
    h.bth.dest_qp = 0xABC;
    const Bytes good = build(sender, h, {});
    REQUIRE(good.size() == l2 + 48 + 12 + 4 + 4);  // the shortest RoCE frame over IPv6
    RxExpect exp = make_rx_expect(sender, 0xABC, ParseOptions{});
    REQUIRE(exp.usable);
    RoceView v;
    DropReason why = DropReason::kCount;
    REQUIRE(parse_frame_matched(good, exp, v, why));
    CHECK(why == DropReason::kNone);
    // The UDP checksum (l2 + 46, 47) and the last DestQP byte (l2 + 55) lie
    // in the words; the ICRC does not.
    CHECK(rx_expect_require_byte(exp, l2 + 46, 0xFF, 0));
    CHECK(rx_expect_require_byte(exp, l2 + 47, 0xFF, 0));
    CHECK(rx_expect_require_byte(exp, l2 + 55, 0xFF, 0xBC));
    CHECK_FALSE(rx_expect_require_byte(exp, l2 + 60, 0xFF, 0));
    CHECK(exp.usable);
    CHECK(parse_frame_matched(good, exp, v, why));
    Bytes csum = good;
    csum[l2 + 47] = 1;
    CHECK_FALSE(parse_frame_matched(csum, exp, v, why));
    // Every byte the words compare, changed alone, makes the frame miss (or,
    // where the parser does not look, still match and parse alike).
    for (size_t i = 12; i < l2 + 60; ++i) {
      Bytes f = good;
      f[i] ^= 0x01;
      RoceView full;
      const DropReason r = parse_frame(f, ParseOptions{}, full);
      CHECK(parse_frame(f, exp, v) == r);
    }
    // A too-short frame never reads past its end (ASan) and never matches.
    for (size_t n = 0; n < good.size(); ++n) {
      const Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
      CHECK_FALSE(parse_frame_if_matched(cut, exp, v).has_value());
    }
  }
}

TEST_CASE("byte_order: copy_payload copies exactly n bytes for every n") {
  std::mt19937_64 rng(3);
  for (size_t n = 0; n <= 200; ++n) {
    Bytes src(n + 32), dst(n + 32, 0xAA);
    for (auto& b : src) b = static_cast<uint8_t>(rng());
    copy_payload(dst.data() + 16, src.data() + 16, n);
    for (size_t i = 0; i < dst.size(); ++i) {
      INFO("n " << n << " i " << i);
      REQUIRE(dst[i] == (i >= 16 && i < 16 + n ? src[i] : 0xAA));
    }
  }
}

namespace {
Bytes from_hex(const std::string& s) {
  Bytes out;
  for (size_t i = 0; i + 1 < s.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(s.substr(i, 2), nullptr, 16)));
  }
  return out;
}
// The IPv6 SEND only of the known-answer test: fe80::1 -> 2001:db8::2, traffic
// class 0x6A (DSCP 26, ECT(0)), flow label 0xABCDE, hop limit 64, UDP
// 0xC123 -> 4791, dest QP 0x11, PSN 0x123456 with AckReq, payload 00..0f.
FrameAddr kat_addr6() {
  FrameAddr a = test_addr(false, true);
  a.src_port = 0xC123;
  return a;
}
RoceHeader kat_header6() {
  RoceHeader h;
  h.bth.opcode = static_cast<uint8_t>(Opcode::kSendOnly);
  h.bth.dest_qp = 0x11;
  h.bth.psn = 0x123456;
  h.bth.ack_req = true;
  return h;
}
Bytes kat_payload6() {
  Bytes p(16);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(i);
  return p;
}
}  // namespace

TEST_CASE("frame: IPv6 SEND only byte for byte, ICRC from an independent zlib computation") {
  // Written by Python's zlib.crc32 over 8 x 0xFF and the datagram with the
  // traffic class, flow label, hop limit, UDP checksum and BTH byte 4 set to
  // all-ones (rxe_icrc.c's IPv6 masking), stored least-significant byte first.
  const Bytes want = from_hex(
      "02000000000202000000000186dd66aabcde00281140fe80000000000000000000000000000120010db800"
      "0000000000000000000002c12312b7002800000400ffff0000001180123456000102030405060708090a0b"
      "0c0d0e0fc8478a6a");
  RoceHeader h = kat_header6();
  const Bytes f = build(kat_addr6(), h, kat_payload6());
  CHECK(f == want);
  ParsedFrame pf;
  REQUIRE(parse_frame(want, ParseOptions{}, pf) == DropReason::kNone);
  check_same_addr(kat_addr6(), pf.addr);
  check_same(kat_header6(), pf.hdr);
  CHECK(Bytes(pf.payload.begin(), pf.payload.end()) == kat_payload6());
}

TEST_CASE("frame: the IPv6 ICRC ignores traffic class, flow label and hop limit only") {
  RoceHeader h = kat_header6();
  const Bytes good = build(kat_addr6(), h, kat_payload6());
  const auto parse_ok = [](const Bytes& f) { return parse(f) == DropReason::kNone; };
  REQUIRE(parse_ok(good));
  Bytes f = good;
  f[14] = 0x6F;  // traffic class high nibble (the version nibble stays)
  f[15] = 0x0F;  // traffic class low nibble, flow label
  f[16] = f[17] = 0x00;
  f[21] = 1;     // hop limit
  f[60] = 0x12;  // UDP checksum
  f[61] = 0x34;
  f[62 + 4] = 0xC0;  // BTH FECN/BECN
  CHECK(parse_ok(f));
  // Every covered byte of the headers changes it (lengths and ports would
  // fail their own checks first, so the addresses and BTH are flipped).
  for (const size_t at : {22u, 29u, 37u, 38u, 53u, 62u + 8, 62u + 11, 62u + 12}) {
    f = good;
    f[at] ^= 0x01;
    INFO("byte " << at);
    CHECK(parse(f) == DropReason::kIcrc);
  }
}

TEST_CASE("frame: IPv6 drop reasons") {
  RoceHeader h = kat_header6();
  const Bytes good = build(kat_addr6(), h, kat_payload6());
  Bytes f = good;
  f[14] = 0x46;  // version 4 behind the IPv6 EtherType
  CHECK(parse(f) == DropReason::kIpVersion);
  CHECK(parse(Bytes(good.begin(), good.begin() + 14 + 39)) == DropReason::kTruncated);
  f = good;
  f[18] = 0x01;  // payload length beyond the frame
  CHECK(parse(f) == DropReason::kIpTotalLength);
  f = good;
  f[18] = 0;
  f[19] = 7;  // shorter than a UDP header
  CHECK(parse(f) == DropReason::kIpTotalLength);
  for (const uint8_t next : {0, 43, 44, 60, 58, 6}) {  // hop-by-hop, routing, fragment, ...
    f = good;
    f[20] = next;
    INFO("next header " << int{next});
    CHECK(parse(f) == DropReason::kIpProtocol);
  }
  f = good;
  f[59] ^= 4;  // UDP length
  CHECK(parse(f) == DropReason::kUdpLength);
  f = good;
  f[57] = 0xB8;  // UDP destination port 4792
  CHECK(parse(f) == DropReason::kUdpPort);
  // Ethernet padding after the payload length is ignored, as for IPv4.
  f = good;
  f.resize(f.size() + 6, 0);
  CHECK(parse(f) == DropReason::kNone);
  // parse_roce with 48 header bytes of an IPv4 frame, or 28 of an IPv6 one: no ICRC check possible.
  ParsedFrame pr;
  CHECK(parse_roce(std::span<const uint8_t>(good.data() + 14, 28),
                   std::span<const uint8_t>(good.data() + 62, good.size() - 62), ParseOptions{},
                   pr) == DropReason::kIcrc);
  // The expectation fast path: the same frame matches and parses.
  const RxExpect exp = make_rx_expect(kat_addr6(), 0x11, ParseOptions{});
  CHECK(exp.usable);
  CHECK(exp.ipv6);
  RoceView v;
  CHECK(parse_frame(good, exp, v) == DropReason::kNone);
  CHECK(parse_frame_if_matched(good, exp, v) == std::optional(DropReason::kNone));
  CHECK(v.payload.size() == 16);
}

TEST_CASE("frame: the fused IPv6 writers equal build_frame, with and without a VLAN tag") {
  for (const bool vlan : {false, true}) {
    INFO("vlan " << vlan);
    FrameAddr addr = kat_addr6();
    addr.has_vlan = vlan;
    addr.vlan_tci = vlan ? 0x6064 : 0;
    const FrameTemplate tmpl = make_frame_template(addr);
    CHECK(tmpl.ipv6);
    CHECK(tmpl.ip_udp_bytes == 48);
    CHECK(tmpl.copy_bytes == (vlan ? 80 : 64));
    RoceHeader ack;
    ack.bth.opcode = static_cast<uint8_t>(Opcode::kAcknowledge);
    ack.bth.dest_qp = 0x22;
    ack.bth.psn = 0x777;
    ack.aeth = Aeth{0x1F, 0x42};
    const Bytes want = build(addr, ack, {});
    Bytes got(want.size(), 0xEE);
    BuildStatus st;
    uint8_t* p = begin_frame(got, tmpl, kBthBytes + kAethBytes, st);
    REQUIRE(p != nullptr);
    CHECK(p == got.data() + (vlan ? 18 : 14) + 48);
    put_be32(p, 0x1100FFFF);
    put_be32(p + 4, 0x22);
    put_be32(p + 8, 0x777);
    put_be32(p + 12, 0x1F000042);
    CHECK(frame_bytes_for(tmpl, kBthBytes + kAethBytes) == want.size());
    finish_frame_icrc_words(tmpl, got.data(), want.size());
    CHECK(got == want);
    Bytes again(want.size(), 0xEE);
    p = begin_frame(again, tmpl, kBthBytes + kAethBytes, st);
    REQUIRE(p != nullptr);
    std::memcpy(p, got.data() + (vlan ? 18 : 14) + 48, kBthBytes + kAethBytes);
    CHECK(finish_frame(tmpl, again.data(), kBthBytes + kAethBytes) == want.size());
    CHECK(again == want);
    Bytes small(want.size() - 1);
    CHECK(begin_frame(small, tmpl, kBthBytes + kAethBytes, st) == nullptr);
    CHECK(st == BuildStatus::kBufferTooSmall);
    CHECK(begin_frame(got, tmpl, 70000, st) == nullptr);
    CHECK(st == BuildStatus::kPayloadTooLong);
  }
}
