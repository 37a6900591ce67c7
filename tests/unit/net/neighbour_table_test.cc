#include "net/neighbour_table.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <stdexcept>

#include "test_frames.h"

using namespace conduit::net;
using namespace conduit::net::test;
using Kind = NeighbourEvent::Kind;
using Resolve = NeighbourTable::Resolve;

namespace {

constexpr uint64_t kSec = 1'000'000'000;

NeighbourConfig small_config() {
  NeighbourConfig c;
  c.capacity = 4;
  c.max_pending_per_hop = 2;
  c.max_requests = 3;
  c.retry_interval_ns = kSec;
  c.reachable_ns = 30 * kSec;
  c.refresh_window_ns = 5 * kSec;
  c.randomize_reachable = false;  // exact lifetimes; the draws are tested on their own
  return c;
}

size_t count(const std::vector<NeighbourEvent>& ev, Kind k) {
  size_t n = 0;
  for (const auto& e : ev) n += e.kind == k;
  return n;
}

}  // namespace

TEST_CASE("Resolution sends a request, queues frames and releases them on reply", "[neigh]") {
  NeighbourTable t(small_config());
  std::vector<NeighbourEvent> ev;
  auto r = t.resolve(kPeerIp, 100, 11, ev);
  CHECK(r.status == Resolve::kQueued);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == Kind::kSendRequest);
  CHECK(ev[0].ip == kPeerIp);
  CHECK(ev[0].mac.is_broadcast());
  ev.clear();

  // A second frame waits behind the same request: no new request.
  CHECK(t.resolve(kPeerIp, 200, 12, ev).status == Resolve::kQueued);
  CHECK(ev.empty());
  // The per-hop queue holds 2: the third frame is refused and counted.
  CHECK(t.resolve(kPeerIp, 300, 13, ev).status == Resolve::kDropped);
  CHECK(t.counters().queue_overflow_drops == 1);
  CHECK(t.find(kPeerIp)->frames_queued == 2);

  t.learn(kPeerIp, kPeerMac, 400, false, ev);
  REQUIRE(ev.size() == 2);
  CHECK(ev[0].kind == Kind::kTransmitQueued);
  CHECK(ev[0].frame == 11);  // FIFO
  CHECK(ev[1].frame == 12);
  CHECK(ev[0].mac == kPeerMac);
  CHECK(t.counters().resolved == 1);
  CHECK(t.counters().frames_released == 2);
  ev.clear();

  r = t.resolve(kPeerIp, 500, 14, ev);
  CHECK(r.status == Resolve::kResolved);
  CHECK(r.mac == kPeerMac);
  CHECK(ev.empty());
  CHECK(t.find(kPeerIp)->state == NeighbourState::kReachable);
}

TEST_CASE("Unanswered resolution retries at the interval, then fails and drops", "[neigh]") {
  NeighbourTable t(small_config());
  std::vector<NeighbourEvent> ev;
  t.resolve(kPeerIp, 0, 1, ev);
  t.resolve(kPeerIp, 10, 2, ev);
  ev.clear();
  CHECK(t.next_deadline_ns() == kSec);

  t.poll(kSec - 1, ev);  // not yet due
  CHECK(ev.empty());
  t.poll(kSec, ev);
  CHECK(count(ev, Kind::kSendRequest) == 1);
  ev.clear();
  CHECK(t.next_deadline_ns() == 2 * kSec);
  t.poll(2 * kSec, ev);
  CHECK(count(ev, Kind::kSendRequest) == 1);  // third and last request
  ev.clear();
  CHECK(t.counters().requests_sent == 3);

  t.poll(3 * kSec, ev);  // max_requests sent, no answer
  REQUIRE(ev.size() == 2);
  CHECK(ev[0].kind == Kind::kDropQueued);
  CHECK(ev[0].frame == 1);
  CHECK(ev[1].frame == 2);
  CHECK(t.counters().resolve_failed == 1);
  CHECK(t.counters().failed_drops == 2);
  CHECK_FALSE(t.find(kPeerIp));
  CHECK(t.size() == 0);
  CHECK(t.next_deadline_ns() == UINT64_MAX);
}

TEST_CASE("Entries age out and are refreshed when used near expiry", "[neigh]") {
  NeighbourTable t(small_config());
  std::vector<NeighbourEvent> ev;
  t.resolve(kPeerIp, 0, kNoFrame, ev);
  t.learn(kPeerIp, kPeerMac, 0, false, ev);
  ev.clear();
  CHECK(t.find(kPeerIp)->deadline_ns == 30 * kSec);

  // Outside the refresh window: no request.
  t.resolve(kPeerIp, 20 * kSec, kNoFrame, ev);
  CHECK(ev.empty());
  // Inside it: one unicast request, rate-limited to one per retry interval.
  auto r = t.resolve(kPeerIp, 26 * kSec, kNoFrame, ev);
  CHECK(r.status == Resolve::kResolved);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == Kind::kSendRequest);
  CHECK(ev[0].mac == kPeerMac);
  t.resolve(kPeerIp, 26 * kSec + 10, kNoFrame, ev);
  CHECK(ev.size() == 1);
  t.resolve(kPeerIp, 27 * kSec, kNoFrame, ev);
  CHECK(ev.size() == 2);
  ev.clear();

  // The reply extends the lifetime.
  t.learn(kPeerIp, kPeerMac, 27 * kSec, false, ev);
  CHECK(t.find(kPeerIp)->deadline_ns == 57 * kSec);
  t.poll(56 * kSec, ev);
  CHECK(t.find(kPeerIp));
  CHECK_FALSE(t.find(kPeerIp)->stale);
  // Its lifetime out, unused: kept STALE (Linux's REACHABLE -> STALE), its MAC known.
  t.poll(57 * kSec, ev);
  REQUIRE(t.find(kPeerIp));
  CHECK(t.find(kPeerIp)->stale);
  CHECK(t.find(kPeerIp)->mac == kPeerMac);
  CHECK(t.counters().went_stale == 1);
  CHECK(t.counters().aged_out == 0);
  CHECK(ev.empty());
}

TEST_CASE("Static neighbours resolve at once, never age, and ignore ARP", "[neigh]") {
  NeighbourTable t(small_config());
  std::vector<NeighbourEvent> ev;
  REQUIRE(t.add_static(kGwIp, kGwMac, ev));
  auto r = t.resolve(kGwIp, 0, 5, ev);
  CHECK(r.status == Resolve::kResolved);
  CHECK(r.mac == kGwMac);
  t.learn(kGwIp, kPeerMac, 1, true, ev);  // a spoofed claim
  CHECK(t.find(kGwIp)->mac == kGwMac);
  CHECK(t.counters().static_conflicts == 1);
  t.poll(UINT64_MAX - 1, ev);
  CHECK(t.find(kGwIp)->state == NeighbourState::kStatic);
  CHECK(ev.empty());

  CHECK_FALSE(t.add_static(Ipv4Addr{}, kGwMac, ev));
  CHECK_FALSE(t.add_static(kPeerIp, MacAddr::broadcast(), ev));
  CHECK_FALSE(t.add_static(kPeerIp, MacAddr{}, ev));
  CHECK_FALSE(t.add_static(Ipv4Addr::from_octets(224, 0, 0, 1), kGwMac, ev));
}

TEST_CASE("A static entry added while resolving releases the queue", "[neigh]") {
  NeighbourTable t(small_config());
  std::vector<NeighbourEvent> ev;
  t.resolve(kPeerIp, 0, 7, ev);
  ev.clear();
  REQUIRE(t.add_static(kPeerIp, kPeerMac, ev));
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == Kind::kTransmitQueued);
  CHECK(ev[0].frame == 7);
}

TEST_CASE("learn creates entries only when asked, and never from bad addresses", "[neigh]") {
  NeighbourTable t(small_config());
  std::vector<NeighbourEvent> ev;
  t.learn(kPeerIp, kPeerMac, 0, false, ev);  // unsolicited reply: ignored
  CHECK_FALSE(t.find(kPeerIp));
  t.learn(kPeerIp, kPeerMac, 0, true, ev);  // request to us: merged in
  CHECK(t.find(kPeerIp)->state == NeighbourState::kReachable);
  t.learn(kGwIp, MacAddr::broadcast(), 0, true, ev);
  t.learn(kGwIp, MacAddr{}, 0, true, ev);
  t.learn(Ipv4Addr{}, kGwMac, 0, true, ev);
  t.learn(Ipv4Addr::from_octets(255, 255, 255, 255), kGwMac, 0, true, ev);
  CHECK(t.size() == 1);
  // A changed MAC is taken (the peer's NIC was replaced).
  t.learn(kPeerIp, kGwMac, 5, false, ev);
  CHECK(t.find(kPeerIp)->mac == kGwMac);
  CHECK(ev.empty());
}

TEST_CASE("A full table refuses new next hops and counts them", "[neigh]") {
  NeighbourTable t(small_config());
  std::vector<NeighbourEvent> ev;
  for (uint8_t i = 1; i <= 4; ++i) {
    CHECK(t.resolve(Ipv4Addr::from_octets(198, 18, 1, i), 0, i, ev).status == Resolve::kQueued);
  }
  CHECK(t.resolve(Ipv4Addr::from_octets(198, 18, 1, 5), 0, 5, ev).status == Resolve::kDropped);
  CHECK(t.counters().table_full_drops == 1);
  t.learn(Ipv4Addr::from_octets(198, 18, 1, 6), kPeerMac, 0, true, ev);
  CHECK(t.counters().table_full_drops == 2);
  CHECK_FALSE(t.add_static(Ipv4Addr::from_octets(198, 18, 1, 7), kGwMac, ev));
  // Removing one frees its slot; its queued frame is handed back.
  ev.clear();
  CHECK(t.remove(Ipv4Addr::from_octets(198, 18, 1, 2), ev));
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == Kind::kDropQueued);
  CHECK(ev[0].frame == 2);
  CHECK_FALSE(t.remove(Ipv4Addr::from_octets(198, 18, 1, 2), ev));
  CHECK(t.resolve(Ipv4Addr::from_octets(198, 18, 1, 5), 0, 5, ev).status == Resolve::kQueued);
  // Every other entry is still found after the deletion shifted probe chains.
  for (uint8_t i : {1, 3, 4, 5}) CHECK(t.find(Ipv4Addr::from_octets(198, 18, 1, i)));
}

TEST_CASE("Entries only a peer's request created are evicted, least recently used first",
          "[neigh]") {
  NeighbourTable t(small_config());
  std::vector<NeighbourEvent> ev;
  const auto ip = [](uint8_t i) { return Ipv4Addr::from_octets(198, 18, 1, i); };
  for (uint8_t i = 1; i <= 3; ++i) t.learn(ip(i), kPeerMac, i * kSec, true, ev);
  CHECK(t.find(ip(1))->evictable);
  CHECK(t.resolve(ip(10), 4 * kSec, 10, ev).status == Resolve::kQueued);  // the last free slot
  CHECK_FALSE(t.find(ip(10))->evictable);
  // Full: a next hop of ours replaces the oldest peer-created entry.
  CHECK(t.resolve(ip(11), 5 * kSec, 11, ev).status == Resolve::kQueued);
  CHECK_FALSE(t.find(ip(1)));
  CHECK(t.counters().evicted == 1);
  t.learn(ip(2), kPeerMac, 6 * kSec, true, ev);  // asked again: now more recent than .3
  CHECK(t.resolve(ip(12), 7 * kSec, 12, ev).status == Resolve::kQueued);
  CHECK_FALSE(t.find(ip(3)));
  CHECK(t.find(ip(2)));
  // Used by resolve(): ours now, never evicted.
  CHECK(t.resolve(ip(2), 8 * kSec, kNoFrame, ev).status == Resolve::kResolved);
  CHECK_FALSE(t.find(ip(2))->evictable);
  CHECK(t.resolve(ip(13), 9 * kSec, 13, ev).status == Resolve::kDropped);
  t.learn(ip(14), kPeerMac, 9 * kSec, true, ev);
  CHECK(t.counters().table_full_drops == 2);
  CHECK(t.counters().evicted == 2);
  CHECK(t.size() == 4);
  // Incomplete entries keep their queued frames.
  for (uint8_t i : {2, 10, 11, 12}) CHECK(t.find(ip(i)));
  CHECK(t.find(ip(10))->frames_queued == 1);
}

TEST_CASE("A request flood cannot evict static entries or ones we resolved", "[neigh]") {
  NeighbourTable t(small_config());
  std::vector<NeighbourEvent> ev;
  const auto ip = [](uint8_t i) { return Ipv4Addr::from_octets(198, 18, 1, i); };
  REQUIRE(t.add_static(ip(1), kGwMac, ev));
  CHECK(t.resolve(ip(2), 0, 2, ev).status == Resolve::kQueued);
  t.learn(ip(2), kPeerMac, kSec, false, ev);  // resolved: reachable, ours
  for (uint8_t i = 100; i < 200; ++i) t.learn(ip(i), kPeerMac, i * kSec, true, ev);
  CHECK(t.find(ip(1))->state == NeighbourState::kStatic);
  CHECK(t.find(ip(2))->state == NeighbourState::kReachable);
  CHECK(t.size() == 4);
  CHECK(t.find(ip(199)));  // the flood churns through the two evictable slots
  CHECK(t.find(ip(198)));
  CHECK(t.counters().evicted == 98);
  CHECK(t.counters().table_full_drops == 0);
}

TEST_CASE("An entry the caller keeps (its router) is never evicted", "[neigh]") {
  NeighbourTable t(small_config());
  std::vector<NeighbourEvent> ev;
  const auto ip = [](uint8_t i) { return Ipv4Addr::from_octets(198, 18, 1, i); };
  t.learn(ip(1), kGwMac, 0, true, ev);  // the router's own packet made it: evictable
  CHECK(t.find(ip(1))->evictable);
  t.keep(ip(1));
  t.keep(ip(2));  // no entry: nothing made
  CHECK_FALSE(t.find(ip(1))->evictable);
  CHECK_FALSE(t.find(ip(2)));
  for (uint8_t i = 100; i < 200; ++i) t.learn(ip(i), kPeerMac, i * kSec, true, ev);
  CHECK(t.find(ip(1))->state == NeighbourState::kReachable);
  CHECK(t.find(ip(1))->mac == kGwMac);
  CHECK(t.counters().evicted == 97);  // the flood churns through the other three slots
  CHECK(t.counters().table_full_drops == 0);
}

TEST_CASE("An entry the caller releases (a former router) is evictable again", "[neigh]") {
  NeighbourTable t(small_config());
  std::vector<NeighbourEvent> ev;
  const auto ip = [](uint8_t i) { return Ipv4Addr::from_octets(198, 18, 1, i); };
  t.learn(ip(1), kGwMac, 0, true, ev);  // kept, as a router
  t.keep(ip(1));
  CHECK(t.resolve(ip(2), 0, 2, ev).status == Resolve::kQueued);
  t.learn(ip(2), kPeerMac, 0, false, ev);  // resolved by us, then released: ours no more
  REQUIRE(t.add_static(ip(3), kPeerMac, ev));
  t.release(ip(1));
  t.release(ip(2));
  t.release(ip(3));  // static: untouched
  t.release(ip(4));  // no entry: nothing made
  CHECK(t.find(ip(1))->evictable);
  CHECK(t.find(ip(2))->evictable);
  CHECK(t.find(ip(3))->state == NeighbourState::kStatic);
  CHECK_FALSE(t.find(ip(3))->evictable);
  CHECK_FALSE(t.find(ip(4)));
  CHECK(t.size() == 3);
  // resolve() uses ip(2) again: ours again; ip(1) goes first in a flood.
  CHECK(t.resolve(ip(2), kSec, kNoFrame, ev).status == Resolve::kResolved);
  CHECK_FALSE(t.find(ip(2))->evictable);
  t.learn(ip(100), kPeerMac, 2 * kSec, true, ev);  // fills the fourth slot
  t.learn(ip(101), kPeerMac, 3 * kSec, true, ev);  // evicts ip(1), the older evictable one
  CHECK_FALSE(t.find(ip(1)));
  CHECK(t.find(ip(100)));
  CHECK(t.find(ip(2)));
  CHECK(t.counters().evicted == 1);
  // keep() after release() protects it again.
  t.release(ip(2));
  t.keep(ip(2));
  for (uint8_t i = 110; i < 120; ++i) t.learn(ip(i), kPeerMac, 4 * kSec + i, true, ev);
  CHECK(t.find(ip(2)));
  CHECK(t.find(ip(3)));
  CHECK(t.counters().table_full_drops == 0);
}

TEST_CASE("Hash table survives churn: every handle comes back exactly once", "[neigh]") {
  NeighbourConfig c = small_config();
  c.capacity = 64;
  c.max_pending_per_hop = 3;
  NeighbourTable t(c);
  std::vector<NeighbourEvent> ev;
  std::vector<int> seen(100000, 0);
  FrameHandle next = 0;
  uint64_t now = 0;
  uint32_t rng = 12345;
  auto rand = [&] { return rng = rng * 1103515245u + 12345u, rng >> 8; };
  size_t given = 0;
  for (int step = 0; step < 20000; ++step) {
    now += rand() % (kSec / 4);
    const Ipv4Addr ip = Ipv4Addr::from_octets(198, 18, static_cast<uint8_t>(rand() % 2),
                                              static_cast<uint8_t>(1 + rand() % 100));
    switch (rand() % 4) {
      case 0:
      case 1: {
        const FrameHandle h = next++;
        const auto r = t.resolve(ip, now, h, ev);
        ++given;
        if (r.status != Resolve::kQueued) ++seen[h];  // not taken: back to the caller now
        break;
      }
      case 2:
        t.learn(ip, kPeerMac, now, rand() % 2, ev);
        break;
      case 3:
        t.poll(now, ev);
        break;
    }
    for (const auto& e : ev) {
      if (e.kind != Kind::kSendRequest) ++seen[e.frame];
    }
    ev.clear();
    REQUIRE(t.size() <= c.capacity);
  }
  // Drain: remove every remaining entry.
  for (uint8_t a = 0; a < 2; ++a) {
    for (int i = 1; i <= 100; ++i) t.remove(Ipv4Addr::from_octets(198, 18, a, uint8_t(i)), ev);
  }
  for (const auto& e : ev) {
    if (e.kind != Kind::kSendRequest) ++seen[e.frame];
  }
  CHECK(t.size() == 0);
  for (FrameHandle h = 0; h < next; ++h) {
    if (seen[h] != 1) FAIL("handle " << h << " returned " << seen[h] << " times");
  }
  CHECK(given == next);
}

TEST_CASE("Bad neighbour configuration is rejected at setup", "[neigh]") {
  NeighbourConfig c = small_config();
  c.capacity = 0;
  CHECK_THROWS_AS(NeighbourTable(c), std::invalid_argument);
  c = small_config();
  c.max_requests = 0;
  CHECK_THROWS_AS(NeighbourTable(c), std::invalid_argument);
  c = small_config();
  c.retry_interval_ns = 0;
  CHECK_THROWS_AS(NeighbourTable(c), std::invalid_argument);
}

TEST_CASE("Zero-length per-hop queue still resolves but takes no frame", "[neigh]") {
  NeighbourConfig c = small_config();
  c.max_pending_per_hop = 0;
  NeighbourTable t(c);
  std::vector<NeighbourEvent> ev;
  CHECK(t.resolve(kPeerIp, 0, 3, ev).status == Resolve::kDropped);
  CHECK(count(ev, Kind::kSendRequest) == 1);
  CHECK(t.resolve(kPeerIp, 1, 4, ev).status == Resolve::kDropped);
  CHECK(t.counters().queue_overflow_drops == 2);
}

TEST_CASE("The IPv6 table resolves, learns and fails like the IPv4 one", "[neigh][ipv6]") {
  NeighbourTable6 t(small_config());
  std::vector<NeighbourEvent6> ev;
  const Ipv6Addr peer = Ipv6Addr::from_groups({0xfe80, 0, 0, 0, 0x200, 0xff, 0xfe00, 2});
  const Ipv6Addr other = Ipv6Addr::from_groups({0xfe80, 0, 0, 0, 0x200, 0xff, 0xfe00, 3});
  CHECK(t.resolve(peer, 0, 21, ev).status == NeighbourTable6::Resolve::kQueued);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == NeighbourEvent6::Kind::kSendRequest);
  CHECK(ev[0].ip == peer);
  CHECK(ev[0].mac.is_broadcast());
  ev.clear();
  t.learn(peer, kPeerMac, 10, /*create=*/false, ev);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == Kind::kTransmitQueued);
  CHECK(ev[0].frame == 21);
  CHECK(ev[0].ip == peer);
  CHECK(t.resolve(peer, 20, kNoFrame, ev).mac == kPeerMac);
  ev.clear();
  // No entry is created without `create`; multicast/unspecified never.
  t.learn(other, kGwMac, 30, false, ev);
  CHECK_FALSE(t.find(other));
  t.learn(Ipv6Addr::all_nodes(), kGwMac, 30, true, ev);
  t.learn(Ipv6Addr{}, kGwMac, 30, true, ev);
  CHECK(t.size() == 1);
  CHECK(t.resolve(Ipv6Addr::all_nodes(), 30, 5, ev).status == NeighbourTable6::Resolve::kDropped);
  // Failure after max_requests drops the queue.
  CHECK(t.resolve(other, 0, 22, ev).status == NeighbourTable6::Resolve::kQueued);
  ev.clear();
  t.poll(kSec, ev);
  t.poll(2 * kSec, ev);
  t.poll(3 * kSec, ev);
  REQUIRE(ev.size() == 3);
  CHECK(ev[2].kind == Kind::kDropQueued);
  CHECK(ev[2].frame == 22);
  CHECK_FALSE(t.find(other));
  CHECK(t.counters().resolve_failed == 1);
}

TEST_CASE("The IPv6 table fills and empties with addresses that differ in few bits",
          "[neigh][ipv6]") {
  NeighbourConfig c = small_config();
  c.capacity = 64;
  NeighbourTable6 t(c);
  std::vector<NeighbourEvent6> ev;
  for (uint16_t i = 1; i <= 64; ++i) {
    REQUIRE(t.add_static(Ipv6Addr::from_groups({0x2001, 0xdb8, 0, 0, 0, 0, 0, i}), kPeerMac, ev));
  }
  CHECK_FALSE(t.add_static(Ipv6Addr::from_groups({0x2001, 0xdb8, 0, 0, 0, 0, 1, 0}), kPeerMac, ev));
  for (uint16_t i = 1; i <= 64; i += 2) {
    REQUIRE(t.remove(Ipv6Addr::from_groups({0x2001, 0xdb8, 0, 0, 0, 0, 0, i}), ev));
  }
  for (uint16_t i = 1; i <= 64; ++i) {
    CHECK(t.find(Ipv6Addr::from_groups({0x2001, 0xdb8, 0, 0, 0, 0, 0, i})).has_value() ==
          (i % 2 == 0));
  }
  CHECK(t.size() == 32);
}

TEST_CASE("The generation moves when a MAC the table gave out may be stale, not on a refresh",
          "[neigh][generation]") {
  NeighbourTable t(small_config());  // 4 entries, reachable 30 s
  std::vector<NeighbourEvent> ev;
  const auto ip = [](uint8_t i) { return Ipv4Addr::from_octets(198, 18, 1, i); };
  const MacAddr moved{{0x02, 0, 0, 0, 0, 0x33}};
  CHECK(t.generation() == 0);

  // Resolving, and the reply completing it: no MAC was given out before.
  CHECK(t.resolve(ip(1), 0, 1, ev).status == Resolve::kQueued);
  t.learn(ip(1), kPeerMac, kSec, false, ev);
  CHECK(t.resolve(ip(1), kSec, kNoFrame, ev).mac == kPeerMac);
  CHECK(t.generation() == 0);
  // The same MAC again (every ARP of a busy peer), created or not: a refresh only.
  t.learn(ip(1), kPeerMac, 2 * kSec, false, ev);
  t.learn(ip(1), kPeerMac, 3 * kSec, true, ev);
  CHECK(t.find(ip(1))->deadline_ns == 33 * kSec);
  CHECK(t.generation() == 0);
  // keep()/release() change who may evict it, not its MAC.
  t.keep(ip(1));
  t.release(ip(1));
  t.keep(ip(1));
  CHECK(t.generation() == 0);

  // Another MAC for the same address (a gratuitous ARP, a new NIC): moves.
  t.learn(ip(1), moved, 4 * kSec, false, ev);
  CHECK(t.find(ip(1))->mac == moved);
  const uint64_t after_move = t.generation();
  CHECK(after_move > 0);
  t.learn(ip(1), moved, 5 * kSec, false, ev);  // then the new one refreshed: no move
  CHECK(t.generation() == after_move);

  // A resolution that fails gave out nothing: no move.
  CHECK(t.resolve(ip(2), 5 * kSec, 2, ev).status == Resolve::kQueued);
  for (uint64_t s = 6; s <= 8; ++s) t.poll(s * kSec, ev);
  REQUIRE_FALSE(t.find(ip(2)));
  CHECK(t.counters().resolve_failed == 1);
  CHECK(t.generation() == after_move);

  // Aging out (used in its last window, the probe not answered): moves.
  t.resolve(ip(1), 31 * kSec, kNoFrame, ev);
  t.poll(35 * kSec, ev);
  REQUIRE_FALSE(t.find(ip(1)));
  CHECK(t.counters().aged_out == 1);
  const uint64_t after_age = t.generation();
  CHECK(after_age > after_move);

  // Eviction: a peer-created entry whose MAC was given out (used, then released) replaced by
  // a new one.
  t.learn(ip(10), kPeerMac, 40 * kSec + 10, true, ev);
  CHECK(t.resolve(ip(10), 40 * kSec + 10, kNoFrame, ev).mac == kPeerMac);
  t.release(ip(10));
  for (uint8_t i = 11; i < 14; ++i) t.learn(ip(i), kPeerMac, 40 * kSec + i, true, ev);
  CHECK(t.size() == 4);
  CHECK(t.generation() == after_age);  // created, none replaced yet
  CHECK(t.resolve(ip(11), 40 * kSec + 21, kNoFrame, ev).mac == kPeerMac);
  CHECK(t.resolve(ip(20), 41 * kSec, 20, ev).status == Resolve::kQueued);
  CHECK(t.counters().evicted == 1);
  CHECK_FALSE(t.find(ip(10)));
  const uint64_t after_evict = t.generation();
  CHECK(after_evict > after_age);

  // remove(): moves for a reachable entry given out, not for an incomplete one.
  CHECK(t.remove(ip(11), ev));
  const uint64_t after_remove = t.generation();
  CHECK(after_remove > after_evict);
  CHECK(t.remove(ip(20), ev));  // incomplete: its frame is dropped, no MAC was given out
  CHECK(t.generation() == after_remove);

  // Static: a new entry or the same MAC does not move it, another MAC for a known one does;
  // ARP claiming a static address is ignored.
  REQUIRE(t.add_static(ip(30), kGwMac, ev));
  REQUIRE(t.add_static(ip(30), kGwMac, ev));
  CHECK(t.resolve(ip(30), 42 * kSec, kNoFrame, ev).mac == kGwMac);
  t.learn(ip(30), moved, 42 * kSec, false, ev);
  CHECK(t.counters().static_conflicts == 1);
  CHECK(t.generation() == after_remove);
  REQUIRE(t.add_static(ip(30), moved, ev));
  const uint64_t after_static = t.generation();
  CHECK(after_static > after_remove);
  CHECK(t.resolve(ip(12), 42 * kSec, kNoFrame, ev).mac == kPeerMac);
  REQUIRE(t.add_static(ip(12), kGwMac, ev));  // replaces a reachable entry's MAC
  CHECK(t.generation() > after_static);
}

TEST_CASE("A reachable entry put in doubt is probed on its next use and ages out unconfirmed",
          "[neigh][generation]") {
  NeighbourTable t(small_config());  // reachable 30 s, refresh window 5 s, retry 1 s
  std::vector<NeighbourEvent> ev;
  const Ipv4Addr ip = Ipv4Addr::from_octets(198, 18, 1, 1);
  const Ipv4Addr other = Ipv4Addr::from_octets(198, 18, 1, 2);
  CHECK(t.resolve(ip, 0, kNoFrame, ev).status == Resolve::kQueued);
  t.learn(ip, kPeerMac, kSec, false, ev);
  REQUIRE(t.find(ip)->deadline_ns == 31 * kSec);
  CHECK(t.resolve(ip, kSec, kNoFrame, ev).mac == kPeerMac);  // a caller holds its MAC
  const uint64_t gen = t.generation();

  // RFC 4861 7.2.5's REACHABLE -> STALE: the MAC stays, the entry is in its last window.
  t.mark_stale(ip, 2 * kSec);
  CHECK(t.find(ip)->mac == kPeerMac);
  CHECK(t.find(ip)->state == NeighbourState::kReachable);
  CHECK(t.find(ip)->deadline_ns == 7 * kSec);
  CHECK(t.next_deadline_ns() <= 7 * kSec);  // (may be early, never late)
  CHECK(t.counters().marked_stale == 1);
  CHECK(t.generation() == gen + 1);  // callers look the entry up again, and so probe it
  // Already in doubt: nothing more.
  t.mark_stale(ip, 3 * kSec);
  CHECK(t.find(ip)->deadline_ns == 7 * kSec);
  CHECK(t.counters().marked_stale == 1);
  CHECK(t.generation() == gen + 1);

  // The next use sends a unicast request to the cached MAC at once.
  ev.clear();
  const auto r = t.resolve(ip, 3 * kSec, kNoFrame, ev);
  CHECK(r.status == Resolve::kResolved);
  CHECK(r.mac == kPeerMac);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == Kind::kSendRequest);
  CHECK(ev[0].mac == kPeerMac);
  // Answered: reachable for a full lifetime again, no generation move.
  t.learn(ip, kPeerMac, 4 * kSec, false, ev);
  CHECK(t.find(ip)->deadline_ns == 34 * kSec);
  CHECK(t.generation() == gen + 1);

  // Used and not answered: it ages out at the end of the window, and the next use resolves
  // afresh. (Unused, it would be kept STALE.)
  t.mark_stale(ip, 10 * kSec);
  CHECK(t.generation() == gen + 2);
  t.resolve(ip, 11 * kSec, kNoFrame, ev);
  t.poll(14 * kSec, ev);
  CHECK(t.find(ip));
  t.poll(15 * kSec, ev);
  CHECK_FALSE(t.find(ip));
  CHECK(t.generation() == gen + 3);

  // Incomplete, static and unknown entries are untouched.
  CHECK(t.resolve(ip, 16 * kSec, kNoFrame, ev).status == Resolve::kQueued);
  REQUIRE(t.add_static(other, kGwMac, ev));
  const uint64_t before = t.generation();
  t.mark_stale(ip, 16 * kSec);
  t.mark_stale(other, 16 * kSec);
  t.mark_stale(Ipv4Addr::from_octets(198, 18, 1, 9), 16 * kSec);
  CHECK(t.find(ip)->state == NeighbourState::kIncomplete);
  CHECK(t.find(other)->deadline_ns == 0);
  CHECK(t.counters().marked_stale == 2);
  CHECK(t.generation() == before);
}

TEST_CASE("Without override, another MAC inside the locktime of the last change is ignored",
          "[neigh][generation]") {
  NeighbourTable t(small_config());  // locktime 1 s (the default)
  std::vector<NeighbourEvent> ev;
  const Ipv4Addr ip = Ipv4Addr::from_octets(198, 18, 1, 1);
  const MacAddr second{{0x02, 0, 0, 0, 0, 0x33}};
  CHECK(t.resolve(ip, 0, 1, ev).status == Resolve::kQueued);
  // Two answers back to back (a proxy agent and the host): the first one wins.
  t.learn(ip, kPeerMac, 100, false, ev, /*override=*/false);
  REQUIRE(t.find(ip)->state == NeighbourState::kReachable);
  const uint64_t gen = t.generation();
  t.learn(ip, second, 200, false, ev, /*override=*/false);
  CHECK(t.find(ip)->mac == kPeerMac);
  CHECK(t.counters().locktime_ignored == 1);
  CHECK(t.generation() == gen);
  // The same MAC inside the locktime is a refresh, as ever.
  t.learn(ip, kPeerMac, 300, false, ev, /*override=*/false);
  CHECK(t.find(ip)->deadline_ns == 300 + 30 * kSec);
  CHECK(t.counters().locktime_ignored == 1);
  // A refresh does not restart the locktime: after it, another MAC is taken.
  t.learn(ip, second, kSec + 100, false, ev, /*override=*/false);
  CHECK(t.find(ip)->mac == second);
  CHECK(t.generation() == gen + 1);
  // That change starts it again; an overriding learn (a gratuitous ARP) ignores it.
  t.learn(ip, kPeerMac, kSec + 200, false, ev, /*override=*/false);
  CHECK(t.find(ip)->mac == second);
  CHECK(t.counters().locktime_ignored == 2);
  t.learn(ip, kPeerMac, kSec + 300, false, ev);
  CHECK(t.find(ip)->mac == kPeerMac);
  CHECK(t.generation() == gen + 2);
}

TEST_CASE(
    "A MAC learned without proof of reachability is STALE when new; the known one changes "
    "nothing",
    "[neigh][generation]") {
  NeighbourTable t(small_config());  // reachable 30 s, refresh window 5 s, retry 1 s
  std::vector<NeighbourEvent> ev;
  constexpr auto kStale = NeighbourProof::kStale;
  const Ipv4Addr asker = Ipv4Addr::from_octets(198, 18, 1, 1);
  const Ipv4Addr hop = Ipv4Addr::from_octets(198, 18, 1, 2);
  const Ipv4Addr waiting = Ipv4Addr::from_octets(198, 18, 1, 3);
  const MacAddr moved{{0x02, 0, 0, 0, 0, 0x33}};

  // A peer's request makes its entry STALE (RFC 4861 7.2.3, Linux's neigh_event_ns): in its
  // last window, so the first use probes it (unicast) while using the MAC.
  t.learn(asker, kPeerMac, kSec, /*create=*/true, ev, /*override=*/true, kStale);
  REQUIRE(t.find(asker));
  CHECK(t.find(asker)->deadline_ns == 6 * kSec);
  CHECK(t.find(asker)->evictable);
  CHECK(t.counters().learned_stale == 1);
  auto r = t.resolve(asker, 2 * kSec, kNoFrame, ev);
  CHECK(r.status == Resolve::kResolved);
  CHECK(r.mac == kPeerMac);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == Kind::kSendRequest);
  CHECK(ev[0].mac == kPeerMac);
  ev.clear();
  // Its answer proves it: reachable for a lifetime.
  t.learn(asker, kPeerMac, 2 * kSec, false, ev);
  CHECK(t.find(asker)->deadline_ns == 32 * kSec);

  // A reachable entry: the same MAC without proof leaves it as it is (no longer lifetime).
  CHECK(t.resolve(hop, 0, kNoFrame, ev).status == Resolve::kQueued);
  t.learn(hop, kPeerMac, 0, false, ev);
  REQUIRE(t.find(hop)->deadline_ns == 30 * kSec);
  CHECK(t.resolve(hop, 0, kNoFrame, ev).mac == kPeerMac);  // a caller holds its MAC
  const uint64_t gen = t.generation();
  t.learn(hop, kPeerMac, 10 * kSec, false, ev, true, kStale);
  CHECK(t.find(hop)->deadline_ns == 30 * kSec);
  CHECK(t.generation() == gen);
  CHECK(t.counters().learned_stale == 1);
  // A new MAC without proof is taken, STALE: the generation moves, the next use probes it.
  t.learn(hop, moved, 11 * kSec, false, ev, true, kStale);
  CHECK(t.find(hop)->mac == moved);
  CHECK(t.find(hop)->deadline_ns == 16 * kSec);
  CHECK(t.generation() == gen + 1);
  CHECK(t.counters().learned_stale == 2);
  ev.clear();
  CHECK(t.resolve(hop, 12 * kSec, kNoFrame, ev).mac == moved);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].mac == moved);
  // Unconfirmed, it ages out at the end of the window.
  t.poll(16 * kSec, ev);
  CHECK_FALSE(t.find(hop));

  // An incomplete entry takes the MAC (its frames go) and is STALE.
  ev.clear();
  CHECK(t.resolve(waiting, 20 * kSec, 7, ev).status == Resolve::kQueued);
  ev.clear();
  t.learn(waiting, kGwMac, 20 * kSec + 10, false, ev, true, kStale);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == Kind::kTransmitQueued);
  CHECK(ev[0].mac == kGwMac);
  CHECK(t.find(waiting)->deadline_ns == 25 * kSec + 10);
  CHECK(t.counters().resolved == 2);  // hop, waiting (asker was never resolving)
  ev.clear();
  CHECK(t.resolve(waiting, 21 * kSec, kNoFrame, ev).status == Resolve::kResolved);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == Kind::kSendRequest);
  CHECK(ev[0].mac == kGwMac);
}

TEST_CASE(
    "One reachable time per table, drawn from [0.5, 1.5) x reachable_ns: every entry "
    "confirmed until the next draw lives it",
    "[neigh][reach-time]") {
  // RFC 4861 6.3.2's ReachableTime; Linux keeps one per neigh_parms (an interface's ARP or NDP
  // parameters), drawn by neigh_rand_reach_time, and neigh_update arms a confirmed entry's
  // timer for it: entries are not drawn one by one.
  NeighbourConfig c = small_config();  // reachable 30 s
  c.randomize_reachable = true;
  c.random_seed = 42;
  NeighbourTable t(c);
  const uint64_t drawn = t.reachable_time_ns();
  CHECK(drawn >= 15 * kSec);
  CHECK(drawn < 45 * kSec);
  std::vector<NeighbourEvent> ev;
  const auto ip = [](uint8_t i) { return Ipv4Addr::from_octets(198, 18, 1, i); };
  for (uint8_t i = 1; i <= 4; ++i) {
    const uint64_t now = i * kSec;
    t.resolve(ip(i), now, kNoFrame, ev);
    t.learn(ip(i), kPeerMac, now, false, ev);
    CHECK(t.find(ip(i))->deadline_ns == now + drawn);
  }
  // Confirmed again: the same time from then.
  t.learn(ip(1), kPeerMac, 10 * kSec, false, ev);
  CHECK(t.find(ip(1))->deadline_ns == 10 * kSec + drawn);
  CHECK(t.reachable_time_ns() == drawn);
  // Without randomisation the time is the base exactly.
  c.randomize_reachable = false;
  CHECK(NeighbourTable(c).reachable_time_ns() == 30 * kSec);
}

TEST_CASE("The table's reachable time is redrawn every 300 s, uniformly and repeatably",
          "[neigh][reach-time]") {
  // Linux's neigh_periodic_work draws each neigh_parms' reachable_time again from its
  // BASE_REACHABLE_TIME once 300 s have passed since the last draw.
  NeighbourConfig c = small_config();  // reachable 30 s
  c.randomize_reachable = true;
  c.random_seed = 42;
  STATIC_REQUIRE(kReachableRedrawNs == 300 * kSec);
  SECTION("the period starts with the first time the table is given; a draw has a timer") {
    NeighbourTable t(c);
    std::vector<NeighbourEvent> ev;
    const uint64_t first = t.reachable_time_ns();
    t.resolve(kPeerIp, 10 * kSec, kNoFrame, ev);
    t.learn(kPeerIp, kPeerMac, 10 * kSec, false, ev);
    REQUIRE(t.find(kPeerIp)->deadline_ns == 10 * kSec + first);
    t.poll(10 * kSec + first, ev);  // unused: kept STALE, no timer of its own
    REQUIRE(t.find(kPeerIp)->stale);
    CHECK(t.next_deadline_ns() == 310 * kSec);  // the draw's
    t.poll(310 * kSec - 1, ev);
    CHECK(t.reachable_time_ns() == first);
    t.poll(310 * kSec, ev);
    const uint64_t second = t.reachable_time_ns();
    CHECK(second != first);
    CHECK(second >= 15 * kSec);
    CHECK(second < 45 * kSec);
    CHECK(t.next_deadline_ns() == 610 * kSec);
    // A confirmation from now on lives the new time.
    t.learn(kPeerIp, kPeerMac, 311 * kSec, false, ev);
    CHECK(t.find(kPeerIp)->deadline_ns == 311 * kSec + second);
    // A confirmation past the draw's time draws first (no poll in between).
    t.learn(kPeerIp, kPeerMac, 700 * kSec, false, ev);
    CHECK(t.reachable_time_ns() != second);
    CHECK(t.find(kPeerIp)->deadline_ns == 700 * kSec + t.reachable_time_ns());
    CHECK(t.next_deadline_ns() <= 1000 * kSec);
  }
  SECTION(
      "a reachable entry keeps the end it was given, or lives to its confirmation plus the "
      "new time when that is later") {
    // As with an RA's new time: Linux's timer for the entry stays, and neigh_timer_handler
    // compares confirmed + the reachable time of then when it runs.
    NeighbourTable t(c);
    std::vector<NeighbourEvent> ev;
    t.poll(0, ev);  // the period starts: draws at 300 s, 600 s, ...
    bool longer = false;
    bool shorter = false;
    for (uint64_t k = 1; k <= 20; ++k) {
      const uint64_t draw_at = k * kReachableRedrawNs;
      const uint64_t before = t.reachable_time_ns();
      t.learn(kPeerIp, kPeerMac, draw_at - 5 * kSec, /*create=*/true, ev);
      t.keep(kPeerIp);
      REQUIRE(t.find(kPeerIp)->deadline_ns == draw_at - 5 * kSec + before);
      t.poll(draw_at, ev);
      const uint64_t after = t.reachable_time_ns();
      (after > before ? longer : shorter) = true;
      CHECK(t.find(kPeerIp)->deadline_ns == draw_at - 5 * kSec + std::max(before, after));
      t.poll(draw_at - 5 * kSec + std::max(before, after) - 1, ev);
      CHECK_FALSE(t.find(kPeerIp)->stale);
      t.poll(draw_at - 5 * kSec + std::max(before, after), ev);
      CHECK(t.find(kPeerIp)->stale);
    }
    CHECK(longer);
    CHECK(shorter);
  }
  SECTION("the draws spread over [0.5, 1.5) x reachable_ns, the same for the same seed") {
    const auto draws = [](NeighbourConfig cc) {
      NeighbourTable t(cc);
      std::vector<NeighbourEvent> ev;
      std::vector<uint64_t> out;
      for (uint64_t k = 0; k < 400; ++k) {
        t.poll(k * kReachableRedrawNs, ev);
        out.push_back(t.reachable_time_ns());
      }
      return out;
    };
    const std::vector<uint64_t> a = draws(c);
    uint64_t lo = UINT64_MAX;
    uint64_t hi = 0;
    double sum = 0;
    for (uint64_t d : a) {
      CHECK(d >= 15 * kSec);
      CHECK(d < 45 * kSec);
      lo = std::min(lo, d);
      hi = std::max(hi, d);
      sum += static_cast<double>(d);
    }
    // 400 draws (the first at construction): the extremes within 1 s of the ends.
    CHECK(std::set<uint64_t>(a.begin(), a.end()).size() == 400);
    CHECK(lo < 16 * kSec);
    CHECK(hi > 44 * kSec);
    CHECK(sum / 400 > 28.5 * kSec);
    CHECK(sum / 400 < 31.5 * kSec);
    CHECK(draws(c) == a);
    c.random_seed = 43;
    CHECK(draws(c) != a);
  }
  SECTION("without randomisation nothing is drawn and there is no timer for it") {
    c.randomize_reachable = false;
    NeighbourTable t(c);
    std::vector<NeighbourEvent> ev;
    t.resolve(kPeerIp, 0, kNoFrame, ev);
    t.learn(kPeerIp, kPeerMac, 0, false, ev);
    t.poll(30 * kSec, ev);
    REQUIRE(t.find(kPeerIp)->stale);
    CHECK(t.next_deadline_ns() == UINT64_MAX);
    t.poll(1000 * kSec, ev);
    CHECK(t.reachable_time_ns() == 30 * kSec);
  }
}

TEST_CASE(
    "A Router Advertisement's timers: a reachable entry is judged against the new reachable "
    "time when its lifetime set at its confirmation ends, the request interval applies from the "
    "next request",
    "[neigh][ra-timers]") {
  // Linux: ndisc_router_discovery sets the interface's BASE_REACHABLE_TIME and reachable_time
  // and touches no entry's timer; neigh_update armed a REACHABLE entry's timer for its
  // confirmation plus the reachable time of then, and when it runs neigh_timer_handler keeps
  // the entry REACHABLE until confirmed + the reachable time of now (re-arming it for then),
  // else it goes STALE (or DELAY, when used). So a shorter time takes no reachable entry's
  // time away, and a longer one lengthens it.
  std::vector<NeighbourEvent> ev;
  const Ipv4Addr doubted = Ipv4Addr::from_octets(198, 18, 1, 2);
  const auto confirmed_at_0 = [&](NeighbourTable& t) {
    t.resolve(kPeerIp, 0, kNoFrame, ev);
    t.learn(kPeerIp, kPeerMac, 0, false, ev);
    REQUIRE(t.find(kPeerIp)->deadline_ns == 30 * kSec);
  };
  const auto stale_at = [&](NeighbourTable& t, uint64_t expiry) {
    t.poll(expiry - 1, ev);
    REQUIRE(t.find(kPeerIp));
    CHECK_FALSE(t.find(kPeerIp)->stale);
    const uint64_t went_stale = t.counters().went_stale;
    t.poll(expiry, ev);
    REQUIRE(t.find(kPeerIp));
    CHECK(t.find(kPeerIp)->stale);
    CHECK(t.counters().went_stale == went_stale + 1);
    CHECK(t.counters().aged_out == 0);
  };
  SECTION("shorter: the entry keeps its expiry, and goes STALE then") {
    NeighbourTable t(small_config());  // reachable 30 s, retry 1 s, window 5 s, exact lifetimes
    confirmed_at_0(t);
    t.learn(doubted, kGwMac, 0, /*create=*/true, ev, true, NeighbourProof::kStale);
    t.set_reachable_ns(10 * kSec, kSec);
    t.set_reachable_ns(0, kSec);  // unspecified: unchanged
    CHECK(t.config().reachable_ns == 10 * kSec);
    CHECK(t.find(kPeerIp)->deadline_ns == 30 * kSec);
    CHECK(t.find(doubted)->deadline_ns == 5 * kSec);  // its STALE window stays
    t.poll(10 * kSec, ev);
    stale_at(t, 30 * kSec);
    // A confirmation from now on lives the new time.
    t.learn(kPeerIp, kPeerMac, 31 * kSec, false, ev);
    CHECK(t.find(kPeerIp)->deadline_ns == 41 * kSec);
  }
  SECTION("longer: the entry lives from its confirmation the new time, out of its last window") {
    NeighbourTable t(small_config());
    confirmed_at_0(t);
    t.set_reachable_ns(40 * kSec, 7 * kSec);
    CHECK(t.find(kPeerIp)->deadline_ns == 40 * kSec);
    ev.clear();
    t.resolve(kPeerIp, 27 * kSec, kNoFrame, ev);  // was its last window: no probe now
    CHECK(ev.empty());
    stale_at(t, 40 * kSec);
  }
  SECTION("longer, then shorter before the entry's first expiry: that expiry again") {
    NeighbourTable t(small_config());
    confirmed_at_0(t);
    t.set_reachable_ns(60 * kSec, kSec);
    CHECK(t.find(kPeerIp)->deadline_ns == 60 * kSec);
    t.set_reachable_ns(10 * kSec, 2 * kSec);
    CHECK(t.find(kPeerIp)->deadline_ns == 30 * kSec);
    stale_at(t, 30 * kSec);
  }
  SECTION("longer, then shorter after the first expiry: the time the entry was given then") {
    NeighbourTable t(small_config());
    confirmed_at_0(t);
    t.set_reachable_ns(60 * kSec, kSec);
    t.poll(30 * kSec, ev);  // Linux's timer runs: alive until 60 s, re-armed for then
    REQUIRE(t.find(kPeerIp));
    CHECK_FALSE(t.find(kPeerIp)->stale);
    CHECK(t.next_deadline_ns() == 60 * kSec);
    t.set_reachable_ns(10 * kSec, 40 * kSec);
    CHECK(t.find(kPeerIp)->deadline_ns == 60 * kSec);
    stale_at(t, 60 * kSec);
  }
  SECTION("the request interval: from each entry's next request") {
    NeighbourTable t(small_config());
    t.set_retry_interval_ns(3 * kSec);
    t.set_retry_interval_ns(0);  // unspecified: unchanged
    CHECK(t.config().retry_interval_ns == 3 * kSec);
    CHECK(t.resolve(kPeerIp, 41 * kSec, kNoFrame, ev).status == Resolve::kQueued);
    CHECK(t.find(kPeerIp)->deadline_ns == 44 * kSec);
    t.poll(44 * kSec, ev);
    CHECK(t.find(kPeerIp)->requests_sent == 2);
    CHECK(t.find(kPeerIp)->deadline_ns == 47 * kSec);
  }
}

TEST_CASE("A new base reachable time draws the table's reachable time again at once",
          "[neigh][ra-timers][reach-time]") {
  // Linux's ndisc_router_discovery: an RA's Reachable Time other than BASE_REACHABLE_TIME
  // becomes it, and reachable_time is drawn from it then (neigh_rand_reach_time).
  NeighbourConfig c = small_config();
  c.randomize_reachable = true;
  c.random_seed = 7;
  NeighbourTable t(c);  // reachable 30 s: drawn from [15, 45) s
  std::vector<NeighbourEvent> ev;
  const Ipv4Addr later = Ipv4Addr::from_octets(198, 18, 1, 2);
  const uint64_t first = t.reachable_time_ns();
  t.resolve(kPeerIp, 0, kNoFrame, ev);
  t.learn(kPeerIp, kPeerMac, 2 * kSec, false, ev);
  REQUIRE(t.find(kPeerIp)->deadline_ns == 2 * kSec + first);
  // Twice the base: drawn from [30, 90) s; the entry lives to its confirmation plus that, when
  // later than the end it was given.
  t.set_reachable_ns(60 * kSec, 3 * kSec);
  CHECK(t.config().reachable_ns == 60 * kSec);
  const uint64_t second = t.reachable_time_ns();
  CHECK(second >= 30 * kSec);
  CHECK(second < 90 * kSec);
  CHECK(t.find(kPeerIp)->deadline_ns == 2 * kSec + std::max(first, second));
  // Confirmed from now on: the new draw.
  t.resolve(later, 4 * kSec, kNoFrame, ev);
  t.learn(later, kPeerMac, 4 * kSec, false, ev);
  CHECK(t.find(later)->deadline_ns == 4 * kSec + second);
  // Half the old base: drawn from [7.5, 22.5) s; each entry keeps the end its confirmation gave
  // it (it is judged against the new time only then).
  t.set_reachable_ns(15 * kSec, 5 * kSec);
  const uint64_t third = t.reachable_time_ns();
  CHECK(third >= 7500 * 1'000'000ull);
  CHECK(third < 22500 * 1'000'000ull);
  CHECK(t.find(kPeerIp)->deadline_ns == 2 * kSec + first);
  CHECK(t.find(later)->deadline_ns == 4 * kSec + second);
  // The same base again (or 0, unspecified): no new draw.
  t.set_reachable_ns(15 * kSec, 6 * kSec);
  t.set_reachable_ns(0, 6 * kSec);
  CHECK(t.reachable_time_ns() == third);
}

TEST_CASE("An entry whose MAC was never given out goes or changes without moving the generation",
          "[neigh][generation]") {
  // The generation tells callers that cached a MAC from resolve() to look up again: entries
  // only peers' requests made (STALE, aging out in their window) concern none of them.
  NeighbourTable t(small_config());  // 4 entries, reachable 30 s, refresh window 5 s
  std::vector<NeighbourEvent> ev;
  const auto ip = [](uint8_t i) { return Ipv4Addr::from_octets(198, 18, 1, i); };
  const MacAddr moved{{0x02, 0, 0, 0, 0, 0x33}};
  constexpr auto kStale = NeighbourProof::kStale;
  for (uint8_t i = 1; i <= 4; ++i) t.learn(ip(i), kPeerMac, 0, true, ev, true, kStale);
  REQUIRE(t.size() == 4);
  // A new MAC, a confirmation, doubt, removal, eviction and aging out: no move.
  t.learn(ip(1), moved, kSec, false, ev, true, kStale);
  t.learn(ip(2), kPeerMac, kSec, false, ev);
  t.mark_stale(ip(2), 2 * kSec);
  CHECK(t.resolve(ip(9), 2 * kSec, 9, ev).status == Resolve::kQueued);  // evicts ip(3)
  CHECK(t.counters().evicted == 1);
  CHECK_FALSE(t.find(ip(3)));
  CHECK(t.remove(ip(4), ev));
  CHECK(t.counters().marked_stale == 1);
  t.poll(6 * kSec, ev);
  REQUIRE(t.find(ip(1)));
  CHECK(t.find(ip(1))->stale);  // kept STALE, unused
  CHECK(t.counters().went_stale == 1);
  CHECK(t.generation() == 0);
  // Given out (to the frame that waited, or by resolve()), the same events move it.
  t.learn(ip(9), kPeerMac, 6 * kSec, false, ev);  // releases frame 9 to kPeerMac
  t.learn(ip(9), moved, 8 * kSec, false, ev);
  CHECK(t.generation() == 1);
  CHECK(t.resolve(ip(2), 8 * kSec, kNoFrame, ev).mac == kPeerMac);
  t.learn(ip(2), moved, 9 * kSec, false, ev);
  CHECK(t.generation() == 2);
}

TEST_CASE("Entries whose lifetime runs out unused are kept STALE, evicted oldest first when full",
          "[neigh][stale]") {
  // Linux keeps a REACHABLE entry going STALE, and STALE entries, until garbage collection
  // (gc_staletime, under gc_thresh pressure); only a STALE entry used and then not confirmed
  // goes (DELAY -> PROBE -> FAILED).
  NeighbourTable t(small_config());  // 4 entries, reachable 30 s, refresh window 5 s, retry 1 s
  std::vector<NeighbourEvent> ev;
  constexpr auto kStale = NeighbourProof::kStale;
  const auto ip = [](uint8_t i) { return Ipv4Addr::from_octets(198, 18, 1, i); };

  // One we resolved and confirmed, one a peer's request made (STALE from the start).
  CHECK(t.resolve(ip(1), 0, kNoFrame, ev).status == Resolve::kQueued);
  t.learn(ip(1), kPeerMac, 0, false, ev);
  t.learn(ip(2), kGwMac, 0, /*create=*/true, ev, true, kStale);
  ev.clear();
  t.poll(5 * kSec, ev);
  t.poll(30 * kSec, ev);
  REQUIRE(t.find(ip(1)));
  REQUIRE(t.find(ip(2)));
  CHECK(t.find(ip(1))->stale);
  CHECK(t.find(ip(1))->mac == kPeerMac);
  CHECK(t.find(ip(1))->deadline_ns == 0);
  CHECK(t.find(ip(2))->stale);
  CHECK(t.counters().went_stale == 2);
  CHECK(t.counters().aged_out == 0);
  CHECK(t.next_deadline_ns() == UINT64_MAX);  // kept STALE entries have no timer
  t.poll(1000 * kSec, ev);
  CHECK(t.size() == 2);
  CHECK(ev.empty());

  // Used: the MAC at once, a unicast probe, one window to be confirmed.
  auto r = t.resolve(ip(1), 1000 * kSec, kNoFrame, ev);
  CHECK(r.status == Resolve::kResolved);
  CHECK(r.mac == kPeerMac);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == Kind::kSendRequest);
  CHECK(ev[0].mac == kPeerMac);
  ev.clear();
  CHECK_FALSE(t.find(ip(1))->stale);
  CHECK(t.find(ip(1))->deadline_ns == 1005 * kSec);
  // Confirmed: reachable for a lifetime.
  t.learn(ip(1), kPeerMac, 1001 * kSec, false, ev);
  CHECK(t.find(ip(1))->deadline_ns == 1031 * kSec);
  // Used again in its last window and not confirmed: gone.
  t.resolve(ip(1), 1027 * kSec, kNoFrame, ev);
  CHECK(ev.size() == 1);
  ev.clear();
  t.poll(1031 * kSec, ev);
  CHECK_FALSE(t.find(ip(1)));
  CHECK(t.counters().aged_out == 1);

  // Full of entries kept STALE: the evictable one (a peer's) goes first, then the least
  // recently used of ours.
  for (uint8_t i = 3; i <= 5; ++i) {
    const uint64_t at = (1100 + i) * kSec;
    CHECK(t.resolve(ip(i), at, kNoFrame, ev).status == Resolve::kQueued);
    t.learn(ip(i), kPeerMac, at, false, ev);
  }
  ev.clear();
  t.poll(1200 * kSec, ev);
  REQUIRE(t.size() == 4);
  for (uint8_t i = 2; i <= 5; ++i) CHECK(t.find(ip(i))->stale);
  CHECK(t.resolve(ip(6), 1300 * kSec, kNoFrame, ev).status == Resolve::kQueued);
  CHECK_FALSE(t.find(ip(2)));
  CHECK(t.resolve(ip(7), 1300 * kSec, kNoFrame, ev).status == Resolve::kQueued);
  CHECK_FALSE(t.find(ip(3)));
  CHECK(t.find(ip(4)));
  CHECK(t.find(ip(5)));
  CHECK(t.counters().evicted == 2);
  CHECK(t.counters().stale_evicted == 2);
  CHECK(t.counters().table_full_drops == 0);
}
