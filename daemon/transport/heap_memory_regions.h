// MemoryRegions over heap buffers: for tests, the simulator, benchmarks and
// fuzz targets. Not for the engine (which maps client shared memory).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "transport/memory_region.h"

namespace conduit::transport {

class HeapMemoryRegions final : public MemoryRegions {
 public:
  struct Region {
    uint32_t lkey;
    uint32_t rkey;
    uint64_t base;
    uint32_t access;
    std::vector<uint8_t> bytes;
    bool removed = false;  // deregistered: its keys no longer resolve
  };

  // Registers a zero-filled region of len_bytes at iova `base`. Keys are
  // assigned here: lkey = 0x100 + index, rkey = 0x8000 + index.
  Region& add(uint64_t base, uint32_t len_bytes, uint32_t access);
  // Deregisters region `index` (ClientMemory::remove_mr's counterpart): its keys stop
  // resolving; its bytes stay readable through region() so tests can see them.
  void remove(size_t index);
  // For reading and writing a region's bytes. Changing its key, base,
  // access or size after registration is not supported (cached views).
  Region& region(size_t index) { return regions_[index]; }
  size_t size() const { return regions_.size(); }
  // lookup_local() calls so far (tests: how often a QP resolves SGEs again).
  uint64_t local_lookups() const { return local_lookups_; }

  MrStatus lookup_local(uint32_t lkey, uint64_t addr, uint32_t len_bytes, uint32_t access,
                        std::span<uint8_t>& out) override;
  MrStatus lookup_remote(uint32_t rkey, uint64_t addr, uint32_t len_bytes, uint32_t access,
                         std::span<uint8_t>& out) override;
  bool local_view(uint32_t lkey, MrView& view) override;

 private:
  MrStatus check(Region* r, uint64_t addr, uint32_t len_bytes, uint32_t access,
                 std::span<uint8_t>& out);
  std::vector<Region> regions_;
  uint64_t local_lookups_ = 0;
};

}  // namespace conduit::transport
