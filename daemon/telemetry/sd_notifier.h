// Talks to the service manager (systemd Type=notify): READY=1, STATUS=...,
// RELOADING=1, STOPPING=1 and WATCHDOG=1 datagrams to $NOTIFY_SOCKET.
//
// Uses libsystemd's sd_notify when the build found it; otherwise sends the
// same datagram itself (the protocol is one AF_UNIX datagram of
// newline-separated assignments; a leading '@' means an abstract socket).
// Without $NOTIFY_SOCKET every call is a no-op that returns 0.
// Thread role: any thread; calls do not share state.
#pragma once

#include <cstdint>
#include <string>

namespace conduit::telemetry {

class SdNotifier {
 public:
  // Reads $NOTIFY_SOCKET and $WATCHDOG_USEC (honouring $WATCHDOG_PID).
  SdNotifier();

  bool enabled() const { return !socket_path_.empty(); }
  // The watchdog interval systemd expects pings within; 0 when disabled.
  uint64_t watchdog_interval_us() const { return watchdog_us_; }

  // Sends `state` (e.g. "READY=1\nSTATUS=serving"). 0, or a negative errno.
  int notify(const std::string& state) const;

 private:
  std::string socket_path_;
  uint64_t watchdog_us_ = 0;
};

}  // namespace conduit::telemetry
