#include "cc/rate_controller.h"

#include <algorithm>

#include "cc/dcqcn_rp.h"

namespace conduit::cc {

std::unique_ptr<RateController> make_controller(const ControllerConfig& config,
                                                uint64_t line_rate_bps, uint64_t now_ns) {
  if (line_rate_bps == 0) return nullptr;
  switch (config.kind) {
    case ControllerKind::kNone:
      return std::make_unique<ConstantRateController>(line_rate_bps);
    case ControllerKind::kFixed:
      if (config.fixed_rate_bps == 0) return nullptr;
      return std::make_unique<ConstantRateController>(
          std::min(config.fixed_rate_bps, line_rate_bps));
    case ControllerKind::kDcqcn:
      if (validate(config.dcqcn) != nullptr) return nullptr;
      return std::make_unique<DcqcnRp>(config.dcqcn, line_rate_bps, now_ns);
  }
  return nullptr;
}

bool reconfigure_controller(std::unique_ptr<RateController>& rc, const ControllerConfig& config,
                            uint64_t line_rate_bps, uint64_t now_ns) {
  if (line_rate_bps == 0) return false;
  if (config.kind == ControllerKind::kDcqcn) {
    if (validate(config.dcqcn) != nullptr) return false;
    if (auto* d = dynamic_cast<DcqcnRp*>(rc.get())) {
      d->reconfigure(config.dcqcn, line_rate_bps, now_ns);
      return true;
    }
  } else if (auto* c = dynamic_cast<ConstantRateController*>(rc.get())) {
    if (config.kind == ControllerKind::kFixed && config.fixed_rate_bps == 0) return false;
    c->set_rate(config.kind == ControllerKind::kNone
                    ? line_rate_bps
                    : std::min(config.fixed_rate_bps, line_rate_bps));
    return true;
  }
  auto fresh = make_controller(config, line_rate_bps, now_ns);
  if (!fresh) return false;
  rc = std::move(fresh);
  return true;
}

}  // namespace conduit::cc
