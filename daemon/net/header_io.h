// Copy a wire header out of (or into) a frame at a byte offset.
//
// Frames come from the NIC (or a fuzzer) at any alignment, so headers are
// copied, never cast in place: no aliasing or alignment UB, and the copy is
// what gets validated. The compilers turn these into a few moves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <type_traits>

namespace conduit::net {

// The header of type H at `offset`, or nullopt when the frame is too short.
template <typename H>
std::optional<H> load_header(std::span<const uint8_t> frame, size_t offset) {
  static_assert(std::is_trivially_copyable_v<H>);
  if (offset > frame.size() || frame.size() - offset < sizeof(H)) return std::nullopt;
  H h;
  std::memcpy(&h, frame.data() + offset, sizeof(H));
  return h;
}

// Writes h at `offset`; false (and nothing written) when it does not fit.
template <typename H>
bool store_header(std::span<uint8_t> frame, size_t offset, const H& h) {
  static_assert(std::is_trivially_copyable_v<H>);
  if (offset > frame.size() || frame.size() - offset < sizeof(H)) return false;
  std::memcpy(frame.data() + offset, &h, sizeof(H));
  return true;
}

}  // namespace conduit::net
