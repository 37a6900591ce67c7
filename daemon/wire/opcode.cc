#include "wire/opcode.h"

#include <array>

namespace conduit::wire {
namespace {

struct Layout {
  bool reth, aeth, imm, ieth, atomic_eth, atomic_ack_eth;
};

// Offsets follow the order the headers appear on the wire after the BTH:
// RETH/AtomicETH, then AETH, then AtomicAckETH, then ImmDt/IETH.
constexpr OpcodeInfo make(const char* name, uint32_t flags) {
  OpcodeInfo info{name, flags | kOpValid, 0, 0, 0, 0, 0, 0, 0};
  uint32_t off = kBthBytes;
  if (flags & kOpReth) {
    info.reth_offset = static_cast<uint8_t>(off);
    off += kRethBytes;
  }
  if (flags & kOpAtomicEth) {
    info.atomic_eth_offset = static_cast<uint8_t>(off);
    off += kAtomicEthBytes;
  }
  if (flags & kOpAeth) {
    info.aeth_offset = static_cast<uint8_t>(off);
    off += kAethBytes;
  }
  if (flags & kOpAtomicAckEth) {
    info.atomic_ack_eth_offset = static_cast<uint8_t>(off);
    off += kAtomicAckEthBytes;
  }
  if (flags & kOpImm) {
    info.imm_offset = static_cast<uint8_t>(off);
    off += kImmBytes;
  }
  if (flags & kOpIeth) {
    info.ieth_offset = static_cast<uint8_t>(off);
    off += kIethBytes;
  }
  if (flags & kOpCnp) off += kCnpReservedBytes;
  info.header_bytes = static_cast<uint8_t>(off);
  return info;
}

constexpr uint32_t kReqSend = kOpRequest | kOpSend | kOpPayload;
constexpr uint32_t kReqWrite = kOpRequest | kOpWrite | kOpPayload;
constexpr uint32_t kRespRead = kOpResponse | kOpRead | kOpPayload;

constexpr std::array<OpcodeInfo, 256> build_table() {
  std::array<OpcodeInfo, 256> t{};
  for (auto& e : t) e = OpcodeInfo{"unknown", 0, 0, 0, 0, 0, 0, 0, 0};
  auto set = [&t](Opcode op, const char* name, uint32_t flags) {
    t[static_cast<uint8_t>(op)] = make(name, flags);
  };
  set(Opcode::kSendFirst, "RC_SEND_FIRST", kReqSend | kOpFirst);
  set(Opcode::kSendMiddle, "RC_SEND_MIDDLE", kReqSend | kOpMiddle);
  set(Opcode::kSendLast, "RC_SEND_LAST", kReqSend | kOpLast);
  set(Opcode::kSendLastImm, "RC_SEND_LAST_WITH_IMMEDIATE", kReqSend | kOpLast | kOpImm);
  set(Opcode::kSendOnly, "RC_SEND_ONLY", kReqSend | kOpOnly);
  set(Opcode::kSendOnlyImm, "RC_SEND_ONLY_WITH_IMMEDIATE", kReqSend | kOpOnly | kOpImm);
  set(Opcode::kWriteFirst, "RC_RDMA_WRITE_FIRST", kReqWrite | kOpFirst | kOpReth);
  set(Opcode::kWriteMiddle, "RC_RDMA_WRITE_MIDDLE", kReqWrite | kOpMiddle);
  set(Opcode::kWriteLast, "RC_RDMA_WRITE_LAST", kReqWrite | kOpLast);
  set(Opcode::kWriteLastImm, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", kReqWrite | kOpLast | kOpImm);
  set(Opcode::kWriteOnly, "RC_RDMA_WRITE_ONLY", kReqWrite | kOpOnly | kOpReth);
  set(Opcode::kWriteOnlyImm, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
      kReqWrite | kOpOnly | kOpReth | kOpImm);
  set(Opcode::kReadRequest, "RC_RDMA_READ_REQUEST", kOpRequest | kOpRead | kOpOnly | kOpReth);
  set(Opcode::kReadResponseFirst, "RC_RDMA_READ_RESPONSE_FIRST", kRespRead | kOpFirst | kOpAeth);
  set(Opcode::kReadResponseMiddle, "RC_RDMA_READ_RESPONSE_MIDDLE", kRespRead | kOpMiddle);
  set(Opcode::kReadResponseLast, "RC_RDMA_READ_RESPONSE_LAST", kRespRead | kOpLast | kOpAeth);
  set(Opcode::kReadResponseOnly, "RC_RDMA_READ_RESPONSE_ONLY", kRespRead | kOpOnly | kOpAeth);
  set(Opcode::kAcknowledge, "RC_ACKNOWLEDGE", kOpResponse | kOpOnly | kOpAeth);
  set(Opcode::kAtomicAcknowledge, "RC_ATOMIC_ACKNOWLEDGE",
      kOpResponse | kOpOnly | kOpAeth | kOpAtomicAckEth);
  set(Opcode::kCompareSwap, "RC_COMPARE_SWAP", kOpRequest | kOpAtomic | kOpOnly | kOpAtomicEth);
  set(Opcode::kFetchAdd, "RC_FETCH_ADD", kOpRequest | kOpAtomic | kOpOnly | kOpAtomicEth);
  set(Opcode::kSendLastInvalidate, "RC_SEND_LAST_WITH_INVALIDATE", kReqSend | kOpLast | kOpIeth);
  set(Opcode::kSendOnlyInvalidate, "RC_SEND_ONLY_WITH_INVALIDATE", kReqSend | kOpOnly | kOpIeth);
  set(Opcode::kCnp, "CNP", kOpCnp);
  return t;
}

constexpr std::array<OpcodeInfo, 256> kTable = build_table();

static_assert(kTable[0x0B].header_bytes == kBthBytes + kRethBytes + kImmBytes);
static_assert(kTable[0x0B].imm_offset == kBthBytes + kRethBytes);
static_assert(kTable[0x12].header_bytes == kBthBytes + kAethBytes + kAtomicAckEthBytes);
static_assert(kTable[0x81].header_bytes == kBthBytes + kCnpReservedBytes);

}  // namespace

const std::array<OpcodeInfo, 256> detail::kOpcodeTable = kTable;

}  // namespace conduit::wire
