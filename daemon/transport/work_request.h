// Work requests posted to a QP and the completions it returns, verbs-like.
//
// A work request names memory by (lkey, addr, length) scatter-gather entries;
// the QP resolves them through MemoryRegions when the request is posted, so a
// bad SGE is refused at post time. All types are trivially copyable and sized
// at compile time: posting and completing never allocate.
#pragma once

#include <array>
#include <cstdint>

namespace conduit::transport {

inline constexpr uint32_t kMaxSge = 4;

struct Sge {
  uint64_t addr = 0;  // in the region's address space
  uint32_t len_bytes = 0;
  uint32_t lkey = 0;
};

// kCmpSwap / kFetchAdd: the 8-byte atomics of IB (compare and swap, fetch and
// add) on an 8-byte aligned remote address; the original value lands in the one
// 8-byte local SGE.
enum class WrOpcode : uint8_t { kSend, kSendImm, kWrite, kWriteImm, kRead, kCmpSwap, kFetchAdd };

// Completed by the responder's answer (READ responses, an atomic ACK), not by an
// ACK; these count against max_rd_atomic and take their PSNs per response.
constexpr bool expects_response(WrOpcode op) { return op >= WrOpcode::kRead; }
constexpr bool is_atomic(WrOpcode op) {
  return op == WrOpcode::kCmpSwap || op == WrOpcode::kFetchAdd;
}
inline constexpr uint32_t kAtomicBytes = 8;

struct SendWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  bool signaled = true;      // unsignaled WRs complete silently on success
  bool solicited = false;    // BTH SE on the last packet
  uint32_t imm = 0;          // kSendImm / kWriteImm: ImmDt, opaque
  uint64_t remote_addr = 0;  // kWrite*, kRead, atomics
  uint32_t rkey = 0;         // kWrite*, kRead, atomics
  uint64_t compare_add = 0;  // kCmpSwap: the value compared; kFetchAdd: the value added
  uint64_t swap = 0;         // kCmpSwap: the value stored when the compare matched
  std::array<Sge, kMaxSge> sge{};
  uint8_t num_sge = 0;
};

struct RecvWr {
  uint64_t wr_id = 0;
  std::array<Sge, kMaxSge> sge{};
  uint8_t num_sge = 0;
};

// Completion status, named after ibv_wc_status.
enum class WcStatus : uint8_t {
  kSuccess,
  kLocalLengthError,      // an incoming SEND overflowed the receive buffers
  kLocalProtectionError,  // an SGE could not be resolved when it was used
  kWrFlushError,          // the QP entered ERR with this WR outstanding
  kBadResponse,           // the responder answered with something impossible
  kRemoteInvalidRequest,  // NAK invalid request
  kRemoteAccessError,     // NAK remote access error
  kRemoteOperationError,  // NAK remote operational error
  kRetryExceeded,         // retry_cnt exhausted (timeouts, sequence NAKs)
  kRnrRetryExceeded,      // rnr_retry exhausted
};

enum class WcOpcode : uint8_t { kSend, kWrite, kRead, kRecv, kRecvWriteImm, kCmpSwap, kFetchAdd };

struct Completion {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  bool has_imm = false;
  uint32_t imm = 0;        // valid when has_imm
  uint32_t len_bytes = 0;  // received bytes (kRecv*), or the READ/WRITE/SEND length
};

const char* wc_status_name(WcStatus s);

}  // namespace conduit::transport
