// Memory regions as the transport sees them: an interface it calls to turn a
// (key, address, length, access) tuple into bytes it may read or write.
//
// The transport knows nothing of where the bytes live (shared memory, a test
// buffer); the engine implements MemoryRegions over the client's registered
// memory. Addresses are the region's own address space (verbs' iova): a region
// covers [base, base + length). Lookups are on the datapath: no allocation, no
// exceptions. Single-threaded: called only from the engine thread that owns
// the QP.
#pragma once

#include <cstdint>
#include <span>

namespace conduit::transport {

// Access flags, as in ibv_access_flags (same bit values).
enum MrAccess : uint32_t {
  kAccessLocalWrite = 1u << 0,
  kAccessRemoteWrite = 1u << 1,
  kAccessRemoteRead = 1u << 2,
};

enum class MrStatus : uint8_t {
  kOk,
  kBadKey,        // no region with this key
  kOutOfBounds,   // [addr, addr + len) not inside the region
  kAccessDenied,  // the region does not grant the requested access
};

class MemoryRegions {
 public:
  virtual ~MemoryRegions() = default;

  // A local key (from an SGE) or a remote key (from a RETH). The span stays
  // valid while the region is registered; the engine must flush every QP that
  // references a region before it unmaps the region's memory.
  virtual MrStatus lookup_local(uint32_t lkey, uint64_t addr, uint32_t len_bytes, uint32_t access,
                                std::span<uint8_t>& out) = 0;
  virtual MrStatus lookup_remote(uint32_t rkey, uint64_t addr, uint32_t len_bytes, uint32_t access,
                                 std::span<uint8_t>& out) = 0;
};

}  // namespace conduit::transport
