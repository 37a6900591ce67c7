// One client's shared-memory region: layout computation, creation (daemon)
// and attachment (client). The byte layout is documented in layout.h.
//
// Ownership: a Region owns its memfd and its mapping; both are released by
// the destructor. Move-only. Errors are negative errno values:
//   -EINVAL   bad config (depth not a power of two, zero or too many slots)
//   -EOVERFLOW  the layout does not fit in 64 bits / the config limits
//   -EPROTO   attach: the region is not a conduit region (magic, version,
//             sizes or offsets inconsistent with the file)
//   -EPERM    attach: the memfd is not sealed against grow/shrink
//   others    from memfd_create, ftruncate, fcntl, mmap, fstat
//
// Thread roles: the control thread creates the region and reset_*()s ring
// slots while no one uses them; the engine and the client then only touch
// rings through SpscProducer/SpscConsumer obtained from the ring views.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shm/entries.h"
#include "shm/layout.h"
#include "shm/spsc_ring.h"

namespace conduit::shm {

// With hugetlb, a client can punch a hole (fallocate) into its own region;
// the next daemon touch of that page needs a fresh huge page and can fault
// with SIGBUS when the pool is empty (not verified by a test here). Plain
// memfd pages just come back zeroed. kNever avoids the question.
enum class HugePages : uint8_t {
  kAuto,   // hugetlb memfd when huge pages can be reserved, plain otherwise
  kNever,  // plain memfd
  kAlways  // hugetlb or fail
};

// Chosen by the daemon from the client's quotas.
struct RegionConfig {
  uint32_t max_qps = 16;
  uint32_t max_cqs = 16;
  uint32_t sq_depth = 256;  // power of two
  uint32_t rq_depth = 256;  // power of two
  uint32_t cq_depth = 512;  // power of two
  uint64_t arena_bytes = 64ull << 20;
  HugePages huge_pages = HugePages::kAuto;
  uint32_t ring_start_index = 0;        // initial prod == cons of every ring (tests use ~2^32)
  const char* name = "conduit-region";  // memfd name, shows in /proc/PID/fd
};

// Every offset and size of a region, computed from a RegionConfig. The daemon
// keeps this private copy and never trusts the header in shared memory.
struct RegionLayout {
  uint64_t region_size = 0;
  uint32_t page_size = 0;
  uint32_t flags = 0;
  uint32_t max_qps = 0;
  uint32_t max_cqs = 0;
  uint32_t sq_depth = 0;
  uint32_t rq_depth = 0;
  uint32_t cq_depth = 0;
  uint32_t ring_count = 0;
  uint32_t doorbell_count = 0;
  uint64_t ring_table_offset = 0;
  uint64_t doorbell_offset = 0;
  uint64_t rings_offset = 0;
  uint64_t arena_offset = 0;
  uint64_t arena_size = 0;

  uint32_t sq_ring(uint32_t qp_slot) const { return 2 * qp_slot; }
  uint32_t rq_ring(uint32_t qp_slot) const { return 2 * qp_slot + 1; }
  uint32_t cq_ring(uint32_t cq_slot) const { return 2 * max_qps + cq_slot; }
  // Descriptor of ring i (i < ring_count), computed, not read from shm.
  conduit_shm_ring_desc ring_desc(uint32_t ring) const;
  // Doorbell line of the engine (0) and of CQ slot c (1 + c).
  uint64_t engine_wakeup_offset() const { return doorbell_offset; }
  uint64_t cq_wakeup_offset(uint32_t cq_slot) const {
    return doorbell_offset + uint64_t{CONDUIT_SHM_INDEX_LINE_BYTES} * (1 + uint64_t{cq_slot});
  }
};

// Pure: computes the layout for cfg with the given page size (4096 or the
// huge page size). 0 or -EINVAL / -EOVERFLOW.
int compute_layout(const RegionConfig& cfg, uint32_t page_size, RegionLayout* out);

// Pure: the header that describes `layout` (what create() writes at offset 0).
conduit_shm_header make_header(const RegionLayout& layout);

// Pure: checks a header read from a region of file_size bytes and fills the
// layout it describes. 0 or -EPROTO. Used by attach() and the fuzzer.
int parse_header(const conduit_shm_header& hdr, uint64_t file_size, RegionLayout* out);

// A typed view of one ring inside a mapped region.
template <class T>
struct RingView {
  conduit_shm_ring_ctrl* ctrl = nullptr;
  T* slots = nullptr;
  uint32_t capacity = 0;

  SpscProducer<T> producer(uint32_t start_index) const {
    return SpscProducer<T>(ctrl, slots, capacity, start_index);
  }
  SpscConsumer<T> consumer(uint32_t start_index) const {
    return SpscConsumer<T>(ctrl, slots, capacity, start_index);
  }
};

class Region {
 public:
  Region() = default;
  ~Region();
  Region(Region&& other) noexcept;
  Region& operator=(Region&& other) noexcept;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  // Daemon: memfd (hugetlb per cfg.huge_pages), sized, sealed with
  // F_SEAL_GROW|F_SEAL_SHRINK|F_SEAL_SEAL, mapped, header + ring table
  // written, every ring reset to cfg.ring_start_index, flags cleared.
  static int create(const RegionConfig& cfg, Region* out);

  // Client: takes ownership of fd (closed on failure too), checks the seals,
  // maps it and validates the header against the file size.
  static int attach(int fd, Region* out);

  bool valid() const { return base_ != nullptr; }
  int fd() const { return fd_; }
  uint8_t* base() const { return base_; }
  uint64_t size() const { return layout_.region_size; }
  bool hugetlb() const { return (layout_.flags & CONDUIT_SHM_F_HUGETLB) != 0; }
  const RegionLayout& layout() const { return layout_; }

  // Views of a slot's rings; an out-of-range slot gives an empty view whose
  // producer()/consumer() handles are broken() and do nothing.
  RingView<conduit_shm_send_wr> sq(uint32_t qp_slot) const;
  RingView<conduit_shm_recv_wr> rq(uint32_t qp_slot) const;
  RingView<conduit_shm_cqe> cq(uint32_t cq_slot) const;
  conduit_shm_wakeup* engine_wakeup() const;
  conduit_shm_wakeup* cq_wakeup(uint32_t cq_slot) const;  // nullptr if cq_slot >= max_cqs
  // The arena: [arena_offset, arena_offset + arena_size) of the region.
  uint8_t* arena() const { return base_ + layout_.arena_offset; }
  uint64_t arena_size() const { return layout_.arena_size; }

  // Control thread: empties the rings of a QP / CQ slot before reuse.
  void reset_qp_rings(uint32_t qp_slot, uint32_t start_index) const;
  void reset_cq_ring(uint32_t cq_slot, uint32_t start_index) const;  // and its lost count

 private:
  void release();
  template <class T>
  RingView<T> ring(uint32_t index) const;

  int fd_ = -1;
  uint8_t* base_ = nullptr;
  RegionLayout layout_{};
};

}  // namespace conduit::shm
