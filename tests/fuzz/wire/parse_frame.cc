// libFuzzer target: wire::parse_frame on arbitrary bytes.
//
// Properties checked beyond "no crash, no UB":
//  - an accepted frame's payload lies inside the input and respects the PMTU;
//  - with ICRC verification off (so mutated frames reach the BTH checks), an
//    accepted frame rebuilt with build_frame() parses again, with ICRC on,
//    into the same header, addressing and payload;
//  - parse_roce() on the frame's UDP payload agrees with parse_frame();
//  - the RoceView parsers (the fused datapath's) return the same drop reason
//    for every input and, for an accepted frame, a view that decodes to the
//    same header and payload, with the same fields through its accessors;
//  - a frame written by begin_frame()/finish_frame() equals build_frame()'s;
//  - parse_frame() with an RxExpect (a fixed one, and one made from the
//    accepted frame's own addressing, so the fast path is taken) returns the
//    same drop reason and view as parse_frame() with its options;
//  - parse_gsi() (the input as IPv4+UDP headers and a UDP payload): an accepted
//    GSI packet's MAD lies in the input, and the packet rebuilt around that MAD
//    by write_gsi_packet()/finish_gsi_icrc() parses again to the same MAD.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "wire/frame.h"
#include "wire/gsi.h"
#include "wire/icrc.h"

using namespace conduit::wire;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

bool same_header(const RoceHeader& a, const RoceHeader& b) {
  return a.bth.opcode == b.bth.opcode && a.bth.solicited == b.bth.solicited &&
         a.bth.mig_req == b.bth.mig_req && a.bth.pad_count == b.bth.pad_count &&
         a.bth.pkey == b.bth.pkey && a.bth.fecn == b.bth.fecn && a.bth.becn == b.bth.becn &&
         a.bth.dest_qp == b.bth.dest_qp && a.bth.ack_req == b.bth.ack_req &&
         a.bth.psn == b.bth.psn && a.reth.va == b.reth.va && a.reth.rkey == b.reth.rkey &&
         a.reth.dma_len == b.reth.dma_len && a.aeth.syndrome == b.aeth.syndrome &&
         a.aeth.msn == b.aeth.msn && a.imm == b.imm && a.ieth_rkey == b.ieth_rkey &&
         a.atomic.va == b.atomic.va && a.atomic.rkey == b.atomic.rkey &&
         a.atomic.swap_add == b.atomic.swap_add && a.atomic.compare == b.atomic.compare &&
         a.atomic_ack_orig == b.atomic_ack_orig;
}

bool same_addr(const FrameAddr& a, const FrameAddr& b) {
  return a.dst_mac == b.dst_mac && a.src_mac == b.src_mac && a.has_vlan == b.has_vlan &&
         a.vlan_tci == b.vlan_tci && a.src_ip == b.src_ip && a.dst_ip == b.dst_ip &&
         a.src_port == b.src_port && a.dst_port == b.dst_port && a.dscp == b.dscp &&
         a.ecn == b.ecn && a.ttl == b.ttl && a.ip_id == b.ip_id && a.ipv6 == b.ipv6 &&
         a.src_ip6 == b.src_ip6 && a.dst_ip6 == b.dst_ip6 && a.flow_label == b.flow_label;
}

void check_accepted(std::span<const uint8_t> frame, const ParsedFrame& pf, uint32_t pmtu) {
  require(pf.payload.data() >= frame.data());
  require(pf.payload.data() + pf.payload.size() <= frame.data() + frame.size());
  require(pmtu == 0 || pf.payload.size() <= pmtu);
  require(pf.hdr.info().has(kOpValid));
  require(pf.payload.empty() || pf.hdr.info().has(kOpPayload));
}

// The view parsers must agree with the RoceHeader ones on every input.
void check_view(std::span<const uint8_t> frame, const ParseOptions& opt) {
  ParsedFrame pf;
  RoceView v;
  const DropReason r = parse_frame(frame, opt, pf);
  require(parse_frame(frame, opt, v) == r);
  if (r != DropReason::kNone) return;
  RoceHeader h;
  decode_roce_header(v, h);
  require(same_header(h, pf.hdr));
  require(v.payload.data() == pf.payload.data() && v.payload.size() == pf.payload.size());
  require(v.opcode() == h.bth.opcode && v.psn() == h.bth.psn && v.dest_qp() == h.bth.dest_qp &&
          v.ack_req() == h.bth.ack_req && v.solicited() == h.bth.solicited &&
          v.becn() == h.bth.becn);
  if (v.info->aeth_offset) {
    require(v.aeth().syndrome == h.aeth.syndrome && v.aeth().msn == h.aeth.msn);
  }
  if (v.info->imm_offset) require(v.imm() == h.imm);
}

void check_expect(std::span<const uint8_t> frame, const FrameAddr& sender, uint32_t qpn,
                  uint16_t pkey, const ParseOptions& opt) {
  const RxExpect e = make_rx_expect(sender, qpn, opt, pkey);
  RoceView full, fast;
  const DropReason r = parse_frame(frame, opt, full);
  require(parse_frame(frame, e, fast) == r);
  // Without the fallback: a match decides as the full parser does.
  RoceView matched;
  DropReason why = DropReason::kCount;
  if (parse_frame_matched(frame, e, matched, why)) {
    require(why == r);
    if (r == DropReason::kNone) {
      require(matched.bth == full.bth && matched.payload.data() == full.payload.data() &&
              matched.payload.size() == full.payload.size());
    }
  }
  if (r != DropReason::kNone) return;
  require(fast.bth == full.bth && fast.info == full.info &&
          fast.payload.data() == full.payload.data() && fast.payload.size() == full.payload.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> frame(data, size);

  if (size >= 28) {
    std::span<const uint8_t> mad;
    uint32_t src_qp = 0;
    if (parse_gsi(frame.first(28), frame.subspan(28), mad, src_qp) == GsiDrop::kNone) {
      require(mad.size() == kGsiMadBytes && mad.data() >= data + 28 &&
              mad.data() + mad.size() <= data + size);
      std::vector<uint8_t> again(28 + kGsiPacketBytes + 4);
      std::memcpy(again.data(), data, 28);
      write_gsi_packet(again.data() + 28, uint32_t{data[28 + 9]} << 16, mad.data());
      finish_gsi_icrc(again.data());
      std::span<const uint8_t> mad2;
      require(parse_gsi(std::span<const uint8_t>(again.data(), 28),
                        std::span<const uint8_t>(again.data() + 28, again.size() - 28), mad2,
                        src_qp) == GsiDrop::kNone);
      require(std::memcmp(mad2.data(), mad.data(), kGsiMadBytes) == 0 && src_qp == kGsiQpn);
    }
  }

  ParseOptions strict;
  check_view(frame, strict);
  check_expect(frame, FrameAddr{}, 0x11, kDefaultPkey, strict);
  ParsedFrame pf;
  if (parse_frame(frame, strict, pf) == DropReason::kNone) {
    check_accepted(frame, pf, strict.pmtu_bytes);
  }

  ParseOptions loose;
  loose.verify_icrc = false;
  loose.verify_ip_checksum = false;
  loose.check_pkey = false;
  loose.pmtu_bytes = 0;
  check_view(frame, loose);
  const DropReason r = parse_frame(frame, loose, pf);
  require(static_cast<size_t>(r) < kDropReasonCount);
  if (r != DropReason::kNone) return 0;
  check_accepted(frame, pf, 0);
  for (const ParseOptions& o : {strict, loose}) {
    check_expect(frame, pf.addr, pf.hdr.bth.dest_qp, pf.hdr.bth.pkey, o);
  }

  // parse_roce on the same UDP payload must agree (IPv4: 28 header bytes and the total
  // length; IPv6: 48 and 40 + the payload length).
  const size_t l2 = pf.addr.has_vlan ? 18 : 14;
  const size_t hdrs = pf.addr.ipv6 ? 48 : 28;
  const size_t ip_total = pf.addr.ipv6 ? 40 + (size_t{data[l2 + 4]} << 8 | data[l2 + 5])
                                       : size_t{data[l2 + 2]} << 8 | data[l2 + 3];
  ParsedFrame pr;
  require(parse_roce(frame.subspan(l2, hdrs), frame.subspan(l2 + hdrs, ip_total - hdrs), loose,
                     pr) == DropReason::kNone);
  RoceView vr;
  require(parse_roce(frame.subspan(l2, hdrs), frame.subspan(l2 + hdrs, ip_total - hdrs), loose,
                     vr) == DropReason::kNone);
  require(vr.bth == pr.payload.data() - pr.hdr.info().header_bytes);
  require(same_header(pf.hdr, pr.hdr));
  require(pr.payload.data() == pf.payload.data() && pr.payload.size() == pf.payload.size());

  // Build it again from what was parsed; the result must parse strictly.
  std::vector<uint8_t> out(frame_bytes(pf.hdr, pf.payload.size(), pf.addr.has_vlan, pf.addr.ipv6));
  RoceHeader hdr = pf.hdr;
  const BuildResult b = build_frame(out, pf.addr, hdr, PayloadGather(pf.payload));
  require(b.ok() && b.len_bytes == out.size());
  require(hdr.bth.pad_count == pf.hdr.bth.pad_count);
  ParseOptions again;
  again.check_pkey = false;
  again.pmtu_bytes = 0;
  again.udp_dst_port = pf.addr.dst_port;
  ParsedFrame p2;
  require(parse_frame(out, again, p2) == DropReason::kNone);
  require(same_header(pf.hdr, p2.hdr));
  require(same_addr(pf.addr, p2.addr));
  require(p2.payload.size() == pf.payload.size() &&
          std::memcmp(p2.payload.data(), pf.payload.data(), pf.payload.size()) == 0);

  // The same frame from a template, written the fused way (header words
  // copied from the built frame, payload, zero pad), must be byte-identical.
  const FrameTemplate tmpl = make_frame_template(pf.addr);
  const size_t roce = out.size() - l2 - hdrs - kIcrcBytes;
  std::vector<uint8_t> fused(out.size());
  BuildStatus st;
  uint8_t* p = begin_frame(fused, tmpl, roce, st);
  require(p != nullptr && st == BuildStatus::kOk);
  std::memcpy(p, out.data() + l2 + hdrs, roce);
  require(finish_frame(tmpl, fused.data(), roce) == out.size());
  require(fused == out);
  return 0;
}
