// The memory of one QP, laid out the same on both sides so a peer names a slot
// by its index: [tx slot 0 .. tx_slots-1][rx slot 0 .. rx_slots-1], each slot
// as large as the largest message (rounded up to 64 B). Without --check one
// slot each (every message reuses it, as perftest does); with --check enough
// slots that no buffer is rewritten while a message using it is in flight.
#pragma once

#include <cstdint>

namespace conduit::perf {

// The MR layout both sides derive from the same parameters.
struct BufferLayout {
  uint64_t slot_bytes = 0;
  uint32_t tx_slots = 1;
  uint32_t rx_slots = 1;
  uint64_t tx_offset(uint32_t slot) const { return slot * slot_bytes; }
  uint64_t rx_offset(uint32_t slot) const { return (tx_slots + slot) * slot_bytes; }
  uint64_t mr_bytes() const { return (uint64_t{tx_slots} + rx_slots) * slot_bytes; }
};

// check: slots for in-flight messages; budget_bytes bounds all QPs' MRs together.
BufferLayout make_layout(uint64_t max_size_bytes, uint32_t qps, uint32_t tx_depth,
                         uint32_t rx_depth, bool check, uint64_t budget_bytes);

}  // namespace conduit::perf
