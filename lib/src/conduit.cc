// libconduit: the C API of <conduit/conduit.h> over the control protocol
// (lib/proto) and the shared-memory region (shm-ipc).
#include "conduit/conduit.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <poll.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "proto/control_codec.h"
#include "proto/seqpacket.h"
#include "shm/doorbell.h"
#include "shm/region.h"

#ifndef CONDUIT_VERSION
#define CONDUIT_VERSION "unknown"
#endif

static_assert(CONDUIT_CM_MAX_PRIVATE >= conduit::proto::kMaxCmPrivateBytes,
              "private data decoded from the daemon must fit the public structs");

namespace {

using conduit::proto::UniqueFd;
namespace proto = conduit::proto;
namespace shm = conduit::shm;

static_assert(CONDUIT_CM_SELECTIVE_REPEAT == proto::kCmFlagSelectiveRepeat &&
              CONDUIT_CM_RDMA_CM == proto::kCmFlagRdmaCm &&
              CONDUIT_CM_PRIVATE_TRUNCATED == proto::kCmFlagPrivateTruncated);
uint32_t cm_flags(uint32_t proto_flags) {
  return proto_flags &
         (CONDUIT_CM_SELECTIVE_REPEAT | CONDUIT_CM_RDMA_CM | CONDUIT_CM_PRIVATE_TRUNCATED);
}

// How long a control call waits for conduitd before giving up.
constexpr int kReplyTimeoutS = 10;
constexpr uint64_t kMrAlign = 4096;
// conduit_poll_cq looks at the control socket for a hang-up (conduitd stopped
// or killed) once per this many empty polls: one poll(2) per ~1024 empty polls
// costs well under a nanosecond each, and a busy poller notices within ~1 ms.
constexpr uint32_t kEmptyPollsPerHangupCheck = 1024;
constexpr int kMaxWaitCqs = CONDUIT_MAX_WAIT_CQS;
constexpr const char* kDaemonGoneMsg =
    "conduitd closed the connection (stopped or restarted?); no more completions will come, "
    "open a new context";

// The detailed message of the last failure on this thread (see conduit.h).
thread_local int t_err_code = 0;
thread_local std::string t_err_msg;

int set_error(int code, std::string msg) {
  t_err_code = code;
  t_err_msg = std::move(msg);
  return code;
}

// First-fit allocator over the region's arena (offsets from the region base).
class ArenaAllocator {
 public:
  void init(uint64_t offset, uint64_t size) {
    free_.clear();
    if (size > 0) free_[offset] = size;
  }
  // Returns the region offset, or UINT64_MAX when nothing fits.
  uint64_t alloc(uint64_t len) {
    if (len > UINT64_MAX - (kMrAlign - 1)) return UINT64_MAX;  // rounding up would wrap to 0
    len = (len + kMrAlign - 1) & ~(kMrAlign - 1);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < len) continue;
      const uint64_t off = it->first;
      const uint64_t rest = it->second - len;
      free_.erase(it);
      if (rest > 0) free_[off + len] = rest;
      return off;
    }
    return UINT64_MAX;
  }
  void release(uint64_t off, uint64_t len) {
    len = (len + kMrAlign - 1) & ~(kMrAlign - 1);
    auto next = free_.lower_bound(off);
    if (next != free_.end() && off + len == next->first) {  // merge with the block after
      len += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {  // merge with the block before
      auto prev = std::prev(next);
      if (prev->first + prev->second == off) {
        prev->second += len;
        return;
      }
    }
    free_[off] = len;
  }

 private:
  std::map<uint64_t, uint64_t> free_;
};

struct MrImpl {
  conduit_mr pub;  // first: conduit_mr* converts to MrImpl*
  conduit_context* ctx;
  uint64_t region_offset;
  uint64_t alloc_len;
};

}  // namespace

struct conduit_context {
  std::mutex control_mu;  // serializes control calls (one socket, in-order replies)
  UniqueFd sock;
  uint32_t seq = 0;
  std::string socket_path;
  proto::AttachReply info;
  shm::Region region;
  shm::WakeFd doorbell;  // writing end of a socket: kicks the engine
  ArenaAllocator arena;
  std::shared_mutex mr_mu;  // post paths read mrs; alloc/free write it
  std::map<uint32_t, MrImpl*> mrs;
  std::set<conduit_cq*> cqs;
  std::set<conduit_qp*> qps;
  // Set once the control socket hung up: the daemon stopped or died. Any
  // thread may set it; polls and posts read it (relaxed: a late reader only
  // takes one more pass to see it).
  std::atomic<bool> daemon_gone{false};
  // Connection manager: the daemon kicks cm_wake when events wait; those
  // fetched but not yet claimed by a waiter sit in cm_events (under cm_mu).
  shm::WakeFd cm_wake;  // reading end of a pipe
  std::mutex cm_mu;
  std::deque<proto::CmEvent> cm_events;
};

struct conduit_cq {
  conduit_context* ctx;
  uint32_t id;
  shm::WakeFd efd;  // reading end of the CQ's wakeup pipe
  shm::SpscConsumer<conduit_shm_cqe> ring;
  conduit_shm_wakeup* wake;
  uint32_t empty_polls = 0;  // poller thread only
  // The engine's count of completions it lost to this CQ's full ring (the wakeup line's
  // cqes_lost) when conduit_poll_cq last reported it: a different count is an overrun not
  // yet reported. Written by the poller thread only; a waiter on another thread reads it.
  std::atomic<uint32_t> lost_reported{0};
};

struct conduit_qp {
  conduit_context* ctx;
  uint32_t qpn;
  uint32_t slot;
  conduit_cq* send_cq;
  conduit_cq* recv_cq;
  shm::SpscProducer<conduit_shm_send_wr> sq;
  shm::SpscProducer<conduit_shm_recv_wr> rq;
  uint32_t cm_conn = 0;            // the connection manager's connection, 0: none
  bool cm_connected_once = false;  // a connection was established (conduit_wait_disconnect)
};

namespace {

// True (and remembered) when conduitd closed our control socket. Never blocks;
// safe beside control calls on other threads (POLLIN is not consumed).
bool daemon_hung_up(conduit_context* ctx) {
  if (ctx->daemon_gone.load(std::memory_order_relaxed)) return true;
  pollfd p{ctx->sock.get(), POLLRDHUP, 0};
  if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
    ctx->daemon_gone.store(true, std::memory_order_relaxed);
    return true;
  }
  return false;
}

// One request/reply exchange. Caller holds ctx->control_mu.
int call(conduit_context* ctx, proto::Request body, proto::ReplyMessage& reply,
         std::vector<int> fds_out = {}, std::vector<UniqueFd>* fds_in = nullptr) {
  proto::RequestMessage req{++ctx->seq, std::move(body)};
  const auto bytes = proto::encode_request(req);
  int rc = proto::send_datagram(ctx->sock.get(), bytes, fds_out);
  if (rc < 0) {
    return set_error(rc == -EPIPE ? -ECONNRESET : rc,
                     rc == -EPIPE ? "conduitd closed the connection (stopped or restarted?)"
                                  : std::string("sending to conduitd: ") + std::strerror(-rc));
  }
  std::vector<uint8_t> buf;
  std::vector<UniqueFd> fds;
  for (;;) {
    ssize_t n = proto::recv_datagram(ctx->sock.get(), buf, fds);
    if (n == 0) {
      return set_error(-ECONNRESET, "conduitd closed the connection (stopped or restarted?)");
    }
    if (n == -EAGAIN || n == -EWOULDBLOCK) {
      return set_error(-ETIMEDOUT, "conduitd did not answer within " +
                                       std::to_string(kReplyTimeoutS) + " s on " +
                                       ctx->socket_path);
    }
    if (n < 0) return set_error(static_cast<int>(n), "receiving from conduitd failed");
    proto::CodecError err;
    if (!proto::decode_reply(buf, reply, err)) {
      return set_error(err.code, "bad reply from conduitd: " + err.reason);
    }
    // The late answer to an earlier call that gave up (-ETIMEDOUT): skip it (its
    // descriptors are closed), or this call and every later one would read the reply of
    // the call before it.
    if (static_cast<int32_t>(reply.seq - req.seq) < 0) {
      fds.clear();
      continue;
    }
    break;
  }
  if (reply.seq != req.seq || reply.type != req.type()) {
    return set_error(-EPROTO, "conduitd answered a different request");
  }
  if (reply.status < 0) return set_error(reply.status, reply.reason);
  if (fds_in != nullptr) *fds_in = std::move(fds);
  return 0;
}

bool valid_ptr(const void* p, const char* what) {
  if (p != nullptr) return true;
  set_error(-EINVAL, std::string(what) + " is NULL");
  return false;
}

}  // namespace

extern "C" {

const char* conduit_version(void) { return CONDUIT_VERSION; }

int conduit_query_context(conduit_context* ctx, conduit_context_limits* out) {
  if (!valid_ptr(ctx, "ctx") || !valid_ptr(out, "out")) return -EINVAL;
  const auto& l = ctx->region.layout();
  *out = conduit_context_limits{};
  out->max_qps = l.max_qps;
  out->max_cqs = l.max_cqs;
  out->max_send_wr = l.sq_depth;
  out->max_recv_wr = l.rq_depth;
  out->max_cqe = l.cq_depth;
  out->max_inline_data = CONDUIT_SHM_MAX_INLINE;
  out->region_bytes = ctx->region.arena_size();
  return 0;
}

const char* conduit_strerror(int err) {
  if (err != 0 && err == t_err_code && !t_err_msg.empty()) return t_err_msg.c_str();
  switch (-err) {
    case 0:
      return "success";
    case EDQUOT:
      return "quota exceeded (see the daemon policy's clients section)";
    case EPROTONOSUPPORT:
      return "ABI mismatch between libconduit and conduitd";
    case ECONNRESET:
      return "conduitd closed the connection";
    case EOVERFLOW:
      return "CQ overrun: conduitd lost completions to the CQ's full ring";
    default:
      break;
  }
  thread_local char buf[128];
  const char* s = strerror_r(err < 0 ? -err : err, buf, sizeof(buf));
  return s;
}

int conduit_open(const conduit_context_attr* attr, conduit_context** out) {
  if (!valid_ptr(out, "out")) return -EINVAL;
  *out = nullptr;
  conduit_context_attr defaults{};
  if (attr == nullptr) attr = &defaults;
  const char* env = std::getenv("CONDUIT_SOCKET");
  std::string path = attr->socket_path != nullptr       ? attr->socket_path
                     : (env != nullptr && *env != '\0') ? env
                                                        : CONDUIT_DEFAULT_SOCKET;
  std::string name = attr->client_name != nullptr ? attr->client_name : "";
  if (!proto::is_valid_name(name, proto::kMaxClientNameBytes)) {
    return set_error(-EINVAL, "client name must be at most 64 of [A-Za-z0-9_.-]");
  }
  auto ctx = std::make_unique<conduit_context>();
  ctx->socket_path = path;
  int rc = proto::connect_seqpacket(path, ctx->sock);
  if (rc < 0) return set_error(rc, proto::connect_error_message(rc, path));
  timeval tv{kReplyTimeoutS, 0};
  ::setsockopt(ctx->sock.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

  proto::ReplyMessage reply;
  std::vector<UniqueFd> fds;
  rc = call(ctx.get(), proto::AttachRequest{CONDUIT_SHM_ABI_VERSION, attr->region_bytes, name},
            reply, {}, &fds);
  if (rc < 0) return rc;
  if (fds.size() != 3) {
    return set_error(
        -EPROTO, "conduitd's attach reply did not carry the region, doorbell and CM event pipe");
  }
  ctx->info = std::get<proto::AttachReply>(reply.body);
  rc = shm::Region::attach(fds[0].release(), &ctx->region);
  if (rc < 0) {
    return set_error(rc, rc == -EPROTO ? "ABI mismatch: the shared-memory region from conduitd "
                                         "does not match this libconduit's layout; rebuild "
                                         "against the installed libconduit"
                                       : std::string("cannot map the region from conduitd: ") +
                                             std::strerror(-rc));
  }
  ctx->doorbell = shm::WakeFd(fds[1].release(), shm::WakeFd::Kind::kSocket);
  ctx->cm_wake = shm::WakeFd(fds[2].release(), shm::WakeFd::Kind::kPipe);
  ctx->arena.init(ctx->region.layout().arena_offset, ctx->region.arena_size());
  *out = ctx.release();
  return 0;
}

int conduit_close(conduit_context* ctx) {
  if (ctx == nullptr) return 0;
  // Objects are freed even when the daemon refuses or is gone: detaching
  // releases everything on its side anyway.
  while (!ctx->qps.empty()) conduit_destroy_qp(*ctx->qps.begin());
  for (conduit_cq* cq : std::set<conduit_cq*>(ctx->cqs)) {
    if (conduit_destroy_cq(cq) < 0) {
      ctx->cqs.erase(cq);
      delete cq;
    }
  }
  while (!ctx->mrs.empty()) conduit_free_mr(&ctx->mrs.begin()->second->pub);
  {
    std::lock_guard lock(ctx->control_mu);
    proto::ReplyMessage reply;
    call(ctx, proto::DetachRequest{}, reply);  // the daemon also cleans up on hang-up
  }
  delete ctx;
  return 0;
}

// ---- memory -----------------------------------------------------------------

int conduit_alloc_mr(conduit_context* ctx, size_t length, uint32_t access, conduit_mr** out) {
  if (!valid_ptr(ctx, "ctx") || !valid_ptr(out, "out")) return -EINVAL;
  if (length == 0) return set_error(-EINVAL, "memory region length is 0");
  std::lock_guard lock(ctx->control_mu);
  const uint64_t off = ctx->arena.alloc(length);
  if (off == UINT64_MAX) {
    return set_error(-ENOMEM, "the shared region has no free block of " + std::to_string(length) +
                                  " bytes; open the context with a larger region_bytes");
  }
  proto::ReplyMessage reply;
  int rc = call(ctx, proto::RegMrRequest{off, length, access}, reply);
  if (rc < 0) {
    ctx->arena.release(off, length);
    return rc;
  }
  const auto& r = std::get<proto::RegMrReply>(reply.body);
  auto* mr = new MrImpl{};
  mr->pub.addr = ctx->region.base() + off;
  mr->pub.length = length;
  mr->pub.lkey = r.lkey;
  mr->pub.rkey = r.rkey;
  mr->pub.iova = r.iova;
  mr->pub.access = access;
  mr->ctx = ctx;
  mr->region_offset = off;
  mr->alloc_len = length;
  std::memset(mr->pub.addr, 0, length);
  std::unique_lock wlock(ctx->mr_mu);
  ctx->mrs[r.lkey] = mr;
  *out = &mr->pub;
  return 0;
}

int conduit_free_mr(conduit_mr* pub) {
  if (pub == nullptr) return 0;
  auto* mr = reinterpret_cast<MrImpl*>(pub);
  conduit_context* ctx = mr->ctx;
  std::lock_guard lock(ctx->control_mu);
  proto::ReplyMessage reply;
  int rc = call(ctx, proto::DeregMrRequest{pub->lkey}, reply);
  {
    std::unique_lock wlock(ctx->mr_mu);
    ctx->mrs.erase(pub->lkey);
  }
  // Even if the daemon is gone, the local memory bookkeeping is released.
  ctx->arena.release(mr->region_offset, mr->alloc_len);
  delete mr;
  return rc == -ECONNRESET ? 0 : rc;
}

// ---- CQs ----------------------------------------------------------------------

const char* conduit_wc_status_str(uint32_t status) {
  static const char* const kNames[] = {"success",
                                       "local length error",
                                       "local QP operation error",
                                       "local protection error",
                                       "WR flushed",
                                       "remote access error",
                                       "remote invalid request",
                                       "remote operation error",
                                       "transport retry counter exceeded",
                                       "RNR retry counter exceeded",
                                       "fatal error"};
  return status < sizeof(kNames) / sizeof(kNames[0]) ? kNames[status] : "unknown status";
}

int conduit_create_cq(conduit_context* ctx, uint32_t entries, conduit_cq** out) {
  if (!valid_ptr(ctx, "ctx") || !valid_ptr(out, "out")) return -EINVAL;
  if (entries == 0) entries = 1;
  auto cq = std::make_unique<conduit_cq>();
  cq->ctx = ctx;
  std::lock_guard lock(ctx->control_mu);
  proto::ReplyMessage reply;
  std::vector<UniqueFd> fds;
  int rc = call(ctx, proto::CreateCqRequest{entries, true}, reply, {}, &fds);
  if (rc < 0) return rc;
  const auto& r = std::get<proto::CreateCqReply>(reply.body);
  if (fds.size() != 1) {
    return set_error(-EPROTO, "conduitd's create-CQ reply did not carry the CQ's wakeup pipe");
  }
  cq->efd = shm::WakeFd(fds[0].release(), shm::WakeFd::Kind::kPipe);
  if (r.cq_id >= ctx->region.layout().max_cqs) {
    return set_error(-EPROTO, "conduitd returned a CQ outside the region");
  }
  cq->id = r.cq_id;
  auto view = ctx->region.cq(r.cq_id);
  cq->ring = view.consumer(shm::load_cons(view.ctrl));
  cq->wake = ctx->region.cq_wakeup(r.cq_id);
  // conduitd zeroed the count when it made the slot's CQ; what it holds now, if anything,
  // was lost before this CQ existed.
  cq->lost_reported.store(shm::consumer_load_lost(cq->wake), std::memory_order_relaxed);
  ctx->cqs.insert(cq.get());
  *out = cq.release();
  return 0;
}

int conduit_destroy_cq(conduit_cq* cq) {
  if (cq == nullptr) return 0;
  conduit_context* ctx = cq->ctx;
  std::lock_guard lock(ctx->control_mu);
  proto::ReplyMessage reply;
  int rc = call(ctx, proto::DestroyCqRequest{cq->id}, reply);
  if (rc < 0 && rc != -ECONNRESET) return rc;  // e.g. -EBUSY: a QP still uses it
  ctx->cqs.erase(cq);
  delete cq;
  return 0;
}

namespace {

// Moves up to max completions from the CQ ring into wc; how many.
int take_completions(conduit_cq* cq, int max, conduit_wc* wc) {
  int done = 0;
  conduit_shm_cqe buf[32];
  while (done < max) {
    const uint32_t want = static_cast<uint32_t>(max - done) < 32 ? max - done : 32;
    const uint32_t n = cq->ring.dequeue_burst(buf, want);
    for (uint32_t i = 0; i < n; ++i) {
      conduit_wc& w = wc[done + static_cast<int>(i)];
      w.wr_id = buf[i].wr_id;
      w.status = buf[i].status;
      w.opcode = buf[i].opcode;
      w.byte_len = buf[i].byte_len;
      w.imm_data = buf[i].imm_data;
      w.qp_num = buf[i].qp_num;
      w.src_qp = buf[i].src_qp;
      w.wc_flags = buf[i].flags;
      w.vendor_err = buf[i].vendor_err;
    }
    done += static_cast<int>(n);
    if (n < want) break;
  }
  return done;
}

// True when the engine lost completions to this CQ's full ring since the last report.
bool overrun_unreported(const conduit_cq* cq) {
  return shm::consumer_load_lost(cq->wake) != cq->lost_reported.load(std::memory_order_relaxed);
}

// With the ring found empty: the CQ's unreported overrun, if any. The count is loaded
// (acquire) before the ring is looked at again, so every completion the engine wrote before
// its loss comes first: their count (> 0), then, on the call that finds the ring empty,
// -EOVERFLOW once. 0: no overrun to report.
int report_overrun(conduit_cq* cq, int max, conduit_wc* wc) {
  const uint32_t lost = shm::consumer_load_lost(cq->wake);
  const uint32_t reported = cq->lost_reported.load(std::memory_order_relaxed);
  if (lost == reported) return 0;
  if (cq->ring.available() > 0) return take_completions(cq, max, wc);  // 0 only if max is
  const uint32_t n = lost - reported;  // free running: wraps at 2^32
  cq->lost_reported.store(lost, std::memory_order_relaxed);
  return set_error(-EOVERFLOW,
                   "CQ overrun: conduitd lost " + std::to_string(n) +
                       " completion(s) because this CQ's ring was full (error completions of "
                       "rejected work requests, or the flush completions of a destroyed QP's "
                       "outstanding ones): some posted work requests will never complete; "
                       "poll it sooner, or keep fewer work requests outstanding on the QPs "
                       "that share it (it holds " +
                       std::to_string(cq->ctx->region.layout().cq_depth) +
                       " completions: clients.quotas.max_cqe)");
}

}  // namespace

int conduit_poll_cq(conduit_cq* cq, int max, conduit_wc* wc) {
  if (cq == nullptr || wc == nullptr || max < 0) {
    return set_error(-EINVAL, cq == nullptr   ? "conduit_poll_cq: cq is NULL"
                              : wc == nullptr ? "conduit_poll_cq: wc is NULL"
                                              : "conduit_poll_cq: max is negative");
  }
  int done = take_completions(cq, max, wc);
  if (done > 0) {
    cq->empty_polls = 0;
    return done;
  }
  if (cq->ring.broken()) {
    return set_error(-EPIPE, "CQ ring indices are corrupt; the context is unusable");
  }
  // The ring is empty: a CQ overrun not yet reported is, once.
  if (const int rc = report_overrun(cq, max, wc); rc != 0) return rc;
  // Nothing to poll: if conduitd is gone, nothing ever will be. Say so instead
  // of letting a busy-polling caller spin forever.
  if (cq->ctx->daemon_gone.load(std::memory_order_relaxed) ||
      (++cq->empty_polls % kEmptyPollsPerHangupCheck == 0 && daemon_hung_up(cq->ctx))) {
    // conduitd closes the socket after its engine wrote the flush completions of the
    // client's QPs: those that landed after the dequeue above are in the ring now, and
    // come before the error (a caller that stops at it would never see them), and so does
    // the overrun of those that did not fit.
    if (const int rc = report_overrun(cq, max, wc); rc != 0) return rc;
    done = take_completions(cq, max, wc);
    if (done > 0) return done;
    return set_error(-ECONNRESET, kDaemonGoneMsg);
  }
  return 0;
}

namespace {

// How many of the n CQs have completions or an overrun to report; -EPIPE when one's
// indices are corrupt.
int ready_cqs(conduit_cq* const* cqs, int n) {
  int ready = 0;
  for (int i = 0; i < n; ++i) {
    if (cqs[i]->ring.broken()) return -EPIPE;
    if (cqs[i]->ring.available() > 0 || overrun_unreported(cqs[i])) ++ready;
  }
  return ready;
}

// The doorbell protocol of shm::wait_for_entries over several CQs of one context,
// whose sleep also watches the control socket: if conduitd dies, nobody would
// ever kick an eventfd, and the caller must get an error instead of a hang.
// Returns the number of CQs with completions, 0 on timeout, or -errno.
int wait_cqs(conduit_cq* const* cqs, int n, int timeout_ms) {
  for (int spin = 0; spin < 64; ++spin) {
    if (const int r = ready_cqs(cqs, n); r != 0) {
      if (r < 0) break;
      return r;
    }
  }
  conduit_context* ctx = cqs[0]->ctx;
  std::array<pollfd, kMaxWaitCqs + 1> p{};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    for (int i = 0; i < n; ++i) shm::consumer_arm_wakeup(cqs[i]->wake);
    const auto disarm = [&] {
      for (int i = 0; i < n; ++i) shm::consumer_disarm_wakeup(cqs[i]->wake);
    };
    if (ready_cqs(cqs, n) != 0) {
      disarm();
      break;
    }
    int wait_ms = timeout_ms;
    if (timeout_ms >= 0) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      wait_ms = left.count() > 0 ? static_cast<int>(left.count()) : 0;
    }
    for (int i = 0; i < n; ++i) p[static_cast<size_t>(i)] = {cqs[i]->efd.fd(), POLLIN, 0};
    // POLLIN is not asked of the socket: replies to control calls on other
    // threads must not wake us; hang-up is always reported.
    pollfd& sock = p[static_cast<size_t>(n)];
    sock = {ctx->sock.get(), POLLRDHUP, 0};
    const int rc = ::poll(p.data(), static_cast<nfds_t>(n + 1), wait_ms);
    disarm();
    if (rc < 0 && errno != EINTR) return set_error(-errno, "poll on the CQ eventfd failed");
    for (int i = 0; rc > 0 && i < n; ++i) {
      if ((p[static_cast<size_t>(i)].revents & POLLIN) != 0) cqs[i]->efd.drain();
    }
    if (const int r = ready_cqs(cqs, n); r != 0) {
      if (r < 0) break;
      return r;
    }
    if (rc > 0 && (sock.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
      ctx->daemon_gone.store(true, std::memory_order_relaxed);
      return set_error(-ECONNRESET, kDaemonGoneMsg);
    }
    if (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline) return 0;
  }
  const int r = ready_cqs(cqs, n);
  if (r < 0) return set_error(-EPIPE, "CQ ring indices are corrupt; the context is unusable");
  return r;
}

}  // namespace

int conduit_wait_cq(conduit_cq* cq, int timeout_ms) {
  if (!valid_ptr(cq, "cq")) return -EINVAL;
  const int r = wait_cqs(&cq, 1, timeout_ms);
  if (r <= 0) return r;
  // At least 1: an overrun alone is something to poll (conduit_poll_cq's -EOVERFLOW).
  const uint32_t n = cq->ring.available();
  return n > 0 ? static_cast<int>(n) : 1;
}

int conduit_wait_cqs(conduit_cq* const* cqs, int n, int timeout_ms) {
  if (!valid_ptr(cqs, "cqs")) return -EINVAL;
  if (n < 1 || n > kMaxWaitCqs) {
    return set_error(-EINVAL, "conduit_wait_cqs waits on 1 to " + std::to_string(kMaxWaitCqs) +
                                  " CQs, not " + std::to_string(n));
  }
  for (int i = 0; i < n; ++i) {
    if (cqs[i] == nullptr) return set_error(-EINVAL, "cqs[" + std::to_string(i) + "] is NULL");
    if (cqs[i]->ctx != cqs[0]->ctx) {
      return set_error(-EINVAL, "conduit_wait_cqs: the CQs belong to different contexts");
    }
  }
  return wait_cqs(cqs, n, timeout_ms);
}

// ---- QPs ----------------------------------------------------------------------

int conduit_create_qp(conduit_context* ctx, const conduit_qp_init_attr* attr, conduit_qp** out) {
  if (!valid_ptr(ctx, "ctx") || !valid_ptr(attr, "attr") || !valid_ptr(out, "out")) return -EINVAL;
  if (!valid_ptr(attr->send_cq, "send_cq") || !valid_ptr(attr->recv_cq, "recv_cq")) return -EINVAL;
  // conduitd knows a CQ by its slot in this context's region: another context's CQ would
  // name whichever CQ of ours sits in the same slot.
  if (attr->send_cq->ctx != ctx || attr->recv_cq->ctx != ctx) {
    return set_error(-EINVAL, std::string(attr->send_cq->ctx != ctx ? "send_cq" : "recv_cq") +
                                  " belongs to another context");
  }
  const auto& l = ctx->region.layout();
  proto::CreateQpRequest req;
  req.send_cq = attr->send_cq->id;
  req.recv_cq = attr->recv_cq->id;
  req.sq_entries = attr->max_send_wr == 0 ? l.sq_depth : attr->max_send_wr;
  req.rq_entries = attr->max_recv_wr == 0 ? l.rq_depth : attr->max_recv_wr;
  req.traffic_class = attr->traffic_class != nullptr ? attr->traffic_class : "";
  if (!proto::is_valid_name(req.traffic_class, proto::kMaxClassNameBytes)) {
    return set_error(-EINVAL, "traffic class must be at most 32 of [A-Za-z0-9_.-]");
  }
  std::lock_guard lock(ctx->control_mu);
  proto::ReplyMessage reply;
  int rc = call(ctx, req, reply);
  if (rc < 0) return rc;
  const auto& r = std::get<proto::CreateQpReply>(reply.body);
  if (r.qp_slot >= l.max_qps)
    return set_error(-EPROTO, "conduitd returned a QP outside the region");
  auto qp = std::make_unique<conduit_qp>();
  qp->ctx = ctx;
  qp->qpn = r.qpn;
  qp->slot = r.qp_slot;
  qp->send_cq = attr->send_cq;
  qp->recv_cq = attr->recv_cq;
  auto sq = ctx->region.sq(r.qp_slot);
  auto rq = ctx->region.rq(r.qp_slot);
  qp->sq = sq.producer(shm::load_prod(sq.ctrl));
  qp->rq = rq.producer(shm::load_prod(rq.ctrl));
  ctx->qps.insert(qp.get());
  *out = qp.release();
  return 0;
}

int conduit_destroy_qp(conduit_qp* qp) {
  if (qp == nullptr) return 0;
  conduit_context* ctx = qp->ctx;
  std::lock_guard lock(ctx->control_mu);
  proto::ReplyMessage reply;
  int rc = call(ctx, proto::DestroyQpRequest{qp->qpn}, reply);
  ctx->qps.erase(qp);
  delete qp;
  return rc == -ECONNRESET ? 0 : rc;
}

uint32_t conduit_qp_num(const conduit_qp* qp) { return qp == nullptr ? 0 : qp->qpn; }

int conduit_modify_qp(conduit_qp* qp, const conduit_qp_attr* attr, uint32_t mask) {
  if (!valid_ptr(qp, "qp") || !valid_ptr(attr, "attr")) return -EINVAL;
  // Only the fields in the mask travel; the protocol rejects stray values.
  proto::QpAttr a;
  a.mask = mask;
  if (mask & CONDUIT_QP_STATE) a.state = static_cast<proto::QpState>(attr->state & 0xFF);
  if (mask & CONDUIT_QP_ACCESS) a.access = attr->access;
  if (mask & CONDUIT_QP_PATH_MTU) a.path_mtu = static_cast<uint8_t>(attr->path_mtu);
  if (mask & CONDUIT_QP_DEST_QPN) a.dest_qpn = attr->dest_qpn;
  if (mask & CONDUIT_QP_RQ_PSN) a.rq_psn = attr->rq_psn;
  if (mask & CONDUIT_QP_SQ_PSN) a.sq_psn = attr->sq_psn;
  if (mask & CONDUIT_QP_DGID) std::memcpy(a.dgid.data(), attr->dgid, 16);
  if (mask & CONDUIT_QP_TIMEOUT) a.timeout = attr->timeout;
  if (mask & CONDUIT_QP_RETRY_CNT) a.retry_cnt = attr->retry_cnt;
  if (mask & CONDUIT_QP_RNR_RETRY) a.rnr_retry = attr->rnr_retry;
  if (mask & CONDUIT_QP_MIN_RNR_TIMER) a.min_rnr_timer = attr->min_rnr_timer;
  if (mask & CONDUIT_QP_MAX_QP_RD_ATOMIC) a.max_rd_atomic = attr->max_rd_atomic;
  if (mask & CONDUIT_QP_MAX_DEST_RD_ATOMIC) a.max_dest_rd_atomic = attr->max_dest_rd_atomic;
  std::string why;
  if ((mask & CONDUIT_QP_STATE) && attr->state > CONDUIT_QPS_ERR) {
    return set_error(-EINVAL, "unknown QP state " + std::to_string(attr->state));
  }
  if ((mask & CONDUIT_QP_PATH_MTU) && attr->path_mtu > 0xFF) {
    return set_error(-EINVAL, "path MTU must be a conduit_mtu value (1..5)");
  }
  if (!proto::validate_qp_attr(a, why)) return set_error(-EINVAL, why);
  std::lock_guard lock(qp->ctx->control_mu);
  proto::ReplyMessage reply;
  return call(qp->ctx, proto::ModifyQpRequest{qp->qpn, a}, reply);
}

int conduit_query_qp(conduit_qp* qp, conduit_qp_attr* out) {
  if (!valid_ptr(qp, "qp") || !valid_ptr(out, "out")) return -EINVAL;
  std::lock_guard lock(qp->ctx->control_mu);
  proto::ReplyMessage reply;
  int rc = call(qp->ctx, proto::QueryQpRequest{qp->qpn}, reply);
  if (rc < 0) return rc;
  const auto& a = std::get<proto::QueryQpReply>(reply.body).attr;
  *out = conduit_qp_attr{};
  out->state = static_cast<uint32_t>(a.state);
  out->access = a.access;
  out->path_mtu = a.path_mtu;
  out->dest_qpn = a.dest_qpn;
  out->rq_psn = a.rq_psn;
  out->sq_psn = a.sq_psn;
  std::memcpy(out->dgid, a.dgid.data(), 16);
  out->timeout = a.timeout;
  out->retry_cnt = a.retry_cnt;
  out->rnr_retry = a.rnr_retry;
  out->min_rnr_timer = a.min_rnr_timer;
  out->max_rd_atomic = a.max_rd_atomic;
  out->max_dest_rd_atomic = a.max_dest_rd_atomic;
  return 0;
}

int conduit_connect_qp(conduit_qp* qp, const conduit_qp_connect_attr* c) {
  if (!valid_ptr(qp, "qp") || !valid_ptr(c, "attr")) return -EINVAL;
  conduit_qp_attr a{};
  a.state = CONDUIT_QPS_INIT;
  a.access = c->access;
  if (int rc = conduit_modify_qp(qp, &a, CONDUIT_QP_STATE | CONDUIT_QP_ACCESS); rc < 0) return rc;
  a = conduit_qp_attr{};
  a.state = CONDUIT_QPS_RTR;
  a.path_mtu = c->mtu;
  a.dest_qpn = c->remote_qpn;
  a.rq_psn = c->remote_psn;
  std::memcpy(a.dgid, c->remote_gid, 16);
  a.min_rnr_timer = c->min_rnr_timer;
  a.max_dest_rd_atomic = c->max_dest_rd_atomic;
  if (int rc = conduit_modify_qp(
          qp, &a,
          CONDUIT_QP_STATE | CONDUIT_QP_PATH_MTU | CONDUIT_QP_DEST_QPN | CONDUIT_QP_RQ_PSN |
              CONDUIT_QP_DGID | CONDUIT_QP_MIN_RNR_TIMER |
              (c->max_dest_rd_atomic != 0 ? uint32_t{CONDUIT_QP_MAX_DEST_RD_ATOMIC} : 0u));
      rc < 0) {
    return rc;
  }
  a = conduit_qp_attr{};
  a.state = CONDUIT_QPS_RTS;
  a.sq_psn = c->local_psn;
  a.timeout = c->timeout;
  a.retry_cnt = c->retry_cnt;
  a.rnr_retry = c->rnr_retry;
  a.max_rd_atomic = c->max_rd_atomic;
  return conduit_modify_qp(
      qp, &a,
      CONDUIT_QP_STATE | CONDUIT_QP_SQ_PSN | CONDUIT_QP_TIMEOUT | CONDUIT_QP_RETRY_CNT |
          CONDUIT_QP_RNR_RETRY |
          (c->max_rd_atomic != 0 ? uint32_t{CONDUIT_QP_MAX_QP_RD_ATOMIC} : 0u));
}

}  // extern "C"

namespace {

// num_sge within 0..CONDUIT_MAX_SGE and an sg_list to read them from, for every WR
// (inline ones too: verbs refuses num_sge above max_send_sge whatever the flags).
int check_sge_list(const conduit_sge* sg, int num, uint64_t wr_id) {
  if (num < 0 || num > static_cast<int>(CONDUIT_SHM_MAX_SGE)) {
    return set_error(-EINVAL, "WR " + std::to_string(wr_id) + ": num_sge " + std::to_string(num) +
                                  " is outside 0.." + std::to_string(CONDUIT_SHM_MAX_SGE));
  }
  if (num > 0 && sg == nullptr) return set_error(-EINVAL, "sg_list is NULL");
  return 0;
}

// Turns SGEs (process pointers) into shm SGEs (lkey + offset in the MR).
int translate_sges(conduit_context* ctx, const conduit_sge* sg, int num, conduit_shm_sge* out,
                   uint64_t wr_id) {
  if (const int rc = check_sge_list(sg, num, wr_id); rc < 0) return rc;
  std::shared_lock lock(ctx->mr_mu);
  for (int i = 0; i < num; ++i) {
    auto it = ctx->mrs.find(sg[i].lkey);
    if (it == ctx->mrs.end()) {
      return set_error(-EINVAL, "WR " + std::to_string(wr_id) + " sge " + std::to_string(i) +
                                    ": no memory region with lkey " + std::to_string(sg[i].lkey));
    }
    const auto base = reinterpret_cast<uint64_t>(it->second->pub.addr);
    const uint64_t len = it->second->pub.length;
    if (sg[i].addr < base || sg[i].addr - base > len || sg[i].length > len - (sg[i].addr - base)) {
      return set_error(-EINVAL, "WR " + std::to_string(wr_id) + " sge " + std::to_string(i) +
                                    " lies outside its memory region");
    }
    out[i].offset = sg[i].addr - base;
    out[i].length = sg[i].length;
    out[i].lkey = sg[i].lkey;
  }
  return 0;
}

void ring_doorbell(conduit_context* ctx) {
  if (shm::producer_should_kick(ctx->region.engine_wakeup())) ctx->doorbell.kick();
}

}  // namespace

extern "C" {

int conduit_post_send(conduit_qp* qp, conduit_send_wr* wr, conduit_send_wr** bad_wr) {
  if (bad_wr != nullptr) *bad_wr = wr;
  if (!valid_ptr(qp, "qp")) return -EINVAL;
  if (qp->ctx->daemon_gone.load(std::memory_order_relaxed)) {
    return set_error(-ECONNRESET, kDaemonGoneMsg);
  }
  int rc = 0;
  bool posted = false;
  for (; wr != nullptr; wr = wr->next) {
    conduit_shm_send_wr e{};
    e.wr_id = wr->wr_id;
    if (wr->opcode < CONDUIT_WR_SEND || wr->opcode > CONDUIT_WR_ATOMIC_FETCH_AND_ADD) {
      rc = set_error(-EINVAL, "WR " + std::to_string(wr->wr_id) + ": unknown opcode " +
                                  std::to_string(wr->opcode));
      break;
    }
    if ((wr->send_flags & ~CONDUIT_SHM_SEND_FLAGS_ALL) != 0) {
      rc = set_error(-EINVAL, "WR " + std::to_string(wr->wr_id) + ": unknown send flags");
      break;
    }
    e.opcode = static_cast<uint8_t>(wr->opcode);
    e.flags = static_cast<uint8_t>(wr->send_flags);
    const bool imm =
        wr->opcode == CONDUIT_WR_SEND_WITH_IMM || wr->opcode == CONDUIT_WR_RDMA_WRITE_WITH_IMM;
    const bool rdma = wr->opcode >= CONDUIT_WR_RDMA_WRITE;
    e.imm_data = imm ? wr->imm_data : 0;
    e.remote_addr = rdma ? wr->remote_addr : 0;
    e.rkey = rdma ? wr->rkey : 0;
    const bool atomic = wr->opcode == CONDUIT_WR_ATOMIC_CMP_AND_SWP ||
                        wr->opcode == CONDUIT_WR_ATOMIC_FETCH_AND_ADD;
    if (atomic) {
      if ((wr->send_flags & CONDUIT_SEND_INLINE) || wr->num_sge != 1 || wr->sg_list == nullptr ||
          wr->sg_list[0].length != 8 || wr->remote_addr % 8 != 0) {
        rc = set_error(-EINVAL, "WR " + std::to_string(wr->wr_id) +
                                    ": an atomic takes one 8-byte SGE (not inline) and an "
                                    "8-byte aligned remote_addr");
        break;
      }
      rc = translate_sges(qp->ctx, wr->sg_list, 1, &e.u.atomic.sge, wr->wr_id);
      if (rc < 0) break;
      e.num_sge = 1;
      e.u.atomic.compare_add = wr->compare_add;
      e.u.atomic.swap = wr->opcode == CONDUIT_WR_ATOMIC_CMP_AND_SWP ? wr->swap : 0;
    } else if (wr->send_flags & CONDUIT_SEND_INLINE) {
      if (wr->opcode == CONDUIT_WR_RDMA_READ) {
        rc = set_error(-EINVAL, "WR " + std::to_string(wr->wr_id) + ": RDMA READ cannot be inline");
        break;
      }
      rc = check_sge_list(wr->sg_list, wr->num_sge, wr->wr_id);
      if (rc < 0) break;
      uint32_t total = 0;
      for (int i = 0; i < wr->num_sge && rc == 0; ++i) {
        // Against the room left, never total + length: that sum wraps at 2^32.
        if (wr->sg_list[i].length > CONDUIT_SHM_MAX_INLINE - total) {
          rc = set_error(-EINVAL, "WR " + std::to_string(wr->wr_id) + ": inline data over " +
                                      std::to_string(CONDUIT_SHM_MAX_INLINE) + " bytes");
          break;
        }
        std::memcpy(e.u.inline_data + total, reinterpret_cast<const void*>(wr->sg_list[i].addr),
                    wr->sg_list[i].length);
        total += wr->sg_list[i].length;
      }
      if (rc < 0) break;
      e.inline_len = total;
    } else {
      rc = translate_sges(qp->ctx, wr->sg_list, wr->num_sge, e.u.sg_list, wr->wr_id);
      if (rc < 0) break;
      e.num_sge = static_cast<uint8_t>(wr->num_sge);
    }
    if (!qp->sq.try_enqueue(e)) {
      rc = set_error(qp->sq.broken() ? -EPIPE : -ENOMEM,
                     qp->sq.broken() ? "send queue indices are corrupt"
                                     : "send queue full (" + std::to_string(qp->sq.capacity()) +
                                           " entries): poll the CQ, then post again");
      break;
    }
    posted = true;
  }
  if (posted) ring_doorbell(qp->ctx);
  if (rc == 0 && bad_wr != nullptr) *bad_wr = nullptr;
  if (rc < 0 && bad_wr != nullptr) *bad_wr = wr;
  return rc;
}

int conduit_post_recv(conduit_qp* qp, conduit_recv_wr* wr, conduit_recv_wr** bad_wr) {
  if (bad_wr != nullptr) *bad_wr = wr;
  if (!valid_ptr(qp, "qp")) return -EINVAL;
  if (qp->ctx->daemon_gone.load(std::memory_order_relaxed)) {
    return set_error(-ECONNRESET, kDaemonGoneMsg);
  }
  int rc = 0;
  bool posted = false;
  for (; wr != nullptr; wr = wr->next) {
    conduit_shm_recv_wr e{};
    e.wr_id = wr->wr_id;
    rc = translate_sges(qp->ctx, wr->sg_list, wr->num_sge, e.sg_list, wr->wr_id);
    if (rc < 0) break;
    e.num_sge = static_cast<uint8_t>(wr->num_sge);
    if (!qp->rq.try_enqueue(e)) {
      rc = set_error(qp->rq.broken() ? -EPIPE : -ENOMEM,
                     qp->rq.broken() ? "receive queue indices are corrupt"
                                     : "receive queue full (" + std::to_string(qp->rq.capacity()) +
                                           " entries)");
      break;
    }
    posted = true;
  }
  if (posted) ring_doorbell(qp->ctx);
  if (rc == 0 && bad_wr != nullptr) *bad_wr = nullptr;
  if (rc < 0 && bad_wr != nullptr) *bad_wr = wr;
  return rc;
}

}  // extern "C"

// ---- connection manager ----------------------------------------------------------

namespace {

// Local events nobody waits for (a peer's later disconnect) are dropped beyond this.
constexpr size_t kMaxLocalCmEvents = 1024;
// A waiter sleeps at most this long between looks at the shared event list, so
// an event another thread fetched for it is seen soon.
constexpr int kCmWaitSliceMs = 20;

int reason_errno(uint16_t reason) {
  switch (reason) {
    case proto::kCmNoListener:
    case proto::kCmRefused:
      return -ECONNREFUSED;
    case proto::kCmQuota:
      return -EDQUOT;
    case proto::kCmPolicy:
      return -EPERM;
    case proto::kCmTimeout:
      return -ETIMEDOUT;
    default:
      return -EINVAL;
  }
}

const char* reason_text(uint16_t reason, uint32_t flags) {
  switch (reason) {
    case proto::kCmNoListener:
      return "no listener on that service";
    case proto::kCmQuota:
      return "the peer is out of connections or QPs (quota)";
    case proto::kCmPolicy:
      return "refused by the peer's policy";
    case proto::kCmRefused:
      if ((flags & proto::kCmFlagStale) != 0) {
        return "refused by the peer's connection manager as a stale connection (IB CM reason "
               "10): a QP of the two is still in an older connection there, which it now "
               "ends; connect again";
      }
      return "refused by the listening application";
    case proto::kCmTimeout:
      return "no answer from the peer's conduitd within the retry budget (is it running, "
             "and is the address right?)";
    default:
      return "the peer found the request invalid";
  }
}

// Takes every event the daemon holds for us into ctx->cm_events. Caller holds
// ctx->control_mu and ctx->cm_mu.
int fetch_cm_events(conduit_context* ctx) {
  for (;;) {
    proto::ReplyMessage reply;
    if (int rc = call(ctx, proto::CmPollEventRequest{}, reply); rc < 0) return rc;
    auto& ev = std::get<proto::CmPollEventReply>(reply.body).event;
    if (ev.kind == proto::CmEventKind::kNone) return 0;
    if (ctx->cm_events.size() >= kMaxLocalCmEvents) ctx->cm_events.pop_front();
    ctx->cm_events.push_back(std::move(ev));
  }
}

// Waits for the first event `match` accepts and moves it into *out.
template <class Match>
int wait_cm_event(conduit_context* ctx, int timeout_ms, Match match, proto::CmEvent* out) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  // The daemon is asked only when its eventfd says something waits (and once
  // at the start); the shared list is looked at every slice.
  for (bool kicked = true, fetched = false;; fetched = false) {
    {
      std::lock_guard cm(ctx->cm_mu);
      for (int pass = 0; pass < 2; ++pass) {
        for (auto it = ctx->cm_events.begin(); it != ctx->cm_events.end(); ++it) {
          if (match(*it)) {
            *out = std::move(*it);
            ctx->cm_events.erase(it);
            return 0;
          }
        }
        if (fetched || !kicked) break;
        // Drain before fetching: an event posted after the fetch kicks it again.
        ctx->cm_wake.drain();
        std::lock_guard lock(ctx->control_mu);
        if (int rc = fetch_cm_events(ctx); rc < 0) return rc;
        fetched = true;
      }
    }
    int wait_ms = kCmWaitSliceMs;
    if (timeout_ms >= 0) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return -ETIMEDOUT;
      wait_ms = std::min<int>(wait_ms, static_cast<int>(left.count()));
    }
    pollfd p[2] = {{ctx->cm_wake.fd(), POLLIN, 0}, {ctx->sock.get(), POLLRDHUP, 0}};
    const int n = ::poll(p, 2, wait_ms);
    if (n > 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
      ctx->daemon_gone.store(true, std::memory_order_relaxed);
      return set_error(-ECONNRESET, kDaemonGoneMsg);
    }
    kicked = n > 0 && (p[0].revents & POLLIN) != 0;
  }
}

int make_offer(const conduit_qp* qp, const conduit_cm_param* param, proto::CmQpOffer& o) {
  o.qpn = qp->qpn;
  if (param == nullptr) {
    o.access = proto::kAccessAll;
    return 0;
  }
  if (param->private_len > CONDUIT_CM_MAX_PRIVATE) {
    return set_error(
        -EINVAL, "private data is limited to " + std::to_string(CONDUIT_CM_MAX_PRIVATE) + " bytes");
  }
  if (param->private_len > 0 && param->private_data == nullptr) {
    return set_error(-EINVAL, "private_len is set but private_data is NULL");
  }
  if (param->mtu > CONDUIT_MTU_4096) return set_error(-EINVAL, "mtu must be a conduit_mtu value");
  // CONDUIT_CM_PRIVATE_TRUNCATED only ever reports on a peer's data: ignored here, so that a
  // request's peer_flags passed on as this side's offer are not refused when it is set.
  const uint32_t flags = param->flags & ~CONDUIT_CM_PRIVATE_TRUNCATED;
  if ((flags & ~(CONDUIT_CM_SELECTIVE_REPEAT | CONDUIT_CM_RDMA_CM)) != 0) {
    return set_error(-EINVAL, "unknown conduit_cm_param flags");
  }
  if ((flags & CONDUIT_CM_RDMA_CM) != 0 && param->private_len > CONDUIT_CM_RDMA_CM_PRIVATE) {
    return set_error(-EINVAL, "an rdma_cm request carries at most " +
                                  std::to_string(CONDUIT_CM_RDMA_CM_PRIVATE) +
                                  " bytes of private data");
  }
  o.access = param->access;
  o.path_mtu = static_cast<uint8_t>(param->mtu);
  o.flags = flags;
  const auto* b = static_cast<const uint8_t*>(param->private_data);
  o.private_data.assign(b, b + param->private_len);
  return 0;
}

// The public structs' peer fields: the GID form, and the IPv4 address (0 for IPv6).
void set_peer_fields(const proto::CmAddr& peer, uint32_t& ipv4, uint8_t (&gid)[16]) {
  std::memcpy(gid, peer.data(), sizeof gid);
  ipv4 = 0;
  (void)proto::cm_addr_ipv4(peer, ipv4);
}

proto::CmAddr peer_of(const conduit_cm_request& req) {
  proto::CmAddr a;
  std::memcpy(a.data(), req.peer_gid, a.size());
  return a;
}

// The outcome of connection `conn` of qp: 0 when established, else the reason as -errno.
int await_established(conduit_qp* qp, uint32_t conn, int timeout_ms, const std::string& who,
                      conduit_cm_conn* out) {
  conduit_context* ctx = qp->ctx;
  proto::CmEvent ev;
  int rc = wait_cm_event(
      ctx, timeout_ms,
      [conn](const proto::CmEvent& e) {
        return e.conn == conn && e.kind != proto::CmEventKind::kRequest;
      },
      &ev);
  if (rc == -ETIMEDOUT) {
    // Abandon it, so a late success does not leave a half-connected QP behind.
    std::lock_guard lock(ctx->control_mu);
    proto::ReplyMessage reply;
    call(ctx, proto::CmDisconnectRequest{qp->qpn}, reply);
    qp->cm_conn = 0;
    return set_error(-ETIMEDOUT,
                     who + ": not connected within " + std::to_string(timeout_ms) + " ms");
  }
  if (rc < 0) return rc;
  if (ev.kind != proto::CmEventKind::kEstablished) {
    qp->cm_conn = 0;
    const uint16_t reason =
        ev.kind == proto::CmEventKind::kRejected ? ev.reason : proto::kCmRefused;
    const char* text = ev.kind == proto::CmEventKind::kRejected ? reason_text(reason, ev.flags)
                                                                : "the peer disconnected";
    if (out != nullptr && ev.kind == proto::CmEventKind::kRejected) {
      // The peer's REJ: its private data (an rdma_reject()'s, as rdma_cm hands it over).
      *out = conduit_cm_conn{};
      set_peer_fields(ev.peer, out->peer_ipv4, out->peer_gid);
      out->private_len = static_cast<uint32_t>(ev.private_data.size());
      std::copy(ev.private_data.begin(), ev.private_data.end(), out->private_data);
      out->flags = ev.flags & proto::kCmFlagPrivateTruncated;
    }
    return set_error(reason_errno(reason), who + ": " + text);
  }
  qp->cm_connected_once = true;
  if (out != nullptr) {
    *out = conduit_cm_conn{};
    set_peer_fields(ev.peer, out->peer_ipv4, out->peer_gid);
    out->remote_qpn = ev.remote_qpn;
    out->mtu_bytes = ev.pmtu_bytes;
    out->flags = cm_flags(ev.flags);
    out->private_len = static_cast<uint32_t>(ev.private_data.size());
    std::copy(ev.private_data.begin(), ev.private_data.end(), out->private_data);
  }
  return 0;
}

// A peer's host for the connection manager: a dotted quad, an IPv6 address
// (a zone index such as "%eth0" is ignored: conduitd has one port), or a name
// that resolves to IPv4 (preferred) or IPv6.
bool parse_peer(const char* host, proto::CmAddr& out) {
  in_addr a4{};
  if (::inet_pton(AF_INET, host, &a4) == 1) {
    out = proto::cm_addr_v4(ntohl(a4.s_addr));
    return true;
  }
  std::string text(host);
  if (const size_t zone = text.find('%'); zone != std::string::npos) text.resize(zone);
  in6_addr a6{};
  if (::inet_pton(AF_INET6, text.c_str(), &a6) == 1) {
    std::memcpy(out.data(), a6.s6_addr, out.size());
    return true;
  }
  for (const int family : {AF_INET, AF_INET6}) {
    addrinfo hints{};
    hints.ai_family = family;
    addrinfo* res = nullptr;
    if (::getaddrinfo(host, nullptr, &hints, &res) != 0 || res == nullptr) continue;
    if (family == AF_INET) {
      out = proto::cm_addr_v4(
          ntohl(reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr.s_addr));
    } else {
      std::memcpy(out.data(),
                  reinterpret_cast<const sockaddr_in6*>(res->ai_addr)->sin6_addr.s6_addr,
                  out.size());
    }
    ::freeaddrinfo(res);
    return true;
  }
  return false;
}

}  // namespace

extern "C" {

int conduit_listen(conduit_context* ctx, uint64_t service) {
  if (!valid_ptr(ctx, "ctx")) return -EINVAL;
  std::lock_guard lock(ctx->control_mu);
  proto::ReplyMessage reply;
  return call(ctx, proto::CmListenRequest{service}, reply);
}

int conduit_unlisten(conduit_context* ctx, uint64_t service) {
  if (!valid_ptr(ctx, "ctx")) return -EINVAL;
  std::lock_guard lock(ctx->control_mu);
  proto::ReplyMessage reply;
  return call(ctx, proto::CmUnlistenRequest{service}, reply);
}

int conduit_get_request(conduit_context* ctx, int timeout_ms, conduit_cm_request* out) {
  if (!valid_ptr(ctx, "ctx") || !valid_ptr(out, "out")) return -EINVAL;
  proto::CmEvent ev;
  const int rc = wait_cm_event(
      ctx, timeout_ms,
      [](const proto::CmEvent& e) { return e.kind == proto::CmEventKind::kRequest; }, &ev);
  if (rc == -ETIMEDOUT) {
    return set_error(rc, "no connection request within " + std::to_string(timeout_ms) + " ms");
  }
  if (rc < 0) return rc;
  *out = conduit_cm_request{};
  out->id = ev.conn;
  out->service = ev.service;
  set_peer_fields(ev.peer, out->peer_ipv4, out->peer_gid);
  out->peer_qpn = ev.remote_qpn;
  out->peer_mtu_bytes = ev.pmtu_bytes;
  out->peer_flags = cm_flags(ev.flags);
  out->private_len = static_cast<uint32_t>(ev.private_data.size());
  std::copy(ev.private_data.begin(), ev.private_data.end(), out->private_data);
  return 0;
}

int conduit_accept(conduit_qp* qp, const conduit_cm_request* req, const conduit_cm_param* param,
                   int timeout_ms, conduit_cm_conn* out) {
  if (!valid_ptr(qp, "qp") || !valid_ptr(req, "req")) return -EINVAL;
  proto::CmAcceptRequest r;
  r.conn = req->id;
  if (int rc = make_offer(qp, param, r.offer); rc < 0) return rc;
  {
    std::lock_guard lock(qp->ctx->control_mu);
    proto::ReplyMessage reply;
    if (int rc = call(qp->ctx, r, reply); rc < 0) return rc;
    qp->cm_conn = req->id;
  }
  const int rc = await_established(qp, req->id, timeout_ms,
                                   "connection from " + proto::cm_addr_text(peer_of(*req)) +
                                       " (service " + std::to_string(req->service) + ")",
                                   out);
  if (rc == 0 && out != nullptr && out->private_len == 0) {
    // The request's private data is the useful part for the passive side.
    out->private_len = req->private_len;
    std::memcpy(out->private_data, req->private_data, req->private_len);
  }
  return rc;
}

int conduit_reject(conduit_context* ctx, const conduit_cm_request* req, int reason) {
  return conduit_reject_data(ctx, req, reason, nullptr, 0);
}

int conduit_reject_data(conduit_context* ctx, const conduit_cm_request* req, int reason,
                        const void* private_data, size_t private_len) {
  if (!valid_ptr(ctx, "ctx") || !valid_ptr(req, "req")) return -EINVAL;
  if (private_len > CONDUIT_CM_MAX_PRIVATE) {
    return set_error(-EINVAL, "private_len " + std::to_string(private_len) + " exceeds " +
                                  std::to_string(CONDUIT_CM_MAX_PRIVATE) + " bytes");
  }
  if (private_len > 0 && private_data == nullptr) {
    return set_error(-EINVAL, "private_len is set but private_data is NULL");
  }
  if (reason != CONDUIT_CM_REJ_REFUSED && reason != CONDUIT_CM_REJ_QUOTA &&
      reason != CONDUIT_CM_REJ_POLICY) {
    return set_error(-EINVAL,
                     "reject with CONDUIT_CM_REJ_REFUSED, CONDUIT_CM_REJ_QUOTA or "
                     "CONDUIT_CM_REJ_POLICY");
  }
  std::lock_guard lock(ctx->control_mu);
  proto::ReplyMessage reply;
  proto::CmRejectRequest r{req->id, static_cast<uint16_t>(reason), {}};
  const auto* b = static_cast<const uint8_t*>(private_data);
  if (private_len > 0) r.private_data.assign(b, b + private_len);
  return call(ctx, r, reply);
}

int conduit_connect_service(conduit_qp* qp, const char* host, uint64_t service,
                            const conduit_cm_param* param, int timeout_ms, conduit_cm_conn* out) {
  if (!valid_ptr(qp, "qp") || !valid_ptr(host, "host")) return -EINVAL;
  proto::CmConnectRequest r;
  if (!parse_peer(host, r.peer)) {
    return set_error(-EINVAL, std::string("'") + host +
                                  "' is not an IPv4 or IPv6 address or a name "
                                  "that resolves to one");
  }
  r.service = service;
  if (int rc = make_offer(qp, param, r.offer); rc < 0) return rc;
  uint32_t conn;
  {
    std::lock_guard lock(qp->ctx->control_mu);
    proto::ReplyMessage reply;
    if (int rc = call(qp->ctx, r, reply); rc < 0) return rc;
    conn = std::get<proto::CmConnectReply>(reply.body).conn;
    qp->cm_conn = conn;
  }
  return await_established(
      qp, conn, timeout_ms,
      "connect to " + proto::cm_addr_text(r.peer) + " service " + std::to_string(service), out);
}

int conduit_disconnect(conduit_qp* qp) {
  if (!valid_ptr(qp, "qp")) return -EINVAL;
  if (qp->cm_conn == 0) {
    return set_error(-ENOTCONN,
                     "QP " + std::to_string(qp->qpn) + " has no connection-manager connection");
  }
  std::lock_guard lock(qp->ctx->control_mu);
  proto::ReplyMessage reply;
  const int rc = call(qp->ctx, proto::CmDisconnectRequest{qp->qpn}, reply);
  qp->cm_conn = 0;
  return rc;
}

int conduit_wait_disconnect(conduit_qp* qp, int timeout_ms) {
  if (!valid_ptr(qp, "qp")) return -EINVAL;
  if (!qp->cm_connected_once) {
    return set_error(-ENOTCONN,
                     "QP " + std::to_string(qp->qpn) + " has no connection-manager connection");
  }
  if (qp->cm_conn == 0) return 0;  // ended already: conduit_disconnect, or an earlier wait
  proto::CmEvent ev;
  const uint32_t qpn = qp->qpn;
  const int rc = wait_cm_event(
      qp->ctx, timeout_ms,
      [qpn](const proto::CmEvent& e) {
        return e.qpn == qpn && e.kind == proto::CmEventKind::kDisconnected;
      },
      &ev);
  if (rc == -ETIMEDOUT) {
    return set_error(-ETIMEDOUT, "QP " + std::to_string(qpn) + " is still connected");
  }
  if (rc < 0) return rc;
  qp->cm_conn = 0;
  return 0;
}

}  // extern "C"
