#include "cc/dcqcn_params.h"

namespace conduit::cc {

DcqcnParams DcqcnParams::paper() {
  DcqcnParams p;
  p.rpg_time_reset = 55;
  p.rpg_byte_reset = 156250;  // 10 MB in 64-byte blocks
  p.rpg_threshold = 5;
  p.rpg_ai_rate = 40;
  p.rpg_hai_rate = 200;
  p.rpg_gd = 11;
  p.rpg_min_dec_fac = 50;  // never binding with gd = 11: α ≤ 1 cuts at most 50 %
  p.rpg_min_rate = 100;
  p.rpg_max_rate = 0;
  p.rate_to_set_on_first_cnp = 0;
  p.rate_reduce_monitor_period = 0;  // the paper cuts on every CNP
  p.initial_alpha_value = 1024;      // α = 1 exactly
  p.dce_tcp_g = 1020;                // g = 4/1024 = 1/256
  p.dce_tcp_rtt = 55;
  p.clamp_tgt_rate = true;  // the paper always sets RT ← RC on a CNP
  p.clamp_tgt_rate_after_time_inc = true;
  return p;
}

const char* validate(const DcqcnParams& p) {
  if (p.rpg_time_reset == 0) return "rpg_time_reset must be at least 1 us";
  if (p.rpg_threshold > 31) return "rpg_threshold must be in 0..31";
  // A step of 0 would hold RT below the ceiling for good: the episode never ends.
  if (p.rpg_ai_rate == 0) return "rpg_ai_rate must be at least 1 Mbit/s";
  if (p.rpg_hai_rate == 0) return "rpg_hai_rate must be at least 1 Mbit/s";
  if (p.rpg_gd > 31) return "rpg_gd must be in 0..31";
  if (p.rpg_min_dec_fac > 100) return "rpg_min_dec_fac is a percentage (0..100)";
  if (p.rpg_min_rate == 0) return "rpg_min_rate must be at least 1 Mbit/s";
  if (p.rpg_max_rate != 0 && p.rpg_max_rate < p.rpg_min_rate) {
    return "rpg_max_rate must be 0 (line rate) or at least rpg_min_rate";
  }
  if (p.initial_alpha_value > 1024) return "initial_alpha_value must be in 0..1024";
  if (p.dce_tcp_g > 1024) return "dce_tcp_g must be in 0..1024";
  if (p.dce_tcp_rtt == 0) return "dce_tcp_rtt must be at least 1 us";
  return nullptr;
}

const char* validate(const NpParams& p) {
  if (p.cnp_dscp > 63) return "cnp_dscp must be in 0..63";
  if (p.cnp_802p_prio > 7) return "cnp_802p_prio must be in 0..7";
  if (p.cnp_ecn > 3) return "cnp_ecn must be an ECN codepoint (0..3)";
  return nullptr;
}

}  // namespace conduit::cc
