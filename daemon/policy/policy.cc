#include "policy/policy.h"

#include <algorithm>
#include <array>
#include <string_view>

namespace conduit::policy {

DcqcnParams dcqcn_preset(DcqcnPreset preset) {
  DcqcnParams p;
  switch (preset) {
    case DcqcnPreset::kMlx5:
      // ConnectX firmware defaults (mlxconfig dump, roce-dcqcn-brief.md §3).
      p.rpg_time_reset_ns = 300'000;
      // mlx5 default 32767; the unit is not documented, 64-byte units assumed.
      p.rpg_byte_reset_bytes = 32767ull * 64;
      p.rpg_threshold = 1;
      p.rpg_ai_rate_bps = 5'000'000;
      p.rpg_hai_rate_bps = 50'000'000;
      p.rpg_gd = 11;
      p.rpg_min_dec_fac_percent = 50;
      p.rpg_min_rate_bps = 1'000'000;
      p.rpg_max_rate_bps = 0;
      p.rate_to_set_on_first_cnp_bps = 0;
      p.rate_reduce_monitor_period_ns = 4'000;
      p.initial_alpha_value = 1023;
      p.dce_tcp_g = 1019;
      p.dce_tcp_rtt_ns = 1'000;
      p.clamp_tgt_rate = false;
      p.clamp_tgt_rate_after_time_inc = true;
      break;
    case DcqcnPreset::kPaper:
      // Zhu et al., SIGCOMM'15, as the brief lists them; R_HAI and the
      // 100 Mbit/s floor come from the authors' ns-3 code.
      p.rpg_time_reset_ns = 55'000;
      p.rpg_byte_reset_bytes = 10'000'000;
      p.rpg_threshold = 5;
      p.rpg_ai_rate_bps = 40'000'000;
      p.rpg_hai_rate_bps = 200'000'000;
      p.rpg_gd = 11;
      p.rpg_min_dec_fac_percent = 50;
      p.rpg_min_rate_bps = 100'000'000;
      p.rpg_max_rate_bps = 0;
      p.rate_to_set_on_first_cnp_bps = 0;
      p.rate_reduce_monitor_period_ns = 0;  // every CNP cuts; the NP spaces them
      p.initial_alpha_value = 1023;
      p.dce_tcp_g = 1020;  // g = 4/1024 = 1/256
      p.dce_tcp_rtt_ns = 55'000;
      p.clamp_tgt_rate = true;  // RT <- RC on every cut, as the paper's equations
      p.clamp_tgt_rate_after_time_inc = true;
      break;
  }
  return p;
}

uint64_t TransportSection::local_ack_timeout_ns() const {
  if (timeout_exponent == 0) return 0;
  return 4096ull << timeout_exponent;
}

uint64_t rnr_timer_ns(uint32_t code) {
  // IB_RNR_TIMER_* in hundredths of a millisecond (10 us units).
  static constexpr std::array<uint32_t, 32> kCentiMs = {
      65536, 1,    2,    3,    4,    6,     8,     12,    16,    24,   32,
      48,    64,   96,   128,  192,  256,   384,   512,   768,   1024, 1536,
      2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
  return static_cast<uint64_t>(kCentiMs[code & 31]) * 10'000;
}

const TrafficClass& Policy::default_class() const {
  for (const auto& tc : traffic_classes) {
    if (tc.is_default) return tc;
  }
  // A validated policy always has one; a hand-built one may not.
  return traffic_classes.front();
}

const TrafficClass* Policy::find_class(std::string_view name) const {
  for (const auto& tc : traffic_classes) {
    if (tc.name == name) return &tc;
  }
  return nullptr;
}

const TrafficClass* Policy::class_for_dscp(uint8_t dscp) const {
  for (const auto& tc : traffic_classes) {
    if (tc.dscp == dscp) return &tc;
  }
  return nullptr;
}

TrafficClass builtin_default_class() {
  TrafficClass tc;
  tc.name = "default";
  tc.is_default = true;
  return tc;
}

namespace {

// Whether args hold one of opts: "-a" also as "-aVALUE", "--allow" also as "--allow=VALUE".
bool has_option(const std::vector<std::string>& args,
                std::initializer_list<std::string_view> opts) {
  return std::any_of(args.begin(), args.end(), [&](const std::string& a) {
    return std::any_of(opts.begin(), opts.end(), [&](std::string_view o) {
      if (o.starts_with("--")) return a == o || a.starts_with(std::string(o) + "=");
      return a.starts_with(o);
    });
  });
}

}  // namespace

std::vector<std::string> eal_arguments(const Policy& p) {
  std::vector<std::string> args = p.port.eal_args;
  if (p.port.device_kind == DeviceKind::kPci &&
      !has_option(args, {"-a", "--allow", "-b", "--block", "--no-pci", "--pci-whitelist",
                         "--pci-blacklist"})) {
    args.push_back("-a");
    args.push_back(p.port.device);
  }
  // One engine, on the first lcore listed (policy_warnings says so when there are more).
  if (!has_option(args, {"-l", "--lcores"})) {
    args.push_back("-l");
    args.push_back(std::to_string(p.daemon.lcores.empty() ? 0 : p.daemon.lcores.front()));
  }
  return args;
}

}  // namespace conduit::policy
