// Fuzz target: the daemon's view of a hostile client. The input is a script
// of operations a client could perform on its shared memory (write any ring
// index, write any slot bytes) interleaved with the daemon's reads
// (dequeue_burst, then validate the copies); or a region header with
// arbitrary corruptions fed to parse_header. Invariants checked:
//   - the reader never returns more than asked or more than the capacity, and
//     never touches memory outside the ring (ASan);
//   - a validated WR only resolves to ranges inside its MR and the arena;
//   - a header parse_header accepts describes rings and an arena that fit in
//     the region without overlapping.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "shm/region.h"
#include "shm/spsc_ring.h"
#include "shm/wr_validate.h"

using namespace conduit::shm;

namespace {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{u8()} << (8 * i);
    return v;
  }
  uint64_t u64() { return uint64_t{u32()} | (uint64_t{u32()} << 32); }
  void bytes(void* dst, size_t n) {
    auto* d = static_cast<uint8_t*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = u8();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

#define FUZZ_CHECK(cond)           \
  do {                             \
    if (!(cond)) __builtin_trap(); \
  } while (0)

// Arena [64 KiB, 64 KiB + 1 MiB); MRs 1..3 inside it, lkey 4 a (buggy) MR
// that pokes out of it, which validation must still refuse.
const ArenaBounds kArena{64 << 10, 1 << 20};
const MrBounds kMrs[] = {
    {64 << 10, 4096, kMrLocalWrite},
    {(64 << 10) + 8192, 65536, 0},
    {64 << 10, 1 << 20, kMrLocalWrite | kMrRemoteWrite | kMrRemoteRead},
    {(64 << 10) + (1 << 20) - 10, 4096, kMrLocalWrite},
};

const MrBounds* lookup(uint32_t lkey) { return lkey >= 1 && lkey <= 4 ? &kMrs[lkey - 1] : nullptr; }

void check_resolved(const ResolvedSge& r, uint32_t lkey) {
  const MrBounds* mr = lookup(lkey);
  FUZZ_CHECK(mr != nullptr);
  FUZZ_CHECK(r.region_offset >= mr->region_offset);
  FUZZ_CHECK(r.region_offset + r.length <= mr->region_offset + mr->length);
  FUZZ_CHECK(r.region_offset >= kArena.offset);
  FUZZ_CHECK(r.region_offset + r.length <= kArena.offset + kArena.size);
}

void validate(const conduit_shm_send_wr& wr) {
  ValidSendWr v;
  if (validate_send_wr(wr, WrLimits{}, kArena, lookup, &v) != CONDUIT_SHM_WR_OK) return;
  FUZZ_CHECK(v.total_len <= CONDUIT_SHM_MAX_MSG_BYTES);
  if (wr.flags & CONDUIT_SHM_SEND_INLINE) {
    FUZZ_CHECK(wr.inline_len <= CONDUIT_SHM_MAX_INLINE);
    return;
  }
  FUZZ_CHECK(wr.num_sge <= CONDUIT_SHM_MAX_SGE);
  for (uint32_t i = 0; i < wr.num_sge; ++i) check_resolved(v.sge[i], wr.u.sg_list[i].lkey);
}

void validate(const conduit_shm_recv_wr& wr) {
  ValidRecvWr v;
  if (validate_recv_wr(wr, WrLimits{}, kArena, lookup, &v) != CONDUIT_SHM_WR_OK) return;
  FUZZ_CHECK(v.num_sge <= CONDUIT_SHM_MAX_SGE);
  for (uint32_t i = 0; i < v.num_sge; ++i) {
    check_resolved(v.sge[i], wr.sg_list[i].lkey);
    FUZZ_CHECK(lookup(wr.sg_list[i].lkey)->access & kMrLocalWrite);
  }
}

// The client writes indices and slots; the engine drains and validates.
template <class T>
void run_ring(Input& in) {
  const uint32_t capacity = 1u << (in.u8() % 4);  // 1..8 slots
  const uint32_t start = in.u32();
  conduit_shm_ring_ctrl ctrl{};
  reset_ring(&ctrl, start);
  // Exactly capacity slots on the heap, so any stray access trips ASan.
  std::vector<T> slots(capacity);
  SpscConsumer<T> reader(&ctrl, slots.data(), capacity, start);
  T batch[40];
  uint32_t taken = 0;
  while (!in.empty()) {
    switch (in.u8() % 4) {
      case 0:
        ctrl.prod = in.u32();  // anything at all
        break;
      case 1:
        ctrl.prod += in.u8() % (2 * capacity + 1);  // plausible and implausible advances
        break;
      case 2:
        in.bytes(&slots[in.u8() % capacity], sizeof(T));
        break;
      default: {
        const uint32_t want = in.u8() % 40;
        const bool was_broken = reader.broken();
        const uint32_t got = reader.dequeue_burst(batch, want);
        FUZZ_CHECK(got <= want && got <= capacity);
        FUZZ_CHECK(!was_broken || got == 0);
        taken += got;
        FUZZ_CHECK(reader.cons_index() == start + taken);
        for (uint32_t i = 0; i < got; ++i) validate(batch[i]);
        break;
      }
    }
  }
}

void run_header(Input& in) {
  RegionConfig cfg;
  cfg.max_qps = 1 + in.u8() % 64;
  cfg.max_cqs = 1 + in.u8() % 64;
  cfg.sq_depth = 1u << (in.u8() % 18);
  cfg.rq_depth = 1u << (in.u8() % 18);
  cfg.cq_depth = 1u << (in.u8() % 18);
  cfg.arena_bytes = in.u32();
  const uint32_t page = (in.u8() & 1) ? (2u << 20) : 4096u;
  RegionLayout layout;
  if (compute_layout(cfg, page, &layout) != 0) return;
  conduit_shm_header hdr = make_header(layout);
  // Corrupt some bytes of the interesting part of the header.
  auto* raw = reinterpret_cast<uint8_t*>(&hdr);
  for (uint32_t k = in.u8() % 8; k > 0; --k) raw[in.u8() % 112] ^= in.u8();
  uint64_t file_size = layout.region_size;
  if (in.u8() % 4 == 0) file_size = in.u64();
  RegionLayout got;
  if (parse_header(hdr, file_size, &got) != 0) return;
  FUZZ_CHECK(got.region_size == file_size);
  FUZZ_CHECK(got.arena_offset + got.arena_size == got.region_size);
  for (uint32_t i = 0; i < got.ring_count; ++i) {
    const conduit_shm_ring_desc d = got.ring_desc(i);
    FUZZ_CHECK(d.ctrl_offset >= got.rings_offset);
    FUZZ_CHECK(d.slots_offset + uint64_t{d.capacity} * d.entry_size <= got.arena_offset);
  }
  FUZZ_CHECK(got.doorbell_offset + 128ull * got.doorbell_count <= got.rings_offset);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  switch (in.u8() % 3) {
    case 0:
      run_ring<conduit_shm_send_wr>(in);
      break;
    case 1:
      run_ring<conduit_shm_recv_wr>(in);
      break;
    default:
      run_header(in);
      break;
  }
  return 0;
}
