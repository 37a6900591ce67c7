// When the main thread may send systemd's WATCHDOG=1.
//
// systemd restarts the daemon when the pings stop, so a ping has to mean that
// the daemon still works, not merely that its main thread is alive. Two
// loops are watched:
//   - the control thread: it ran the heartbeat task the main thread posted
//     after the previous ping (a blocked control thread never runs it);
//   - the engine thread: its loop counter (Engine::heartbeat()) moved since
//     the previous ping. The engine never sleeps longer than about 1 ms, so a
//     counter that stands still for a whole ping interval (at least half of
//     WatchdogSec) means a hung engine: stuck in a device call, in a lock, or
//     in a loop that no longer returns to run().
// While either is stalled no ping is sent, and systemd restarts the service
// after WatchdogSec.
//
// Pure: no clock, no syscalls. Thread role: the main thread only.
#pragma once

#include <cstdint>

namespace conduit::telemetry {

class WatchdogGate {
 public:
  enum class Stall { kNone, kControl, kEngine, kBoth };

  // engine_beat: the engine's loop counter when the watchdog starts.
  explicit WatchdogGate(uint64_t engine_beat) : engine_beat_at_ping_(engine_beat) {}

  // Called once per watchdog tick. control_answered: the control thread ran
  // the last heartbeat task; engine_beat: the engine's loop counter now.
  // True: send WATCHDOG=1 now (and post the next control heartbeat task).
  bool may_ping(bool control_answered, uint64_t engine_beat) {
    const bool engine_moved = engine_beat != engine_beat_at_ping_;
    stall_ = control_answered ? (engine_moved ? Stall::kNone : Stall::kEngine)
                              : (engine_moved ? Stall::kControl : Stall::kBoth);
    if (stall_ != Stall::kNone) return false;
    engine_beat_at_ping_ = engine_beat;
    return true;
  }

  // Why the last may_ping() refused (kNone when it allowed the ping).
  Stall stall() const { return stall_; }

 private:
  uint64_t engine_beat_at_ping_;
  Stall stall_ = Stall::kNone;
};

inline const char* stall_name(WatchdogGate::Stall s) {
  switch (s) {
    case WatchdogGate::Stall::kNone:
      return "none";
    case WatchdogGate::Stall::kControl:
      return "control thread";
    case WatchdogGate::Stall::kEngine:
      return "engine thread";
    case WatchdogGate::Stall::kBoth:
      return "control and engine threads";
  }
  return "?";
}

}  // namespace conduit::telemetry
