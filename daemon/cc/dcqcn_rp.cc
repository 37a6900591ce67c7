#include "cc/dcqcn_rp.h"

#include <algorithm>
#include <cmath>

namespace conduit::cc {

namespace {
constexpr uint64_t kMbps = 1'000'000;
constexpr uint64_t kUsNs = 1'000;
constexpr uint64_t kByteResetBlock = 64;  // rpg_byte_reset unit, bytes
}  // namespace

DcqcnRp::DcqcnRp(const DcqcnParams& params, uint64_t line_rate_bps, uint64_t /*now_ns*/)
    : p_(params) {
  derive(line_rate_bps);
  rc_bps_ = rt_bps_ = max_rate_bps_;
}

void DcqcnRp::derive(uint64_t line_rate_bps) {
  max_rate_bps_ = p_.rpg_max_rate == 0 ? line_rate_bps
                                       : std::min(line_rate_bps, uint64_t{p_.rpg_max_rate} * kMbps);
  min_rate_bps_ = std::min(uint64_t{p_.rpg_min_rate} * kMbps, max_rate_bps_);
  ai_bps_ = uint64_t{p_.rpg_ai_rate} * kMbps;
  hai_bps_ = uint64_t{p_.rpg_hai_rate} * kMbps;
  time_reset_ns_ = uint64_t{p_.rpg_time_reset} * kUsNs;
  byte_reset_bytes_ = uint64_t{p_.rpg_byte_reset} * kByteResetBlock;
  monitor_ns_ = uint64_t{p_.rate_reduce_monitor_period} * kUsNs;
  alpha_period_ns_ = uint64_t{p_.dce_tcp_rtt} * kUsNs;
  g_ = static_cast<double>(1024 - p_.dce_tcp_g) / 1024.0;
}

void DcqcnRp::reconfigure(const DcqcnParams& params, uint64_t line_rate_bps, uint64_t now_ns) {
  on_timer(now_ns);      // what was due happened under the old parameters
  settle_alpha(now_ns);  // whole α periods at the old length
  p_ = params;
  derive(line_rate_bps);
  if (!limited_) {
    rc_bps_ = rt_bps_ = max_rate_bps_;
    return;
  }
  rc_bps_ = std::clamp(rc_bps_, min_rate_bps_, max_rate_bps_);
  rt_bps_ = std::clamp(rt_bps_, rc_bps_, max_rate_bps_);
  if (next_increase_ns_ != kNoDeadline) {
    next_increase_ns_ = std::min(next_increase_ns_, now_ns + time_reset_ns_);
  }
  if (pending_cut_ns_ != kNoDeadline) {
    pending_cut_ns_ = std::min(pending_cut_ns_, last_cut_ns_ + monitor_ns_);
  }
  if (rc_bps_ >= max_rate_bps_) {
    // The new ceiling is at or below the current rate: the episode is over.
    rc_bps_ = rt_bps_ = max_rate_bps_;
    limited_ = false;
    next_increase_ns_ = kNoDeadline;
    pending_cut_ns_ = kNoDeadline;
  }
}

double DcqcnRp::alpha(uint64_t now_ns) const {
  if (!limited_ || now_ns < alpha_period_start_ns_) return alpha_;
  const uint64_t periods = (now_ns - alpha_period_start_ns_) / alpha_period_ns_;
  if (periods == 0) return alpha_;
  double a = cnp_in_alpha_period_ ? (1.0 - g_) * alpha_ + g_ : (1.0 - g_) * alpha_;
  if (periods > 1) a *= std::pow(1.0 - g_, static_cast<double>(periods - 1));
  return a;
}

void DcqcnRp::settle_alpha(uint64_t now_ns) {
  if (now_ns < alpha_period_start_ns_) return;
  const uint64_t periods = (now_ns - alpha_period_start_ns_) / alpha_period_ns_;
  if (periods == 0) return;
  alpha_ = alpha(now_ns);
  alpha_period_start_ns_ += periods * alpha_period_ns_;
  cnp_in_alpha_period_ = false;
}

uint64_t DcqcnRp::on_cnp(uint64_t now_ns) {
  on_timer(now_ns);  // due increases and deferred cuts happened before this CNP
  ++cnps_;
  if (!limited_) {
    // First CNP of a congestion episode: α starts afresh and the timers start.
    limited_ = true;
    alpha_ = static_cast<double>(p_.initial_alpha_value) / 1024.0;
    alpha_period_start_ns_ = now_ns;
    cnp_in_alpha_period_ = true;
    if (p_.rate_to_set_on_first_cnp != 0) {
      const uint64_t r =
          std::clamp(uint64_t{p_.rate_to_set_on_first_cnp} * kMbps, min_rate_bps_, max_rate_bps_);
      rc_bps_ = std::min(rc_bps_, r);
      rt_bps_ = rc_bps_;
      time_stage_ = byte_stage_ = 0;
      bytes_since_event_ = 0;
      byte_inc_since_cut_ = time_inc_since_cut_ = false;
      next_increase_ns_ = now_ns + time_reset_ns_;
      last_cut_ns_ = now_ns;
      has_cut_ = true;
      pending_cut_ns_ = kNoDeadline;
      ++cuts_;
    } else {
      cut(now_ns);
    }
    return rc_bps_;
  }
  settle_alpha(now_ns);
  cnp_in_alpha_period_ = true;
  // now_ns - last_cut_ns_ would wrap for a CNP stamped before the last cut (a caller's
  // older timestamp): that one is inside the period.
  if (monitor_ns_ == 0 || !has_cut_ || now_ns >= last_cut_ns_ + monitor_ns_) {
    cut(now_ns);
  } else if (pending_cut_ns_ == kNoDeadline) {
    pending_cut_ns_ = last_cut_ns_ + monitor_ns_;
  }
  return rc_bps_;
}

void DcqcnRp::cut(uint64_t now_ns) {
  settle_alpha(now_ns);
  const bool clamp = p_.clamp_tgt_rate || byte_inc_since_cut_ ||
                     (p_.clamp_tgt_rate_after_time_inc && time_inc_since_cut_);
  if (clamp) rt_bps_ = rc_bps_;
  // α·1024 / 2^gd: rpg_gd = 11 gives α/2.
  double factor = 1.0 - alpha_ * 1024.0 / std::ldexp(1.0, static_cast<int>(p_.rpg_gd));
  factor = std::max(factor, static_cast<double>(p_.rpg_min_dec_fac) / 100.0);
  factor = std::min(factor, 1.0);
  const auto cut_bps = static_cast<uint64_t>(static_cast<double>(rc_bps_) * factor);
  rc_bps_ = std::max(cut_bps, min_rate_bps_);
  rt_bps_ = std::max(rt_bps_, rc_bps_);
  time_stage_ = byte_stage_ = 0;
  bytes_since_event_ = 0;
  byte_inc_since_cut_ = time_inc_since_cut_ = false;
  next_increase_ns_ = now_ns + time_reset_ns_;
  last_cut_ns_ = now_ns;
  has_cut_ = true;
  pending_cut_ns_ = kNoDeadline;
  ++cuts_;
}

void DcqcnRp::increase(bool from_timer) {
  const uint32_t f = p_.rpg_threshold;
  const bool bytes_on = byte_reset_bytes_ != 0;
  const bool time_past = time_stage_ > f;
  const bool byte_past = bytes_on && byte_stage_ > f;
  if (time_past && byte_past) {
    rt_bps_ = std::min(rt_bps_ + hai_bps_, max_rate_bps_);
  } else if (time_past || byte_past) {
    rt_bps_ = std::min(rt_bps_ + ai_bps_, max_rate_bps_);
  }                                       // else fast recovery: RT stays
  rc_bps_ = (rt_bps_ + rc_bps_ + 1) / 2;  // rounds up so RC reaches RT
  if (from_timer) {
    time_inc_since_cut_ = true;
  } else {
    byte_inc_since_cut_ = true;
  }
  if (rc_bps_ >= max_rate_bps_) {
    rc_bps_ = rt_bps_ = max_rate_bps_;
    // Back at full speed: the episode ends and the flow needs no timers, unless a
    // coalesced CNP still owes its cut at the end of the monitor period.
    if (pending_cut_ns_ == kNoDeadline) {
      limited_ = false;
      next_increase_ns_ = kNoDeadline;
    }
  }
}

uint64_t DcqcnRp::on_timer(uint64_t now_ns) {
  while (limited_) {
    const uint64_t next = std::min(pending_cut_ns_, next_increase_ns_);
    if (next > now_ns) break;
    if (pending_cut_ns_ <= next_increase_ns_) {
      cut(pending_cut_ns_);
    } else {
      next_increase_ns_ += time_reset_ns_;
      ++time_stage_;
      increase(/*from_timer=*/true);
    }
  }
  return rc_bps_;
}

uint64_t DcqcnRp::on_bytes_sent(uint64_t now_ns, uint64_t len_bytes) {
  on_timer(now_ns);
  if (!limited_ || byte_reset_bytes_ == 0) return rc_bps_;
  bytes_since_event_ += len_bytes;
  while (limited_ && bytes_since_event_ >= byte_reset_bytes_) {
    bytes_since_event_ -= byte_reset_bytes_;
    ++byte_stage_;
    increase(/*from_timer=*/false);
  }
  return rc_bps_;
}

uint64_t DcqcnRp::next_deadline_ns() const {
  if (!limited_) return kNoDeadline;
  return std::min(next_increase_ns_, pending_cut_ns_);
}

}  // namespace conduit::cc
