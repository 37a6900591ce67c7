// The property workload: N messages of skewed random sizes (0 B .. 1 MiB),
// mixing SEND, SEND with immediate, RDMA WRITE, WRITE with immediate and
// RDMA READ, from A to B. Checks every completion on both sides as it
// arrives: in order, exactly once, successful, right length and immediate,
// and the destination bytes' checksum equals the source's.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "link_sim.h"

namespace conduit::transport::sim {

struct WorkloadResult {
  uint64_t messages_completed = 0;
  uint64_t recv_completed = 0;
  uint64_t payload_bytes = 0;
  uint64_t sim_time_ns = 0;
  std::string first_error;  // empty when every check held
  double goodput_gbps() const {
    return sim_time_ns == 0 ? 0 : static_cast<double>(payload_bytes) * 8.0 / sim_time_ns;
  }
};

class MessageWorkload {
 public:
  static constexpr uint32_t kSlots = 32;  // outstanding WRs; 1 MiB buffer each
  static constexpr uint32_t kMaxMessageBytes = 1u << 20;
  static constexpr uint32_t kPoolBytes = 2u << 20;

  // Registers the regions on both endpoints (call before Sim::run).
  MessageWorkload(Sim& sim, uint64_t messages, uint64_t seed);

  void step();
  bool done() const {
    return !error_.empty() || (completed_ == messages_ && recv_expected_.empty());
  }
  WorkloadResult result() const;

 private:
  struct Msg {
    WrOpcode op;
    uint32_t len;
    uint32_t src_off;
    uint32_t imm;
    uint64_t checksum;
  };
  uint32_t pick_len();
  void post_next();
  void fail(std::string what);

  Sim& sim_;
  Rng rng_;
  uint64_t messages_;
  std::vector<Msg> msgs_;
  uint64_t posted_ = 0;
  uint64_t completed_ = 0;
  uint64_t recv_posted_ = 0;
  uint64_t recv_completed_ = 0;
  uint64_t payload_bytes_ = 0;
  std::deque<uint64_t> recv_expected_;  // message ids that consume a receive, in order
  std::string error_;
};

uint64_t checksum(const uint8_t* p, size_t n);

}  // namespace conduit::transport::sim
