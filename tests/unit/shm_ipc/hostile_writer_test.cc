// A hostile client process scribbles over its SQ ring (indices and slots)
// while the daemon side drains and validates it. The reader must never return
// more than asked, every WR it accepts must resolve inside the arena, and
// impossible indices must end in broken() rather than a crash.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>

#include <catch2/catch.hpp>

#include "shm/region.h"
#include "shm/wr_validate.h"

using namespace conduit::shm;

namespace {

// xorshift64: cheap deterministic garbage for the child.
uint64_t next_rand(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

}  // namespace

TEST_CASE("a client writing garbage into its ring cannot make the reader misbehave",
          "[spsc][hostile]") {
  RegionConfig cfg;
  cfg.max_qps = 1;
  cfg.max_cqs = 1;
  cfg.sq_depth = 16;
  cfg.arena_bytes = 1 << 16;
  cfg.huge_pages = HugePages::kNever;
  Region daemon;
  REQUIRE(Region::create(cfg, &daemon) == 0);
  const int client_fd = ::dup(daemon.fd());
  REQUIRE(client_fd >= 0);

  for (int mode = 0; mode < 2; ++mode) {
    daemon.reset_qp_rings(0, 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      Region mine;
      if (Region::attach(client_fd, &mine) != 0) ::_exit(2);
      auto sq = mine.sq(0);
      uint64_t s = 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(mode);
      const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
      uint32_t prod = 0;
      while (std::chrono::steady_clock::now() < end) {
        const uint64_t r = next_rand(s);
        // Random bytes into a random slot, one word at a time.
        auto* slot = reinterpret_cast<uint64_t*>(&sq.slots[r % sq.capacity]);
        for (size_t w = 0; w < sizeof(conduit_shm_send_wr) / 8; ++w) slot[w] = next_rand(s);
        if (mode == 0) {
          // Plausible indices (monotonic, never more than capacity ahead), garbage slots.
          const uint32_t room = sq.capacity - (prod - load_cons(sq.ctrl));
          prod += static_cast<uint32_t>(r >> 32) % (room + 1);
        } else {
          prod = static_cast<uint32_t>(r >> 16);  // anything
        }
        std::atomic_ref<uint32_t>(sq.ctrl->prod).store(prod, std::memory_order_release);
      }
      ::_exit(0);
    }

    auto reader = daemon.sq(0).consumer(0);
    const ArenaBounds arena{daemon.layout().arena_offset, daemon.layout().arena_size};
    const MrBounds mr{daemon.layout().arena_offset, 4096, kMrLocalWrite};
    auto lookup = [&](uint32_t lkey) { return (lkey & 0xFF) == 1 ? &mr : nullptr; };
    conduit_shm_send_wr batch[32];
    uint64_t drained = 0, accepted = 0;
    bool bad = false;
    int status = 0;
    pid_t done = 0;
    while (done == 0) {
      const uint32_t got = reader.dequeue_burst(batch, 32);
      if (got > 16) bad = true;
      drained += got;
      for (uint32_t i = 0; i < got; ++i) {
        ValidSendWr v;
        if (validate_send_wr(batch[i], WrLimits{}, arena, lookup, &v) != CONDUIT_SHM_WR_OK) {
          continue;
        }
        ++accepted;
        const uint32_t n = (v.wr.flags & CONDUIT_SHM_SEND_INLINE) ? 0 : v.wr.num_sge;
        for (uint32_t k = 0; k < n; ++k) {
          if (v.sge[k].region_offset < arena.offset ||
              v.sge[k].region_offset + v.sge[k].length > arena.offset + 4096) {
            bad = true;
          }
        }
      }
      if (reader.broken()) {
        done = ::waitpid(pid, &status, 0);
      } else {
        done = ::waitpid(pid, &status, WNOHANG);
      }
    }
    CHECK_FALSE(bad);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    if (mode == 0) {
      // Plausible indices: the reader keeps going and sees entries.
      CHECK_FALSE(reader.broken());
      CHECK(drained > 0);
    } else {
      // Random indices are impossible most of the time: caught at once.
      CHECK(reader.broken());
    }
    INFO("drained " << drained << ", accepted " << accepted);
  }
  ::close(client_fd);
}
