// Which ModifyQp requests are legal, as verbs defines them for RC QPs: each
// transition has required and optional attributes; anything else is refused
// with a reason. The daemon checks here before telling the engine.
// Pure: no I/O, no state beyond the arguments.
#pragma once

#include <string>

#include "proto/control_protocol.h"

namespace conduit::control {

// The control thread's record of a QP's attributes (what QueryQp returns).
struct QpAttrs {
  proto::QpState state = proto::QpState::kReset;
  proto::QpAttr attr;  // last value of every attribute ever set (mask = what was set)
};

// 0, or -EINVAL with `why` filled: unknown transition, missing required
// attribute, or an attribute that this transition does not take.
int check_qp_transition(proto::QpState current, const proto::QpAttr& req, std::string& why);

// Applies a checked request: new state and the attributes it carries.
void apply_qp_transition(QpAttrs& qp, const proto::QpAttr& req);

}  // namespace conduit::control
