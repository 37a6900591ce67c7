// Region layout, creation (memfd, seals) and attachment (header validation).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "shm/doorbell.h"
#include "shm/region.h"

using namespace conduit::shm;

namespace {

RegionConfig small_config() {
  RegionConfig cfg;
  cfg.max_qps = 3;
  cfg.max_cqs = 2;
  cfg.sq_depth = 16;
  cfg.rq_depth = 8;
  cfg.cq_depth = 32;
  cfg.arena_bytes = 10000;
  cfg.huge_pages = HugePages::kNever;
  return cfg;
}

struct Span {
  uint64_t begin, end;
};

}  // namespace

TEST_CASE("layout: sections are aligned, inside the region and do not overlap", "[region]") {
  RegionLayout l;
  REQUIRE(compute_layout(small_config(), 4096, &l) == 0);
  CHECK(l.ring_count == 8u);
  CHECK(l.doorbell_count == 3u);
  CHECK(l.region_size % 4096 == 0);
  CHECK(l.arena_offset % 4096 == 0);
  CHECK(l.arena_size >= 10000u);
  CHECK(l.arena_offset + l.arena_size == l.region_size);

  std::vector<Span> spans;
  spans.push_back({0, CONDUIT_SHM_HEADER_BYTES});
  spans.push_back({l.ring_table_offset, l.ring_table_offset + 32ull * l.ring_count});
  spans.push_back({l.doorbell_offset, l.doorbell_offset + 128ull * l.doorbell_count});
  for (uint32_t i = 0; i < l.ring_count; ++i) {
    const auto d = l.ring_desc(i);
    CHECK(d.ctrl_offset % 128 == 0);
    CHECK(d.slots_offset == d.ctrl_offset + 256);
    CHECK(is_pow2(d.capacity));
    spans.push_back({d.ctrl_offset, d.slots_offset + uint64_t{d.capacity} * d.entry_size});
  }
  CHECK(l.ring_desc(l.sq_ring(2)).kind == CONDUIT_SHM_RING_SQ);
  CHECK(l.ring_desc(l.rq_ring(2)).kind == CONDUIT_SHM_RING_RQ);
  CHECK(l.ring_desc(l.rq_ring(2)).owner == 2u);
  CHECK(l.ring_desc(l.cq_ring(1)).kind == CONDUIT_SHM_RING_CQ);
  CHECK(l.ring_desc(l.cq_ring(1)).capacity == 32u);
  spans.push_back({l.arena_offset, l.region_size});
  std::sort(spans.begin(), spans.end(), [](Span a, Span b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i) CHECK(spans[i - 1].end <= spans[i].begin);
  CHECK(spans.back().end <= l.region_size);
}

TEST_CASE("layout: bad configs are rejected", "[region]") {
  RegionLayout l;
  auto cfg = small_config();
  cfg.sq_depth = 12;
  CHECK(compute_layout(cfg, 4096, &l) == -EINVAL);
  cfg = small_config();
  cfg.max_qps = 0;
  CHECK(compute_layout(cfg, 4096, &l) == -EINVAL);
  cfg = small_config();
  cfg.cq_depth = CONDUIT_SHM_MAX_RING_DEPTH * 2;
  CHECK(compute_layout(cfg, 4096, &l) == -EINVAL);
  cfg = small_config();
  CHECK(compute_layout(cfg, 3000, &l) == -EINVAL);
  cfg.arena_bytes = ~uint64_t{0} - 100;
  CHECK(compute_layout(cfg, 4096, &l) == -EOVERFLOW);
  cfg.arena_bytes = uint64_t{1} << 50;
  CHECK(compute_layout(cfg, 4096, &l) == -EOVERFLOW);
}

TEST_CASE("create: sealed memfd, header written, client attach sees the same layout", "[region]") {
  auto cfg = small_config();
  cfg.ring_start_index = 77;
  Region daemon;
  REQUIRE(Region::create(cfg, &daemon) == 0);
  CHECK_FALSE(daemon.hugetlb());
  const int seals = ::fcntl(daemon.fd(), F_GET_SEALS);
  CHECK((seals & F_SEAL_GROW) != 0);
  CHECK((seals & F_SEAL_SHRINK) != 0);
  CHECK((seals & F_SEAL_SEAL) != 0);
  // A client cannot shrink or grow it (that would SIGBUS the daemon).
  CHECK(::ftruncate(daemon.fd(), 4096) == -1);
  CHECK(::ftruncate(daemon.fd(), static_cast<off_t>(daemon.size() * 2)) == -1);
  CHECK(::fcntl(daemon.fd(), F_ADD_SEALS, F_SEAL_WRITE) == -1);

  Region client;
  REQUIRE(Region::attach(::dup(daemon.fd()), &client) == 0);
  CHECK(client.size() == daemon.size());
  CHECK(client.layout().arena_offset == daemon.layout().arena_offset);
  CHECK(client.base() != daemon.base());
  CHECK(load_prod(client.sq(1).ctrl) == 77u);
  CHECK(load_cons(client.cq(1).ctrl) == 77u);

  // Data written through one mapping is seen through the other.
  auto p = daemon.cq(1).producer(77);
  conduit_shm_cqe e{};
  e.wr_id = 0xABCD;
  REQUIRE(p.try_enqueue(e));
  auto c = client.cq(1).consumer(77);
  conduit_shm_cqe got{};
  REQUIRE(c.try_dequeue(&got));
  CHECK(got.wr_id == 0xABCDu);
  std::memcpy(client.arena() + 100, "hello", 5);
  CHECK(std::memcmp(daemon.arena() + 100, "hello", 5) == 0);
  CHECK(client.cq_wakeup(1) != client.engine_wakeup());
  CHECK(client.cq_wakeup(1)->needs_wakeup == 0u);
}

TEST_CASE("a CQ slot's reset zeroes its lost-completion count, seen through both mappings",
          "[region]") {
  // The engine counts a CQ's lost completions from 0 and stores its count in the CQ's
  // wakeup line (cqes_lost). A slot reused after its previous CQ lost some must start at 0
  // too, or the new CQ's client would see the engine's first loss as a huge jump (or none).
  Region daemon;
  REQUIRE(Region::create(small_config(), &daemon) == 0);
  Region client;
  REQUIRE(Region::attach(::dup(daemon.fd()), &client) == 0);
  CHECK(client.cq_wakeup(1)->cqes_lost == 0u);
  producer_store_lost(daemon.cq_wakeup(1), 9);
  CHECK(consumer_load_lost(client.cq_wakeup(1)) == 9u);
  CHECK(consumer_load_lost(client.cq_wakeup(0)) == 0u);  // one count per CQ line
  CHECK(client.engine_wakeup()->cqes_lost == 0u);
  client.cq_wakeup(1)->needs_wakeup = 1;
  daemon.reset_cq_ring(1, 0);
  CHECK(consumer_load_lost(client.cq_wakeup(1)) == 0u);
  CHECK(client.cq_wakeup(1)->needs_wakeup == 1u);  // the client's flag is its own
}

TEST_CASE("region views for out-of-range slots are inert", "[region]") {
  Region r;
  REQUIRE(Region::create(small_config(), &r) == 0);
  auto p = r.sq(3).producer(0);  // max_qps is 3
  CHECK(p.broken());
  conduit_shm_send_wr wr{};
  CHECK_FALSE(p.try_enqueue(wr));
  CHECK(r.cq(2).consumer(0).broken());
}

TEST_CASE("hugetlb: auto falls back to plain pages; always fails cleanly without them",
          "[region]") {
  auto cfg = small_config();
  cfg.huge_pages = HugePages::kAuto;
  Region r;
  REQUIRE(Region::create(cfg, &r) == 0);
  if (r.hugetlb()) {
    CHECK(r.layout().page_size >= 2u * 1024 * 1024);
    CHECK(r.size() % r.layout().page_size == 0);
  } else {
    CHECK(r.layout().page_size == 4096u);
    cfg.huge_pages = HugePages::kAlways;
    Region h;
    const int rc = Region::create(cfg, &h);
    // Huge pages may exist for memfd even though none are reserved here.
    CHECK((rc < 0 || h.hugetlb()));
  }
}

TEST_CASE("attach rejects memfds that are not sealed conduit regions", "[region]") {
  SECTION("unsealed") {
    const int fd = ::memfd_create("x", MFD_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, 1 << 20) == 0);
    Region r;
    CHECK(Region::attach(fd, &r) == -EPERM);
  }
  SECTION("sealed but too small") {
    const int fd = ::memfd_create("x", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    REQUIRE(::ftruncate(fd, 100) == 0);
    REQUIRE(::fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) == 0);
    Region r;
    CHECK(Region::attach(fd, &r) == -EPROTO);
  }
  SECTION("corrupted header or ring table") {
    Region daemon;
    REQUIRE(Region::create(small_config(), &daemon) == 0);
    auto* hdr = reinterpret_cast<conduit_shm_header*>(daemon.base());
    const conduit_shm_header good = *hdr;
    auto try_attach = [&] {
      Region r;
      return Region::attach(::dup(daemon.fd()), &r);
    };
    REQUIRE(try_attach() == 0);
    hdr->magic ^= 1;
    CHECK(try_attach() == -EPROTO);
    *hdr = good;
    hdr->abi_version = CONDUIT_SHM_ABI_VERSION + 1;
    CHECK(try_attach() == -EPROTO);
    *hdr = good;
    hdr->arena_offset += 4096;
    CHECK(try_attach() == -EPROTO);
    *hdr = good;
    hdr->sq_depth = 17;
    CHECK(try_attach() == -EPROTO);
    *hdr = good;
    hdr->region_size *= 2;
    CHECK(try_attach() == -EPROTO);
    *hdr = good;
    hdr->rings_offset = 0;
    CHECK(try_attach() == -EPROTO);
    *hdr = good;
    auto* table = reinterpret_cast<conduit_shm_ring_desc*>(daemon.base() + good.ring_table_offset);
    table[3].ctrl_offset = good.region_size;  // points outside the region
    CHECK(try_attach() == -EPROTO);
  }
}

TEST_CASE("parse_header agrees with compute_layout", "[region]") {
  Region daemon;
  REQUIRE(Region::create(small_config(), &daemon) == 0);
  conduit_shm_header hdr;
  std::memcpy(&hdr, daemon.base(), sizeof(hdr));
  RegionLayout l;
  REQUIRE(parse_header(hdr, daemon.size(), &l) == 0);
  CHECK(l.rings_offset == daemon.layout().rings_offset);
  CHECK(l.doorbell_offset == daemon.layout().doorbell_offset);
  CHECK(parse_header(hdr, daemon.size() + 4096, &l) == -EPROTO);
}
