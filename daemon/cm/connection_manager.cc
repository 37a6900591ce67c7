#include "cm/connection_manager.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace conduit::cm {
namespace {

bool valid_params(const QpParams& q) {
  return q.qpn >= 2 && q.qpn <= 0xFFFFFF && q.psn <= 0xFFFFFF && valid_pmtu(q.pmtu_bytes) &&
         (q.caps & ~kKnownCaps) == 0 && q.timeout <= 31 && q.retry_cnt <= 7 && q.rnr_retry <= 7;
}

}  // namespace

ConnectionManager::ConnectionManager(const CmConfig& cfg)
    : cfg_(cfg), next_id_(cfg.first_conn_id == 0 ? 1 : cfg.first_conn_id) {
  if (cfg_.unsolicited_replies_per_s != 0) {
    reply_credit_ns_ =
        uint64_t{1'000'000'000} / cfg_.unsolicited_replies_per_s * cfg_.unsolicited_reply_burst;
  }
}

bool ConnectionManager::unsolicited_reply_ok(uint64_t now_ns) {
  if (cfg_.unsolicited_replies_per_s == 0) return true;
  const uint64_t cost = std::max<uint64_t>(1, 1'000'000'000 / cfg_.unsolicited_replies_per_s);
  const uint64_t cap = cost * cfg_.unsolicited_reply_burst;
  if (now_ns > reply_refill_ns_) {
    reply_credit_ns_ += std::min(now_ns - reply_refill_ns_, cap - std::min(cap, reply_credit_ns_));
    reply_refill_ns_ = now_ns;
  }
  if (reply_credit_ns_ < cost) {
    ++counters_.replies_suppressed;
    return false;
  }
  reply_credit_ns_ -= cost;
  return true;
}

uint32_t ConnectionManager::allocate_id() {
  // Callers check max_connections first, so a free id exists.
  for (;;) {
    const uint32_t id = next_id_++;
    if (next_id_ == 0) next_id_ = 1;
    if (id != 0 && conns_.find(id) == conns_.end()) return id;
  }
}

int ConnectionManager::listen(uint64_t service, uint64_t owner) {
  auto it = listeners_.find(service);
  if (it != listeners_.end()) return it->second == owner ? 0 : -EADDRINUSE;
  if (listeners_.size() >= cfg_.max_listeners) return -ENOSPC;
  listeners_[service] = owner;
  return 0;
}

int ConnectionManager::unlisten(uint64_t service, uint64_t owner) {
  auto it = listeners_.find(service);
  if (it == listeners_.end() || it->second != owner) return -ENOENT;
  listeners_.erase(it);
  return 0;
}

void ConnectionManager::emit_message(CmPeer to, const CmMessage& m, uint32_t peer_qpn) {
  CmAction a;
  a.kind = CmAction::Kind::kSend;
  a.peer = to;
  if (to.ib) {
    IbCmBuildContext ctx;
    uint32_t ip4 = 0;
    ctx.local_addr = cm_addr_ipv4(to.addr, ip4) ? cfg_.local_addr4 : cfg_.local_addr6;
    ctx.peer_addr = to.addr;
    ctx.ca_guid = cfg_.ca_guid;
    ctx.peer_qpn = peer_qpn;
    a.len = static_cast<uint16_t>(build_ib_cm_mad(m, ctx, a.bytes.data()));
  } else {
    a.len = static_cast<uint16_t>(build_cm_message(m, a.bytes.data()));
  }
  if (a.len == 0) return;  // connect() checked what could make it fail
  ++counters_.tx_messages;
  if (m.type == CmType::kRej) ++counters_.rejected_sent;
  emit(a);
}

void ConnectionManager::send_reply(CmPeer to, uint32_t src, uint32_t dst, CmType type,
                                   RejectReason reason, uint64_t tid, uint32_t peer_qpn,
                                   uint8_t rej_message, uint16_t ib_rej_code,
                                   const uint8_t* private_data, uint8_t private_len) {
  CmMessage m;
  m.type = type;
  m.src_conn = src;
  m.dst_conn = dst;
  m.reason = reason;
  m.ib.tid = tid;
  m.ib.rej_message = rej_message;
  m.ib.rej_code = ib_rej_code;
  if (private_len > 0) {
    m.private_len = private_len;
    std::memcpy(m.private_data.data(), private_data, private_len);
  }
  emit_message(to, m, peer_qpn);
}

void ConnectionManager::send(const Conn& c, uint32_t local_id, CmType type, RejectReason reason,
                             uint16_t ib_rej_code, const uint8_t* private_data,
                             uint8_t private_len) {
  const uint64_t tid = type == CmType::kDreq ? c.dreq_tid : c.tid;
  if (type != CmType::kReq && type != CmType::kRep) {
    // A REJ rejects the peer's REQ until our REP is out, then "other" (as Linux's
    // cm_format_rej; we never reject a REP): Linux finds a REQ's REJ without our id.
    const uint8_t rej_message = c.state == State::kRequestPending ? kIbMsgReq : kIbMsgOther;
    send_reply(c.peer, local_id, c.remote_conn, type, reason, tid, c.remote.qpn, rej_message,
               ib_rej_code, private_data, private_len);
    return;
  }
  CmMessage m;
  m.type = type;
  m.src_conn = local_id;
  m.dst_conn = type == CmType::kReq ? 0 : c.remote_conn;
  m.service = c.service;
  m.params = c.local;
  // IB CM: a REQ carries the PSN we expect (local.psn until the REP, see
  // on_for_conn), a REP the one we expect after accept() swapped them.
  if (c.peer.ib && type == CmType::kRep) m.params.psn = c.remote.psn;
  m.private_len = c.private_len;
  m.private_data = c.private_data;
  m.ib.tid = tid;
  if (c.peer.ib && type == CmType::kReq && c.service <= 0xFFFF) {
    m.ib.rdma_cm = true;
    m.ib.rdma_cm_src_port = static_cast<uint16_t>(0x8000 | (local_id & 0x7FFF));
  }
  emit_message(c.peer, m, c.remote.qpn);
}

CmAction ConnectionManager::event(CmAction::Kind kind, uint32_t id, const Conn& c) const {
  CmAction a;
  a.kind = kind;
  a.conn = id;
  a.owner = c.owner;
  a.peer = c.peer;
  a.service = c.service;
  a.local = c.local;
  a.remote = c.remote;
  return a;
}

void ConnectionManager::establish(uint32_t id, Conn& c) {
  c.state = State::kEstablished;
  c.deadline_ns = UINT64_MAX;
  c.retries = 0;
  ++counters_.established;
  if (!c.report) return;
  CmAction a = event(CmAction::Kind::kEstablished, id, c);
  a.private_len = c.remote_private_len;
  a.private_data = c.remote_private_data;
  a.private_truncated = c.remote_private_truncated;
  // Over the IB CM both are the REQ's by now (on_for_conn, accept).
  a.pmtu_bytes = std::min(c.local.pmtu_bytes, c.remote.pmtu_bytes);
  a.caps = static_cast<uint16_t>(c.local.caps & c.remote.caps);
  emit(a);
}

void ConnectionManager::fail(uint32_t id, Conn& c, RejectReason reason, bool received,
                             uint16_t ib_rej_code, const CmMessage* rej) {
  if (received) ++counters_.rejected_received;
  if (c.report) {
    CmAction a = event(CmAction::Kind::kRejected, id, c);
    a.reason = reason;
    a.ib_rej_code = ib_rej_code;
    if (rej != nullptr) {
      a.private_len = rej->private_len;
      a.private_data = rej->private_data;
      a.private_truncated = rej->private_truncated;
    }
    emit(a);
  }
  erase(conns_.find(id));
}

void ConnectionManager::erase(std::map<uint32_t, Conn>::iterator it) {
  const Conn& c = it->second;
  end_pending(c);
  if (!c.active) by_remote_.erase({c.peer, c.remote_conn});
  if (c.peer.ib) {
    auto q = by_remote_qpn_.find({c.peer.addr, c.remote.qpn});
    if (q != by_remote_qpn_.end() && q->second == it->first) by_remote_qpn_.erase(q);
  }
  conns_.erase(it);
}

void ConnectionManager::end_pending(const Conn& c) {
  if (c.state != State::kRequestPending) return;
  auto it = pending_by_addr_.find(c.peer.addr);
  if (it != pending_by_addr_.end() && --it->second == 0) pending_by_addr_.erase(it);
  --pending_total_;
}

int64_t ConnectionManager::connect(uint64_t now_ns, uint64_t owner, CmPeer peer, uint64_t service,
                                   const QpParams& local, const uint8_t* private_data,
                                   size_t private_len) {
  if (!valid_params(local) || private_len > kMaxPrivateBytes ||
      (private_len > 0 && private_data == nullptr)) {
    return -EINVAL;
  }
  // An rdma_cm REQ leaves the application 56 bytes after its header.
  if (peer.ib && service <= 0xFFFF && private_len > kRdmaCmReqPrivateBytes) return -EINVAL;
  if (conns_.size() >= cfg_.max_connections) return -ENOSPC;
  const uint32_t id = allocate_id();
  Conn& c = conns_[id];
  c.tid = peer.ib ? new_tid(id) : 0;
  c.state = State::kReqSent;
  c.active = true;
  c.owner = owner;
  c.peer = peer;
  c.service = service;
  c.local = local;
  c.private_len = static_cast<uint8_t>(private_len);
  if (private_len > 0) std::memcpy(c.private_data.data(), private_data, private_len);
  // Natively every retry_timeout_ns, max_retries times; over the IB CM at the pace our REQ
  // advertises, as Linux's ib_send_cm_req sends its REQ (an MRA stretches it: on_for_conn).
  pace_as_requested(c);
  c.deadline_ns = now_ns + retry_ns(c);
  send(c, id, CmType::kReq);
  return id;
}

int ConnectionManager::accept(uint64_t now_ns, uint64_t owner, uint32_t conn, const QpParams& local,
                              const uint8_t* private_data, size_t private_len) {
  auto it = conns_.find(conn);
  if (it == conns_.end() || it->second.owner != owner ||
      it->second.state != State::kRequestPending) {
    return -ENOENT;
  }
  Conn& c = it->second;
  if (c.peer.ib && local.pmtu_bytes < c.remote.pmtu_bytes) {
    // The IB REP cannot name a smaller PMTU: the requester would run its REQ's and every
    // message longer than ours would fail. Refuse it as the IB CM says (invalid MTU).
    send(c, conn, CmType::kRej, RejectReason::kPolicy, kIbRejInvalidMtu);
    erase(it);
    return -EMSGSIZE;
  }
  if (!valid_params(local) || private_len > kMaxPrivateBytes ||
      (private_len > 0 && private_data == nullptr)) {
    return -EINVAL;
  }
  end_pending(c);
  c.local = local;
  if (c.peer.ib) {
    c.local.pmtu_bytes = c.remote.pmtu_bytes;
    // The IB CM's PSNs name the traffic towards the message's sender (as the
    // Linux ib_cm reads them): the REQ's is where we start sending, and the
    // REP tells the requester where to start (local.psn, which we expect).
    c.local.psn = c.remote.psn;
    c.remote.psn = local.psn;
  }
  c.private_len = static_cast<uint8_t>(private_len);
  if (private_len > 0) std::memcpy(c.private_data.data(), private_data, private_len);
  c.state = State::kRepSent;
  c.retries = 0;
  pace_as_requested(c);
  c.deadline_ns = now_ns + retry_ns(c);
  send(c, conn, CmType::kRep);
  return 0;
}

void ConnectionManager::pace_as_requested(Conn& c) const {
  c.retry_ns = 0;
  c.max_retries = cfg_.max_retries;
  if (!c.peer.ib) return;
  // As Linux's ib_cm, which sends every MAD of an id (cm_alloc_msg: max_cm_retries, and
  // msg->timeout_ms = timeout_ms) with the pace it set from the REQ, each timeout field taken
  // as cm_convert_to_ms rounds it (ib_cm_timeout_ns): the passive id from the REQ it got
  // (cm_req_handler: its local CM response timeout alone, no packet life time added, and its
  // max CM retries; its REP and DREQ go so, ib_send_cm_rep, cm_send_dreq_locked), the active
  // id from the REQ it sends (ib_send_cm_req: the remote CM response timeout plus twice the
  // primary path's packet life time, and the ULP's max CM retries; cm_rep_handler changes
  // neither): the REQ itself and its DREQ go so. Our REQ's packet life time is the one its
  // primary local ACK timeout (our QP's) stands for, as the responder reads it. Bounded, so a
  // REQ cannot make us resend every few microseconds or wait hours between resends.
  const uint64_t asked_ns = c.active ? ib_req_resend_ns(kIbReqRemoteCmResponseTimeout,
                                                        ib_req_packet_life_time(c.local.timeout))
                                     : ib_cm_timeout_ns(c.req_local_response_timeout);
  c.retry_ns = std::clamp(asked_ns, cfg_.retry_timeout_ns,
                          std::max(cfg_.retry_timeout_ns, cfg_.max_ib_rep_timeout_ns));
  c.max_retries = c.active ? kIbReqMaxCmRetries : c.req_max_retries;
}

int ConnectionManager::reject(uint64_t /*now_ns*/, uint64_t owner, uint32_t conn,
                              RejectReason reason, const uint8_t* private_data,
                              size_t private_len) {
  auto it = conns_.find(conn);
  if (it == conns_.end() || it->second.owner != owner ||
      it->second.state != State::kRequestPending) {
    return -ENOENT;
  }
  if (private_len > kMaxPrivateBytes || (private_len > 0 && private_data == nullptr)) {
    return -EINVAL;
  }
  if (!is_wire_reject_reason(static_cast<uint16_t>(reason))) reason = RejectReason::kRefused;
  // The REJ's private data, as rdma_reject()'s: the requester's owner gets it with kRejected.
  send(it->second, conn, CmType::kRej, reason, 0, private_data, static_cast<uint8_t>(private_len));
  erase(it);
  return 0;
}

int ConnectionManager::disconnect(uint64_t now_ns, uint64_t owner, uint32_t conn) {
  auto it = conns_.find(conn);
  if (it == conns_.end() || it->second.owner != owner) return -ENOENT;
  Conn& c = it->second;
  switch (c.state) {
    case State::kEstablished:
      c.state = State::kDreqSent;
      c.dreq_tid = c.peer.ib ? new_tid(conn) : 0;
      c.retries = 0;
      // A new message: no MRA of our REQ or REP stretches it. At our own pace (native), or
      // over the IB CM at the REQ's, as Linux's id sends every later MAD, its DREQ too, with
      // the timeout and retries it took from the REQ: the one it got (passive, as our REP
      // was) or the one it sent (active: what our REQ advertised).
      pace_as_requested(c);
      c.deadline_ns = now_ns + retry_ns(c);
      send(c, conn, CmType::kDreq);
      return 0;
    case State::kDreqSent:
      return 0;
    case State::kRequestPending:
    case State::kRepSent:
      // The peer is told no, so it stops resending its REQ.
      send(c, conn, CmType::kRej, RejectReason::kRefused);
      break;
    case State::kReqSent:
      // An IB listener is told, as Linux's ib_cm tells it when a REQ is abandoned: REJ
      // (timeout) with our CA GUID and no remote id, by which it finds and drops the
      // request rather than let its application accept it into a dead end. A native peer
      // cannot be (its REJ needs our id there): its request expires, a REP it sends finds
      // no connection.
      if (c.peer.ib) send(c, conn, CmType::kRej, RejectReason::kTimeout);
      break;
  }
  erase(it);
  return 0;
}

bool ConnectionManager::params(uint32_t conn, QpParams& local, QpParams& remote) const {
  auto it = conns_.find(conn);
  if (it == conns_.end()) return false;
  local = it->second.local;
  remote = it->second.remote;
  return true;
}

void ConnectionManager::on_qp_traffic(uint32_t conn) {
  auto it = conns_.find(conn);
  if (it != conns_.end() && it->second.state == State::kRepSent) establish(conn, it->second);
}

void ConnectionManager::forget_owner(uint64_t now_ns, uint64_t owner) {
  for (auto it = listeners_.begin(); it != listeners_.end();) {
    it = it->second == owner ? listeners_.erase(it) : std::next(it);
  }
  scratch_ids_.clear();
  for (auto& [id, c] : conns_) {
    if (c.owner == owner) {
      c.report = false;
      scratch_ids_.push_back(id);
    }
  }
  for (uint32_t id : scratch_ids_) {
    disconnect(now_ns, owner, id);
    // An IB peer gets that one DREQ, unrepeated: as Linux's cm_destroy_id, which sends the
    // DREQ of an established id and puts it in timewait at once (a DREP or a resent DREQ
    // from the peer then finds no connection and is answered as one). Resending it on the
    // REQ's pace (up to 15 x 4.1 s from rdma_cm) would hold the peer's QPN here, and a new
    // REQ from it REJ(stale), for a minute after the owner is gone. A native peer keeps the
    // resends: it has no other way to learn.
    auto it = conns_.find(id);
    if (it != conns_.end() && it->second.peer.ib && it->second.state == State::kDreqSent) {
      ++counters_.dreq_owner_gone;
      erase(it);
    }
  }
}

void ConnectionManager::on_message(uint64_t now_ns, CmPeer from, const uint8_t* data, size_t len) {
  if (from.ib && is_ib_mad_get_or_set(data, len)) {
    // As Linux's MAD layer for a Get or Set no agent takes (its ib_cm takes Send only): the
    // request echoed as GetResp 'unsupported method/attribute' (a CM ClassPortInfo Get gets
    // that from Linux too). Never for a response, so two of us cannot loop.
    ++counters_.mad_get_unsupported;
    if (!unsolicited_reply_ok(now_ns)) return;
    CmAction a;
    a.kind = CmAction::Kind::kSend;
    a.peer = from;
    a.len = static_cast<uint16_t>(build_ib_mad_unsupported_resp(data, a.bytes.data()));
    ++counters_.tx_messages;
    emit(a);
    return;
  }
  CmMessage m;
  const CmParseError e = from.ib ? parse_ib_cm_mad(data, len, m) : parse_cm_message(data, len, m);
  if (e == CmParseError::kRefusedReq) {
    on_refused_req(now_ns, from, m);
    return;
  }
  // An APR or SIDR_REP answers a LAP or SIDR_REQ, which we never send.
  if (e == CmParseError::kUnsupported ||
      (e == CmParseError::kOk && (m.type == CmType::kApr || m.type == CmType::kSidrRep))) {
    ++counters_.rx_unsupported;
    return;
  }
  if (e != CmParseError::kOk) {
    ++counters_.rx_malformed;
    return;
  }
  ++counters_.rx_messages;
  if (m.type == CmType::kReq) {
    on_req(now_ns, from, m);
  } else if (m.type == CmType::kSidrReq) {
    on_sidr_req(now_ns, from, m);
  } else {
    on_for_conn(now_ns, from, m);
  }
}

void ConnectionManager::on_refused_req(uint64_t now_ns, CmPeer from, const CmMessage& m) {
  // A UC or XRC REQ, or an rdma_cm REQ whose header we cannot read. Linux: with no listener
  // for the service id ib_cm sends REJ 'invalid service id'; else the rdma_cm listener
  // refuses it (cma_check_req_qp_type, cma_save_ip_info) and ib_cm sends REJ 'consumer
  // defined' as it destroys the new id. Nothing is kept: a resent REQ is refused again.
  ++counters_.requests_refused;
  if (!unsolicited_reply_ok(now_ns)) return;
  const bool listened = listeners_.find(m.service) != listeners_.end();
  send_reply(from, 0, m.src_conn, CmType::kRej,
             listened ? RejectReason::kRefused : RejectReason::kNoListener, m.ib.tid, 0, kIbMsgReq,
             listened ? kIbRejConsumerDefined : kIbRejInvalidServiceId);
}

void ConnectionManager::on_sidr_req(uint64_t now_ns, CmPeer from, const CmMessage& m) {
  // No UD QPs here, so no service id resolves: answer as Linux's ib_cm does when no listener
  // matches (rdma_cm then reports UNREACHABLE at once instead of after ~65 s of resends).
  // One reply per request, the same 256-byte MAD, nothing kept: a flood gains nothing in
  // size and fills no table, and the replies are rate-limited.
  ++counters_.sidr_unsupported;
  if (!unsolicited_reply_ok(now_ns)) return;
  CmMessage r;
  r.type = CmType::kSidrRep;
  r.dst_conn = m.src_conn;
  r.service = m.service;
  r.ib.tid = m.ib.tid;
  r.ib.sidr_status = kIbSidrUnsupported;
  emit_message(from, r, 0);
}

void ConnectionManager::on_req(uint64_t now_ns, CmPeer from, const CmMessage& m) {
  auto dup = by_remote_.find({from, m.src_conn});
  if (dup != by_remote_.end()) {
    // A resent REQ: our REP was lost, or the owner has not answered yet.
    Conn& c = conns_.at(dup->second);
    if (c.state == State::kRepSent) {
      send(c, dup->second, CmType::kRep);
    } else if (c.state == State::kRequestPending && c.peer.ib) {
      send_request_mra(dup->second, c);
    } else {
      ++counters_.rx_unexpected;
    }
    return;
  }
  if (from.ib) {
    auto held = by_remote_qpn_.find({from.addr, m.params.qpn});
    auto old = held == by_remote_qpn_.end() ? conns_.end() : conns_.find(held->second);
    if (old != conns_.end()) {
      // Its QP is in another connection here, under another comm id: being set up (its
      // request pending, our REP out), established, or being torn down (our DREQ out). As
      // Linux's cm_match_req (the QPN stays in its remote QP table from the REQ or REP until
      // timewait): refuse the REQ as stale. An established one points at a QP that is no
      // longer the peer's (it restarted, or every DREQ/DREP between us was lost): it gets a
      // DREQ, as Linux's ib_send_cm_dreq, which does nothing in the other states. Once a
      // connection is over the QPN is free at once: Linux's timewait (cm_enter_timewait)
      // takes it out of that table first, so a REQ reusing it then is a new request.
      ++counters_.stale_requests;
      if (unsolicited_reply_ok(now_ns)) {
        send_reply(from, 0, m.src_conn, CmType::kRej, RejectReason::kRefused, m.ib.tid, 0,
                   kIbMsgReq, kIbRejStaleConn);
      }
      if (old->second.state == State::kEstablished) {
        disconnect(now_ns, old->second.owner, old->first);
      }
      return;
    }
  }
  auto l = listeners_.find(m.service);
  if (l == listeners_.end()) {
    if (unsolicited_reply_ok(now_ns)) {
      send_reply(from, 0, m.src_conn, CmType::kRej, RejectReason::kNoListener, m.ib.tid);
    }
    return;
  }
  if (conns_.size() >= cfg_.max_connections) {
    if (unsolicited_reply_ok(now_ns)) {
      send_reply(from, 0, m.src_conn, CmType::kRej, RejectReason::kQuota, m.ib.tid);
    }
    return;
  }
  auto pending = pending_by_addr_.find(from.addr);
  const uint32_t from_pending = pending == pending_by_addr_.end() ? 0 : pending->second;
  if (from_pending >= cfg_.max_pending_per_addr || pending_total_ >= cfg_.max_pending_requests) {
    // Requests nobody has answered yet cost a connection each: a sender that keeps
    // sending REQs must not take the table from everybody else.
    ++counters_.requests_over_cap;
    if (unsolicited_reply_ok(now_ns)) {
      send_reply(from, 0, m.src_conn, CmType::kRej, RejectReason::kQuota, m.ib.tid);
    }
    return;
  }
  const uint32_t id = allocate_id();
  Conn& c = conns_[id];
  c.state = State::kRequestPending;
  c.active = false;
  c.owner = l->second;
  c.peer = from;
  c.remote_conn = m.src_conn;
  c.service = m.service;
  c.remote = m.params;
  c.tid = m.ib.tid;
  c.remote_private_len = m.private_len;
  c.remote_private_data = m.private_data;
  c.remote_private_truncated = m.private_truncated;
  // The owner gets as long as the requester keeps resending; then the request
  // expires, so REQs nobody answers (or a flood of them) do not pile up. An IB
  // requester says how long: it resends every remote CM response timeout plus twice its
  // path's packet life time (the one the REQ's primary local ACK timeout stands for), as
  // Linux's ib_send_cm_req counts them (rdma_cm's REQ over RoCE in 6.1: 20 and 18, 6.144 s),
  // its max CM retries times (rdma_cm: 15, so 16 x 6.144 s = 98.3 s); expiring sooner would
  // make its next resend a new request.
  uint64_t wait_ns = uint64_t{cfg_.max_retries + 1} * cfg_.retry_timeout_ns;
  if (from.ib) {
    const uint64_t resend_ns =
        ib_req_resend_ns(m.ib.req_response_timeout, ib_req_packet_life_time(m.params.timeout));
    wait_ns = std::max(
        wait_ns, std::min(resend_ns * (m.ib.req_max_retries + 1u), cfg_.max_ib_request_wait_ns));
  }
  c.deadline_ns = now_ns + wait_ns;
  c.request_ns = now_ns;
  c.req_response_timeout = m.ib.req_response_timeout;
  c.req_max_retries = m.ib.req_max_retries;
  c.req_local_response_timeout = m.ib.req_local_response_timeout;
  by_remote_[{from, m.src_conn}] = id;
  if (from.ib) by_remote_qpn_[{from.addr, m.params.qpn}] = id;
  ++pending_by_addr_[from.addr];
  ++pending_total_;
  CmAction a = event(CmAction::Kind::kRequest, id, c);
  a.private_len = m.private_len;
  a.private_data = m.private_data;
  a.private_truncated = m.private_truncated;
  emit(a);
}

void ConnectionManager::send_request_mra(uint32_t id, Conn& c) {
  // As Linux: rdma_cm leaves a REQ its application has not answered yet with ib_cm's delayed
  // MRA (ib_prepare_cm_mra; before 2025 ib_send_cm_mra with IB_CM_MRA_FLAG_DELAY), which
  // cm_dup_req_handler sends in answer to each resent REQ, always with the service timeout 24
  // (cm.c's CM_MRA_SETTING, before that cma.c's CMA_CM_MRA_SETTING: 4.096 us * 2^24, 68.7 s)
  // and no private data. The requester then
  // waits that long (plus the packet life time) before each of its remaining resends, so the
  // request may live the longest we allow: max_ib_request_wait_ns from its arrival.
  ++counters_.mra_sent;
  c.deadline_ns = std::max(c.deadline_ns, c.request_ns + cfg_.max_ib_request_wait_ns);
  CmMessage m;
  m.type = CmType::kMra;
  m.src_conn = id;
  m.dst_conn = c.remote_conn;
  m.ib.tid = c.tid;
  m.ib.mra_message = kIbMsgReq;
  m.ib.mra_timeout = kIbMraServiceTimeout;
  emit_message(c.peer, m, c.remote.qpn);
}

void ConnectionManager::on_for_conn(uint64_t now_ns, CmPeer from, const CmMessage& m) {
  auto it = conns_.find(m.dst_conn);
  if (m.type == CmType::kRej && m.dst_conn == 0) {
    // Linux's REJ(timeout) for a REQ it gave up on (parse_ib_cm_mad lets no other
    // through): it never saw our id, its own names the request.
    auto r = by_remote_.find({from, m.src_conn});
    it = r == by_remote_.end() ? conns_.end() : conns_.find(r->second);
  }
  if (it == conns_.end() || !(it->second.peer == from) ||
      (it->second.remote_conn != 0 && it->second.remote_conn != m.src_conn)) {
    if (m.type == CmType::kDreq) {
      // Already gone here (our DREP was lost): answer again so the peer stops.
      if (unsolicited_reply_ok(now_ns)) {
        send_reply(from, m.dst_conn, m.src_conn, CmType::kDrep, {}, m.ib.tid);
      }
      return;
    }
    ++counters_.rx_unknown_conn;
    return;
  }
  const uint32_t id = it->first;
  Conn& c = it->second;
  switch (m.type) {
    case CmType::kRep:
      // An IB REP names no service and no PMTU: the REQ's offer stands.
      if (c.state == State::kReqSent && (from.ib || m.service == c.service)) {
        if (from.ib) {
          auto held = by_remote_qpn_.find({from.addr, m.params.qpn});
          auto old = held == by_remote_qpn_.end() ? conns_.end() : conns_.find(held->second);
          if (old != conns_.end() && old->first != id) {
            // The responder's QP is in another connection here (in any state, as on_req):
            // it lost that one and reuses the QP. As Linux's cm_rep_handler: REJ 'stale
            // connection' for the REP, and DREQ for the old connection if established.
            // Linux leaves its REQ to be refused from the peer's timewait; this request
            // ends at once, with the reason.
            ++counters_.stale_replies;
            send_reply(from, id, m.src_conn, CmType::kRej, RejectReason::kRefused, c.tid, 0,
                       kIbMsgRep, kIbRejStaleConn);
            if (old->second.state == State::kEstablished) {
              disconnect(now_ns, old->second.owner, old->first);
            }
            fail(id, c, reject_reason_from_ib(kIbRejStaleConn), false, kIbRejStaleConn);
            return;
          }
        }
        c.remote_conn = m.src_conn;
        c.remote = m.params;
        if (from.ib) {
          by_remote_qpn_[{from.addr, c.remote.qpn}] = id;
          c.remote.pmtu_bytes = c.local.pmtu_bytes;
          cap_depths(c.local, c.remote);
          // Our REQ asked the peer to start at local.psn; its REP says where we start.
          c.remote.psn = c.local.psn;
          c.local.psn = m.params.psn;
        }
        c.remote_private_len = m.private_len;
        c.remote_private_data = m.private_data;
        c.remote_private_truncated = m.private_truncated;
        send(c, id, CmType::kRtu);
        establish(id, c);
      } else if (c.state == State::kEstablished && c.active) {
        send(c, id, CmType::kRtu);  // our RTU was lost
      } else {
        ++counters_.rx_unexpected;
      }
      return;
    case CmType::kRtu:
      if (c.state == State::kRepSent) {
        establish(id, c);
      } else {
        ++counters_.rx_unexpected;
      }
      return;
    case CmType::kRej:
      if (c.state == State::kReqSent || c.state == State::kRepSent ||
          c.state == State::kRequestPending) {
        fail(id, c, m.reason, true, from.ib ? m.ib.rej_code : uint16_t{0}, &m);
      } else {
        // Established here on the REP, but the peer gave up before our RTU reached it (its
        // owner went away in its kRepSent): its QP is gone, so is the connection. Linux's
        // ib_cm takes a REJ in ESTABLISHED and DREQ_SENT the same way (timewait).
        ++counters_.rejected_received;
        if (c.report) emit(event(CmAction::Kind::kDisconnected, id, c));
        erase(it);
      }
      return;
    case CmType::kDreq:
      if (c.state == State::kRequestPending) {
        // Before our REP there is nothing to disconnect: Linux's cm_dreq_handler drops a
        // DREQ for a connection in REQ_RCVD or MRA_REQ_SENT (its default case), unanswered;
        // the request stays the owner's to answer.
        ++counters_.dreq_dropped;
        return;
      }
      if (c.state == State::kReqSent) {
        // Our REQ has no answer yet, so the DREQ cannot name this connection (Linux finds no
        // id for it: the remote id is still unset) and is answered as one for no connection
        // (cm_issue_drep); our request goes on.
        ++counters_.rx_unexpected;
        if (unsolicited_reply_ok(now_ns)) {
          send_reply(from, m.dst_conn, m.src_conn, CmType::kDrep, {}, m.ib.tid);
        }
        return;
      }
      if (from.ib && m.params.qpn != c.local.qpn) {
        // As Linux's cm_dreq_handler: a DREQ must name our QP (its remote QPN), or it is
        // dropped, unanswered; the connection stays.
        ++counters_.dreq_qpn_mismatch;
        return;
      }
      // Our REP out (Linux's REP_SENT, MRA_REP_RCVD), established, or our own DREQ out
      // (crossing DREQs): DREP, and the connection is over.
      send_reply(from, id, m.src_conn, CmType::kDrep, {}, m.ib.tid);
      if (c.report) emit(event(CmAction::Kind::kDisconnected, id, c));
      erase(it);
      return;
    case CmType::kDrep:
      if (c.state == State::kDreqSent) {
        if (c.report) emit(event(CmAction::Kind::kDisconnected, id, c));
        erase(it);
      } else {
        ++counters_.rx_unexpected;
      }
      return;
    case CmType::kMra:
      // The peer got our REQ (REP) and asks for time, as rdma_cm does while its application
      // decides: wait as Linux's cm_mra_handler does, cm_convert_to_ms of the MRA's service
      // timeout plus that of the path's av.timeout (ib_mra_wait_ns: for our REQ the packet
      // life time our QP's ACK timeout stands for, + 1; for our REP the one the peer's REQ's
      // does), from now and before every later resend of the message (ib_modify_mad sets the
      // MAD's timeout for its remaining retries; the 2024 rdma-next MAD series applies it to
      // the next resend only). No shorter than retry_timeout_ns, as every IB pace here; no
      // longer than max_mra_wait_ns, which honours Linux's own MRA (24: 65.5 s plus the
      // path's) in full and keeps a peer's 31 (2^23 ms, 2.3 h per resend) from holding the
      // connection for hours. Once: as Linux (MRA_REQ_RCVD / MRA_REP_RCVD), a repeated MRA
      // (the peer answers each resend with one) is ignored. The resends already made still
      // count (ib_modify_mad changes the timeout only): the retry budget ends the wait, as
      // Linux's.
      if (!c.mra_seen && ((c.state == State::kReqSent && m.ib.mra_message == kIbMsgReq) ||
                          (c.state == State::kRepSent && m.ib.mra_message == kIbMsgRep))) {
        ++counters_.mra_received;
        c.mra_seen = true;
        const uint8_t ack_timeout = c.active ? c.local.timeout : c.remote.timeout;
        c.retry_ns =
            std::clamp(ib_mra_wait_ns(m.ib.mra_timeout, ack_timeout), cfg_.retry_timeout_ns,
                       std::max(cfg_.retry_timeout_ns, cfg_.max_mra_wait_ns));
        c.deadline_ns = now_ns + c.retry_ns;
      } else {
        ++counters_.rx_unexpected;
      }
      return;
    case CmType::kLap:
      // No alternate paths here. Answer for a connection the peer may migrate (as IBTA
      // says; Linux's ib_cm takes LAPs only when established too), or it resends its LAP.
      if (c.state == State::kEstablished) {
        ++counters_.lap_unsupported;
        CmMessage r;
        r.type = CmType::kApr;
        r.src_conn = id;
        r.dst_conn = c.remote_conn;
        r.ib.tid = m.ib.tid;
        r.ib.apr_status = kIbAprUnsupported;
        emit_message(c.peer, r, 0);
      } else {
        ++counters_.rx_unexpected;
      }
      return;
    case CmType::kReq:
    case CmType::kSidrReq:
    case CmType::kSidrRep:
    case CmType::kApr:
      break;  // handled by on_message
  }
  (void)now_ns;
}

void ConnectionManager::on_timer(uint64_t now_ns) {
  scratch_ids_.clear();
  for (const auto& [id, c] : conns_) {
    if (c.deadline_ns <= now_ns) scratch_ids_.push_back(id);
  }
  for (uint32_t id : scratch_ids_) {
    auto it = conns_.find(id);
    if (it == conns_.end()) continue;
    Conn& c = it->second;
    if (c.state == State::kRequestPending) {
      ++counters_.timeouts;
      // As Linux, tell an IB requester (a native one gives up by now on its own).
      if (c.peer.ib) send(c, id, CmType::kRej, RejectReason::kTimeout);
      fail(id, c, RejectReason::kTimeout, false);
      continue;
    }
    if (c.retries >= c.max_retries) {
      ++counters_.timeouts;
      if (c.state == State::kDreqSent) {
        // The peer is gone; the connection is over either way.
        if (c.report) emit(event(CmAction::Kind::kDisconnected, id, c));
        erase(it);
      } else {
        fail(id, c, RejectReason::kTimeout, false);
      }
      continue;
    }
    ++c.retries;
    ++counters_.retransmits;
    c.deadline_ns = now_ns + retry_ns(c);
    if (c.state == State::kReqSent) send(c, id, CmType::kReq);
    if (c.state == State::kRepSent) send(c, id, CmType::kRep);
    if (c.state == State::kDreqSent) send(c, id, CmType::kDreq);
  }
}

uint64_t ConnectionManager::next_deadline_ns() const {
  uint64_t next = UINT64_MAX;
  for (const auto& [id, c] : conns_) next = std::min(next, c.deadline_ns);
  return next;
}

size_t ConnectionManager::poll_actions(CmAction* out, size_t max) {
  size_t n = 0;
  while (n < max && actions_head_ < actions_.size()) out[n++] = actions_[actions_head_++];
  if (actions_head_ == actions_.size()) {
    actions_.clear();
    actions_head_ = 0;
  }
  return n;
}

}  // namespace conduit::cm
