// conduitctl qps: the per-QP table as text (pure: no I/O, unit-tested).
//
// Columns are as wide as their widest cell, header included (as ip and ss size
// theirs), so IPv6 peers and long class names keep the table aligned; one space
// between columns, none after the last. Counts and rates are right-aligned; names and the
// QPN, PID and peer QPN columns (identifiers) left.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proto/control_protocol.h"

namespace conduit::ctl {

// A DCQCN rate in bit/s as the RATE[bit/s] column shows it: "-" when unknown (0),
// else three significant figures with an SI prefix: "9.61G", "300M", "40.0k", "512".
std::string rate_text(uint64_t bps);

// The table `conduitctl qps` prints: a header line and one line per QP, or
// "(no QPs)" after the header when there are none. Every line ends in '\n'.
std::string format_qp_table(const std::vector<proto::QpSummary>& qps);

}  // namespace conduit::ctl
