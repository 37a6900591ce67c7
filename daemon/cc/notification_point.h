// DCQCN notification point for one flow on the receiving side.
//
// On a CE-marked packet: send a CNP now if none went to this flow within
// min_time_between_cnps; marks inside that interval are absorbed, so while
// marks keep arriving the flow gets at most one CNP per interval. This is the
// mlx5 behaviour; it needs no timer because a CNP is only ever triggered by an
// arriving marked packet.
//
// Thread role: owned by the engine lcore that receives the flow.
#pragma once

#include <cstdint>

#include "cc/dcqcn_params.h"

namespace conduit::cc {

class NotificationPoint {
 public:
  explicit NotificationPoint(const NpParams& params)
      : interval_ns_(uint64_t{params.min_time_between_cnps} * 1000) {}

  // New spacing (a policy reload); applies from the next marked packet.
  void set_params(const NpParams& params) {
    interval_ns_ = uint64_t{params.min_time_between_cnps} * 1000;
  }

  // A CE-marked packet of this flow arrived at now_ns. Returns true when the
  // caller must send one CNP to the flow's sender now.
  bool on_ce_marked(uint64_t now_ns) {
    ++marks_;
    // Not now_ns - last_cnp_ns_, which wraps for a mark stamped before the last CNP.
    if (sent_any_ && interval_ns_ != 0 && now_ns < last_cnp_ns_ + interval_ns_) return false;
    prev_sent_any_ = sent_any_;
    prev_cnp_ns_ = last_cnp_ns_;
    sent_any_ = true;
    last_cnp_ns_ = now_ns;
    ++cnps_;
    return true;
  }

  // The CNP on_ce_marked() just asked for could not be sent (the sender's address not
  // resolved yet, no buffer): the next marked packet asks again at once, and cnps() counts
  // only CNPs that went. Only right after on_ce_marked() returned true.
  void cnp_not_sent() {
    sent_any_ = prev_sent_any_;
    last_cnp_ns_ = prev_cnp_ns_;
    --cnps_;
  }

  uint64_t marks() const { return marks_; }
  uint64_t cnps() const { return cnps_; }

 private:
  uint64_t interval_ns_;
  uint64_t last_cnp_ns_ = 0;
  bool sent_any_ = false;
  uint64_t prev_cnp_ns_ = 0;  // before the last CNP asked for (cnp_not_sent)
  bool prev_sent_any_ = false;
  uint64_t marks_ = 0;
  uint64_t cnps_ = 0;
};

}  // namespace conduit::cc
