// The native connection manager: connection set-up and tear-down between two
// conduitd over UDP (message format: cm_message.h), in the style of the IB CM
// (REQ / REP / RTU, REJ, DREQ / DREP) with retries and timeouts.
//
//   active (connect)                    passive (listen)
//   REQ  ------------------------------>  no listener: REJ(no listener)
//                                         else kRequest to the listener's owner,
//                                         who answers accept() or reject()
//        <------------------------------  REP (or REJ(reason))
//   kEstablished; RTU  ---------------->  kEstablished
//
// Lost messages: the active side resends its REQ until a REP or REJ arrives,
// the passive side resends its REP until an RTU arrives (or the QP sees the
// peer's traffic: on_qp_traffic()), natively both every retry_timeout_ns and at
// most max_retries times (1.2 s by default); then the connection fails with
// RejectReason::kTimeout.
// Over the IB CM every message we resend goes at the REQ's pace, as Linux's ib_cm sends
// every MAD of a connection (its cm_alloc_msg and timeout_ms), each timeout field taken as
// its cm_convert_to_ms rounds 4.096 us x 2^n (2^(n-8) ms): the active side's REQ and DREQ
// every "remote CM response timeout" of the REQ we send (18: 1024 ms) plus twice the packet
// life time its primary local ACK timeout stands for (that minus 1; our QPs' default 14:
// 2 x 32 ms), 1.088 s, at most its "max CM retries" (15) times, so an unanswered REQ fails
// after 16 x 1.088 s = 17.4 s (ib_send_cm_req; cm_rep_handler keeps both;
// cm_process_send_error ends the request, no REJ sent);
// the passive side's REP and DREQ every "local CM response timeout" of the REQ it got, as
// Linux's cm_convert_to_ms rounds it (2^(n-8) ms: rdma_cm's 20, 4.096 s; no packet life
// time added on this side), at most its max CM retries times (cm_req_handler). Either
// timeout bounded by retry_timeout_ns and max_ib_rep_timeout_ns; an MRA stretches it (below).
// Duplicates are answered again (a REP for a repeated REQ, an RTU for a
// repeated REP, a DREP for a DREQ naming no connection) and never create a second
// connection.
// IB CM only: a SIDR_REQ (service id resolution for a UD QP, which conduit does
// not have) is answered with SIDR_REP 'unsupported', one per request and no
// state kept; a LAP (load an alternate path) for an established connection with
// APR 'unsupported', the connection left as it is (a LAP for no connection of
// ours is dropped).
// IB CM: a REQ from a QP that is in another connection here, in any state (the
// peer lost that one and reuses the QP), is refused with REJ 'stale connection'
// and the old connection, if established, is disconnected (DREQ), as Linux's ib_cm
// does; so is a REP naming such a QP (REJ of the REP; our request fails with
// kRefused). No timewait: as Linux's, an ended connection's QPN is free at once.
// IB CM, as Linux: a resent REQ the owner has not answered yet gets an MRA with Linux's
// service timeout 24 (4.096 us x 2^24, which a Linux requester waits as cm_convert_to_ms rounds
// it, 2^16 ms = 65.5 s, plus its path's timeout, before each later resend); the request then
// lives max_ib_request_wait_ns.
// As Linux's cm_dreq_handler: a DREQ for a request the owner has not answered yet is
// dropped (counted), one while our REQ has no answer is answered as for no connection
// (DREP, the request goes on); after our REP it ends the connection.
// IB CM, as Linux: a DREQ must name our QP or it is dropped; a peer's MRA of our REQ (REP)
// stretches the wait before this and every later resend of it to what Linux's cm_mra_handler
// waits: cm_convert_to_ms of its service timeout plus that of the path's timeout (the packet
// life time + 1: for our REQ the one our QP's ACK timeout stands for, for our REP the one the
// peer's REQ's does), at least retry_timeout_ns and at most max_mra_wait_ns (120 s; Linux's
// own MRA: 65.6 s with our QPs' default ACK timeout 14), one MRA per connection, the retry
// budget unchanged; a UC/XRC REQ or one with an rdma_cm header we cannot read gets REJ
// 'consumer defined' (a listener) or 'invalid service id'; a Get/Set MAD gets GetResp
// 'unsupported'.
// Replies to messages that name no connection of ours (REJ of such a REQ,
// SIDR_REP, DREP for no connection, GetResp) are rate-limited (token bucket).
// A REJ ends a connection in any state: one already established here (the
// peer gave up after its REP, before our RTU reached it) is reported as
// kDisconnected.
// PMTU is the smaller of the two offers (over the IB CM the REQ's: the REP
// cannot name another), capabilities the common ones.
//
// Two dialects, by peer: conduit's native messages over UDP between daemons
// (cm_message.h), and the IB CM's MADs (ib_cm_mad.h) for verbs peers (the
// Linux ib_cm/rdma_cm over RoCE v2). A connection speaks its peer's dialect;
// the state machine is the same. Over the IB CM: READ/atomic depths are
// negotiated (cap_depths), selective repeat is never offered, an rdma_cm REQ
// reaches the listener of its port number, and connect() to a service up to
// 0xFFFF sends an rdma_cm REQ for that port.
//
// Pure: time is passed in, nothing is sent here. Messages to send and events
// for the owners (a control-plane client id, opaque here) come out of
// poll_actions(). Thread role: one thread (the engine's).
// Allocation: connections and listeners live in std::maps (a node per
// connection, at connect/request time); on_timer, forget_owner and the action
// queue reuse their buffers once grown.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "cm/cm_message.h"
#include "cm/ib_cm_mad.h"

namespace conduit::cm {

// A peer: address (IPv4-mapped or IPv6) and UDP port (host byte order) of a
// daemon speaking the native messages, or (ib) an IB CM peer's address: its
// GSI, QP 1, port 0.
struct CmPeer {
  CmAddr addr{};
  uint16_t port = 0;
  bool ib = false;
  auto operator<=>(const CmPeer&) const = default;
};

struct CmConfig {
  uint64_t retry_timeout_ns = 200'000'000;  // between resends of REQ, REP or DREQ (IB: at
                                            // the REQ's pace, see above)
  uint32_t max_retries = 5;                 // resends before the connection fails (native)
  uint32_t max_connections = 4096;          // in any state; a REQ beyond it gets REJ(quota)
  uint32_t max_listeners = 1024;
  uint32_t first_conn_id = 1;  // seed: a restarted daemon should not reuse ids
  // IB CM: the longest an MRA makes us wait before each resend of the message it
  // acknowledges (Linux's cm_mra_handler: 2^(n-8) ms for its service timeout n plus that of
  // the path's timeout). Linux's own MRA (24: 65.5 s, plus 64 ms for our QPs' default ACK
  // timeout, 2 s for rdma_cm's REQ over RoCE in 6.1) is honoured in full, with any path whose
  // ACK timeout is up to 23 (98.3 s); a peer's 31 (2^23 ms, 2.3 h) waits this long. As long as
  // max_ib_request_wait_ns, the longest we keep a peer's request waiting for our owner.
  uint64_t max_mra_wait_ns = 120'000'000'000;
  // IB CM: a request the owner has not answered lives as long as the requester resends
  // its REQ (its REQ says how long), at most this long; this long once we sent an MRA for
  // it (the requester resent its REQ: we ask it to wait).
  uint64_t max_ib_request_wait_ns = 120'000'000'000;
  // IB CM: our REQ, REP and DREQ are resent as Linux's ib_cm resends them: passive (REP,
  // DREQ), on the REQ's local CM response timeout (rdma_cm: 20, which Linux takes as 2^12 ms,
  // 4.096 s) and at most its max CM retries (rdma_cm: 15) times; active (REQ, DREQ), on our
  // REQ's remote CM response timeout (18: 1024 ms) plus twice its packet life time (1.088 s
  // for our QPs' default ACK timeout 14) and max CM retries (15). The timeout taken no shorter
  // than retry_timeout_ns and no longer than this.
  uint64_t max_ib_rep_timeout_ns = 30'000'000'000;
  // Requests handed out and not yet answered, per source address (any port) and in all;
  // a REQ beyond either gets REJ(quota): one sender cannot fill the connection table. A
  // host that connects many QPs at once (an rdma_cm job opening one per peer process)
  // stays far below the first.
  uint32_t max_pending_per_addr = 256;
  uint32_t max_pending_requests = 2048;
  // Replies sent for a message that names no connection of ours (REJ 'no listener',
  // 'quota' or 'stale', SIDR_REP, DREP for no connection, GetResp 'unsupported'): a
  // token bucket of this many a second, this burst, so a spoofed source cannot have us
  // reflect a flood at a third host. 0 per second: no limit.
  uint32_t unsolicited_replies_per_s = 1000;
  uint32_t unsolicited_reply_burst = 100;
  // For IB CM messages: our addresses (GIDs, rdma_cm header), the one of the
  // peer's family is used, and CA GUID.
  CmAddr local_addr4{};  // IPv4-mapped
  CmAddr local_addr6{};  // all zero when the port has no IPv6 address
  uint64_t ca_guid = 0;
};

// One thing for the caller to do.
struct CmAction {
  enum class Kind : uint8_t {
    kSend,          // send bytes[0..len) to peer: native, UDP from our cm port to
                    // peer.port; peer.ib, a MAD for the peer's GSI (QP 1)
    kRequest,       // a REQ for owner's listener: call accept() or reject() on conn
    kEstablished,   // conn is up: move the QP to RTR/RTS with `remote` and `pmtu_bytes`/`caps`
    kRejected,      // conn failed before it was established; `reason` says why
    kDisconnected,  // an established conn ended (our disconnect() done, or the peer's DREQ)
  };
  Kind kind = Kind::kSend;
  uint32_t conn = 0;
  uint64_t owner = 0;
  CmPeer peer;
  uint64_t service = 0;
  QpParams local;           // kEstablished
  QpParams remote;          // kRequest, kEstablished
  uint16_t pmtu_bytes = 0;  // negotiated (kEstablished)
  uint16_t caps = 0;        // negotiated (kEstablished)
  RejectReason reason = RejectReason::kRefused;
  // kRejected over the IB CM: the REJ's own code (IbRejCode; kIbRejStaleConn also when we
  // refused the peer's REP as stale), which says more than `reason`; 0 otherwise.
  uint16_t ib_rej_code = 0;
  uint8_t private_len =
      0;  // kRequest, kEstablished, kRejected (its REJ's): the peer's private data
  std::array<uint8_t, kMaxPrivateBytes> private_data{};
  // IB CM: the peer's private data went on past kMaxPrivateBytes (non-zero bytes there):
  // private_data holds its first kMaxPrivateBytes.
  bool private_truncated = false;
  uint16_t len = 0;                        // kSend
  std::array<uint8_t, kMadBytes> bytes{};  // the larger of the two dialects
};

struct CmCounters {
  uint64_t rx_messages = 0;
  uint64_t rx_malformed = 0;     // parse_cm_message / parse_ib_cm_mad refused it
  uint64_t rx_unsupported = 0;   // a valid IB CM MAD conduit does not act on (APR, SIDR_REP...)
  uint64_t mra_received = 0;     // IB CM: a peer asked us to wait longer for its answer
  uint64_t mra_sent = 0;         // IB CM: resent REQs answered "wait" (owner still deciding)
  uint64_t rx_unknown_conn = 0;  // dst_conn not ours, or from another peer
  uint64_t rx_unexpected = 0;    // valid but not in this state (ignored)
  uint64_t tx_messages = 0;
  uint64_t retransmits = 0;
  uint64_t timeouts = 0;
  uint64_t established = 0;
  uint64_t rejected_sent = 0;
  uint64_t rejected_received = 0;
  uint64_t requests_over_cap = 0;    // REQs refused by max_pending_per_addr / _requests
  uint64_t sidr_unsupported = 0;     // IB CM: SIDR_REQs answered 'unsupported' (no UD QPs)
  uint64_t lap_unsupported = 0;      // IB CM: LAPs answered with APR 'unsupported'
  uint64_t stale_requests = 0;       // IB CM: REQs from a QP connected here, REJ 'stale'
  uint64_t stale_replies = 0;        // IB CM: REPs from a QP connected here, REJ 'stale'
  uint64_t dreq_qpn_mismatch = 0;    // IB CM: DREQs naming another QP than ours (dropped)
  uint64_t dreq_dropped = 0;         // DREQs for a request not answered yet (dropped, as Linux)
  uint64_t dreq_owner_gone = 0;      // IB: one DREQ, not resent, for an owner that went away
  uint64_t mad_get_unsupported = 0;  // IB CM: Get/Set MADs answered GetResp 'unsupported'
  uint64_t requests_refused = 0;     // IB CM: UC/XRC or bad rdma_cm header REQs, REJ
  uint64_t replies_suppressed = 0;   // unsolicited replies over the rate limit (not sent)
};

class ConnectionManager {
 public:
  explicit ConnectionManager(const CmConfig& cfg);

  // Passive side. 0, -EADDRINUSE (another owner listens there), -ENOSPC.
  int listen(uint64_t service, uint64_t owner);
  // 0 or -ENOENT. Requests already handed out stay the owner's to answer.
  int unlisten(uint64_t service, uint64_t owner);

  // Active side: sends a REQ. The connection id (> 0), or -EINVAL (bad
  // params or private data), -ENOSPC (max_connections).
  int64_t connect(uint64_t now_ns, uint64_t owner, CmPeer peer, uint64_t service,
                  const QpParams& local, const uint8_t* private_data = nullptr,
                  size_t private_len = 0);
  // Answers a kRequest. 0, -ENOENT (no such pending request of that owner:
  // it timed out or the peer gave up), -EINVAL (bad params). An IB CM request
  // runs the REQ's PMTU (local.pmtu_bytes is the most we can carry, 0: none):
  // when that is below it, -EMSGSIZE and the request is refused with REJ(invalid MTU).
  int accept(uint64_t now_ns, uint64_t owner, uint32_t conn, const QpParams& local,
             const uint8_t* private_data = nullptr, size_t private_len = 0);
  // Refuses a kRequest with reason and private data for the requester (as rdma_reject()'s:
  // the REJ's private data field; a native REJ carries its length). 0, -ENOENT (as accept),
  // -EINVAL (more than kMaxPrivateBytes, or no data for a length).
  int reject(uint64_t now_ns, uint64_t owner, uint32_t conn, RejectReason reason,
             const uint8_t* private_data = nullptr, size_t private_len = 0);
  // Ends a connection in any state (an unanswered REQ is abandoned: an IB peer
  // gets REJ(timeout); an established one sends DREQ). 0 or -ENOENT.
  int disconnect(uint64_t now_ns, uint64_t owner, uint32_t conn);
  // The QP parameters a connection agreed on so far (after accept(): what the
  // QP moves to RTR with; the IB CM's PSN convention applied). false: no such conn.
  bool params(uint32_t conn, QpParams& local, QpParams& remote) const;
  // The QP of a passive connection received the peer's traffic: as good as an RTU.
  void on_qp_traffic(uint32_t conn);
  // Everything of owner (a client that went away): listeners removed,
  // connections disconnected (DREQ sent where established), nothing reported back.
  void forget_owner(uint64_t now_ns, uint64_t owner);

  // A datagram from peer on the CM port (native), or a MAD from its GSI (peer.ib).
  void on_message(uint64_t now_ns, CmPeer from, const uint8_t* data, size_t len);
  void on_timer(uint64_t now_ns);
  // When on_timer() next has work; UINT64_MAX when none.
  uint64_t next_deadline_ns() const;

  // Moves up to max pending actions into out; returns how many.
  size_t poll_actions(CmAction* out, size_t max);
  size_t pending_actions() const { return actions_.size() - actions_head_; }
  size_t connection_count() const { return conns_.size(); }
  const CmCounters& counters() const { return counters_; }

 private:
  enum class State : uint8_t {
    kReqSent,         // active: REQ out, waiting for REP/REJ
    kRequestPending,  // passive: REQ handed to the owner, waiting for accept/reject
    kRepSent,         // passive: REP out, waiting for RTU
    kEstablished,
    kDreqSent,  // waiting for DREP
  };
  struct Conn {
    State state = State::kReqSent;
    bool active = false;
    bool report = true;  // false once the owner is gone: no more events
    uint64_t owner = 0;
    CmPeer peer;
    uint32_t remote_conn = 0;
    uint64_t service = 0;
    QpParams local;
    QpParams remote;
    uint8_t private_len = 0;  // what we send (REQ/REP)
    std::array<uint8_t, kMaxPrivateBytes> private_data{};
    uint8_t remote_private_len = 0;  // what the peer sent (its REQ or REP), for kEstablished
    std::array<uint8_t, kMaxPrivateBytes> remote_private_data{};
    bool remote_private_truncated = false;
    uint64_t deadline_ns = UINT64_MAX;
    uint32_t retries = 0;
    uint32_t max_retries = 0;  // resends of the message in flight before it fails
    bool mra_seen = false;     // IB CM: the peer's one MRA (for our REQ or REP) honoured
    // Between resends of the message in flight (REQ, REP, DREQ); 0: retry_timeout_ns. An
    // MRA stretches it for every later resend of the message it acknowledges, as Linux's
    // ib_modify_mad does.
    uint64_t retry_ns = 0;
    uint64_t request_ns = 0;                 // passive: when the REQ came
    uint8_t req_response_timeout = 0;        // IB CM passive: the REQ's (4.096 us * 2^n)
    uint8_t req_max_retries = 0;             // IB CM passive: the REQ's max CM retries
    uint8_t req_local_response_timeout = 0;  // IB CM passive: the REQ's, our REP/DREQ pace
    uint64_t tid = 0;       // IB CM: the REQ's transaction id (REP, REJ and RTU echo it)
    uint64_t dreq_tid = 0;  // IB CM: our DREQ's
  };

  uint32_t allocate_id();
  void send(const Conn& c, uint32_t local_id, CmType type, RejectReason reason = {},
            uint16_t ib_rej_code = 0, const uint8_t* private_data = nullptr,
            uint8_t private_len = 0);
  void send_reply(CmPeer to, uint32_t src, uint32_t dst, CmType type, RejectReason reason = {},
                  uint64_t tid = 0, uint32_t peer_qpn = 0, uint8_t rej_message = kIbMsgReq,
                  uint16_t ib_rej_code = 0, const uint8_t* private_data = nullptr,
                  uint8_t private_len = 0);
  void emit_message(CmPeer to, const CmMessage& m, uint32_t peer_qpn);
  uint64_t new_tid(uint32_t id) { return uint64_t{++tid_seq_} << 32 | id; }
  void emit(const CmAction& a) { actions_.push_back(a); }
  CmAction event(CmAction::Kind kind, uint32_t id, const Conn& c) const;
  void establish(uint32_t id, Conn& c);
  // rej: the peer's REJ, whose private data the owner gets.
  void fail(uint32_t id, Conn& c, RejectReason reason, bool received, uint16_t ib_rej_code = 0,
            const CmMessage* rej = nullptr);
  // Removes a connection and what indexes it (by_remote_, the pending counts).
  void erase(std::map<uint32_t, Conn>::iterator it);
  // A request leaves kRequestPending (answered or gone): its pending counts drop.
  void end_pending(const Conn& c);
  void on_req(uint64_t now_ns, CmPeer from, const CmMessage& m);
  void on_sidr_req(uint64_t now_ns, CmPeer from, const CmMessage& m);
  void on_refused_req(uint64_t now_ns, CmPeer from, const CmMessage& m);
  // IB CM: a resent REQ the owner has not answered yet gets an MRA, as Linux's.
  void send_request_mra(uint32_t id, Conn& c);
  // The pace of a new message in flight (REQ, REP, DREQ): ours (retry_timeout_ns,
  // max_retries) natively; over the IB CM the REQ's, as Linux's: passive, the local CM
  // response timeout and max CM retries of the REQ we got; active, the remote CM response
  // timeout plus twice the packet life time, and the max CM retries, our REQ advertises (the
  // timeout bounded by retry_timeout_ns and max_ib_rep_timeout_ns).
  void pace_as_requested(Conn& c) const;
  // The token bucket of unsolicited replies: true when one may be sent now (and takes it).
  bool unsolicited_reply_ok(uint64_t now_ns);
  uint64_t retry_ns(const Conn& c) const {
    return c.retry_ns != 0 ? c.retry_ns : cfg_.retry_timeout_ns;
  }
  void on_for_conn(uint64_t now_ns, CmPeer from, const CmMessage& m);

  CmConfig cfg_;
  uint32_t next_id_;
  std::map<uint32_t, Conn> conns_;                             // by local connection id
  std::map<std::pair<CmPeer, uint32_t>, uint32_t> by_remote_;  // (peer, remote id) -> local id
  // IB CM: (peer address, its QPN) -> the newest connection that QP is in here (passive
  // from the REQ, active from the REP), for on_req's stale check.
  std::map<std::pair<CmAddr, uint32_t>, uint32_t> by_remote_qpn_;
  std::map<uint64_t, uint64_t> listeners_;      // service -> owner
  std::map<CmAddr, uint32_t> pending_by_addr_;  // kRequestPending conns per peer address
  uint32_t pending_total_ = 0;
  // Pending actions from actions_head_ on; the vector keeps its capacity when
  // drained, so steady-state timers and retries do not allocate.
  std::vector<CmAction> actions_;
  size_t actions_head_ = 0;
  std::vector<uint32_t> scratch_ids_;  // on_timer / forget_owner: reused, not reallocated
  CmCounters counters_;
  uint32_t tid_seq_ = 0;
  uint64_t reply_credit_ns_ = 0;  // the bucket, in nanoseconds of refill
  uint64_t reply_refill_ns_ = 0;  // when it was last refilled
};

}  // namespace conduit::cm
