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

// Whether the engine may sleep through the gaps its pacer leaves between
// departures. On a core of its own a timed sleep ends within microseconds; on
// a core it shares with other busy tasks the scheduler may run the engine
// milliseconds after its timer (measured on the 2-core dumbbell next to a
// build: 415 wake-ups averaging 12 ms late, the flow fell from 38 to 19
// Mbit/s), and each late wake-up costs the paced flows all but max_lag of
// their sending time. So a paced sleep that ended later than late_ns turns
// paced sleeping off for a hold-off that doubles with every late one (up to
// max_hold_ns) and halves after every kTimelyToShrink timely ones in a row
// (halving after each let a core that is busy now and then cost a late
// wake-up every few milliseconds): on a contended core the engine spins
// through its pacer gaps as before, losing at most one late wake-up per
// hold-off.
//
// Pure arithmetic: the caller measures time. Single owner (the engine thread).
class PacedSleepGate {
 public:
  PacedSleepGate(uint64_t late_ns, uint64_t min_hold_ns, uint64_t max_hold_ns)
      : late_ns_(late_ns),
        min_hold_ns_(min_hold_ns),
        max_hold_ns_(std::max(min_hold_ns, max_hold_ns)),
        hold_ns_(min_hold_ns) {}

  bool allowed(uint64_t now_ns) const { return now_ns >= hold_until_ns_; }
  uint64_t hold_ns() const { return hold_ns_; }

  // A paced sleep due to end at due_ns ended (the engine ran again) at woke_ns.
  // Returns true if it was late.
  bool after_paced_sleep(uint64_t due_ns, uint64_t woke_ns) {
    if (woke_ns > due_ns + late_ns_) {
      hold_until_ns_ = woke_ns + hold_ns_;
      hold_ns_ = std::min(max_hold_ns_, hold_ns_ * 2);
      timely_ = 0;
      return true;
    }
    if (++timely_ == kTimelyToShrink) {
      hold_ns_ = std::max(min_hold_ns_, hold_ns_ / 2);
      timely_ = 0;
    }
    return false;
  }

  static constexpr uint32_t kTimelyToShrink = 64;

 private:
  uint64_t late_ns_;
  uint64_t min_hold_ns_;
  uint64_t max_hold_ns_;
  uint64_t hold_ns_;
  uint64_t hold_until_ns_ = 0;
  uint32_t timely_ = 0;  // timely paced sleeps since the last late one or shrink
};

}  // namespace conduit::engine
