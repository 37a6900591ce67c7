#include "control/control_service.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <random>

#include <spdlog/spdlog.h>

#include "proto/control_codec.h"
#include "shm/doorbell.h"

namespace conduit::control {
namespace {

using proto::MsgType;
using proto::ReplyMessage;

// QPNs 0 and 1 are the InfiniBand special QPs; never hand them out.
constexpr uint32_t kFirstQpn = 2;
// How long an operator request (stats, qps) waits for the engine's snapshot.
// The engine answers within a loop iteration (microseconds; an idle engine is
// woken by the command's eventfd), so this only matters when it is wedged.
constexpr uint32_t kStatsWaitMs = 200;

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

ControlService::Outcome ok(MsgType type, uint32_t seq, proto::ReplyBody body) {
  ControlService::Outcome o;
  o.reply.seq = seq;
  o.reply.type = type;
  o.reply.status = 0;
  o.reply.body = std::move(body);
  return o;
}

ControlService::Outcome fail(MsgType type, uint32_t seq, int code, std::string reason) {
  return ControlService::Outcome{
      proto::make_error_reply(type, seq, code, std::move(reason)), {}, {}};
}

std::string bytes_str(uint64_t b) {
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) return std::to_string(b >> 30) + " GiB";
  if (b >= (1ull << 20) && b % (1ull << 20) == 0) return std::to_string(b >> 20) + " MiB";
  return std::to_string(b) + " bytes";
}

uint32_t first_free(const std::vector<bool>& busy) {
  for (uint32_t i = 0; i < busy.size(); ++i) {
    if (!busy[i]) return i;
  }
  return UINT32_MAX;
}

}  // namespace

ControlService::ControlService(ControlLimits limits, ServiceHooks hooks, EngineChannel* engine)
    : limits_(limits), hooks_(std::move(hooks)), engine_(engine), start_ns_(now_ns()) {
  // A random first QPN makes a restarted daemon unlikely to reuse a QPN a
  // remote peer still has state for.
  std::random_device rd;
  next_qpn_ = kFirstQpn + rd() % (proto::kMax24Bit - kFirstQpn);
}

ControlService::~ControlService() {
  // Regions still in pending_ belong to an engine that never acked; the engine
  // is stopped before the service is destroyed, so releasing them now is safe.
}

ControlService::Client* ControlService::find(uint32_t id) {
  auto it = clients_.find(id);
  return it == clients_.end() ? nullptr : &it->second;
}

uint32_t ControlService::client_count() const {
  uint32_t n = 0;
  for (const auto& [id, c] : clients_) n += c.attached ? 1 : 0;
  return n;
}

uint32_t ControlService::open_client(const PeerCred& cred) {
  if (clients_.size() >= limits_.max_clients) {
    ++refused_clients_;
    return 0;
  }
  uint32_t id = next_client_id_++;
  if (next_client_id_ == 0) next_client_id_ = 1;
  Client& c = clients_[id];
  c.id = id;
  c.cred = cred;
  return id;
}

uint64_t ControlService::to_engine(EngineCommand cmd) {
  if (engine_ == nullptr) return 0;
  cmd.cookie = next_cookie_++;
  // Commands keep their order: once one waits in the backlog, all later ones do.
  if (!backlog_.empty() || !engine_->submit(cmd)) {
    ++engine_ring_full_;
    backlog_.push_back(cmd);
  }
  return cmd.cookie;
}

void ControlService::flush_backlog() {
  while (!backlog_.empty() && engine_->submit(backlog_.front())) backlog_.pop_front();
}

ControlService::Outcome ControlService::handle(uint32_t client_id, const proto::RequestMessage& req,
                                               std::vector<proto::UniqueFd>& fds_in) {
  ++requests_;
  Client* cp = find(client_id);
  const MsgType type = req.type();
  const uint32_t seq = req.seq;
  Outcome out;
  if (cp == nullptr) {
    out = fail(type, seq, -ENOTCONN, "unknown client");
  } else if (!fds_in.empty()) {
    out = fail(type, seq, -EINVAL, "unexpected file descriptor with this request");
  } else {
    Client& c = *cp;
    const bool needs_attach = type != MsgType::kAttach && type != MsgType::kStats &&
                              type != MsgType::kStatus && type != MsgType::kListQps &&
                              type != MsgType::kPolicyShow && type != MsgType::kPolicyReload;
    if (needs_attach && !c.attached) {
      out = fail(type, seq, -ENOTCONN, "attach first: this request needs an attached client");
    } else {
      std::visit(
          [&](const auto& r) {
            using T = std::decay_t<decltype(r)>;
            if constexpr (std::is_same_v<T, proto::AttachRequest>) {
              out = attach(c, r, seq);
            } else if constexpr (std::is_same_v<T, proto::DetachRequest>) {
              remove_client(c);  // keeps the connection; the client may attach again
              out = ok(type, seq, proto::DetachReply{});
            } else if constexpr (std::is_same_v<T, proto::CreateCqRequest>) {
              out = create_cq(c, r, seq);
            } else if constexpr (std::is_same_v<T, proto::DestroyCqRequest>) {
              out = destroy_cq(c, r, seq);
            } else if constexpr (std::is_same_v<T, proto::CreateQpRequest>) {
              out = create_qp(c, r, seq);
            } else if constexpr (std::is_same_v<T, proto::DestroyQpRequest>) {
              out = destroy_qp(c, r, seq);
            } else if constexpr (std::is_same_v<T, proto::RegMrRequest>) {
              out = reg_mr(c, r, seq);
            } else if constexpr (std::is_same_v<T, proto::DeregMrRequest>) {
              out = dereg_mr(c, r, seq);
            } else if constexpr (std::is_same_v<T, proto::ModifyQpRequest>) {
              out = modify_qp(c, r, seq);
            } else if constexpr (std::is_same_v<T, proto::QueryQpRequest>) {
              out = query_qp(c, r, seq);
            } else if constexpr (std::is_same_v<T, proto::StatsRequest>) {
              refresh_engine_stats(kStatsWaitMs);
              out = ok(type, seq, proto::StatsReply{counters()});
            } else if constexpr (std::is_same_v<T, proto::StatusRequest>) {
              out = status(seq);
            } else if constexpr (std::is_same_v<T, proto::ListQpsRequest>) {
              // Later pages reuse the first page's snapshot: one consistent table.
              if (r.start_qpn == 0) refresh_engine_stats(kStatsWaitMs);
              out = list_qps(r, seq);
            } else if constexpr (std::is_same_v<T, proto::PolicyShowRequest>) {
              out = policy_show(r, seq);
            } else if constexpr (std::is_same_v<T, proto::PolicyReloadRequest>) {
              out = policy_reload(c, seq);
            } else if constexpr (std::is_same_v<T, proto::CmPollEventRequest>) {
              out = cm_poll_event(c, seq);
            } else {
              out = cm_request(c, req);
            }
          },
          req.body);
    }
  }
  fds_in.clear();  // anything not taken is closed here
  if (out.reply.status < 0) ++errors_;
  return out;
}

ControlService::Outcome ControlService::attach(Client& c, const proto::AttachRequest& r,
                                               uint32_t seq) {
  const MsgType t = MsgType::kAttach;
  if (c.attached) return fail(t, seq, -EALREADY, "already attached on this connection");
  for (const auto& [cookie, p] : pending_) {
    (void)cookie;
    // Its slots come free with these acks: a new attachment must not hand them out before
    // (two QPs on one ring), nor see them freed under it.
    if (p.client_id == c.id) {
      return fail(t, seq, -EBUSY,
                  "the engine is still releasing this connection's previous attachment; retry");
    }
  }
  if (r.shm_abi_version != CONDUIT_SHM_ABI_VERSION) {
    return fail(t, seq, -EPROTONOSUPPORT,
                "ABI mismatch: libconduit uses shared-memory ABI " +
                    std::to_string(r.shm_abi_version) + ", conduitd speaks " +
                    std::to_string(CONDUIT_SHM_ABI_VERSION) +
                    "; rebuild the application against the installed libconduit");
  }
  const uint64_t arena = r.region_bytes == 0 ? limits_.default_region_bytes : r.region_bytes;
  if (arena > limits_.max_arena_bytes) {
    return fail(t, seq, -EDQUOT,
                "quota exceeded: asked for " + bytes_str(arena) +
                    " of registrable memory, the per-client limit is " +
                    bytes_str(limits_.max_arena_bytes) +
                    " (policy: clients.quotas.max_registered_memory)");
  }
  shm::RegionConfig cfg;
  cfg.max_qps = limits_.max_qps;
  cfg.max_cqs = limits_.max_cqs;
  cfg.sq_depth = limits_.sq_depth;
  cfg.rq_depth = limits_.rq_depth;
  cfg.cq_depth = limits_.cq_depth;
  cfg.arena_bytes = arena;
  cfg.huge_pages = limits_.huge_pages;
  cfg.name = "conduit-client";
  RegionPtr region(new shm::Region);
  if (int rc = shm::Region::create(cfg, region.get()); rc < 0) {
    return fail(t, seq, rc,
                std::string("cannot create the shared-memory region (") + std::strerror(-rc) +
                    "); check memlock limits (LimitMEMLOCK) and free memory");
  }
  // The client holds the region's fd and could punch holes into it; see sigbus_guard.h.
  region.get_deleter().guard_slot =
      SigbusGuard::guard(region->base(), region->size(), region->layout().page_size);
  if (region.get_deleter().guard_slot < 0) {
    ++unguarded_regions_;
    spdlog::warn("control: client {}'s region is not SIGBUS-guarded (guard table full)", c.id);
  }
  // The client gets the doorbell's writing end and the CM events' reading end; conduitd
  // keeps the others.
  shm::WakeFd doorbell_ours, doorbell_theirs, cm_ours, cm_theirs;
  if (int rc = shm::WakeFd::create(shm::WakeFd::Kind::kSocket, &doorbell_theirs, &doorbell_ours);
      rc < 0) {
    return fail(t, seq, rc,
                std::string("cannot create the doorbell socket: ") + std::strerror(-rc));
  }
  if (int rc = shm::WakeFd::create(shm::WakeFd::Kind::kPipe, &cm_ours, &cm_theirs); rc < 0) {
    return fail(t, seq, rc, std::string("cannot create the CM event pipe: ") + std::strerror(-rc));
  }
  c.region = std::move(region);
  c.doorbell.reset(doorbell_ours.release());
  c.cm_wake.reset(cm_ours.release());
  c.cm_events.clear();
  c.name = r.client_name;
  c.attached = true;
  spdlog::info("control: client {} attached (pid {}, uid {}, name '{}', region {} bytes)", c.id,
               c.cred.pid, c.cred.uid, c.name, c.region->size());
  c.qp_slot_busy.assign(limits_.max_qps, false);
  c.cq_slot_busy.assign(limits_.max_cqs, false);
  ++attaches_;

  EngineCommand cmd;
  cmd.op = EngineOp::kAddClient;
  cmd.client_id = c.id;
  cmd.region = c.region->base();
  cmd.layout = &c.region->layout();
  cmd.doorbell_fd = c.doorbell.get();
  to_engine(cmd);

  proto::AttachReply rep;
  rep.client_id = c.id;
  rep.shm_abi_version = CONDUIT_SHM_ABI_VERSION;
  rep.region_bytes = c.region->size();
  rep.max_qps = limits_.max_qps;
  rep.max_cqs = limits_.max_cqs;
  rep.max_mrs = limits_.max_mrs;
  rep.max_mr_bytes = limits_.max_mr_bytes;
  c.limits = limits_;
  Outcome o = ok(t, seq, rep);
  o.fds = {c.region->fd()};
  o.handed_over.emplace_back(doorbell_theirs.release());
  o.handed_over.emplace_back(cm_theirs.release());
  return o;
}

ControlService::Outcome ControlService::create_cq(Client& c, const proto::CreateCqRequest& r,
                                                  uint32_t seq) {
  const MsgType t = MsgType::kCreateCq;
  if (c.cqs.size() >= c.limits.max_cqs) {
    return fail(t, seq, -EDQUOT,
                "quota exceeded: " + std::to_string(c.limits.max_cqs) +
                    " CQs per client (policy: clients.quotas.max_cqs)");
  }
  const uint32_t depth = c.region->layout().cq_depth;
  if (r.entries > depth) {
    return fail(t, seq, -EINVAL,
                "CQ of " + std::to_string(r.entries) + " entries is deeper than this client's " +
                    std::to_string(depth) +
                    "-entry CQ rings (policy: clients.quotas.max_cqe, as it was at attach)");
  }
  shm::WakeFd wake_ours, wake_theirs;
  if (r.wants_wakeup) {
    if (int rc = shm::WakeFd::create(shm::WakeFd::Kind::kPipe, &wake_ours, &wake_theirs); rc < 0) {
      return fail(t, seq, rc,
                  std::string("cannot create the CQ's wakeup pipe: ") + std::strerror(-rc));
    }
  }
  const uint32_t slot = first_free(c.cq_slot_busy);
  if (slot == UINT32_MAX) {
    return fail(t, seq, -EBUSY, "every CQ slot is still being released by the engine; retry");
  }
  c.cq_slot_busy[slot] = true;
  c.region->reset_cq_ring(slot, 0);
  Cq& cq = c.cqs[slot];
  cq.slot = slot;
  cq.event_fd.reset(wake_ours.release());  // -1 without a wakeup

  EngineCommand cmd;
  cmd.op = EngineOp::kAddCq;
  cmd.client_id = c.id;
  cmd.cq_slot = slot;
  cmd.event_fd = cq.event_fd.get();
  to_engine(cmd);
  Outcome o = ok(t, seq, proto::CreateCqReply{slot, depth});
  if (wake_theirs.valid()) o.handed_over.emplace_back(wake_theirs.release());
  return o;
}

ControlService::Outcome ControlService::destroy_cq(Client& c, const proto::DestroyCqRequest& r,
                                                   uint32_t seq) {
  const MsgType t = MsgType::kDestroyCq;
  auto it = c.cqs.find(r.cq_id);
  if (it == c.cqs.end()) return fail(t, seq, -ENOENT, "no CQ " + std::to_string(r.cq_id));
  for (const auto& [qpn, qp] : c.qps) {
    if (qp.send_cq == r.cq_id || qp.recv_cq == r.cq_id) {
      return fail(t, seq, -EBUSY,
                  "CQ " + std::to_string(r.cq_id) + " is still used by QP " + std::to_string(qpn) +
                      "; destroy the QP first");
    }
  }
  release_cq(c, it->second);
  c.cqs.erase(it);
  return ok(t, seq, proto::DestroyCqReply{});
}

void ControlService::release_cq(Client& c, Cq& cq) {
  EngineCommand cmd;
  cmd.op = EngineOp::kRemoveCq;
  cmd.client_id = c.id;
  cmd.cq_slot = cq.slot;
  const uint64_t cookie = to_engine(cmd);
  if (cookie == 0) {  // no engine: nobody else uses the slot
    c.cq_slot_busy[cq.slot] = false;
    return;
  }
  Pending& p = pending_[cookie];
  p.client_id = c.id;
  p.kind = Pending::kCqSlot;
  p.slot = cq.slot;
  p.fd = std::move(cq.event_fd);
}

ControlService::Outcome ControlService::create_qp(Client& c, const proto::CreateQpRequest& r,
                                                  uint32_t seq) {
  const MsgType t = MsgType::kCreateQp;
  if (c.qps.size() >= c.limits.max_qps) {
    return fail(t, seq, -EDQUOT,
                "quota exceeded: " + std::to_string(c.limits.max_qps) +
                    " QPs per client (policy: clients.quotas.max_qps)");
  }
  if (!c.cqs.contains(r.send_cq) || !c.cqs.contains(r.recv_cq)) {
    return fail(t, seq, -ENOENT,
                "no CQ " + std::to_string(c.cqs.contains(r.send_cq) ? r.recv_cq : r.send_cq));
  }
  const auto& l = c.region->layout();
  if (r.sq_entries > l.sq_depth || r.rq_entries > l.rq_depth) {
    return fail(t, seq, -EINVAL,
                "queue deeper than this client's rings (send " + std::to_string(l.sq_depth) +
                    ", receive " + std::to_string(l.rq_depth) +
                    "; policy: clients.quotas.max_send_wr / max_recv_wr, as they were at attach)");
  }
  if (!r.traffic_class.empty() && hooks_.class_exists && !hooks_.class_exists(r.traffic_class)) {
    return fail(t, seq, -ENOENT,
                "traffic class '" + r.traffic_class + "' is not defined in the policy");
  }
  const uint32_t slot = first_free(c.qp_slot_busy);
  if (slot == UINT32_MAX) {
    return fail(t, seq, -EBUSY, "every QP slot is still being released by the engine; retry");
  }
  const uint32_t qpn = allocate_qpn();
  if (qpn == 0) return fail(t, seq, -ENOSPC, "no free QP numbers");
  c.qp_slot_busy[slot] = true;
  c.region->reset_qp_rings(slot, 0);
  qp_owner_[qpn] = c.id;
  Qp& qp = c.qps[qpn];
  qp.qpn = qpn;
  qp.slot = slot;
  qp.send_cq = r.send_cq;
  qp.recv_cq = r.recv_cq;
  qp.traffic_class = r.traffic_class;

  EngineCommand cmd;
  cmd.op = EngineOp::kAddQp;
  cmd.client_id = c.id;
  cmd.qpn = qpn;
  cmd.qp_slot = slot;
  cmd.send_cq = r.send_cq;
  cmd.recv_cq = r.recv_cq;
  std::memcpy(cmd.traffic_class, r.traffic_class.data(), r.traffic_class.size());
  to_engine(cmd);
  return ok(t, seq, proto::CreateQpReply{qpn, slot, l.sq_depth, l.rq_depth});
}

uint32_t ControlService::allocate_qpn() {
  for (uint32_t tries = 0; tries < proto::kMax24Bit; ++tries) {
    uint32_t q = next_qpn_;
    next_qpn_ = next_qpn_ >= proto::kMax24Bit ? kFirstQpn : next_qpn_ + 1;
    if (!qp_owner_.contains(q)) return q;
  }
  return 0;
}

ControlService::Outcome ControlService::destroy_qp(Client& c, const proto::DestroyQpRequest& r,
                                                   uint32_t seq) {
  auto it = c.qps.find(r.qpn);
  if (it == c.qps.end()) {
    return fail(MsgType::kDestroyQp, seq, -ENOENT, "no QP " + std::to_string(r.qpn));
  }
  release_qp(c, it->second, /*owner_gone=*/false);
  c.qps.erase(it);
  return ok(MsgType::kDestroyQp, seq, proto::DestroyQpReply{});
}

void ControlService::release_qp(Client& c, Qp& qp, bool owner_gone) {
  EngineCommand cmd;
  cmd.op = EngineOp::kRemoveQp;
  cmd.client_id = c.id;
  cmd.qpn = qp.qpn;
  cmd.qp_slot = qp.slot;
  cmd.owner_gone = owner_gone;
  const uint64_t cookie = to_engine(cmd);
  if (cookie == 0) {
    c.qp_slot_busy[qp.slot] = false;
    qp_owner_.erase(qp.qpn);
    return;
  }
  Pending& p = pending_[cookie];
  p.client_id = c.id;
  p.kind = Pending::kQpSlot;
  p.slot = qp.slot;
  p.qpn = qp.qpn;
}

uint32_t ControlService::allocate_key_index() {
  // An index below proto::kClientKeyIndexEnd (keys above are the engine's own); the low
  // byte of a key is random so a stale key is unlikely to name a new MR (the verbs "key"
  // byte plays the same role).
  for (uint32_t tries = 0; tries < proto::kClientKeyIndexEnd; ++tries) {
    uint32_t k = next_key_index_;
    if (++next_key_index_ == proto::kClientKeyIndexEnd) next_key_index_ = 1;
    if (!key_owner_.contains(k)) return k;
  }
  return 0;
}

ControlService::Outcome ControlService::reg_mr(Client& c, const proto::RegMrRequest& r,
                                               uint32_t seq) {
  const MsgType t = MsgType::kRegMr;
  const auto& l = c.region->layout();
  // The decoder proved offset + length does not wrap.
  if (r.offset < l.arena_offset || r.offset + r.length > l.arena_offset + l.arena_size) {
    return fail(t, seq, -EFAULT,
                "memory region [" + std::to_string(r.offset) + ", +" + std::to_string(r.length) +
                    ") is outside this client's registrable memory [" +
                    std::to_string(l.arena_offset) + ", +" + std::to_string(l.arena_size) + ")");
  }
  if (c.mrs.size() >= c.limits.max_mrs) {
    return fail(t, seq, -EDQUOT,
                "quota exceeded: " + std::to_string(c.limits.max_mrs) +
                    " memory regions per client (policy: clients.quotas.max_mrs)");
  }
  if (r.length > c.limits.max_mr_length) {
    return fail(t, seq, -EDQUOT,
                "quota exceeded: a memory region of " + bytes_str(r.length) +
                    ", the largest allowed is " + bytes_str(c.limits.max_mr_length) +
                    " (policy: clients.quotas.max_region_size)");
  }
  if (c.mr_bytes + r.length > c.limits.max_mr_bytes) {
    return fail(t, seq, -EDQUOT,
                "quota exceeded: registering " + bytes_str(r.length) + " would make " +
                    bytes_str(c.mr_bytes + r.length) + " registered, the limit is " +
                    bytes_str(c.limits.max_mr_bytes) +
                    " (policy: clients.quotas.max_registered_memory)");
  }
  const uint32_t index = allocate_key_index();
  if (index == 0) return fail(t, seq, -ENOSPC, "no free memory keys");
  static thread_local std::mt19937 rng{std::random_device{}()};
  Mr mr;
  // Both keys name the key index in their upper bits; the low byte of each is drawn
  // independently, and the rkey's is redrawn until it differs from the lkey's, so the key a
  // client hands to peers never equals the one it uses locally.
  mr.lkey = (index << 8) | (rng() & 0xFF);
  do {
    mr.rkey = (index << 8) | (rng() & 0xFF);
  } while (mr.rkey == mr.lkey);
  mr.offset = r.offset;
  mr.length = r.length;
  mr.access = r.access;
  key_owner_[index] = c.id;
  c.mrs[mr.lkey] = mr;
  c.mr_bytes += r.length;

  EngineCommand cmd;
  cmd.op = EngineOp::kAddMr;
  cmd.client_id = c.id;
  cmd.lkey = mr.lkey;
  cmd.rkey = mr.rkey;
  cmd.access = mr.access;
  cmd.region_offset = mr.offset;
  cmd.length = mr.length;
  cmd.iova = mr.offset;  // peers address an MR by its region offset
  to_engine(cmd);
  return ok(t, seq, proto::RegMrReply{mr.lkey, mr.rkey, mr.offset});
}

// How long a deregistration waits for the engine to drop the MR (it takes commands every
// loop: microseconds, or one idle sleep).
constexpr uint32_t kMrAckWaitMs = 1000;

ControlService::Outcome ControlService::dereg_mr(Client& c, const proto::DeregMrRequest& r,
                                                 uint32_t seq) {
  auto it = c.mrs.find(r.lkey);
  if (it == c.mrs.end()) {
    return fail(MsgType::kDeregMr, seq, -ENOENT,
                "no memory region with lkey " + std::to_string(r.lkey));
  }
  EngineCommand cmd;
  cmd.op = EngineOp::kRemoveMr;
  cmd.client_id = c.id;
  cmd.lkey = it->second.lkey;
  cmd.rkey = it->second.rkey;
  // The reply waits for the engine's ack: libconduit hands the MR's memory out again as soon
  // as it has the reply, and until the engine drops the MR a peer's WRITE to the old rkey
  // still lands there (ibv_dereg_mr, too, returns once the device has dropped the MR).
  int rc = 0;
  if (engine_ != nullptr) {
    EngineEvent ack;
    rc = engine_call(cmd, kMrAckWaitMs, &ack);
  }
  // Gone from the service either way: a late ack only confirms it. (Key indices are not
  // reused until 2^24 registrations later.)
  key_owner_.erase(it->second.lkey >> 8);
  c.mr_bytes -= it->second.length;
  c.mrs.erase(it);
  if (rc == -ETIMEDOUT) {
    return fail(MsgType::kDeregMr, seq, -ETIMEDOUT,
                "the engine did not confirm the memory region's removal within " +
                    std::to_string(kMrAckWaitMs) +
                    " ms: until it does, peers' RDMA may still reach that memory");
  }
  return ok(MsgType::kDeregMr, seq, proto::DeregMrReply{});
}

ControlService::Outcome ControlService::modify_qp(Client& c, const proto::ModifyQpRequest& r,
                                                  uint32_t seq) {
  const MsgType t = MsgType::kModifyQp;
  auto it = c.qps.find(r.qpn);
  if (it == c.qps.end()) return fail(t, seq, -ENOENT, "no QP " + std::to_string(r.qpn));
  std::string why;
  if (int rc = check_qp_transition(it->second.attrs.state, r.attr, why); rc < 0) {
    return fail(t, seq, rc, "QP " + std::to_string(r.qpn) + ": " + why);
  }
  EngineCommand cmd;
  cmd.op = EngineOp::kModifyQp;
  cmd.client_id = c.id;
  cmd.qpn = r.qpn;
  cmd.attr = r.attr;
  to_engine(cmd);
  apply_qp_transition(it->second.attrs, r.attr);
  return ok(t, seq, proto::ModifyQpReply{});
}

ControlService::Outcome ControlService::query_qp(Client& c, const proto::QueryQpRequest& r,
                                                 uint32_t seq) {
  auto it = c.qps.find(r.qpn);
  if (it == c.qps.end()) {
    return fail(MsgType::kQueryQp, seq, -ENOENT, "no QP " + std::to_string(r.qpn));
  }
  proto::QueryQpReply rep;
  rep.qpn = r.qpn;
  rep.traffic_class = it->second.traffic_class;
  rep.attr = it->second.attrs.attr;
  rep.attr.state = it->second.attrs.state;
  rep.attr.mask |= proto::kAttrState;
  return ok(MsgType::kQueryQp, seq, rep);
}

ControlService::Outcome ControlService::list_qps(const proto::ListQpsRequest& r, uint32_t seq) {
  proto::ListQpsReply rep;
  for (auto it = qp_owner_.lower_bound(r.start_qpn); it != qp_owner_.end(); ++it) {
    if (rep.qps.size() == r.max_entries) {
      rep.next_qpn = it->first;
      break;
    }
    if (auto s = qp_summary(it->first, it->second)) rep.qps.push_back(std::move(*s));
  }
  return ok(MsgType::kListQps, seq, rep);
}

std::optional<proto::QpSummary> ControlService::qp_summary(uint32_t qpn, uint32_t client_id) const {
  auto ci = clients_.find(client_id);
  if (ci == clients_.end()) return std::nullopt;
  const Client* c = &ci->second;
  auto q = c->qps.find(qpn);
  if (q == c->qps.end()) return std::nullopt;  // being released
  proto::QpSummary s = q->second.last_stats;
  s.qpn = q->first;
  s.client_id = c->id;
  s.pid = static_cast<uint32_t>(c->cred.pid);
  s.state = q->second.attrs.state;
  s.dest_qpn = q->second.attrs.attr.dest_qpn;
  s.dgid = q->second.attrs.attr.dgid;
  s.traffic_class = q->second.traffic_class;
  // A QP created without a class is in the default class: name it (a reload may rename it).
  if (s.traffic_class.empty() && hooks_.default_class) s.traffic_class = hooks_.default_class();
  return s;
}

std::vector<proto::QpSummary> ControlService::qp_summaries() const {
  std::vector<proto::QpSummary> v;
  v.reserve(qp_owner_.size());
  for (const auto& [qpn, owner] : qp_owner_) {
    if (auto s = qp_summary(qpn, owner)) v.push_back(std::move(*s));
  }
  return v;
}

ControlService::Outcome ControlService::status(uint32_t seq) {
  proto::StatusReply rep;
  rep.version = hooks_.version;
  rep.uptime_s = (now_ns() - start_ns_) / 1'000'000'000ull;
  rep.engine_running = engine_ != nullptr ? 1 : 0;
  if (engine_ == nullptr) {
    rep.engine_state = "control plane only: no engine in this build, QPs do not move data";
  } else {
    rep.engine_state = hooks_.engine_state ? hooks_.engine_state() : "engine attached";
    if (rep.engine_state.size() > proto::kMaxReasonBytes) {
      rep.engine_state.resize(proto::kMaxReasonBytes);
    }
  }
  rep.clients = client_count();
  rep.qps = qp_count();
  rep.policy_path = hooks_.policy_path;
  return ok(MsgType::kStatus, seq, rep);
}

ControlService::Outcome ControlService::policy_show(const proto::PolicyShowRequest& r,
                                                    uint32_t seq) {
  if (!hooks_.policy_text) {
    return fail(MsgType::kPolicyShow, seq, -EOPNOTSUPP, "no policy loaded");
  }
  const std::string text = hooks_.policy_text();
  proto::PolicyShowReply rep;
  rep.total_bytes = text.size();
  if (r.offset < text.size()) rep.chunk = text.substr(r.offset, proto::kMaxTextChunkBytes);
  return ok(MsgType::kPolicyShow, seq, rep);
}

ControlService::Outcome ControlService::policy_reload(const Client& c, uint32_t seq) {
  const MsgType t = MsgType::kPolicyReload;
  if (c.cred.uid != 0 && c.cred.uid != ::geteuid()) {
    return fail(t, seq, -EPERM, "policy reload needs root or the user conduitd runs as");
  }
  if (!hooks_.reload_policy) return fail(t, seq, -EOPNOTSUPP, "this daemon cannot reload");
  std::string message;
  const int rc = hooks_.reload_policy(message);
  if (rc < 0) return fail(t, seq, rc, message);
  return ok(t, seq, proto::PolicyReloadReply{message});
}

void ControlService::remove_client(Client& c) {
  if (!c.attached) return;
  // QPs first (they reference CQs), then CQs, MRs, and finally the region.
  for (auto& [qpn, qp] : c.qps) release_qp(c, qp, /*owner_gone=*/true);
  c.qps.clear();
  for (auto& [id, cq] : c.cqs) release_cq(c, cq);
  c.cqs.clear();
  for (auto& [lkey, mr] : c.mrs) key_owner_.erase(lkey >> 8);
  c.mrs.clear();
  c.mr_bytes = 0;
  c.attached = false;
  c.cm_events.clear();
  c.cm_wake.reset();  // the engine forgets its listeners and connections (kRemoveClient)

  EngineCommand cmd;
  cmd.op = EngineOp::kRemoveClient;
  cmd.client_id = c.id;
  const uint64_t cookie = to_engine(cmd);
  if (cookie == 0) {  // no engine: unmap now
    c.region.reset();
    c.doorbell.reset();
    return;
  }
  Pending& p = pending_[cookie];
  p.client_id = c.id;
  p.kind = Pending::kRegion;
  p.region = std::move(c.region);
  p.doorbell = std::move(c.doorbell);
  p.since_ns = now_ns();
  p.pid = c.cred.pid;
  p.name = c.name;
  p.at_stop = stopping_;
}

void ControlService::close_client(uint32_t client_id) {
  Client* c = find(client_id);
  if (c == nullptr) return;
  ++disconnects_;
  remove_client(*c);
  clients_.erase(client_id);
}

void ControlService::process_engine_events() {
  if (engine_ == nullptr) return;
  flush_backlog();
  EngineEvent ev[32];
  uint32_t n;
  while ((n = engine_->poll_events(ev, 32)) > 0) {
    for (uint32_t i = 0; i < n; ++i) {
      const EngineEvent& e = ev[i];
      if (e.kind == EngineEventKind::kAck && e.cookie == snapshot_cookie_ &&
          snapshot_cookie_ != 0) {
        // Pairs with the engine's release in post_event(): *snapshot_ is complete.
        engine_counters_.clear();
        for (uint32_t k = 0; k < snapshot_->count && k < CounterSnapshot::kMaxCounters; ++k) {
          const CounterSnapshot::Item& item = snapshot_->items[k];
          if (item.name != nullptr) engine_counters_.push_back({item.name, item.value});
        }
        snapshot_cookie_ = 0;
        ++snapshots_;
        continue;
      }
      if (e.kind == EngineEventKind::kAck && e.cookie == policy_cookie_ && policy_cookie_ != 0) {
        policy_cookie_ = 0;
        policy_inflight_.reset();
        if (e.cookie != awaited_cookie_) {
          // A kSetPolicy ack that came after set_engine_policy stopped waiting.
          std::function<void()> late = std::move(policy_late_applied_);
          policy_late_applied_ = {};
          if (e.status == 0) {
            spdlog::info("control: the engine took the reloaded policy late");
            forget_gone_classes(policy_class_names_);
            if (late) late();
          } else {
            spdlog::warn("control: the engine refused the reloaded policy late: {}",
                         std::strerror(-e.status));
          }
          continue;
        }
      }
      if (e.kind == EngineEventKind::kAck && e.cookie == kernel_frame_cookie_ &&
          kernel_frame_cookie_ != 0) {
        kernel_frame_cookie_ = 0;  // the buffer is free again
        continue;
      }
      if (e.kind == EngineEventKind::kAck && e.cookie == awaited_cookie_ && awaited_cookie_ != 0) {
        awaited_ack_ = e;
        awaited_done_ = true;
        awaited_cookie_ = 0;
        continue;
      }
      if (e.kind == EngineEventKind::kCmEvent) {
        on_cm_event(e);
        continue;
      }
      if (e.kind == EngineEventKind::kAck) {
        auto it = pending_.find(e.cookie);
        if (it == pending_.end()) continue;
        Pending& p = it->second;
        Client* c = find(p.client_id);
        if (p.kind == Pending::kQpSlot) {
          qp_owner_.erase(p.qpn);
          if (c != nullptr && p.slot < c->qp_slot_busy.size()) c->qp_slot_busy[p.slot] = false;
        } else if (p.kind == Pending::kCqSlot) {
          if (c != nullptr && p.slot < c->cq_slot_busy.size()) c->cq_slot_busy[p.slot] = false;
        }
        const bool region = p.kind == Pending::kRegion;
        const uint32_t client_id = p.client_id;
        const uint64_t since_ns = p.since_ns;
        if (region && e.cqes_lost > 0) {
          // Once per client: the engine's ack of its release carries the total over its
          // QPs' removals. At a stop the client is still there, polling: its WRs will never
          // complete (its CQ reports the overrun: conduit_poll_cq's -EOVERFLOW).
          spdlog::log(p.at_stop ? spdlog::level::warn : spdlog::level::info,
                      "control: client {} (pid {}, '{}'): {} flush completions of its "
                      "outstanding WRs lost{}: its CQ was full; those WRs will never complete "
                      "(the CQ reports an overrun)",
                      client_id, p.pid, p.name, e.cqes_lost,
                      p.at_stop ? " at the daemon's stop" : " at its release");
        }
        pending_.erase(it);  // unmaps a region, closes fds
        if (region) {
          spdlog::info(
              "control: client {} released: QPs destroyed, region unmapped {} us after "
              "its release began",
              client_id, (now_ns() - since_ns) / 1000);
        }
      } else if (e.kind == EngineEventKind::kClientBroken) {
        ++clients_cut_off_;
        const Client* c = find(e.client_id);
        spdlog::warn(
            "control: client {} (pid {}) wrote impossible ring indices: the engine cut "
            "it off; disconnecting it",
            e.client_id, c != nullptr ? c->cred.pid : 0);
        to_disconnect_.push_back(e.client_id);
      } else {
        auto owner = qp_owner_.find(e.qpn);
        if (owner == qp_owner_.end()) continue;
        Client* c = find(owner->second);
        if (c == nullptr) continue;
        auto q = c->qps.find(e.qpn);
        if (q == c->qps.end()) continue;
        q->second.attrs.state = e.state;
        if (e.kind == EngineEventKind::kQpState && e.error.cause != nullptr) {
          log_qp_error(*c, e);
        }
        if (e.kind == EngineEventKind::kQpStats) {
          proto::QpSummary& s = q->second.last_stats;
          s.rate_bps = e.rate_bps;
          s.alpha_ppm = e.alpha_ppm;
          s.cnps_rx = e.cnps_rx;
          s.cnps_tx = e.cnps_tx;
          s.retransmits = e.retransmits;
          s.tx_bytes = e.tx_bytes;
          s.rx_bytes = e.rx_bytes;
        }
      }
    }
  }
}

void ControlService::log_qp_error(const Client& c, const EngineEvent& e) {
  const QpErrorInfo& x = e.error;
  ++qps_failed_;
  if (!x.requester) {
    spdlog::warn(
        "qp 0x{:06x} (client {}, pid {}, '{}'): error state: {}, PSN 0x{:06x} from peer QP "
        "0x{:06x}",
        e.qpn, c.id, c.cred.pid, c.name, x.cause, x.psn, x.peer_qpn);
    return;
  }
  const std::string since =
      x.since_progress_ns == UINT64_MAX
          ? std::string("never acknowledged anything")
          : fmt::format("last acknowledgement {} ms before", x.since_progress_ns / 1'000'000);
  // The numbers an operator needs to tell a dead or stalled peer (timeouts, nothing
  // acknowledged) from a lossy path (NAKs, retransmissions) or a receiver out of buffers (RNR).
  spdlog::warn(
      "qp 0x{:06x} (client {}, pid {}, '{}'): error state: {} talking to peer QP 0x{:06x}; {} "
      "(ACK timeout {} ms, retry_cnt {}); oldest unacknowledged PSN 0x{:06x}, next 0x{:06x}; "
      "{} timeouts, {} NAKs, {} RNR NAKs, {} packets retransmitted, {} B sent, {} B received",
      e.qpn, c.id, c.cred.pid, c.name, x.cause, x.peer_qpn, since, x.ack_timeout_ns / 1'000'000,
      x.retry_cnt, x.psn, x.next_psn, x.timeouts, x.naks_received, x.rnr_naks_received,
      e.retransmits, e.tx_bytes, e.rx_bytes);
}

std::vector<uint32_t> ControlService::take_faulted_clients() {
  std::vector<uint32_t> out;
  for (auto& [id, c] : clients_) {
    if (!c.attached || c.region_faulted || !c.region) continue;
    const uint64_t n = SigbusGuard::faults(c.region.get_deleter().guard_slot);
    if (n == 0) continue;
    c.region_faulted = true;
    region_faults_ += n;
    out.push_back(id);
  }
  return out;
}

std::vector<proto::Counter> ControlService::counters() const {
  uint64_t cqs = 0, mrs = 0, mr_bytes = 0, attached = 0;
  for (const auto& [id, c] : clients_) {
    cqs += c.cqs.size();
    mrs += c.mrs.size();
    mr_bytes += c.mr_bytes;
    attached += c.attached ? 1 : 0;
  }
  std::vector<proto::Counter> v = {
      {"control.connections", clients_.size()},
      {"control.clients_attached", attached},
      {"control.qps", qp_owner_.size()},
      {"control.cqs", cqs},
      {"control.mrs", mrs},
      {"control.mr_bytes", mr_bytes},
      {"control.requests", requests_},
      {"control.errors", errors_},
      {"control.attaches", attaches_},
      {"control.disconnects", disconnects_},
      {"control.refused_clients", refused_clients_},
      {"control.engine_ring_full", engine_ring_full_},
      {"control.region_sigbus_faults", region_faults_},
      {"control.unguarded_regions", unguarded_regions_},
      {"control.clients_cut_off", clients_cut_off_},
      {"control.qps_failed", qps_failed_},
      {"control.engine_backlog", backlog_.size()},
      {"control.pending_releases", pending_.size()},
      {"control.engine_snapshots", snapshots_},
      {"control.engine_snapshot_timeouts", snapshot_timeouts_},
      {"control.engine_call_timeouts", engine_call_timeouts_},
      {"control.kernel_frames", kernel_frames_},
      {"control.kernel_frames_dropped", kernel_frames_dropped_},
      {"control.cm_events", cm_events_},
      {"control.cm_events_dropped", cm_events_dropped_},
      {"control.cm_policy_rejects", cm_policy_rejects_},
      {"control.cm_quota_rejects", cm_quota_rejects_},
      {"engine.attached", engine_ != nullptr ? 1u : 0u},
      {"uptime_s", (now_ns() - start_ns_) / 1'000'000'000ull},
  };
  v.insert(v.end(), engine_counters_.begin(), engine_counters_.end());
  if (hooks_.extra_counters) {
    for (auto& c : hooks_.extra_counters()) v.push_back(std::move(c));
  }
  return v;
}

bool ControlService::refresh_engine_stats(uint32_t timeout_ms) {
  if (engine_ == nullptr) return false;
  if (snapshot_cookie_ == 0) {
    if (!snapshot_) snapshot_ = std::make_unique<CounterSnapshot>();
    snapshot_->count = 0;
    EngineCommand cmd;
    cmd.op = EngineOp::kSnapshot;
    cmd.snapshot = snapshot_.get();
    snapshot_cookie_ = to_engine(cmd);
  }
  const uint64_t deadline = now_ns() + uint64_t{timeout_ms} * 1'000'000;
  for (;;) {
    process_engine_events();
    if (snapshot_cookie_ == 0) return true;
    const uint64_t now = now_ns();
    if (now >= deadline) {
      ++snapshot_timeouts_;
      return false;
    }
    // The engine kicks this eventfd with every event it posts.
    pollfd p{engine_->control_wake_fd(), POLLIN, 0};
    const auto left_ms = static_cast<int>((deadline - now + 999'999) / 1'000'000);
    ::poll(&p, 1, left_ms);
    engine_->drain_control_wake();
  }
}

// ---- connection manager ------------------------------------------------------

namespace {

// How long a CM request waits for the engine's ack (it answers within a loop
// iteration; this only matters when the engine is wedged).
constexpr uint32_t kCmAckWaitMs = 2000;
// Events a client has not fetched yet; beyond this the oldest are kept and new ones dropped.
constexpr size_t kMaxCmEventsPerClient = 4096;

uint8_t mtu_enum(uint32_t bytes) {
  uint8_t e = proto::kMinPathMtu;
  while (e < proto::kMaxPathMtu && proto::path_mtu_bytes(e) < bytes) ++e;
  return e;
}

void fill_args(CmArgs& a, const proto::CmQpOffer& o) {
  a.access = o.access;
  a.pmtu_bytes = o.path_mtu == 0 ? 0 : proto::path_mtu_bytes(o.path_mtu);  // 0: the policy's
  a.flags = o.flags;
  a.private_len = static_cast<uint8_t>(o.private_data.size());
  std::copy(o.private_data.begin(), o.private_data.end(), a.private_data);  // may be empty
}

}  // namespace

int ControlService::set_engine_policy(std::shared_ptr<engine::PolicyUpdate> policy,
                                      const std::vector<std::string>& class_names,
                                      uint32_t timeout_ms, std::string& why,
                                      std::function<void()> late_applied) {
  if (engine_ == nullptr) {
    why = "no engine in this daemon";
    return -EOPNOTSUPP;
  }
  process_engine_events();
  if (policy_cookie_ != 0) {
    why = "the engine has not taken the previous reload's classes yet";
    return -EBUSY;
  }
  EngineCommand cmd;
  cmd.op = EngineOp::kSetPolicy;
  cmd.policy = policy.get();
  policy_inflight_ = std::move(policy);
  policy_class_names_ = class_names;
  policy_late_applied_ = std::move(late_applied);
  awaited_done_ = false;
  awaited_cookie_ = policy_cookie_ = to_engine(cmd);
  EngineEvent ack;
  const int rc = wait_awaited(timeout_ms, &ack);
  if (rc == -ETIMEDOUT) {
    why = "the engine did not answer within " + std::to_string(timeout_ms) +
          " ms; it takes the new classes when it runs again";
    return rc;
  }
  policy_late_applied_ = {};
  if (rc < 0) {
    why = "the engine refused them: " + std::string(std::strerror(-rc));
    return rc;
  }
  forget_gone_classes(class_names);
  return 0;
}

void ControlService::kernel_frame(std::span<const uint8_t> frame) {
  if (engine_ == nullptr) return;
  process_engine_events();  // frees the buffer if the last one was taken
  if (kernel_frame_cookie_ != 0 || frame.empty() || frame.size() > kernel_frame_.size()) {
    ++kernel_frames_dropped_;
    return;
  }
  std::memcpy(kernel_frame_.data(), frame.data(), frame.size());
  EngineCommand cmd;
  cmd.op = EngineOp::kKernelFrame;
  cmd.frame = kernel_frame_.data();
  cmd.frame_len = static_cast<uint32_t>(frame.size());
  kernel_frame_cookie_ = to_engine(cmd);
  ++kernel_frames_;
}

void ControlService::forget_gone_classes(const std::vector<std::string>& names) {
  for (auto& [id, c] : clients_) {
    for (auto& [qpn, qp] : c.qps) {
      if (!qp.traffic_class.empty() &&
          std::find(names.begin(), names.end(), qp.traffic_class) == names.end()) {
        qp.traffic_class.clear();
      }
    }
  }
}

int ControlService::engine_call(EngineCommand cmd, uint32_t timeout_ms, EngineEvent* ack) {
  if (engine_ == nullptr) return -EOPNOTSUPP;
  awaited_done_ = false;
  awaited_cookie_ = to_engine(cmd);
  return wait_awaited(timeout_ms, ack);
}

bool ControlService::flush_backlog_for_stop(uint32_t timeout_ms) {
  if (engine_ == nullptr) return true;
  const uint64_t deadline = now_ns() + uint64_t{timeout_ms} * 1'000'000;
  for (;;) {
    process_engine_events();  // flushes, and keeps the event ring from filling
    if (backlog_.empty()) return true;
    if (now_ns() >= deadline) {
      spdlog::warn("control: the engine took no room for {} commands within {} ms of the stop",
                   backlog_.size(), timeout_ms);
      return false;
    }
    // The engine acks what it takes (the control eventfd); 1 ms at most between tries.
    pollfd p{engine_->control_wake_fd(), POLLIN, 0};
    ::poll(&p, 1, 1);
    engine_->drain_control_wake();
  }
}

bool ControlService::await_releases_for_stop(uint32_t timeout_ms) {
  if (engine_ == nullptr) return true;
  const uint64_t deadline = now_ns() + uint64_t{timeout_ms} * 1'000'000;
  auto regions = [this] {
    return std::count_if(pending_.begin(), pending_.end(),
                         [](const auto& kv) { return kv.second.kind == Pending::kRegion; });
  };
  for (;;) {
    process_engine_events();  // an ack erases its client's kRegion entry
    const auto left = regions();
    if (left == 0) return true;
    if (now_ns() >= deadline) {
      spdlog::warn(
          "control: the engine acked no release of {} clients within {} ms of the stop; "
          "closing their connections anyway",
          left, timeout_ms);
      return false;
    }
    pollfd p{engine_->control_wake_fd(), POLLIN, 0};
    ::poll(&p, 1, 1);
    engine_->drain_control_wake();
  }
}

int ControlService::wait_awaited(uint32_t timeout_ms, EngineEvent* ack) {
  const uint64_t deadline = now_ns() + uint64_t{timeout_ms} * 1'000'000;
  for (;;) {
    process_engine_events();
    if (awaited_done_) {
      *ack = awaited_ack_;
      return ack->status;
    }
    const uint64_t now = now_ns();
    if (now >= deadline) {
      awaited_cookie_ = 0;  // a late ack is ignored
      ++engine_call_timeouts_;
      return -ETIMEDOUT;
    }
    pollfd p{engine_->control_wake_fd(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>((deadline - now + 999'999) / 1'000'000));
    engine_->drain_control_wake();
  }
}

ControlService::Outcome ControlService::cm_request(Client& c, const proto::RequestMessage& req) {
  const MsgType t = req.type();
  const uint32_t seq = req.seq;
  if (engine_ == nullptr) {
    return fail(t, seq, -EOPNOTSUPP, "no engine in this daemon: connections need one");
  }
  EngineCommand cmd;
  cmd.client_id = c.id;
  std::string what;
  // The QP a connect or accept names: this client's, not yet connected.
  auto check_qp = [&](uint32_t qpn) -> int {
    auto it = c.qps.find(qpn);
    if (it == c.qps.end()) {
      what = "no QP " + std::to_string(qpn);
      return -ENOENT;
    }
    const proto::QpState st = it->second.attrs.state;
    if (st != proto::QpState::kReset && st != proto::QpState::kInit) {
      what = "QP " + std::to_string(qpn) + " is in " + proto::qp_state_name(st) +
             "; connect or accept a QP in RESET or INIT";
      return -EISCONN;
    }
    return 0;
  };
  if (const auto* r = std::get_if<proto::CmListenRequest>(&req.body)) {
    cmd.op = EngineOp::kCmListen;
    cmd.cm.service = r->service;
    what = "service " + std::to_string(r->service);
  } else if (const auto* r = std::get_if<proto::CmUnlistenRequest>(&req.body)) {
    cmd.op = EngineOp::kCmUnlisten;
    cmd.cm.service = r->service;
    what = "this client does not listen on service " + std::to_string(r->service);
  } else if (const auto* r = std::get_if<proto::CmConnectRequest>(&req.body)) {
    if (int rc = check_qp(r->offer.qpn); rc < 0) return fail(t, seq, rc, what);
    cmd.op = EngineOp::kCmConnect;
    cmd.qpn = r->offer.qpn;
    cmd.cm.peer = r->peer;
    cmd.cm.service = r->service;
    fill_args(cmd.cm, r->offer);
    what = "QP " + std::to_string(r->offer.qpn);
  } else if (const auto* r = std::get_if<proto::CmAcceptRequest>(&req.body)) {
    if (int rc = check_qp(r->offer.qpn); rc < 0) return fail(t, seq, rc, what);
    cmd.op = EngineOp::kCmAccept;
    cmd.qpn = r->offer.qpn;
    cmd.cm.conn = r->conn;
    fill_args(cmd.cm, r->offer);
    what = "request " + std::to_string(r->conn);
  } else if (const auto* r = std::get_if<proto::CmRejectRequest>(&req.body)) {
    if (r->reason != proto::kCmRefused && r->reason != proto::kCmQuota &&
        r->reason != proto::kCmPolicy) {
      return fail(t, seq, -EINVAL, "a listener rejects with refused, quota or policy");
    }
    cmd.op = EngineOp::kCmReject;
    cmd.cm.conn = r->conn;
    cmd.cm.reason = r->reason;
    // The codec allowed at most kMaxCmPrivateBytes.
    cmd.cm.private_len = static_cast<uint8_t>(r->private_data.size());
    std::copy(r->private_data.begin(), r->private_data.end(), cmd.cm.private_data);
    what = "request " + std::to_string(r->conn);
  } else if (const auto* r = std::get_if<proto::CmDisconnectRequest>(&req.body)) {
    if (!c.qps.contains(r->qpn)) return fail(t, seq, -ENOENT, "no QP " + std::to_string(r->qpn));
    cmd.op = EngineOp::kCmDisconnect;
    cmd.qpn = r->qpn;
    what = "QP " + std::to_string(r->qpn);
  } else {
    return fail(t, seq, -EOPNOTSUPP, "not a connection-manager request");
  }
  EngineEvent ack;
  const int rc = engine_call(cmd, kCmAckWaitMs, &ack);
  if (rc < 0) {
    std::string why;
    switch (rc) {
      case -EADDRINUSE:
        why = what + ": another client listens on it";
        break;
      case -ENOSPC:
        why = "the connection manager is full (listeners or connections); " + what;
        break;
      case -ENOENT:
        why = what + ": not found (it timed out, was answered, or is not this client's)";
        break;
      case -EBUSY:
        why = what + " already has a connection";
        break;
      case -EISCONN:
        why = what + " is past INIT; connect or accept a QP in RESET or INIT";
        break;
      case -ENETUNREACH:
        why = "no route to the peer's address (not on-link and no gateway in the policy)";
        break;
      case -ETIMEDOUT:
        why = "the engine did not answer within " + std::to_string(kCmAckWaitMs) + " ms";
        break;
      default:
        why = what + ": " + std::strerror(-rc);
        break;
    }
    return fail(t, seq, rc, why);
  }
  // The engine moved the QP itself (connect: INIT, accept: RTR, disconnect: ERR); the QP
  // table follows, so query_qp and modify_qp's transition checks see the real state. Only
  // forward: an event already processed may have moved it further.
  const auto follow = [&](uint32_t qpn, proto::QpState to) {
    auto q = c.qps.find(qpn);
    if (q == c.qps.end()) return;
    proto::QpState& st = q->second.attrs.state;
    if (to == proto::QpState::kError || st == proto::QpState::kReset ||
        (st == proto::QpState::kInit && to == proto::QpState::kRtr)) {
      st = to;
    }
  };
  switch (t) {
    case MsgType::kCmConnect:
    case MsgType::kCmAccept:
      follow(cmd.qpn, t == MsgType::kCmConnect ? proto::QpState::kInit : proto::QpState::kRtr);
      break;
    case MsgType::kCmDisconnect:
      follow(cmd.qpn, proto::QpState::kError);
      break;
    default:
      break;
  }
  switch (t) {
    case MsgType::kCmListen:
      return ok(t, seq, proto::CmListenReply{});
    case MsgType::kCmUnlisten:
      return ok(t, seq, proto::CmUnlistenReply{});
    case MsgType::kCmConnect:
      return ok(t, seq, proto::CmConnectReply{ack.cm.conn});
    case MsgType::kCmAccept:
      return ok(t, seq, proto::CmAcceptReply{});
    case MsgType::kCmReject:
      return ok(t, seq, proto::CmRejectReply{});
    default:
      return ok(t, seq, proto::CmDisconnectReply{});
  }
}

ControlService::Outcome ControlService::cm_poll_event(Client& c, uint32_t seq) {
  proto::CmPollEventReply rep;
  if (engine_ != nullptr) process_engine_events();
  if (!c.cm_events.empty()) {
    rep.event = std::move(c.cm_events.front());
    c.cm_events.pop_front();
  }
  return ok(MsgType::kCmPollEvent, seq, rep);
}

bool ControlService::peer_allowed(const proto::CmAddr& peer) const {
  if (limits_.cm_allowed_peers.empty() && limits_.cm_allowed_peers6.empty()) return true;
  uint32_t ip = 0;
  if (!proto::cm_addr_ipv4(peer, ip)) {
    for (const ControlLimits::PeerNetwork6& n : limits_.cm_allowed_peers6) {
      bool match = true;
      for (size_t i = 0; i < 16 && match; ++i) {
        const int bits = std::clamp(int{n.length} - int(i) * 8, 0, 8);
        match = (peer[i] & (0xFF00u >> bits)) == n.network[i];
      }
      if (match) return true;
    }
    return false;
  }
  for (const ControlLimits::PeerNetwork& n : limits_.cm_allowed_peers) {
    if ((ip & n.mask) == n.network) return true;
  }
  return false;
}

void ControlService::on_cm_event(const EngineEvent& e) {
  ++cm_events_;
  Client* c = find(e.client_id);
  if (c != nullptr && c->attached && e.cm.kind == proto::CmEventKind::kRequest) {
    // The daemon answers for the listener when the policy or its queue says no; the
    // requester sees the reason at once instead of timing out.
    uint8_t reason = 0;
    if (!peer_allowed(e.cm.peer)) {
      reason = proto::kCmPolicy;
      ++cm_policy_rejects_;
      spdlog::warn(
          "control: connection request {} from {} for service {} refused by policy "
          "(clients.allowed_peers)",
          e.cm.conn, proto::cm_addr_text(e.cm.peer), e.cm.service);
    } else if (c->cm_events.size() >= kMaxCmEventsPerClient) {
      reason = proto::kCmQuota;
      ++cm_quota_rejects_;
    }
    if (reason != 0) {
      EngineCommand cmd;
      cmd.client_id = c->id;
      cmd.op = EngineOp::kCmReject;
      cmd.cm.conn = e.cm.conn;
      cmd.cm.reason = reason;
      to_engine(cmd);
      return;
    }
  }
  if (c == nullptr || !c->attached || c->cm_events.size() >= kMaxCmEventsPerClient) {
    ++cm_events_dropped_;
    return;
  }
  const CmEventInfo& i = e.cm;
  proto::CmEvent ev;
  ev.kind = i.kind;
  ev.conn = i.conn;
  ev.qpn = i.qpn;
  ev.peer = i.peer;
  ev.service = i.service;
  ev.remote_qpn = i.remote_qpn;
  ev.pmtu_bytes = i.pmtu_bytes;
  ev.flags = i.flags;
  ev.reason = i.reason;
  ev.private_data.assign(i.private_data,
                         i.private_data + std::min<size_t>(i.private_len, sizeof(i.private_data)));
  if (i.kind == proto::CmEventKind::kEstablished) {
    // The engine moved the QP to RTS itself: the QP table follows.
    auto q = c->qps.find(i.qpn);
    if (q != c->qps.end()) {
      QpAttrs& a = q->second.attrs;
      a.state = proto::QpState::kRts;
      a.attr.access = i.access;
      a.attr.path_mtu = mtu_enum(i.pmtu_bytes);
      a.attr.dest_qpn = i.remote_qpn;
      a.attr.rq_psn = i.rq_psn;
      a.attr.sq_psn = i.sq_psn;
      a.attr.dgid = i.peer;
      a.attr.mask |= proto::kAttrAccess | proto::kAttrPathMtu | proto::kAttrDestQpn |
                     proto::kAttrRqPsn | proto::kAttrSqPsn | proto::kAttrDgid;
    }
  }
  c->cm_events.push_back(std::move(ev));
  if (c->cm_wake.valid() && shm::WakeFd::kick_pipe(c->cm_wake.get()) == -EPIPE) {
    // The client closed its end; it can still poll conduitd for events.
    spdlog::info("control: client {} closed its CM event pipe: not kicked any more", c->id);
    c->cm_wake.reset();
  }
}

}  // namespace conduit::control
