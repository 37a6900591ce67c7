#include "buffer_layout.h"

#include <algorithm>

namespace conduit::perf {

BufferLayout make_layout(uint64_t max_size_bytes, uint32_t qps, uint32_t tx_depth,
                         uint32_t rx_depth, bool check, uint64_t budget_bytes) {
  BufferLayout l;
  l.slot_bytes = (std::max<uint64_t>(max_size_bytes, 1) + 63) & ~uint64_t{63};
  if (!check) return l;
  const uint64_t per_qp = budget_bytes / std::max<uint32_t>(qps, 1);
  const uint64_t slots = per_qp / 2 / l.slot_bytes;
  l.tx_slots = static_cast<uint32_t>(std::clamp<uint64_t>(slots, 1, tx_depth));
  l.rx_slots = static_cast<uint32_t>(std::clamp<uint64_t>(slots, 1, rx_depth));
  return l;
}

}  // namespace conduit::perf
