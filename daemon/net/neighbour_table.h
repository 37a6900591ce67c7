// Neighbour cache with resolution state, for one port and one address
// family: NeighbourTable (IPv4, resolved by ARP) and NeighbourTable6 (IPv6,
// resolved by Neighbor Discovery) are the same template.
//
// Pure logic: it never builds frames or reads a clock. It reports what to do
// as NeighbourEvents appended to a caller-owned vector: send a request (ARP
// request / Neighbor Solicitation), transmit a frame that was waiting, drop a
// frame that was waiting.
//
// Frames waiting for resolution are opaque FrameHandles (the engine passes
// mbuf pointers); the table only stores and returns them, so every handle
// given to resolve() comes back exactly once: as a kTransmitQueued event, as
// a kDropQueued event, or immediately as a kDropped result.
//
// States: an entry is static (from policy, never ages), incomplete (requests
// outstanding, frames queued) or reachable (MAC known until expires). A
// reachable entry that is used in its last refresh window sends a unicast
// request so a live neighbour is confirmed before it ages out. RFC 4861's
// STALE (a MAC in doubt, probed on its next use) is a reachable entry moved
// into its last refresh window (mark_stale): used, it is probed at once; used
// and not confirmed within the window, it ages out (Linux's PROBE -> FAILED)
// and the next use resolves afresh. A MAC learned from a packet that does not
// prove the neighbour reachable (its request, an RA, an unsolicited NA:
// NeighbourProof::kStale) makes the entry STALE that way when the MAC is new;
// the MAC already known leaves it as it is.
//
// An entry whose lifetime (or STALE window) runs out while nobody used it in its
// last window is kept STALE (Info::stale; counted in went_stale), with its MAC and no
// deadline, as Linux keeps REACHABLE entries going STALE and STALE ones until garbage
// collection: its next use gets the MAC at once and probes it (unicast), giving it one
// refresh window to be confirmed. Kept STALE entries go only when the table is full
// (see Eviction), or on learn/remove like any other.
//
// Eviction: an entry created only because a peer asked us (learn with
// create: an ARP request, an NS; it is STALE) is evictable until resolve()
// uses it; when the table is full, a new entry replaces the least recently
// used evictable one (a flood of requests must not lock out the next hops
// we need), else the least recently used entry kept STALE past its lifetime
// (Linux's forced garbage collection of unreferenced STALE entries; counted in
// stale_evicted as well as evicted). Entries we
// resolve ourselves, ones the caller keep()s (its router or gateway, learned
// from the router's own packets before any use) and static ones are never
// evicted while their lifetime runs, until the caller release()s one that is no
// longer its next hop.
//
// Lifetimes: the table keeps one reachable time (RFC 4861 section 6.3.2's ReachableTime,
// Linux's neigh_parms reachable_time: one per interface and family), drawn uniformly from
// [reachable_ns / 2, 3 * reachable_ns / 2) (reachable_ns is the base, BASE_REACHABLE_TIME),
// so hosts and ports configured alike neither age out nor refresh in step. It is drawn at
// construction, again every kReachableRedrawNs (300 s, Linux's neigh_periodic_work; the period
// starts with the first time learn(), poll() or set_reachable_ns() is given, and a draw due is
// made by the first of them given a time past it; next_deadline_ns() has it) and when the base
// changes (set_reachable_ns: an RA's Reachable Time, as Linux's ndisc_router_discovery). A
// confirmed entry lives the reachable time current at its confirmation; when the time changes, it
// keeps the end it was given and lives on to its confirmation plus the new time if that is later
// (see set_reachable_ns).
//
// Generation: a counter that moves whenever a MAC the table handed out (resolve()
// returned it, or frames waiting for it were released to it) may no longer be the
// one to use: such an entry's MAC changed (learn, add_static), it was put in doubt
// (mark_stale) or it went (aged out, evicted, removed). A caller that caches
// resolve()'s MAC compares it instead of looking up again. A learn() that confirms
// the MAC already known (every ARP/NA from a busy peer), resolutions completing,
// and whatever happens to entries whose MAC nobody was given (those peers'
// requests made, STALE until used) do not move it.
//
// Not thread-safe: one engine thread owns it. All storage is allocated in the
// constructor; resolve/learn/poll do not allocate (the event vector aside,
// which the caller drains).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "net/ipv4_addr.h"
#include "net/ipv6_addr.h"
#include "net/mac_addr.h"

namespace conduit::net {

using FrameHandle = uint64_t;
// How often the table draws its reachable time again (Linux's neigh_periodic_work: 300 s).
inline constexpr uint64_t kReachableRedrawNs = 300'000'000'000;
// resolve() without a frame: start (or use) resolution only.
inline constexpr FrameHandle kNoFrame = ~FrameHandle{0};

struct NeighbourConfig {
  size_t capacity = 256;                       // entries: static + incomplete + reachable
  size_t max_pending_per_hop = 16;             // frames queued per unresolved next hop
  uint32_t max_requests = 3;                   // requests sent before a resolution fails
  uint64_t retry_interval_ns = 1'000'000'000;  // between requests
  uint64_t reachable_ns = 60'000'000'000;      // base of a confirmed entry's lifetime
  uint64_t refresh_window_ns = 5'000'000'000;  // refresh when used this close to expiry
  // learn() without override: another MAC this soon after the entry's last change (resolved,
  // or a new MAC) is ignored, so of several ARP replies back to back (proxy agents) the first
  // wins and the entry does not flap; Linux's neigh locktime, 1 s for ARP.
  uint64_t locktime_ns = 1'000'000'000;
  // The table's reachable time (a confirmed entry's lifetime) is drawn from [reachable_ns / 2,
  // 3 * reachable_ns / 2) (RFC 4861 section 6.3.2's ReachableTime; Linux's
  // neigh_rand_reach_time), again every kReachableRedrawNs and when reachable_ns changes (see
  // "Lifetimes" above). The draws come from a generator seeded with random_seed: pure, and the
  // same for the same seed and calls (NetStack mixes its port MAC in, so hosts differ). false:
  // the reachable time is reachable_ns exactly, never drawn.
  bool randomize_reachable = true;
  uint64_t random_seed = 0;
};

enum class NeighbourEventKind : uint8_t {
  // A request for `ip` to `mac`: broadcast (IPv6: the solicited-node group of
  // `ip`), or unicast to the known MAC when refreshing.
  kSendRequest,
  kTransmitQueued,  // `frame` may go now, to Ethernet destination `mac`
  kDropQueued,      // `frame` was waiting and its resolution failed: free it
};

// What a packet that names a neighbour's MAC proves (the state Linux's neigh_update is asked
// for): an answer to our request (a unicast ARP reply, a solicited NA) proves the neighbour
// reachable; anything else (an ARP request or broadcast reply, an NS, an RA, an unsolicited NA)
// only that the MAC was the sender's when it was sent (RFC 4861 sections 7.2.3 to 7.2.5, 6.3.4).
enum class NeighbourProof : uint8_t { kReachable, kStale };

template <class Addr>
struct NeighbourEventT {
  using Kind = NeighbourEventKind;
  Kind kind;
  Addr ip{};
  MacAddr mac{};
  FrameHandle frame = kNoFrame;
};
using NeighbourEvent = NeighbourEventT<Ipv4Addr>;
using NeighbourEvent6 = NeighbourEventT<Ipv6Addr>;

enum class NeighbourState : uint8_t { kIncomplete, kReachable, kStatic };

template <class Addr>
struct NeighbourInfoT {
  Addr ip{};
  MacAddr mac{};  // zero while incomplete
  NeighbourState state;
  uint32_t requests_sent;
  size_t frames_queued;
  uint64_t deadline_ns;    // incomplete: next request; reachable: expiry; static, stale: 0
  bool evictable = false;  // learned from a peer's request or released, not since used nor kept
  bool stale = false;      // reachable, its lifetime ran out unused: kept, probed on next use
};
using NeighbourInfo = NeighbourInfoT<Ipv4Addr>;
using NeighbourInfo6 = NeighbourInfoT<Ipv6Addr>;

struct NeighbourCounters {
  uint64_t requests_sent = 0;
  uint64_t resolved = 0;        // incomplete -> a MAC known (reachable, or stale)
  uint64_t resolve_failed = 0;  // max_requests sent without a reply
  uint64_t frames_queued = 0;
  uint64_t frames_released = 0;
  uint64_t queue_overflow_drops = 0;  // a frame arrived for a full per-hop queue
  uint64_t failed_drops = 0;          // queued frames dropped when resolution failed
  uint64_t table_full_drops = 0;      // no free or evictable entry for a new one
  uint64_t evicted = 0;               // entries replaced by new ones (evictable, or kept STALE)
  uint64_t stale_evicted = 0;         // ... of which kept STALE past their lifetime
  uint64_t went_stale = 0;            // lifetimes run out unused: kept STALE, not removed
  uint64_t aged_out = 0;              // used in their last window and not confirmed: removed
  uint64_t refreshes_sent = 0;
  uint64_t static_conflicts = 0;  // ARP/NDP claimed a static neighbour's IP with another MAC
  uint64_t marked_stale = 0;      // reachable entries put in doubt (mark_stale), to be probed
  uint64_t locktime_ignored = 0;  // learn() without override: another MAC inside the locktime
  uint64_t learned_stale = 0;     // learn(kStale) gave an entry a MAC (new, changed or resolved)
};

// Shared by both families, so NeighbourTable::ResolveResult and
// NeighbourTable6::ResolveResult are one type.
enum class NeighbourResolve : uint8_t { kResolved, kQueued, kDropped };
struct NeighbourResolveResult {
  NeighbourResolve status;
  MacAddr mac{};  // valid when kResolved
};

// Addr is Ipv4Addr or Ipv6Addr (explicitly instantiated in the .cc).
template <class Addr>
class NeighbourTableT {
 public:
  using Resolve = NeighbourResolve;
  using ResolveResult = NeighbourResolveResult;
  using Event = NeighbourEventT<Addr>;
  using Info = NeighbourInfoT<Addr>;

  // Throws std::invalid_argument on a zero capacity, retry interval or
  // max_requests (setup time only).
  explicit NeighbourTableT(const NeighbourConfig& config);

  // The MAC for next hop `ip`, or queue `frame` behind its resolution.
  // kResolved: the frame (if any) was not taken, send it to .mac.
  // kQueued: the table holds `frame` and will return it in an event.
  // kDropped: the frame was not taken and must be freed (queue or table full).
  ResolveResult resolve(const Addr& ip, uint64_t now_ns, FrameHandle frame,
                        std::vector<Event>& events);

  // An ARP packet (or NS/NA) said ip is at mac. Updates an existing dynamic
  // entry (releasing its queue when it was incomplete); creates one only
  // when `create` (a request addressed to us: RFC 826's merge rule, RFC 4861
  // section 7.2.3); such an entry is evictable (see above). Static entries
  // never change. Without `override`, a reachable entry changed (resolved, or given a new
  // MAC) less than locktime_ns ago keeps its MAC (counted in locktime_ignored): ARP replies
  // and others' requests; gratuitous ARPs, requests to us and NDP override.
  // kReachable: the entry is reachable for a lifetime from now. kStale: a new MAC (a new
  // entry, a changed one, an incomplete one resolved) is STALE: in its last refresh window,
  // probed on its next use (counted in learned_stale); the MAC already known changes nothing,
  // the entry's lifetime included (Linux's neigh_update keeps the state).
  void learn(const Addr& ip, MacAddr mac, uint64_t now_ns, bool create, std::vector<Event>& events,
             bool override = true, NeighbourProof proof = NeighbourProof::kReachable);

  // A peer claimed ip at another MAC without the right to override the known one (an NA
  // without the Override flag, RFC 4861 section 7.2.5: REACHABLE becomes STALE, the cached
  // MAC stays): a reachable entry is moved into its last refresh window, so its next use
  // sends a unicast request to the cached MAC and the entry ages out unless that is answered.
  // Moves the generation when its MAC was handed out (callers look up again, and so probe
  // it), unless the entry was already that close to expiry. Incomplete and static entries are
  // untouched.
  void mark_stale(const Addr& ip, uint64_t now_ns);

  // The neighbour parameters a Router Advertisement sets (RFC 4861 section 6.3.4; Linux's
  // BASE_REACHABLE_TIME and RETRANS_TIME): the base of the lifetimes, and the interval between
  // requests. 0 (unspecified) changes nothing; the caller bounds the values. A new base draws
  // the reachable time from it at once (the same base again draws nothing), as Linux's
  // ndisc_router_discovery does. A new reachable time (this one, or a periodic draw) applies to
  // the entries reachable now as it does in Linux, where parms->reachable_time changes and no
  // entry's timer: a reachable entry keeps the end its confirmation gave it (its timer), and
  // when that comes neigh_timer_handler compares confirmed + the reachable time of then: an
  // entry still within it lives on to that end, else it goes STALE. So a shorter time takes no
  // entry's time away, a longer one lengthens it (here at once: find()'s deadline is the end as
  // it stands). Entries in their STALE window keep it. The retry interval is used from each
  // entry's next request on (neigh_timer_handler again).
  void set_reachable_ns(uint64_t ns, uint64_t now_ns);
  void set_retry_interval_ns(uint64_t ns);

  // ip is a next hop of ours (a default router, the gateway): its entry, if
  // any, is no longer evictable, as if resolve() had used it.
  void keep(const Addr& ip);
  // ip is no longer a next hop of ours (a router that withdrew, was replaced
  // or timed out): its dynamic entry, if any, is evictable again, as if only
  // a peer's request had made it, until resolve() uses it or keep() is
  // called. This undoes keep() and any earlier resolve(): those were for it
  // as a next hop. Static entries are untouched.
  void release(const Addr& ip);

  // A static entry; replaces a dynamic one (releasing its queue). False when
  // the table is full or the address/MAC is not a unicast one.
  bool add_static(const Addr& ip, MacAddr mac, std::vector<Event>& events);
  // Removes any entry for ip; queued frames are dropped through events.
  bool remove(const Addr& ip, std::vector<Event>& events);

  // Sends due retries, fails exhausted resolutions, ages out entries probed and not
  // confirmed, keeps the others STALE; draws the reachable time again when due.
  void poll(uint64_t now_ns, std::vector<Event>& events);
  // No timer is due before this time (may be early, never late); UINT64_MAX if none.
  uint64_t next_deadline_ns() const { return next_deadline_ns_; }

  std::optional<Info> find(const Addr& ip) const;
  // See "Generation" above; starts at 0, only grows.
  uint64_t generation() const { return generation_; }
  size_t size() const { return size_; }
  const NeighbourCounters& counters() const { return counters_; }
  const NeighbourConfig& config() const { return config_; }
  // The reachable time a confirmation gives an entry now (see "Lifetimes" above).
  uint64_t reachable_time_ns() const { return reachable_time_ns_; }

 private:
  struct Entry {
    Addr ip{};
    MacAddr mac{};
    NeighbourState state = NeighbourState::kIncomplete;
    bool in_use = false;
    uint32_t requests_sent = 0;
    uint64_t deadline_ns = 0;
    uint64_t last_refresh_ns = 0;
    bool refresh_sent = false;
    uint32_t pending_count = 0;
    bool evictable = false;     // created by learn() or released, not since used nor kept
    uint64_t last_used_ns = 0;  // resolve() or learn(): the LRU order for eviction
    uint64_t changed_ns = 0;    // became reachable or took a new MAC (the locktime's start)
    bool handed_out = false;    // its MAC went to a caller (see "Generation" above)
    bool stale = false;         // kept STALE past its lifetime (no deadline)
    // Confirmed: deadline_ns is the later of timer_ns and confirmed_ns + the table's reachable
    // time (see set_reachable_ns). timer_ns is when Linux's neigh timer runs: confirmed_ns +
    // the reachable time of the confirmation, then each new end it finds.
    bool confirmed = false;
    uint64_t confirmed_ns = 0;
    uint64_t timer_ns = 0;
    // When poll() must look at it.
    uint64_t due_ns() const { return confirmed ? timer_ns : deadline_ns; }
  };
  static constexpr int32_t kEmptySlot = -1;

  int32_t lookup(const Addr& ip) const;
  int32_t insert(const Addr& ip);  // -1 when full and nothing is evictable
  bool evict_lru();                // frees an evictable or kept STALE entry (see Eviction)
  void erase(int32_t idx);
  size_t home_slot(const Addr& ip) const;
  void arm(uint64_t deadline_ns);
  void release_pending(Entry& e, int32_t idx, std::vector<Event>& events);
  void drop_pending(Entry& e, int32_t idx, std::vector<Event>& events);
  // The reachable time (see "Lifetimes" above): a draw from the current base; the periodic
  // draw when due (and the period's start); a new time applied to the reachable entries.
  uint64_t draw_random();
  uint64_t draw_reachable_ns();
  bool redraw_if_due(uint64_t now_ns);  // true: drew
  void set_reachable_time(uint64_t ns, uint64_t now_ns);

  NeighbourConfig config_;
  std::vector<Entry> entries_;        // pool, capacity entries
  std::vector<int32_t> free_;         // free pool indices (stack)
  std::vector<int32_t> index_;        // open addressing: slot -> pool index or kEmptySlot
  std::vector<FrameHandle> pending_;  // capacity x max_pending_per_hop
  size_t size_ = 0;
  uint64_t next_deadline_ns_ = UINT64_MAX;
  uint64_t generation_ = 0;
  uint64_t rng_state_ = 0;  // SplitMix64
  uint64_t reachable_time_ns_ = 0;
  bool redraw_started_ = false;  // the period started: the next draw is due at redraw_ns_
  uint64_t redraw_ns_ = UINT64_MAX;
  NeighbourCounters counters_;
};

extern template class NeighbourTableT<Ipv4Addr>;
extern template class NeighbourTableT<Ipv6Addr>;

using NeighbourTable = NeighbourTableT<Ipv4Addr>;   // ARP
using NeighbourTable6 = NeighbourTableT<Ipv6Addr>;  // Neighbor Discovery

}  // namespace conduit::net
