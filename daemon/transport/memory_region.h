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
  kAccessRemoteAtomic = 1u << 3,  // the peer's compare-and-swap / fetch-and-add
};

enum class MrStatus : uint8_t {
  kOk,
  kBadKey,        // no region with this key
  kOutOfBounds,   // [addr, addr + len) not inside the region
  kAccessDenied,  // the region does not grant the requested access
};

// One registered region as a whole, for callers that cache key lookups.
struct MrView {
  uint64_t base = 0;         // address (iova) of bytes[0]
  std::span<uint8_t> bytes;  // the whole region
  uint32_t access = 0;       // MrAccess bits
};

class MemoryRegions {
 public:
  virtual ~MemoryRegions() = default;

  // Optional, for callers that cache local-key lookups (a QP keeps the last
  // region its SGEs named). An implementation that returns true promises
  // that, while epoch() keeps its value, lookup_local(lkey, addr, len, access)
  // returns kOk with view.bytes[addr - view.base, +len) exactly when
  // [addr, addr + len) lies inside the view and view.access grants
  // (access & kAccessLocalWrite). The default caches nothing.
  virtual bool local_view(uint32_t lkey, MrView& view) {
    (void)lkey;
    (void)view;
    return false;
  }
  // Changes whenever a region is added, removed or changed; a cached MrView
  // from another epoch must not be used.
  uint64_t epoch() const { return epoch_; }

  // A local key (from an SGE) or a remote key (from a RETH). The span stays
  // valid while the region is registered; the engine must flush every QP that
  // references a region before it unmaps the region's memory.
  virtual MrStatus lookup_local(uint32_t lkey, uint64_t addr, uint32_t len_bytes, uint32_t access,
                                std::span<uint8_t>& out) = 0;
  virtual MrStatus lookup_remote(uint32_t rkey, uint64_t addr, uint32_t len_bytes, uint32_t access,
                                 std::span<uint8_t>& out) = 0;

 protected:
  void bump_epoch() { ++epoch_; }

 private:
  uint64_t epoch_ = 0;
};

}  // namespace conduit::transport
