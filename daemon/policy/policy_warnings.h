// Settings that are valid but that this conduitd does not (fully) carry out.
#pragma once

#include <string>
#include <vector>

#include "policy/policy.h"

namespace conduit::policy {

// One line per valid setting that will not do all an operator may expect of
// it, naming the key: conduitd logs them as warnings at start-up and on each
// reload, and `conduitd --check-config` prints them. Empty when there is none.
//   daemon.lcores  one engine runs, on the first lcore listed; the rest idle
//                  (sharding QPs across engines is not built).
//   DCQCN knobs    a duration, rate or size that is not a whole number of
//                  mlx5's unit (1 us, 1 Mbit/s, 64 B) is rounded down.
//   cnp.min_time_between_cnps  not a whole number of microseconds: rounded
//                  down (under 1 us to 0, a CNP per CE-marked packet).
//   ecn not_ect    in a DCQCN class: switches do not CE-mark its packets, so
//                  it gets no CNPs and never slows down.
std::vector<std::string> policy_warnings(const Policy& p);

}  // namespace conduit::policy
