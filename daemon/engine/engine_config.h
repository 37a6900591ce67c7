// Turns the operator's policy into the engine's configuration: units from the
// policy's explicit ones (ns, bit/s, bytes) into the mlx5 units cc/ uses
// (us, Mbit/s, 64-byte blocks), classes into pacer classes and controllers.
#pragma once

#include "engine/engine.h"
#include "policy/policy.h"

namespace conduit::engine {

// The policy's daemon.idle_mode as the engine's.
IdleMode idle_mode_from_policy(policy::IdleMode m);

// mac: the port's MAC; port_speed_bps: the speed the port reports (0 = unknown). The line
// rate is p.port.line_rate when set, else that speed, else 10 Gbit/s.
EngineConfig engine_config_from_policy(const policy::Policy& p, net::MacAddr mac,
                                       uint64_t port_speed_bps);

// The sections of p a running engine takes on reload (EngineOp::kSetPolicy),
// as engine_config_from_policy would give them.
PolicyUpdate engine_policy_update(const policy::Policy& p);

}  // namespace conduit::engine
