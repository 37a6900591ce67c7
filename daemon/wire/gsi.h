// RoCE v2 packets of the General Services Interface: UD SEND_ONLY packets to
// and from QP 1 that carry one 256-byte MAD (the IB connection manager's
// messages, cm/ib_cm_mad.h). conduit has no UD QPs; this is the only UD
// traffic it sends or accepts.
//
//   BTH (12): opcode 0x64, SE 0, M 0, pad 0, version 0, P_Key 0xFFFF,
//             DestQP 1, A 0, PSN
//   DETH (8): Q_Key 0x80010000, reserved, source QP 1
//   MAD (256), then the ICRC over the IPv4 or IPv6 datagram (icrc.h)
//
// Pure: standard library only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace conduit::wire {

inline constexpr uint8_t kOpUdSendOnly = 0x64;
inline constexpr uint32_t kGsiQpn = 1;
inline constexpr uint32_t kGsiQkeyValue = 0x80010000;
inline constexpr size_t kDethBytes = 8;
inline constexpr size_t kGsiMadBytes = 256;
// BTH + DETH + MAD: the UDP payload before the ICRC.
inline constexpr size_t kGsiPacketBytes = 12 + kDethBytes + kGsiMadBytes;

enum class GsiDrop : uint8_t {
  kNone = 0,
  kTooShort,  // less than BTH + DETH + 256 bytes + ICRC
  kIcrc,      // the ICRC does not match
  kHeader,    // not UD SEND_ONLY to QP 1, a BTH version or P_Key we do not use
  kQkey,      // the DETH's Q_Key is not the GSI's
};
const char* gsi_drop_name(GsiDrop d);

// ip_udp: the IPv4 (no options, 28 bytes with UDP) or IPv6 (no extension
// headers, 48 bytes with UDP) and UDP header the packet came in, told apart by
// the version nibble; payload: the UDP payload. On kNone, mad is its 256-byte MAD and
// src_qp the DETH's source QP.
GsiDrop parse_gsi(std::span<const uint8_t> ip_udp, std::span<const uint8_t> payload,
                  std::span<const uint8_t>& mad, uint32_t& src_qp);

// Writes BTH + DETH + MAD (kGsiPacketBytes) to out, for the peer's QP 1.
void write_gsi_packet(uint8_t* out, uint32_t psn, const uint8_t* mad);

// Stores the ICRC after a GSI packet: ip points at the IPv4 or IPv6 header
// (its version nibble written), followed by the UDP header and
// kGsiPacketBytes; the 4 ICRC bytes go right after.
void finish_gsi_icrc(uint8_t* ip);

}  // namespace conduit::wire
