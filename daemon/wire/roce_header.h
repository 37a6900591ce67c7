// The transport-level content of a RoCEv2 packet: BTH and extension headers,
// decoded into host-order fields. The transport reads these on receive and
// fills them on send; wire/frame.h turns them into bytes and back.
//
// Which of the extension members are meaningful is given by the opcode's
// OpcodeInfo flags (kOpReth, kOpAeth, kOpImm, ...); the others are ignored on
// build and left zero on parse.
#pragma once

#include <cstdint>

#include "wire/opcode.h"

namespace conduit::wire {

inline constexpr uint16_t kDefaultPkey = 0xFFFF;
inline constexpr uint16_t kRoceUdpPort = 4791;

struct Bth {
  uint8_t opcode = 0;
  bool solicited = false;  // SE
  bool mig_req = false;    // M
  uint8_t pad_count = 0;   // 0..3; the frame builder sets it from the payload length
  uint16_t pkey = kDefaultPkey;
  bool fecn = false;
  bool becn = false;
  uint32_t dest_qp = 0;  // 24 bits
  bool ack_req = false;  // A
  uint32_t psn = 0;      // 24 bits
};

struct Reth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_len = 0;
};

// AETH syndrome: bits 6:5 type, bits 4:0 value (credit count, RNR timer or NAK code).
enum class AethType : uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };

enum class NakCode : uint8_t {
  kPsnSequenceError = 0,
  kInvalidRequest = 1,
  kRemoteAccessError = 2,
  kRemoteOperationalError = 3,
  kInvalidRdRequest = 4,
};

inline constexpr uint8_t kAethCreditsUnlimited = 0x1F;

struct Aeth {
  uint8_t syndrome = 0;
  uint32_t msn = 0;  // 24 bits: the responder's count of completed messages

  constexpr AethType type() const { return static_cast<AethType>((syndrome >> 5) & 3); }
  constexpr uint8_t value() const { return syndrome & 0x1F; }

  static constexpr Aeth ack(uint32_t msn, uint8_t credits = kAethCreditsUnlimited) {
    return Aeth{static_cast<uint8_t>(credits & 0x1F), msn & 0xFFFFFF};
  }
  // rnr_timer is the 5-bit IB_RNR_TIMER code (0 = 655.36 ms, 1 = 0.01 ms, ...).
  static constexpr Aeth rnr_nak(uint32_t msn, uint8_t rnr_timer) {
    return Aeth{static_cast<uint8_t>(0x20 | (rnr_timer & 0x1F)), msn & 0xFFFFFF};
  }
  static constexpr Aeth nak(uint32_t msn, NakCode code) {
    return Aeth{static_cast<uint8_t>(0x60 | static_cast<uint8_t>(code)), msn & 0xFFFFFF};
  }
};

struct AtomicEth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint64_t swap_add = 0;
  uint64_t compare = 0;
};

struct RoceHeader {
  Bth bth;
  Reth reth;
  Aeth aeth;
  // ImmDt is opaque to the transport: the four wire bytes read as a big-endian
  // integer, handed to the application unchanged.
  uint32_t imm = 0;
  uint32_t ieth_rkey = 0;
  AtomicEth atomic;
  uint64_t atomic_ack_orig = 0;

  const OpcodeInfo& info() const { return opcode_info(bth.opcode); }
};

}  // namespace conduit::wire
