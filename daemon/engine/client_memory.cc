#include "engine/client_memory.h"

#include <algorithm>

namespace conduit::engine {

bool ClientMemory::add_mr(std::span<uint8_t> region, uint32_t lkey, uint32_t rkey, uint64_t iova,
                          uint64_t region_offset, uint64_t length, uint32_t access) {
  if (region_offset > region.size() || length > region.size() - region_offset) return false;
  if (iova + length < iova) return false;  // the iova range must not wrap
  if (find_lkey(lkey) != nullptr) return false;
  Mr mr;
  mr.lkey = lkey;
  mr.rkey = rkey;
  mr.iova = iova;
  mr.bytes = region.subspan(region_offset, length);
  mr.access = access;
  mr.client_mr = true;
  mr.bounds = shm::MrBounds{region_offset, length, access};
  mrs_.push_back(mr);
  bump_epoch();
  return true;
}

bool ClientMemory::add_local_buffer(uint32_t lkey, std::span<uint8_t> bytes) {
  if (find_lkey(lkey) != nullptr) return false;
  Mr mr;
  mr.lkey = lkey;
  mr.iova = reinterpret_cast<uintptr_t>(bytes.data());
  mr.bytes = bytes;
  mr.access = transport::kAccessLocalWrite;
  mrs_.push_back(mr);
  bump_epoch();
  return true;
}

bool ClientMemory::remove_mr(uint32_t lkey) {
  auto it = std::find_if(mrs_.begin(), mrs_.end(), [lkey](const Mr& m) { return m.lkey == lkey; });
  if (it == mrs_.end()) return false;
  mrs_.erase(it);
  bump_epoch();
  return true;
}

const ClientMemory::Mr* ClientMemory::find_lkey(uint32_t lkey) const {
  for (const Mr& m : mrs_) {
    if (m.lkey == lkey) return &m;
  }
  return nullptr;
}

transport::MrStatus ClientMemory::slice(const Mr& mr, uint64_t addr, uint32_t len_bytes,
                                        uint32_t access, std::span<uint8_t>& out) {
  if ((mr.access & access) != access) return transport::MrStatus::kAccessDenied;
  if (addr < mr.iova) return transport::MrStatus::kOutOfBounds;
  const uint64_t off = addr - mr.iova;
  if (off > mr.bytes.size() || len_bytes > mr.bytes.size() - off) {
    return transport::MrStatus::kOutOfBounds;
  }
  out = mr.bytes.subspan(off, len_bytes);
  return transport::MrStatus::kOk;
}

transport::MrStatus ClientMemory::lookup_local(uint32_t lkey, uint64_t addr, uint32_t len_bytes,
                                               uint32_t access, std::span<uint8_t>& out) {
  const Mr* mr = find_lkey(lkey);
  if (mr == nullptr) return transport::MrStatus::kBadKey;
  return slice(*mr, addr, len_bytes, access, out);
}

bool ClientMemory::local_view(uint32_t lkey, transport::MrView& view) {
  // lookup_local() is slice() of this MR: inside [iova, iova + size) and
  // (mr.access & access) == access, which for the local accesses a QP asks
  // for (none, or local write) is the view's rule.
  const Mr* mr = find_lkey(lkey);
  if (mr == nullptr) return false;
  view = transport::MrView{mr->iova, mr->bytes, mr->access};
  return true;
}

transport::MrStatus ClientMemory::lookup_remote(uint32_t rkey, uint64_t addr, uint32_t len_bytes,
                                                uint32_t access, std::span<uint8_t>& out) {
  for (const Mr& m : mrs_) {
    if (m.client_mr && m.rkey == rkey) return slice(m, addr, len_bytes, access, out);
  }
  return transport::MrStatus::kBadKey;
}

}  // namespace conduit::engine
