// DCQCN reaction point: the sender side of DCQCN for one flow.
//
// State: current rate RC, target rate RT, α, the rate-increase timer, the byte
// counter and their stage counts (brief §3). A flow starts unlimited at the
// maximum rate with no timers; the first CNP starts a congestion episode
// (α = initial_alpha_value, timers start); the episode ends, and the timers
// stop, when RC climbs back to the maximum with no coalesced cut still owed.
//
// Event semantics (documented choices where the references differ):
//  * Cut: if clamping applies, RT ← RC; then RC ← max(RC·max(1 − α·1024/2^gd,
//    min_dec_fac/100), rpg_min_rate). The cut uses α as it stands; the CNP
//    raises α at the end of the current α period (mlx5 periodic update).
//  * α: updated once per dce_tcp_rtt period, phase-anchored at the first CNP:
//    α ← (1−g)α + g if a CNP arrived in the period, else α ← (1−g)α. It is
//    evaluated lazily (closed form), so it needs no timer events.
//  * Coalescing: at most one cut per rate_reduce_monitor_period; a CNP inside
//    the period schedules one cut at its end (a deadline).
//  * Increase: every rpg_time_reset µs (time stage) and every rpg_byte_reset
//    blocks sent (byte stage), both restarted by a cut. While both stages are
//    ≤ F: fast recovery RC ← (RT+RC)/2. When both exceed F: hyper increase
//    RT += R_HAI. Otherwise additive increase RT += R_AI. With the byte
//    counter disabled only the time stage counts (no hyper increase).
//    RC rounds up so it reaches RT exactly.
//
// Thread role: owned by one engine lcore. No allocation after construction.
#pragma once

#include <cstdint>

#include "cc/dcqcn_params.h"
#include "cc/rate_controller.h"

namespace conduit::cc {

class DcqcnRp final : public RateController {
 public:
  // params must pass validate(); line_rate_bps > 0.
  DcqcnRp(const DcqcnParams& params, uint64_t line_rate_bps, uint64_t now_ns);

  uint64_t rate_bps() const override { return rc_bps_; }
  uint64_t on_cnp(uint64_t now_ns) override;
  uint64_t on_bytes_sent(uint64_t now_ns, uint64_t len_bytes) override;
  uint64_t on_timer(uint64_t now_ns) override;
  uint64_t next_deadline_ns() const override;
  // New parameters (a policy reload) at now_ns, same validity as the
  // constructor's. The state carries over: α as it stands at now_ns, the
  // stages and the byte count; RC and RT clamped into the new [min, max]
  // (an unlimited flow runs at the new maximum); a pending increase comes no
  // later than one new rpg_time_reset from now.
  void reconfigure(const DcqcnParams& params, uint64_t line_rate_bps, uint64_t now_ns);

  // Observers, for tests, metrics and the simulator.
  uint64_t target_rate_bps() const { return rt_bps_; }
  uint64_t max_rate_bps() const { return max_rate_bps_; }
  // α at now_ns (applies pending α periods without changing state).
  double alpha(uint64_t now_ns) const;
  bool rate_limited() const { return limited_; }
  uint32_t time_stage() const { return time_stage_; }
  uint32_t byte_stage() const { return byte_stage_; }
  uint64_t cnps() const { return cnps_; }
  uint64_t cuts() const { return cuts_; }

 private:
  void derive(uint64_t line_rate_bps);
  void settle_alpha(uint64_t now_ns);
  void cut(uint64_t now_ns);
  void increase(bool from_timer);

  DcqcnParams p_;
  uint64_t max_rate_bps_ = 0;
  uint64_t min_rate_bps_ = 0;
  uint64_t ai_bps_ = 0;
  uint64_t hai_bps_ = 0;
  uint64_t time_reset_ns_ = 0;
  uint64_t byte_reset_bytes_ = 0;
  uint64_t monitor_ns_ = 0;
  uint64_t alpha_period_ns_ = 0;
  double g_ = 0;

  uint64_t rc_bps_ = 0;
  uint64_t rt_bps_ = 0;
  bool limited_ = false;

  double alpha_ = 1.0;
  uint64_t alpha_period_start_ns_ = 0;  // start of the current α period
  bool cnp_in_alpha_period_ = false;

  uint64_t next_increase_ns_ = kNoDeadline;
  uint64_t bytes_since_event_ = 0;
  uint32_t time_stage_ = 0;
  uint32_t byte_stage_ = 0;
  bool byte_inc_since_cut_ = false;
  bool time_inc_since_cut_ = false;

  uint64_t last_cut_ns_ = 0;
  bool has_cut_ = false;
  uint64_t pending_cut_ns_ = kNoDeadline;  // deferred (coalesced) cut

  uint64_t cnps_ = 0;
  uint64_t cuts_ = 0;
};

}  // namespace conduit::cc
