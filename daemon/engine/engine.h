// The engine: one poll-mode loop that joins a DPDK port, the clients'
// shared-memory rings and the pure protocol layers.
//
// One iteration (poll_once), l2fwd style:
//   1. control commands from the lock-free command ring (never a lock)
//   2. RX burst: NetStack (ARP, ICMP echo, IPv4/UDP demux) -> wire parse
//      (ICRC) -> the QP's transport; CE marks feed the notification point.
//      A frame of an established QP that matches the header learned from its
//      peer's frames takes rx_roce_fast instead (one masked compare for the
//      Ethernet/IPv4/UDP/BTH checks, then the ICRC): same verdicts, counters
//      and side effects, counted in rx_roce_fast
//   3. timers that are due: QP ACK/RNR timers, DCQCN timers, ARP retries
//      (after RX, so an ACK already waiting is seen before its timer fires;
//      time the engine itself did not run, beyond 1 ms a loop, does not
//      count against the QPs' ACK timers: see defer_timers_after_stall)
//   4. client SQ/RQ rings: copy each entry, validate it, post it to the QP
//   5. each QP's transmit side: frames built into mbufs, queued in the pacer
//      (one flow per QP at its DCQCN rate, traffic classes by DWRR/strict)
//   6. pacer departures -> TX burst (or, between two QPs of this host, straight
//      back into step 3's parse); completions -> client CQ rings. Only as many
//      departures as the TX batch has room for: frames a full device refuses
//      wait in the batch and the pacer, never dropped (a drop costs a go-back-N
//      round trip, and drops under load ended in "retry counter exceeded")
// When nothing happened for a while (idle mode adaptive), the engine arms the
// clients' wakeup lines and sleeps in ppoll on their doorbells, the control
// eventfd and the port's kernel sockets (af_packet, af_xdp: a frame arriving
// wakes it), at most until its next timer. A port without such sockets has no
// RX wake-up at all: the sleep is then capped at idle_sleep_us, otherwise at
// idle_sleep_max_us. Frames the pacer holds back (a flow's DCQCN rate, a
// class's max rate) do not keep it spinning: it sleeps until the first may
// leave, if that is at least 20 us away (a timer slack of 2 us on the engine
// thread; a paced flow on a shared core leaves the core free between its
// departures), unless such sleeps have been ending late (PacedSleepGate: a
// core busy with other tasks wakes the engine milliseconds after its timer).
//
// Thread role: everything here runs on the engine thread, except stop(),
// which any thread may call.
#pragma once

#include <poll.h>
#include <rte_mbuf.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cc/dcqcn_params.h"
#include "cc/notification_point.h"
#include "cc/rate_controller.h"
#include "cm/connection_manager.h"
#include "control/engine_channel.h"
#include "dpdk/port.h"
#include "engine/client_memory.h"
#include "engine/idle_spin.h"
#include "net/net_stack.h"
#include "sched/tx_scheduler.h"
#include "shm/entries.h"
#include "shm/region.h"
#include "shm/spsc_ring.h"
#include "transport/qp.h"
#include "wire/frame.h"

namespace conduit::engine {

struct TrafficClassSpec {
  std::string name;
  uint8_t dscp = 26;
  uint8_t ecn = wire::kEcnEct0;
  uint8_t vlan_pcp = 3;
  sched::ClassConfig sched;
  cc::ControllerConfig cc;
};

enum class IdleMode : uint8_t { kSpin, kAdaptive };

// The pacer's settings for the engine. Its catch-up allowance (max_lag_ns)
// must exceed the engine's loop period, or a flow polled late loses rate for
// good: a loop that makes a TX syscall (af_packet's sendto through a veth)
// takes 5-20 us, and with the scheduler's 4 us default a 10 Gbit/s flow of
// 4 KiB frames left at 1-2 frames per loop (about 2 Gbit/s).
sched::SchedulerConfig engine_pacer_config();

struct EngineConfig {
  net::NetStackConfig net;
  uint16_t roce_udp_port = wire::kRoceUdpPort;
  uint16_t cm_udp_port = 4792;  // native connection manager (daemon/cm), also in net.udp_ports
  cm::CmConfig cm;
  // Without net.vlan_id: RoCE frames carry a priority tag (802.1Q, VID 0) with their
  // class's priority (CNPs: np.cnp_802p_prio) as the PCP; other frames go untagged.
  bool priority_tagging = false;
  uint64_t line_rate_bps = 10'000'000'000ull;
  std::vector<TrafficClassSpec> classes;            // the first is the default class
  cc::NpParams np = cc::NpParams::mlx5_defaults();  // also the marking of CNPs sent
  // New QPs' configuration (qpn and queue depths are set per QP) and their
  // attributes in RESET: the policy's transport section. A QP keeps the values
  // it was created with; a policy reload changes them for QPs created after it.
  transport::QpConfig qp_defaults;
  // The connection manager offers selective repeat for every connection (else
  // only when the client asks): transport.loss_recovery: selective.
  bool offer_selective_repeat = false;
  IdleMode idle_mode = IdleMode::kAdaptive;
  // Adaptive idle: after a loop without work the engine spins for a window
  // between these bounds before it sleeps (engine/idle_spin.h: it grows when
  // work comes back soon after a sleep, shrinks when sleeps are long). The
  // fixed 2000-loop spin this replaces lasted 1-10 ms depending on load.
  uint32_t idle_spin_min_us = 10;
  uint32_t idle_spin_max_us = 200;
  uint32_t idle_sleep_us = 200;       // longest sleep when the port cannot wake us
  uint32_t idle_sleep_max_us = 1000;  // longest sleep when a frame wakes us
  // A sleep through a pacer gap that ends later than this holds paced sleeping
  // off (PacedSleepGate); half the pacer's catch-up allowance (max_lag_ns).
  uint32_t paced_sleep_late_us = 25;
  uint32_t max_frames_queued_per_qp = 32;  // built frames waiting in the pacer
  // All QPs' built frames waiting in the pacer together: each QP with frames
  // queued gets an equal share (at least 2, at most max_frames_queued_per_qp).
  // A frame waits behind about this many others, and that wait counts against
  // the peer's ACK timeout: 64 QPs x 32 frames held 2048 frames (10-50 ms at
  // the rates a loaded engine reaches), enough for spurious go-back-N timeouts.
  uint32_t max_frames_queued = 256;
  sched::SchedulerConfig pacer = engine_pacer_config();
};

// A policy reload's engine sections (control::EngineOp::kSetPolicy): built on
// the control thread (engine_policy_update), applied by Engine between two
// loops, all or nothing.
//   classes    replace the engine's table. A QP keeps its class by name (a
//              class that is gone: the default class, counted in
//              qps_to_default), and takes the class's marking for the frames
//              it builds from then on (frames already in the pacer keep the
//              old), its scheduling (the pacer's class of the same index) and
//              its congestion control: the same algorithm takes the new
//              parameters in place (DCQCN keeps its rates, clamped, and α),
//              another one starts afresh (cc::reconfigure_controller).
//   np         every QP's CNP spacing, and the marking of CNPs.
//   qp_defaults, offer_selective_repeat
//              for QPs created from then on; a QP keeps what it was created with.
struct PolicyUpdate {
  std::vector<TrafficClassSpec> classes;
  cc::NpParams np;
  transport::QpConfig qp_defaults;
  bool offer_selective_repeat = false;
  // Filled by the engine before its ack.
  uint32_t qps = 0;                 // QPs that took the new classes
  uint32_t qps_to_default = 0;      // of them, those whose class is gone
  uint32_t qps_new_controller = 0;  // of them, those whose algorithm changed
};

struct EngineCounters {
  uint64_t loops = 0;
  uint64_t sleeps = 0;
  uint64_t port_wakeups = 0;       // sleeps ended by a frame arriving
  uint64_t paced_sleeps = 0;       // of sleeps, those taken while frames waited in the pacer
  uint64_t paced_sleeps_late = 0;  // paced sleeps that ended late: paced sleeping held off
  uint64_t wakeup_yields = 0;      // idle loops that gave the core up after client work
  uint64_t rx_bursts = 0;          // RX bursts that returned frames
  uint64_t rx_frames = 0;
  uint64_t rx_roce = 0;
  // Of rx_roce, the frames the per-QP fast path took (an established QP's
  // expectation matched: NetStack::on_rx_expected, no on_rx_frame). Same
  // verdicts and counters as the full path; rx_roce - rx_roce_fast took it.
  uint64_t rx_roce_fast = 0;
  uint64_t rx_cnps = 0;
  uint64_t rx_ce_marked = 0;
  uint64_t rx_multi_segment = 0;  // dropped: we build and parse single-segment frames
  uint64_t rx_unknown_qp = 0;
  uint64_t rx_wrong_peer = 0;  // valid RoCE frame for a QP from an address not its peer
  // Wakeup channels (a CQ's, a doorbell) whose client end was closed: no longer kicked
  // or polled (a doorbell would stay readable, and end every sleep at once).
  uint64_t wakeup_fds_closed = 0;
  // Frames the kernel received on the port's interface, handed over by the control thread
  // (kKernelFrame: an af_xdp port's Router Advertisements), and of them those that were not
  // for the network stack alone (a RoCE or connection-manager datagram: not taken this way).
  uint64_t kernel_frames = 0;
  uint64_t kernel_frames_ignored = 0;
  std::array<uint64_t, wire::kDropReasonCount> rx_wire_drops{};
  uint64_t tx_bursts = 0;  // calls into the device's TX burst
  uint64_t tx_frames = 0;
  uint64_t loopback_frames = 0;  // between two QPs of this host, not through the port
  uint64_t tx_cnps = 0;
  uint64_t tx_final_acks = 0;    // ACKs a stopping QP sent ahead of its DREQ (send_final_ack)
  uint64_t tx_acks_unpaced = 0;  // ACKs and NAKs that left without the pacer (send_ack_unpaced)
  uint64_t tx_no_mbuf = 0;
  uint64_t tx_build_errors = 0;
  uint64_t tx_ring_full_drops = 0;  // control (ARP, ICMP, CNP), send_queued_answers: device full
  uint64_t tx_backpressure = 0;     // loops that left departures in the pacer: device full
  uint64_t wr_rejected = 0;         // invalid work requests (error completions)
  uint64_t clients_broken = 0;      // impossible ring indices: client cut off
  uint64_t peers_failed = 0;        // local QPs failed because their peer's process went away
  // Times a resolved QP routed and resolved its peer again because the net stack's generation
  // moved (a neighbour's MAC changed or a resolved entry went, the RA's router or on-link
  // prefixes changed); an ARP/NA that repeats the known MAC causes none.
  uint64_t peers_reresolved = 0;
  // Times a resolved QP's lookup (the generation moved, or its periodic recheck) found no
  // route to the peer any more or no room for its next hop in the neighbour table, so the QP
  // keeps sending to the next hop and MAC it had: once per QP each time it loses its route,
  // not again on the lookups that still find none, until one succeeds.
  uint64_t peers_reresolve_kept = 0;
  // Frames that were in the pacer when their QP's next hop changed MAC, given the new MAC as
  // they left (Engine::restamp_dst_mac).
  uint64_t tx_restamped = 0;
  // Completions that cannot wait for room lost to a full CQ: a rejected WR's, and the
  // WR_FLUSH_ERR completions of a removed QP's outstanding WRs. Each CQ's own count is in
  // its wakeup line (conduit_shm_wakeup.cqes_lost), where its client sees the overrun.
  uint64_t cqe_dropped = 0;
  uint64_t commands = 0;
  uint64_t policy_updates = 0;  // kSetPolicy commands applied
  uint64_t stalls = 0;          // loops that came over 1 ms late (descheduled, or a sleep overran)
  uint64_t stalled_ns = 0;      // their lateness beyond 1 ms: the QPs' ACK timers moved out by it
  uint64_t stall_max_ns = 0;    // the longest of them (a peer's retry budget must outlast it)
  // Connection manager datagrams (the state machine's own counters: cm::CmCounters).
  uint64_t cm_rx_datagrams = 0;
  uint64_t cm_tx_datagrams = 0;
  uint64_t cm_local_datagrams = 0;  // to a client of this same daemon
  uint64_t cm_tx_no_route = 0;      // peer off-link without a gateway, or ARP gave up
  uint64_t cm_events_no_qp = 0;     // an outcome for a connection whose QP is gone
  uint64_t cm_gsi_rx = 0;           // IB CM MADs in (UD to QP 1)
  uint64_t cm_gsi_rx_dropped = 0;   // UD to QP 1 that was not a valid GSI packet
  uint64_t cm_gsi_tx = 0;           // IB CM MADs out
};

class Engine {
 public:
  Engine(const EngineConfig& config, dpdk::Port& port, control::EngineChannel& channel);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Runs until stop(). Each iteration reads the TSC clock. Then a last round (finish_stop):
  // the commands posted before the stop are taken (conduitd releases every client, then stops
  // the engine: the QPs' final ACKs and DREQs), and what they send leaves; at most
  // kStopBudgetNs. Nothing else is flushed: the pacer's queued frames are freed unsent.
  void run();
  static constexpr uint64_t kStopBudgetNs = 100'000'000;
  // Any thread. Also ends an idle sleep (the control eventfd it polls), which would otherwise
  // keep run() until its timeout.
  void stop() {
    // Release, paired with run()'s acquire load: an engine that sees the stop also sees every
    // command this thread put in its ring before (finish_stop() takes them).
    stop_.store(true, std::memory_order_release);
    channel_.wake_engine();
  }
  // A policy reload's idle_mode; any thread may call it, run() takes it at its next loop.
  void set_idle_mode(IdleMode m) { idle_mode_.store(m, std::memory_order_relaxed); }
  // One loop iteration at now_ns; true if it did any work.
  bool poll_once(uint64_t now_ns);

  const EngineCounters& counters() const { return counters_; }
  // Advances with every run() iteration (at least about once per ms, also when
  // idle); any thread may read it. The watchdog pings only while it moves.
  uint64_t heartbeat() const { return heartbeat_.load(std::memory_order_relaxed); }
  const net::NetStack& net() const { return net_; }

 private:
  struct CqCtx {
    bool live = false;
    shm::SpscProducer<conduit_shm_cqe> ring;
    conduit_shm_wakeup* wakeup = nullptr;
    int event_fd = -1;
    bool kick_pending = false;
    // Completions lost to this CQ's full ring; the engine's own count, stored into the
    // wakeup line's cqes_lost on each loss (never read back: the client may write there).
    uint32_t lost = 0;
  };
  struct Client;
  struct QpCtx;

  // Commands.
  void handle_command(const control::EngineCommand& cmd, uint64_t now_ns);
  int add_client(const control::EngineCommand& cmd);
  // Returns the client's flush_lost: completions lost to full CQs as its QPs were removed.
  uint32_t remove_client(uint32_t client_id, uint64_t now_ns);
  int add_cq(const control::EngineCommand& cmd);
  int add_qp(const control::EngineCommand& cmd, uint64_t now_ns);
  int modify_qp(const control::EngineCommand& cmd, uint64_t now_ns);
  int set_policy(PolicyUpdate* u, uint64_t now_ns);
  // q's frame marking (DSCP, ECN, VLAN priority) from its class.
  void mark_qp(QpCtx& q) const;
  // Returns the completions lost to full CQs while the QP's outstanding WRs were flushed
  // (also added to its client's flush_lost).
  uint32_t remove_qp(uint32_t qpn, bool owner_gone);
  void post_qp_state(QpCtx& q, uint64_t now_ns);
  void post_qp_stats(uint64_t cookie, uint32_t qpn);
  void snapshot(const control::EngineCommand& cmd);
  void fill_snapshot(control::CounterSnapshot& out) const;
  // Posts in order: once one event waits in event_backlog_, later ones queue behind it.
  void post_event(const control::EngineEvent& ev);
  Client* find_client(uint32_t id);
  QpCtx* find_qp(uint32_t qpn);

  // Connection manager (engine_cm.cc).
  int cm_command(const control::EngineCommand& cmd, uint64_t now_ns, uint32_t* conn_out);
  void cm_rx(const net::UdpDatagram& udp, std::span<const uint8_t> frame, uint64_t now_ns);
  void gsi_rx(const net::UdpDatagram& udp, std::span<const uint8_t> frame, uint64_t now_ns);
  rte_mbuf* cm_frame(const cm::CmAction& a);
  // The CM's address of a datagram's sender (IPv4-mapped or IPv6).
  static cm::CmAddr cm_addr_of(const net::UdpDatagram& udp);
  // A peer a client connects to: loopback made our own address; 0, or
  // -ENETUNREACH when there is no route (or no address of its family).
  int cm_route(cm::CmAddr& peer);
  // The QP's UDP source port and IPv6 flow label, from both QPNs (as Linux's).
  static void set_flow_ids(QpCtx& q, uint32_t remote_qpn);
  // set_peer or set_peer6, by the address's family.
  int set_cm_peer(QpCtx& q, const cm::CmAddr& peer, uint64_t now_ns);
  // Runs the CM's timers when due and carries out its actions; true if any.
  bool cm_poll(uint64_t now_ns);
  void cm_send(const cm::CmAction& a, uint64_t now_ns);
  void cm_on_established(const cm::CmAction& a, uint64_t now_ns);
  void cm_on_ended(const cm::CmAction& a);
  void cm_post(uint32_t client_id, const control::CmEventInfo& info);
  // Moves q along RESET -> INIT -> RTR (-> RTS) with the negotiated values.
  int cm_move_qp(QpCtx& q, const cm::QpParams& local, const cm::QpParams& remote,
                 uint16_t pmtu_bytes, uint16_t caps, bool to_rts, uint64_t now_ns);
  // Whether frames of this path MTU leave the port: its MTU, and over IPv6 a link MTU a
  // Router Advertisement set (the check verbs makes against the port's active MTU).
  bool pmtu_fits(uint32_t pmtu_bytes, bool ipv6) const;
  // The path MTU to offer a CM peer at `peer`: pmtu, halved while it does not fit.
  uint16_t cm_fit_pmtu(uint16_t pmtu, const cm::CmAddr& peer) const;
  cm::QpParams cm_local_params(const QpCtx& q, const control::CmArgs& args);
  void cm_forget_conn(QpCtx& q);
  // Peer address of a QP (its RoCE frames' destination): 0 or -ENETUNREACH.
  int set_peer(QpCtx& q, net::Ipv4Addr peer, uint64_t now_ns);
  int set_peer6(QpCtx& q, const net::Ipv6Addr& peer, uint64_t now_ns);
  // The datagram came from q's peer (its family and address).
  static bool from_peer(const QpCtx& q, const net::UdpDatagram& udp);

  // Datapath.
  void defer_timers_after_stall(uint64_t now_ns);
  bool run_timers(uint64_t now_ns);
  bool rx(uint64_t now_ns);
  // A kKernelFrame: the network stack's part of rx() for one frame.
  void rx_kernel_frame(std::span<const uint8_t> frame, uint64_t now_ns);
  // An ARP, NDP or ICMP answer the network stack wrote into `reply`, sent at once.
  void transmit_reply(std::span<const uint8_t> reply);
  // local_sender: the QP of this host that built the frame (loopback), else null.
  void rx_roce(const net::UdpDatagram& udp, std::span<const uint8_t> frame, uint64_t now_ns,
               const QpCtx* local_sender = nullptr);
  // The fast path for a frame of an established QP (its rx_expect): true when
  // it took the frame, with every verdict and counter of net_.on_rx_frame() +
  // rx_roce(); false: the frame goes that way.
  bool rx_roce_fast(std::span<const uint8_t> frame, uint64_t now_ns);
  // rx_roce()'s work for a packet it accepted (both paths).
  void rx_roce_accepted(QpCtx& q, const wire::RoceView& pf, uint8_t tos, uint64_t now_ns);
  // What rx_roce() parses RoCE packets with (the same for every QP: the QP checks lengths
  // against its PMTU).
  wire::ParseOptions rx_parse_options() const;
  // Forgets q's expectation (the next accepted frame learns it again): its PMTU, peer or
  // connection changed.
  static void reset_rx_expect(QpCtx& q);
  void deliver_rx_run(uint64_t now_ns);
  bool drain_client_rings(QpCtx& q);
  void cut_off(Client& c);
  bool drain_sends(QpCtx& q);
  bool drain_recvs(QpCtx& q);
  // A send entry as the QP's WR; an inline entry's bytes go to inline slot
  // `inline_index` (*used_inline then set).
  conduit_shm_wr_error convert_send(QpCtx& q, const conduit_shm_send_wr& raw, uint64_t inline_index,
                                    transport::SendWr& wr, bool* used_inline);
  void reject_send(QpCtx& q, const conduit_shm_send_wr& raw, uint8_t status, uint32_t vendor_err);
  void reject_recv(QpCtx& q, uint64_t wr_id, uint8_t status, uint32_t vendor_err);
  bool fill_pacer(QpCtx& q, uint64_t now_ns);
  // True when q may send: its next hop's MAC is in q.addr. Per burst only compares; the rest
  // (lookup_peer) runs at set-up, when the net stack's generation moved, and at intervals.
  bool resolve_peer(QpCtx& q, uint64_t now_ns);
  bool lookup_peer(QpCtx& q, uint64_t now_ns);
  // A departing frame of q: if it was queued before q's MAC changed, give it the new one.
  void restamp_dst_mac(QpCtx& q, rte_mbuf* m);
  bool tx(uint64_t now_ns);
  bool send_cnp(QpCtx& q, uint64_t now_ns);  // false: not sent (no MAC, no mbuf)
  void send_final_ack(QpCtx& q, uint64_t now_ns);
  // q's frames waiting in the pacer, taken out (send_final_ack): its answers (READ
  // responses, atomic ACKs) sent at once in their order, its own requests freed (the QP
  // stops: their WRs are flushed, so they must not execute at the peer). False if the
  // device refused an answer (freed).
  bool send_queued_answers(QpCtx& q, uint64_t now_ns);
  bool send_ack_unpaced(QpCtx& q, rte_mbuf* m);
  void loopback(rte_mbuf* m, const QpCtx& q, uint64_t now_ns);
  // False if the device was full: the frame was freed, counted in tx_ring_full_drops.
  bool transmit_now(rte_mbuf* m);
  void flush_tx();
  void finish_stop();
  bool deliver_completions(QpCtx& q);
  // Writes cqe into the client's CQ if it has room, else counts it lost (cqe_dropped, the
  // CQ's cqes_lost); kicks the CQ either way. Only for completions that cannot wait.
  void push_cqe(Client& c, uint32_t cq_slot, const conduit_shm_cqe& cqe);
  // One of q's completions into its send or receive CQ (push_cqe).
  void push_completion(QpCtx& q, const transport::Completion& d);
  // A removed QP's completions that deliver_completions() could not place (a CQ full):
  // each written where there is room, the rest counted lost.
  void push_leftover_completions(QpCtx& q);
  void kick_cqs();
  // True if the pacer decided (a sleep timed to its next departure that ran
  // to it, or no sleep because that departure is near): the idle spin window
  // must not learn from it.
  bool sleep_until_work(uint64_t now_ns);

  EngineConfig config_;
  dpdk::Port& port_;
  control::EngineChannel& channel_;
  net::NetStack net_;
  sched::TxScheduler pacer_;
  std::vector<sched::ClassId> class_ids_;
  std::atomic<bool> stop_{false};
  // config_.idle_mode, changed by a reload; relaxed: no other data rides on it.
  std::atomic<IdleMode> idle_mode_;
  // Written by the engine thread only; relaxed both ways: a progress signal that
  // publishes no other data, so no ordering pairs with it.
  std::atomic<uint64_t> heartbeat_{0};

  std::unordered_map<uint32_t, std::unique_ptr<Client>> clients_;
  std::unordered_map<uint32_t, std::unique_ptr<QpCtx>> qps_;
  std::vector<QpCtx*> qp_list_;            // iteration order for the datapath
  std::vector<QpCtx*> flow_qp_;            // pacer flow id -> QP
  std::vector<rte_mbuf*> pending_frames_;  // pacer tag -> built frame (nullptr = free)
  std::vector<uint8_t> pending_answer_;    // pacer tag -> 1: a READ response or atomic ACK
  std::vector<uint32_t> free_tags_;
  uint32_t qps_with_queued_frames_ = 0;  // QPs with queued_frames > 0 (their share of the cap)
  uint32_t restamp_frames_ = 0;  // sum of the QPs' restamp_frames (tx() checks it per burst)
  std::array<rte_mbuf*, 64> tx_batch_{};
  // fill_pacer's next frame buffers (kept when no packet came), a TX burst's worth.
  static constexpr uint32_t kTxChain = 32;
  // rx_roce()'s packets not yet delivered: a run for one QP, its frames still
  // held (Engine::rx frees them after the burst, loopback after delivery).
  std::array<wire::RoceView, 32> rx_run_{};
  uint32_t rx_run_n_ = 0;
  QpCtx* rx_run_qp_ = nullptr;
  std::array<rte_mbuf*, kTxChain> tx_spares_{};
  uint32_t tx_spares_n_ = 0;
  uint16_t tx_batch_len_ = 0;
  std::vector<control::EngineEvent> event_backlog_;   // event ring full: retried
  transport::QpCounters retired_qp_counters_;         // sum over removed QPs, for the snapshot
  std::vector<std::pair<uint32_t, uint32_t>> kicks_;  // (client, CQ slot) with new entries
  bool client_progress_ = false;  // a CQE or WRITE data reached a client since the idle loop
  // Scratch arrays of the loop, kept here rather than on the stack: their element types
  // have default member initialisers, so a local array was zero-filled on every loop
  // (memset was 4.5-5.6 % of a spinning engine's samples over a veth).
  control::EngineCommand cmd_scratch_[8];
  net::NetAction action_scratch_[8];
  sched::Departure dep_scratch_[32];
  transport::Completion done_scratch_[32];
  uint64_t last_poll_ns_ = 0;    // now_ns of the previous poll_once
  uint64_t sleep_until_ns_ = 0;  // when the last idle sleep was due to end
  // Paced sleeps off for a while after one ended late (a busy core): hold-offs
  // of 1 ms doubling to 1 s.
  PacedSleepGate paced_gate_;
  std::vector<pollfd> poll_fds_;       // sleep_until_work's ppoll set, reused
  std::vector<Client*> poll_clients_;  // whose doorbell is poll_fds_[1 + i]
  uint64_t idle_since_ns_ = 0;         // start of the current idle spin; 0: not idle
  bool port_wake_unanswered_ = false;  // the port's socket woke us, no frame seen since
  EngineCounters counters_;

  cm::ConnectionManager cm_;
  uint32_t gsi_psn_ = 0;  // PSNs of the GSI packets we send (UD: nobody checks them)
  uint64_t cm_deadline_ns_ = UINT64_MAX;  // cm_.next_deadline_ns(), refreshed after each change
  std::unordered_map<uint32_t, uint32_t> cm_conn_qpn_;      // connection -> QPN
  std::unordered_map<uint32_t, cm::CmAction> cm_requests_;  // kRequest not yet answered
  uint64_t psn_seed_ = 0;                                   // xorshift state for start PSNs
};

// Monotonic nanoseconds from the TSC (rte_get_tsc_cycles / rte_get_tsc_hz).
uint64_t tsc_now_ns();

}  // namespace conduit::engine
