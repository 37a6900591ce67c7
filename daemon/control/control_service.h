// The control plane's state and request handling, without the socket: per
// client regions, CQs, QPs and MRs, quotas, QPN and key allocation, and the
// commands that tell the engine about each change (engine_command.h).
//
// Thread role: one thread only (the control thread); not thread-safe.
// Ownership: the service owns every client's shm::Region. A region (and a CQ's
// wakeup socket, a QP/CQ slot) is released only when the engine has acknowledged the
// command that stops it using it; with no engine attached, at once.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "control/engine_channel.h"
#include "control/qp_state_machine.h"
#include "control/sigbus_guard.h"
#include "proto/control_protocol.h"
#include "proto/unique_fd.h"
#include "shm/region.h"

namespace conduit::control {

// Per-client quotas and region sizing (from the policy's `clients` section).
struct ControlLimits {
  uint32_t max_clients = 64;
  uint32_t max_qps = 64;                        // per client; also the region's QP slots
  uint32_t max_cqs = 64;                        // per client; also the region's CQ slots
  uint32_t max_mrs = 256;                       // per client
  uint64_t max_mr_bytes = 1ull << 30;           // per client: registered bytes, all MRs together
  uint64_t max_mr_length = 1ull << 30;          // per client: one MR
  uint64_t max_arena_bytes = 1ull << 30;        // per client: registrable memory (the arena)
  uint64_t default_region_bytes = 64ull << 20;  // arena when the client asks for 0
  uint32_t sq_depth = 256;                      // ring depths, powers of two
  uint32_t rq_depth = 256;
  uint32_t cq_depth = 1024;
  shm::HugePages huge_pages = shm::HugePages::kAuto;
  // Peer daemons whose connection requests reach listeners (host byte order,
  // network & mask); others get "refused by policy". Empty: any. Read when a
  // request arrives, so a reload applies to the next one.
  struct PeerNetwork {
    uint32_t network = 0;
    uint32_t mask = 0;
  };
  std::vector<PeerNetwork> cm_allowed_peers;
  struct PeerNetwork6 {
    std::array<uint8_t, 16> network{};  // host bits zero
    uint8_t length = 128;
  };
  std::vector<PeerNetwork6> cm_allowed_peers6;  // both empty: any peer
};

struct PeerCred {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// What the service needs from the rest of the daemon. Every member may be empty.
struct ServiceHooks {
  std::string version;                        // for kStatus
  std::string policy_path;                    // for kStatus
  std::function<std::string()> engine_state;  // kStatus: the engine's and port's line, if set
  std::function<std::string()> policy_text;   // kPolicyShow
  std::function<int(std::string& message)> reload_policy;       // kPolicyReload: 0 or -errno
  std::function<bool(const std::string&)> class_exists;         // kCreateQp traffic class check
  std::function<std::string()> default_class;                   // kListQps: the default's name
  std::function<std::vector<proto::Counter>()> extra_counters;  // appended to kStats
};

// Owns a client's region together with its SIGBUS guard slot: the guard goes
// first, then the mapping (SigbusGuard::unguard must precede the unmap).
struct GuardedRegionDelete {
  int guard_slot = -1;
  void operator()(shm::Region* r) const {
    SigbusGuard::unguard(guard_slot);
    delete r;
  }
};
using RegionPtr = std::unique_ptr<shm::Region, GuardedRegionDelete>;

class ControlService {
 public:
  // engine may be null: the daemon then runs the control plane only.
  ControlService(ControlLimits limits, ServiceHooks hooks, EngineChannel* engine);
  ~ControlService();
  ControlService(const ControlService&) = delete;
  ControlService& operator=(const ControlService&) = delete;

  // New limits for clients that attach from now on (policy reload); clients
  // already attached keep the region and quotas they got.
  void set_limits(const ControlLimits& limits) { limits_ = limits; }

  // A connection was accepted from `cred`; returns its client id, or 0 when
  // the daemon is at max_clients (the caller closes the connection).
  uint32_t open_client(const PeerCred& cred);

  struct Outcome {
    proto::ReplyMessage reply;
    std::vector<int> fds;  // descriptors to send with the reply; borrowed from the service
    // Sent after `fds`, then closed: the client's ends of wakeup sockets.
    std::vector<proto::UniqueFd> handed_over;
  };
  // Handles one decoded request. `fds_in` holds the descriptors that came with
  // it: no request takes any, so a non-empty one is refused.
  Outcome handle(uint32_t client_id, const proto::RequestMessage& req,
                 std::vector<proto::UniqueFd>& fds_in);

  // The connection closed (detach or hang-up): every resource of the client is
  // released and the engine told to move its QPs to ERROR and forget them.
  void close_client(uint32_t client_id);

  // Submits commands a full ring refused, then drains the engine's event ring:
  // acks release deferred resources, state events update the QP table. Call
  // when EngineChannel::control_wake_fd() is readable and periodically.
  void process_engine_events();

  // The daemon is stopping: the releases from now on are its own (the clients are still
  // there to poll their CQs), so flush completions their CQs could not hold, which the
  // engine reports in each release's ack, are logged as a warning (else: info).
  void begin_stop() { stopping_ = true; }
  // The daemon stopping, every client released: hands the engine, which still runs, the
  // commands its full ring refused (their QPs' DREQs and final ACKs, each client's release),
  // waiting for room up to timeout_ms. The engine's own stop (finish_stop) takes only what
  // is in its ring: what stayed here was lost. True if nothing is left.
  bool flush_backlog_for_stop(uint32_t timeout_ms);
  static constexpr uint32_t kStopBacklogMs = 1000;
  // Then, before their connections close: waits up to timeout_ms for the engine to ack each
  // released client's kRemoveClient. It comes after the client's kRemoveQp acks, and the
  // engine acks a removal once it has written the flush completions of the QP's outstanding
  // WRs into the client's CQ ring: a client that sees the hang-up then finds them there
  // (conduit_poll_cq returns what its CQ holds before it reports ECONNRESET). True if every
  // release was acked.
  bool await_releases_for_stop(uint32_t timeout_ms);

  // Clients the engine cut off (impossible ring indices) since the last call:
  // the caller closes their connections (close_client releases the rest).
  std::vector<uint32_t> take_clients_to_disconnect() { return std::move(to_disconnect_); }
  // Asks the engine for fresh per-QP stats (rate, alpha, CNPs, bytes) and its
  // counters (kSnapshot) and waits up to timeout_ms for the answer; the engine
  // answers within one loop iteration and never waits on this thread. Called
  // before answering kStats and the first page of kListQps. false when there
  // is no engine or it did not answer in time: replies then carry the last
  // snapshot, and the late answer is taken when it comes.
  bool refresh_engine_stats(uint32_t timeout_ms);

  // A policy reload's engine sections (EngineOp::kSetPolicy; `policy` stays
  // alive here until the engine acks, also past a timeout). Waits up to
  // timeout_ms. class_names: the new policy's classes; once the engine took
  // them, this service's record of each QP whose class is gone says the
  // default class ("", as for a QP created without one). 0, or -EBUSY (an earlier update is still
  // in flight), -ETIMEDOUT (the engine takes it when it runs again), -EINVAL (refused: nothing
  // changed), -EOPNOTSUPP (no engine); `why` says it for the operator. After -ETIMEDOUT, the
  // engine's late ack does what a timely one would (the QP records) and, if the engine took
  // the update, calls late_applied on this thread.
  int set_engine_policy(std::shared_ptr<engine::PolicyUpdate> policy,
                        const std::vector<std::string>& class_names, uint32_t timeout_ms,
                        std::string& why, std::function<void()> late_applied = {});

  // A frame the kernel received on the port's interface, for the engine's network stack
  // (EngineOp::kKernelFrame: an af_xdp port's Router Advertisements, KernelFrameTap). Copied
  // here and kept until the engine's ack; one is in flight at a time, and a frame that comes
  // meanwhile, or is longer than a frame can be, is dropped (control.kernel_frames_dropped):
  // routers repeat their advertisements.
  void kernel_frame(std::span<const uint8_t> frame);
  static constexpr size_t kMaxKernelFrameBytes = 9216 + 18;  // the largest MTU, Ethernet, a tag

  // Resources whose release waits for an engine ack (0 when idle or no engine).
  size_t pending_releases() const { return pending_.size(); }
  uint32_t connection_count() const { return static_cast<uint32_t>(clients_.size()); }
  uint32_t client_count() const;  // attached clients
  bool is_attached(uint32_t client_id) const {
    auto it = clients_.find(client_id);
    return it != clients_.end() && it->second.attached;
  }
  uint32_t qp_count() const { return static_cast<uint32_t>(qp_owner_.size()); }
  bool engine_attached() const { return engine_ != nullptr; }
  std::vector<proto::Counter> counters() const;
  // Every QP's row of `conduitctl qps` from the last engine snapshot, by QPN
  // (the metrics endpoint; call refresh_engine_stats first for fresh numbers).
  std::vector<proto::QpSummary> qp_summaries() const;

  // Clients whose region took a SIGBUS since the last call (a hole punched into
  // it while the hugepage pool was empty; SigbusGuard absorbed it). The caller
  // disconnects them: their memory no longer matches what the daemon sees.
  std::vector<uint32_t> take_faulted_clients();

 private:
  struct Cq {
    uint32_t slot = 0;
    proto::UniqueFd event_fd;  // our (writing) end of its wakeup pipe, or none
  };
  struct Qp {
    uint32_t qpn = 0;
    uint32_t slot = 0;
    uint32_t send_cq = 0;
    uint32_t recv_cq = 0;
    std::string traffic_class;
    QpAttrs attrs;
    proto::QpSummary last_stats;  // from the engine's kQpStats
  };
  struct Mr {
    uint32_t lkey = 0;
    uint32_t rkey = 0;
    uint64_t offset = 0;
    uint64_t length = 0;
    uint32_t access = 0;
  };
  struct Client {
    uint32_t id = 0;
    PeerCred cred;
    std::string name;
    bool attached = false;
    ControlLimits limits;  // as they were at attach
    RegionPtr region;      // heap: the engine holds its layout pointer
    bool region_faulted = false;
    proto::UniqueFd doorbell;    // the engine's (reading) end of the client's doorbell socket
    std::map<uint32_t, Cq> cqs;  // by CQ id (= slot)
    std::map<uint32_t, Qp> qps;  // by QPN
    std::map<uint32_t, Mr> mrs;  // by lkey
    uint64_t mr_bytes = 0;
    std::vector<bool> qp_slot_busy;  // includes slots awaiting an engine ack
    std::vector<bool> cq_slot_busy;
    proto::UniqueFd cm_wake;               // our (writing) end, kicked when cm_events gains one
    std::deque<proto::CmEvent> cm_events;  // for kCmPollEvent, oldest first
  };
  // Something to release when the engine acks `cookie`.
  struct Pending {
    uint32_t client_id = 0;
    enum Kind { kQpSlot, kCqSlot, kRegion } kind = kQpSlot;
    uint32_t slot = 0;
    uint32_t qpn = 0;
    proto::UniqueFd fd;  // CQ wakeup pipe kept open until the engine forgets it
    RegionPtr region;    // for kRegion
    proto::UniqueFd doorbell;
    uint64_t since_ns = 0;  // kRegion: when the client was released (for the log)
    // kRegion, for the log of flush completions lost to full CQs: who, and whether the
    // daemon's stop released it.
    pid_t pid = 0;
    std::string name;
    bool at_stop = false;
  };

  using Result = std::pair<int, std::string>;  // status, reason
  // A QP the engine failed (retries exhausted, a fatal NAK): one warning with the why.
  void log_qp_error(const Client& c, const EngineEvent& e);
  Outcome attach(Client& c, const proto::AttachRequest& r, uint32_t seq);
  Outcome create_cq(Client& c, const proto::CreateCqRequest& r, uint32_t seq);
  Outcome destroy_cq(Client& c, const proto::DestroyCqRequest& r, uint32_t seq);
  Outcome create_qp(Client& c, const proto::CreateQpRequest& r, uint32_t seq);
  Outcome destroy_qp(Client& c, const proto::DestroyQpRequest& r, uint32_t seq);
  Outcome reg_mr(Client& c, const proto::RegMrRequest& r, uint32_t seq);
  Outcome dereg_mr(Client& c, const proto::DeregMrRequest& r, uint32_t seq);
  Outcome modify_qp(Client& c, const proto::ModifyQpRequest& r, uint32_t seq);
  Outcome query_qp(Client& c, const proto::QueryQpRequest& r, uint32_t seq);
  Outcome list_qps(const proto::ListQpsRequest& r, uint32_t seq);
  Outcome status(uint32_t seq);
  Outcome policy_show(const proto::PolicyShowRequest& r, uint32_t seq);
  Outcome policy_reload(const Client& c, uint32_t seq);
  // Connection manager (the state machine runs in the engine, daemon/cm).
  Outcome cm_request(Client& c, const proto::RequestMessage& req);
  Outcome cm_poll_event(Client& c, uint32_t seq);
  void on_cm_event(const EngineEvent& e);
  bool peer_allowed(const proto::CmAddr& peer) const;  // clients.allowed_peers
  // Sends cmd and waits up to timeout_ms for its ack (the engine answers
  // within a loop iteration). The ack's status, or -ETIMEDOUT / -EOPNOTSUPP.
  int engine_call(EngineCommand cmd, uint32_t timeout_ms, EngineEvent* ack);
  // engine_call's wait for awaited_cookie_'s ack.
  int wait_awaited(uint32_t timeout_ms, EngineEvent* ack);

  // Sends cmd to the engine; returns its cookie, or 0 when there is no engine.
  // A full ring queues it (in order) in backlog_, flushed by process_engine_events().
  uint64_t to_engine(EngineCommand cmd);
  void flush_backlog();
  // owner_gone: the client went away with the QP live (engine_command.h).
  void release_qp(Client& c, Qp& qp, bool owner_gone);
  void release_cq(Client& c, Cq& cq);
  void remove_client(Client& c);
  uint32_t allocate_qpn();
  uint32_t allocate_key_index();
  Client* find(uint32_t id);
  std::optional<proto::QpSummary> qp_summary(uint32_t qpn, uint32_t client_id) const;

  ControlLimits limits_;
  ServiceHooks hooks_;
  EngineChannel* engine_;
  std::map<uint32_t, Client> clients_;
  std::map<uint32_t, uint32_t> qp_owner_;   // QPN -> client id (also QPNs awaiting acks)
  std::map<uint32_t, uint32_t> key_owner_;  // key index -> client id
  std::map<uint64_t, Pending> pending_;     // engine cookie -> what to release
  std::deque<EngineCommand> backlog_;       // commands the full ring did not take yet
  std::vector<uint32_t> to_disconnect_;     // cut off by the engine, connection still open
  // kSnapshot: the engine writes *snapshot_ before acking snapshot_cookie_
  // (0: none in flight; at most one is, so the buffer is never written while read).
  std::unique_ptr<CounterSnapshot> snapshot_;
  uint64_t snapshot_cookie_ = 0;
  // kSetPolicy: the update the engine may still read, until its cookie's ack.
  std::shared_ptr<engine::PolicyUpdate> policy_inflight_;
  uint64_t policy_cookie_ = 0;
  std::vector<std::string> policy_class_names_;  // of policy_inflight_
  std::function<void()> policy_late_applied_;
  // kKernelFrame: the frame the engine may still read, until its cookie's ack.
  std::array<uint8_t, kMaxKernelFrameBytes> kernel_frame_{};
  uint64_t kernel_frame_cookie_ = 0;
  // The engine took a policy whose classes are `names`: QPs whose class is gone are in the
  // default class now.
  void forget_gone_classes(const std::vector<std::string>& names);
  // engine_call(): the cookie waited for (0: none) and its ack once it came.
  uint64_t awaited_cookie_ = 0;
  bool awaited_done_ = false;
  EngineEvent awaited_ack_;
  std::vector<proto::Counter> engine_counters_;  // from the last answered snapshot
  uint32_t next_client_id_ = 1;
  uint32_t next_qpn_;
  uint32_t next_key_index_ = 1;
  uint64_t next_cookie_ = 1;
  uint64_t start_ns_;

  // Counters (read by counters()).
  uint64_t requests_ = 0;
  uint64_t errors_ = 0;
  uint64_t attaches_ = 0;
  uint64_t disconnects_ = 0;
  bool stopping_ = false;  // begin_stop()
  uint64_t refused_clients_ = 0;
  uint64_t engine_ring_full_ = 0;
  uint64_t region_faults_ = 0;
  uint64_t unguarded_regions_ = 0;
  uint64_t clients_cut_off_ = 0;
  uint64_t qps_failed_ = 0;  // QPs the engine moved to ERROR itself (each logged)
  uint64_t snapshots_ = 0;
  uint64_t snapshot_timeouts_ = 0;
  uint64_t cm_events_ = 0;
  uint64_t cm_events_dropped_ = 0;  // a client's queue was full, or it was gone
  uint64_t cm_policy_rejects_ = 0;  // requests from peers outside cm_allowed_peers
  uint64_t cm_quota_rejects_ = 0;   // requests for a client whose event queue was full
  uint64_t engine_call_timeouts_ = 0;
  uint64_t kernel_frames_ = 0;          // handed to the engine
  uint64_t kernel_frames_dropped_ = 0;  // one was still in flight, or too long
};

}  // namespace conduit::control
