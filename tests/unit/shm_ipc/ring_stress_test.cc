// Concurrent producer/consumer: two threads, and two processes sharing a
// memfd region (the child maps the fd again at its own address). Every value
// must arrive exactly once, in order, across the 32-bit index wrap.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <thread>

#include <catch2/catch.hpp>

#include "shm/region.h"
#include "shm/spsc_ring.h"

using namespace conduit::shm;

namespace {

constexpr uint64_t kCount = 200000;
constexpr uint32_t kStart = 0xFFFFFFFFu - 1000;  // wraps early in the run

// Produces 0..count-1 in bursts of 1..17; spins (yielding) when full.
void produce(SpscProducer<conduit_shm_cqe> p, uint64_t count) {
  conduit_shm_cqe burst[17];
  uint64_t next = 0;
  uint32_t size = 1;
  while (next < count) {
    uint32_t n = size;
    if (n > count - next) n = static_cast<uint32_t>(count - next);
    for (uint32_t i = 0; i < n; ++i) {
      burst[i] = conduit_shm_cqe{};
      burst[i].wr_id = next + i;
      burst[i].byte_len = static_cast<uint32_t>(~(next + i));
    }
    uint32_t done = 0;
    while (done < n) {
      const uint32_t put = p.enqueue_burst(burst + done, n - done);
      if (put == 0) std::this_thread::yield();
      done += put;
    }
    next += n;
    size = size % 17 + 1;
  }
}

// Returns the number of values that arrived in order; stops at the first
// wrong one.
uint64_t consume(SpscConsumer<conduit_shm_cqe> c, uint64_t count) {
  conduit_shm_cqe burst[32];
  uint64_t expect = 0;
  uint32_t size = 32;
  while (expect < count) {
    const uint32_t got = c.dequeue_burst(burst, size);
    if (got == 0) {
      if (c.broken()) return expect;
      std::this_thread::yield();
    }
    for (uint32_t i = 0; i < got; ++i) {
      if (burst[i].wr_id != expect || burst[i].byte_len != static_cast<uint32_t>(~expect)) {
        return expect;
      }
      ++expect;
    }
    size = size == 1 ? 32 : size - 1;
  }
  return expect;
}

}  // namespace

TEST_CASE("two threads: every value once and in order", "[spsc][stress]") {
  RegionConfig cfg;
  cfg.max_qps = 1;
  cfg.max_cqs = 1;
  cfg.cq_depth = 64;
  cfg.arena_bytes = 4096;
  cfg.huge_pages = HugePages::kNever;
  cfg.ring_start_index = kStart;
  Region region;
  REQUIRE(Region::create(cfg, &region) == 0);
  auto view = region.cq(0);
  std::thread t(produce, view.producer(kStart), kCount);
  const uint64_t got = consume(view.consumer(kStart), kCount);
  t.join();
  CHECK(got == kCount);
  CHECK(load_prod(view.ctrl) == static_cast<uint32_t>(kStart + kCount));
  CHECK(load_cons(view.ctrl) == static_cast<uint32_t>(kStart + kCount));
}

TEST_CASE("two processes sharing the memfd: every value once and in order", "[spsc][stress]") {
  RegionConfig cfg;
  cfg.max_qps = 1;
  cfg.max_cqs = 1;
  cfg.cq_depth = 64;
  cfg.arena_bytes = 4096;
  cfg.huge_pages = HugePages::kNever;
  cfg.ring_start_index = kStart;
  Region region;
  REQUIRE(Region::create(cfg, &region) == 0);
  const int child_fd = ::dup(region.fd());
  REQUIRE(child_fd >= 0);

  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Child: map the region anew, as a client does with the fd it received.
    Region mine;
    if (Region::attach(child_fd, &mine) != 0) ::_exit(2);
    const uint64_t got = consume(mine.cq(0).consumer(kStart), kCount);
    ::_exit(got == kCount ? 0 : 1);
  }
  ::close(child_fd);
  produce(region.cq(0).producer(kStart), kCount);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(load_cons(region.cq(0).ctrl) == static_cast<uint32_t>(kStart + kCount));
}
