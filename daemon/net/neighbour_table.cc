#include "net/neighbour_table.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>

namespace conduit::net {
namespace {

bool is_unicast_ip(Ipv4Addr ip) { return ip.is_unicast(); }
bool is_unicast_ip(const Ipv6Addr& ip) { return ip.is_unicast(); }
bool is_unicast_mac(MacAddr mac) { return !mac.is_zero() && !mac.is_multicast(); }

// 32-bit hashes for Fibonacci slot selection: hosts in one subnet differ in
// the low bits only (IPv6: the interface identifier), so mix those up.
uint32_t address_hash(Ipv4Addr ip) { return ip.value * 0x9E3779B1u; }
uint32_t address_hash(const Ipv6Addr& ip) {
  uint64_t hi;
  uint64_t lo;
  std::memcpy(&hi, ip.bytes.data(), 8);
  std::memcpy(&lo, ip.bytes.data() + 8, 8);
  uint64_t x = lo ^ (hi * 0xC2B2AE3D27D4EB4Full);
  x ^= x >> 29;
  x *= 0x9E3779B97F4A7C15ull;
  return static_cast<uint32_t>(x >> 32);
}

}  // namespace

template <class Addr>
NeighbourTableT<Addr>::NeighbourTableT(const NeighbourConfig& config) : config_(config) {
  if (config_.capacity == 0 || config_.capacity > (1u << 20)) {
    throw std::invalid_argument("neighbour table capacity must be 1..1048576");
  }
  if (config_.max_requests == 0) throw std::invalid_argument("ARP max_requests must be >= 1");
  if (config_.retry_interval_ns == 0) {
    throw std::invalid_argument("ARP retry interval must be > 0");
  }
  if (config_.reachable_ns == 0) throw std::invalid_argument("ARP reachable time must be > 0");
  rng_state_ = config_.random_seed;
  reachable_time_ns_ = draw_reachable_ns();
  entries_.resize(config_.capacity);
  free_.reserve(config_.capacity);
  for (size_t i = config_.capacity; i-- > 0;) free_.push_back(static_cast<int32_t>(i));
  // Load factor <= 1/2 keeps linear probe chains short.
  index_.assign(std::bit_ceil(config_.capacity * 2), kEmptySlot);
  pending_.resize(config_.capacity * config_.max_pending_per_hop, kNoFrame);
}

template <class Addr>
size_t NeighbourTableT<Addr>::home_slot(const Addr& ip) const {
  const uint32_t h = address_hash(ip);
  return (static_cast<uint64_t>(h) * index_.size()) >> 32;
}

template <class Addr>
int32_t NeighbourTableT<Addr>::lookup(const Addr& ip) const {
  const size_t mask = index_.size() - 1;
  for (size_t s = home_slot(ip);; s = (s + 1) & mask) {
    const int32_t idx = index_[s];
    if (idx == kEmptySlot) return -1;
    if (entries_[idx].ip == ip) return idx;
  }
}

template <class Addr>
int32_t NeighbourTableT<Addr>::insert(const Addr& ip) {
  if (free_.empty() && !evict_lru()) return -1;
  const int32_t idx = free_.back();
  free_.pop_back();
  entries_[idx] = Entry{};
  entries_[idx].ip = ip;
  entries_[idx].in_use = true;
  const size_t mask = index_.size() - 1;
  size_t s = home_slot(ip);
  while (index_[s] != kEmptySlot) s = (s + 1) & mask;
  index_[s] = idx;
  ++size_;
  return idx;
}

template <class Addr>
bool NeighbourTableT<Addr>::evict_lru() {
  // A linear scan: only when full, and bounded by the capacity.
  // Evictable entries first (least recently used), then entries kept STALE past their
  // lifetime (least recently used).
  int32_t victim = -1;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    // Candidates are reachable with nothing queued; checked anyway, since evicting one
    // with frames behind it would lose them.
    if (!e.in_use || !(e.evictable || e.stale) || e.state != NeighbourState::kReachable ||
        e.pending_count != 0) {
      continue;
    }
    if (victim < 0) {
      victim = static_cast<int32_t>(i);
      continue;
    }
    const Entry& v = entries_[victim];
    if (e.evictable != v.evictable ? e.evictable : e.last_used_ns < v.last_used_ns) {
      victim = static_cast<int32_t>(i);
    }
  }
  if (victim < 0) return false;
  if (entries_[victim].stale) ++counters_.stale_evicted;
  erase(victim);
  ++counters_.evicted;
  return true;
}

template <class Addr>
void NeighbourTableT<Addr>::erase(int32_t idx) {
  // Callers may hold its MAC only when it gave it out (never while incomplete).
  if (entries_[idx].handed_out) ++generation_;
  const size_t mask = index_.size() - 1;
  size_t hole = home_slot(entries_[idx].ip);
  while (index_[hole] != idx) hole = (hole + 1) & mask;
  index_[hole] = kEmptySlot;
  // Backward-shift deletion: pull later members of the probe chain into the
  // hole when their home slot does not lie (cyclically) in (hole, j].
  for (size_t j = (hole + 1) & mask; index_[j] != kEmptySlot; j = (j + 1) & mask) {
    const size_t home = home_slot(entries_[index_[j]].ip);
    const bool home_in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (!home_in_range) {
      index_[hole] = index_[j];
      index_[j] = kEmptySlot;
      hole = j;
    }
  }
  entries_[idx].in_use = false;
  free_.push_back(idx);
  --size_;
}

template <class Addr>
void NeighbourTableT<Addr>::arm(uint64_t deadline_ns) {
  next_deadline_ns_ = std::min(next_deadline_ns_, deadline_ns);
}

template <class Addr>
void NeighbourTableT<Addr>::release_pending(Entry& e, int32_t idx, std::vector<Event>& events) {
  const size_t base = static_cast<size_t>(idx) * config_.max_pending_per_hop;
  if (e.pending_count != 0) e.handed_out = true;
  for (uint32_t i = 0; i < e.pending_count; ++i) {
    events.push_back({Event::Kind::kTransmitQueued, e.ip, e.mac, pending_[base + i]});
    pending_[base + i] = kNoFrame;
  }
  counters_.frames_released += e.pending_count;
  e.pending_count = 0;
}

template <class Addr>
void NeighbourTableT<Addr>::drop_pending(Entry& e, int32_t idx, std::vector<Event>& events) {
  const size_t base = static_cast<size_t>(idx) * config_.max_pending_per_hop;
  for (uint32_t i = 0; i < e.pending_count; ++i) {
    events.push_back({Event::Kind::kDropQueued, e.ip, MacAddr{}, pending_[base + i]});
    pending_[base + i] = kNoFrame;
  }
  counters_.failed_drops += e.pending_count;
  e.pending_count = 0;
}

template <class Addr>
uint64_t NeighbourTableT<Addr>::draw_random() {
  // SplitMix64 (Steele, Lea, Flood 2014): one 64-bit draw.
  uint64_t z = (rng_state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <class Addr>
uint64_t NeighbourTableT<Addr>::draw_reachable_ns() {
  const uint64_t base = config_.reachable_ns;
  if (!config_.randomize_reachable || base < 2) return base;
  // A draw scaled to [0, base) without a division: [base / 2, 3 * base / 2) in all, as Linux's
  // neigh_rand_reach_time.
  __extension__ using u128 = unsigned __int128;
  const auto offset = static_cast<uint64_t>((static_cast<u128>(draw_random()) * base) >> 64);
  return base / 2 + offset;
}

template <class Addr>
bool NeighbourTableT<Addr>::redraw_if_due(uint64_t now_ns) {
  if (!config_.randomize_reachable) return false;  // nothing to draw: no timer for it
  const bool due = redraw_started_ && now_ns >= redraw_ns_;
  if (redraw_started_ && !due) return false;
  // Linux's neigh_periodic_work: the next draw kReachableRedrawNs after this one (or after the
  // first time the table is given).
  redraw_started_ = true;
  redraw_ns_ = now_ns > UINT64_MAX - kReachableRedrawNs ? UINT64_MAX : now_ns + kReachableRedrawNs;
  arm(redraw_ns_);
  if (due) set_reachable_time(draw_reachable_ns(), now_ns);
  return due;
}

template <class Addr>
void NeighbourTableT<Addr>::set_reachable_time(uint64_t ns, uint64_t now_ns) {
  reachable_time_ns_ = ns;
  for (Entry& e : entries_) {
    if (!e.in_use || !e.confirmed || e.state != NeighbourState::kReachable) continue;
    // Its timer stays; when it runs, the entry lives on to confirmed + the reachable time of
    // then.
    e.deadline_ns = std::max(e.timer_ns, e.confirmed_ns + ns);
    // Out of its last window again: a use there probes afresh, and an unused end keeps it.
    if (e.deadline_ns > now_ns + config_.refresh_window_ns) e.refresh_sent = false;
  }
}

template <class Addr>
void NeighbourTableT<Addr>::set_reachable_ns(uint64_t ns, uint64_t now_ns) {
  if (ns == 0 || ns == config_.reachable_ns) return;
  config_.reachable_ns = ns;
  // Drawn from the new base at once (Linux's ndisc_router_discovery), unless the periodic draw
  // was due and just did; the period runs on.
  if (!redraw_if_due(now_ns)) set_reachable_time(draw_reachable_ns(), now_ns);
}

template <class Addr>
void NeighbourTableT<Addr>::set_retry_interval_ns(uint64_t ns) {
  if (ns != 0) config_.retry_interval_ns = ns;
}

template <class Addr>
NeighbourResolveResult NeighbourTableT<Addr>::resolve(const Addr& ip, uint64_t now_ns,
                                                      FrameHandle frame,
                                                      std::vector<Event>& events) {
  int32_t idx = lookup(ip);
  if (idx >= 0) {
    Entry& e = entries_[idx];
    if (e.state != NeighbourState::kIncomplete) e.handed_out = true;
    if (e.state == NeighbourState::kStatic) return {Resolve::kResolved, e.mac};
    // Our own traffic uses it now: a request flood may no longer evict it.
    e.evictable = false;
    e.last_used_ns = now_ns;
    if (e.state == NeighbourState::kReachable) {
      if (e.stale) {
        // Kept STALE past its lifetime: usable, probed now, one window to be confirmed
        // (Linux's STALE -> DELAY -> PROBE, the probe sent at once).
        e.stale = false;
        e.confirmed = false;
        e.refresh_sent = false;
        e.deadline_ns = now_ns + config_.refresh_window_ns;
        arm(e.deadline_ns);
      }
      // In the last refresh window, confirm the neighbour with a unicast
      // request (at most one per retry interval) while still using it.
      const uint64_t window_start =
          e.deadline_ns > config_.refresh_window_ns ? e.deadline_ns - config_.refresh_window_ns : 0;
      if (now_ns >= window_start &&
          (!e.refresh_sent || now_ns - e.last_refresh_ns >= config_.retry_interval_ns)) {
        e.refresh_sent = true;
        e.last_refresh_ns = now_ns;
        events.push_back({Event::Kind::kSendRequest, ip, e.mac, kNoFrame});
        ++counters_.refreshes_sent;
        ++counters_.requests_sent;
      }
      return {Resolve::kResolved, e.mac};
    }
    // Incomplete: queue behind the outstanding request.
    if (frame == kNoFrame) return {Resolve::kQueued, MacAddr{}};
    if (e.pending_count >= config_.max_pending_per_hop) {
      ++counters_.queue_overflow_drops;
      return {Resolve::kDropped, MacAddr{}};
    }
    pending_[static_cast<size_t>(idx) * config_.max_pending_per_hop + e.pending_count++] = frame;
    ++counters_.frames_queued;
    return {Resolve::kQueued, MacAddr{}};
  }

  if (!is_unicast_ip(ip)) return {Resolve::kDropped, MacAddr{}};
  idx = insert(ip);
  if (idx < 0) {
    ++counters_.table_full_drops;
    return {Resolve::kDropped, MacAddr{}};
  }
  Entry& e = entries_[idx];
  e.state = NeighbourState::kIncomplete;
  e.last_used_ns = now_ns;
  e.requests_sent = 1;
  e.deadline_ns = now_ns + config_.retry_interval_ns;
  arm(e.deadline_ns);
  events.push_back({Event::Kind::kSendRequest, ip, MacAddr::broadcast(), kNoFrame});
  ++counters_.requests_sent;
  if (frame == kNoFrame) return {Resolve::kQueued, MacAddr{}};
  if (config_.max_pending_per_hop == 0) {
    // Nothing may wait: resolution is started, the frame is not taken.
    ++counters_.queue_overflow_drops;
    return {Resolve::kDropped, MacAddr{}};
  }
  pending_[static_cast<size_t>(idx) * config_.max_pending_per_hop] = frame;
  e.pending_count = 1;
  ++counters_.frames_queued;
  return {Resolve::kQueued, MacAddr{}};
}

template <class Addr>
void NeighbourTableT<Addr>::learn(const Addr& ip, MacAddr mac, uint64_t now_ns, bool create,
                                  std::vector<Event>& events, bool override, NeighbourProof proof) {
  redraw_if_due(now_ns);  // a confirmation lives the reachable time current now
  if (!is_unicast_ip(ip) || !is_unicast_mac(mac)) return;
  int32_t idx = lookup(ip);
  if (idx < 0) {
    if (!create) return;
    idx = insert(ip);
    if (idx < 0) {
      ++counters_.table_full_drops;
      return;
    }
    entries_[idx].evictable = true;  // only the peer asked for it
  }
  Entry& e = entries_[idx];
  if (e.state == NeighbourState::kStatic) {
    if (e.mac != mac) ++counters_.static_conflicts;
    return;
  }
  const bool new_mac = e.state == NeighbourState::kReachable && e.mac != mac;
  if (new_mac && !override && now_ns < e.changed_ns + config_.locktime_ns) {
    ++counters_.locktime_ignored;  // a second answer right after the first: the first stays
    return;
  }
  const bool stale = proof == NeighbourProof::kStale;
  if (stale && e.state == NeighbourState::kReachable && !new_mac) {
    // The MAC we know, from a packet that does not prove the neighbour is there: its state
    // and lifetime stay as they are (a request flood must not keep a dead entry alive).
    e.last_used_ns = now_ns;
    return;
  }
  const bool was_incomplete = e.state == NeighbourState::kIncomplete && e.requests_sent > 0;
  // A new MAC for a known neighbour (its NIC replaced, a failover); the same one is only a
  // refresh.
  if (new_mac && e.handed_out) ++generation_;
  if (new_mac || e.state == NeighbourState::kIncomplete) e.changed_ns = now_ns;
  e.mac = mac;
  e.state = NeighbourState::kReachable;
  e.stale = false;
  e.requests_sent = 0;
  e.refresh_sent = false;
  e.last_used_ns = now_ns;
  // STALE: in its last refresh window (see mark_stale), so its next use probes it.
  e.confirmed = !stale;
  if (stale) {
    e.deadline_ns = now_ns + config_.refresh_window_ns;
  } else {
    e.confirmed_ns = now_ns;
    e.deadline_ns = now_ns + reachable_time_ns_;
    e.timer_ns = e.deadline_ns;
  }
  if (stale) ++counters_.learned_stale;
  arm(e.deadline_ns);
  if (was_incomplete) {
    ++counters_.resolved;
    release_pending(e, idx, events);
  }
}

template <class Addr>
void NeighbourTableT<Addr>::mark_stale(const Addr& ip, uint64_t now_ns) {
  const int32_t idx = lookup(ip);
  if (idx < 0) return;
  Entry& e = entries_[idx];
  if (e.state != NeighbourState::kReachable || e.stale) return;  // (kept STALE: already)
  const uint64_t stale_deadline = now_ns + config_.refresh_window_ns;
  if (e.deadline_ns <= stale_deadline) return;  // already in doubt (or about to age out)
  e.deadline_ns = stale_deadline;
  e.confirmed = false;
  e.refresh_sent = false;  // the next use probes at once
  arm(e.deadline_ns);
  ++counters_.marked_stale;
  if (e.handed_out) ++generation_;
}

template <class Addr>
void NeighbourTableT<Addr>::keep(const Addr& ip) {
  const int32_t idx = lookup(ip);
  if (idx >= 0) entries_[idx].evictable = false;
}

template <class Addr>
void NeighbourTableT<Addr>::release(const Addr& ip) {
  const int32_t idx = lookup(ip);
  if (idx >= 0 && entries_[idx].state != NeighbourState::kStatic) entries_[idx].evictable = true;
}

template <class Addr>
bool NeighbourTableT<Addr>::add_static(const Addr& ip, MacAddr mac, std::vector<Event>& events) {
  if (!is_unicast_ip(ip) || !is_unicast_mac(mac)) return false;
  int32_t idx = lookup(ip);
  const bool known = idx >= 0;
  if (idx < 0) idx = insert(ip);
  if (idx < 0) return false;
  Entry& e = entries_[idx];
  if (known && e.handed_out && e.mac != mac) ++generation_;
  e.mac = mac;
  e.state = NeighbourState::kStatic;
  e.evictable = false;
  e.stale = false;
  e.confirmed = false;
  e.deadline_ns = 0;
  release_pending(e, idx, events);
  return true;
}

template <class Addr>
bool NeighbourTableT<Addr>::remove(const Addr& ip, std::vector<Event>& events) {
  const int32_t idx = lookup(ip);
  if (idx < 0) return false;
  drop_pending(entries_[idx], idx, events);
  erase(idx);
  return true;
}

template <class Addr>
void NeighbourTableT<Addr>::poll(uint64_t now_ns, std::vector<Event>& events) {
  redraw_if_due(now_ns);
  if (now_ns < next_deadline_ns_) return;
  uint64_t next = redraw_started_ ? redraw_ns_ : UINT64_MAX;
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (!e.in_use || e.state == NeighbourState::kStatic || e.stale) continue;
    const auto idx = static_cast<int32_t>(i);
    if (now_ns >= e.due_ns()) {
      if (e.state == NeighbourState::kReachable && e.confirmed && now_ns < e.deadline_ns) {
        // Its timer ran, and a longer reachable time came since it was set: Linux's
        // neigh_timer_handler finds it alive and sets the timer for its new end.
        e.timer_ns = e.deadline_ns;
        next = std::min(next, e.timer_ns);
        continue;
      }
      if (e.state == NeighbourState::kReachable) {
        if (e.refresh_sent) {
          // Used in its last window, probed, not confirmed: gone (Linux's PROBE -> FAILED).
          ++counters_.aged_out;
          erase(idx);
        } else {
          // Nobody used it: kept STALE with its MAC (see above), until used or evicted.
          e.stale = true;
          e.confirmed = false;
          e.deadline_ns = 0;
          ++counters_.went_stale;
        }
        continue;
      }
      if (e.requests_sent >= config_.max_requests) {
        ++counters_.resolve_failed;
        drop_pending(e, idx, events);
        erase(idx);
        continue;
      }
      ++e.requests_sent;
      ++counters_.requests_sent;
      e.deadline_ns = now_ns + config_.retry_interval_ns;
      events.push_back({Event::Kind::kSendRequest, e.ip, MacAddr::broadcast(), kNoFrame});
    }
    next = std::min(next, e.due_ns());
  }
  next_deadline_ns_ = next;
}

template <class Addr>
std::optional<NeighbourInfoT<Addr>> NeighbourTableT<Addr>::find(const Addr& ip) const {
  const int32_t idx = lookup(ip);
  if (idx < 0) return std::nullopt;
  const Entry& e = entries_[idx];
  return Info{e.ip,          e.mac,       e.state, e.requests_sent, e.pending_count,
              e.deadline_ns, e.evictable, e.stale};
}

template class NeighbourTableT<Ipv4Addr>;
template class NeighbourTableT<Ipv6Addr>;

}  // namespace conduit::net
