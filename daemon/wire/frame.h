// RoCEv2 frames: Ethernet (+ optional 802.1Q tag) | IPv4 (no options) or
// IPv6 (no extension headers) | UDP | BTH | extension headers | payload | pad |
// ICRC, built from and parsed into a RoceHeader (wire/roce_header.h).
//
// Pure and allocation-free: every function works on caller-owned buffers,
// never throws and keeps no state, so any thread may call it concurrently on
// distinct buffers. A frame that fails validation is reported as a DropReason
// for the caller to count; nothing here logs.
//
// Receive-side validation (parse_frame) checks, in order: Ethernet type
// (optionally one VLAN tag), IPv4 version, IHL = 5 (options are rejected),
// total length against the frame, header checksum, fragment bits, protocol,
// UDP length, UDP destination port, BTH TVer, opcode (RC or CNP), P_Key,
// header/pad/payload lengths against the opcode and the PMTU, and the ICRC.
// IPv6 (EtherType 0x86DD): version 6, payload length against the frame, next
// header UDP (an extension header, fragments included, is kIpProtocol), then
// the same UDP and RoCE checks. The UDP checksum is not verified (RoCEv2
// senders put 0 there, over IPv6 too (RFC 6935); the ICRC covers the UDP
// header), and the builders write 0.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

#include "wire/byte_order.h"
#include "wire/icrc.h"
#include "wire/roce_header.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace conduit::wire {

inline constexpr size_t kEthHeaderBytes = 14;
inline constexpr size_t kVlanTagBytes = 4;
inline constexpr size_t kIpv4HeaderBytes = 20;
inline constexpr size_t kIpv6HeaderBytes = 40;
inline constexpr size_t kUdpHeaderBytes = 8;
inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeIpv6 = 0x86DD;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint8_t kDefaultTtl = 64;

// IPv4 ECN codepoints (low two bits of the ToS byte).
inline constexpr uint8_t kEcnNotEct = 0;
inline constexpr uint8_t kEcnEct1 = 1;
inline constexpr uint8_t kEcnEct0 = 2;
inline constexpr uint8_t kEcnCe = 3;

// Addressing of one frame: everything below the BTH that the caller chooses.
// IPv4 addresses and ports are in host byte order; IPv6 addresses are the 16
// bytes as on the wire (a GID).
struct FrameAddr {
  std::array<uint8_t, 6> dst_mac{};
  std::array<uint8_t, 6> src_mac{};
  bool has_vlan = false;  // emit / saw one 802.1Q tag
  uint16_t vlan_tci = 0;  // PCP(3) DEI(1) VID(12); meaningful when has_vlan
  uint32_t src_ip = 0;
  uint32_t dst_ip = 0;
  uint16_t src_port = 0xC000;  // per-QP entropy: udp_sport_for_qp()
  uint16_t dst_port = kRoceUdpPort;
  uint8_t dscp = 0;  // 6 bits (IPv6: the traffic class's high 6 bits)
  uint8_t ecn = kEcnNotEct;
  uint8_t ttl = kDefaultTtl;  // IPv6: the hop limit
  uint16_t ip_id = 0;         // IPv4 only: sent with DF set; the ICRC covers it
  // IPv6 instead of IPv4: the addresses below, not src_ip/dst_ip.
  bool ipv6 = false;
  std::array<uint8_t, 16> src_ip6{};
  std::array<uint8_t, 16> dst_ip6{};
  uint32_t flow_label = 0;  // IPv6 only, 20 bits (masked out of the ICRC): flow_label_for_qp()

  bool operator==(const FrameAddr&) const = default;
};

// Linux's flow label for a RoCEv2 QP (rdma_calc_flow_label): 20 bits,
// constant per (local QPN, remote QPN) pair. conduit sends it in the IPv6
// header of a QP's frames (RFC 6437: a stable label per flow, for ECMP).
uint32_t flow_label_for_qp(uint32_t local_qpn, uint32_t remote_qpn);
// Linux's UDP source port for a RoCEv2 QP (rdma_flow_label_to_udp_sport of
// that flow label): constant per pair, always in 0xC000..0xFFFF.
uint16_t udp_sport_for_qp(uint32_t local_qpn, uint32_t remote_qpn);

// A packet's payload as up to kMaxPayloadSegments non-owning byte ranges,
// concatenated in order (one packet may span two scatter-gather elements).
class PayloadGather {
 public:
  static constexpr size_t kMaxPayloadSegments = 4;

  PayloadGather() = default;
  PayloadGather(std::span<const uint8_t> a) { add(a); }  // NOLINT: implicit by design
  PayloadGather(std::span<const uint8_t> a, std::span<const uint8_t> b) {
    add(a);
    add(b);
  }

  // Appends a range; false (and nothing appended) when all slots are used.
  // Empty ranges are accepted and take no slot.
  bool add(std::span<const uint8_t> seg) {
    if (seg.empty()) return true;
    if (count_ == kMaxPayloadSegments) return false;
    segs_[count_++] = seg;
    len_bytes_ += seg.size();
    return true;
  }

  size_t len_bytes() const { return len_bytes_; }
  size_t count() const { return count_; }
  std::span<const uint8_t> segment(size_t i) const { return segs_[i]; }
  std::span<const std::span<const uint8_t>> segments() const { return {segs_.data(), count_}; }

 private:
  std::array<std::span<const uint8_t>, kMaxPayloadSegments> segs_{};
  size_t count_ = 0;
  size_t len_bytes_ = 0;
};

// Bytes from BTH to the end of the extension headers for hdr's opcode, or 0
// for an opcode the table does not know.
size_t roce_header_bytes(const RoceHeader& hdr);

// Pad bytes that align a payload to 4 bytes (the BTH PadCnt).
constexpr uint8_t pad_bytes_for(size_t payload_len_bytes) {
  return static_cast<uint8_t>((4 - (payload_len_bytes & 3)) & 3);
}

// Size of the frame build_frame() writes (no FCS): Ethernet (+4 with a VLAN
// tag) + IPv4 (IPv6 with ipv6) + UDP + BTH/extension headers + payload + pad +
// ICRC. 0 for an unknown opcode.
size_t frame_bytes(const RoceHeader& hdr, size_t payload_len_bytes, bool vlan, bool ipv6 = false);

enum class BuildStatus : uint8_t {
  kOk = 0,
  kBufferTooSmall,     // out.size() < frame_bytes(...)
  kBadOpcode,          // opcode not in the table (RC opcodes and CNP)
  kPayloadNotAllowed,  // non-empty payload for an opcode without payload
  kPayloadTooLong,     // the IPv4 total length (IPv6 payload length) would exceed 65535
};

struct BuildResult {
  BuildStatus status = BuildStatus::kOk;
  size_t len_bytes = 0;  // bytes written to the front of `out` when ok()

  constexpr bool ok() const { return status == BuildStatus::kOk; }
};

const char* build_status_name(BuildStatus status);

// Writes a complete frame to the front of `out`: Ethernet (+VLAN), IPv4 (DF,
// addr.ip_id, header checksum) or IPv6 (addr.ipv6: traffic class, flow label,
// hop limit), UDP (checksum 0), BTH and the opcode's
// extension headers from `hdr`, the payload, zero pad bytes and the ICRC.
// Sets hdr.bth.pad_count from the payload length (the only field of `hdr` it
// changes); BTH reserved bits are sent as 0. On error nothing meaningful is in
// `out` and len_bytes is 0.
BuildResult build_frame(std::span<uint8_t> out, const FrameAddr& addr, RoceHeader& hdr,
                        const PayloadGather& payload);
// The same with the payload as a caller's list of byte ranges (any number),
// concatenated in order: no PayloadGather to fill per packet.
BuildResult build_frame_spans(std::span<uint8_t> out, const FrameAddr& addr, RoceHeader& hdr,
                              std::span<const std::span<const uint8_t>> payload);

// The Ethernet (+VLAN), IP and UDP headers of every frame to one FrameAddr,
// prepared once (per QP): build_frame() with a template copies them and fills
// in the lengths and the IPv4 checksum instead of encoding each field per
// packet. Remake it when the FrameAddr changes.
struct FrameTemplate {
  static_assert(kEthHeaderBytes + kVlanTagBytes + kIpv4HeaderBytes + kUdpHeaderBytes <= 48);
  static_assert(kEthHeaderBytes + kVlanTagBytes + kIpv6HeaderBytes + kUdpHeaderBytes <= 80);
  // Headers with total/UDP length 0; bytes past l2_bytes + ip_udp_bytes are
  // unused (zero). Copied as 16-byte words: three (48 bytes) for IPv4, four
  // or five (64 or 80, with a VLAN tag) for IPv6: copy_bytes.
  std::array<uint8_t, 80> bytes{};
  uint8_t l2_bytes = kEthHeaderBytes;
  uint8_t ip_udp_bytes = kIpv4HeaderBytes + kUdpHeaderBytes;  // 48 for IPv6
  uint8_t copy_bytes = 48;
  bool ipv6 = false;
  // One's-complement sum (16-bit words, unfolded) of the IPv4 header without
  // its total length and checksum (0 for IPv6).
  uint32_t ip_fixed_sum = 0;
};

FrameTemplate make_frame_template(const FrameAddr& addr);

// build_frame() of the template's FrameAddr: the same bytes, status and
// effect on hdr.
BuildResult build_frame(std::span<uint8_t> out, const FrameTemplate& tmpl, RoceHeader& hdr,
                        std::span<const std::span<const uint8_t>> payload);

// The template's copy_bytes to the front of a frame, as 16-byte words (a
// plain memcpy of 48 bytes may become a 12-step rep movs): three for IPv4,
// then one or two more for IPv6.
inline void copy_template_bytes(uint8_t* f, const FrameTemplate& tmpl) {
#if defined(__SSE2__)
  const auto* src = reinterpret_cast<const __m128i*>(tmpl.bytes.data());
  auto* dst = reinterpret_cast<__m128i*>(f);
  const __m128i a = _mm_loadu_si128(src);
  const __m128i b = _mm_loadu_si128(src + 1);
  const __m128i c = _mm_loadu_si128(src + 2);
  _mm_storeu_si128(dst, a);
  _mm_storeu_si128(dst + 1, b);
  _mm_storeu_si128(dst + 2, c);
  if (tmpl.copy_bytes > 48) [[unlikely]] {
    _mm_storeu_si128(dst + 3, _mm_loadu_si128(src + 3));
    if (tmpl.copy_bytes > 64) _mm_storeu_si128(dst + 4, _mm_loadu_si128(src + 4));
  }
#else
  std::memcpy(f, tmpl.bytes.data(), tmpl.copy_bytes);
#endif
}

// An IPv4 template's 48 bytes (copy_bytes 48), read once by a caller that
// writes a run of frames: copy_template_bytes() without the loads per frame
// (the frame stores may alias the template, so it would be read again each
// time) and without the test for the longer IPv6 copies.
struct TemplateWords48 {
  static constexpr size_t kBytes = 48;
#if defined(__SSE2__)
  __m128i a, b, c;
  explicit TemplateWords48(const FrameTemplate& tmpl) {
    const auto* src = reinterpret_cast<const __m128i*>(tmpl.bytes.data());
    a = _mm_loadu_si128(src);
    b = _mm_loadu_si128(src + 1);
    c = _mm_loadu_si128(src + 2);
  }
  void store(uint8_t* f) const {
    auto* dst = reinterpret_cast<__m128i*>(f);
    _mm_storeu_si128(dst, a);
    _mm_storeu_si128(dst + 1, b);
    _mm_storeu_si128(dst + 2, c);
  }
#else
  std::array<uint8_t, kBytes> bytes;
  explicit TemplateWords48(const FrameTemplate& tmpl) {
    std::memcpy(bytes.data(), tmpl.bytes.data(), kBytes);
  }
  void store(uint8_t* f) const { std::memcpy(f, bytes.data(), kBytes); }
#endif
};

// The fused transmit path, for callers that encode the BTH and extension
// headers themselves (Qp::poll_tx_frame): begin_frame() writes the
// template's headers for a frame whose BTH .. pad is `roce_bytes` long and
// returns where the BTH goes, or nullptr when `out` cannot hold the frame
// (kBufferTooSmall) or the IPv4 length would exceed 65535 (kPayloadTooLong:
// roce_bytes is too big); the caller writes the roce_bytes (pad zeroed) and
// finish_frame() appends the ICRC and returns the frame length. The bytes
// are those build_frame() writes for the same header and payload.
uint8_t* begin_frame_ipv6(std::span<uint8_t> out, const FrameTemplate& tmpl, size_t roce_bytes,
                          BuildStatus& status);
inline uint8_t* begin_frame(std::span<uint8_t> out, const FrameTemplate& tmpl, size_t roce_bytes,
                            BuildStatus& status) {
  if (tmpl.ipv6) [[unlikely]] {
    return begin_frame_ipv6(out, tmpl, roce_bytes, status);
  }
  constexpr size_t kIpUdp = kIpv4HeaderBytes + kUdpHeaderBytes;
  const size_t ip_total = kIpUdp + roce_bytes + kIcrcBytes;
  if (ip_total > 0xFFFF) {
    status = BuildStatus::kPayloadTooLong;
    return nullptr;
  }
  const size_t l2 = tmpl.l2_bytes;
  // The whole template is copied: its bytes after the UDP header land where
  // the BTH goes (every frame has a BTH and an ICRC after the headers).
  if (out.size() < l2 + ip_total || out.size() < tmpl.copy_bytes) {
    status = BuildStatus::kBufferTooSmall;
    return nullptr;
  }
  uint8_t* f = out.data();
  copy_template_bytes(f, tmpl);
  uint8_t* ip = f + l2;
  auto total = static_cast<uint32_t>(ip_total);
  put_be16(ip + 2, static_cast<uint16_t>(total));
  uint32_t sum = tmpl.ip_fixed_sum + total;
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  put_be16(ip + 10, static_cast<uint16_t>(~sum));
  put_be16(ip + kIpv4HeaderBytes + 4, static_cast<uint16_t>(total - kIpv4HeaderBytes));
  status = BuildStatus::kOk;
  return ip + kIpUdp;
}
inline size_t finish_frame(const FrameTemplate& tmpl, uint8_t* frame, size_t roce_bytes) {
  const size_t ip_udp = tmpl.ip_udp_bytes;
  const uint8_t* ip = frame + tmpl.l2_bytes;
  uint8_t* icrc = frame + tmpl.l2_bytes + ip_udp + roce_bytes;
  icrc_store(icrc_datagram(ip, ip_udp + roce_bytes), icrc);
  return tmpl.l2_bytes + ip_udp + roce_bytes + kIcrcBytes;
}
// finish_frame() in two steps, for callers that write a burst of frames
// first and their ICRCs after: the frame's length for `roce_bytes`, and the
// ICRC of a frame of that length (all its other bytes written).
inline size_t frame_bytes_for(const FrameTemplate& tmpl, size_t roce_bytes) {
  return size_t{tmpl.l2_bytes} + tmpl.ip_udp_bytes + roce_bytes + kIcrcBytes;
}
inline void finish_frame_icrc(const FrameTemplate& tmpl, uint8_t* frame, size_t frame_bytes) {
  const uint8_t* ip = frame + tmpl.l2_bytes;
  const size_t datagram = frame_bytes - tmpl.l2_bytes - kIcrcBytes;
  icrc_store(icrc_datagram(ip, datagram), frame + frame_bytes - kIcrcBytes);
}
// finish_frame_icrc() of a frame whose BTH .. pad is whole 32-bit words
// (every frame the fused builders write: the pad aligns the payload).
inline void finish_frame_icrc_words(const FrameTemplate& tmpl, uint8_t* frame, size_t frame_bytes) {
  const uint8_t* ip = frame + tmpl.l2_bytes;
  const size_t datagram = frame_bytes - tmpl.l2_bytes - kIcrcBytes;
  const uint32_t icrc =
      tmpl.ipv6 ? icrc_ipv6_datagram_words(ip, datagram) : icrc_ipv4_datagram_words(ip, datagram);
  icrc_store(icrc, frame + frame_bytes - kIcrcBytes);
}

// The header of a CNP (opcode 0x81, BECN set, PSN 0) addressed to the QP that
// sent the CE-marked data, i.e. dest_qp = the data packet's sender's QPN.
RoceHeader make_cnp_header(uint32_t dest_qp, uint16_t pkey = kDefaultPkey);

// build_frame() of make_cnp_header(dest_qp, pkey) with its 16 zero bytes.
BuildResult build_cnp(std::span<uint8_t> out, const FrameAddr& addr, uint32_t dest_qp,
                      uint16_t pkey = kDefaultPkey);

// Why a received frame was dropped. kNone means it was accepted. Values are
// dense from 0 to kCount - 1 so callers can index counter arrays with them.
enum class DropReason : uint8_t {
  kNone = 0,
  kTruncated,          // shorter than the headers it announces
  kEtherType,          // neither IPv4 nor IPv6 (after at most one 802.1Q tag)
  kIpVersion,          // IPv4 version field != 4 (IPv6: != 6)
  kIpOptions,          // IHL != 5
  kIpTotalLength,      // total (IPv6: 40 + payload) length < headers, or longer than the frame
  kIpChecksum,         // header checksum wrong
  kIpFragment,         // MF set or fragment offset != 0
  kIpProtocol,         // not UDP (IPv6: next header not UDP, extension headers included)
  kUdpLength,          // UDP length != IP total length - 20 (IPv6: != payload length)
  kUdpPort,            // destination port != ParseOptions::udp_dst_port
  kBthVersion,         // BTH TVer != 0
  kOpcode,             // not an RC opcode or CNP
  kOpcodeUnsupported,  // an RC opcode we do not implement (see below: the view is set)
  kPkey,               // P_Key does not match ParseOptions::pkey
  kPadCount,           // pad count larger than the bytes after the headers
  kLength,             // length not what the opcode requires (headers-only
                       // opcodes with payload or pad, CNP body size, payload +
                       // pad not a multiple of 4)
  kPayloadTooLong,     // payload > PMTU
  kPayloadNotPmtu,     // first/middle packet whose payload is not exactly PMTU
  kIcrc,               // ICRC mismatch
  kCount,
};

inline constexpr size_t kDropReasonCount = static_cast<size_t>(DropReason::kCount);

// Stable snake_case name for counters and logs ("none", "truncated", ...).
const char* drop_reason_name(DropReason reason);

struct ParseOptions {
  uint16_t udp_dst_port = kRoceUdpPort;
  // P_Key check as in IB (and rxe): the low 15 bits must be equal and at
  // least one side a full member (bit 15). Off: any P_Key is accepted.
  bool check_pkey = true;
  uint16_t pkey = kDefaultPkey;
  // 256..4096; 0 disables the PMTU checks. Payloads above it are dropped;
  // first and middle packets (SEND, WRITE, READ response) must carry exactly
  // this many bytes. A receiver that only learns the QP (and so its PMTU)
  // after parsing can parse with 0 and call check_payload_length() later.
  uint32_t pmtu_bytes = 4096;
  bool verify_ip_checksum = true;
  bool verify_icrc = true;  // off only for benchmarks and diagnostics
};

// A parsed frame. `payload` points into the frame passed to the parser (no
// copy): it is valid while that buffer is.
struct ParsedFrame {
  FrameAddr addr;
  RoceHeader hdr;  // extension members not used by the opcode are zero
  std::span<const uint8_t> payload;
};

// A validated packet as the bytes it arrived in, for the fused receive path
// (Qp::on_packet(now, RoceView)): fields are read straight from the BTH and
// extension headers instead of being copied into a RoceHeader. Points into
// the frame passed to the parser: valid while that buffer is.
struct RoceView {
  const uint8_t* bth = nullptr;  // BTH, then the opcode's extension headers
  const OpcodeInfo* info = nullptr;
  std::span<const uint8_t> payload;

  uint8_t opcode() const { return bth[0]; }
  bool solicited() const { return (bth[1] & 0x80) != 0; }
  bool becn() const { return (bth[4] & 0x40) != 0; }
  uint32_t dest_qp() const { return get_be32(bth + 4) & 0xFFFFFF; }
  bool ack_req() const { return (bth[8] & 0x80) != 0; }
  uint32_t psn() const { return get_be32(bth + 8) & 0xFFFFFF; }
  // Only for opcodes with an AETH / ImmDt (info->aeth_offset / imm_offset != 0).
  Aeth aeth() const {
    const uint32_t w = get_be32(bth + info->aeth_offset);
    return Aeth{static_cast<uint8_t>(w >> 24), w & 0xFFFFFF};
  }
  uint32_t imm() const { return get_be32(bth + info->imm_offset); }
};

// The RoceHeader of a view (what parse_frame() would have decoded).
void decode_roce_header(const RoceView& view, RoceHeader& out);

// Validates a whole Ethernet frame (without FCS; trailing bytes after the IP
// total length, such as Ethernet minimum-size padding, are ignored) and
// decodes it into `out`. `out` is only meaningful when kNone is returned, or
// kOpcodeUnsupported: an RC opcode (0x00-0x1F) this stack does not implement (reserved, or
// newer: FLUSH, ATOMIC_WRITE) in an otherwise valid packet (ICRC, TVer, P_Key). Then the BTH,
// the address and the bytes after the BTH (as payload) are set, with the opcode's invalid
// OpcodeInfo, so that a responder can answer it at its expected PSN with NAK Invalid Request
// (IBTA 9.7.5.1.5), as rxe does. The same holds for the view and parse_roce variants below.
DropReason parse_frame(std::span<const uint8_t> frame, const ParseOptions& opt, ParsedFrame& out);

// For callers that already demultiplexed Ethernet/IP/UDP: validates and
// decodes `udp_payload` (BTH .. ICRC, exactly the UDP payload) into out.hdr and
// out.payload; out.addr is left untouched. The ICRC covers the IP and UDP
// headers, so when opt.verify_icrc is set `ip_udp_headers` must be the 28
// bytes of the IPv4 (no options) and UDP headers that carried it, or the 48
// bytes of the IPv6 and UDP headers (else kIcrc); without ICRC verification
// it may be empty.
DropReason parse_roce(std::span<const uint8_t> ip_udp_headers, std::span<const uint8_t> udp_payload,
                      const ParseOptions& opt, ParsedFrame& out);

// parse_frame() and parse_roce() with the same validation, but the packet
// is handed back as a RoceView: no RoceHeader or FrameAddr decode.
DropReason parse_frame(std::span<const uint8_t> frame, const ParseOptions& opt, RoceView& out);
DropReason parse_roce(std::span<const uint8_t> ip_udp_headers, std::span<const uint8_t> udp_payload,
                      const ParseOptions& opt, RoceView& out);

// The expected header of the frames one connected peer sends to one QP, for
// parse_frame(frame, RxExpect, view): every field the parser checks that never
// changes on such a connection is compared as four masked 16-byte words.
// IPv4: the Ethernet type and VLAN tag, version/IHL, ID, flags and fragment
// offset, TTL, protocol, addresses, UDP destination port, BTH TVer, P_Key
// and destination QP; the header checksum is finished from the precomputed
// sum of the fixed words. IPv6: the Ethernet type and VLAN tag, version,
// next header, addresses, UDP destination port, TVer, P_Key and destination
// QP (traffic class, flow label and hop limit are not checked by the parser,
// so they may change). A frame that differs anywhere takes the full parser,
// so the result (drop reason, view) is always exactly parse_frame(frame, opt,
// view) for the options it was made with. Make it once per connection.
struct RxExpect {
  // Frame bytes [word_at[i], word_at[i] + 16) as up to four words;
  // expect[i] is what (frame & mask[i]) must be. IPv4: three words, at 12,
  // 28 and ending at the end of the BTH (l2_bytes + 40); the fourth is not
  // compared. IPv6: four, at 12, 28, 44 and l2_bytes + 42 (UDP destination
  // port .. BTH DestQP), all before the end of the shortest frame's BTH.
  alignas(16) std::array<std::array<uint8_t, 16>, 4> expect{};
  alignas(16) std::array<std::array<uint8_t, 16>, 4> mask{};
  std::array<uint8_t, 4> word_at{12, 28, 44, 12};
  uint8_t l2_bytes = kEthHeaderBytes;
  bool ipv6 = false;    // the frames are IPv6 (else IPv4)
  bool usable = false;  // false: every frame takes the full parser
  // IPv4: the native-order one's-complement sum (unfolded) of the header
  // words 4..9 (ID, flags/fragment, TTL/protocol, addresses): with the first
  // four bytes and the checksum added, a valid header folds to 0xFFFF.
  uint64_t ip_fixed_sum = 0;
  ParseOptions opt;
};

// The expectation for frames built with `sender` (the peer's FrameAddr: its
// MACs, addresses, and for IPv4 its ID and TTL, as they arrive) to the QP
// `dest_qpn`, with the peer's P_Key `pkey`, parsed with `opt`.
RxExpect make_rx_expect(const FrameAddr& sender, uint32_t dest_qpn, const ParseOptions& opt,
                        uint16_t pkey = kDefaultPkey);

// parse_frame(frame, exp.opt, out), faster for frames that match exp.
DropReason parse_frame(std::span<const uint8_t> frame, const RxExpect& exp, RoceView& out);

// parse_frame(frame, exp, out) without its fallback, for callers whose full
// path checks more than parse_frame does (the engine: net::NetStack, then
// parse_roce). True when the frame matched exp (header words; IPv4 total and
// UDP lengths and the IPv4 checksum when exp.opt verifies it, or IPv6
// payload and UDP lengths): `why` is then
// parse_frame(frame, exp.opt, out)'s verdict, decided by the same code that
// parse_frame(frame, exp, out) runs for a match (out meaningful when kNone).
// False when it did not match: out and why are untouched, and only the full
// path can say what the frame is. parse_frame_if_matched returns the same
// as an optional (nullopt: not matched), in a register: no out-parameter
// for the callee to keep; parse_frame_matched is it, inline.
std::optional<DropReason> parse_frame_if_matched(std::span<const uint8_t> frame,
                                                 const RxExpect& exp, RoceView& out);
inline bool parse_frame_matched(std::span<const uint8_t> frame, const RxExpect& exp, RoceView& out,
                                DropReason& why) {
  const std::optional<DropReason> r = parse_frame_if_matched(frame, exp, out);
  if (r) why = *r;
  return r.has_value();
}

// Narrows exp: a frame matches only if also (frame[offset] & mask) == (value
// & mask). For a caller that checks a field parse_frame does not (a VLAN ID,
// a zero UDP checksum) and so wants frames that differ there to miss. Only
// removes frames from the matching ones, so parse_frame(frame, exp, out)
// keeps its result. False (exp unchanged) when no compared word covers
// `offset`; a requirement that contradicts one exp has makes it unusable.
bool rx_expect_require_byte(RxExpect& exp, size_t offset, uint8_t mask, uint8_t value);

// The PMTU rules alone (also applied by the parsers when pmtu_bytes != 0):
// payload <= pmtu, and first/middle packets carry exactly pmtu bytes.
DropReason check_payload_length(const OpcodeInfo& info, size_t payload_len_bytes,
                                uint32_t pmtu_bytes);

// P_Key match rule used by the parsers.
constexpr bool pkey_match(uint16_t a, uint16_t b) {
  return (a & 0x7FFF) != 0 && (a & 0x7FFF) == (b & 0x7FFF) && ((a | b) & 0x8000) != 0;
}

}  // namespace conduit::wire
