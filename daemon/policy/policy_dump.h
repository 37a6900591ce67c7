// The effective policy as YAML, for `conduitctl policy show`.
#pragma once

#include <string>

#include "policy/policy.h"

namespace conduit::policy {

// Every key with its effective value (defaults filled in, DCQCN knobs
// expanded from their preset), in human units. Loading the result with
// load_policy_string() gives back an equal Policy.
std::string to_yaml(const Policy& policy);

}  // namespace conduit::policy
