#include "wire/frame.h"

#include <array>
#include <bit>
#include <cstring>

#include "wire/byte_order.h"
#include "wire/icrc.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace conduit::wire {
namespace {

// Offsets inside the IPv4, UDP and BTH headers.
constexpr size_t kIpTos = 1, kIpTotalLen = 2, kIpId = 4, kIpFrag = 6, kIpTtl = 8, kIpProto = 9,
                 kIpCsum = 10, kIpSrc = 12, kIpDst = 16;
constexpr size_t kUdpSport = 0, kUdpLen = 4;  // (destination port at 2, checksum at 6)
constexpr uint16_t kIpFlagDf = 0x4000;
constexpr uint16_t kIpFragMask = 0x3FFF;  // MF + fragment offset
constexpr size_t kIpUdpBytes = kIpv4HeaderBytes + kUdpHeaderBytes;
constexpr size_t kIp6UdpBytes = kIpv6HeaderBytes + kUdpHeaderBytes;
constexpr size_t kMaxIpTotalBytes = 0xFFFF;
// Offsets inside the IPv6 header.
constexpr size_t kIp6PayloadLen = 4, kIp6NextHeader = 6, kIp6HopLimit = 7, kIp6Src = 8,
                 kIp6Dst = 24;

// One's-complement sum of the 20-byte IPv4 header, folded to 16 bits. Summed
// as five native 32-bit words: the one's-complement sum does not depend on
// byte order (RFC 1071), and a valid header sums to 0xFFFF either way.
inline uint32_t load_native32(const uint8_t* p) {
  uint32_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}
inline uint32_t load_native16(const uint8_t* p) {
  uint16_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}
// Folds an unfolded one's-complement sum (of native 16-bit words, or of
// native 32-bit words) to 16 bits.
[[gnu::always_inline]] inline uint16_t fold_sum(uint64_t sum) {
  sum = (sum & 0xFFFFFFFF) + (sum >> 32);
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}
// fold_sum(sum) == 0xFFFF (a valid header's sum) for a sum that is not 0:
// folding keeps the value mod 0xFFFF (2^16 = 1 mod 0xFFFF) and ends at
// 0xFFFF exactly for the non-zero multiples of 0xFFFF. One multiply instead
// of four folds. (An RxExpect match makes the sum non-zero: it includes the
// 0x45 version byte.)
[[gnu::always_inline]] inline bool ones_complement_zero(uint64_t sum) { return sum % 0xFFFF == 0; }
[[gnu::always_inline]] inline uint16_t ipv4_header_sum(const uint8_t* h) {
  return fold_sum(uint64_t{load_native32(h)} + load_native32(h + 4) + load_native32(h + 8) +
                  load_native32(h + 12) + load_native32(h + 16));
}

size_t eth_bytes(bool vlan) { return kEthHeaderBytes + (vlan ? kVlanTagBytes : 0); }

// Extension headers and CNP body: opcodes with any of these flags.
constexpr uint32_t kOpExtensions =
    kOpReth | kOpAeth | kOpImm | kOpIeth | kOpAtomicEth | kOpAtomicAckEth | kOpCnp;

void encode_extensions(uint8_t* b, const RoceHeader& hdr, const OpcodeInfo& info);

[[gnu::always_inline]] inline void encode_roce_header(uint8_t* b, const RoceHeader& hdr,
                                                      const OpcodeInfo& info) {
  const Bth& bth = hdr.bth;
  const uint32_t flags = (bth.solicited ? 0x80u : 0u) | (bth.mig_req ? 0x40u : 0u) |
                         (bth.pad_count & 3u) << 4;  // TVer 0
  const uint32_t ecn_bits = (bth.fecn ? 0x80u : 0u) | (bth.becn ? 0x40u : 0u);
  put_be32(b, uint32_t{bth.opcode} << 24 | flags << 16 | bth.pkey);
  put_be32(b + 4, ecn_bits << 24 | (bth.dest_qp & 0xFFFFFF));
  put_be32(b + 8, (bth.ack_req ? 0x80000000u : 0u) | (bth.psn & 0xFFFFFF));
  if (info.flags & kOpExtensions) encode_extensions(b, hdr, info);
}

void encode_extensions(uint8_t* b, const RoceHeader& hdr, const OpcodeInfo& info) {
  if ((info.flags & kOpExtensions) == kOpAeth) {  // ACK, READ response first/last/only
    put_be32(b + kBthBytes, uint32_t{hdr.aeth.syndrome} << 24 | (hdr.aeth.msn & 0xFFFFFF));
    return;
  }
  if (info.reth_offset) {
    uint8_t* p = b + info.reth_offset;
    put_be64(p, hdr.reth.va);
    put_be32(p + 8, hdr.reth.rkey);
    put_be32(p + 12, hdr.reth.dma_len);
  }
  if (info.atomic_eth_offset) {
    uint8_t* p = b + info.atomic_eth_offset;
    put_be64(p, hdr.atomic.va);
    put_be32(p + 8, hdr.atomic.rkey);
    put_be64(p + 12, hdr.atomic.swap_add);
    put_be64(p + 20, hdr.atomic.compare);
  }
  if (info.aeth_offset) {
    uint8_t* p = b + info.aeth_offset;
    put_be32(p, uint32_t{hdr.aeth.syndrome} << 24 | (hdr.aeth.msn & 0xFFFFFF));
  }
  if (info.atomic_ack_eth_offset) put_be64(b + info.atomic_ack_eth_offset, hdr.atomic_ack_orig);
  if (info.imm_offset) put_be32(b + info.imm_offset, hdr.imm);
  if (info.ieth_offset) put_be32(b + info.ieth_offset, hdr.ieth_rkey);
  if (info.has(kOpCnp)) std::memset(b + kBthBytes, 0, kCnpReservedBytes);
}

void decode_extensions(const uint8_t* b, const OpcodeInfo& info, RoceHeader& hdr);

void decode_roce_header(const uint8_t* b, const OpcodeInfo& info, RoceHeader& hdr) {
  // Members after the BTH: zero unless the opcode carries them.
  hdr.reth = Reth{};
  hdr.aeth = Aeth{};
  hdr.imm = 0;
  hdr.ieth_rkey = 0;
  hdr.atomic = AtomicEth{};
  hdr.atomic_ack_orig = 0;
  const uint32_t w0 = get_be32(b);
  const uint32_t w1 = get_be32(b + 4);
  const uint32_t w2 = get_be32(b + 8);
  Bth& bth = hdr.bth;
  bth.opcode = static_cast<uint8_t>(w0 >> 24);
  bth.solicited = (w0 & 0x800000) != 0;
  bth.mig_req = (w0 & 0x400000) != 0;
  bth.pad_count = (w0 >> 20) & 3;
  bth.pkey = static_cast<uint16_t>(w0);
  bth.fecn = (w1 & 0x80000000) != 0;
  bth.becn = (w1 & 0x40000000) != 0;
  bth.dest_qp = w1 & 0xFFFFFF;
  bth.ack_req = (w2 & 0x80000000) != 0;
  bth.psn = w2 & 0xFFFFFF;
  if (info.flags & kOpExtensions) decode_extensions(b, info, hdr);
}

void decode_extensions(const uint8_t* b, const OpcodeInfo& info, RoceHeader& hdr) {
  if ((info.flags & kOpExtensions) == kOpAeth) {  // ACK, READ response first/last/only
    const uint32_t w = get_be32(b + kBthBytes);
    hdr.aeth = Aeth{static_cast<uint8_t>(w >> 24), w & 0xFFFFFF};
    return;
  }
  if (info.reth_offset) {
    const uint8_t* p = b + info.reth_offset;
    hdr.reth = Reth{get_be64(p), get_be32(p + 8), get_be32(p + 12)};
  }
  if (info.atomic_eth_offset) {
    const uint8_t* p = b + info.atomic_eth_offset;
    hdr.atomic = AtomicEth{get_be64(p), get_be32(p + 8), get_be64(p + 12), get_be64(p + 20)};
  }
  if (info.aeth_offset) {
    const uint8_t* p = b + info.aeth_offset;
    const uint32_t w = get_be32(p);
    hdr.aeth = Aeth{static_cast<uint8_t>(w >> 24), w & 0xFFFFFF};
  }
  if (info.atomic_ack_eth_offset) hdr.atomic_ack_orig = get_be64(b + info.atomic_ack_eth_offset);
  if (info.imm_offset) hdr.imm = get_be32(b + info.imm_offset);
  if (info.ieth_offset) hdr.ieth_rkey = get_be32(b + info.ieth_offset);
}

constexpr std::array<const char*, kDropReasonCount> kDropReasonNames = {
    "none",
    "truncated",
    "ether_type",
    "ip_version",
    "ip_options",
    "ip_total_length",
    "ip_checksum",
    "ip_fragment",
    "ip_protocol",
    "udp_length",
    "udp_port",
    "bth_version",
    "opcode",
    "opcode_unsupported",
    "pkey",
    "pad_count",
    "length",
    "payload_too_long",
    "payload_not_pmtu",
    "icrc",
};

// Shared by parse_frame and parse_roce: `ip_udp` is the 28 header bytes (may
// be empty when the ICRC is not verified), `udp_payload` BTH .. ICRC.
// On success `out` is the view of the packet. kHeaderChecked: the caller
// (an RxExpect match) knows that n >= 16, TVer is 0 and the P_Key matches.
// The ICRC of an IPv6 datagram (`ip_udp` its 48 header bytes), out of line:
// the IPv4 path stays as it was.
[[gnu::noinline]] uint32_t icrc_of_ipv6(const uint8_t* ip_udp,
                                        std::span<const uint8_t> udp_payload) {
  const size_t n = udp_payload.size();
  if (ip_udp + kIp6UdpBytes == udp_payload.data()) {
    return icrc_ipv6_datagram(ip_udp, kIp6UdpBytes + n - kIcrcBytes);
  }
  return icrc_ipv6(std::span<const uint8_t>(ip_udp, kIp6UdpBytes),
                   udp_payload.first(n - kIcrcBytes));
}

template <bool kHeaderChecked = false>
[[gnu::always_inline]] inline DropReason parse_roce_impl(const uint8_t* ip_udp,
                                                         std::span<const uint8_t> udp_payload,
                                                         const ParseOptions& opt, RoceView& out,
                                                         bool ipv6 = false) {
  const size_t n = udp_payload.size();
  if (!kHeaderChecked && n < kBthBytes + kIcrcBytes) return DropReason::kTruncated;
  const uint8_t* b = udp_payload.data();
  // The ICRC is checked before anything after the UDP header is trusted, so
  // a corrupted BTH counts as corruption, not as a protocol error.
  if (opt.verify_icrc && ipv6) {
    if (ip_udp == nullptr) return DropReason::kIcrc;
    if (icrc_of_ipv6(ip_udp, udp_payload) != icrc_load(b + n - kIcrcBytes)) {
      return DropReason::kIcrc;
    }
  } else if (opt.verify_icrc) {
    if (ip_udp == nullptr) return DropReason::kIcrc;
    // One span when the headers sit right before the payload (always, from
    // parse_frame): no copy of the header needed. n >= 16 makes it at least
    // 40 bytes, so one of whole words (any frame the length checks below can
    // pass) goes straight to the stream: a cheaper test than the stream's own.
    const size_t len = kIpUdpBytes + n - kIcrcBytes;
    const uint32_t crc = ip_udp + kIpUdpBytes != b
                             ? icrc_ipv4(std::span<const uint8_t>(ip_udp, kIpUdpBytes),
                                         udp_payload.first(n - kIcrcBytes))
                         : (len & 3) == 0 ? icrc_ipv4_datagram_words(ip_udp, len)
                                          : icrc_ipv4(std::span<const uint8_t>(ip_udp, len));
    if (crc != icrc_load(b + n - kIcrcBytes)) return DropReason::kIcrc;
  }
  if (!kHeaderChecked && (b[1] & 0x0F) != 0) return DropReason::kBthVersion;
  const OpcodeInfo& info = opcode_info(b[0]);
  if (!info.has(kOpValid) && !is_rc_opcode(b[0])) return DropReason::kOpcode;
  if (!kHeaderChecked && opt.check_pkey && !pkey_match(get_be16(b + 2), opt.pkey)) {
    return DropReason::kPkey;
  }
  if (!info.has(kOpValid)) {
    // Its extension headers are unknown: all after the BTH is handed on as it is.
    out.bth = b;
    out.info = &info;
    out.payload = std::span<const uint8_t>(b + kBthBytes, n - kBthBytes - kIcrcBytes);
    return DropReason::kOpcodeUnsupported;
  }
  if (n < info.header_bytes + kIcrcBytes) return DropReason::kTruncated;
  const size_t after_headers = n - info.header_bytes - kIcrcBytes;
  const uint8_t pad = (b[1] >> 4) & 3;
  size_t payload_len = 0;
  if (info.has(kOpPayload)) {
    if (pad > after_headers) return DropReason::kPadCount;
    if ((after_headers & 3) != 0) return DropReason::kLength;
    payload_len = after_headers - pad;
    // check_payload_length(), inline: with a payload, first and middle
    // packets are exactly the ones without kOpLast.
    if (opt.pmtu_bytes != 0) {
      if (payload_len > opt.pmtu_bytes) return DropReason::kPayloadTooLong;
      if (!(info.flags & kOpLast) && payload_len != opt.pmtu_bytes) {
        return DropReason::kPayloadNotPmtu;
      }
    }
  } else if (after_headers != 0 || pad != 0) {
    return DropReason::kLength;
  }
  out.bth = b;
  out.info = &info;
  out.payload = std::span<const uint8_t>(b + info.header_bytes, payload_len);
  return DropReason::kNone;
}

// IPv6 and UDP checks (the IPv6 header at frame[l2]), then the RoCE checks.
// Sets ip_out to the IPv6 header when the frame is accepted.
[[gnu::noinline]] DropReason parse_ipv6(std::span<const uint8_t> frame, size_t l2,
                                        const ParseOptions& opt, RoceView& out,
                                        const uint8_t*& ip_out) {
  if (frame.size() < l2 + kIpv6HeaderBytes) return DropReason::kTruncated;
  const uint8_t* ip = frame.data() + l2;
  if ((ip[0] >> 4) != 6) return DropReason::kIpVersion;
  const size_t payload_len = get_be16(ip + kIp6PayloadLen);
  if (payload_len < kUdpHeaderBytes || payload_len > frame.size() - l2 - kIpv6HeaderBytes) {
    return DropReason::kIpTotalLength;
  }
  // No extension headers: hop-by-hop options, routing, fragment and
  // destination options headers all land here.
  if (ip[kIp6NextHeader] != kIpProtoUdp) return DropReason::kIpProtocol;
  const uint8_t* udp = ip + kIpv6HeaderBytes;
  if (get_be16(udp + kUdpLen) != payload_len) return DropReason::kUdpLength;
  if (get_be16(udp + 2) != opt.udp_dst_port) return DropReason::kUdpPort;
  ip_out = ip;
  return parse_roce_impl(
      ip, std::span<const uint8_t>(udp + kUdpHeaderBytes, payload_len - kUdpHeaderBytes), opt, out,
      true);
}

// Shared by both parse_frame()s: Ethernet, IPv4 and UDP checks, then the
// RoCE checks. Sets ip to the IPv4 header when the frame is accepted.
[[gnu::always_inline]] inline DropReason parse_frame_impl(std::span<const uint8_t> frame,
                                                          const ParseOptions& opt, RoceView& out,
                                                          const uint8_t*& ip_out) {
  const uint8_t* f = frame.data();
  if (frame.size() < kEthHeaderBytes) return DropReason::kTruncated;
  size_t l2 = kEthHeaderBytes;
  uint16_t ether_type = get_be16(f + 12);
  if (ether_type == kEtherTypeVlan) {
    if (frame.size() < kEthHeaderBytes + kVlanTagBytes) return DropReason::kTruncated;
    ether_type = get_be16(f + 16);
    l2 += kVlanTagBytes;
  }
  if (ether_type == kEtherTypeIpv6) return parse_ipv6(frame, l2, opt, out, ip_out);
  if (ether_type != kEtherTypeIpv4) return DropReason::kEtherType;
  if (frame.size() < l2 + kIpv4HeaderBytes) return DropReason::kTruncated;
  const uint8_t* ip = f + l2;
  if (ip[0] != 0x45) return (ip[0] >> 4) != 4 ? DropReason::kIpVersion : DropReason::kIpOptions;
  const size_t ip_total = get_be16(ip + kIpTotalLen);
  if (ip_total < kIpUdpBytes || ip_total > frame.size() - l2) return DropReason::kIpTotalLength;
  if (opt.verify_ip_checksum && ipv4_header_sum(ip) != 0xFFFF) return DropReason::kIpChecksum;
  if ((get_be16(ip + kIpFrag) & kIpFragMask) != 0) return DropReason::kIpFragment;
  if (ip[kIpProto] != kIpProtoUdp) return DropReason::kIpProtocol;
  const uint8_t* udp = ip + kIpv4HeaderBytes;
  if (get_be16(udp + kUdpLen) != ip_total - kIpv4HeaderBytes) return DropReason::kUdpLength;
  if (get_be16(udp + 2) != opt.udp_dst_port) return DropReason::kUdpPort;
  ip_out = ip;
  return parse_roce_impl(
      ip, std::span<const uint8_t>(udp + kUdpHeaderBytes, ip_total - kIpUdpBytes), opt, out);
}

}  // namespace

uint32_t flow_label_for_qp(uint32_t local_qpn, uint32_t remote_qpn) {
  uint64_t v = uint64_t{local_qpn} * remote_qpn;
  v ^= v >> 20;
  v ^= v >> 40;
  return static_cast<uint32_t>(v & 0xFFFFF);
}

uint16_t udp_sport_for_qp(uint32_t local_qpn, uint32_t remote_qpn) {
  const uint32_t flow_label = flow_label_for_qp(local_qpn, remote_qpn);
  const uint32_t low = (flow_label & 0x3FFF) ^ ((flow_label & 0xFC000) >> 14);
  return static_cast<uint16_t>(low | 0xC000);
}

size_t roce_header_bytes(const RoceHeader& hdr) {
  const OpcodeInfo& info = hdr.info();
  return info.has(kOpValid) ? info.header_bytes : 0;
}

size_t frame_bytes(const RoceHeader& hdr, size_t payload_len_bytes, bool vlan, bool ipv6) {
  const size_t roce = roce_header_bytes(hdr);
  if (roce == 0) return 0;
  return eth_bytes(vlan) + (ipv6 ? kIp6UdpBytes : kIpUdpBytes) + roce + payload_len_bytes +
         pad_bytes_for(payload_len_bytes) + kIcrcBytes;
}

const char* build_status_name(BuildStatus status) {
  switch (status) {
    case BuildStatus::kOk:
      return "ok";
    case BuildStatus::kBufferTooSmall:
      return "buffer_too_small";
    case BuildStatus::kBadOpcode:
      return "bad_opcode";
    case BuildStatus::kPayloadNotAllowed:
      return "payload_not_allowed";
    case BuildStatus::kPayloadTooLong:
      return "payload_too_long";
  }
  return "unknown";
}

BuildResult build_frame(std::span<uint8_t> out, const FrameAddr& addr, RoceHeader& hdr,
                        const PayloadGather& payload) {
  return build_frame_spans(out, addr, hdr, payload.segments());
}

namespace {

// Checks shared by both builders; sets ip_total (the IP datagram's length,
// IPv6 header included) and pad when ok.
[[gnu::always_inline]] inline BuildStatus size_frame(
    const OpcodeInfo& info, std::span<const std::span<const uint8_t>> payload, size_t l2,
    size_t out_bytes, size_t& ip_total, uint8_t& pad, bool ipv6 = false) {
  if (!info.has(kOpValid)) return BuildStatus::kBadOpcode;
  size_t payload_len = 0;
  for (const auto& seg : payload) payload_len += seg.size();
  if (payload_len != 0 && !info.has(kOpPayload)) return BuildStatus::kPayloadNotAllowed;
  pad = pad_bytes_for(payload_len);
  const size_t ip_header = ipv6 ? kIpv6HeaderBytes : 0;  // not in IPv6's length field
  ip_total =
      (ipv6 ? kIp6UdpBytes : kIpUdpBytes) + info.header_bytes + payload_len + pad + kIcrcBytes;
  if (ip_total - ip_header > kMaxIpTotalBytes) return BuildStatus::kPayloadTooLong;
  if (out_bytes < l2 + ip_total) return BuildStatus::kBufferTooSmall;
  return BuildStatus::kOk;
}

// One's-complement sum (16-bit words, host order, not folded) of an IPv4
// header from `addr` without its total length and checksum: the part of the
// checksum that is the same for every frame of one FrameAddr.
uint32_t ipv4_fixed_sum(const FrameAddr& addr) {
  const uint32_t tos = (addr.dscp & 0x3Fu) << 2 | (addr.ecn & 3u);
  return (0x4500 | tos) + addr.ip_id + kIpFlagDf + (uint32_t{addr.ttl} << 8 | kIpProtoUdp) +
         (addr.src_ip >> 16) + (addr.src_ip & 0xFFFF) + (addr.dst_ip >> 16) +
         (addr.dst_ip & 0xFFFF);
}

uint16_t ipv4_checksum_from(uint32_t sum) {
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// The Ethernet header (+ VLAN tag) for `ether_type`; returns where the IP
// header goes.
uint8_t* write_l2(uint8_t* f, const FrameAddr& addr, uint16_t ether_type) {
  const size_t l2 = eth_bytes(addr.has_vlan);
  std::memcpy(f, addr.dst_mac.data(), 6);
  std::memcpy(f + 6, addr.src_mac.data(), 6);
  if (addr.has_vlan) put_be32(f + 12, uint32_t{kEtherTypeVlan} << 16 | addr.vlan_tci);
  put_be16(f + l2 - 2, ether_type);
  return f + l2;
}

// Ethernet (+VLAN), IPv6 and UDP headers (ip_total: the datagram's length,
// IPv6 header included; 0 for a template). Returns the IPv6 header.
uint8_t* write_l2_ip6_udp(uint8_t* f, const FrameAddr& addr, size_t ip_total) {
  uint8_t* ip = write_l2(f, addr, kEtherTypeIpv6);
  const uint32_t tclass = (addr.dscp & 0x3Fu) << 2 | (addr.ecn & 3u);
  const auto payload = static_cast<uint32_t>(ip_total == 0 ? 0 : ip_total - kIpv6HeaderBytes);
  put_be32(ip, 6u << 28 | tclass << 20 | (addr.flow_label & 0xFFFFF));
  put_be32(ip + kIp6PayloadLen, payload << 16 | uint32_t{kIpProtoUdp} << 8 | addr.ttl);
  std::memcpy(ip + kIp6Src, addr.src_ip6.data(), 16);
  std::memcpy(ip + kIp6Dst, addr.dst_ip6.data(), 16);
  uint8_t* udp = ip + kIpv6HeaderBytes;
  put_be32(udp + kUdpSport, uint32_t{addr.src_port} << 16 | addr.dst_port);
  put_be32(udp + kUdpLen, payload << 16);  // checksum 0 (RFC 6935; the ICRC covers it)
  return ip;
}

// Ethernet (+VLAN), IPv4 and UDP headers as whole words; the IPv4 checksum
// from the same values, not read back from the frame. Returns the IPv4 header.
uint8_t* write_l2_ip_udp(uint8_t* f, const FrameAddr& addr, size_t ip_total) {
  if (addr.ipv6) return write_l2_ip6_udp(f, addr, ip_total);
  uint8_t* ip = write_l2(f, addr, kEtherTypeIpv4);
  const uint32_t tos = (addr.dscp & 0x3Fu) << 2 | (addr.ecn & 3u);
  const auto total = static_cast<uint32_t>(ip_total);
  put_be32(ip, (0x4500 | tos) << 16 | total);
  put_be32(ip + kIpId, uint32_t{addr.ip_id} << 16 | kIpFlagDf);
  put_be32(ip + kIpTtl, (uint32_t{addr.ttl} << 8 | kIpProtoUdp) << 16 |
                            ipv4_checksum_from(ipv4_fixed_sum(addr) + total));
  put_be32(ip + kIpSrc, addr.src_ip);
  put_be32(ip + kIpDst, addr.dst_ip);
  uint8_t* udp = ip + kIpv4HeaderBytes;
  put_be32(udp + kUdpSport, uint32_t{addr.src_port} << 16 | addr.dst_port);
  put_be32(udp + kUdpLen, (total - static_cast<uint32_t>(kIpv4HeaderBytes)) << 16);  // csum 0
  return ip;
}

// BTH, extension headers, payload, zero pad and ICRC after the IPv4 and UDP
// headers at `ip`.
[[gnu::always_inline]] inline void write_roce(uint8_t* ip, const RoceHeader& hdr,
                                              const OpcodeInfo& info,
                                              std::span<const std::span<const uint8_t>> payload,
                                              uint8_t pad, bool ipv6 = false) {
  uint8_t* roce = ip + (ipv6 ? kIp6UdpBytes : kIpUdpBytes);
  encode_roce_header(roce, hdr, info);
  uint8_t* p = roce + info.header_bytes;
  for (const auto& seg : payload) {
    std::memcpy(p, seg.data(), seg.size());
    p += seg.size();
  }
  // Zero pad: four bytes are always there to write (the ICRC follows the pad).
  std::memset(p, 0, 4);
  p += pad;
  const auto len = static_cast<size_t>(p - ip);
  icrc_store(ipv6 ? icrc_ipv6_datagram(ip, len) : icrc_ipv4_datagram(ip, len), p);
}

}  // namespace

BuildResult build_frame_spans(std::span<uint8_t> out, const FrameAddr& addr, RoceHeader& hdr,
                              std::span<const std::span<const uint8_t>> payload) {
  const OpcodeInfo& info = hdr.info();
  size_t ip_total = 0;
  uint8_t pad = 0;
  const size_t l2 = eth_bytes(addr.has_vlan);
  const BuildStatus st = size_frame(info, payload, l2, out.size(), ip_total, pad, addr.ipv6);
  if (st != BuildStatus::kOk) return {st, 0};
  hdr.bth.pad_count = pad;
  write_roce(write_l2_ip_udp(out.data(), addr, ip_total), hdr, info, payload, pad, addr.ipv6);
  return {BuildStatus::kOk, l2 + ip_total};
}

FrameTemplate make_frame_template(const FrameAddr& addr) {
  FrameTemplate t;
  write_l2_ip_udp(t.bytes.data(), addr, 0);
  const size_t l2 = eth_bytes(addr.has_vlan);
  t.l2_bytes = static_cast<uint8_t>(l2);
  t.ipv6 = addr.ipv6;
  t.ip_udp_bytes = static_cast<uint8_t>(addr.ipv6 ? kIp6UdpBytes : kIpUdpBytes);
  // Whole 16-byte words that cover the headers: 48 for IPv4, 64/80 for IPv6.
  t.copy_bytes = static_cast<uint8_t>(addr.ipv6 ? (l2 + kIp6UdpBytes + 15) / 16 * 16 : 48);
  t.ip_fixed_sum = addr.ipv6 ? 0 : ipv4_fixed_sum(addr);
  return t;
}

BuildResult build_frame(std::span<uint8_t> out, const FrameTemplate& tmpl, RoceHeader& hdr,
                        std::span<const std::span<const uint8_t>> payload) {
  const OpcodeInfo& info = hdr.info();
  size_t ip_total = 0;
  uint8_t pad = 0;
  const size_t l2 = tmpl.l2_bytes;
  const BuildStatus st = size_frame(info, payload, l2, out.size(), ip_total, pad, tmpl.ipv6);
  if (st != BuildStatus::kOk) return {st, 0};
  hdr.bth.pad_count = pad;
  uint8_t* f = out.data();
  // Whole template: its bytes after the UDP header land where the BTH is
  // written next (every frame is longer than the template's copy_bytes).
  static_assert(48 <= kEthHeaderBytes + kIpUdpBytes + kBthBytes + kIcrcBytes);
  static_assert(64 <= kEthHeaderBytes + kIp6UdpBytes + kBthBytes + kIcrcBytes);
  static_assert(80 <= kEthHeaderBytes + kVlanTagBytes + kIp6UdpBytes + kBthBytes + kIcrcBytes);
  copy_template_bytes(f, tmpl);
  uint8_t* ip = f + l2;
  const auto total = static_cast<uint32_t>(ip_total);
  if (tmpl.ipv6) {
    const uint16_t len = static_cast<uint16_t>(total - kIpv6HeaderBytes);
    put_be16(ip + kIp6PayloadLen, len);
    put_be16(ip + kIpv6HeaderBytes + kUdpLen, len);
    write_roce(ip, hdr, info, payload, pad, true);
    return {BuildStatus::kOk, l2 + ip_total};
  }
  put_be16(ip + kIpTotalLen, static_cast<uint16_t>(total));
  put_be16(ip + kIpCsum, ipv4_checksum_from(tmpl.ip_fixed_sum + total));
  put_be16(ip + kIpv4HeaderBytes + kUdpLen, static_cast<uint16_t>(total - kIpv4HeaderBytes));
  write_roce(ip, hdr, info, payload, pad);
  return {BuildStatus::kOk, l2 + ip_total};
}

uint8_t* begin_frame_ipv6(std::span<uint8_t> out, const FrameTemplate& tmpl, size_t roce_bytes,
                          BuildStatus& status) {
  const size_t payload = kUdpHeaderBytes + roce_bytes + kIcrcBytes;  // IPv6 payload length
  if (payload > kMaxIpTotalBytes) {
    status = BuildStatus::kPayloadTooLong;
    return nullptr;
  }
  const size_t l2 = tmpl.l2_bytes;
  if (out.size() < l2 + kIpv6HeaderBytes + payload || out.size() < tmpl.copy_bytes) {
    status = BuildStatus::kBufferTooSmall;
    return nullptr;
  }
  uint8_t* f = out.data();
  copy_template_bytes(f, tmpl);
  uint8_t* ip = f + l2;
  put_be16(ip + kIp6PayloadLen, static_cast<uint16_t>(payload));
  put_be16(ip + kIpv6HeaderBytes + kUdpLen, static_cast<uint16_t>(payload));
  status = BuildStatus::kOk;
  return ip + kIp6UdpBytes;
}

RoceHeader make_cnp_header(uint32_t dest_qp, uint16_t pkey) {
  RoceHeader hdr;
  hdr.bth.opcode = static_cast<uint8_t>(Opcode::kCnp);
  hdr.bth.pkey = pkey;
  hdr.bth.becn = true;
  hdr.bth.dest_qp = dest_qp & 0xFFFFFF;
  return hdr;
}

BuildResult build_cnp(std::span<uint8_t> out, const FrameAddr& addr, uint32_t dest_qp,
                      uint16_t pkey) {
  RoceHeader hdr = make_cnp_header(dest_qp, pkey);
  return build_frame(out, addr, hdr, PayloadGather{});
}

const char* drop_reason_name(DropReason reason) {
  const auto i = static_cast<size_t>(reason);
  return i < kDropReasonCount ? kDropReasonNames[i] : "unknown";
}

DropReason check_payload_length(const OpcodeInfo& info, size_t payload_len_bytes,
                                uint32_t pmtu_bytes) {
  if (pmtu_bytes == 0) return DropReason::kNone;
  if (payload_len_bytes > pmtu_bytes) return DropReason::kPayloadTooLong;
  const bool full_sized =
      info.has(kOpPayload) && (info.has(kOpMiddle) || (info.has(kOpFirst) && !info.has(kOpLast)));
  if (full_sized && payload_len_bytes != pmtu_bytes) return DropReason::kPayloadNotPmtu;
  return DropReason::kNone;
}

DropReason parse_roce(std::span<const uint8_t> ip_udp_headers, std::span<const uint8_t> udp_payload,
                      const ParseOptions& opt, RoceView& out) {
  const size_t h = ip_udp_headers.size();
  if (h == kIp6UdpBytes && (ip_udp_headers[0] >> 4) == 6) {
    return parse_roce_impl(ip_udp_headers.data(), udp_payload, opt, out, true);
  }
  const uint8_t* ip_udp = h == kIpUdpBytes ? ip_udp_headers.data() : nullptr;
  return parse_roce_impl(ip_udp, udp_payload, opt, out);
}

DropReason parse_roce(std::span<const uint8_t> ip_udp_headers, std::span<const uint8_t> udp_payload,
                      const ParseOptions& opt, ParsedFrame& out) {
  RoceView v;
  const DropReason r = parse_roce(ip_udp_headers, udp_payload, opt, v);
  if (r != DropReason::kNone && r != DropReason::kOpcodeUnsupported) return r;
  decode_roce_header(v.bth, *v.info, out.hdr);
  out.payload = v.payload;
  return r;
}

DropReason parse_frame(std::span<const uint8_t> frame, const ParseOptions& opt, RoceView& out) {
  const uint8_t* ip = nullptr;
  return parse_frame_impl(frame, opt, out, ip);
}

DropReason parse_frame(std::span<const uint8_t> frame, const ParseOptions& opt, ParsedFrame& out) {
  RoceView v;
  const uint8_t* ip = nullptr;
  const DropReason r = parse_frame_impl(frame, opt, v, ip);
  if (r != DropReason::kNone && r != DropReason::kOpcodeUnsupported) return r;
  decode_roce_header(v.bth, *v.info, out.hdr);
  out.payload = v.payload;
  const uint8_t* f = frame.data();
  FrameAddr& a = out.addr;
  std::memcpy(a.dst_mac.data(), f, 6);
  std::memcpy(a.src_mac.data(), f + 6, 6);
  a.has_vlan = ip - f != kEthHeaderBytes;
  a.vlan_tci = a.has_vlan ? get_be16(f + 14) : 0;
  if ((ip[0] >> 4) == 6) {
    a.ipv6 = true;
    std::memcpy(a.src_ip6.data(), ip + kIp6Src, 16);
    std::memcpy(a.dst_ip6.data(), ip + kIp6Dst, 16);
    const uint32_t w0 = get_be32(ip);
    a.dscp = static_cast<uint8_t>((w0 >> 22) & 0x3F);
    a.ecn = static_cast<uint8_t>((w0 >> 20) & 3);
    a.flow_label = w0 & 0xFFFFF;
    a.ttl = ip[kIp6HopLimit];
    const uint32_t ports = get_be32(ip + kIpv6HeaderBytes + kUdpSport);
    a.src_port = static_cast<uint16_t>(ports >> 16);
    a.dst_port = static_cast<uint16_t>(ports);
    return r;
  }
  a.src_ip = get_be32(ip + kIpSrc);
  a.dst_ip = get_be32(ip + kIpDst);
  const uint32_t udp_ports = get_be32(ip + kIpv4HeaderBytes + kUdpSport);
  a.src_port = static_cast<uint16_t>(udp_ports >> 16);
  a.dst_port = static_cast<uint16_t>(udp_ports);
  a.dscp = ip[kIpTos] >> 2;
  a.ecn = ip[kIpTos] & 3;
  a.ttl = ip[kIpTtl];
  a.ip_id = get_be16(ip + kIpId);
  return r;
}

void decode_roce_header(const RoceView& view, RoceHeader& out) {
  decode_roce_header(view.bth, *view.info, out);
}

namespace {
// Copies the masked image bytes into exp's words (at exp.word_at).
void set_expect_words(RxExpect& e, const uint8_t* img, const uint8_t* msk) {
  for (size_t w = 0; w < e.word_at.size(); ++w) {
    for (size_t k = 0; k < 16; ++k) {
      e.mask[w][k] = msk[e.word_at[w] + k];
      e.expect[w][k] = img[e.word_at[w] + k] & msk[e.word_at[w] + k];
    }
  }
}

// The bytes of the BTH (at `bth` in the image) an expectation compares: TVer,
// the P_Key when opt checks it, and the destination QP.
void expect_bth(uint8_t* bth, uint8_t* bth_msk, uint32_t dest_qpn, const ParseOptions& opt,
                uint16_t pkey) {
  bth_msk[1] = 0x0F;  // TVer (image: 0)
  if (opt.check_pkey) {
    put_be16(bth + 2, pkey);
    bth_msk[2] = bth_msk[3] = 0xFF;
  }
  put_be32(bth + 4, dest_qpn & 0xFFFFFF);
  bth_msk[5] = bth_msk[6] = bth_msk[7] = 0xFF;
}
}  // namespace

RxExpect make_rx_expect(const FrameAddr& sender, uint32_t dest_qpn, const ParseOptions& opt,
                        uint16_t pkey) {
  RxExpect e;
  e.opt = opt;
  const size_t l2 = eth_bytes(sender.has_vlan);
  e.l2_bytes = static_cast<uint8_t>(l2);
  e.ipv6 = sender.ipv6;
  // The sender's frame image (lengths, checksum, opcode, PSN left 0: masked
  // out) and which of its bytes must be equal.
  std::array<uint8_t, 80> img{};
  std::array<uint8_t, 80> msk{};
  uint8_t* ip = write_l2_ip_udp(img.data(), sender, 0);
  const size_t i = l2;                            // offset of the IP header
  msk[12] = msk[13] = 0xFF;                       // Ethernet type or the VLAN TPID
  if (sender.has_vlan) msk[16] = msk[17] = 0xFF;  // the type after the tag (not the TCI)
  // A matching frame passes every check the image covers.
  e.usable = sender.dst_port == opt.udp_dst_port && (!opt.check_pkey || pkey_match(pkey, opt.pkey));
  if (sender.ipv6) {
    msk[i] = 0xF0;                   // version
    msk[i + kIp6NextHeader] = 0xFF;  // next header: UDP, no extensions
    for (size_t k = kIp6Src; k < kIpv6HeaderBytes; ++k) msk[i + k] = 0xFF;  // addresses
    msk[i + 42] = msk[i + 43] = 0xFF;                                       // UDP destination port
    expect_bth(ip + kIp6UdpBytes, msk.data() + i + kIp6UdpBytes, dest_qpn, opt, pkey);
    e.word_at = {12, 28, 44, static_cast<uint8_t>(l2 + 42)};
    set_expect_words(e, img.data(), msk.data());
    return e;
  }
  msk[i] = 0xFF;                                       // version, IHL
  for (size_t k = 4; k < 10; ++k) msk[i + k] = 0xFF;   // ID, flags/fragment, TTL, protocol
  for (size_t k = 12; k < 20; ++k) msk[i + k] = 0xFF;  // addresses
  msk[i + 22] = msk[i + 23] = 0xFF;                    // UDP destination port
  expect_bth(ip + kIpUdpBytes, msk.data() + i + kIpUdpBytes, dest_qpn, opt, pkey);
  // Three words: the fourth (not compared) repeats the first.
  e.word_at = {12, 28, static_cast<uint8_t>(l2 + kIpUdpBytes + kBthBytes - 16), 12};
  set_expect_words(e, img.data(), msk.data());
  e.ip_fixed_sum = uint64_t{load_native32(ip + kIpId)} + load_native16(ip + kIpTtl) +
                   load_native32(ip + kIpSrc) + load_native32(ip + kIpDst);
  return e;
}

namespace {
// Whether the frame's bytes at exp.word_at[0 .. kWords) equal expect under
// mask. IPv4 compares three words at offsets known here (the third ends at
// the end of the BTH), IPv6 four at the offsets the expectation holds.
template <size_t kWords>
[[gnu::always_inline]] inline bool header_matches(const uint8_t* f, const RxExpect& e) {
  static_assert(kWords == 3 || kWords == 4);
  const uint8_t* at[4] = {
      f + 12, f + 28,
      kWords == 3 ? f + e.l2_bytes + kIpUdpBytes + kBthBytes - 16 : f + e.word_at[2],
      f + e.word_at[3]};
#if defined(__SSE2__)
  const auto diff = [&](size_t w) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at[w]));
    const __m128i x = _mm_load_si128(reinterpret_cast<const __m128i*>(e.expect[w].data()));
    const __m128i m = _mm_load_si128(reinterpret_cast<const __m128i*>(e.mask[w].data()));
    return _mm_and_si128(_mm_xor_si128(v, x), m);
  };
  __m128i d = _mm_or_si128(_mm_or_si128(diff(0), diff(1)), diff(2));
  if constexpr (kWords == 4) d = _mm_or_si128(d, diff(3));
  return _mm_movemask_epi8(_mm_cmpeq_epi8(d, _mm_setzero_si128())) == 0xFFFF;
#else
  uint64_t d = 0;
  for (size_t w = 0; w < kWords; ++w) {
    for (size_t h = 0; h < 16; h += 8) {
      uint64_t v, x, m;
      std::memcpy(&v, at[w] + h, 8);
      std::memcpy(&x, e.expect[w].data() + h, 8);
      std::memcpy(&m, e.mask[w].data() + h, 8);
      d |= (v ^ x) & m;
    }
  }
  return d == 0;
#endif
}

// The frames that do not match: every check in order, out of line (a tail
// call), so that the matching path needs no stack slot for its `ip`.
[[gnu::noinline]] DropReason parse_frame_unmatched(std::span<const uint8_t> frame,
                                                   const ParseOptions& opt, RoceView& out) {
  const uint8_t* ip = nullptr;
  return parse_frame_impl(frame, opt, out, ip);
}
}  // namespace

namespace {
// parse_frame_if_matched for IPv6 expectations, out of line: the IPv4 path
// stays as it was.
[[gnu::noinline]] std::optional<DropReason> parse_ipv6_if_matched(std::span<const uint8_t> frame,
                                                                  const RxExpect& exp,
                                                                  RoceView& out) {
  // Every byte compared lies before the ICRC of the shortest frame.
  if (frame.size() < exp.l2_bytes + kIp6UdpBytes + kBthBytes + kIcrcBytes ||
      !header_matches<4>(frame.data(), exp)) {
    return std::nullopt;
  }
  const uint8_t* ip = frame.data() + exp.l2_bytes;
  const size_t payload_len = get_be16(ip + kIp6PayloadLen);
  if (payload_len < kUdpHeaderBytes + kBthBytes + kIcrcBytes ||
      payload_len > frame.size() - exp.l2_bytes - kIpv6HeaderBytes ||
      get_be16(ip + kIpv6HeaderBytes + kUdpLen) != payload_len) {
    return std::nullopt;
  }
  return parse_roce_impl<true>(
      ip, std::span<const uint8_t>(ip + kIp6UdpBytes, payload_len - kUdpHeaderBytes), exp.opt, out,
      true);
}
}  // namespace

std::optional<DropReason> parse_frame_if_matched(std::span<const uint8_t> frame,
                                                 const RxExpect& exp, RoceView& out) {
  if (!exp.usable) return std::nullopt;
  if (exp.ipv6) return parse_ipv6_if_matched(frame, exp, out);
  const uint8_t* f = frame.data();
  const size_t l2 = exp.l2_bytes;
  // Every byte compared lies before the ICRC of the shortest frame.
  if (frame.size() < l2 + kIpUdpBytes + kBthBytes + kIcrcBytes || !header_matches<3>(f, exp)) {
    return std::nullopt;
  }
  const uint8_t* ip = f + l2;
  const size_t ip_total = get_be16(ip + kIpTotalLen);
  if (ip_total < kIpUdpBytes + kBthBytes + kIcrcBytes || ip_total > frame.size() - l2 ||
      get_be16(ip + kIpv4HeaderBytes + kUdpLen) != ip_total - kIpv4HeaderBytes ||
      (exp.opt.verify_ip_checksum &&
       !ones_complement_zero(exp.ip_fixed_sum + load_native32(ip) + load_native16(ip + kIpCsum)))) {
    return std::nullopt;
  }
  return parse_roce_impl<true>(
      ip, std::span<const uint8_t>(ip + kIpUdpBytes, ip_total - kIpUdpBytes), exp.opt, out);
}

DropReason parse_frame(std::span<const uint8_t> frame, const RxExpect& exp, RoceView& out) {
  if (const std::optional<DropReason> r = parse_frame_if_matched(frame, exp, out)) return *r;
  return parse_frame_unmatched(frame, exp.opt, out);
}

bool rx_expect_require_byte(RxExpect& exp, size_t offset, uint8_t mask, uint8_t value) {
  bool covered = false;
  for (size_t w = 0; w < exp.word_at.size(); ++w) {
    const size_t at = exp.word_at[w];
    if (offset < at || offset >= at + 16) continue;
    covered = true;
    uint8_t& m = exp.mask[w][offset - at];
    uint8_t& x = exp.expect[w][offset - at];
    // Bits required before with other values: no frame can match any more.
    if (((x ^ value) & m & mask) != 0) exp.usable = false;
    m = static_cast<uint8_t>(m | mask);
    x = static_cast<uint8_t>((x & ~mask) | (value & mask));
  }
  return covered;
}

}  // namespace conduit::wire
