#include "control/qp_state_machine.h"

#include <cerrno>

namespace conduit::control {
namespace {

using proto::QpState;

struct Rule {
  QpState from, to;
  uint32_t required, optional;
};

// RC rules from the verbs QP state diagram (ibv_modify_qp). Transitions to
// RESET and ERROR are allowed from every state and take no attributes.
constexpr uint32_t kRtrRequired =
    proto::kAttrPathMtu | proto::kAttrDestQpn | proto::kAttrRqPsn | proto::kAttrDgid;
constexpr uint32_t kRtsRequired =
    proto::kAttrSqPsn | proto::kAttrTimeout | proto::kAttrRetryCnt | proto::kAttrRnrRetry;
constexpr Rule kRules[] = {
    {QpState::kReset, QpState::kInit, 0, proto::kAttrAccess},
    {QpState::kInit, QpState::kInit, 0, proto::kAttrAccess},
    {QpState::kInit, QpState::kRtr, kRtrRequired,
     proto::kAttrMinRnrTimer | proto::kAttrAccess | proto::kAttrMaxDestRdAtomic},
    {QpState::kRtr, QpState::kRts, kRtsRequired,
     proto::kAttrMinRnrTimer | proto::kAttrAccess | proto::kAttrMaxRdAtomic},
    {QpState::kRts, QpState::kRts, 0, proto::kAttrMinRnrTimer | proto::kAttrAccess},
};

const char* attr_name(uint32_t bit) {
  switch (bit) {
    case proto::kAttrAccess:
      return "access";
    case proto::kAttrPathMtu:
      return "path_mtu";
    case proto::kAttrDestQpn:
      return "dest_qpn";
    case proto::kAttrRqPsn:
      return "rq_psn";
    case proto::kAttrSqPsn:
      return "sq_psn";
    case proto::kAttrDgid:
      return "dgid";
    case proto::kAttrTimeout:
      return "timeout";
    case proto::kAttrRetryCnt:
      return "retry_cnt";
    case proto::kAttrRnrRetry:
      return "rnr_retry";
    case proto::kAttrMinRnrTimer:
      return "min_rnr_timer";
    case proto::kAttrMaxRdAtomic:
      return "max_rd_atomic";
    case proto::kAttrMaxDestRdAtomic:
      return "max_dest_rd_atomic";
    default:
      return "?";
  }
}

std::string names(uint32_t mask) {
  std::string s;
  for (uint32_t bit = 1; bit != 0 && bit <= proto::kAttrAll; bit <<= 1) {
    if ((mask & bit) != 0 && bit != proto::kAttrState) {
      if (!s.empty()) s += ", ";
      s += attr_name(bit);
    }
  }
  return s;
}

}  // namespace

int check_qp_transition(QpState current, const proto::QpAttr& req, std::string& why) {
  const QpState to = (req.mask & proto::kAttrState) != 0 ? req.state : current;
  const uint32_t attrs = req.mask & ~proto::kAttrState;
  const std::string edge =
      std::string(proto::qp_state_name(current)) + " -> " + proto::qp_state_name(to);
  if (to == QpState::kSqd || to == QpState::kSqe) {
    why = std::string("QP state ") + proto::qp_state_name(to) + " cannot be requested";
    return -EINVAL;
  }
  if (to == QpState::kReset || to == QpState::kError) {
    if ((req.mask & proto::kAttrState) == 0) {
      why = "modify without a state change is only allowed in INIT and RTS";
      return -EINVAL;
    }
    if (attrs != 0) {
      why = edge + " takes no attributes (got " + names(attrs) + ")";
      return -EINVAL;
    }
    return 0;
  }
  for (const Rule& r : kRules) {
    if (r.from != current || r.to != to) continue;
    if ((attrs & r.required) != r.required) {
      why = edge + " needs " + names(r.required & ~attrs);
      return -EINVAL;
    }
    if ((attrs & ~(r.required | r.optional)) != 0) {
      why = edge + " does not take " + names(attrs & ~(r.required | r.optional));
      return -EINVAL;
    }
    return 0;
  }
  why = "invalid QP transition " + edge;
  return -EINVAL;
}

void apply_qp_transition(QpAttrs& qp, const proto::QpAttr& req) {
  if ((req.mask & proto::kAttrState) != 0) qp.state = req.state;
  proto::QpAttr& a = qp.attr;
  if (qp.state == QpState::kReset) {
    a = proto::QpAttr{};  // RESET forgets everything, as verbs does
    return;
  }
  const uint32_t m = req.mask;
  if (m & proto::kAttrAccess) a.access = req.access;
  if (m & proto::kAttrPathMtu) a.path_mtu = req.path_mtu;
  if (m & proto::kAttrDestQpn) a.dest_qpn = req.dest_qpn;
  if (m & proto::kAttrRqPsn) a.rq_psn = req.rq_psn;
  if (m & proto::kAttrSqPsn) a.sq_psn = req.sq_psn;
  if (m & proto::kAttrDgid) a.dgid = req.dgid;
  if (m & proto::kAttrTimeout) a.timeout = req.timeout;
  if (m & proto::kAttrRetryCnt) a.retry_cnt = req.retry_cnt;
  if (m & proto::kAttrRnrRetry) a.rnr_retry = req.rnr_retry;
  if (m & proto::kAttrMinRnrTimer) a.min_rnr_timer = req.min_rnr_timer;
  if (m & proto::kAttrMaxRdAtomic) a.max_rd_atomic = req.max_rd_atomic;
  if (m & proto::kAttrMaxDestRdAtomic) a.max_dest_rd_atomic = req.max_dest_rd_atomic;
  a.mask |= m & ~proto::kAttrState;
  a.state = qp.state;
}

}  // namespace conduit::control
