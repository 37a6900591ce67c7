// The engine's adaptive idle spin: how long to keep polling after a loop that
// found no work before sleeping, adapted the way KVM's halt-polling adapts.
//
// A sleep that ended sooner than the longest window means work came back
// quickly (ping-pong traffic): spinning that long would have caught it
// without a wake-up, so the window doubles. A longer sleep means the gaps are
// long (bulk traffic in bursts, or nothing at all): the window halves, and an
// idle engine soon leaves the core to its clients and peers, which a spinning
// engine starves on a machine with fewer cores than pollers.
//
// Pure arithmetic: the caller measures time. Single owner (the engine thread).
#pragma once

#include <algorithm>
#include <cstdint>

namespace conduit::engine {

class IdleSpin {
 public:
  // min_ns <= window <= max(min_ns, max_ns); starts at min_ns.
  IdleSpin(uint64_t min_ns, uint64_t max_ns)
      : min_ns_(min_ns), max_ns_(std::max(min_ns, max_ns)), window_ns_(min_ns) {}

  uint64_t window_ns() const { return window_ns_; }

  // After a sleep (or an attempt that found work pending) of slept_ns.
  void after_sleep(uint64_t slept_ns) {
    if (slept_ns < max_ns_) {
      window_ns_ = std::min(max_ns_, std::max<uint64_t>(1, window_ns_) * 2);
    } else {
      window_ns_ = std::max(min_ns_, window_ns_ / 2);
    }
  }

 private:
  uint64_t min_ns_;
  uint64_t max_ns_;
  uint64_t window_ns_;
};

}  // namespace conduit::engine
