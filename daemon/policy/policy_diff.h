// What a reload can and cannot change while the daemon runs.
#pragma once

#include <string>
#include <vector>

#include "policy/policy.h"

namespace conduit::policy {

// Key paths whose new value only takes effect after a restart, because they
// are bound at start-up: the port and EAL, the engine lcores, the sockets.
// Empty when `next` can be applied in place. The rest is applied on reload:
// log level, idle mode and clients by the control thread, traffic classes,
// CNP settings and transport defaults by the engine (engine::PolicyUpdate).
// `started` is the policy the daemon started with, so that every reload names
// all pending changes.
std::vector<std::string> restart_required_changes(const Policy& started, const Policy& next);

}  // namespace conduit::policy
