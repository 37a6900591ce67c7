// Internal: the DCQCN knob table shared by the loader and the dump, so the
// two cannot disagree about a knob's name, unit or range.
#pragma once

#include <cstdint>
#include <string_view>

#include "policy/policy.h"

namespace conduit::policy::detail {

enum class KnobKind { kDuration, kRate, kSize, kInteger, kBool };

struct DcqcnKnob {
  std::string_view name;  // the mlx5 name
  KnobKind kind;
  uint64_t DcqcnParams::*u64;  // durations, rates, sizes
  uint32_t DcqcnParams::*u32;  // integers
  bool DcqcnParams::*flag;     // booleans
  uint64_t min;
  uint64_t max;
};

inline constexpr uint64_t kMinRateBps = 1'000;              // 1 kbit/s
inline constexpr uint64_t kMaxRateBps = 1'000'000'000'000;  // 1 Tbit/s
inline constexpr uint64_t kMaxKnobTimeNs = 10'000'000'000;  // 10 s

inline constexpr DcqcnKnob kDcqcnKnobs[] = {
    {"rpg_time_reset", KnobKind::kDuration, &DcqcnParams::rpg_time_reset_ns, nullptr, nullptr,
     1'000, kMaxKnobTimeNs},
    {"rpg_byte_reset", KnobKind::kSize, &DcqcnParams::rpg_byte_reset_bytes, nullptr, nullptr, 0,
     1ull << 40},
    {"rpg_threshold", KnobKind::kInteger, nullptr, &DcqcnParams::rpg_threshold, nullptr, 1, 31},
    {"rpg_ai_rate", KnobKind::kRate, &DcqcnParams::rpg_ai_rate_bps, nullptr, nullptr, kMinRateBps,
     kMaxRateBps},
    {"rpg_hai_rate", KnobKind::kRate, &DcqcnParams::rpg_hai_rate_bps, nullptr, nullptr, kMinRateBps,
     kMaxRateBps},
    {"rpg_gd", KnobKind::kInteger, nullptr, &DcqcnParams::rpg_gd, nullptr, 1, 15},
    {"rpg_min_dec_fac", KnobKind::kInteger, nullptr, &DcqcnParams::rpg_min_dec_fac_percent, nullptr,
     1, 100},
    {"rpg_min_rate", KnobKind::kRate, &DcqcnParams::rpg_min_rate_bps, nullptr, nullptr, kMinRateBps,
     kMaxRateBps},
    {"rpg_max_rate", KnobKind::kRate, &DcqcnParams::rpg_max_rate_bps, nullptr, nullptr, 0,
     kMaxRateBps},
    {"rate_to_set_on_first_cnp", KnobKind::kRate, &DcqcnParams::rate_to_set_on_first_cnp_bps,
     nullptr, nullptr, 0, kMaxRateBps},
    {"rate_reduce_monitor_period", KnobKind::kDuration, &DcqcnParams::rate_reduce_monitor_period_ns,
     nullptr, nullptr, 0, kMaxKnobTimeNs},
    {"initial_alpha_value", KnobKind::kInteger, nullptr, &DcqcnParams::initial_alpha_value, nullptr,
     0, 1023},
    {"dce_tcp_g", KnobKind::kInteger, nullptr, &DcqcnParams::dce_tcp_g, nullptr, 0, 1023},
    {"dce_tcp_rtt", KnobKind::kDuration, &DcqcnParams::dce_tcp_rtt_ns, nullptr, nullptr, 1'000,
     kMaxKnobTimeNs},
    {"clamp_tgt_rate", KnobKind::kBool, nullptr, nullptr, &DcqcnParams::clamp_tgt_rate, 0, 1},
    {"clamp_tgt_rate_after_time_inc", KnobKind::kBool, nullptr, nullptr,
     &DcqcnParams::clamp_tgt_rate_after_time_inc, 0, 1},
};

}  // namespace conduit::policy::detail
