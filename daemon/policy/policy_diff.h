// What a reload can and cannot change while the daemon runs.
#pragma once

#include <string>
#include <vector>

#include "policy/policy.h"

namespace conduit::policy {

// Key paths whose new value only takes effect after a restart, because they
// are bound at start-up (the port and EAL, the engine lcores, the sockets).
// Empty when `next` can be applied in place. Everything else (log level,
// idle mode, traffic classes, CNP, transport defaults for new QPs, clients)
// is applicable on reload.
std::vector<std::string> restart_required_changes(const Policy& running, const Policy& next);

}  // namespace conduit::policy
