// Internal: the DCQCN knob table shared by the loader and the dump, so the
// two cannot disagree about a knob's name, unit or range.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "policy/policy.h"
#include "policy/units.h"

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
  // The step the engine keeps it in, mlx5's unit: 1 us, 1 Mbit/s, 64 bytes
  // (0 for integers and booleans, which are stored as written). A value that
  // is not a whole number of units is rounded down, with a warning
  // (policy_warnings); a non-zero value below one unit is refused, since 0
  // means something else (disabled, no cap).
  uint64_t unit = 0;
};

inline constexpr uint64_t kMinRateBps = 1'000;              // 1 kbit/s
inline constexpr uint64_t kMaxRateBps = 1'000'000'000'000;  // 1 Tbit/s
inline constexpr uint64_t kMaxKnobTimeNs = 10'000'000'000;  // 10 s

inline constexpr uint64_t kKnobTimeUnitNs = 1'000;       // mlx5 times are in us
inline constexpr uint64_t kKnobRateUnitBps = 1'000'000;  // mlx5 rates are in Mbit/s
inline constexpr uint64_t kKnobSizeUnitBytes = 64;       // rpg_byte_reset counts 64-byte blocks
// The engine keeps rpg_byte_reset in 32 bits of 64-byte blocks; 128 GiB fits.
inline constexpr uint64_t kMaxByteResetBytes = 128ull << 30;

inline constexpr DcqcnKnob kDcqcnKnobs[] = {
    {"rpg_time_reset", KnobKind::kDuration, &DcqcnParams::rpg_time_reset_ns, nullptr, nullptr,
     1'000, kMaxKnobTimeNs, kKnobTimeUnitNs},
    {"rpg_byte_reset", KnobKind::kSize, &DcqcnParams::rpg_byte_reset_bytes, nullptr, nullptr, 0,
     kMaxByteResetBytes, kKnobSizeUnitBytes},
    {"rpg_threshold", KnobKind::kInteger, nullptr, &DcqcnParams::rpg_threshold, nullptr, 1, 31},
    {"rpg_ai_rate", KnobKind::kRate, &DcqcnParams::rpg_ai_rate_bps, nullptr, nullptr,
     kKnobRateUnitBps, kMaxRateBps, kKnobRateUnitBps},
    {"rpg_hai_rate", KnobKind::kRate, &DcqcnParams::rpg_hai_rate_bps, nullptr, nullptr,
     kKnobRateUnitBps, kMaxRateBps, kKnobRateUnitBps},
    {"rpg_gd", KnobKind::kInteger, nullptr, &DcqcnParams::rpg_gd, nullptr, 1, 15},
    {"rpg_min_dec_fac", KnobKind::kInteger, nullptr, &DcqcnParams::rpg_min_dec_fac_percent, nullptr,
     1, 100},
    {"rpg_min_rate", KnobKind::kRate, &DcqcnParams::rpg_min_rate_bps, nullptr, nullptr,
     kKnobRateUnitBps, kMaxRateBps, kKnobRateUnitBps},
    {"rpg_max_rate", KnobKind::kRate, &DcqcnParams::rpg_max_rate_bps, nullptr, nullptr, 0,
     kMaxRateBps, kKnobRateUnitBps},
    {"rate_to_set_on_first_cnp", KnobKind::kRate, &DcqcnParams::rate_to_set_on_first_cnp_bps,
     nullptr, nullptr, 0, kMaxRateBps, kKnobRateUnitBps},
    {"rate_reduce_monitor_period", KnobKind::kDuration, &DcqcnParams::rate_reduce_monitor_period_ns,
     nullptr, nullptr, 0, kMaxKnobTimeNs, kKnobTimeUnitNs},
    {"initial_alpha_value", KnobKind::kInteger, nullptr, &DcqcnParams::initial_alpha_value, nullptr,
     0, 1023},
    {"dce_tcp_g", KnobKind::kInteger, nullptr, &DcqcnParams::dce_tcp_g, nullptr, 0, 1023},
    {"dce_tcp_rtt", KnobKind::kDuration, &DcqcnParams::dce_tcp_rtt_ns, nullptr, nullptr, 1'000,
     kMaxKnobTimeNs, kKnobTimeUnitNs},
    {"clamp_tgt_rate", KnobKind::kBool, nullptr, nullptr, &DcqcnParams::clamp_tgt_rate, 0, 1},
    {"clamp_tgt_rate_after_time_inc", KnobKind::kBool, nullptr, nullptr,
     &DcqcnParams::clamp_tgt_rate_after_time_inc, 0, 1},
};

// A duration, rate or size knob's value as the policy file would spell it.
inline std::string format_knob(KnobKind kind, uint64_t v) {
  switch (kind) {
    case KnobKind::kDuration:
      return format_duration(v);
    case KnobKind::kRate:
      return format_rate(v);
    default:
      return format_size(v);
  }
}

}  // namespace conduit::policy::detail
