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

}  // namespace conduit::cc
