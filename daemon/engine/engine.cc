#include "engine/engine.h"

#include <poll.h>
#include <rte_cycles.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <string>

#include "cc/dcqcn_rp.h"
#include "engine/engine_contexts.h"
#include "engine/idle_spin.h"
#include "net/rx_drop.h"
#include "policy/policy.h"
#include "wire/gsi.h"
#include "wire/psn.h"

namespace conduit::engine {
namespace {

constexpr uint16_t kRxBurst = 32;
constexpr uint32_t kRingBurst = 32;
// TX batch slots the pacer's departures leave free for frames built outside
// it (ARP and ICMP replies, CNPs), which have nowhere else to wait.
constexpr uint16_t kTxControlReserve = 8;
// A loop that starts more than this after the previous one (or after its
// sleep was due to end) finds the engine was stalled; see defer_timers_after_stall.
constexpr uint64_t kStallNs = 1'000'000;
// A paced departure nearer than this is polled for, not slept for: a ppoll and
// the wake-up cost a few microseconds, and the pacer's catch-up allowance
// (engine_pacer_config's 50 us) covers a sleep that ends late.
constexpr uint64_t kMinPacedSleepNs = 20'000;
constexpr unsigned long kEngineTimerSlackNs = 2'000;
constexpr uint32_t kInlineSlotBytes = CONDUIT_SHM_MAX_INLINE;
// Local keys of the engine's inline-data buffers: never handed to clients (the control
// thread keeps theirs below) and never reachable through an rkey
// (ClientMemory::add_local_buffer).
constexpr uint32_t kInlineLkeyBase = proto::kEngineKeyBase;
// The transport takes at most kMaxSge SGEs; inline data fits one inline slot.
constexpr shm::WrLimits kWrLimits{transport::kMaxSge, transport::kMaxSge, kInlineSlotBytes};

transport::QpState to_transport(proto::QpState s) {
  switch (s) {
    case proto::QpState::kReset:
      return transport::QpState::kReset;
    case proto::QpState::kInit:
      return transport::QpState::kInit;
    case proto::QpState::kRtr:
      return transport::QpState::kRtr;
    case proto::QpState::kRts:
      return transport::QpState::kRts;
    case proto::QpState::kSqd:
      return transport::QpState::kSqd;
    case proto::QpState::kSqe:
    case proto::QpState::kError:
      break;
  }
  return transport::QpState::kErr;
}

proto::QpState to_proto(transport::QpState s) {
  switch (s) {
    case transport::QpState::kReset:
      return proto::QpState::kReset;
    case transport::QpState::kInit:
      return proto::QpState::kInit;
    case transport::QpState::kRtr:
      return proto::QpState::kRtr;
    case transport::QpState::kRts:
      return proto::QpState::kRts;
    case transport::QpState::kSqd:
      return proto::QpState::kSqd;
    case transport::QpState::kErr:
      break;
  }
  return proto::QpState::kError;
}

uint8_t to_shm_status(transport::WcStatus s) {
  switch (s) {
    case transport::WcStatus::kSuccess:
      return CONDUIT_SHM_WC_SUCCESS;
    case transport::WcStatus::kLocalLengthError:
      return CONDUIT_SHM_WC_LOC_LEN_ERR;
    case transport::WcStatus::kLocalProtectionError:
      return CONDUIT_SHM_WC_LOC_PROT_ERR;
    case transport::WcStatus::kWrFlushError:
      return CONDUIT_SHM_WC_WR_FLUSH_ERR;
    case transport::WcStatus::kRemoteInvalidRequest:
      return CONDUIT_SHM_WC_REM_INV_REQ_ERR;
    case transport::WcStatus::kRemoteAccessError:
      return CONDUIT_SHM_WC_REM_ACCESS_ERR;
    case transport::WcStatus::kRemoteOperationError:
      return CONDUIT_SHM_WC_REM_OP_ERR;
    case transport::WcStatus::kRetryExceeded:
      return CONDUIT_SHM_WC_RETRY_EXC_ERR;
    case transport::WcStatus::kRnrRetryExceeded:
      return CONDUIT_SHM_WC_RNR_RETRY_EXC_ERR;
    case transport::WcStatus::kBadResponse:
      break;
  }
  return CONDUIT_SHM_WC_FATAL_ERR;
}

uint8_t to_shm_opcode(transport::WcOpcode op) {
  switch (op) {
    case transport::WcOpcode::kSend:
      return CONDUIT_SHM_WC_SEND;
    case transport::WcOpcode::kWrite:
      return CONDUIT_SHM_WC_RDMA_WRITE;
    case transport::WcOpcode::kRead:
      return CONDUIT_SHM_WC_RDMA_READ;
    case transport::WcOpcode::kRecv:
      return CONDUIT_SHM_WC_RECV;
    case transport::WcOpcode::kCmpSwap:
      return CONDUIT_SHM_WC_COMP_SWAP;
    case transport::WcOpcode::kFetchAdd:
      return CONDUIT_SHM_WC_FETCH_ADD;
    case transport::WcOpcode::kRecvWriteImm:
      break;
  }
  return CONDUIT_SHM_WC_RECV_RDMA_WITH_IMM;
}

// Counter names for the snapshot, built before main(): the engine only reads
// them, and the control thread keeps the pointers (static storage).
template <size_t N, class Reason, class NameOf>
std::array<std::string, N> prefixed_names(const char* prefix, NameOf name_of) {
  std::array<std::string, N> out;
  for (size_t i = 0; i < N; ++i) out[i] = std::string(prefix) + name_of(static_cast<Reason>(i));
  return out;
}
const auto kWireDropNames = prefixed_names<wire::kDropReasonCount, wire::DropReason>(
    "engine.rx_drop.", wire::drop_reason_name);
const auto kNetDropNames =
    prefixed_names<net::kRxDropCount, net::RxDrop>("net.rx_drop.", net::rx_drop_name);

void add_qp_counters(transport::QpCounters& into, const transport::QpCounters& k) {
  into.tx_packets += k.tx_packets;
  into.tx_retransmits += k.tx_retransmits;
  into.rx_packets += k.rx_packets;
  into.rx_duplicates += k.rx_duplicates;
  into.rx_out_of_sequence += k.rx_out_of_sequence;
  into.drop_wrong_qp += k.drop_wrong_qp;
  into.drop_state += k.drop_state;
  into.drop_bad_opcode += k.drop_bad_opcode;
  into.drop_bad_length += k.drop_bad_length;
  into.drop_stale_response += k.drop_stale_response;
  into.drop_response_queue_full += k.drop_response_queue_full;
  into.naks_sent += k.naks_sent;
  into.rnr_naks_sent += k.rnr_naks_sent;
  into.naks_received += k.naks_received;
  into.rnr_naks_received += k.rnr_naks_received;
  into.timeouts += k.timeouts;
  into.retries += k.retries;
}

bool is_receive(transport::WcOpcode op) {
  return op == transport::WcOpcode::kRecv || op == transport::WcOpcode::kRecvWriteImm;
}

// RoCEv2 over IPv4 carries an IPv4-mapped GID: ::ffff:a.b.c.d. Any other
// unicast GID is an IPv6 address (RoCEv2 over IPv6).
bool gid_is_ipv4_mapped(const std::array<uint8_t, 16>& gid) {
  for (int i = 0; i < 10; ++i) {
    if (gid[i] != 0) return false;
  }
  return gid[10] == 0xFF && gid[11] == 0xFF;
}

bool gid_to_ipv4(const std::array<uint8_t, 16>& gid, net::Ipv4Addr* out) {
  for (int i = 0; i < 10; ++i) {
    if (gid[i] != 0) return false;
  }
  if (gid[10] != 0xFF || gid[11] != 0xFF) return false;
  *out = net::Ipv4Addr::from_octets(gid[12], gid[13], gid[14], gid[15]);
  return out->is_unicast() || out->is_loopback();
}

template <class T>
shm::RingView<T> ring_view(uint8_t* base, const shm::RegionLayout& layout, uint32_t ring) {
  const conduit_shm_ring_desc d = layout.ring_desc(ring);
  shm::RingView<T> v;
  v.ctrl = reinterpret_cast<conduit_shm_ring_ctrl*>(base + d.ctrl_offset);
  v.slots = reinterpret_cast<T*>(base + d.slots_offset);
  v.capacity = d.capacity;
  return v;
}

// Why the transport failed a QP, as static text for the control thread's log.
const char* qp_error_cause(const transport::QpError& e) {
  using Side = transport::QpError::Side;
  if (e.side == Side::kRequester) return transport::wc_status_name(e.status);
  if (e.side != Side::kResponder) return nullptr;
  switch (e.nak) {
    case wire::NakCode::kInvalidRequest:
      return "the peer sent an invalid request (NAKed)";
    case wire::NakCode::kRemoteAccessError:
      return "the peer's request broke a memory region's bounds or rights (NAKed)";
    case wire::NakCode::kRemoteOperationalError:
      return "the peer's request could not be carried out (NAKed)";
    default:
      break;
  }
  return "the peer's request was NAKed";
}

}  // namespace

sched::SchedulerConfig engine_pacer_config() {
  sched::SchedulerConfig c;
  c.max_lag_ns = 50'000;
  return c;
}

// Once per engine loop: a multiply and a shift instead of two 64-bit divisions (3.9-7 % of
// a spinning engine's samples). ns = cycles * (1e9 * 2^32 / hz) / 2^32; the truncated factor
// is off by less than 1 / 2^30 of itself at any TSC rate from 4 MHz up, which is below the
// TSC's own rate error, and the clock stays monotonic.
uint64_t tsc_now_ns() {
  __extension__ using u128 = unsigned __int128;
  static const uint64_t mult =
      static_cast<uint64_t>((u128{1'000'000'000u} << 32) / rte_get_tsc_hz());
  return static_cast<uint64_t>((u128{rte_get_tsc_cycles()} * mult) >> 32);
}

Engine::Engine(const EngineConfig& config, dpdk::Port& port, control::EngineChannel& channel)
    : config_(config),
      port_(port),
      channel_(channel),
      net_(config.net),
      pacer_(config.pacer),
      idle_mode_(config.idle_mode),
      paced_gate_(uint64_t{config.paced_sleep_late_us} * 1000, 1'000'000, 1'000'000'000),
      cm_([&config] {
        // Connection ids from the clock: a restarted daemon should not answer
        // a peer's old connection with a reused id.
        cm::CmConfig c = config.cm;
        c.first_conn_id = static_cast<uint32_t>(rte_get_tsc_cycles() >> 8) | 1u;
        // For the IB CM: our address, and a CA GUID from the MAC (EUI-64, as
        // a RoCE NIC's node GUID is).
        c.local_addr4 = cm::cm_addr_v4(config.net.addr.value);
        if (config.net.addr6) c.local_addr6 = config.net.addr6->bytes;
        const auto& m = config.net.mac.bytes;
        c.ca_guid = uint64_t{m[0] ^ 0x02u} << 56 | uint64_t{m[1]} << 48 | uint64_t{m[2]} << 40 |
                    uint64_t{0xFFFE} << 24 | uint64_t{m[3]} << 16 | uint64_t{m[4]} << 8 | m[5];
        return c;
      }()),
      psn_seed_(rte_get_tsc_cycles() | 1u) {
  if (config_.classes.empty()) {
    TrafficClassSpec def;
    def.name = "default";
    config_.classes.push_back(def);
  }
  for (const auto& c : config_.classes) class_ids_.push_back(pacer_.add_class(c.sched));
}

Engine::~Engine() {
  for (rte_mbuf* m : pending_frames_) {
    if (m != nullptr) rte_pktmbuf_free(m);
  }
  for (uint16_t i = 0; i < tx_batch_len_; ++i) rte_pktmbuf_free(tx_batch_[i]);
  for (uint32_t i = 0; i < tx_spares_n_; ++i) rte_pktmbuf_free(tx_spares_[i]);
}

void Engine::run() {
  // Sleeps end on time to a few microseconds instead of the default 50 us
  // slack: a pacer sleep that overruns costs its flow rate beyond max_lag_ns.
  (void)::prctl(PR_SET_TIMERSLACK, kEngineTimerSlackNs, 0, 0, 0);
  IdleSpin spin(uint64_t{config_.idle_spin_min_us} * 1000,
                uint64_t{config_.idle_spin_max_us} * 1000);
  while (!stop_.load(std::memory_order_acquire)) {  // pairs with stop()'s release
    heartbeat_.store(counters_.loops, std::memory_order_relaxed);
    const uint64_t now = tsc_now_ns();
    const IdleMode mode = idle_mode_.load(std::memory_order_relaxed);
    if (poll_once(now)) {
      idle_since_ns_ = 0;
    } else if (client_progress_) {
      // A client of this engine may be waiting for this core: one it woke (its CQ's
      // wakeup pipe), or one that polls and yields (conduit-perf -Y) for a completion or for
      // a WRITE's data. The scheduler does not always preempt a spinning thread for a
      // task it woke, and never for one that yielded: either waits out the engine's time
      // slice (ms). Yield once, at the first loop with nothing to do, not right after
      // the work (that held back the frames and ACKs of the same loop). Both idle modes.
      // On a core of its own this is one cheap syscall per idle stretch (BENCHMARKS.md,
      // fifteenth and sixteenth demo runs).
      client_progress_ = false;
      ++counters_.wakeup_yields;
      ::sched_yield();
    } else if (mode == IdleMode::kAdaptive) {
      if (idle_since_ns_ == 0) {
        idle_since_ns_ = now;
      } else if (now - idle_since_ns_ >= spin.window_ns()) {
        // A sleep the pacer timed says nothing about when work comes back
        // unannounced: it must not grow the window (paced gaps shorter than
        // the longest window would be spun through again).
        if (!sleep_until_work(now)) spin.after_sleep(tsc_now_ns() - now);
        idle_since_ns_ = 0;
      }
    }
  }
  finish_stop();
}

// conduitd stops by releasing every client (the control thread posts the commands and does
// not wait) and then stopping the engine, which may see the stop before those commands: its
// loop's last rounds take them, and send what the QPs owe their peers (final ACKs, the READ
// responses those cover, DREQs). Rounds until one takes no command and leaves nothing in the
// TX batch, within kStopBudgetNs (the device may take nothing).
void Engine::finish_stop() {
  const uint64_t deadline = tsc_now_ns() + kStopBudgetNs;
  for (uint64_t now = tsc_now_ns(); now < deadline; now = tsc_now_ns()) {
    const uint64_t commands = counters_.commands;
    poll_once(now);
    if (counters_.commands == commands && tx_batch_len_ == 0) break;
  }
}

bool Engine::poll_once(uint64_t now_ns) {
  ++counters_.loops;
  bool work = false;

  // Events the ring could not take last time go first, in order.
  while (!event_backlog_.empty() && channel_.post_event(event_backlog_.front())) {
    event_backlog_.erase(event_backlog_.begin());
  }
  control::EngineCommand* cmds = cmd_scratch_;
  const uint32_t ncmd = channel_.poll_commands(cmds, 8);
  for (uint32_t i = 0; i < ncmd; ++i) handle_command(cmds[i], now_ns);
  work |= ncmd > 0;

  defer_timers_after_stall(now_ns);
  // RX before timers: an engine that slept (or was descheduled) past a QP's
  // ACK deadline must read the ACKs waiting in its RX ring before the timer
  // declares them lost (the dumbbell test measured 50-65 spurious go-back-N
  // timeouts per sender with the timers first, 5-11 with RX first).
  work |= rx(now_ns);
  work |= run_timers(now_ns);
  for (QpCtx* q : qp_list_) {
    work |= drain_client_rings(*q);
    work |= fill_pacer(*q, now_ns);
  }
  work |= tx(now_ns);
  for (QpCtx* q : qp_list_) work |= deliver_completions(*q);
  kick_cqs();
  return work;
}

// ---- commands ----------------------------------------------------------------

void Engine::handle_command(const control::EngineCommand& cmd, uint64_t now_ns) {
  ++counters_.commands;
  int status = 0;
  uint32_t conn = 0;
  uint32_t lost = 0;
  switch (cmd.op) {
    case control::EngineOp::kAddClient:
      status = add_client(cmd);
      break;
    case control::EngineOp::kRemoveClient:
      lost = remove_client(cmd.client_id, now_ns);
      break;
    case control::EngineOp::kAddCq:
      status = add_cq(cmd);
      break;
    case control::EngineOp::kRemoveCq: {
      Client* c = find_client(cmd.client_id);
      if (c == nullptr || cmd.cq_slot >= c->cqs.size()) {
        status = -ENOENT;
      } else {
        c->cqs[cmd.cq_slot] = CqCtx{};
      }
      break;
    }
    case control::EngineOp::kAddQp:
      status = add_qp(cmd, now_ns);
      break;
    case control::EngineOp::kModifyQp:
      status = modify_qp(cmd, now_ns);
      break;
    case control::EngineOp::kRemoveQp:
      lost = remove_qp(cmd.qpn, cmd.owner_gone);
      break;
    case control::EngineOp::kAddMr: {
      Client* c = find_client(cmd.client_id);
      if (c == nullptr) {
        status = -ENOENT;
      } else if (!c->mem.add_mr(c->bytes(), cmd.lkey, cmd.rkey, cmd.iova, cmd.region_offset,
                                cmd.length, cmd.access)) {
        status = -EINVAL;
      }
      break;
    }
    case control::EngineOp::kRemoveMr: {
      Client* c = find_client(cmd.client_id);
      status = (c != nullptr && c->mem.remove_mr(cmd.lkey)) ? 0 : -ENOENT;
      break;
    }
    case control::EngineOp::kQueryQp:
      post_qp_stats(cmd.cookie, cmd.qpn);
      return;  // the stats event is the answer
    case control::EngineOp::kSnapshot:
      snapshot(cmd);
      status = cmd.snapshot != nullptr ? 0 : -EINVAL;
      break;
    case control::EngineOp::kSetPolicy:
      status = set_policy(cmd.policy, now_ns);
      break;
    case control::EngineOp::kKernelFrame:
      if (cmd.frame == nullptr || cmd.frame_len == 0) {
        status = -EINVAL;
      } else {
        rx_kernel_frame(std::span<const uint8_t>(cmd.frame, cmd.frame_len), now_ns);
      }
      break;
    case control::EngineOp::kCmListen:
    case control::EngineOp::kCmUnlisten:
    case control::EngineOp::kCmConnect:
    case control::EngineOp::kCmAccept:
    case control::EngineOp::kCmReject:
    case control::EngineOp::kCmDisconnect:
      status = cm_command(cmd, now_ns, &conn);
      break;
  }
  control::EngineEvent ev;
  ev.cookie = cmd.cookie;
  ev.kind = control::EngineEventKind::kAck;
  ev.status = status;
  ev.qpn = cmd.qpn;
  ev.cm.conn = conn;
  ev.cqes_lost = lost;
  post_event(ev);
}

Engine::Client* Engine::find_client(uint32_t id) {
  auto it = clients_.find(id);
  return it == clients_.end() ? nullptr : it->second.get();
}

Engine::QpCtx* Engine::find_qp(uint32_t qpn) {
  auto it = qps_.find(qpn);
  return it == qps_.end() ? nullptr : it->second.get();
}

int Engine::add_client(const control::EngineCommand& cmd) {
  if (cmd.region == nullptr || cmd.layout == nullptr) return -EINVAL;
  if (clients_.count(cmd.client_id) != 0) return -EEXIST;
  auto c = std::make_unique<Client>();
  c->id = cmd.client_id;
  c->region = cmd.region;
  c->layout = *cmd.layout;  // our own copy; the one in shared memory is never read
  c->doorbell_fd = cmd.doorbell_fd;
  c->cqs.resize(c->layout.max_cqs);
  c->engine_wakeup =
      reinterpret_cast<conduit_shm_wakeup*>(c->region + c->layout.engine_wakeup_offset());
  clients_.emplace(cmd.client_id, std::move(c));
  return 0;
}

uint32_t Engine::remove_client(uint32_t client_id, uint64_t now_ns) {
  Client* c = find_client(client_id);
  if (c == nullptr) return 0;
  // Its listeners go, its connections end (DREQ to established peers), and
  // requests it never answered are dropped: the peers' REQs time out.
  cm_.forget_owner(now_ns, client_id);
  for (auto it = cm_requests_.begin(); it != cm_requests_.end();) {
    it = it->second.owner == client_id ? cm_requests_.erase(it) : std::next(it);
  }
  const std::vector<uint32_t> qpns = c->qpns;
  for (uint32_t qpn : qpns) remove_qp(qpn, /*owner_gone=*/true);
  const uint32_t lost = c->flush_lost;
  clients_.erase(client_id);
  return lost;
}

int Engine::add_cq(const control::EngineCommand& cmd) {
  Client* c = find_client(cmd.client_id);
  if (c == nullptr) return -ENOENT;
  if (cmd.cq_slot >= c->layout.max_cqs) return -EINVAL;
  auto view = ring_view<conduit_shm_cqe>(c->region, c->layout, c->layout.cq_ring(cmd.cq_slot));
  CqCtx& cq = c->cqs[cmd.cq_slot];
  cq.live = true;
  // The control thread reset the ring before the command: start where it is.
  cq.ring = view.producer(shm::load_prod(view.ctrl));
  cq.wakeup =
      reinterpret_cast<conduit_shm_wakeup*>(c->region + c->layout.cq_wakeup_offset(cmd.cq_slot));
  cq.event_fd = cmd.event_fd;
  return 0;
}

int Engine::add_qp(const control::EngineCommand& cmd, uint64_t now_ns) {
  Client* c = find_client(cmd.client_id);
  if (c == nullptr) return -ENOENT;
  if (cmd.qp_slot >= c->layout.max_qps || cmd.send_cq >= c->layout.max_cqs ||
      cmd.recv_cq >= c->layout.max_cqs) {
    return -EINVAL;
  }
  if (qps_.count(cmd.qpn) != 0) return -EEXIST;

  auto q = std::make_unique<QpCtx>(config_.np);
  q->qpn = cmd.qpn;
  q->client = c;
  q->slot = cmd.qp_slot;
  q->send_cq = cmd.send_cq;
  q->recv_cq = cmd.recv_cq;
  q->cls = 0;
  for (size_t i = 0; i < config_.classes.size(); ++i) {
    if (config_.classes[i].name == cmd.traffic_class) q->cls = i;
  }
  transport::QpConfig qc = config_.qp_defaults;
  qc.qpn = cmd.qpn;
  qc.sq_depth = c->layout.sq_depth;
  qc.rq_depth = c->layout.rq_depth;
  q->qp = std::make_unique<transport::Qp>(qc, c->mem);

  auto sq = ring_view<conduit_shm_send_wr>(c->region, c->layout, c->layout.sq_ring(cmd.qp_slot));
  auto rq = ring_view<conduit_shm_recv_wr>(c->region, c->layout, c->layout.rq_ring(cmd.qp_slot));
  q->sq = sq.consumer(shm::load_cons(sq.ctrl));
  q->rq = rq.consumer(shm::load_cons(rq.ctrl));

  // Inline data: one slot per SQ entry the transport can hold.
  q->inline_slots = std::bit_ceil(std::max<uint32_t>(qc.sq_depth, 1));
  q->inline_buf.assign(size_t{q->inline_slots} * kInlineSlotBytes, 0);
  q->inline_lkey = kInlineLkeyBase | (cmd.qpn & 0xFFFFFF);
  if (!c->mem.add_local_buffer(q->inline_lkey, q->inline_buf)) return -EEXIST;

  const TrafficClassSpec& cls = config_.classes[q->cls];
  q->rc = cc::make_controller(cls.cc, config_.line_rate_bps, now_ns);
  if (!q->rc) {
    c->mem.remove_mr(q->inline_lkey);
    return -EINVAL;
  }
  q->flow = pacer_.add_flow(class_ids_[q->cls], q->rc->rate_bps());
  if (q->flow == sched::kInvalidId) {
    c->mem.remove_mr(q->inline_lkey);
    return -ENOSPC;
  }
  q->addr.src_mac = net_.config().mac.bytes;
  q->addr.src_ip = net_.config().addr.value;
  q->addr.ttl = net_.config().ttl;
  q->addr.dst_port = config_.roce_udp_port;  // port.roce_udp_port: data, ACKs and CNPs
  mark_qp(*q);
  if (flow_qp_.size() <= q->flow) flow_qp_.resize(q->flow + 1, nullptr);
  flow_qp_[q->flow] = q.get();
  c->qpns.push_back(cmd.qpn);
  qp_list_.push_back(q.get());
  qps_.emplace(cmd.qpn, std::move(q));
  return 0;
}

void Engine::mark_qp(QpCtx& q) const {
  const TrafficClassSpec& cls = config_.classes[q.cls];
  q.addr.dscp = cls.dscp;
  q.addr.ecn = cls.ecn;
  if (net_.config().vlan_id || config_.priority_tagging) {
    q.addr.has_vlan = true;  // VID 0 without vlan_id: a priority tag
    q.addr.vlan_tci =
        static_cast<uint16_t>((cls.vlan_pcp & 7) << 13 | net_.config().vlan_id.value_or(0));
  }
}

int Engine::set_policy(PolicyUpdate* u, uint64_t now_ns) {
  if (u == nullptr || u->classes.empty() || cc::validate(u->np) != nullptr) {
    return -EINVAL;
  }
  // Everything is checked before anything changes.
  for (const TrafficClassSpec& c : u->classes) {
    if (!c.sched.strict && c.sched.weight == 0) return -EINVAL;
    if (c.cc.kind == cc::ControllerKind::kDcqcn && cc::validate(c.cc.dcqcn) != nullptr) {
      return -EINVAL;
    }
    if (c.cc.kind == cc::ControllerKind::kFixed && c.cc.fixed_rate_bps == 0) return -EINVAL;
  }
  // Entry i of the table is the pacer's class i; classes beyond a shorter table stay
  // in the pacer without flows.
  for (size_t i = 0; i < u->classes.size(); ++i) {
    if (i < class_ids_.size()) {
      pacer_.set_class(class_ids_[i], u->classes[i].sched);
    } else {
      class_ids_.push_back(pacer_.add_class(u->classes[i].sched));
    }
  }
  u->qps = u->qps_to_default = u->qps_new_controller = 0;
  for (QpCtx* q : qp_list_) {
    const TrafficClassSpec& was = config_.classes[q->cls];
    size_t to = 0;
    bool found = false;
    for (size_t i = 0; i < u->classes.size() && !found; ++i) {
      if (u->classes[i].name == was.name) {
        to = i;
        found = true;
      }
    }
    const TrafficClassSpec& next = u->classes[to];
    if (!(was.cc == next.cc)) {
      const cc::RateController* before = q->rc.get();
      if (cc::reconfigure_controller(q->rc, next.cc, config_.line_rate_bps, now_ns)) {
        if (q->rc.get() != before) ++u->qps_new_controller;
        pacer_.set_rate(q->flow, q->rc->rate_bps(), now_ns);
      }
    }
    q->cls = to;
    pacer_.move_flow(q->flow, class_ids_[to]);
    q->np.set_params(u->np);
    ++u->qps;
    if (!found) ++u->qps_to_default;
  }
  // The old tables go back to the control thread, which frees them.
  std::swap(config_.classes, u->classes);
  std::swap(config_.np, u->np);
  std::swap(config_.qp_defaults, u->qp_defaults);
  std::swap(config_.offer_selective_repeat, u->offer_selective_repeat);
  for (QpCtx* q : qp_list_) mark_qp(*q);
  ++counters_.policy_updates;
  return 0;
}

int Engine::modify_qp(const control::EngineCommand& cmd, uint64_t now_ns) {
  QpCtx* q = find_qp(cmd.qpn);
  if (q == nullptr || q->client->id != cmd.client_id) return -ENOENT;
  const proto::QpAttr& a = cmd.attr;
  // What the request leaves out comes from the QP's defaults (the policy's transport section).
  transport::QpAttr ta = q->qp->config().reset_attr;
  uint32_t mask = 0;
  if (a.mask & proto::kAttrState) {
    ta.state = to_transport(a.state);
    mask |= transport::kAttrState;
  }
  if (a.mask & proto::kAttrAccess) {
    ta.access_flags = a.access;
    mask |= transport::kAttrAccessFlags;
  }
  // The peer's family: from this modify's GID, else from the one set before.
  const bool v6_peer =
      (a.mask & proto::kAttrDgid) ? !gid_is_ipv4_mapped(a.dgid) : q->peer_set && q->peer_v6;
  if (a.mask & proto::kAttrPathMtu) {
    ta.pmtu_bytes = proto::path_mtu_bytes(a.path_mtu);
    // As verbs refuses a path MTU above the port's active MTU: packets that large would
    // not leave the port (or not arrive), and the QP would fail later with retries exceeded.
    // The same rule the policy loader applies to transport.pmtu against port.mtu (IPv6's
    // header is 20 bytes longer).
    if (!pmtu_fits(ta.pmtu_bytes, v6_peer)) return -EINVAL;
    mask |= transport::kAttrPathMtu;
  }
  if (a.mask & proto::kAttrDestQpn) {
    ta.dest_qpn = a.dest_qpn;
    mask |= transport::kAttrDestQpn;
  }
  if (a.mask & proto::kAttrRqPsn) {
    ta.rq_psn = a.rq_psn;
    mask |= transport::kAttrRqPsn;
  }
  if (a.mask & proto::kAttrSqPsn) {
    ta.sq_psn = a.sq_psn;
    mask |= transport::kAttrSqPsn;
  }
  if (a.mask & proto::kAttrTimeout) {
    ta.timeout = a.timeout;
    mask |= transport::kAttrTimeout;
  }
  if (a.mask & proto::kAttrRetryCnt) {
    ta.retry_cnt = a.retry_cnt;
    mask |= transport::kAttrRetryCnt;
  }
  if (a.mask & proto::kAttrRnrRetry) {
    ta.rnr_retry = a.rnr_retry;
    mask |= transport::kAttrRnrRetry;
  }
  if (a.mask & proto::kAttrMinRnrTimer) {
    ta.min_rnr_timer = a.min_rnr_timer;
    mask |= transport::kAttrMinRnrTimer;
  }
  if (a.mask & proto::kAttrMaxRdAtomic) {
    ta.max_rd_atomic = a.max_rd_atomic;
    mask |= transport::kAttrMaxRdAtomic;
  }
  if (a.mask & proto::kAttrMaxDestRdAtomic) {
    ta.max_dest_rd_atomic = a.max_dest_rd_atomic;
    mask |= transport::kAttrMaxDestRdAtomic;
  }
  // What a transition requires and the request left out (the READ depths, the
  // RNR timer: verbs users often leave them implicit) takes the QP's defaults
  // (ta's, from the policy).
  if ((mask & transport::kAttrState) && ta.state == transport::QpState::kRtr &&
      q->qp->state() == transport::QpState::kInit) {
    mask |= transport::kAttrMaxDestRdAtomic | transport::kAttrMinRnrTimer;
  }
  if ((mask & transport::kAttrState) && ta.state == transport::QpState::kRts &&
      q->qp->state() == transport::QpState::kRtr) {
    mask |= transport::kAttrMaxRdAtomic | transport::kAttrTimeout | transport::kAttrRetryCnt |
            transport::kAttrRnrRetry;
  }
  net::Ipv4Addr peer{};
  net::Ipv6Addr peer6{};
  if ((a.mask & proto::kAttrDgid) && v6_peer) {
    // RoCEv2 over IPv6: only with port.address6, and only a unicast peer
    // (::1 names this host, as ::ffff:127.x does for IPv4).
    if (!net_.config().addr6) return -EINVAL;
    peer6 = net::Ipv6Addr{a.dgid};
    if (peer6.is_loopback()) peer6 = *net_.config().addr6;
    if (peer6.is_unspecified() || peer6.is_multicast()) return -EINVAL;
  } else if ((a.mask & proto::kAttrDgid) && !gid_to_ipv4(a.dgid, &peer)) {
    return -EINVAL;
  }
  if (!v6_peer && peer.is_loopback()) peer = net_.config().addr;  // ::ffff:127.x: this host

  // Whatever the modify changes (PMTU, peer, a new connection), the fast
  // path learns the peer's frames again.
  reset_rx_expect(*q);
  if (q->qp->modify(ta, mask) != transport::Status::kOk) return -EINVAL;
  q->reported_state = q->qp->state();

  if (a.mask & proto::kAttrDgid) {
    const int rc = v6_peer ? set_peer6(*q, peer6, now_ns) : set_peer(*q, peer, now_ns);
    if (rc < 0) return rc;
  }
  if (a.mask & proto::kAttrDestQpn) {
    set_flow_ids(*q, a.dest_qpn);
  }
  return 0;
}

void Engine::set_flow_ids(QpCtx& q, uint32_t remote_qpn) {
  q.addr.src_port = wire::udp_sport_for_qp(q.qpn, remote_qpn);
  q.addr.flow_label = wire::flow_label_for_qp(q.qpn, remote_qpn);
}

int Engine::set_peer(QpCtx& q, net::Ipv4Addr peer, uint64_t now_ns) {
  // Our own address is a valid peer (loopback between local clients).
  auto hop = peer == net_.config().addr ? std::optional(peer) : net_.next_hop(peer);
  if (!hop) return -ENETUNREACH;
  reset_rx_expect(q);  // it names the old peer's address
  q.peer_set = true;
  q.peer_local = peer == net_.config().addr;
  q.peer_resolved = false;
  q.route_kept = false;
  q.peer_ip = peer;
  q.next_hop = *hop;
  q.net_generation = net_.generation();
  q.next_resolve_ns = now_ns;
  q.peer_v6 = false;
  q.addr.ipv6 = false;
  q.addr.ttl = net_.config().ttl;
  q.addr.dst_ip = peer.value;
  return 0;
}

bool Engine::from_peer(const QpCtx& q, const net::UdpDatagram& udp) {
  return udp.ipv6 ? q.peer_v6 && udp.src_ip6 == q.peer_ip6 : !q.peer_v6 && udp.src_ip == q.peer_ip;
}

int Engine::set_peer6(QpCtx& q, const net::Ipv6Addr& peer, uint64_t now_ns) {
  const net::Ipv6Addr& self = *net_.config().addr6;  // checked by the caller
  auto hop = peer == self ? std::optional(peer) : net_.next_hop6(peer);
  if (!hop) return -ENETUNREACH;
  reset_rx_expect(q);
  q.peer_set = true;
  q.peer_local = peer == self;
  q.peer_resolved = false;
  q.route_kept = false;
  q.peer_v6 = true;
  q.peer_ip6 = peer;
  q.next_hop6 = *hop;
  q.net_generation = net_.generation();
  q.next_resolve_ns = now_ns;
  q.addr.ipv6 = true;
  q.addr.ttl = net_.hop_limit6();  // an RA's Cur Hop Limit, else the TTL
  q.addr.src_ip6 = self.bytes;
  q.addr.dst_ip6 = peer.bytes;
  return 0;
}

uint32_t Engine::remove_qp(uint32_t qpn, bool owner_gone) {
  auto it = qps_.find(qpn);
  if (it == qps_.end()) return 0;
  QpCtx* q = it->second.get();
  const uint64_t dropped_before = counters_.cqe_dropped;
  send_final_ack(*q, tsc_now_ns());
  if (q->cm_conn != 0) {
    // A QP destroyed with its connection up: the peer gets a DREQ.
    cm_.disconnect(tsc_now_ns(), q->client->id, q->cm_conn);
    cm_forget_conn(*q);
  }
  transport::QpAttr err;
  err.state = transport::QpState::kErr;
  q->qp->modify(err, transport::kAttrState);
  if (owner_gone && q->peer_local) {
    // Its process is gone: the QP of this host connected to it can never
    // finish a WR. Fail it now (flush) rather than after the retries; the
    // state change reaches the control thread through run_timers.
    QpCtx* peer = find_qp(q->qp->attr().dest_qpn);
    if (peer != nullptr && peer != q && peer->peer_local && peer->qp->attr().dest_qpn == qpn) {
      peer->qp->modify(err, transport::kAttrState);
      ++counters_.peers_failed;
    }
  }
  // WRs the client posted that were not taken yet (commands go first in a loop: a removal,
  // as conduitd's stop posts for every QP, overtakes the client's last posts). Posted to
  // the QP in ERROR they complete flushed, as verbs' WRs do, and none is sent. One pass,
  // bounded by the QP's CQ room: a client that keeps posting cannot hold the engine here.
  if (!q->client->broken) {
    drain_sends(*q);
    drain_recvs(*q);
  }
  // Flushed WRs reach the CQ if it is still there and has room; those a full CQ cannot take
  // are lost, and counted in the CQ's wakeup line for its client to see (a CQ overrun).
  while (deliver_completions(*q)) {
  }
  push_leftover_completions(*q);
  const auto lost = static_cast<uint32_t>(counters_.cqe_dropped - dropped_before);
  q->client->flush_lost += lost;
  add_qp_counters(retired_qp_counters_, q->qp->counters());
  pacer_.remove_flow(q->flow);
  flow_qp_[q->flow] = nullptr;
  if (q->queued_frames > 0) --qps_with_queued_frames_;
  restamp_frames_ -= q->restamp_frames;
  for (size_t tag = 0; tag < pending_frames_.size(); ++tag) {
    rte_mbuf* m = pending_frames_[tag];
    if (m != nullptr && m->hash.usr == q->flow) {
      rte_pktmbuf_free(m);
      pending_frames_[tag] = nullptr;
      pending_answer_[tag] = 0;
      free_tags_.push_back(static_cast<uint32_t>(tag));
    }
  }
  q->client->mem.remove_mr(q->inline_lkey);
  auto& qpns = q->client->qpns;
  qpns.erase(std::remove(qpns.begin(), qpns.end(), qpn), qpns.end());
  qp_list_.erase(std::remove(qp_list_.begin(), qp_list_.end(), q), qp_list_.end());
  qps_.erase(it);
  return lost;
}

void Engine::post_qp_state(QpCtx& q, uint64_t now_ns) {
  control::EngineEvent ev;
  ev.kind = control::EngineEventKind::kQpState;
  ev.qpn = q.qpn;
  ev.state = to_proto(q.qp->state());
  const transport::Qp& qp = *q.qp;
  if (qp.state() == transport::QpState::kErr) {
    if (const char* cause = qp_error_cause(qp.error())) {
      control::QpErrorInfo& e = ev.error;
      const transport::QpCounters& c = qp.counters();
      e.cause = cause;
      e.requester = qp.error().side == transport::QpError::Side::kRequester;
      e.psn = qp.error().psn;
      e.next_psn = qp.send_max_psn();
      e.peer_qpn = qp.attr().dest_qpn;
      e.retry_cnt = qp.attr().retry_cnt;
      e.ack_timeout_ns = qp.retransmit_timeout();
      if (qp.last_progress_ns() != 0 && now_ns >= qp.last_progress_ns()) {
        e.since_progress_ns = now_ns - qp.last_progress_ns();
      }
      e.timeouts = c.timeouts;
      e.naks_received = c.naks_received;
      e.rnr_naks_received = c.rnr_naks_received;
      ev.retransmits = c.tx_retransmits;
      ev.tx_bytes = q.tx_bytes;
      ev.rx_bytes = q.rx_bytes;
    }
  }
  post_event(ev);
}

void Engine::post_qp_stats(uint64_t cookie, uint32_t qpn) {
  control::EngineEvent ev;
  ev.cookie = cookie;
  ev.kind = control::EngineEventKind::kQpStats;
  ev.qpn = qpn;
  if (QpCtx* q = find_qp(qpn)) {
    ev.state = to_proto(q->qp->state());
    ev.rate_bps = q->rc->rate_bps();
    if (const auto* d = dynamic_cast<const cc::DcqcnRp*>(q->rc.get())) {
      ev.alpha_ppm = static_cast<uint32_t>(d->alpha(tsc_now_ns()) * 1e6);
    }
    ev.cnps_rx = q->cnps_rx;
    ev.cnps_tx = q->cnps_tx;
    ev.retransmits = q->qp->counters().tx_retransmits;
    ev.tx_bytes = q->tx_bytes;
    ev.rx_bytes = q->rx_bytes;
  } else {
    ev.status = -ENOENT;
  }
  post_event(ev);
}

void Engine::post_event(const control::EngineEvent& ev) {
  if (!event_backlog_.empty() || !channel_.post_event(ev)) event_backlog_.push_back(ev);
}

void Engine::snapshot(const control::EngineCommand& cmd) {
  for (const QpCtx* q : qp_list_) post_qp_stats(cmd.cookie, q->qpn);
  // Written before the ack is posted; the event ring's release publishes it.
  if (cmd.snapshot != nullptr) fill_snapshot(*cmd.snapshot);
}

void Engine::fill_snapshot(control::CounterSnapshot& out) const {
  out.count = 0;
  const EngineCounters& c = counters_;
  out.add("engine.loops", c.loops);
  out.add("engine.sleeps", c.sleeps);
  out.add("engine.paced_sleeps", c.paced_sleeps);
  out.add("engine.paced_sleeps_late", c.paced_sleeps_late);
  out.add("engine.wakeup_yields", c.wakeup_yields);
  out.add("engine.commands", c.commands);
  out.add("engine.policy_updates", c.policy_updates);
  out.add("engine.stalls", c.stalls);
  out.add("engine.stalled_us", c.stalled_ns / 1000);
  out.add("engine.stall_max_us", c.stall_max_ns / 1000);
  out.add("engine.qps", qp_list_.size());
  out.add("engine.rx_frames", c.rx_frames);
  out.add("engine.rx_roce", c.rx_roce);
  out.add("engine.rx_roce_fast", c.rx_roce_fast);
  out.add("engine.rx_cnps", c.rx_cnps);
  out.add("engine.rx_ce_marked", c.rx_ce_marked);
  out.add("engine.rx_multi_segment", c.rx_multi_segment);
  out.add("engine.rx_unknown_qp", c.rx_unknown_qp);
  uint64_t wire_drops = 0;
  for (size_t i = 0; i < c.rx_wire_drops.size(); ++i) {
    out.add(kWireDropNames[i].c_str(), c.rx_wire_drops[i]);
    wire_drops += c.rx_wire_drops[i];
  }
  out.add("engine.rx_wire_drops", wire_drops);
  out.add("engine.tx_frames", c.tx_frames);
  out.add("engine.loopback_frames", c.loopback_frames);
  out.add("engine.tx_cnps", c.tx_cnps);
  out.add("engine.tx_final_acks", c.tx_final_acks);
  out.add("engine.tx_acks_unpaced", c.tx_acks_unpaced);
  out.add("engine.tx_no_mbuf", c.tx_no_mbuf);
  out.add("engine.tx_build_errors", c.tx_build_errors);
  out.add("engine.tx_ring_full_drops", c.tx_ring_full_drops);
  out.add("engine.tx_backpressure", c.tx_backpressure);
  out.add("engine.wr_rejected", c.wr_rejected);
  out.add("engine.clients_broken", c.clients_broken);
  out.add("engine.peers_failed", c.peers_failed);
  out.add("engine.peers_reresolved", c.peers_reresolved);
  out.add("engine.peers_reresolve_kept", c.peers_reresolve_kept);
  out.add("engine.tx_restamped", c.tx_restamped);
  out.add("engine.cqe_dropped", c.cqe_dropped);

  const cm::CmCounters& k = cm_.counters();
  out.add("cm.connections", cm_.connection_count());
  out.add("cm.rx_datagrams", c.cm_rx_datagrams);
  out.add("cm.tx_datagrams", c.cm_tx_datagrams);
  out.add("cm.local_datagrams", c.cm_local_datagrams);
  out.add("cm.tx_no_route", c.cm_tx_no_route);
  out.add("cm.events_no_qp", c.cm_events_no_qp);
  out.add("cm.gsi_rx", c.cm_gsi_rx);
  out.add("cm.gsi_rx_dropped", c.cm_gsi_rx_dropped);
  out.add("cm.gsi_tx", c.cm_gsi_tx);
  out.add("cm.rx_unsupported", k.rx_unsupported);
  out.add("cm.mra_received", k.mra_received);
  out.add("cm.mra_sent", k.mra_sent);
  out.add("cm.rx_messages", k.rx_messages);
  out.add("cm.rx_malformed", k.rx_malformed);
  out.add("cm.rx_unknown_conn", k.rx_unknown_conn);
  out.add("cm.rx_unexpected", k.rx_unexpected);
  out.add("cm.tx_messages", k.tx_messages);
  out.add("cm.retransmits", k.retransmits);
  out.add("cm.timeouts", k.timeouts);
  out.add("cm.established", k.established);
  out.add("cm.rejects_sent", k.rejected_sent);
  out.add("cm.rejects_received", k.rejected_received);
  out.add("cm.requests_over_cap", k.requests_over_cap);
  out.add("cm.sidr_unsupported", k.sidr_unsupported);
  out.add("cm.lap_unsupported", k.lap_unsupported);
  out.add("cm.stale_requests", k.stale_requests);
  out.add("cm.stale_replies", k.stale_replies);
  out.add("cm.dreq_qpn_mismatch", k.dreq_qpn_mismatch);
  out.add("cm.dreq_dropped", k.dreq_dropped);
  out.add("cm.dreq_owner_gone", k.dreq_owner_gone);
  out.add("cm.mad_get_unsupported", k.mad_get_unsupported);
  out.add("cm.requests_refused", k.requests_refused);
  out.add("cm.replies_suppressed", k.replies_suppressed);

  // The device's own view (rx_missed: its RX ring overflowed before we polled).
  const dpdk::PortStats ps = port_.stats();
  out.add("port.rx_packets", ps.rx_packets);
  out.add("port.tx_packets", ps.tx_packets);
  out.add("port.rx_bytes", ps.rx_bytes);
  out.add("port.tx_bytes", ps.tx_bytes);
  out.add("port.rx_missed", ps.rx_missed);
  out.add("port.rx_errors", ps.rx_errors);
  out.add("port.tx_errors", ps.tx_errors);
  out.add("port.rx_no_mbuf", ps.rx_no_mbuf);
  out.add("port.mbufs_free", ps.mbufs_free);
  out.add("port.mbufs_in_use", ps.mbufs_in_use);
  out.add("port.xsk_rx_dropped", ps.xsk_rx_dropped);
  out.add("port.xsk_rx_invalid_descs", ps.xsk_rx_invalid_descs);
  out.add("port.xsk_tx_invalid_descs", ps.xsk_tx_invalid_descs);
  out.add("port.xsk_rx_ring_full", ps.xsk_rx_ring_full);
  out.add("port.xsk_rx_fill_ring_empty", ps.xsk_rx_fill_ring_empty);
  out.add("port.xsk_tx_ring_empty", ps.xsk_tx_ring_empty);

  const net::NetCounters& n = net_.counters();
  out.add("net.rx_frames", n.rx_frames);
  out.add("net.rx_udp_delivered", n.rx_udp_delivered);
  out.add("net.rx_arp_requests", n.rx_arp_requests);
  out.add("net.rx_arp_replies", n.rx_arp_replies);
  out.add("net.rx_icmp_echo_requests", n.rx_icmp_echo_requests);
  out.add("net.tx_arp_replies", n.tx_arp_replies);
  out.add("net.tx_icmp_echo_replies", n.tx_icmp_echo_replies);
  out.add("net.tx_arp_requests", n.tx_arp_requests);
  out.add("net.no_route", n.no_route);
  out.add("net.rx_ns", n.rx_ns);
  out.add("net.rx_na", n.rx_na);
  out.add("net.tx_na", n.tx_na);
  out.add("net.rx_ra", n.rx_ra);
  out.add("net.ra_prefixes", n.ra_prefixes);
  out.add("net.ra_options_ignored", n.ra_options_ignored);
  out.add("net.ra_timers_set", n.ra_timers_set);
  out.add("net.ra_timers_clamped", n.ra_timers_clamped);
  out.add("net.ra_hop_limit_set", n.ra_hop_limit_set);
  out.add("net.hop_limit6", net_.hop_limit6());
  out.add("net.link_mtu6", net_.link_mtu6());
  out.add("net.tx_rs", n.tx_rs);
  out.add("net.tx_ns", n.tx_ns);
  out.add("net.rx_icmp6_echo_requests", n.rx_icmp6_echo_requests);
  out.add("net.tx_icmp6_echo_replies", n.tx_icmp6_echo_replies);
  out.add("net.rx_udp6_delivered", n.rx_udp6_delivered);
  out.add("net.rx_priority_tagged", n.rx_priority_tagged);
  // Both neighbour tables (ARP and NDP): entries whose lifetime ran out unused, kept STALE;
  // entries replaced for room (of which kept STALE ones); entries probed and not confirmed.
  const net::NeighbourCounters& n4 = net_.neighbours().counters();
  const net::NeighbourCounters& n6 = net_.neighbours6().counters();
  out.add("net.neigh_went_stale", n4.went_stale + n6.went_stale);
  out.add("net.neigh_evicted", n4.evicted + n6.evicted);
  out.add("net.neigh_stale_evicted", n4.stale_evicted + n6.stale_evicted);
  out.add("net.neigh_aged_out", n4.aged_out + n6.aged_out);
  for (size_t i = 0; i < n.rx_drops.size(); ++i) {
    out.add(kNetDropNames[i].c_str(), n.rx_drops[i]);
  }
  out.add("net.rx_drops", n.total_drops());

  // Transport counters of every QP since start: removed QPs' plus the live ones'
  // (per-QP figures: conduitctl qps).
  transport::QpCounters t = retired_qp_counters_;
  for (const QpCtx* q : qp_list_) add_qp_counters(t, q->qp->counters());
  out.add("engine.rx_wrong_peer", c.rx_wrong_peer);
  out.add("engine.wakeup_fds_closed", c.wakeup_fds_closed);
  out.add("engine.kernel_frames", c.kernel_frames);
  out.add("engine.kernel_frames_ignored", c.kernel_frames_ignored);
  out.add("transport.tx_packets", t.tx_packets);
  out.add("transport.tx_retransmits", t.tx_retransmits);
  out.add("transport.rx_packets", t.rx_packets);
  out.add("transport.rx_duplicates", t.rx_duplicates);
  out.add("transport.rx_out_of_sequence", t.rx_out_of_sequence);
  out.add("transport.drop_wrong_qp", t.drop_wrong_qp);
  out.add("transport.drop_state", t.drop_state);
  out.add("transport.drop_bad_opcode", t.drop_bad_opcode);
  out.add("transport.drop_bad_length", t.drop_bad_length);
  out.add("transport.drop_stale_response", t.drop_stale_response);
  out.add("transport.drop_response_queue_full", t.drop_response_queue_full);
  out.add("transport.naks_sent", t.naks_sent);
  out.add("transport.rnr_naks_sent", t.rnr_naks_sent);
  out.add("transport.naks_received", t.naks_received);
  out.add("transport.rnr_naks_received", t.rnr_naks_received);
  out.add("transport.timeouts", t.timeouts);
  out.add("transport.retries", t.retries);
}

// ---- timers ------------------------------------------------------------------

// The engine's own absence is no evidence against a peer. While its thread
// was descheduled (or a sleep ran past its end) nothing was received, nothing
// left the pacer, no ACK could be handled: on a machine with fewer cores than
// pollers such gaps reach 150 ms (measured: two ACK timeouts at timeout 14),
// and every QP's timer expired at once and counted a retry against peers that
// had done nothing wrong. The part of the gap beyond kStallNs moves the ACK
// timers out by as much; a dead peer is still found, the timers still run at
// least kStallNs per loop.
void Engine::defer_timers_after_stall(uint64_t now_ns) {
  const uint64_t since = std::max(last_poll_ns_, sleep_until_ns_);
  last_poll_ns_ = now_ns;
  if (since == 0 || now_ns <= since + kStallNs) return;
  const uint64_t stall = now_ns - since - kStallNs;
  ++counters_.stalls;
  counters_.stalled_ns += stall;
  counters_.stall_max_ns = std::max(counters_.stall_max_ns, stall);
  for (QpCtx* q : qp_list_) q->qp->defer_timers(stall);
}

bool Engine::run_timers(uint64_t now_ns) {
  bool work = false;
  net_.poll_timers(now_ns);
  auto& actions = action_scratch_;
  for (size_t n; (n = net_.take_actions(actions)) > 0;) {
    for (size_t i = 0; i < n; ++i) {
      // Queued frames are the connection manager's datagrams (cm_send).
      if (actions[i].kind == net::NetAction::Kind::kTransmitQueued) {
        auto* m = reinterpret_cast<rte_mbuf*>(actions[i].frame);
        std::memcpy(rte_pktmbuf_mtod(m, uint8_t*), actions[i].dst_mac.bytes.data(), 6);
        transmit_now(m);
        work = true;
        continue;
      }
      if (actions[i].kind == net::NetAction::Kind::kDropQueued) {
        rte_pktmbuf_free(reinterpret_cast<rte_mbuf*>(actions[i].frame));
        ++counters_.cm_tx_no_route;
        continue;
      }
      if (actions[i].kind != net::NetAction::Kind::kTransmit) continue;
      rte_mbuf* m = port_.alloc_mbuf();
      if (m == nullptr) {
        ++counters_.tx_no_mbuf;
        continue;
      }
      std::memcpy(rte_pktmbuf_mtod(m, uint8_t*), actions[i].bytes.data(), actions[i].len);
      m->data_len = m->pkt_len = actions[i].len;
      transmit_now(m);
      work = true;
    }
  }
  work |= cm_poll(now_ns);
  for (QpCtx* q : qp_list_) {
    if (now_ns >= q->qp->next_deadline_ns()) {
      q->qp->on_timer(now_ns);
      work = true;
    }
    if (now_ns >= q->rc->next_deadline_ns()) {
      pacer_.set_rate(q->flow, q->rc->on_timer(now_ns), now_ns);
    }
    if (q->qp->state() != q->reported_state) {
      q->reported_state = q->qp->state();
      post_qp_state(*q, now_ns);
    }
  }
  return work;
}

// ---- receive -----------------------------------------------------------------

bool Engine::rx(uint64_t now_ns) {
  rte_mbuf* bufs[kRxBurst];
  const uint16_t n = port_.rx_burst(0, bufs, kRxBurst);
  if (n == 0) return false;
  ++counters_.rx_bursts;
  port_wake_unanswered_ = false;
  std::array<uint8_t, 2048> reply;
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = bufs[i];
    ++counters_.rx_frames;
    if (m->nb_segs != 1) {
      ++counters_.rx_multi_segment;
      continue;  // freed after the burst
    }
    std::span<const uint8_t> frame(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len);
    if (rx_roce_fast(frame, now_ns)) continue;  // joins the run, as rx_roce() would
    const net::RxResult r = net_.on_rx_frame(frame, now_ns, reply);
    if (r.verdict == net::RxVerdict::kDeliverUdp && r.udp.dst_port == config_.roce_udp_port) {
      rx_roce(r.udp, frame, now_ns);  // joins the run; its mbuf is freed after the burst
      continue;
    }
    // Anything else sees the RoCE packets before it delivered, in order.
    deliver_rx_run(now_ns);
    if (r.verdict == net::RxVerdict::kDeliverUdp && r.udp.dst_port == config_.cm_udp_port) {
      cm_rx(r.udp, frame, now_ns);
    } else if (r.verdict == net::RxVerdict::kReply) {
      transmit_reply(std::span<const uint8_t>(reply.data(), r.reply_len));
    }
  }
  deliver_rx_run(now_ns);
  // The views of the delivered packets pointed into these.
  for (uint16_t i = 0; i < n; ++i) rte_pktmbuf_free(bufs[i]);
  return n > 0;
}

void Engine::transmit_reply(std::span<const uint8_t> reply) {
  if (rte_mbuf* out = port_.alloc_mbuf()) {
    std::memcpy(rte_pktmbuf_mtod(out, uint8_t*), reply.data(), reply.size());
    out->data_len = out->pkt_len = static_cast<uint32_t>(reply.size());
    transmit_now(out);
  } else {
    ++counters_.tx_no_mbuf;
  }
}

void Engine::rx_kernel_frame(std::span<const uint8_t> frame, uint64_t now_ns) {
  ++counters_.kernel_frames;
  std::array<uint8_t, 2048> reply;
  const net::RxResult r = net_.on_rx_frame(frame, now_ns, reply);
  if (r.verdict == net::RxVerdict::kReply) {
    transmit_reply(std::span<const uint8_t>(reply.data(), r.reply_len));
  } else if (r.verdict == net::RxVerdict::kDeliverUdp) {
    // RoCE and the connection managers take their frames from the port only.
    ++counters_.kernel_frames_ignored;
  }
}

// The packets for one QP collected by rx_roce(), in one Qp::on_packets call.
void Engine::deliver_rx_run(uint64_t now_ns) {
  if (rx_run_n_ == 0) return;
  transport::RxResult results[kRxBurst];
  rx_run_qp_->qp->on_packets(now_ns, std::span<const wire::RoceView>(rx_run_.data(), rx_run_n_),
                             results);
  // A WRITE's last packet put data in client memory that a client may be polling for
  // (there is no completion on this side to wake it): as good as a completion for run().
  for (uint32_t i = 0; i < rx_run_n_ && !client_progress_; ++i) {
    constexpr uint32_t kWriteLast = wire::kOpRequest | wire::kOpWrite | wire::kOpLast;
    client_progress_ = results[i] == transport::RxResult::kAccepted &&
                       (wire::opcode_info(rx_run_[i].opcode()).flags & kWriteLast) == kWriteLast;
  }
  rx_run_n_ = 0;
  rx_run_qp_ = nullptr;
}

void Engine::rx_roce(const net::UdpDatagram& udp, std::span<const uint8_t> frame, uint64_t now_ns,
                     const QpCtx* local_sender) {
  ++counters_.rx_roce;
  const auto ip_udp = frame.subspan(udp.ip_offset, udp.ipv6 ? net::NetStack::kIpv6UdpHeaderBytes
                                                            : net::NetStack::kIpv4UdpHeaderBytes);
  const auto payload = frame.subspan(udp.payload_offset, udp.payload_len);
  // The QP's frames only: peek at the BTH's DestQP.
  QpCtx* q = nullptr;
  if (payload.size() >= wire::kBthBytes) {
    const uint32_t dest_qp = uint32_t{payload[5]} << 16 | uint32_t{payload[6]} << 8 | payload[7];
    if (dest_qp == wire::kGsiQpn && local_sender == nullptr) {
      gsi_rx(udp, frame, now_ns);  // a verbs peer's connection manager
      return;
    }
    q = find_qp(dest_qp);
  }
  if (q == nullptr) {
    ++counters_.rx_unknown_qp;
    return;
  }
  const wire::ParseOptions opt = rx_parse_options();
  wire::RoceView pf;
  const wire::DropReason why = wire::parse_roce(ip_udp, payload, opt, pf);
  if (why != wire::DropReason::kNone) {
    ++counters_.rx_wire_drops[static_cast<size_t>(why)];
    // Counted, and still the QP's to answer: a NAK Invalid Request at its expected PSN.
    if (why != wire::DropReason::kOpcodeUnsupported) return;
  }
  // Only the connected peer may speak to a QP. Between QPs of this host the
  // address says nothing (all share it), but the engine knows the sender: a
  // client's QP connected to someone else's QPN cannot inject into it.
  if (!q->peer_set || !from_peer(*q, udp) ||
      (local_sender != nullptr &&
       (!q->peer_local || q->qp->attr().dest_qpn != local_sender->qpn))) {
    ++q->rx_wrong_peer;
    ++counters_.rx_wrong_peer;
    return;
  }
  // From the port and from the peer: the fast path may take its next frames,
  // learned from the first such frame and again when they keep missing it
  // (before rx_roce_accepted, which may change the QP's connection).
  if (local_sender == nullptr && !q->peer_local &&
      ++q->rx_expect_misses >= QpCtx::kRxExpectRelearnMisses) {
    q->rx_expect_misses = 0;
    q->rx_expect = net_.make_roce_expect(frame, udp, opt);
  }
  rx_roce_accepted(*q, pf, udp.tos, now_ns);
}

bool Engine::rx_roce_fast(std::span<const uint8_t> frame, uint64_t now_ns) {
  // The DestQP where an untagged (tagged) IPv4 frame without options, or
  // IPv6 frame without extension headers, has it. Tagged: our VLAN's frames, or on a port
  // without one a peer's priority-tagged frames (VID 0); the expectation checks the VID.
  if (frame.size() < wire::kEthHeaderBytes + wire::kVlanTagBytes) return false;
  const size_t l3 = frame[12] == 0x81 && frame[13] == 0x00
                        ? wire::kEthHeaderBytes + wire::kVlanTagBytes
                        : wire::kEthHeaderBytes;
  const bool ipv6 = frame[l3 - 2] == 0x86 && frame[l3 - 1] == 0xDD;
  const size_t qpn_at =
      l3 + 5 + (ipv6 ? net::NetStack::kIpv6UdpHeaderBytes : net::NetStack::kIpv4UdpHeaderBytes);
  if (frame.size() < qpn_at + 3) return false;
  const uint8_t* d = frame.data() + qpn_at;
  QpCtx* q = find_qp(uint32_t{d[0]} << 16 | uint32_t{d[1]} << 8 | d[2]);
  if (q == nullptr || !q->rx_expect.usable) return false;
  net::UdpDatagram udp;
  wire::RoceView pf;
  wire::DropReason why = wire::DropReason::kNone;
  if (!net_.on_rx_expected(frame, q->rx_expect, udp, pf, why)) return false;
  q->rx_expect_misses = 0;
  // rx_roce()'s steps in its order. The expectation names q's QPN and its
  // peer's address (reset when the peer changes); the peer check is repeated
  // anyway, so that no stale expectation can let another sender in.
  ++counters_.rx_roce;
  ++counters_.rx_roce_fast;
  if (why != wire::DropReason::kNone) {
    ++counters_.rx_wire_drops[static_cast<size_t>(why)];
    if (why != wire::DropReason::kOpcodeUnsupported) return true;  // else the QP NAKs it
  }
  if (!q->peer_set || !from_peer(*q, udp)) {
    ++q->rx_wrong_peer;
    ++counters_.rx_wrong_peer;
    return true;
  }
  rx_roce_accepted(*q, pf, udp.tos, now_ns);
  return true;
}

void Engine::rx_roce_accepted(QpCtx& q, const wire::RoceView& pf, uint8_t tos, uint64_t now_ns) {
  if (pf.opcode() == static_cast<uint8_t>(wire::Opcode::kCnp)) {
    ++counters_.rx_cnps;
    ++q.cnps_rx;
    pacer_.set_rate(q.flow, q.rc->on_cnp(now_ns), now_ns);
    return;
  }
  // Consecutive packets for one QP are delivered together (deliver_rx_run).
  if (rx_run_qp_ != &q) deliver_rx_run(now_ns);
  rx_run_qp_ = &q;
  rx_run_[rx_run_n_++] = pf;
  if (rx_run_n_ == rx_run_.size()) deliver_rx_run(now_ns);
  q.rx_bytes += pf.payload.size();
  if (q.cm_wait_traffic) {
    // The peer sends, so it has our REP even if its RTU was lost (the QP
    // has seen the packet first).
    deliver_rx_run(now_ns);
    q.cm_wait_traffic = false;
    cm_.on_qp_traffic(q.cm_conn);
  }
  if ((tos & 3) == wire::kEcnCe) {
    ++counters_.rx_ce_marked;
    if (q.np.on_ce_marked(now_ns) && !send_cnp(q, now_ns)) q.np.cnp_not_sent();
  }
}

wire::ParseOptions Engine::rx_parse_options() const {
  wire::ParseOptions opt;
  opt.udp_dst_port = config_.roce_udp_port;
  // No PMTU checks here: the QP makes them, so that a request that breaks them (a peer with
  // another PMTU) is answered with NAK Invalid Request instead of being lost until the peer
  // gives up retrying. The payload is bounded by the frame either way.
  opt.pmtu_bytes = 0;
  return opt;
}

void Engine::reset_rx_expect(QpCtx& q) {
  q.rx_expect = wire::RxExpect{};
  q.rx_expect_misses = QpCtx::kRxExpectRelearnMisses - 1;  // learn from the next frame
}

// ---- client rings --------------------------------------------------------------

bool Engine::drain_client_rings(QpCtx& q) {
  Client& c = *q.client;
  if (c.broken) return false;
  // Receives first, so a SEND that arrives right after finds them.
  bool work = drain_recvs(q);
  work |= drain_sends(q);
  if (q.sq.broken() || q.rq.broken()) cut_off(c);
  return work;
}

// The client's receive entries, a burst at a time, each run of valid ones
// posted as one chain (Qp::post_recv of a span); an invalid entry completes
// with its error in its place in the order.
bool Engine::drain_recvs(QpCtx& q) {
  Client& c = *q.client;
  auto lookup = [&c](uint32_t lkey) { return c.mem.client_bounds(lkey); };
  bool work = false;
  for (;;) {
    if (q.pending_recv_at == q.pending_recv_n) {
      q.pending_recv_at = 0;
      // Copied out of shared memory before anything reads them.
      q.pending_recv_n = q.rq.dequeue_burst(q.pending_recvs.data(), kPostChain);
      if (q.pending_recv_n == 0) break;
      work = true;
    }
    transport::RecvWr wrs[kPostChain];
    uint32_t k = 0;
    conduit_shm_wr_error err = CONDUIT_SHM_WR_OK;
    while (q.pending_recv_at + k < q.pending_recv_n) {
      const conduit_shm_recv_wr& raw = q.pending_recvs[q.pending_recv_at + k];
      shm::ValidRecvWr v;
      err = shm::validate_recv_wr(raw, kWrLimits, c.arena(), lookup, &v);
      if (err != CONDUIT_SHM_WR_OK) break;
      transport::RecvWr& wr = wrs[k++];
      wr = transport::RecvWr{};
      wr.wr_id = v.wr_id;
      wr.num_sge = static_cast<uint8_t>(v.num_sge);
      for (uint32_t i = 0; i < v.num_sge; ++i) {
        const ClientMemory::Mr* mr = c.mem.find_lkey(raw.sg_list[i].lkey);
        wr.sge[i] = {mr->iova + raw.sg_list[i].offset, raw.sg_list[i].length, raw.sg_list[i].lkey};
      }
    }
    if (k > 0) {
      transport::Status st;
      const size_t posted = q.qp->post_recv(std::span<const transport::RecvWr>(wrs, k), st);
      q.pending_recv_at += static_cast<uint32_t>(posted);
      if (posted == k) continue;
      // A full queue, or a QP the control thread has not yet moved to a state
      // that takes receives (its modify command may still be in the ring behind
      // the client's post): keep the entries and retry next loop.
      if (st == transport::Status::kQueueFull || st == transport::Status::kInvalidState) break;
      reject_recv(q, wrs[posted].wr_id,
                  st == transport::Status::kInvalidSge ? CONDUIT_SHM_WC_LOC_PROT_ERR
                                                       : CONDUIT_SHM_WC_LOC_QP_OP_ERR,
                  0);
      ++q.pending_recv_at;
      continue;
    }
    // The entry at pending_recv_at is invalid.
    reject_recv(q, q.pending_recvs[q.pending_recv_at].wr_id, shm::wc_status_for(err), err);
    ++q.pending_recv_at;
  }
  return work;
}

void Engine::reject_recv(QpCtx& q, uint64_t wr_id, uint8_t status, uint32_t vendor_err) {
  ++counters_.wr_rejected;
  conduit_shm_cqe cqe{};
  cqe.wr_id = wr_id;
  cqe.status = status;
  cqe.opcode = CONDUIT_SHM_WC_RECV;
  cqe.qp_num = q.qpn;
  cqe.vendor_err = vendor_err;
  push_cqe(*q.client, q.recv_cq, cqe);
}

// The client's send entries, as drain_recvs() takes receives. A chain is at
// most as long as the QP's send queue has room for: an inline entry's bytes
// go to the inline slot its WQE will own, and the slots past that room may
// still hold the bytes of WRs in flight.
bool Engine::drain_sends(QpCtx& q) {
  bool work = false;
  for (;;) {
    if (q.pending_send_at == q.pending_send_n) {
      q.pending_send_at = 0;
      // Copied out of shared memory before anything reads them.
      q.pending_send_n = q.sq.dequeue_burst(q.pending_sends.data(), kPostChain);
      if (q.pending_send_n == 0) break;
      work = true;
    }
    transport::SendWr wrs[kPostChain];
    bool inline_used[kPostChain];
    const size_t room = q.qp->sq_free();
    uint32_t k = 0;
    uint64_t inline_index = q.inline_next;
    conduit_shm_wr_error err = CONDUIT_SHM_WR_OK;
    while (q.pending_send_at + k < q.pending_send_n && k < room) {
      err = convert_send(q, q.pending_sends[q.pending_send_at + k], inline_index, wrs[k],
                         &inline_used[k]);
      if (err != CONDUIT_SHM_WR_OK) break;
      inline_index += inline_used[k];
      ++k;
    }
    if (k > 0) {
      transport::Status st;
      const size_t posted = q.qp->post_send(std::span<const transport::SendWr>(wrs, k), st);
      for (size_t i = 0; i < posted; ++i) q.inline_next += inline_used[i];
      q.pending_send_at += static_cast<uint32_t>(posted);
      if (posted == k) continue;
      // Full, or not yet in RTS (the modify may still be on its way): the
      // entries stay pending and are retried next loop, in order.
      if (st == transport::Status::kQueueFull || st == transport::Status::kInvalidState) break;
      reject_send(q, q.pending_sends[q.pending_send_at],
                  st == transport::Status::kInvalidSge ? CONDUIT_SHM_WC_LOC_PROT_ERR
                                                       : CONDUIT_SHM_WC_LOC_QP_OP_ERR,
                  0);
      ++q.pending_send_at;
      continue;
    }
    if (err == CONDUIT_SHM_WR_OK) break;  // no room: the QP's send queue is full
    reject_send(q, q.pending_sends[q.pending_send_at], shm::wc_status_for(err), err);
    ++q.pending_send_at;
  }
  return work;
}

// Impossible ring indices: the client is broken or hostile. Stop reading its
// rings, fail its QPs, and tell the control thread, which disconnects it.
void Engine::cut_off(Client& c) {
  if (c.broken) return;
  c.broken = true;
  ++counters_.clients_broken;
  for (uint32_t qpn : c.qpns) {
    if (QpCtx* other = find_qp(qpn)) {
      transport::QpAttr err;
      err.state = transport::QpState::kErr;
      other->qp->modify(err, transport::kAttrState);
    }
  }
  control::EngineEvent ev;
  ev.kind = control::EngineEventKind::kClientBroken;
  ev.client_id = c.id;
  post_event(ev);
}

void Engine::reject_send(QpCtx& q, const conduit_shm_send_wr& raw, uint8_t status,
                         uint32_t vendor_err) {
  ++counters_.wr_rejected;
  conduit_shm_cqe cqe{};
  cqe.wr_id = raw.wr_id;
  cqe.status = status;
  switch (raw.opcode) {
    case CONDUIT_SHM_WR_RDMA_READ:
      cqe.opcode = CONDUIT_SHM_WC_RDMA_READ;
      break;
    case CONDUIT_SHM_WR_RDMA_WRITE:
    case CONDUIT_SHM_WR_RDMA_WRITE_WITH_IMM:
      cqe.opcode = CONDUIT_SHM_WC_RDMA_WRITE;
      break;
    case CONDUIT_SHM_WR_ATOMIC_CMP_AND_SWP:
      cqe.opcode = CONDUIT_SHM_WC_COMP_SWAP;
      break;
    case CONDUIT_SHM_WR_ATOMIC_FETCH_AND_ADD:
      cqe.opcode = CONDUIT_SHM_WC_FETCH_ADD;
      break;
    default:
      cqe.opcode = CONDUIT_SHM_WC_SEND;
      break;
  }
  cqe.qp_num = q.qpn;
  cqe.vendor_err = vendor_err;
  push_cqe(*q.client, q.send_cq, cqe);
}

conduit_shm_wr_error Engine::convert_send(QpCtx& q, const conduit_shm_send_wr& raw,
                                          uint64_t inline_index, transport::SendWr& wr,
                                          bool* used_inline) {
  Client& c = *q.client;
  auto lookup = [&c](uint32_t lkey) { return c.mem.client_bounds(lkey); };
  *used_inline = false;
  shm::ValidSendWr v;
  const conduit_shm_wr_error err = shm::validate_send_wr(raw, kWrLimits, c.arena(), lookup, &v);
  if (err != CONDUIT_SHM_WR_OK) return err;

  wr = transport::SendWr{};
  wr.wr_id = raw.wr_id;
  switch (raw.opcode) {
    case CONDUIT_SHM_WR_SEND:
      wr.opcode = transport::WrOpcode::kSend;
      break;
    case CONDUIT_SHM_WR_SEND_WITH_IMM:
      wr.opcode = transport::WrOpcode::kSendImm;
      break;
    case CONDUIT_SHM_WR_RDMA_WRITE:
      wr.opcode = transport::WrOpcode::kWrite;
      break;
    case CONDUIT_SHM_WR_RDMA_WRITE_WITH_IMM:
      wr.opcode = transport::WrOpcode::kWriteImm;
      break;
    case CONDUIT_SHM_WR_ATOMIC_CMP_AND_SWP:
      wr.opcode = transport::WrOpcode::kCmpSwap;
      wr.compare_add = raw.u.atomic.compare_add;
      wr.swap = raw.u.atomic.swap;
      break;
    case CONDUIT_SHM_WR_ATOMIC_FETCH_AND_ADD:
      wr.opcode = transport::WrOpcode::kFetchAdd;
      wr.compare_add = raw.u.atomic.compare_add;
      break;
    default:
      wr.opcode = transport::WrOpcode::kRead;
      break;
  }
  wr.signaled = (raw.flags & CONDUIT_SHM_SEND_SIGNALED) != 0;
  wr.solicited = (raw.flags & CONDUIT_SHM_SEND_SOLICITED) != 0;
  wr.imm = raw.imm_data;
  wr.remote_addr = raw.remote_addr;
  wr.rkey = raw.rkey;
  if (raw.flags & CONDUIT_SHM_SEND_INLINE) {
    // The bytes live in the ring slot, which the client may reuse at once:
    // keep a copy for as long as the transport may (re)send them.
    uint8_t* slot = q.inline_buf.data() + (inline_index & (q.inline_slots - 1)) * kInlineSlotBytes;
    std::memcpy(slot, raw.u.inline_data, raw.inline_len);
    *used_inline = true;
    if (raw.inline_len > 0) {
      wr.num_sge = 1;
      wr.sge[0] = {reinterpret_cast<uintptr_t>(slot), raw.inline_len, q.inline_lkey};
    }
  } else {
    wr.num_sge = raw.num_sge;
    for (uint32_t i = 0; i < raw.num_sge; ++i) {
      const conduit_shm_sge& s = raw.u.sg_list[i];  // u.atomic.sge is sg_list[0]
      wr.sge[i] = {c.mem.find_lkey(s.lkey)->iova + s.offset, s.length, s.lkey};
    }
  }
  return CONDUIT_SHM_WR_OK;
}

// ---- transmit ------------------------------------------------------------------

bool Engine::resolve_peer(QpCtx& q, uint64_t now_ns) {
  // Per burst: nothing that could move the next hop or its MAC has changed in the net stack
  // (a refresh with the same MAC does not move its generation), and no recheck is due.
  if (q.peer_resolved && q.net_generation == net_.generation() && now_ns < q.next_resolve_ns) {
    return true;
  }
  return lookup_peer(q, now_ns);
}

// Set-up, a moved generation (a neighbour's new MAC, a resolved entry gone, the IPv6 router or
// on-link prefixes changed) and the periodic recheck: route as set_peer/set_peer6 did, then
// resolve. A QP whose next hop must be resolved again waits as at set-up (the table sends the
// requests); one whose peer has no route any more keeps what it had.
bool Engine::lookup_peer(QpCtx& q, uint64_t now_ns) {
  if (!q.peer_set) return false;
  // An RA's Cur Hop Limit (it moves the generation): the next frame's template has it. Frames
  // already in the pacer leave with the old one.
  if (q.peer_v6) q.addr.ttl = net_.hop_limit6();
  if (!q.peer_resolved && now_ns < q.next_resolve_ns) return false;
  if (q.peer_local) {  // both QPs on this host: frames never touch the port
    q.addr.dst_mac = net_.config().mac.bytes;
    q.peer_resolved = true;
    q.net_generation = net_.generation();
    q.next_resolve_ns = UINT64_MAX;
    return true;
  }
  // Well inside the table's refresh window, so a QP in use keeps its entry confirmed
  // (refreshed by a unicast request) instead of letting it age out and waiting for a new
  // resolution.
  const uint64_t recheck_ns =
      std::max<uint64_t>(net_.config().neighbour.refresh_window_ns / 4, 1'000'000);
  // Routed again when the generation moved (nothing else changes a next hop), and at every
  // lookup while the QP keeps an old next hop for want of a route: a recheck must not take
  // that old next hop, still resolvable, for a route found.
  bool routed = true;
  if (q.net_generation != net_.generation() || q.route_kept) {
    if (q.peer_resolved && q.net_generation != net_.generation()) ++counters_.peers_reresolved;
    if (q.peer_v6) {
      const auto hop = net_.next_hop6(q.peer_ip6);
      if (hop) q.next_hop6 = *hop;
      routed = hop.has_value();
    } else {
      const auto hop = net_.next_hop(q.peer_ip);
      if (hop) q.next_hop = *hop;
      routed = hop.has_value();
    }
  }
  net::NeighbourResolveResult r{net::NeighbourResolve::kDropped, {}};
  if (routed) r = q.peer_v6 ? net_.resolve6(q.next_hop6, now_ns) : net_.resolve(q.next_hop, now_ns);
  // (resolve() may itself move the generation, by evicting an entry: not this QP's.)
  q.net_generation = net_.generation();
  if (r.status == net::NeighbourResolve::kResolved) {
    if (q.addr.dst_mac != r.mac.bytes && q.queued_frames > q.restamp_frames) {
      // The frames already in the pacer carry the old MAC: tx() stamps the new one on them.
      restamp_frames_ += q.queued_frames - q.restamp_frames;
      q.restamp_frames = q.queued_frames;
    }
    q.addr.dst_mac = r.mac.bytes;
    q.peer_resolved = true;
    q.route_kept = false;
    q.next_resolve_ns = now_ns + recheck_ns;
    return true;
  }
  if (q.peer_resolved && r.status == net::NeighbourResolve::kDropped) {
    // No route to the peer any more (or no room for its next hop): keep the old next hop and
    // MAC rather than stop; the next change of the net stack, or the recheck, tries again.
    // Counted once per QP until a lookup succeeds again.
    if (!q.route_kept) ++counters_.peers_reresolve_kept;
    q.route_kept = true;
    q.next_resolve_ns = now_ns + recheck_ns;
    return true;
  }
  q.peer_resolved = false;
  q.next_resolve_ns = now_ns + 100'000;  // the neighbour table retries ARP/NS itself
  return false;
}

bool Engine::fill_pacer(QpCtx& q, uint64_t now_ns) {
  if (!resolve_peer(q, now_ns)) return false;
  if (!(q.tmpl_addr == q.addr)) {
    q.tmpl = wire::make_frame_template(q.addr);
    q.tmpl_addr = q.addr;
  }
  bool work = false;
  // An equal share of max_frames_queued among the QPs that have frames queued
  // (this one included), so the frames waiting in the pacer, and with them
  // each frame's wait before it leaves, stay bounded however many QPs send.
  const uint32_t sharing = qps_with_queued_frames_ + (q.queued_frames == 0 ? 1 : 0);
  const uint32_t cap = std::clamp(config_.max_frames_queued / sharing, 2u,
                                  std::max(2u, config_.max_frames_queued_per_qp));
  while (q.queued_frames < cap) {
    // The QP writes its next packets straight into mbufs, a burst per call
    // (Qp::poll_tx_frames); buffers that got no packet are kept for the next
    // call.
    const uint32_t want = std::min<uint32_t>(cap - q.queued_frames, kTxChain);
    while (tx_spares_n_ < want) {
      rte_mbuf* m = port_.alloc_mbuf();
      if (m == nullptr) break;
      tx_spares_[tx_spares_n_++] = m;
    }
    if (tx_spares_n_ == 0) {
      ++counters_.tx_no_mbuf;  // nothing taken from the QP: it sends later
      break;
    }
    const uint32_t k = std::min(want, tx_spares_n_);
    std::span<uint8_t> rooms[kTxChain];
    for (uint32_t i = 0; i < k; ++i) {
      rte_mbuf* m = tx_spares_[i];
      rooms[i] = std::span<uint8_t>(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_tailroom(m));
    }
    wire::BuildResult built[kTxChain];
    const size_t n =
        q.qp->poll_tx_frames(now_ns, q.tmpl, std::span<const std::span<uint8_t>>(rooms, k), built);
    if (n == 0) break;  // nothing to send
    work = true;
    // The buffers that carry no frame (build errors, and those after n) stay
    // spares, in front.
    uint32_t spares = 0;
    bool full = false;
    for (size_t i = 0; i < n; ++i) {
      rte_mbuf* m = tx_spares_[i];
      if (!built[i].ok()) {
        ++counters_.tx_build_errors;  // the transport's timers retransmit it
        tx_spares_[spares++] = m;
        continue;
      }
      m->data_len = m->pkt_len = static_cast<uint32_t>(built[i].len_bytes);
      const uint8_t opcode =
          rte_pktmbuf_mtod(m, const uint8_t*)[size_t{q.tmpl.l2_bytes} + q.tmpl.ip_udp_bytes];
      if (opcode == static_cast<uint8_t>(wire::Opcode::kAcknowledge) && q.queued_answers == 0 &&
          send_ack_unpaced(q, m)) {
        continue;
      }
      const bool answer = opcode == static_cast<uint8_t>(wire::Opcode::kAtomicAcknowledge) ||
                          (opcode >= static_cast<uint8_t>(wire::Opcode::kReadResponseFirst) &&
                           opcode <= static_cast<uint8_t>(wire::Opcode::kReadResponseOnly));
      m->hash.usr = q.flow;  // lets remove_qp find the frames a dying QP left queued
      uint32_t tag;
      if (!free_tags_.empty()) {
        tag = free_tags_.back();
        free_tags_.pop_back();
      } else {
        tag = static_cast<uint32_t>(pending_frames_.size());
        pending_frames_.push_back(nullptr);
        pending_answer_.push_back(0);
      }
      if (!pacer_.enqueue(q.flow, sched::PacketRef{static_cast<uint32_t>(built[i].len_bytes), tag},
                          now_ns)) {
        // The packet is lost as on the wire: the transport resends it.
        rte_pktmbuf_free(m);
        free_tags_.push_back(tag);
        full = true;
        continue;
      }
      pending_frames_[tag] = m;
      if (answer) {
        pending_answer_[tag] = 1;
        ++q.queued_answers;
      }
      if (q.queued_frames++ == 0) ++qps_with_queued_frames_;
    }
    for (uint32_t i = static_cast<uint32_t>(n); i < tx_spares_n_; ++i) {
      tx_spares_[spares++] = tx_spares_[i];
    }
    tx_spares_n_ = spares;
    if (full || n < k) break;  // the pacer's queue is full, or the QP has nothing more
  }
  return work;
}

bool Engine::tx(uint64_t now_ns) {
  // Frames the device refused last time go first. Then only as many
  // departures as the batch can hold: when the device ring is full (the peer
  // has not drained it, or a slow link), frames wait in the pacer and the
  // per-QP cap holds the transport back, instead of being dropped here.
  flush_tx();
  const size_t room = tx_batch_.size() - tx_batch_len_;
  auto& deps = dep_scratch_;
  const size_t n =
      room > kTxControlReserve
          ? pacer_.dequeue_burst(now_ns, deps, std::min<size_t>(32, room - kTxControlReserve))
          : 0;
  if (room <= kTxControlReserve) ++counters_.tx_backpressure;
  // Frames queued before their QP's next hop changed MAC (lookup_peer counts them): one
  // compare per burst while there are none.
  const bool restamp = restamp_frames_ != 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t tag = deps[i].packet.tag;
    rte_mbuf* m = pending_frames_[tag];
    pending_frames_[tag] = nullptr;
    free_tags_.push_back(tag);
    if (m == nullptr) continue;
    QpCtx* q = deps[i].flow < flow_qp_.size() ? flow_qp_[deps[i].flow] : nullptr;
    if (pending_answer_[tag] != 0) {
      pending_answer_[tag] = 0;
      if (q != nullptr) --q->queued_answers;
    }
    if (q != nullptr) {
      if (restamp) restamp_dst_mac(*q, m);
      if (--q->queued_frames == 0) --qps_with_queued_frames_;
      q->tx_bytes += m->pkt_len;
      pacer_.set_rate(q->flow, q->rc->on_bytes_sent(now_ns, m->pkt_len), now_ns);
      if (q->peer_local) {
        loopback(m, *q, now_ns);
        continue;
      }
    }
    transmit_now(m);
  }
  flush_tx();
  return n > 0;
}

// A frame for a QP on this host goes straight to the receive path, after the
// same build (ICRC included) and before the same parse as on the wire; only
// the port and the neighbour logic are skipped.
void Engine::loopback(rte_mbuf* m, const QpCtx& q, uint64_t now_ns) {
  std::span<const uint8_t> frame(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len);
  const size_t l2 =
      q.addr.has_vlan ? wire::kEthHeaderBytes + wire::kVlanTagBytes : wire::kEthHeaderBytes;
  const size_t l4_end =
      l2 + (q.addr.ipv6 ? net::NetStack::kIpv6UdpHeaderBytes : net::NetStack::kIpv4UdpHeaderBytes);
  if (frame.size() >= l4_end) {
    net::UdpDatagram udp;
    udp.src_mac = net_.config().mac;
    if (q.addr.ipv6) {
      udp.ipv6 = true;
      udp.src_ip6 = udp.dst_ip6 = *net_.config().addr6;
    } else {
      udp.src_ip = net_.config().addr;
      udp.dst_ip = net_.config().addr;
    }
    udp.src_port = q.addr.src_port;
    udp.dst_port = config_.roce_udp_port;
    udp.tos = static_cast<uint8_t>(q.addr.dscp << 2 | q.addr.ecn);
    udp.ip_offset = static_cast<uint16_t>(l2);
    udp.payload_offset = static_cast<uint16_t>(l4_end);
    udp.payload_len = static_cast<uint16_t>(frame.size() - l4_end);
    ++counters_.loopback_frames;
    rx_roce(udp, frame, now_ns, &q);
    deliver_rx_run(now_ns);  // before the frame is freed
  }
  rte_pktmbuf_free(m);
}

bool Engine::send_cnp(QpCtx& q, uint64_t now_ns) {
  if (!q.peer_resolved || !resolve_peer(q, now_ns)) return false;  // (a MAC still current)
  rte_mbuf* m = port_.alloc_mbuf();
  if (m == nullptr) {
    ++counters_.tx_no_mbuf;
    return false;
  }
  wire::FrameAddr a = q.addr;
  a.dscp = config_.np.cnp_dscp;
  a.ecn = config_.np.cnp_ecn;
  if (a.has_vlan) {
    a.vlan_tci =
        static_cast<uint16_t>((config_.np.cnp_802p_prio & 7) << 13 | (a.vlan_tci & 0x0FFF));
  }
  std::span<uint8_t> room(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_tailroom(m));
  // The CNP goes to the data sender's QP: our peer's QPN.
  const wire::BuildResult b = wire::build_cnp(room, a, q.qp->attr().dest_qpn);
  if (!b.ok()) {
    ++counters_.tx_build_errors;
    rte_pktmbuf_free(m);
    return false;
  }
  m->data_len = m->pkt_len = static_cast<uint32_t>(b.len_bytes);
  if (!transmit_now(m)) return false;  // the device full: counted, and the next mark asks again
  ++counters_.tx_cnps;
  ++q.cnps_tx;
  return true;
}

// An ACK or NAK the QP has just built leaves at once instead of through the pacer: the
// QP's DCQCN rate and its class's max_rate limit what it requests, not its answers (a
// hardware reaction point paces the requests only), and behind the QP's own data an ACK
// would slow the peer's flow by the backlog of ours. Not while a READ response or atomic
// ACK of the QP waits in the pacer (fill_pacer checks): an ACK for a later PSN must not
// overtake it. Nor to a QP of this host (the loopback path runs the peer's receive inside
// fill_pacer), nor when the device batch is full: paced as before then (false).
bool Engine::send_ack_unpaced(QpCtx& q, rte_mbuf* m) {
  if (q.peer_local) return false;
  if (tx_batch_len_ == tx_batch_.size()) flush_tx();
  if (tx_batch_len_ == tx_batch_.size()) return false;
  q.tx_bytes += m->pkt_len;
  ++counters_.tx_acks_unpaced;
  tx_batch_[tx_batch_len_++] = m;
  return true;
}

// A QP that stops (its client disconnects or destroys it) owes its peer the ACKs
// still in its response queue or in the pacer, for data its client may already
// hold the completions of. They would go after the DREQ, or die with the QP, and
// the peer's requester would see the disconnect before its last SEND completes, or
// retry into a QP that is gone. A hardware responder ACKs before it completes; here
// one ACK for everything taken goes at once, ahead of the DREQ. The READ responses and
// atomic ACKs already in the pacer go first, unpaced: the final ACK covers them (the
// transport gave them out), and they must not arrive after it (the peer would take them
// as lost and ask again) nor be freed with the QP. If the device refuses one of those,
// no final ACK: it would claim an answer that never left. The QP's own requests in the
// pacer are freed: their WRs are flushed with errors, so they must not run at the peer.
void Engine::send_final_ack(QpCtx& q, uint64_t now_ns) {
  const bool owed = q.qp->responses_queued() || q.queued_frames > 0;
  if (!send_queued_answers(q, now_ns) || !q.peer_resolved || !owed || !resolve_peer(q, now_ns)) {
    return;
  }
  rte_mbuf* m = port_.alloc_mbuf();
  if (m == nullptr) {
    ++counters_.tx_no_mbuf;  // the peer retries; the queued ACKs may still make it
    return;
  }
  if (!(q.tmpl_addr == q.addr)) {
    q.tmpl = wire::make_frame_template(q.addr);
    q.tmpl_addr = q.addr;
  }
  transport::TxPacket p;
  q.qp->final_ack(p);
  std::span<uint8_t> room(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_tailroom(m));
  const wire::BuildResult b = wire::build_frame(room, q.tmpl, p.hdr, {});
  if (!b.ok()) {
    ++counters_.tx_build_errors;
    rte_pktmbuf_free(m);
    return;
  }
  m->data_len = m->pkt_len = static_cast<uint32_t>(b.len_bytes);
  ++counters_.tx_final_acks;
  if (q.peer_local) {
    loopback(m, q, now_ns);
  } else {
    transmit_now(m);
  }
}

bool Engine::send_queued_answers(QpCtx& q, uint64_t now_ns) {
  bool answers_sent = true;
  sched::PacketRef refs[32];
  size_t n;
  while ((n = pacer_.take_queued(q.flow, refs, std::size(refs))) > 0) {
    // As tx() does with a departure.
    for (size_t i = 0; i < n; ++i) {
      const uint32_t tag = refs[i].tag;
      rte_mbuf* m = pending_frames_[tag];
      pending_frames_[tag] = nullptr;
      free_tags_.push_back(tag);
      if (m == nullptr) continue;
      const bool answer = pending_answer_[tag] != 0;
      if (answer) {
        pending_answer_[tag] = 0;
        --q.queued_answers;
      }
      restamp_dst_mac(q, m);
      if (--q.queued_frames == 0) --qps_with_queued_frames_;
      if (!answer) {
        rte_pktmbuf_free(m);
        continue;
      }
      q.tx_bytes += m->pkt_len;
      pacer_.set_rate(q.flow, q.rc->on_bytes_sent(now_ns, m->pkt_len), now_ns);
      if (q.peer_local) {
        loopback(m, q, now_ns);
      } else if (!transmit_now(m)) {
        answers_sent = false;
      }
    }
  }
  return answers_sent;
}

// The pacer keeps each QP's frames in order: the first restamp_frames to leave are the ones
// queued before its MAC changed.
void Engine::restamp_dst_mac(QpCtx& q, rte_mbuf* m) {
  if (q.restamp_frames == 0) return;
  --q.restamp_frames;
  --restamp_frames_;
  std::memcpy(rte_pktmbuf_mtod(m, uint8_t*), q.addr.dst_mac.data(), q.addr.dst_mac.size());
  ++counters_.tx_restamped;
}

bool Engine::transmit_now(rte_mbuf* m) {
  if (tx_batch_len_ == tx_batch_.size()) flush_tx();
  if (tx_batch_len_ == tx_batch_.size()) {
    ++counters_.tx_ring_full_drops;  // its sender repeats it if it matters
    rte_pktmbuf_free(m);
    return false;
  }
  tx_batch_[tx_batch_len_++] = m;
  return true;
}

void Engine::flush_tx() {
  if (tx_batch_len_ == 0) return;
  const uint16_t sent = port_.tx_burst(0, tx_batch_.data(), tx_batch_len_);
  ++counters_.tx_bursts;
  counters_.tx_frames += sent;
  // What the device did not take stays, in order, for the next flush.
  std::copy(tx_batch_.begin() + sent, tx_batch_.begin() + tx_batch_len_, tx_batch_.begin());
  tx_batch_len_ = static_cast<uint16_t>(tx_batch_len_ - sent);
}

// ---- completions -----------------------------------------------------------------

bool Engine::deliver_completions(QpCtx& q) {
  Client& c = *q.client;
  if (c.broken || q.qp->cq_size() == 0) return false;
  CqCtx& scq = c.cqs[q.send_cq];
  CqCtx& rcq = c.cqs[q.recv_cq];
  // A completion may go to either CQ: take only what both can hold, so none
  // is polled out of the QP without a slot to land in.
  uint32_t room =
      std::min(scq.live ? scq.ring.free_count() : 0u, rcq.live ? rcq.ring.free_count() : 0u);
  if ((scq.live && scq.ring.broken()) || (rcq.live && rcq.ring.broken())) {
    cut_off(c);  // the client moved a CQ consumer index where it cannot be
    return false;
  }
  if (!scq.live || !rcq.live) room = 32;  // a dead CQ: completions are dropped
  room = std::min<uint32_t>(room, kRingBurst);
  if (room == 0) return false;
  static_assert(sizeof(done_scratch_) / sizeof(done_scratch_[0]) >= kRingBurst);
  auto& done = done_scratch_;
  const size_t n = q.qp->poll_cq(std::span(done, room));
  for (size_t i = 0; i < n; ++i) push_completion(q, done[i]);
  return n > 0;
}

void Engine::push_completion(QpCtx& q, const transport::Completion& d) {
  conduit_shm_cqe cqe{};
  cqe.wr_id = d.wr_id;
  cqe.byte_len = d.len_bytes;
  cqe.imm_data = d.imm;
  cqe.qp_num = q.qpn;
  cqe.status = to_shm_status(d.status);
  cqe.opcode = to_shm_opcode(d.opcode);
  cqe.flags = d.has_imm ? CONDUIT_SHM_WC_WITH_IMM : 0;
  if (is_receive(d.opcode)) {
    cqe.src_qp = q.qp->attr().dest_qpn;
    push_cqe(*q.client, q.recv_cq, cqe);
  } else {
    push_cqe(*q.client, q.send_cq, cqe);
  }
}

void Engine::push_cqe(Client& c, uint32_t cq_slot, const conduit_shm_cqe& cqe) {
  if (cq_slot >= c.cqs.size()) return;
  CqCtx& cq = c.cqs[cq_slot];
  if (!cq.live) return;
  // Transport completions wait for room (deliver_completions); a rejected WR's
  // completion cannot wait (the WR is gone), nor can a removed QP's: a full CQ
  // loses it, counted, and the CQ's client is told (its wakeup line's count,
  // then the kick below, which wakes it if it sleeps on the CQ).
  if (!cq.ring.try_enqueue(cqe)) {
    ++counters_.cqe_dropped;
    ++cq.lost;
    if (cq.wakeup != nullptr) shm::producer_store_lost(cq.wakeup, cq.lost);
  }
  client_progress_ = true;
  if (!cq.kick_pending) {
    cq.kick_pending = true;
    kicks_.push_back({c.id, cq_slot});
  }
}

void Engine::push_leftover_completions(QpCtx& q) {
  if (q.client->broken) return;  // cut off: its rings are not written any more
  for (size_t n; (n = q.qp->poll_cq(std::span(done_scratch_))) > 0;) {
    for (size_t i = 0; i < n; ++i) push_completion(q, done_scratch_[i]);
  }
}

// Only the CQs that received entries this loop: a client has up to
// max_cqs slots (1024 in a typical policy), too many to scan every loop.
void Engine::kick_cqs() {
  for (const auto& [client_id, slot] : kicks_) {
    Client* c = find_client(client_id);  // it may have gone since
    if (c == nullptr || slot >= c->cqs.size()) continue;
    CqCtx& cq = c->cqs[slot];
    if (!cq.kick_pending) continue;  // removed, or listed twice
    cq.kick_pending = false;
    if (cq.event_fd >= 0 && cq.wakeup != nullptr && shm::producer_should_kick(cq.wakeup) &&
        shm::WakeFd::kick_pipe(cq.event_fd) == -EPIPE) {
      cq.event_fd = -1;  // the client closed its end: nobody waits on it
      ++counters_.wakeup_fds_closed;
    }
  }
  kicks_.clear();
}

// ---- idle --------------------------------------------------------------------------

bool Engine::sleep_until_work(uint64_t now_ns) {
  // Arm every client's engine line, then look once more: a client that
  // posted before seeing the flag is caught by this re-check (Dekker pairing
  // of consumer_arm_wakeup's fence with producer_should_kick's).
  for (auto& [id, c] : clients_) {
    (void)id;
    if (!c->broken) shm::consumer_arm_wakeup(c->engine_wakeup);
  }
  // Work that no file descriptor announces: frames the device has not taken
  // yet, events the ring refused, entries and completions already waiting.
  bool pending = tx_batch_len_ > 0 || !event_backlog_.empty() || cm_.pending_actions() > 0;
  bool paced = false;  // built frames wait in the pacer for their departure times
  for (QpCtx* q : qp_list_) {
    if (q->client->broken) continue;
    pending |= q->sq.available() > 0 || q->rq.available() > 0 || q->has_pending_posts() ||
               q->qp->cq_size() > 0;
    paced |= q->queued_frames > 0;
  }
  // A port socket that woke us without a frame for the RX burst (a driver
  // that leaves it readable) is left out of this sleep: timed polling, as for
  // a port without wake-up, rather than a busy loop through ppoll.
  static const std::vector<int> none;
  const std::vector<int>& port_fds = port_wake_unanswered_ ? none : port_.rx_wait_fds();
  port_wake_unanswered_ = false;
  const uint32_t cap_us = port_fds.empty() ? config_.idle_sleep_us : config_.idle_sleep_max_us;
  uint64_t wake_ns = now_ns + uint64_t{cap_us} * 1000;
  wake_ns = std::min({wake_ns, net_.next_deadline_ns(), cm_deadline_ns_});
  for (QpCtx* q : qp_list_) {
    wake_ns = std::min({wake_ns, q->qp->next_deadline_ns(), q->rc->next_deadline_ns()});
  }
  // Frames held back by their flows' rates (DCQCN after CNPs, a class's max
  // rate) are work at a known time: sleep until the first may leave, unless
  // that is too close for a sleep to pay (the catch-up allowance, max_lag_ns,
  // absorbs a wake-up that comes late).
  bool pacer_timed = false;
  bool pacer_decided = false;
  if (paced && !pending) {
    const uint64_t departure = pacer_.next_wakeup_ns(now_ns);
    if (departure < now_ns + kMinPacedSleepNs || !paced_gate_.allowed(now_ns)) {
      pending = pacer_decided = true;  // poll for it
    } else if (departure <= wake_ns) {
      wake_ns = departure;
      pacer_timed = true;
    }
  }
  if (!pending && wake_ns > now_ns) {
    // A member, cleared: paced flows sleep once per departure gap, and a
    // vector built here allocated on every one of those sleeps.
    std::vector<pollfd>& fds = poll_fds_;
    fds.clear();
    poll_clients_.clear();
    fds.push_back({channel_.engine_wake_fd(), POLLIN, 0});
    for (auto& [id, c] : clients_) {
      (void)id;
      if (c->doorbell_fd < 0) continue;
      fds.push_back({c->doorbell_fd, POLLIN, 0});
      poll_clients_.push_back(c.get());
    }
    const size_t first_port_fd = fds.size();
    for (int fd : port_fds) fds.push_back({fd, POLLIN, 0});
    const uint64_t wait_ns = wake_ns - now_ns;
    timespec ts{static_cast<time_t>(wait_ns / 1'000'000'000ull),
                static_cast<long>(wait_ns % 1'000'000'000ull)};
    ++counters_.sleeps;
    if (paced) ++counters_.paced_sleeps;
    sleep_until_ns_ = wake_ns;
    const int ready = ::ppoll(fds.data(), fds.size(), &ts, nullptr);
    if (pacer_timed && ready == 0) {
      pacer_decided = true;
      if (paced_gate_.after_paced_sleep(wake_ns, tsc_now_ns())) ++counters_.paced_sleeps_late;
    }
    if (ready > 0) {
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        if (i >= first_port_fd) {
          // The driver's socket: never read it, the RX burst takes the frame.
          // An error condition (POLLERR) also ends the sleep: it too counts
          // as unanswered, so it cannot keep ppoll returning at once.
          ++counters_.port_wakeups;
          port_wake_unanswered_ = true;  // until an RX burst returns a frame
          continue;
        }
        if (i == 0) {
          shm::EventFd::drain_fd(fds[i].fd);  // the control thread's, ours alone
          continue;
        }
        // A client's doorbell: a read that never blocks, whatever the client did to the
        // descriptor. Closed by the client (end of file): it would stay readable and end
        // every sleep at once, so it is not polled any more (its posts are still taken
        // whenever the engine runs).
        if (shm::WakeFd::drain(fds[i].fd) == -EPIPE) {
          poll_clients_[i - 1]->doorbell_fd = -1;
          ++counters_.wakeup_fds_closed;
        }
      }
    }
  }
  for (auto& [id, c] : clients_) {
    (void)id;
    if (!c->broken) shm::consumer_disarm_wakeup(c->engine_wakeup);
  }
  return pacer_decided;
}

}  // namespace conduit::engine
