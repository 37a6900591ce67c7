#include "shm/region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

namespace conduit::shm {

namespace {

constexpr uint32_t kSmallPage = 4096;
constexpr unsigned kRequiredSeals = F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL;

// a + b and round-up-to-multiple that report overflow instead of wrapping.
bool add_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }
bool align_up(uint64_t v, uint64_t align, uint64_t* out) {
  uint64_t t;
  if (!add_ok(v, align - 1, &t)) return false;
  *out = t & ~(align - 1);
  return true;
}

uint64_t ring_bytes(uint32_t depth, uint32_t entry_size) {
  // Inputs are bounded by compute_layout (depth <= 2^16, entry <= 128), so no overflow.
  const uint64_t raw =
      sizeof(conduit_shm_ring_ctrl) + uint64_t{depth} * entry_size + CONDUIT_SHM_SECTION_ALIGN - 1;
  return raw & ~uint64_t{CONDUIT_SHM_SECTION_ALIGN - 1};
}

bool depth_ok(uint32_t d) { return is_pow2(d) && d <= CONDUIT_SHM_MAX_RING_DEPTH; }

}  // namespace

int compute_layout(const RegionConfig& cfg, uint32_t page_size, RegionLayout* out) {
  if (cfg.max_qps == 0 || cfg.max_qps > CONDUIT_SHM_MAX_QPS || cfg.max_cqs == 0 ||
      cfg.max_cqs > CONDUIT_SHM_MAX_CQS || !depth_ok(cfg.sq_depth) || !depth_ok(cfg.rq_depth) ||
      !depth_ok(cfg.cq_depth) || cfg.arena_bytes == 0 || !is_pow2(page_size) ||
      page_size < kSmallPage) {
    return -EINVAL;
  }
  RegionLayout l;
  l.page_size = page_size;
  l.max_qps = cfg.max_qps;
  l.max_cqs = cfg.max_cqs;
  l.sq_depth = cfg.sq_depth;
  l.rq_depth = cfg.rq_depth;
  l.cq_depth = cfg.cq_depth;
  l.ring_count = 2 * cfg.max_qps + cfg.max_cqs;
  l.doorbell_count = 1 + cfg.max_cqs;

  // Bounded by the limits above: everything before the arena fits easily.
  uint64_t off = CONDUIT_SHM_HEADER_BYTES;
  l.ring_table_offset = off;
  off += uint64_t{l.ring_count} * sizeof(conduit_shm_ring_desc);
  off = (off + CONDUIT_SHM_SECTION_ALIGN - 1) & ~uint64_t{CONDUIT_SHM_SECTION_ALIGN - 1};
  l.doorbell_offset = off;
  off += uint64_t{l.doorbell_count} * sizeof(conduit_shm_wakeup);
  l.rings_offset = off;
  off += uint64_t{l.max_qps} * (ring_bytes(l.sq_depth, sizeof(conduit_shm_send_wr)) +
                                ring_bytes(l.rq_depth, sizeof(conduit_shm_recv_wr)));
  off += uint64_t{l.max_cqs} * ring_bytes(l.cq_depth, sizeof(conduit_shm_cqe));

  uint64_t end;
  if (!align_up(off, page_size, &l.arena_offset) ||
      !add_ok(l.arena_offset, cfg.arena_bytes, &end) || !align_up(end, page_size, &l.region_size)) {
    return -EOVERFLOW;
  }
  // mmap and ftruncate take off_t / size_t; keep well inside both.
  if (l.region_size > (uint64_t{1} << 46)) return -EOVERFLOW;
  l.arena_size = l.region_size - l.arena_offset;
  *out = l;
  return 0;
}

conduit_shm_ring_desc RegionLayout::ring_desc(uint32_t ring) const {
  const uint64_t sq_bytes = ring_bytes(sq_depth, sizeof(conduit_shm_send_wr));
  const uint64_t rq_bytes = ring_bytes(rq_depth, sizeof(conduit_shm_recv_wr));
  const uint64_t cq_bytes = ring_bytes(cq_depth, sizeof(conduit_shm_cqe));
  conduit_shm_ring_desc d{};
  if (ring < 2 * max_qps) {
    const uint32_t qp = ring / 2;
    const bool is_rq = (ring & 1) != 0;
    d.ctrl_offset = rings_offset + qp * (sq_bytes + rq_bytes) + (is_rq ? sq_bytes : 0);
    d.capacity = is_rq ? rq_depth : sq_depth;
    d.entry_size = is_rq ? sizeof(conduit_shm_recv_wr) : sizeof(conduit_shm_send_wr);
    d.kind = is_rq ? CONDUIT_SHM_RING_RQ : CONDUIT_SHM_RING_SQ;
    d.owner = qp;
  } else {
    const uint32_t cq = ring - 2 * max_qps;
    d.ctrl_offset = rings_offset + max_qps * (sq_bytes + rq_bytes) + cq * cq_bytes;
    d.capacity = cq_depth;
    d.entry_size = sizeof(conduit_shm_cqe);
    d.kind = CONDUIT_SHM_RING_CQ;
    d.owner = cq;
  }
  d.slots_offset = d.ctrl_offset + sizeof(conduit_shm_ring_ctrl);
  return d;
}

conduit_shm_header make_header(const RegionLayout& layout) {
  conduit_shm_header hdr{};
  hdr.magic = CONDUIT_SHM_MAGIC;
  hdr.abi_version = CONDUIT_SHM_ABI_VERSION;
  hdr.header_bytes = sizeof(conduit_shm_header);
  hdr.region_size = layout.region_size;
  hdr.page_size = layout.page_size;
  hdr.flags = layout.flags;
  hdr.max_qps = layout.max_qps;
  hdr.max_cqs = layout.max_cqs;
  hdr.sq_depth = layout.sq_depth;
  hdr.rq_depth = layout.rq_depth;
  hdr.cq_depth = layout.cq_depth;
  hdr.sq_entry_size = sizeof(conduit_shm_send_wr);
  hdr.rq_entry_size = sizeof(conduit_shm_recv_wr);
  hdr.cq_entry_size = sizeof(conduit_shm_cqe);
  hdr.ring_count = layout.ring_count;
  hdr.doorbell_count = layout.doorbell_count;
  hdr.ring_table_offset = layout.ring_table_offset;
  hdr.doorbell_offset = layout.doorbell_offset;
  hdr.rings_offset = layout.rings_offset;
  hdr.arena_offset = layout.arena_offset;
  hdr.arena_size = layout.arena_size;
  return hdr;
}

int parse_header(const conduit_shm_header& hdr, uint64_t file_size, RegionLayout* out) {
  if (hdr.magic != CONDUIT_SHM_MAGIC || hdr.abi_version != CONDUIT_SHM_ABI_VERSION ||
      hdr.header_bytes != sizeof(conduit_shm_header) || hdr.region_size != file_size ||
      (hdr.flags & ~CONDUIT_SHM_F_HUGETLB) != 0 ||
      hdr.sq_entry_size != sizeof(conduit_shm_send_wr) ||
      hdr.rq_entry_size != sizeof(conduit_shm_recv_wr) ||
      hdr.cq_entry_size != sizeof(conduit_shm_cqe) || hdr.arena_offset >= hdr.region_size) {
    return -EPROTO;
  }
  // The layout is a pure function of the config and page size: recompute it
  // and require every offset in the header to match.
  RegionConfig cfg;
  cfg.max_qps = hdr.max_qps;
  cfg.max_cqs = hdr.max_cqs;
  cfg.sq_depth = hdr.sq_depth;
  cfg.rq_depth = hdr.rq_depth;
  cfg.cq_depth = hdr.cq_depth;
  cfg.arena_bytes = hdr.region_size - hdr.arena_offset;
  RegionLayout l;
  if (compute_layout(cfg, hdr.page_size, &l) != 0) return -EPROTO;
  l.flags = hdr.flags;
  if (l.region_size != hdr.region_size || l.arena_offset != hdr.arena_offset ||
      l.arena_size != hdr.arena_size || l.ring_count != hdr.ring_count ||
      l.doorbell_count != hdr.doorbell_count || l.ring_table_offset != hdr.ring_table_offset ||
      l.doorbell_offset != hdr.doorbell_offset || l.rings_offset != hdr.rings_offset) {
    return -EPROTO;
  }
  *out = l;
  return 0;
}

Region::~Region() { release(); }

Region::Region(Region&& other) noexcept
    : fd_(other.fd_), base_(other.base_), layout_(other.layout_) {
  other.fd_ = -1;
  other.base_ = nullptr;
}

Region& Region::operator=(Region&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    base_ = other.base_;
    layout_ = other.layout_;
    other.fd_ = -1;
    other.base_ = nullptr;
  }
  return *this;
}

void Region::release() {
  if (base_ != nullptr) ::munmap(base_, layout_.region_size);
  if (fd_ >= 0) ::close(fd_);
  base_ = nullptr;
  fd_ = -1;
}

namespace {

// Creates, sizes, seals and maps a memfd. 0 or -errno; on error nothing leaks.
int make_memfd(const RegionConfig& cfg, bool huge, RegionLayout* layout, int* fd_out,
               uint8_t** base_out) {
  const unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING | (huge ? MFD_HUGETLB : 0u);
  const int fd = ::memfd_create(cfg.name, flags);
  if (fd < 0) return -errno;
  int rc = 0;
  uint32_t page_size = kSmallPage;
  if (huge) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      rc = -errno;
    } else {
      page_size = static_cast<uint32_t>(st.st_blksize);  // hugetlbfs reports its page size
    }
  }
  void* base = MAP_FAILED;
  if (rc == 0) rc = compute_layout(cfg, page_size, layout);
  if (rc == 0 && ::ftruncate(fd, static_cast<off_t>(layout->region_size)) != 0) rc = -errno;
  if (rc == 0 && ::fcntl(fd, F_ADD_SEALS, kRequiredSeals) != 0) rc = -errno;
  if (rc == 0) {
    // MAP_POPULATE: with hugetlb the pages are reserved here, so a shortage
    // fails now (ENOMEM) instead of as SIGBUS on first touch.
    base = ::mmap(nullptr, layout->region_size, PROT_READ | PROT_WRITE,
                  MAP_SHARED | (huge ? MAP_POPULATE : 0), fd, 0);
    if (base == MAP_FAILED) rc = -errno;
  }
  if (rc != 0) {
    ::close(fd);
    return rc;
  }
  layout->flags = huge ? CONDUIT_SHM_F_HUGETLB : 0u;
  *fd_out = fd;
  *base_out = static_cast<uint8_t*>(base);
  return 0;
}

}  // namespace

int Region::create(const RegionConfig& cfg, Region* out) {
  RegionLayout layout;
  if (const int rc = compute_layout(cfg, kSmallPage, &layout); rc != 0) return rc;
  int fd = -1;
  uint8_t* base = nullptr;
  int rc = -ENOMEM;
  if (cfg.huge_pages != HugePages::kNever) {
    rc = make_memfd(cfg, true, &layout, &fd, &base);
    if (rc != 0 && cfg.huge_pages == HugePages::kAlways) return rc;
  }
  if (rc != 0) rc = make_memfd(cfg, false, &layout, &fd, &base);
  if (rc != 0) return rc;

  Region r;
  r.fd_ = fd;
  r.base_ = base;
  r.layout_ = layout;

  // A fresh memfd reads as zeros, so doorbells and reserved fields are clear.
  const conduit_shm_header hdr = make_header(layout);
  std::memcpy(base, &hdr, sizeof(hdr));

  for (uint32_t i = 0; i < layout.ring_count; ++i) {
    const conduit_shm_ring_desc d = layout.ring_desc(i);
    std::memcpy(base + layout.ring_table_offset + uint64_t{i} * sizeof(d), &d, sizeof(d));
    reset_ring(reinterpret_cast<conduit_shm_ring_ctrl*>(base + d.ctrl_offset),
               cfg.ring_start_index);
  }
  *out = std::move(r);
  return 0;
}

int Region::attach(int fd, Region* out) {
  Region r;
  r.fd_ = fd;  // closed by r's destructor on every error path
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0) return -errno;
  if ((static_cast<unsigned>(seals) & kRequiredSeals) != kRequiredSeals) return -EPERM;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return -errno;
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < CONDUIT_SHM_HEADER_BYTES) return -EPROTO;

  void* base = ::mmap(nullptr, file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return -errno;
  r.base_ = static_cast<uint8_t*>(base);
  r.layout_.region_size = file_size;  // so release() unmaps the right length

  conduit_shm_header hdr;
  std::memcpy(&hdr, base, sizeof(hdr));
  RegionLayout layout;
  if (const int rc = parse_header(hdr, file_size, &layout); rc != 0) return rc;
  for (uint32_t i = 0; i < layout.ring_count; ++i) {
    const conduit_shm_ring_desc want = layout.ring_desc(i);
    conduit_shm_ring_desc got;
    std::memcpy(&got, r.base_ + layout.ring_table_offset + uint64_t{i} * sizeof(got), sizeof(got));
    if (std::memcmp(&want, &got, sizeof(got)) != 0) return -EPROTO;
  }
  r.layout_ = layout;
  *out = std::move(r);
  return 0;
}

template <class T>
RingView<T> Region::ring(uint32_t index) const {
  if (base_ == nullptr || index >= layout_.ring_count) return {};  // handles built on it are broken
  const conduit_shm_ring_desc d = layout_.ring_desc(index);
  RingView<T> v;
  v.ctrl = reinterpret_cast<conduit_shm_ring_ctrl*>(base_ + d.ctrl_offset);
  v.slots = reinterpret_cast<T*>(base_ + d.slots_offset);
  v.capacity = d.capacity;
  return v;
}

RingView<conduit_shm_send_wr> Region::sq(uint32_t qp_slot) const {
  if (qp_slot >= layout_.max_qps) return {};
  return ring<conduit_shm_send_wr>(layout_.sq_ring(qp_slot));
}
RingView<conduit_shm_recv_wr> Region::rq(uint32_t qp_slot) const {
  if (qp_slot >= layout_.max_qps) return {};
  return ring<conduit_shm_recv_wr>(layout_.rq_ring(qp_slot));
}
RingView<conduit_shm_cqe> Region::cq(uint32_t cq_slot) const {
  if (cq_slot >= layout_.max_cqs) return {};
  return ring<conduit_shm_cqe>(layout_.cq_ring(cq_slot));
}

conduit_shm_wakeup* Region::engine_wakeup() const {
  return reinterpret_cast<conduit_shm_wakeup*>(base_ + layout_.engine_wakeup_offset());
}
conduit_shm_wakeup* Region::cq_wakeup(uint32_t cq_slot) const {
  if (base_ == nullptr || cq_slot >= layout_.max_cqs) return nullptr;
  return reinterpret_cast<conduit_shm_wakeup*>(base_ + layout_.cq_wakeup_offset(cq_slot));
}

void Region::reset_qp_rings(uint32_t qp_slot, uint32_t start_index) const {
  if (qp_slot >= layout_.max_qps) return;
  reset_ring(sq(qp_slot).ctrl, start_index);
  reset_ring(rq(qp_slot).ctrl, start_index);
}
void Region::reset_cq_ring(uint32_t cq_slot, uint32_t start_index) const {
  if (cq_slot >= layout_.max_cqs) return;
  reset_ring(cq(cq_slot).ctrl, start_index);
  // The slot's previous CQ may have lost completions: the new one starts with none (the
  // engine's count for it starts at 0 too).
  std::atomic_ref<uint32_t>(cq_wakeup(cq_slot)->cqes_lost).store(0, std::memory_order_relaxed);
}

}  // namespace conduit::shm
