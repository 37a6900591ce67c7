// The message set between the control thread and the engine (poll-mode lcore).
//
// The control thread owns every client resource (regions, QPN/key allocation,
// quotas) and tells the engine about changes through EngineChannel's command
// ring; the engine answers through the event ring. The engine never takes a
// lock and never blocks on the control thread.
//
// Commands (control -> engine). `cookie` is echoed in the kAck event.
//   kAddClient     a client attached: `region` (daemon mapping, valid until the
//                  kRemoveClient ack), `layout` (daemon's private copy; same
//                  lifetime), `doorbell_fd`: the socket the client kicks after
//                  posting while the region's engine line is armed; the engine
//                  sleeps on it (epoll) when idle.
//   kRemoveClient  the client detached or hung up: move each of its QPs to
//                  ERROR, complete outstanding WRs with WR_FLUSH_ERR (their CQs
//                  are going away too, so this is best effort), fail peers'
//                  requests, forget its CQs/MRs, and stop touching `region`.
//                  The control thread unmaps the region only after the ack, whose
//                  `cqes_lost` totals the flush completions its QPs' removals
//                  lost to full CQs (conduitd's stop warns of them).
//   kAddCq         CQ slot `cq_slot` of `client_id` is live; `event_fd` (or -1)
//                  is the CQ's wakeup pipe to kick after publishing CQEs when
//                  the CQ's wakeup line is armed (shm/doorbell.h).
//   kRemoveCq      stop producing into the CQ; ack before the slot is reused.
//   kAddQp         QP `qpn` in slot `qp_slot`, RESET state, completions to
//                  `send_cq` / `recv_cq` (CQ slots), `traffic_class`.
//   kModifyQp      apply `attr` (already validated: proto::validate_qp_attr and
//                  the RESET->INIT->RTR->RTS rules in QpStateMachine). Moving to
//                  ERROR flushes outstanding WRs with WR_FLUSH_ERR.
//   kRemoveQp      to ERROR, flush, forget; ack before the slot/QPN is reused.
//                  Flush completions a full CQ cannot take are lost: counted in
//                  the CQ's wakeup line (the client's overrun) and the ack's
//                  `cqes_lost`.
//                  `owner_gone`: the owning client hung up or detached with the
//                  QP still live; a QP of this host connected to it is moved to
//                  ERROR as well, so its WRs complete with errors at once
//                  instead of waiting out the retries (or, for receives, forever).
//   kAddMr         MR `lkey`/`rkey` = region bytes [region_offset, +length),
//                  `access` (shm::MrAccess bits); `iova` is what peers send as
//                  remote_addr for its first byte.
//   kRemoveMr      forget the MR; later WRs naming it fail with BAD_LKEY.
//   kQueryQp       reply with a kQpStats event for `qpn`.
//   kCmListen      client `client_id` listens on `cm.service` (connection
//                  manager, daemon/cm); kCmUnlisten stops it.
//   kCmConnect     connect QP `qpn` (RESET or INIT) to `cm.service` at the
//                  conduitd `cm.peer` with `cm`'s offer; the ack carries the
//                  connection id in `cm.conn`; the outcome comes as a kCmEvent.
//   kCmAccept      accept request `cm.conn` with QP `qpn` (RESET or INIT): the
//                  QP goes to RTR at once, to RTS when the peer confirms.
//   kCmReject      refuse request `cm.conn` with `cm.reason` and `cm.private_data`.
//   kCmDisconnect  end QP `qpn`'s connection (DREQ to the peer, if it is still
//                  up) and move the QP to ERROR. A peer's DREQ is only
//                  reported (kCmEvent): the QP keeps its state until this.
//   kSnapshot      one kQpStats event per QP (this command's cookie), then
//                  write the engine-wide counters into `*snapshot` and ack.
//                  The control thread owns `*snapshot` and reads it only after
//                  the ack (the event ring's release/acquire orders the
//                  writes); it keeps at most one kSnapshot in flight.
//   kSetPolicy     a policy reload's engine sections in `*policy` (traffic
//                  classes, CNP settings, new QPs' transport defaults), built
//                  by the control thread (engine/engine_config.h). The engine
//                  checks all of it, then applies all of it, or none (-EINVAL).
//                  It swaps its own tables with the ones in `*policy`, so the
//                  old tables come back there for the control thread to free,
//                  and writes the counts of QPs it moved. The control thread
//                  owns `*policy`, keeps at most one kSetPolicy in flight and
//                  reads it only after the ack; as for kSnapshot, the command
//                  ring's release/acquire publishes its writes to the engine
//                  and the event ring's the engine's writes back to it.
//   kKernelFrame   a frame the kernel received on the port's interface, given
//                  to the engine's network stack as if the port had received it
//                  (af_xdp: the Router Advertisements the XDP program leaves to
//                  the kernel, seen through a packet tap, daemon/control/
//                  kernel_frame_tap.h). Neighbour discovery and router state
//                  only: a RoCE or connection-manager datagram in it is ignored
//                  (counted in engine.kernel_frames_ignored). `frame` holds
//                  `frame_len` bytes; the control thread owns them and keeps
//                  them until the ack (as for kSetPolicy, the command ring's
//                  release/acquire publishes them to the engine, and the event
//                  ring's orders the engine's last read before the control
//                  thread reuses the buffer).
//
// Events (engine -> control).
//   kAck           command `cookie` done; `status` 0 or negative errno.
//   kQpState       the engine moved `qpn` to `state` on its own (retry
//                  exhausted, fatal error); the control thread updates its table
//                  and logs `error` (why, and the QP's retry state) when set.
//   kQpStats       answer to kQueryQp: `state`, rate, alpha, counters.
//   kClientBroken  `client_id` wrote impossible ring indices (or its CQ ring's
//                  consumer index was impossible): the engine stopped reading
//                  its rings and moved its QPs to ERROR; the control thread
//                  logs it and closes the client's connection.
//   kCmEvent       for client `client_id`: a connection request for one of its
//                  listeners, or one of its connections established (its QP is
//                  in RTS with the attributes in `cm`), rejected or ended.
//   kQpStats       answer to kQueryQp / kSnapshot: `state`, rate, alpha,
//                  counters. Events keep their order: a kSnapshot's ack comes
//                  after all of its kQpStats.
//
// Everything is trivially copyable: the rings copy entries with memcpy. The
// pointers in kAddClient are into this process (the daemon's own mapping);
// nothing here is in shared memory with clients.
#pragma once

#include <cstdint>
#include <type_traits>

#include "proto/control_protocol.h"
#include "shm/region.h"

namespace conduit::engine {
struct PolicyUpdate;  // engine/engine.h: only the engine and main look inside
}  // namespace conduit::engine

namespace conduit::control {

enum class EngineOp : uint16_t {
  kAddClient = 1,
  kRemoveClient,
  kAddCq,
  kRemoveCq,
  kAddQp,
  kModifyQp,
  kRemoveQp,
  kAddMr,
  kRemoveMr,
  kQueryQp,
  kSnapshot,
  kCmListen,
  kCmUnlisten,
  kCmConnect,
  kCmAccept,
  kCmReject,
  kCmDisconnect,
  kSetPolicy,
  kKernelFrame,
};
const char* engine_op_name(EngineOp op);

// Engine-wide counters as (name, value) pairs, filled by the engine for
// kSnapshot. Names are string literals (static storage), so the control thread
// may keep the pointers.
struct CounterSnapshot {
  static constexpr uint32_t kMaxCounters = 256;
  struct Item {
    const char* name = nullptr;
    uint64_t value = 0;
  };
  uint32_t count = 0;
  Item items[kMaxCounters];

  // Appends one counter; false (and nothing stored) when full.
  bool add(const char* name, uint64_t value) {
    if (count == kMaxCounters) return false;
    items[count++] = {name, value};
    return true;
  }
};

// Connection-manager arguments and results (plain data: the rings memcpy them).
struct CmArgs {
  uint64_t service = 0;
  uint32_t conn = 0;
  proto::CmAddr peer{};  // kCmConnect: IPv4-mapped or IPv6
  uint32_t access = 0;   // proto::kAccess*
  uint32_t pmtu_bytes = 0;
  uint32_t flags = 0;   // proto::kCmFlag*
  uint16_t reason = 0;  // proto::kCm* reason
  uint8_t private_len = 0;
  uint8_t private_data[proto::kMaxCmPrivateBytes] = {};
};

// What a kCmEvent reports.
struct CmEventInfo {
  proto::CmEventKind kind = proto::CmEventKind::kNone;
  uint32_t conn = 0;
  uint32_t qpn = 0;
  proto::CmAddr peer{};  // IPv4-mapped or IPv6
  uint64_t service = 0;
  uint32_t remote_qpn = 0;
  uint32_t pmtu_bytes = 0;
  uint32_t flags = 0;
  uint16_t reason = 0;
  uint32_t sq_psn = 0;  // kEstablished: what the QP was given
  uint32_t rq_psn = 0;
  uint32_t access = 0;
  uint8_t private_len = 0;
  uint8_t private_data[proto::kMaxCmPrivateBytes] = {};
};

struct EngineCommand {
  uint64_t cookie = 0;
  EngineOp op = EngineOp::kAddClient;
  uint32_t client_id = 0;
  // kAddClient
  uint8_t* region = nullptr;
  const shm::RegionLayout* layout = nullptr;
  int doorbell_fd = -1;
  // kAddCq / kRemoveCq
  uint32_t cq_slot = 0;
  int event_fd = -1;
  // kAddQp / kModifyQp / kRemoveQp / kQueryQp
  uint32_t qpn = 0;
  uint32_t qp_slot = 0;
  uint32_t send_cq = 0;
  uint32_t recv_cq = 0;
  bool owner_gone = false;  // kRemoveQp
  char traffic_class[proto::kMaxClassNameBytes + 1] = {};
  proto::QpAttr attr;  // plain data: no owning members
  // kAddMr / kRemoveMr
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  uint32_t access = 0;
  uint64_t region_offset = 0;
  uint64_t length = 0;
  uint64_t iova = 0;
  // kSnapshot
  CounterSnapshot* snapshot = nullptr;
  // kSetPolicy
  engine::PolicyUpdate* policy = nullptr;
  // kKernelFrame
  const uint8_t* frame = nullptr;
  uint32_t frame_len = 0;
  // kCm*
  CmArgs cm;
};

enum class EngineEventKind : uint16_t { kAck = 1, kQpState, kQpStats, kClientBroken, kCmEvent };

// kQpState into ERROR that the engine caused itself (cause set): why, for the log.
struct QpErrorInfo {
  const char* cause = nullptr;  // static text; nullptr: the owner moved the QP there
  bool requester = true;        // the QP's requests failed (else: it NAKed the peer's)
  uint32_t psn = 0;             // requester: oldest unacknowledged PSN; responder: the request's
  uint32_t next_psn = 0;        // requester: one past the highest PSN sent
  uint32_t peer_qpn = 0;
  uint8_t retry_cnt = 0;
  uint64_t ack_timeout_ns = 0;
  uint64_t since_progress_ns = UINT64_MAX;  // since the peer last acknowledged (MAX: never)
  uint64_t timeouts = 0;
  uint64_t naks_received = 0;
  uint64_t rnr_naks_received = 0;
};

struct EngineEvent {
  uint64_t cookie = 0;
  EngineEventKind kind = EngineEventKind::kAck;
  int32_t status = 0;      // kAck: 0 or negative errno
  uint32_t client_id = 0;  // kClientBroken, kCmEvent
  uint32_t qpn = 0;
  proto::QpState state = proto::QpState::kReset;
  uint64_t rate_bps = 0;
  uint32_t alpha_ppm = 0;
  uint64_t cnps_rx = 0;  // reaction point: CNPs that reached this QP
  uint64_t cnps_tx = 0;  // notification point: CNPs sent for CE-marked arrivals
  uint64_t retransmits = 0;
  uint64_t tx_bytes = 0;
  uint64_t rx_bytes = 0;
  // kAck of kRemoveQp: the completions lost to full CQs as the QP's WRs were flushed; of
  // kRemoveClient: the client's total over all its QPs' removals (conduitd's stop warns).
  uint32_t cqes_lost = 0;
  CmEventInfo cm;     // kCmEvent; kAck of kCmConnect: cm.conn
  QpErrorInfo error;  // kQpState
};

static_assert(std::is_trivially_copyable_v<EngineCommand>);
static_assert(std::is_trivially_copyable_v<EngineEvent>);
static_assert(std::is_trivially_copyable_v<CounterSnapshot>);

}  // namespace conduit::control
