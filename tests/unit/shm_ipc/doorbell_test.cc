// Doorbells: needs-wakeup flag + eventfd or wake fd; a consumer blocked on
// a CQ is woken by the producer, and times out when nothing comes.
#include <fcntl.h>
#include <signal.h>
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

TEST_CASE("wake fds, pipe and socket: kick, wait, drain; one way only", "[doorbell]") {
  for (const auto kind : {WakeFd::Kind::kPipe, WakeFd::Kind::kSocket}) {
    CAPTURE(kind == WakeFd::Kind::kPipe ? "pipe" : "socket");
    WakeFd w, r;
    REQUIRE(WakeFd::create(kind, &w, &r) == 0);
    CHECK(r.drain() == 0);
    CHECK(r.wait(0) == 0);
    CHECK(w.kick() == 0);
    CHECK(w.kick() == 0);
    CHECK(r.wait(0) == 1);  // drains both kicks
    CHECK(r.drain() == 0);
    REQUIRE(w.kick() == 0);
    CHECK(r.drain() == 1);
    // The reader cannot kick the writer: nothing piles up where nobody reads.
    CHECK(WakeFd::kick_socket(r.fd()) < 0);
    CHECK(WakeFd::drain(w.fd()) <= 0);
  }
}

TEST_CASE("a wake fd's owner never blocks, whatever the other end's holder does", "[doorbell]") {
  // SIGPIPE is what conduitd ignores (its pipe writes); a client sends with MSG_NOSIGNAL.
  struct sigaction ign {
  }, old{};
  ign.sa_handler = SIG_IGN;
  REQUIRE(::sigaction(SIGPIPE, &ign, &old) == 0);
  for (const auto kind : {WakeFd::Kind::kPipe, WakeFd::Kind::kSocket}) {
    CAPTURE(kind == WakeFd::Kind::kPipe ? "pipe" : "socket");
    WakeFd w, r;
    REQUIRE(WakeFd::create(kind, &w, &r) == 0);
    // The holder of one end makes it blocking: the other end's flags are its own.
    REQUIRE(::fcntl(r.fd(), F_SETFL, ::fcntl(r.fd(), F_GETFL) & ~O_NONBLOCK) == 0);
    CHECK((::fcntl(w.fd(), F_GETFL) & O_NONBLOCK) != 0);
    uint64_t kicks = 0;
    const auto t0 = Clock::now();
    // Full: a blocking write would wait. Every kick still returns, with success.
    for (; kicks < 200'000 && Clock::now() - t0 < std::chrono::seconds(5); ++kicks) {
      REQUIRE(w.kick() == 0);
    }
    CHECK(kicks == 200'000);
    // Its holder drains its end (made non-blocking again: that is its own business).
    REQUIRE(::fcntl(r.fd(), F_SETFL, ::fcntl(r.fd(), F_GETFL) | O_NONBLOCK) == 0);
    int64_t drained = 0;
    for (int64_t n; (n = r.drain()) > 0;) drained += n;
    CHECK(drained > 0);
    CHECK(drained < 200'000);  // the channel filled: the rest were refused, quietly
    // The writer made blocking, the reader drains an empty channel: returns at once.
    WakeFd w2, r2;
    REQUIRE(WakeFd::create(kind, &w2, &r2) == 0);
    REQUIRE(::fcntl(w2.fd(), F_SETFL, ::fcntl(w2.fd(), F_GETFL) & ~O_NONBLOCK) == 0);
    CHECK(r2.drain() == 0);
    // The reader gone: -EPIPE from a kick.
    r = WakeFd();
    CHECK(w.kick() == -EPIPE);
    // The writer gone: end of file once what was sent is read.
    REQUIRE(w2.kick() == 0);
    w2 = WakeFd();
    CHECK(r2.drain() == 1);
    CHECK(r2.drain() == -EPIPE);
    CHECK(r2.wait(1000) == -EPIPE);
  }
  REQUIRE(::sigaction(SIGPIPE, &old, nullptr) == 0);
  // A client's socket kick after conduitd is gone: -EPIPE even with SIGPIPE's default action
  // (which would end this process).
  WakeFd w, r;
  REQUIRE(WakeFd::create(WakeFd::Kind::kSocket, &w, &r) == 0);
  r = WakeFd();
  CHECK(w.kick() == -EPIPE);
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
  WakeFd kicker, efd;  // as between conduitd's engine and a client
  REQUIRE(WakeFd::create(WakeFd::Kind::kPipe, &kicker, &efd) == 0);
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
        if (kicker.kick() != 0) kick_failed = true;  // Catch2 asserts are main-thread only
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
