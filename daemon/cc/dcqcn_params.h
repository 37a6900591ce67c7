// DCQCN knobs, named exactly as the mlx5 firmware/sysfs parameters so an
// operator can carry values over from a ConnectX NIC.
//
// Units follow mlx5 where it is documented (see roce-dcqcn-brief.md §3):
// times in microseconds, rates in Mbit/s, alpha-related values in 1/1024
// fixed point. A unit marked [unconfirmed] is our best reading of the public
// documentation and is stated so an operator can check it on real hardware.
#pragma once

#include <cstdint>

namespace conduit::cc {

// Reaction-point (sender) parameters. Plain data; copy freely.
struct DcqcnParams {
  // Rate-increase timer period, µs. Each expiry is one "time stage" event.
  uint32_t rpg_time_reset = 300;
  // Byte counter: one "byte stage" event per this many transmitted bytes,
  // in 64-byte blocks as mlx5 documents it [unconfirmed]. 0 disables it.
  uint32_t rpg_byte_reset = 32767;
  // F: increase events of one kind before leaving fast recovery. Count.
  uint32_t rpg_threshold = 1;
  // Additive-increase step of the target rate, Mbit/s; at least 1.
  uint32_t rpg_ai_rate = 5;
  // Hyper-increase step of the target rate, Mbit/s; at least 1.
  uint32_t rpg_hai_rate = 50;
  // Rate cut is RC·(1 − α_fx / 2^rpg_gd), α_fx = α·1024; 11 gives RC·(1 − α/2).
  uint32_t rpg_gd = 11;
  // One cut never leaves less than this percentage of the current rate. 0..100.
  uint32_t rpg_min_dec_fac = 50;
  // Rate floor, Mbit/s.
  uint32_t rpg_min_rate = 1;
  // Rate ceiling, Mbit/s; 0 means the line rate given to the controller.
  uint32_t rpg_max_rate = 0;
  // Rate set on the first CNP of a congestion episode, Mbit/s; 0 means do the
  // normal multiplicative cut instead.
  uint32_t rate_to_set_on_first_cnp = 0;
  // At most one rate cut per this period, µs; CNPs arriving inside it are
  // coalesced into one deferred cut at its end. 0 cuts on every CNP.
  uint32_t rate_reduce_monitor_period = 4;
  // α at the first CNP of a congestion episode, 1/1024 units (1024 = 1.0;
  // mlx5 accepts at most 1023).
  uint32_t initial_alpha_value = 1023;
  // α smoothing in 1/1024 units: each α period, α ← (G/1024)·α + (1024−G)/1024
  // if a CNP arrived in it, else α ← (G/1024)·α. So g = (1024 − G)/1024.
  uint32_t dce_tcp_g = 1019;
  // α update period, µs (the paper's K).
  uint32_t dce_tcp_rtt = 1;
  // 1: on every CNP the target rate is clamped to the current rate (RT ← RC).
  bool clamp_tgt_rate = false;
  // With clamp_tgt_rate = 0: also clamp when the last increase since the
  // previous cut came from the timer (a byte-counter increase always clamps).
  bool clamp_tgt_rate_after_time_inc = true;
  bool operator==(const DcqcnParams&) const = default;

  // The mlx5 firmware defaults (ConnectX mlxconfig dump; brief §3).
  static DcqcnParams mlx5_defaults() { return DcqcnParams{}; }
  // The DCQCN paper's constants (Zhu et al., SIGCOMM'15): K = 55 µs,
  // g = 1/256, T = 55 µs, B = 10 MB, F = 5, R_AI = 40 Mbit/s; a cut on every
  // CNP with RT ← RC. R_HAI (200 Mbit/s) and the 100 Mbit/s floor come from
  // the authors' ns-3 configuration, which the paper does not state.
  static DcqcnParams paper();
};

// Notification-point (receiver) parameters.
struct NpParams {
  // Minimum spacing of CNPs sent to one flow, µs (mlx5 firmware: 2, the
  // brief's mlxconfig dump and the policy default; some firmware tables say 4;
  // the paper: 50).
  uint32_t min_time_between_cnps = 2;
  // Marking of the CNPs this host sends (mlx5 cnp_dscp / cnp_802p_prio).
  uint8_t cnp_dscp = 48;
  uint8_t cnp_802p_prio = 6;
  uint8_t cnp_ecn = 2;  // ECT(0): a ConnectX-4 Lx CNP carries ToS 0xC2

  static NpParams mlx5_defaults() { return NpParams{}; }
  static NpParams paper() {
    NpParams p;
    p.min_time_between_cnps = 50;
    return p;
  }
};

// Returns nullptr when every knob is in range, else a static message naming
// the first knob that is not (setup code turns it into an error).
const char* validate(const DcqcnParams& p);
const char* validate(const NpParams& p);

}  // namespace conduit::cc
