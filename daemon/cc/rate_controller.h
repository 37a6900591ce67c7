// The per-flow congestion-control interface the engine talks to.
//
// One controller per QP (flow) on the sending side. The engine feeds it
// events with the current time and reads back the rate the pacer must
// enforce. A controller never reads a clock and never sets a timer itself:
// it reports its next deadline and the engine arms a timer wheel entry for it,
// so idle flows cost nothing. New algorithms (Timely, Swift) implement this
// interface and get a case in make_controller(); callers do not change.
//
// Thread role: a controller belongs to the one engine lcore that owns the
// flow; it is not thread-safe.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>

#include "cc/dcqcn_params.h"

namespace conduit::cc {

inline constexpr uint64_t kNoDeadline = std::numeric_limits<uint64_t>::max();

class RateController {
 public:
  virtual ~RateController() = default;

  // The rate the pacer must enforce now, bit/s.
  virtual uint64_t rate_bps() const = 0;
  // A CNP for this flow arrived at now_ns. Returns the new rate, bit/s.
  virtual uint64_t on_cnp(uint64_t now_ns) = 0;
  // len_bytes left the host for this flow at now_ns. Returns the new rate.
  virtual uint64_t on_bytes_sent(uint64_t now_ns, uint64_t len_bytes) = 0;
  // An ACK measured rtt_ns (delay-based algorithms use it; DCQCN ignores it).
  virtual uint64_t on_rtt_sample(uint64_t now_ns, uint64_t rtt_ns) {
    (void)now_ns;
    (void)rtt_ns;
    return rate_bps();
  }
  // Runs every timer due at or before now_ns. Returns the new rate.
  virtual uint64_t on_timer(uint64_t now_ns) = 0;
  // Absolute time of the next timer, or kNoDeadline. The engine calls
  // on_timer() at (or after) this time; calling it early is harmless.
  virtual uint64_t next_deadline_ns() const = 0;
};

struct ControllerConfig;

// A policy reload's new parameters for a running flow: the same algorithm
// takes them in place and keeps its state (DCQCN: rates, alpha and stages,
// clamped to the new bounds); another algorithm gets a new controller, which
// starts as a new flow's would. *rc stays as it was when config is invalid
// (false).
bool reconfigure_controller(std::unique_ptr<RateController>& rc, const ControllerConfig& config,
                            uint64_t line_rate_bps, uint64_t now_ns);

enum class ControllerKind : uint8_t {
  kNone,   // always the line rate; CNPs are counted and ignored
  kFixed,  // a configured constant rate
  kDcqcn,  // DCQCN reaction point
};

struct ControllerConfig {
  ControllerKind kind = ControllerKind::kDcqcn;
  uint64_t fixed_rate_bps = 0;  // kFixed only; capped at the line rate
  DcqcnParams dcqcn = DcqcnParams::mlx5_defaults();
  bool operator==(const ControllerConfig&) const = default;
};

// Builds a controller for a new flow (setup path: allocates once per flow).
// line_rate_bps is the port speed. Returns nullptr for an invalid config
// (validate() says why).
std::unique_ptr<RateController> make_controller(const ControllerConfig& config,
                                                uint64_t line_rate_bps, uint64_t now_ns);

// A constant rate that CNPs do not move: `none` (the line rate) and `fixed`
// (a configured rate, e.g. a bulk class capped by policy). CNPs are counted.
class ConstantRateController final : public RateController {
 public:
  explicit ConstantRateController(uint64_t rate_bps) : rate_bps_(rate_bps) {}
  uint64_t rate_bps() const override { return rate_bps_; }
  uint64_t on_cnp(uint64_t) override {
    ++cnps_ignored_;
    return rate_bps_;
  }
  uint64_t on_bytes_sent(uint64_t, uint64_t) override { return rate_bps_; }
  uint64_t on_timer(uint64_t) override { return rate_bps_; }
  uint64_t next_deadline_ns() const override { return kNoDeadline; }
  uint64_t cnps_ignored() const { return cnps_ignored_; }
  void set_rate(uint64_t rate_bps) { rate_bps_ = rate_bps; }

 private:
  uint64_t rate_bps_;
  uint64_t cnps_ignored_ = 0;
};

}  // namespace conduit::cc
