// The engine's per-client and per-QP state (Engine::Client, Engine::QpCtx),
// shared by engine.cc and engine_cm.cc. Engine thread only.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <vector>

#include "engine/engine.h"

namespace conduit::engine {

// Work requests taken from a client's ring at a time and posted as one chain.
inline constexpr uint32_t kPostChain = 32;

struct Engine::Client {
  uint32_t id = 0;
  uint8_t* region = nullptr;
  shm::RegionLayout layout;
  int doorbell_fd = -1;
  ClientMemory mem;
  std::vector<CqCtx> cqs;
  std::vector<uint32_t> qpns;
  conduit_shm_wakeup* engine_wakeup = nullptr;
  bool broken = false;
  // Completions lost to full CQs while its QPs were removed (their WR_FLUSH_ERR ones,
  // mostly): the kRemoveClient ack reports it, for conduitd's log at stop.
  uint32_t flush_lost = 0;

  std::span<uint8_t> bytes() const { return {region, layout.region_size}; }
  shm::ArenaBounds arena() const { return {layout.arena_offset, layout.arena_size}; }
};

struct Engine::QpCtx {
  uint32_t qpn = 0;
  Client* client = nullptr;
  uint32_t slot = 0;
  std::unique_ptr<transport::Qp> qp;
  shm::SpscConsumer<conduit_shm_send_wr> sq;
  shm::SpscConsumer<conduit_shm_recv_wr> rq;
  uint32_t send_cq = 0;
  uint32_t recv_cq = 0;
  size_t cls = 0;
  sched::FlowId flow = sched::kInvalidId;
  std::unique_ptr<cc::RateController> rc;
  cc::NotificationPoint np;
  // Inline send data lives here while the transport holds the WR.
  std::vector<uint8_t> inline_buf;
  uint32_t inline_lkey = 0;
  uint32_t inline_slots = 0;
  uint64_t inline_next = 0;
  // Entries taken from the client's rings (private copies) and not yet given
  // to the QP: [at, n) of the last burst, posted as chains; what the QP could
  // not take yet (its queue was full) is retried first, in order.
  std::array<conduit_shm_send_wr, kPostChain> pending_sends{};
  uint32_t pending_send_at = 0;
  uint32_t pending_send_n = 0;
  std::array<conduit_shm_recv_wr, kPostChain> pending_recvs{};
  uint32_t pending_recv_at = 0;
  uint32_t pending_recv_n = 0;
  bool has_pending_posts() const {
    return pending_send_at != pending_send_n || pending_recv_at != pending_recv_n;
  }
  // Peer addressing.
  bool peer_set = false;
  bool peer_resolved = false;
  bool peer_local = false;  // the peer QP lives on this host: loopback, no port
  // Resolved, but the last lookup found no route to the peer (or no room for its next hop):
  // still sending to the old next hop and MAC (Engine::lookup_peer).
  bool route_kept = false;
  net::Ipv4Addr peer_ip{};
  net::Ipv4Addr next_hop{};
  // RoCEv2 over IPv6: a peer GID that is not IPv4-mapped (then addr.ipv6 too).
  bool peer_v6 = false;
  net::Ipv6Addr peer_ip6{};
  net::Ipv6Addr next_hop6{};
  // Unresolved: when to ask the neighbour table again. Resolved: when to look up again
  // anyway, so the table sees the entry in use and refreshes it before it ages out.
  uint64_t next_resolve_ns = 0;
  // NetStack::generation() when next_hop was routed and, once resolved, its MAC found: while
  // it has not moved, neither has changed.
  uint64_t net_generation = 0;
  wire::FrameAddr addr;
  uint32_t queued_frames = 0;
  // Of those, the first ones to leave were built before the peer's MAC changed: tx() gives
  // them the new one (Engine::restamp_dst_mac).
  uint32_t restamp_frames = 0;
  // Of those, READ responses and atomic ACKs: an ACK behind them is paced too (it must not
  // overtake them), else it leaves at once (Engine::send_ack_unpaced).
  uint32_t queued_answers = 0;
  transport::QpState reported_state = transport::QpState::kReset;
  uint64_t tx_bytes = 0;
  uint64_t rx_bytes = 0;
  uint64_t cnps_rx = 0;
  uint64_t cnps_tx = 0;
  uint64_t rx_wrong_peer = 0;
  // The receive fast path (Engine::rx_roce_fast): the header of the frames
  // the peer sends us, learned from a frame rx_roce() accepted from it over
  // the port, for the PMTU it was parsed with. Not usable until then, and
  // again after Engine::reset_rx_expect (modify, peer change). When the
  // peer's frames change (its IPv4 ID or TTL), the full path accepts them
  // and the expectation misses: after kRxExpectRelearnMisses such frames in
  // a row (no fast-path hit between) it is learned again from the last one.
  // So a few odd frames (a replay, an injected frame from the peer's address)
  // cannot move the expectation or switch the fast path off, and a peer
  // whose frames always differ (Linux rxe counts its IPv4 IDs) costs a failed
  // match per frame and one learn per kRxExpectRelearnMisses frames.
  static constexpr uint16_t kRxExpectRelearnMisses = 64;
  wire::RxExpect rx_expect;
  // Full-path frames accepted in a row since the last fast-path hit or learn.
  uint16_t rx_expect_misses = kRxExpectRelearnMisses - 1;
  // Frame headers for `addr`, remade by fill_pacer whenever addr changed.
  wire::FrameAddr tmpl_addr;
  wire::FrameTemplate tmpl = wire::make_frame_template(tmpl_addr);
  // Connection manager: the connection this QP belongs to (0: none).
  uint32_t cm_conn = 0;
  uint32_t cm_access = 0;
  bool cm_wait_traffic = false;  // passive, REP sent: the peer's first packet confirms it
  cm::QpParams cm_local;         // what we offered (passive: RTS waits for confirmation)
  cm::QpParams cm_remote;

  explicit QpCtx(const cc::NpParams& np_params) : np(np_params) {}
};

}  // namespace conduit::engine
