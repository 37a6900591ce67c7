// The engine's side of the native connection manager (daemon/cm): control
// commands into cm::ConnectionManager, its datagrams to and from the CM UDP
// port through the NetStack (ARP as for RoCE frames), and its outcomes
// applied to the QPs (RESET -> INIT -> RTR -> RTS with the negotiated values)
// and reported to the clients as kCmEvent.
#include <rte_mbuf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/engine.h"
#include "engine/engine_contexts.h"
#include "policy/policy.h"
#include "wire/gsi.h"

namespace conduit::engine {
namespace {

// proto's reasons are the wire's (cm_message.h) plus the local timeout.
static_assert(proto::kCmNoListener == static_cast<uint16_t>(cm::RejectReason::kNoListener));
static_assert(proto::kCmQuota == static_cast<uint16_t>(cm::RejectReason::kQuota));
static_assert(proto::kCmPolicy == static_cast<uint16_t>(cm::RejectReason::kPolicy));
static_assert(proto::kCmRefused == static_cast<uint16_t>(cm::RejectReason::kRefused));
static_assert(proto::kCmTimeout == static_cast<uint16_t>(cm::RejectReason::kTimeout));
static_assert(proto::kCmInvalid == static_cast<uint16_t>(cm::RejectReason::kInvalid));
static_assert(proto::kMaxCmPrivateBytes == cm::kMaxPrivateBytes);

constexpr size_t kCmBurst = 8;

uint32_t flags_from_caps(uint16_t caps, bool ib) {
  return ((caps & cm::kCapSelectiveRepeat) != 0 ? proto::kCmFlagSelectiveRepeat : 0) |
         (ib ? proto::kCmFlagRdmaCm : 0);
}

// The peer's private data went on past what an event carries (IB CM: a REJ's or REP's field).
uint32_t private_flags(const cm::CmAction& a) {
  return a.private_truncated ? proto::kCmFlagPrivateTruncated : 0;
}

}  // namespace

cm::CmAddr Engine::cm_addr_of(const net::UdpDatagram& udp) {
  return udp.ipv6 ? udp.src_ip6.bytes : cm::cm_addr_v4(udp.src_ip.value);
}

int Engine::cm_route(cm::CmAddr& peer) {
  uint32_t ip4 = 0;
  if (cm::cm_addr_ipv4(peer, ip4)) {
    net::Ipv4Addr ip{ip4};
    if (ip.is_loopback()) ip = net_.config().addr;
    peer = cm::cm_addr_v4(ip.value);
    return ip == net_.config().addr || net_.next_hop(ip) ? 0 : -ENETUNREACH;
  }
  if (!net_.config().addr6) return -ENETUNREACH;  // no port.address6: no IPv6 at all
  net::Ipv6Addr ip{peer};
  if (ip.is_loopback()) ip = *net_.config().addr6;
  peer = ip.bytes;
  return ip == *net_.config().addr6 || net_.next_hop6(ip) ? 0 : -ENETUNREACH;
}

int Engine::set_cm_peer(QpCtx& q, const cm::CmAddr& peer, uint64_t now_ns) {
  uint32_t ip4 = 0;
  if (cm::cm_addr_ipv4(peer, ip4)) return set_peer(q, net::Ipv4Addr{ip4}, now_ns);
  if (!net_.config().addr6) return -EINVAL;
  return set_peer6(q, net::Ipv6Addr{peer}, now_ns);
}

cm::QpParams Engine::cm_local_params(const QpCtx& q, const control::CmArgs& args) {
  // xorshift64: start PSNs only need to differ between connections.
  psn_seed_ ^= psn_seed_ << 13;
  psn_seed_ ^= psn_seed_ >> 7;
  psn_seed_ ^= psn_seed_ << 17;
  cm::QpParams p;
  p.qpn = q.qpn;
  p.psn = static_cast<uint32_t>(psn_seed_) & 0xFFFFFF;
  // What the client left open comes from the QP's defaults (the policy's transport
  // section when the QP was created).
  const transport::QpAttr& defaults = q.qp->config().reset_attr;
  p.pmtu_bytes =
      static_cast<uint16_t>(args.pmtu_bytes != 0 ? args.pmtu_bytes : defaults.pmtu_bytes);
  // The IB CM has no way to offer selective repeat: go-back-N, as a verbs peer does.
  const bool sr =
      ((args.flags & proto::kCmFlagSelectiveRepeat) != 0 || config_.offer_selective_repeat) &&
      (args.flags & proto::kCmFlagRdmaCm) == 0;
  p.caps = sr ? cm::kCapSelectiveRepeat : 0;
  p.timeout = defaults.timeout;
  p.retry_cnt = defaults.retry_cnt;
  p.rnr_retry = defaults.rnr_retry;
  p.initiator_depth = static_cast<uint8_t>(std::min<uint32_t>(defaults.max_rd_atomic, 255));
  p.responder_resources =
      static_cast<uint8_t>(std::min<uint32_t>(defaults.max_dest_rd_atomic, 255));
  return p;
}

bool Engine::pmtu_fits(uint32_t pmtu_bytes, bool ipv6) const {
  // The port's MTU, and over IPv6 a link MTU a Router Advertisement's MTU option lowered;
  // the headers as the policy loader counts them (IPv6's are 20 bytes longer).
  uint32_t mtu = port_.mtu_bytes();
  if (ipv6 && net_.link_mtu6() != 0 && (mtu == 0 || net_.link_mtu6() < mtu)) {
    mtu = net_.link_mtu6();
  }
  const uint32_t overhead = ipv6 ? policy::kRoceOverheadBytes6 : policy::kRoceOverheadBytes;
  return mtu == 0 || pmtu_bytes + overhead <= mtu;
}

uint16_t Engine::cm_fit_pmtu(uint16_t pmtu, const cm::CmAddr& peer) const {
  // As rdma_cm takes the path MTU from the port's active MTU: offer the largest path MTU
  // whose frames leave this port (a client may ask for 4096 on a 1500-byte link), so that
  // neither side sends frames the link drops.
  uint32_t v4;
  const bool v6 = !cm::cm_addr_ipv4(peer, v4);
  while (pmtu > 256 && !pmtu_fits(pmtu, v6)) pmtu /= 2;
  return pmtu;
}

int Engine::cm_command(const control::EngineCommand& cmd, uint64_t now_ns, uint32_t* conn_out) {
  const control::CmArgs& a = cmd.cm;
  const uint64_t owner = cmd.client_id;
  int rc = 0;
  switch (cmd.op) {
    case control::EngineOp::kCmListen:
      rc = cm_.listen(a.service, owner);
      break;
    case control::EngineOp::kCmUnlisten:
      rc = cm_.unlisten(a.service, owner);
      break;
    case control::EngineOp::kCmConnect:
    case control::EngineOp::kCmAccept: {
      QpCtx* q = find_qp(cmd.qpn);
      if (q == nullptr || q->client->id != cmd.client_id) return -ENOENT;
      if (q->cm_conn != 0) return -EBUSY;
      const transport::QpState st = q->qp->state();
      if (st != transport::QpState::kReset && st != transport::QpState::kInit) return -EISCONN;
      if (a.private_len > cm::kMaxPrivateBytes ||
          (a.pmtu_bytes != 0 && !cm::valid_pmtu(a.pmtu_bytes))) {
        return -EINVAL;
      }
      cm::QpParams local = cm_local_params(*q, a);
      q->cm_access = a.access;
      if (cmd.op == control::EngineOp::kCmConnect) {
        cm::CmAddr peer = a.peer;
        if (const int route = cm_route(peer); route < 0) return route;
        local.pmtu_bytes = cm_fit_pmtu(local.pmtu_bytes, peer);
        // rdma_cm's peers: the IB CM, on the peer's GSI; conduitd's: the native messages.
        const bool ib = (a.flags & proto::kCmFlagRdmaCm) != 0;
        const cm::CmPeer to{peer, ib ? uint16_t{0} : config_.cm_udp_port, ib};
        const int64_t id =
            cm_.connect(now_ns, owner, to, a.service, local, a.private_data, a.private_len);
        if (id < 0) return static_cast<int>(id);
        q->cm_conn = static_cast<uint32_t>(id);
        q->cm_local = local;
        cm_conn_qpn_[q->cm_conn] = q->qpn;
        *conn_out = q->cm_conn;
        // INIT now, so receives may be posted while the peer answers.
        if (st == transport::QpState::kReset) {
          transport::QpAttr init;
          init.state = transport::QpState::kInit;
          init.access_flags = q->cm_access;
          q->qp->modify(init, transport::kAttrState | transport::kAttrAccessFlags);
          q->reported_state = q->qp->state();
        }
        break;
      }
      auto req = cm_requests_.find(a.conn);
      if (req == cm_requests_.end() || req->second.owner != owner) return -ENOENT;
      const cm::CmAction request = req->second;
      local.pmtu_bytes = cm_fit_pmtu(local.pmtu_bytes, request.peer.addr);
      if (request.peer.ib) {
        // A verbs peer: its READ depths bound ours, and it runs go-back-N. And it runs its
        // REQ's PMTU whatever we answer (the REP has no MTU): ours is that one when the port
        // carries it, else accept() refuses the request with REJ(invalid MTU).
        cm::cap_depths(local, request.remote);
        local.caps = 0;
        uint32_t ip4 = 0;
        const bool v6 = !cm::cm_addr_ipv4(request.peer.addr, ip4);
        local.pmtu_bytes = pmtu_fits(request.remote.pmtu_bytes, v6) ? request.remote.pmtu_bytes : 0;
      }
      rc = cm_.accept(now_ns, owner, a.conn, local, a.private_data, a.private_len);
      if (rc == -EMSGSIZE) cm_requests_.erase(req);  // refused: the request is gone
      if (rc < 0) break;
      cm_requests_.erase(req);
      cm::QpParams remote = request.remote;
      cm_.params(a.conn, local, remote);  // the IB CM's PSNs, as accept() settled them
      q->cm_conn = a.conn;
      q->cm_local = local;
      q->cm_remote = remote;
      cm_conn_qpn_[a.conn] = q->qpn;
      // RTR before the REP leaves: the peer may send as soon as it has it. Over the IB CM
      // both PMTUs are the REQ's (accept()).
      const uint16_t pmtu = std::min(local.pmtu_bytes, remote.pmtu_bytes);
      const uint16_t caps = static_cast<uint16_t>(local.caps & remote.caps);
      rc = cm_move_qp(*q, local, remote, pmtu, caps, false, now_ns);
      if (rc == 0) rc = set_cm_peer(*q, request.peer.addr, now_ns);
      if (rc < 0) {
        cm_.disconnect(now_ns, owner, a.conn);
        cm_forget_conn(*q);
        break;
      }
      set_flow_ids(*q, request.remote.qpn);
      q->cm_wait_traffic = true;
      break;
    }
    case control::EngineOp::kCmReject: {
      auto req = cm_requests_.find(a.conn);
      if (req == cm_requests_.end() || req->second.owner != owner) return -ENOENT;
      rc = cm_.reject(now_ns, owner, a.conn, static_cast<cm::RejectReason>(a.reason),
                      a.private_data, std::min<size_t>(a.private_len, sizeof a.private_data));
      cm_requests_.erase(req);
      break;
    }
    case control::EngineOp::kCmDisconnect: {
      QpCtx* q = find_qp(cmd.qpn);
      if (q == nullptr || q->client->id != cmd.client_id) return -ENOENT;
      // The connection may be gone already (the peer's DREQ): the QP still stops.
      send_final_ack(*q, now_ns);
      if (q->cm_conn != 0) {
        cm_.disconnect(now_ns, owner, q->cm_conn);
        cm_forget_conn(*q);
      }
      // As rdma_disconnect: the QP stops, outstanding WRs are flushed.
      transport::QpAttr err;
      err.state = transport::QpState::kErr;
      q->qp->modify(err, transport::kAttrState);
      break;
    }
    default:
      return -EINVAL;
  }
  cm_poll(now_ns);
  return rc;
}

void Engine::cm_forget_conn(QpCtx& q) {
  cm_conn_qpn_.erase(q.cm_conn);
  q.cm_conn = 0;
  q.cm_wait_traffic = false;
}

int Engine::cm_move_qp(QpCtx& q, const cm::QpParams& local, const cm::QpParams& remote,
                       uint16_t pmtu_bytes, uint16_t caps, bool to_rts, uint64_t now_ns) {
  (void)now_ns;
  reset_rx_expect(q);  // the PMTU and the peer may change with the connection
  // Attributes the connection does not negotiate (READ depths, the RNR timer we
  // ask for) are the QP's defaults.
  const transport::QpAttr& defaults = q.qp->config().reset_attr;
  transport::QpAttr a = defaults;
  if (q.qp->state() == transport::QpState::kReset) {
    a.state = transport::QpState::kInit;
    a.access_flags = q.cm_access;
    if (q.qp->modify(a, transport::kAttrState | transport::kAttrAccessFlags) !=
        transport::Status::kOk) {
      return -EINVAL;
    }
  }
  if (q.qp->state() == transport::QpState::kInit) {
    a = defaults;
    a.state = transport::QpState::kRtr;
    a.access_flags = q.cm_access;
    a.pmtu_bytes = pmtu_bytes;
    a.dest_qpn = remote.qpn;
    a.rq_psn = remote.psn;
    if (local.responder_resources != 0) a.max_dest_rd_atomic = local.responder_resources;
    // Selective repeat only when both ends offered it.
    a.selective_repeat = (caps & cm::kCapSelectiveRepeat) != 0;
    if (q.qp->modify(a, transport::kAttrState | transport::kAttrAccessFlags |
                            transport::kAttrPathMtu | transport::kAttrDestQpn |
                            transport::kAttrRqPsn | transport::kAttrMaxDestRdAtomic |
                            transport::kAttrMinRnrTimer | transport::kAttrSelectiveRepeat) !=
        transport::Status::kOk) {
      return -EINVAL;
    }
  }
  if (to_rts && q.qp->state() == transport::QpState::kRtr) {
    a = defaults;
    a.state = transport::QpState::kRts;
    a.sq_psn = local.psn;
    if (local.initiator_depth != 0) a.max_rd_atomic = local.initiator_depth;
    a.timeout = local.timeout;
    a.retry_cnt = local.retry_cnt;
    a.rnr_retry = local.rnr_retry;
    if (q.qp->modify(a, transport::kAttrState | transport::kAttrSqPsn | transport::kAttrTimeout |
                            transport::kAttrRetryCnt | transport::kAttrRnrRetry |
                            transport::kAttrMaxRdAtomic) != transport::Status::kOk) {
      return -EINVAL;
    }
  }
  // The control thread learns the new state from the kCmEvent, not kQpState.
  q.reported_state = q.qp->state();
  return 0;
}

void Engine::cm_rx(const net::UdpDatagram& udp, std::span<const uint8_t> frame, uint64_t now_ns) {
  ++counters_.cm_rx_datagrams;
  const auto payload = frame.subspan(udp.payload_offset, udp.payload_len);
  cm_.on_message(now_ns, cm::CmPeer{cm_addr_of(udp), udp.src_port}, payload.data(), payload.size());
}

void Engine::gsi_rx(const net::UdpDatagram& udp, std::span<const uint8_t> frame, uint64_t now_ns) {
  const auto ip_udp = frame.subspan(udp.ip_offset, udp.ipv6 ? net::NetStack::kIpv6UdpHeaderBytes
                                                            : net::NetStack::kIpv4UdpHeaderBytes);
  const auto payload = frame.subspan(udp.payload_offset, udp.payload_len);
  std::span<const uint8_t> mad;
  uint32_t src_qp = 0;
  if (wire::parse_gsi(ip_udp, payload, mad, src_qp) != wire::GsiDrop::kNone) {
    ++counters_.cm_gsi_rx_dropped;
    return;
  }
  ++counters_.cm_gsi_rx;
  cm_.on_message(now_ns, cm::CmPeer{cm_addr_of(udp), 0, true}, mad.data(), mad.size());
}

bool Engine::cm_poll(uint64_t now_ns) {
  if (cm_.pending_actions() == 0 && now_ns < cm_deadline_ns_) return false;
  if (now_ns >= cm_deadline_ns_) cm_.on_timer(now_ns);
  cm::CmAction actions[kCmBurst];
  for (size_t n; (n = cm_.poll_actions(actions, kCmBurst)) > 0;) {
    for (size_t i = 0; i < n; ++i) {
      const cm::CmAction& a = actions[i];
      switch (a.kind) {
        case cm::CmAction::Kind::kSend:
          cm_send(a, now_ns);
          break;
        case cm::CmAction::Kind::kRequest: {
          cm_requests_[a.conn] = a;
          control::CmEventInfo info;
          info.kind = proto::CmEventKind::kRequest;
          info.conn = a.conn;
          info.peer = a.peer.addr;
          info.service = a.service;
          info.remote_qpn = a.remote.qpn;
          info.pmtu_bytes = a.remote.pmtu_bytes;
          info.flags = flags_from_caps(a.remote.caps, a.peer.ib) | private_flags(a);
          info.private_len = a.private_len;
          std::memcpy(info.private_data, a.private_data.data(), a.private_len);
          cm_post(static_cast<uint32_t>(a.owner), info);
          break;
        }
        case cm::CmAction::Kind::kEstablished:
          cm_on_established(a, now_ns);
          break;
        case cm::CmAction::Kind::kRejected:
        case cm::CmAction::Kind::kDisconnected:
          cm_on_ended(a);
          break;
      }
    }
  }
  cm_deadline_ns_ = cm_.next_deadline_ns();
  return true;
}

// The frame for one CM message, its destination MAC left for the neighbour
// table: a UDP datagram to the peer daemon's CM port, or (IB CM) a GSI packet
// to the peer's QP 1 on the RoCE port. nullptr when out of mbufs or room.
rte_mbuf* Engine::cm_frame(const cm::CmAction& a) {
  rte_mbuf* m = port_.alloc_mbuf();
  if (m == nullptr) {
    ++counters_.tx_no_mbuf;  // the CM resends
    return nullptr;
  }
  std::span<uint8_t> room(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_tailroom(m));
  const uint8_t tos = static_cast<uint8_t>(config_.classes[0].dscp << 2);
  const bool ib = a.peer.ib;
  const size_t body = ib ? wire::kGsiPacketBytes + 4 : a.len;
  const uint16_t src_port =
      ib ? wire::udp_sport_for_qp(wire::kGsiQpn, wire::kGsiQpn) : config_.cm_udp_port;
  const uint16_t dst_port = ib ? config_.roce_udp_port : a.peer.port;
  uint32_t ip4 = 0;
  const bool v4 = cm::cm_addr_ipv4(a.peer.addr, ip4);
  const size_t hdr = v4 ? net_.write_udp_headers(room, net::MacAddr{}, net::Ipv4Addr{ip4}, src_port,
                                                 dst_port, tos, body)
                        : net_.write_udp6_headers(room, net::MacAddr{}, net::Ipv6Addr{a.peer.addr},
                                                  src_port, dst_port, tos, body);
  if (hdr == 0 || hdr + body > room.size() || (ib && a.len != wire::kGsiMadBytes)) {
    ++counters_.tx_build_errors;
    rte_pktmbuf_free(m);
    return nullptr;
  }
  if (ib) {
    wire::write_gsi_packet(room.data() + hdr, gsi_psn_++, a.bytes.data());
    wire::finish_gsi_icrc(room.data() + net_.l2_header_len());
    ++counters_.cm_gsi_tx;
  } else {
    std::memcpy(room.data() + hdr, a.bytes.data(), a.len);
    // UDP over IPv6 must carry a checksum (RFC 8200); the RoCE datagrams above
    // are covered by their ICRC instead, as rxe sends them.
    if (!v4) net_.set_udp6_checksum(room.first(hdr + body));
    ++counters_.cm_tx_datagrams;
  }
  m->data_len = m->pkt_len = static_cast<uint32_t>(hdr + body);
  return m;
}

void Engine::cm_send(const cm::CmAction& a, uint64_t now_ns) {
  uint32_t ip4 = 0;
  const bool v4 = cm::cm_addr_ipv4(a.peer.addr, ip4);
  const bool self = v4 ? net::Ipv4Addr{ip4} == net_.config().addr
                       : net_.config().addr6 && a.peer.addr == net_.config().addr6->bytes;
  if (self) {
    // A client of this daemon on the other end: no port, no ARP.
    ++counters_.cm_local_datagrams;
    const cm::CmPeer from{a.peer.addr, a.peer.ib ? uint16_t{0} : config_.cm_udp_port, a.peer.ib};
    cm_.on_message(now_ns, from, a.bytes.data(), a.len);
    return;
  }
  const auto hop4 = v4 ? net_.next_hop(net::Ipv4Addr{ip4}) : std::nullopt;
  const auto hop6 = v4 ? std::nullopt : net_.next_hop6(net::Ipv6Addr{a.peer.addr});
  if (!hop4 && !hop6) {
    ++counters_.cm_tx_no_route;
    return;
  }
  rte_mbuf* m = cm_frame(a);
  if (m == nullptr) return;
  const auto handle = reinterpret_cast<net::FrameHandle>(m);
  const auto r = v4 ? net_.resolve(*hop4, now_ns, handle) : net_.resolve6(*hop6, now_ns, handle);
  switch (r.status) {
    case net::NeighbourTable::Resolve::kResolved:
      std::memcpy(rte_pktmbuf_mtod(m, uint8_t*), r.mac.bytes.data(), 6);
      transmit_now(m);
      break;
    case net::NeighbourTable::Resolve::kQueued:
      break;  // comes back through take_actions (run_timers)
    default:
      ++counters_.cm_tx_no_route;
      rte_pktmbuf_free(m);
      break;
  }
}

void Engine::cm_on_established(const cm::CmAction& a, uint64_t now_ns) {
  auto it = cm_conn_qpn_.find(a.conn);
  QpCtx* q = it != cm_conn_qpn_.end() ? find_qp(it->second) : nullptr;
  if (q == nullptr) {
    ++counters_.cm_events_no_qp;
    cm_.disconnect(now_ns, a.owner, a.conn);
    return;
  }
  q->cm_wait_traffic = false;
  q->cm_remote = a.remote;
  int rc = cm_move_qp(*q, a.local, a.remote, a.pmtu_bytes, a.caps, true, now_ns);
  if (rc == 0 && !q->peer_set) rc = set_cm_peer(*q, a.peer.addr, now_ns);
  set_flow_ids(*q, a.remote.qpn);
  control::CmEventInfo info;
  info.conn = a.conn;
  info.qpn = q->qpn;
  info.peer = a.peer.addr;
  info.service = a.service;
  if (rc < 0) {
    // The peer thinks it is connected: tell it otherwise.
    cm_.disconnect(now_ns, a.owner, a.conn);
    cm_forget_conn(*q);
    info.kind = proto::CmEventKind::kRejected;
    info.reason = proto::kCmInvalid;
    cm_post(q->client->id, info);
    return;
  }
  info.kind = proto::CmEventKind::kEstablished;
  info.remote_qpn = a.remote.qpn;
  info.pmtu_bytes = a.pmtu_bytes;
  info.flags = flags_from_caps(a.caps, a.peer.ib) | private_flags(a);
  info.sq_psn = a.local.psn;
  info.rq_psn = a.remote.psn;
  info.access = q->cm_access;
  info.private_len = a.private_len;
  std::memcpy(info.private_data, a.private_data.data(), a.private_len);
  cm_post(q->client->id, info);
}

void Engine::cm_on_ended(const cm::CmAction& a) {
  control::CmEventInfo info;
  info.kind = a.kind == cm::CmAction::Kind::kRejected ? proto::CmEventKind::kRejected
                                                      : proto::CmEventKind::kDisconnected;
  info.conn = a.conn;
  info.peer = a.peer.addr;
  info.service = a.service;
  info.reason = static_cast<uint16_t>(a.reason);
  if (a.ib_rej_code == cm::kIbRejStaleConn) info.flags |= proto::kCmFlagStale;
  info.flags |= private_flags(a);
  info.private_len = a.private_len;  // a REJ's (rdma_reject's), for the requester
  std::memcpy(info.private_data, a.private_data.data(), a.private_len);
  if (cm_requests_.erase(a.conn) > 0) return;  // a request nobody answered in time
  auto it = cm_conn_qpn_.find(a.conn);
  if (QpCtx* q = it != cm_conn_qpn_.end() ? find_qp(it->second) : nullptr) {
    info.qpn = q->qpn;
    // What completed before the DREQ came (its sender ACKs ahead of it: send_final_ack)
    // reaches the CQ before the event: a client that sees the disconnect and then polls
    // finds it.
    deliver_completions(*q);
    // A peer's DREQ leaves the QP as it is (as rdma_cm, the application
    // decides): WRs it already received complete normally, new sends fail
    // after the retries. A peer that exits right after its last receive must
    // not flush completions this side is still collecting.
    cm_forget_conn(*q);
  }
  cm_post(static_cast<uint32_t>(a.owner), info);
}

void Engine::cm_post(uint32_t client_id, const control::CmEventInfo& info) {
  control::EngineEvent ev;
  ev.kind = control::EngineEventKind::kCmEvent;
  ev.client_id = client_id;
  ev.qpn = info.qpn;
  ev.cm = info;
  post_event(ev);
}

}  // namespace conduit::engine
