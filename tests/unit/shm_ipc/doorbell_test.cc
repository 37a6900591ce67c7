// Doorbells: needs-wakeup flag + eventfd; a consumer blocked on a CQ is woken
// by the producer, and times out when nothing comes.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include <catch2/catch.hpp>

#include "shm/doorbell.h"
#include "shm/region.h"

using namespace conduit::shm;
using Clock = std::chrono::steady_clock;

namespace {

RegionConfig one_cq() {
  RegionConfig cfg;
  cfg.max_qps = 1;
  cfg.max_cqs = 1;
  cfg.cq_depth = 16;
  cfg.arena_bytes = 4096;
  cfg.huge_pages = HugePages::kNever;
  return cfg;
}

}  // namespace

TEST_CASE("eventfd: kick, wait, drain", "[doorbell]") {
  EventFd efd;
  REQUIRE(EventFd::create(&efd) == 0);
  CHECK(efd.drain() == 0u);
  CHECK(efd.wait(0) == 0);
  CHECK(efd.kick() == 0);
  CHECK(efd.kick() == 0);
  CHECK(efd.wait(0) == 1);  // drains both kicks
  CHECK(efd.drain() == 0u);
  REQUIRE(efd.kick() == 0);
  CHECK(efd.drain() == 1u);
}

TEST_CASE("a shared eventfd whose holder made it blocking is never written or read blocking",
          "[doorbell]") {
  EventFd e;
  REQUIRE(EventFd::create(&e) == 0);
  CHECK(EventFd::is_eventfd(e.fd()));
  // The holder's copy shares the open file description, O_NONBLOCK included.
  const int theirs = ::dup(e.fd());
  REQUIRE(theirs >= 0);
  CHECK(EventFd::kick_shared(e.fd()) == 0);
  CHECK(EventFd::drain_shared(e.fd()) == 1);
  // It fills the counter to its maximum and clears O_NONBLOCK: a plain write would block.
  const uint64_t most = UINT64_MAX - 1;
  REQUIRE(::write(theirs, &most, sizeof(most)) == sizeof(most));
  REQUIRE(::fcntl(theirs, F_SETFL, ::fcntl(theirs, F_GETFL) & ~O_NONBLOCK) == 0);
  CHECK(EventFd::kick_shared(e.fd()) == -EPERM);  // refused, not blocked
  CHECK(EventFd::drain_shared(e.fd()) == most);
  // An empty counter without O_NONBLOCK: a plain read would block.
  CHECK(EventFd::drain_shared(e.fd()) == 0);
  ::close(theirs);

  int p[2];
  REQUIRE(::pipe(p) == 0);
  CHECK_FALSE(EventFd::is_eventfd(p[1]));
  ::close(p[0]);
  ::close(p[1]);
}

TEST_CASE("producer kicks only when the consumer armed the flag, once per arming", "[doorbell]") {
  conduit_shm_wakeup w{};
  CHECK_FALSE(producer_should_kick(&w));
  consumer_arm_wakeup(&w);
  CHECK(producer_should_kick(&w));
  CHECK_FALSE(producer_should_kick(&w));  // the exchange cleared it
  consumer_arm_wakeup(&w);
  consumer_disarm_wakeup(&w);
  CHECK_FALSE(producer_should_kick(&w));
}

TEST_CASE("wait_for_entries returns at once when entries are there", "[doorbell]") {
  Region r;
  REQUIRE(Region::create(one_cq(), &r) == 0);
  EventFd efd;
  REQUIRE(EventFd::create(&efd) == 0);
  auto p = r.cq(0).producer(0);
  auto c = r.cq(0).consumer(0);
  conduit_shm_cqe e{};
  REQUIRE(p.try_enqueue(e));
  REQUIRE(p.try_enqueue(e));
  CHECK(wait_for_entries(c, r.cq_wakeup(0), efd, 1000) == 2);
  CHECK(r.cq_wakeup(0)->needs_wakeup == 0u);
}

TEST_CASE("wait_for_entries times out when nothing arrives", "[doorbell]") {
  Region r;
  REQUIRE(Region::create(one_cq(), &r) == 0);
  EventFd efd;
  REQUIRE(EventFd::create(&efd) == 0);
  auto c = r.cq(0).consumer(0);
  const auto t0 = Clock::now();
  CHECK(wait_for_entries(c, r.cq_wakeup(0), efd, 30) == 0);
  const auto waited = Clock::now() - t0;
  CHECK(waited >= std::chrono::milliseconds(29));
  CHECK(waited < std::chrono::seconds(5));
  CHECK(r.cq_wakeup(0)->needs_wakeup == 0u);  // disarmed on the way out
  CHECK(wait_for_entries(c, r.cq_wakeup(0), efd, 0) == 0);
}

TEST_CASE("a sleeping consumer is woken by the producer's kick", "[doorbell]") {
  Region r;
  REQUIRE(Region::create(one_cq(), &r) == 0);
  EventFd efd;
  REQUIRE(EventFd::create(&efd) == 0);
  auto c = r.cq(0).consumer(0);
  conduit_shm_wakeup* w = r.cq_wakeup(0);
  constexpr int kRounds = 200;
  std::atomic<int> kicks{0};
  std::atomic<bool> kick_failed{false};
  std::thread engine([&] {
    auto p = r.cq(0).producer(0);
    for (int i = 0; i < kRounds; ++i) {
      // Give the consumer a chance to go to sleep now and then.
      if (i % 20 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      conduit_shm_cqe e{};
      e.wr_id = static_cast<uint64_t>(i);
      while (!p.try_enqueue(e)) std::this_thread::yield();
      if (producer_should_kick(w)) {
        if (efd.kick() != 0) kick_failed = true;  // Catch2 asserts are main-thread only
        kicks.fetch_add(1);
      }
    }
  });
  // With a 10 s timeout a lost wakeup would show as a very slow test or a 0.
  for (int i = 0; i < kRounds; ++i) {
    const int n = wait_for_entries(c, w, efd, 10000, 0);
    REQUIRE(n > 0);
    conduit_shm_cqe e;
    REQUIRE(c.try_dequeue(&e));
    REQUIRE(e.wr_id == static_cast<uint64_t>(i));
  }
  engine.join();
  CHECK_FALSE(kick_failed.load());
  CHECK(kicks.load() > 0);  // the consumer did sleep at least once
}

TEST_CASE("wait_for_entries reports a broken ring", "[doorbell]") {
  Region r;
  REQUIRE(Region::create(one_cq(), &r) == 0);
  EventFd efd;
  REQUIRE(EventFd::create(&efd) == 0);
  auto c = r.cq(0).consumer(0);
  r.cq(0).ctrl->prod = 1000;  // impossible: 1000 entries in a 16-slot ring
  CHECK(wait_for_entries(c, r.cq_wakeup(0), efd, 1000) == -EPIPE);
}
