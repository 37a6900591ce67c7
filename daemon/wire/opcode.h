// RoCEv2 / InfiniBand BTH opcodes and the per-opcode attribute table.
//
// As in rxe's opcode table, the receive path looks the opcode up once and then
// tests bits: which extension headers follow the BTH (and at what offset), and
// the packet's role (request/response, first/middle/last/only, payload, ImmDt).
#pragma once

#include <array>
#include <cstdint>

namespace conduit::wire {

// Reliable-connection opcodes (transport base 0x00), InfiniBand spec table 35.
enum class Opcode : uint8_t {
  kSendFirst = 0x00,
  kSendMiddle = 0x01,
  kSendLast = 0x02,
  kSendLastImm = 0x03,
  kSendOnly = 0x04,
  kSendOnlyImm = 0x05,
  kWriteFirst = 0x06,
  kWriteMiddle = 0x07,
  kWriteLast = 0x08,
  kWriteLastImm = 0x09,
  kWriteOnly = 0x0A,
  kWriteOnlyImm = 0x0B,
  kReadRequest = 0x0C,
  kReadResponseFirst = 0x0D,
  kReadResponseMiddle = 0x0E,
  kReadResponseLast = 0x0F,
  kReadResponseOnly = 0x10,
  kAcknowledge = 0x11,
  kAtomicAcknowledge = 0x12,
  kCompareSwap = 0x13,
  kFetchAdd = 0x14,
  kSendLastInvalidate = 0x16,
  kSendOnlyInvalidate = 0x17,
  // RoCEv2 congestion notification packet (Annex A17).
  kCnp = 0x81,
};

// Bits of OpcodeInfo::flags.
enum OpcodeFlag : uint32_t {
  kOpValid = 1u << 0,
  kOpRequest = 1u << 1,   // requester -> responder
  kOpResponse = 1u << 2,  // responder -> requester (ACK, READ response, atomic ACK)
  kOpFirst = 1u << 3,
  kOpMiddle = 1u << 4,
  kOpLast = 1u << 5,
  kOpOnly = kOpFirst | kOpLast,
  kOpPayload = 1u << 6,  // carries payload bytes (possibly zero of them)
  kOpReth = 1u << 7,
  kOpAeth = 1u << 8,
  kOpImm = 1u << 9,
  kOpIeth = 1u << 10,
  kOpAtomicEth = 1u << 11,
  kOpAtomicAckEth = 1u << 12,
  kOpSend = 1u << 13,
  kOpWrite = 1u << 14,
  kOpRead = 1u << 15,
  kOpAtomic = 1u << 16,
  kOpCnp = 1u << 17,
};

// Extension header sizes in bytes.
inline constexpr uint32_t kBthBytes = 12;
inline constexpr uint32_t kRethBytes = 16;
inline constexpr uint32_t kAethBytes = 4;
inline constexpr uint32_t kImmBytes = 4;
inline constexpr uint32_t kIethBytes = 4;
inline constexpr uint32_t kAtomicEthBytes = 28;
inline constexpr uint32_t kAtomicAckEthBytes = 8;
inline constexpr uint32_t kIcrcBytes = 4;
inline constexpr uint32_t kCnpReservedBytes = 16;

struct OpcodeInfo {
  const char* name;  // as in ib_pack.h, for logs and tshark cross-checks
  uint32_t flags;    // OpcodeFlag bits; 0 = not a supported RC/CNP opcode
  // Byte offset of each extension header from the start of the BTH (0 = absent).
  uint8_t reth_offset;
  uint8_t aeth_offset;
  uint8_t imm_offset;
  uint8_t ieth_offset;
  uint8_t atomic_eth_offset;
  uint8_t atomic_ack_eth_offset;
  // BTH plus all extension headers: where the payload starts.
  uint8_t header_bytes;

  constexpr bool has(uint32_t f) const { return (flags & f) == f; }
};

namespace detail {
// Indexed by opcode; defined (constexpr-built) in opcode.cc.
extern const std::array<OpcodeInfo, 256> kOpcodeTable;
}  // namespace detail

// The table entry for any byte value; entries of unknown opcodes have flags 0.
// Inline: every received and sent packet looks its opcode up.
inline const OpcodeInfo& opcode_info(uint8_t opcode) { return detail::kOpcodeTable[opcode]; }

// The RC transport's opcode range (BTH opcode bits 7-5 zero), implemented or not.
constexpr bool is_rc_opcode(uint8_t opcode) { return (opcode & 0xE0) == 0; }
inline const OpcodeInfo& opcode_info(Opcode op) { return opcode_info(static_cast<uint8_t>(op)); }

}  // namespace conduit::wire
