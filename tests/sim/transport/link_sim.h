// Deterministic link simulator for two QPs: real frames (written by the QP's
// fused datapath, Qp::poll_tx_frame, with the ICRC) go through a seeded link with delay,
// serialization at a line rate, loss, reordering (extra delay), duplication and bit corruption, and
// are parsed (wire::parse_frame, ICRC checked) before they reach the peer QP (Qp::on_packet with
// the RoceView). The unit tests drive the general poll_tx/on_packet API; fastpath_test checks that
// both give the same bytes.
//
// Time is simulated: run() jumps from event to event (frame arrival, QP
// deadline, link becoming free), so a run takes as long as the CPU work, not
// the simulated time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <vector>

#include "transport/heap_memory_regions.h"
#include "transport/qp.h"
#include "wire/frame.h"

namespace conduit::transport::sim {

// splitmix64: small, fast and identical on every platform (std distributions are not).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return p > 0 && uniform() < p; }
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }

 private:
  uint64_t s_;
};

struct LinkConfig {
  uint64_t delay_ns = 5'000;  // one way, propagation
  double rate_gbps = 25.0;    // serialization
  double loss = 0.0;          // per frame
  double reorder = 0.0;       // per frame: extra delay of up to reorder_extra_ns
  uint64_t reorder_extra_ns = 4'000;
  double duplicate = 0.0;  // per frame: delivered twice
  double corrupt = 0.0;    // per frame: one random bit flipped
};

struct LinkStats {
  uint64_t frames = 0;
  uint64_t lost = 0;
  uint64_t reordered = 0;
  uint64_t duplicated = 0;
  uint64_t corrupted = 0;
  uint64_t parse_drops = 0;         // frames wire::parse_frame rejected (corruption)
  uint64_t corrupted_accepted = 0;  // flips in fields nothing covers (MACs, UDP checksum)
};

// One direction of the link.
class Link {
 public:
  Link(const LinkConfig& cfg, uint64_t seed) : cfg_(cfg), rng_(seed) {}

  bool free_at(uint64_t now_ns) const { return busy_until_ns_ <= now_ns; }
  uint64_t busy_until_ns() const { return busy_until_ns_; }
  // Takes a frame at now_ns (the link must be free).
  void send(uint64_t now_ns, std::span<const uint8_t> frame);
  // Earliest arrival, or UINT64_MAX.
  uint64_t next_arrival_ns() const;
  // Pops one frame that has arrived by now_ns; false if none.
  bool receive(uint64_t now_ns, std::vector<uint8_t>& frame, bool& corrupted);
  const LinkStats& stats() const { return stats_; }
  LinkStats& stats() { return stats_; }

 private:
  struct InFlight {
    uint64_t arrive_ns;
    uint64_t seq;
    bool corrupted;
    std::vector<uint8_t> bytes;
    bool operator>(const InFlight& o) const {
      return arrive_ns != o.arrive_ns ? arrive_ns > o.arrive_ns : seq > o.seq;
    }
  };
  LinkConfig cfg_;
  Rng rng_;
  uint64_t busy_until_ns_ = 0;
  uint64_t seq_ = 0;
  std::priority_queue<InFlight, std::vector<InFlight>, std::greater<>> q_;
  LinkStats stats_;
};

struct EndpointConfig {
  QpConfig qp;
  std::vector<uint32_t> region_bytes;  // regions to register, at iova 0x1'0000'0000 * (i + 1)
};

// A QP, its memory and its side of the link.
struct Endpoint {
  HeapMemoryRegions mrs;
  Qp qp;
  wire::FrameAddr addr;
  wire::FrameTemplate tmpl;  // made from addr by Sim
  wire::ParseOptions parse;
  std::vector<uint8_t> tx_buf = std::vector<uint8_t>(9000);
  bool maybe_tx = true;  // poll_tx may have more (stopped because the link was busy)

  explicit Endpoint(const QpConfig& cfg) : qp(cfg, mrs) {}
};

inline uint64_t region_base(size_t i) { return 0x1'0000'0000ull * (i + 1); }

// Two QPs (a, b) on a link, brought up to RTS. `on_step` runs after every
// event so a workload can post WRs and poll completions.
class Sim {
 public:
  Sim(const QpConfig& cfg_a, const QpConfig& cfg_b, const QpAttr& attr, const LinkConfig& link,
      uint64_t seed);

  Endpoint& a() { return *a_; }
  Endpoint& b() { return *b_; }
  uint64_t now_ns() const { return now_ns_; }
  const Link& link_ab() const { return ab_; }
  const Link& link_ba() const { return ba_; }
  uint64_t build_errors() const { return build_errors_; }

  // Runs until `done()` is true, or nothing can happen any more (no frame in
  // flight, no deadline, nothing to send), or max_events. Returns done().
  // Called for every frame delivered (after parsing), for debugging.
  std::function<void(bool a_to_b, uint64_t now_ns, const wire::ParsedFrame&)> trace;

  bool run(const std::function<void()>& on_step, const std::function<bool()>& done,
           uint64_t max_events = 50'000'000);

 private:
  void transmit(Endpoint& e, Link& link);
  void deliver(Link& link, Endpoint& to, bool a_to_b);

  std::unique_ptr<Endpoint> a_, b_;
  Link ab_, ba_;
  uint64_t now_ns_ = 0;
  uint64_t build_errors_ = 0;
  std::vector<uint8_t> rx_buf_;
};

}  // namespace conduit::transport::sim
