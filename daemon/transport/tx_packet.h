// One packet the QP wants sent: the decoded RoCE header plus a gather list of
// payload bytes. wire::build_frame turns it into a frame.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "transport/work_request.h"
#include "wire/roce_header.h"

namespace conduit::transport {

struct TxPacket {
  // The BTH and the extension headers hdr.bth.opcode carries are set; the
  // other extension members are unspecified (build_frame ignores them).
  wire::RoceHeader hdr;
  // Payload pieces in order; they point into registered memory and stay valid
  // until the caller's next call into the QP (build the frame before that).
  // At most kMaxSge pieces (selective repeat: the placement header + kMaxSge - 1).
  std::array<std::span<const uint8_t>, kMaxSge> payload{};
  uint8_t payload_parts = 0;
  uint32_t payload_bytes = 0;
};

}  // namespace conduit::transport
