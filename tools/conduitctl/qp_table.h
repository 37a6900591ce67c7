// conduitctl qps: the per-QP table as text (pure: no I/O, unit-tested).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proto/control_protocol.h"

namespace conduit::ctl {

// A DCQCN rate in bit/s as the RATE column shows it: "-" when unknown (0).
std::string rate_text(uint64_t bps);

// The table `conduitctl qps` prints: a header line and one line per QP, or
// "(no QPs)" after the header when there are none. Every line ends in '\n'.
std::string format_qp_table(const std::vector<proto::QpSummary>& qps);

}  // namespace conduit::ctl
