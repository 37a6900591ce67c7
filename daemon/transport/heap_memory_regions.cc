#include "transport/heap_memory_regions.h"

namespace conduit::transport {

HeapMemoryRegions::Region& HeapMemoryRegions::add(uint64_t base, uint32_t len_bytes,
                                                  uint32_t access) {
  const auto index = static_cast<uint32_t>(regions_.size());
  regions_.push_back(Region{0x100 + index, 0x8000 + index, base, access,
                            std::vector<uint8_t>(len_bytes, 0), false});
  bump_epoch();
  return regions_.back();
}

void HeapMemoryRegions::remove(size_t index) {
  regions_[index].removed = true;
  bump_epoch();
}

MrStatus HeapMemoryRegions::check(Region* r, uint64_t addr, uint32_t len_bytes, uint32_t access,
                                  std::span<uint8_t>& out) {
  if (r == nullptr || r->removed) return MrStatus::kBadKey;
  // Overflow-safe: compare offsets, never addr + len.
  if (addr < r->base) return MrStatus::kOutOfBounds;
  const uint64_t off = addr - r->base;
  if (off > r->bytes.size() || len_bytes > r->bytes.size() - off) return MrStatus::kOutOfBounds;
  if ((r->access & access) != access) return MrStatus::kAccessDenied;
  out = std::span<uint8_t>(r->bytes.data() + off, len_bytes);
  return MrStatus::kOk;
}

MrStatus HeapMemoryRegions::lookup_local(uint32_t lkey, uint64_t addr, uint32_t len_bytes,
                                         uint32_t access, std::span<uint8_t>& out) {
  ++local_lookups_;
  // Local access is always readable; only local write is a flag.
  Region* r = nullptr;
  if (lkey >= 0x100 && lkey - 0x100 < regions_.size()) r = &regions_[lkey - 0x100];
  return check(r, addr, len_bytes, access & kAccessLocalWrite, out);
}

bool HeapMemoryRegions::local_view(uint32_t lkey, MrView& view) {
  if (lkey < 0x100 || lkey - 0x100 >= regions_.size()) return false;
  Region& r = regions_[lkey - 0x100];
  if (r.removed) return false;
  view = MrView{r.base, std::span<uint8_t>(r.bytes), r.access};
  return true;
}

MrStatus HeapMemoryRegions::lookup_remote(uint32_t rkey, uint64_t addr, uint32_t len_bytes,
                                          uint32_t access, std::span<uint8_t>& out) {
  Region* r = nullptr;
  if (rkey >= 0x8000 && rkey - 0x8000 < regions_.size()) r = &regions_[rkey - 0x8000];
  return check(r, addr, len_bytes,
               access & (kAccessRemoteRead | kAccessRemoteWrite | kAccessRemoteAtomic), out);
}

}  // namespace conduit::transport
