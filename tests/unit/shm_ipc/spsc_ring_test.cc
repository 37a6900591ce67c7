// Single-threaded behaviour of SpscProducer/SpscConsumer: bursts, full/empty,
// wrap-around of the free-running 32-bit indices, and impossible indices.
#include <array>
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "shm/spsc_ring.h"

using conduit::shm::reset_ring;
using conduit::shm::SpscConsumer;
using conduit::shm::SpscProducer;

namespace {

// A ring in ordinary memory; the classes do not care where it lives.
template <class T, uint32_t kCap>
struct TestRing {
  alignas(128) conduit_shm_ring_ctrl ctrl{};
  std::array<T, kCap> slots{};
  SpscProducer<T> prod;
  SpscConsumer<T> cons;
  explicit TestRing(uint32_t start = 0) {
    reset_ring(&ctrl, start);
    prod = SpscProducer<T>(&ctrl, slots.data(), kCap, start);
    cons = SpscConsumer<T>(&ctrl, slots.data(), kCap, start);
  }
};

std::vector<uint64_t> iota(uint64_t first, uint32_t n) {
  std::vector<uint64_t> v(n);
  for (uint32_t i = 0; i < n; ++i) v[i] = first + i;
  return v;
}

}  // namespace

TEST_CASE("empty ring dequeues nothing, full ring enqueues nothing", "[spsc]") {
  TestRing<uint64_t, 8> r;
  uint64_t out[8];
  CHECK(r.cons.dequeue_burst(out, 8) == 0);
  CHECK(r.cons.available() == 0);
  CHECK(r.prod.free_count() == 8);

  auto in = iota(100, 8);
  CHECK(r.prod.enqueue_burst(in.data(), 8) == 8);
  CHECK(r.prod.free_count() == 0);
  CHECK_FALSE(r.prod.try_enqueue(1));
  CHECK(r.cons.available() == 8);

  CHECK(r.cons.dequeue_burst(out, 8) == 8);
  for (int i = 0; i < 8; ++i) CHECK(out[i] == 100u + i);
  CHECK(r.cons.dequeue_burst(out, 8) == 0);
  CHECK_FALSE(r.prod.broken());
  CHECK_FALSE(r.cons.broken());
}

TEST_CASE("bursts are partial when the ring is nearly full or nearly empty", "[spsc]") {
  TestRing<uint64_t, 16> r;
  auto in = iota(0, 32);
  CHECK(r.prod.enqueue_burst(in.data(), 10) == 10);
  // Only 6 slots left: a burst of 10 enqueues 6.
  CHECK(r.prod.enqueue_burst(in.data() + 10, 10) == 6);
  uint64_t out[32];
  CHECK(r.cons.dequeue_burst(out, 4) == 4);
  // The producer's cached consumer index is stale; the refresh finds 4 slots.
  CHECK(r.prod.enqueue_burst(in.data() + 16, 10) == 4);
  // 16 in the ring: a burst of 32 dequeues 16, in order.
  CHECK(r.cons.dequeue_burst(out + 4, 32) == 16);
  for (uint64_t i = 0; i < 20; ++i) CHECK(out[i] == i);
}

TEST_CASE("indices wrap at 2^32 without losing or reordering entries", "[spsc][wrap]") {
  // Start 5 entries before the 32-bit wrap so bursts straddle it, and so the
  // slot index wraps (0xFFFFFFFB & 7 = 3) at a different moment.
  const uint32_t start = 0xFFFFFFFBu;
  TestRing<uint64_t, 8> r(start);
  uint64_t next_in = 0, next_out = 0;
  uint64_t out[8];
  for (int round = 0; round < 50; ++round) {
    const uint32_t n_in = 1 + static_cast<uint32_t>(round % 7);
    auto in = iota(next_in, n_in);
    const uint32_t put = r.prod.enqueue_burst(in.data(), n_in);
    next_in += put;
    const uint32_t got = r.cons.dequeue_burst(out, 1 + static_cast<uint32_t>((round * 3) % 8));
    for (uint32_t i = 0; i < got; ++i) REQUIRE(out[i] == next_out++);
  }
  for (uint32_t got; (got = r.cons.dequeue_burst(out, 8)) > 0;) {
    for (uint32_t i = 0; i < got; ++i) REQUIRE(out[i] == next_out++);
  }
  CHECK(next_out == next_in);
  CHECK(next_in > 8);
  // The indices really did wrap.
  CHECK(r.prod.prod_index() < start);
  CHECK(r.cons.cons_index() == r.prod.prod_index());
  CHECK_FALSE(r.cons.broken());
}

TEST_CASE("single entries land in every slot, across the 2^32 wrap", "[spsc][wrap]") {
  // One entry at a time takes its own copy path; walk it over every slot
  // (incl. the last before the slot wrap) and over the index wrap, with the
  // ring holding 0..7 other entries.
  struct Entry {
    uint64_t seq;
    uint8_t fill[120];
  };
  for (uint32_t fill = 0; fill < 8; ++fill) {
    const uint32_t start = 0xFFFFFFF0u + fill;
    TestRing<Entry, 8> r(start);
    uint64_t next_in = 0, next_out = 0;
    Entry e{}, out{};
    for (uint32_t i = 0; i < fill; ++i) {
      e.seq = next_in++;
      REQUIRE(r.prod.try_enqueue(e));
    }
    for (int i = 0; i < 40; ++i) {
      e.seq = next_in++;
      e.fill[119] = static_cast<uint8_t>(e.seq);
      REQUIRE(r.prod.try_enqueue(e));
      REQUIRE(r.cons.try_dequeue(&out));
      REQUIRE(out.seq == next_out++);
      if (out.seq >= fill) REQUIRE(out.fill[119] == static_cast<uint8_t>(out.seq));
    }
    CHECK(r.cons.available() == fill);
    CHECK(r.prod.prod_index() < start);  // wrapped
    CHECK_FALSE(r.cons.broken());
    CHECK_FALSE(r.prod.broken());
  }
}

TEST_CASE("a full ring across the wrap is still full, not empty", "[spsc][wrap]") {
  TestRing<uint32_t, 4> r(0xFFFFFFFEu);
  const uint32_t in[4] = {1, 2, 3, 4};
  CHECK(r.prod.enqueue_burst(in, 4) == 4);  // prod = 2, cons = 0xFFFFFFFE
  CHECK(r.ctrl.prod == 2u);
  CHECK(r.prod.free_count() == 0);
  CHECK(r.cons.available() == 4);
  uint32_t out[4];
  CHECK(r.cons.dequeue_burst(out, 4) == 4);
  CHECK(out[3] == 4u);
}

TEST_CASE("consumer reports an impossible producer index", "[spsc][hostile]") {
  SECTION("prod - cons > capacity (claims more entries than slots)") {
    TestRing<uint64_t, 8> r(1000);
    r.ctrl.prod = 1000 + 9;
    uint64_t out[8];
    CHECK(r.cons.dequeue_burst(out, 8) == 0);
    CHECK(r.cons.broken());
  }
  SECTION("prod behind cons") {
    TestRing<uint64_t, 8> r(1000);
    r.ctrl.prod = 999;
    CHECK(r.cons.available() == 0);
    CHECK(r.cons.broken());
  }
  SECTION("prod exactly capacity ahead is legal") {
    TestRing<uint64_t, 8> r(0xFFFFFFFCu);
    r.ctrl.prod = 0xFFFFFFFCu + 8;  // wraps to 4
    uint64_t out[8];
    CHECK(r.cons.dequeue_burst(out, 8) == 8);
    CHECK_FALSE(r.cons.broken());
  }
  SECTION("broken is sticky even if the index is put back") {
    TestRing<uint64_t, 8> r;
    r.ctrl.prod = 0x80000000u;
    CHECK(r.cons.available() == 0);
    r.ctrl.prod = 1;
    uint64_t out[1];
    CHECK(r.cons.dequeue_burst(out, 1) == 0);
    CHECK(r.cons.broken());
  }
}

TEST_CASE("producer reports an impossible consumer index", "[spsc][hostile]") {
  TestRing<uint64_t, 8> r(50);
  auto in = iota(0, 8);
  CHECK(r.prod.enqueue_burst(in.data(), 8) == 8);
  SECTION("cons ahead of prod") {
    r.ctrl.cons = 59;
    CHECK(r.prod.enqueue_burst(in.data(), 1) == 0);
    CHECK(r.prod.broken());
  }
  SECTION("cons far behind (prod - cons > capacity)") {
    r.ctrl.cons = 41;
    CHECK(r.prod.free_count() == 0);
    CHECK(r.prod.broken());
  }
}

TEST_CASE("the consumer never reads its own index back from shared memory", "[spsc][hostile]") {
  TestRing<uint64_t, 8> r;
  auto in = iota(7, 4);
  CHECK(r.prod.enqueue_burst(in.data(), 4) == 4);
  r.ctrl.cons = 3;  // a hostile peer rewinds/advances our index
  uint64_t out[4];
  CHECK(r.cons.dequeue_burst(out, 4) == 4);
  CHECK(out[0] == 7u);
  CHECK(r.ctrl.cons == 4u);  // republished from the private copy
}

TEST_CASE("non-power-of-two capacity gives a broken handle", "[spsc]") {
  conduit_shm_ring_ctrl ctrl{};
  uint64_t slots[6];
  SpscProducer<uint64_t> p(&ctrl, slots, 6, 0);
  SpscConsumer<uint64_t> c(&ctrl, slots, 6, 0);
  CHECK(p.broken());
  CHECK(c.broken());
  CHECK_FALSE(p.try_enqueue(1));
  SpscConsumer<uint64_t> def;
  uint64_t x;
  CHECK_FALSE(def.try_dequeue(&x));
}

TEST_CASE("large trivially copyable entries keep every byte", "[spsc]") {
  struct Big {
    uint64_t a;
    uint8_t payload[120];
  };
  TestRing<Big, 4> r(0xFFFFFFFFu);
  Big in[3];
  for (int i = 0; i < 3; ++i) {
    in[i].a = 0x1111u * (i + 1);
    for (int j = 0; j < 120; ++j) in[i].payload[j] = static_cast<uint8_t>(i * 7 + j);
  }
  Big out[3];
  for (int round = 0; round < 5; ++round) {
    REQUIRE(r.prod.enqueue_burst(in, 3) == 3);
    REQUIRE(r.cons.dequeue_burst(out, 3) == 3);
    for (int i = 0; i < 3; ++i) {
      CHECK(out[i].a == in[i].a);
      CHECK(std::equal(std::begin(out[i].payload), std::end(out[i].payload), in[i].payload));
    }
  }
}

TEST_CASE("ring_indices_sane: the fill level is within [0, capacity] modulo 2^32", "[spsc]") {
  using conduit::shm::ring_indices_sane;
  CHECK(ring_indices_sane(5, 5, 8));
  CHECK(ring_indices_sane(13, 5, 8));
  CHECK_FALSE(ring_indices_sane(14, 5, 8));
  CHECK_FALSE(ring_indices_sane(4, 5, 8));            // prod behind cons
  CHECK(ring_indices_sane(3, 0xFFFFFFFDu, 8));        // 6 entries across the wrap
  CHECK_FALSE(ring_indices_sane(4, 0xFFFFFFFBu, 8));  // 9 entries across the wrap
}
