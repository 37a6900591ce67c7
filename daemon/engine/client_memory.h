// A client's registered memory as the transport sees it (MemoryRegions).
//
// One instance per client: a QP only ever resolves keys of its own client, so
// one client's rkey can never reach another client's memory. Keys come from
// the control thread (kAddMr); addresses are the MR's iova space, as verbs
// peers use them in RETHs. Besides client MRs, the engine registers small
// daemon-owned buffers (inline send data) under local-only keys: they are
// never reachable through an rkey.
//
// Thread role: engine thread only. Lookups are on the datapath: a flat
// vector scan over a client's few MRs, no allocation (and the QPs skip it
// for the key they used last, through local_view).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "shm/wr_validate.h"
#include "transport/memory_region.h"

namespace conduit::engine {

class ClientMemory final : public transport::MemoryRegions {
 public:
  struct Mr {
    uint32_t lkey = 0;
    uint32_t rkey = 0;  // 0 for local-only buffers
    uint64_t iova = 0;
    std::span<uint8_t> bytes;
    uint32_t access = 0;     // transport::MrAccess bits
    bool client_mr = false;  // a client MR (false: a daemon buffer, local key only)
    shm::MrBounds bounds;    // the same MR as the shm validators see it
  };

  // A client MR: bytes [region_offset, +length) of the client's region.
  // Returns false if the range is outside `region` or the key is in use.
  bool add_mr(std::span<uint8_t> region, uint32_t lkey, uint32_t rkey, uint64_t iova,
              uint64_t region_offset, uint64_t length, uint32_t access);
  // A daemon-owned buffer, local key only, iova = its own address.
  bool add_local_buffer(uint32_t lkey, std::span<uint8_t> bytes);
  bool remove_mr(uint32_t lkey);
  size_t size() const { return mrs_.size(); }

  // Client MR by lkey, for validating work requests (nullptr if unknown).
  const Mr* find_lkey(uint32_t lkey) const;
  // The shm validators' view of a client MR; nullptr for unknown keys and for
  // daemon buffers (a client must not name those in an SGE).
  const shm::MrBounds* client_bounds(uint32_t lkey) const {
    const Mr* mr = find_lkey(lkey);
    return mr != nullptr && mr->client_mr ? &mr->bounds : nullptr;
  }

  transport::MrStatus lookup_local(uint32_t lkey, uint64_t addr, uint32_t len_bytes,
                                   uint32_t access, std::span<uint8_t>& out) override;
  transport::MrStatus lookup_remote(uint32_t rkey, uint64_t addr, uint32_t len_bytes,
                                    uint32_t access, std::span<uint8_t>& out) override;
  // The QPs' cache of the last local key (MemoryRegions::local_view): every
  // add_mr, add_local_buffer and remove_mr changes epoch().
  bool local_view(uint32_t lkey, transport::MrView& view) override;

 private:
  static transport::MrStatus slice(const Mr& mr, uint64_t addr, uint32_t len_bytes, uint32_t access,
                                   std::span<uint8_t>& out);
  std::vector<Mr> mrs_;
};

}  // namespace conduit::engine
