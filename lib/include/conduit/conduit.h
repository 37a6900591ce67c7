/* libconduit: verbs-like RDMA over conduitd's shared-memory rings.
 *
 * A process opens a context on the daemon's control socket; the daemon maps a
 * region of shared memory for it. Memory for RDMA is allocated from that
 * region (conduit_alloc_mr), queue pairs and completion queues live in it, and
 * posting a work request is a copy into a ring plus, only when the daemon is
 * asleep, a one-byte send on a wakeup socket. Connect a QP to a peer either
 * through conduitd's connection manager (conduit_listen /
 * conduit_connect_service: the daemons
 * negotiate QPN, PSN, path MTU and capabilities over UDP), or manually with the
 * peer's QPN, PSN and GID (the out-of-band exchange ibv_rc_pingpong and
 * perftest do; the only way to reach a verbs peer).
 *
 * Errors: every function returning int returns 0 (or a count) on success and a
 * negative errno value on failure. conduit_strerror(rc), called on the same
 * thread right after the failing call, returns a message that says what to do
 * (which socket has no daemon, which group grants access, which quota is
 * exhausted); otherwise it returns a generic description of rc.
 *
 * Threads: control calls (open/close, create/destroy, alloc/dereg, connect,
 * modify/query) may be made from any thread; they are serialized per context.
 * conduit_post_send / conduit_post_recv on one QP, and conduit_poll_cq /
 * conduit_wait_cq on one CQ, must each be called by one thread at a time.
 *
 * Ownership: destroy QPs before their CQs, and everything before
 * conduit_close (which destroys whatever is left).
 */
#ifndef CONDUIT_CONDUIT_H_
#define CONDUIT_CONDUIT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CONDUIT_API __attribute__((visibility("default")))
#else
#define CONDUIT_API
#endif

/* Where conduitd listens unless the caller or $CONDUIT_SOCKET says otherwise. */
#define CONDUIT_DEFAULT_SOCKET "/run/conduit/conduitd.sock"

struct conduit_context;
struct conduit_cq;
struct conduit_qp;

/* ---- context ------------------------------------------------------------- */

struct conduit_context_attr {
  const char* socket_path; /* NULL: $CONDUIT_SOCKET, else CONDUIT_DEFAULT_SOCKET */
  uint64_t region_bytes;   /* memory this process will register; 0: daemon default */
  const char* client_name; /* shown by conduitctl; NULL: none */
};

/* attr may be NULL (all defaults). */
CONDUIT_API int conduit_open(const struct conduit_context_attr* attr, struct conduit_context** out);
/* Destroys every remaining QP, CQ and MR, detaches and closes the socket. */
CONDUIT_API int conduit_close(struct conduit_context* ctx);
/* What this context can hold, like ibv_query_device's limits: the shape of its
 * shared-memory area, laid out by conduitd's policy when the context opened
 * (clients.quotas.*; a later reload applies to contexts opened after it). */
struct conduit_context_limits {
  uint32_t max_qps;         /* QPs this context may create (clients.quotas.max_qps) */
  uint32_t max_cqs;         /* CQs (clients.quotas.max_cqs) */
  uint32_t max_send_wr;     /* deepest send queue of a QP (clients.quotas.max_send_wr) */
  uint32_t max_recv_wr;     /* deepest receive queue (clients.quotas.max_recv_wr) */
  uint32_t max_cqe;         /* most entries of a CQ (clients.quotas.max_cqe) */
  uint32_t max_inline_data; /* bytes a CONDUIT_SEND_INLINE work request may carry */
  uint64_t region_bytes;    /* registrable memory of this context (its arena) */
};
CONDUIT_API int conduit_query_context(struct conduit_context* ctx,
                                      struct conduit_context_limits* out);
/* See the note on errors above. Never NULL. */
CONDUIT_API const char* conduit_strerror(int err);
/* The library version, e.g. "0.1.0". */
CONDUIT_API const char* conduit_version(void);

/* ---- memory regions ------------------------------------------------------ */

enum conduit_access_flags {
  CONDUIT_ACCESS_LOCAL_WRITE = 1 << 0, /* receives and RDMA READ results land here */
  CONDUIT_ACCESS_REMOTE_WRITE = 1 << 1,
  CONDUIT_ACCESS_REMOTE_READ = 1 << 2,
  CONDUIT_ACCESS_REMOTE_ATOMIC = 1 << 3, /* the peer's compare-and-swap / fetch-and-add */
};

struct conduit_mr {
  void* addr;      /* start of the memory in this process */
  size_t length;   /* bytes */
  uint32_t lkey;   /* names the MR in local scatter-gather elements */
  uint32_t rkey;   /* give to the peer for RDMA WRITE/READ into this MR */
  uint64_t iova;   /* give to the peer as the remote address of addr */
  uint32_t access; /* conduit_access_flags */
};

/* Allocates `length` bytes (page aligned, zeroed) in the shared region and
 * registers them. -EDQUOT: quota exceeded; -ENOMEM: the region has no free
 * block that large; -EINVAL: length 0 or an unknown access flag. */
CONDUIT_API int conduit_alloc_mr(struct conduit_context* ctx, size_t length, uint32_t access,
                                 struct conduit_mr** out);
/* Deregisters and frees the memory. It returns once conduitd's engine has dropped
 * the MR: no peer's RDMA reaches the memory after that, so it may be handed out
 * again at once. -ETIMEDOUT: the engine did not confirm within a second (it is
 * stuck or stopping); the MR is freed here all the same, and conduit_strerror()
 * says so. */
CONDUIT_API int conduit_free_mr(struct conduit_mr* mr);

/* ---- completion queues ---------------------------------------------------- */

enum conduit_wc_status {
  CONDUIT_WC_SUCCESS = 0,
  CONDUIT_WC_LOC_LEN_ERR = 1,
  CONDUIT_WC_LOC_QP_OP_ERR = 2,
  CONDUIT_WC_LOC_PROT_ERR = 3,
  CONDUIT_WC_WR_FLUSH_ERR = 4,
  CONDUIT_WC_REM_ACCESS_ERR = 5,
  CONDUIT_WC_REM_INV_REQ_ERR = 6,
  CONDUIT_WC_REM_OP_ERR = 7,
  CONDUIT_WC_RETRY_EXC_ERR = 8,
  CONDUIT_WC_RNR_RETRY_EXC_ERR = 9,
  CONDUIT_WC_FATAL_ERR = 10,
};

enum conduit_wc_opcode {
  CONDUIT_WC_SEND = 1,
  CONDUIT_WC_RDMA_WRITE = 2,
  CONDUIT_WC_RDMA_READ = 3,
  CONDUIT_WC_RECV = 4,
  CONDUIT_WC_RECV_RDMA_WITH_IMM = 5,
  CONDUIT_WC_COMP_SWAP = 6, /* byte_len 8: the original value is in the SGE */
  CONDUIT_WC_FETCH_ADD = 7,
};

#define CONDUIT_WC_WITH_IMM 1u

struct conduit_wc {
  uint64_t wr_id;
  uint32_t status;   /* enum conduit_wc_status */
  uint32_t opcode;   /* enum conduit_wc_opcode */
  uint32_t byte_len; /* receives and RDMA READ: bytes transferred */
  uint32_t imm_data; /* host order; valid when wc_flags has CONDUIT_WC_WITH_IMM */
  uint32_t qp_num;
  uint32_t src_qp;
  uint32_t wc_flags;
  uint32_t vendor_err; /* daemon detail code for errors */
};

CONDUIT_API const char* conduit_wc_status_str(uint32_t status);

/* entries: at least this many completions fit (the daemon's depth may be larger). */
CONDUIT_API int conduit_create_cq(struct conduit_context* ctx, uint32_t entries,
                                  struct conduit_cq** out);
/* -EBUSY: a QP still uses it (destroy the QPs first); the CQ stays. */
CONDUIT_API int conduit_destroy_cq(struct conduit_cq* cq);
/* Copies up to max completions into wc; returns how many (0 if none).
 * A thread that shares its core with a spinning conduitd engine must not spin
 * on this: poll and sched_yield() between polls, or sleep in conduit_wait_cq.
 * The engine gives its core up once after it has completed something for a
 * client (a completion, or an RDMA WRITE's data in registered memory).
 *
 * Errors, each after every completion the CQ holds has been returned:
 *   -EOVERFLOW   CQ overrun (verbs: IBV_EVENT_CQ_ERR): conduitd had completions
 *                for this CQ that could not wait for room and found its ring
 *                (conduit_query_context's max_cqe entries) full, so it lost
 *                them: the error completion of a work request it rejected, or
 *                the WR_FLUSH_ERR completions of a QP's outstanding work
 *                requests when the QP was destroyed or released (conduitd
 *                stopping, for one). Some work requests posted to QPs that
 *                complete into this CQ will never complete; which ones cannot
 *                be told. Returned once per overrun, after the completions
 *                written before it; conduit_strerror() says how many were
 *                lost. The CQ stays usable: the next call carries on (0,
 *                completions, or -ECONNRESET). Successful completions of the
 *                transport are never lost (they wait for room), and conduitd's
 *                log says how many flush completions a stop lost, per client.
 *   -ECONNRESET  conduitd is gone (stopped or restarted): no more completions
 *                will come; open a new context. Remembered: every later call
 *                returns it too. A stop's flush completions, and its overrun,
 *                come first.
 *   -EPIPE       the CQ ring's indices are corrupt; the context is unusable. */
CONDUIT_API int conduit_poll_cq(struct conduit_cq* cq, int max, struct conduit_wc* wc);
/* Blocks until the CQ has completions, or an overrun conduit_poll_cq has not
 * reported yet (it never sleeps through one), or timeout_ms passes (-1:
 * forever). Returns the number of completions available, 1 for an overrun
 * alone (> 0: poll), 0 on timeout, or -errno (-ECONNRESET: conduitd is gone). */
CONDUIT_API int conduit_wait_cq(struct conduit_cq* cq, int timeout_ms);
/* Blocks until one of n CQs (1..CONDUIT_MAX_WAIT_CQS, all of one context) has
 * completions or an unreported overrun, or timeout_ms passes (-1: forever),
 * like a verbs completion channel shared by several CQs. Returns how many of
 * them have completions or an overrun (> 0; poll each), 0 on timeout, or
 * -errno. As with conduit_wait_cq, one thread at a time may wait on a given
 * CQ. */
#define CONDUIT_MAX_WAIT_CQS 64
CONDUIT_API int conduit_wait_cqs(struct conduit_cq* const* cqs, int n, int timeout_ms);

/* ---- queue pairs ---------------------------------------------------------- */

struct conduit_qp_init_attr {
  struct conduit_cq* send_cq;
  struct conduit_cq* recv_cq;
  uint32_t max_send_wr;      /* 0: the daemon's depth */
  uint32_t max_recv_wr;      /* 0: the daemon's depth */
  const char* traffic_class; /* policy class name; NULL: the default class */
};

CONDUIT_API int conduit_create_qp(struct conduit_context* ctx,
                                  const struct conduit_qp_init_attr* attr, struct conduit_qp** out);
CONDUIT_API int conduit_destroy_qp(struct conduit_qp* qp);
CONDUIT_API uint32_t conduit_qp_num(const struct conduit_qp* qp);

enum conduit_qp_state {
  CONDUIT_QPS_RESET = 0,
  CONDUIT_QPS_INIT = 1,
  CONDUIT_QPS_RTR = 2,
  CONDUIT_QPS_RTS = 3,
  CONDUIT_QPS_SQD = 4,
  CONDUIT_QPS_SQE = 5,
  CONDUIT_QPS_ERR = 6,
};

/* Path MTU, verbs numbering. */
enum conduit_mtu {
  CONDUIT_MTU_256 = 1,
  CONDUIT_MTU_512 = 2,
  CONDUIT_MTU_1024 = 3,
  CONDUIT_MTU_2048 = 4,
  CONDUIT_MTU_4096 = 5,
};

/* What the peer told us out of band, plus our own start PSN. */
struct conduit_qp_connect_attr {
  uint32_t remote_qpn;    /* 24 bit */
  uint32_t remote_psn;    /* peer's first send PSN = our first expected PSN */
  uint32_t local_psn;     /* our first send PSN (tell the peer) */
  uint8_t remote_gid[16]; /* e.g. ::ffff:198.18.0.2 for RoCEv2 over IPv4 */
  uint32_t mtu;           /* enum conduit_mtu */
  uint32_t access;        /* conduit_access_flags remote peers may use on this QP */
  uint8_t timeout;        /* local ACK timeout 4.096 us * 2^timeout; 0..31 (14 is common) */
  uint8_t retry_cnt;      /* 0..7 */
  uint8_t rnr_retry;      /* 0..7; 7 = retry forever */
  uint8_t min_rnr_timer;  /* 0..31, IB encoding (12 = 0.64 ms) */
  /* READs in flight as requester (the peer's responder depth) and as responder, 1..16;
   * 0: the daemon's defaults (transport.max_outstanding_reads, and 16). */
  uint8_t max_rd_atomic;
  uint8_t max_dest_rd_atomic;
};

/* RESET -> INIT -> RTR -> RTS in one call. */
CONDUIT_API int conduit_connect_qp(struct conduit_qp* qp,
                                   const struct conduit_qp_connect_attr* attr);

/* Low-level state changes, as ibv_modify_qp. attr_mask: CONDUIT_QP_* bits. */
enum conduit_qp_attr_mask {
  CONDUIT_QP_STATE = 1 << 0,
  CONDUIT_QP_ACCESS = 1 << 1,
  CONDUIT_QP_PATH_MTU = 1 << 2,
  CONDUIT_QP_DEST_QPN = 1 << 3,
  CONDUIT_QP_RQ_PSN = 1 << 4,
  CONDUIT_QP_SQ_PSN = 1 << 5,
  CONDUIT_QP_DGID = 1 << 6,
  CONDUIT_QP_TIMEOUT = 1 << 7,
  CONDUIT_QP_RETRY_CNT = 1 << 8,
  CONDUIT_QP_RNR_RETRY = 1 << 9,
  CONDUIT_QP_MIN_RNR_TIMER = 1 << 10,
  CONDUIT_QP_MAX_QP_RD_ATOMIC = 1 << 11,   /* RTR -> RTS */
  CONDUIT_QP_MAX_DEST_RD_ATOMIC = 1 << 12, /* INIT -> RTR */
};

struct conduit_qp_attr {
  uint32_t state; /* enum conduit_qp_state */
  uint32_t access;
  uint32_t path_mtu; /* enum conduit_mtu */
  uint32_t dest_qpn;
  uint32_t rq_psn;
  uint32_t sq_psn;
  uint8_t dgid[16];
  uint8_t timeout;
  uint8_t retry_cnt;
  uint8_t rnr_retry;
  uint8_t min_rnr_timer;
  /* READs and atomics this QP keeps in flight as requester, 1..16: no more than the peer's
   * responder takes (its max_dest_rd_atomic). Unset: the daemon's transport.max_outstanding_reads.
   */
  uint8_t max_rd_atomic;
  /* READs and atomics it serves at once as responder, 1..16. Unset: 16. */
  uint8_t max_dest_rd_atomic;
};

CONDUIT_API int conduit_modify_qp(struct conduit_qp* qp, const struct conduit_qp_attr* attr,
                                  uint32_t attr_mask);
CONDUIT_API int conduit_query_qp(struct conduit_qp* qp, struct conduit_qp_attr* out);

/* ---- work requests -------------------------------------------------------- */

enum conduit_wr_opcode {
  CONDUIT_WR_SEND = 1,
  CONDUIT_WR_SEND_WITH_IMM = 2,
  CONDUIT_WR_RDMA_WRITE = 3,
  CONDUIT_WR_RDMA_WRITE_WITH_IMM = 4,
  CONDUIT_WR_RDMA_READ = 5,
  /* 8-byte atomics, as IBV_WR_ATOMIC_*: remote_addr 8-byte aligned in a peer MR and QP
   * with CONDUIT_ACCESS_REMOTE_ATOMIC; one SGE of 8 bytes receives the value the remote
   * word held before. They count against max_rd_atomic like READs. */
  CONDUIT_WR_ATOMIC_CMP_AND_SWP = 6,   /* if *remote == compare_add: *remote = swap */
  CONDUIT_WR_ATOMIC_FETCH_AND_ADD = 7, /* *remote += compare_add */
};

enum conduit_send_flags {
  CONDUIT_SEND_SIGNALED = 1 << 0, /* a completion also on success */
  CONDUIT_SEND_SOLICITED = 1 << 1,
  CONDUIT_SEND_FENCE = 1 << 2,
  CONDUIT_SEND_INLINE = 1 << 3, /* copy the payload into the WR (<= 96 bytes) */
};

/* Up to this many SGEs per work request. */
#define CONDUIT_MAX_SGE 6

struct conduit_sge {
  uint64_t addr;   /* pointer into a conduit_mr, as an integer */
  uint32_t length; /* bytes */
  uint32_t lkey;   /* that MR's lkey */
};

struct conduit_send_wr {
  uint64_t wr_id;
  struct conduit_send_wr* next; /* NULL ends the list */
  struct conduit_sge* sg_list;
  int num_sge;
  uint32_t opcode;      /* enum conduit_wr_opcode */
  uint32_t send_flags;  /* conduit_send_flags */
  uint32_t imm_data;    /* *_WITH_IMM, host order */
  uint64_t remote_addr; /* RDMA and atomics: the peer's iova + offset */
  uint32_t rkey;        /* RDMA and atomics: the peer's rkey */
  uint64_t compare_add; /* ATOMIC_CMP_AND_SWP: the value compared; FETCH_AND_ADD: added */
  uint64_t swap;        /* ATOMIC_CMP_AND_SWP: the value stored on a match */
};

struct conduit_recv_wr {
  uint64_t wr_id;
  struct conduit_recv_wr* next;
  struct conduit_sge* sg_list;
  int num_sge;
};

/* Posts a list of WRs. On failure *bad_wr is the first one not posted (those
 * before it are posted). -ENOMEM: the queue is full; -EINVAL: a WR is
 * malformed (conduit_strerror says which field: num_sge above CONDUIT_MAX_SGE,
 * an SGE outside its MR, inline data above max_inline_data, ...);
 * -ECONNRESET: conduitd is gone; -EPIPE: the queue's ring indices are corrupt. */
CONDUIT_API int conduit_post_send(struct conduit_qp* qp, struct conduit_send_wr* wr,
                                  struct conduit_send_wr** bad_wr);
CONDUIT_API int conduit_post_recv(struct conduit_qp* qp, struct conduit_recv_wr* wr,
                                  struct conduit_recv_wr** bad_wr);

/* ---- connection manager -------------------------------------------------------
 *
 * conduitd connects a QP to a QP behind another conduitd (or this one) by
 * service number, in the style of rdma_cm: the passive side listens on a
 * service and accepts or rejects each request; the active side names the peer
 * daemon's IPv4 or IPv6 address (IPv6 needs port.address6) and the service.
 * The daemons exchange REQ / REP / RTU over UDP (policy port.cm_udp_port, 4792
 * by default; over IPv6 with a UDP checksum), with retries: a peer
 * that does not answer fails the connection after about 1.2 s (ETIMEDOUT); over
 * the IB CM (CONDUIT_CM_RDMA_CM) the REQ is resent as Linux's ib_cm resends it,
 * every 1.024 s plus twice the packet life time the QP's ACK timeout stands for
 * (1.088 s with the default 14), 15 times, so after about 17 s (longer when the
 * peer asked to wait with an MRA, as rdma_cm does while its application decides:
 * each later resend then waits as Linux's would, at most 120 s: 65.6 s for rdma_cm's
 * MRA with the default ACK timeout, about 16 minutes in all).
 * QPN and start PSNs are exchanged, the path MTU is the smaller of the two
 * offers, selective repeat is used only when both offer it. The QP must be in
 * RESET or INIT; when the call returns 0 it is in RTS, connected.
 *
 * Errors a connect or accept returns when the connection fails:
 *   -ECONNREFUSED  nobody listens on that service at the peer, or the
 *                  listening application rejected it (CONDUIT_CM_REJ_REFUSED), or
 *                  (over the IB CM) the peer refused it as a stale connection: a QP
 *                  of the two is still in an older connection there, which the peer
 *                  then ends; a later attempt can succeed (rdma_cm: REJECTED, status 10)
 *   -EDQUOT        the peer is out of connections or QPs (CONDUIT_CM_REJ_QUOTA)
 *   -EPERM         the peer's policy refuses it (CONDUIT_CM_REJ_POLICY)
 *   -ETIMEDOUT     no answer within the retry budget, or timeout_ms passed
 *   -EINVAL        the peer found the request invalid
 * conduit_strerror() then names the peer, the service and the reason.
 * Threads: any thread; waits from several threads on one context work but
 * may each take up to 20 ms longer. */

#define CONDUIT_CM_MAX_PRIVATE 64 /* bytes of private data per request or reply */

enum conduit_cm_reject_reason {
  CONDUIT_CM_REJ_NO_LISTENER = 1, /* sent by the peer daemon, never by an application */
  CONDUIT_CM_REJ_QUOTA = 2,
  CONDUIT_CM_REJ_POLICY = 3,
  CONDUIT_CM_REJ_REFUSED = 4,
  CONDUIT_CM_REJ_TIMEOUT = 5, /* local: the peer never answered */
  CONDUIT_CM_REJ_INVALID = 6,
};

/* Offer selective repeat (both ends must offer it; a daemon whose policy says
 * transport.loss_recovery: selective offers it for every connection). */
#define CONDUIT_CM_SELECTIVE_REPEAT 1u
/* conduit_connect_service: speak the InfiniBand CM, as the Linux kernel's ib_cm
 * does over RoCE v2, to a verbs application on the peer host that listens with
 * rdma_listen() on port `service` (0..65535; larger values are sent as a raw IB
 * service id). Such a connection runs go-back-N, and its READ/atomic depths are
 * the smaller of both sides'. On a request or connection: it came from a verbs
 * peer's rdma_connect() (any listener receives those for its port number). */
#define CONDUIT_CM_RDMA_CM 2u
/* The private data an rdma_cm request leaves the application. Over the IB CM a
 * receiver sees the whole field (up to CONDUIT_CM_MAX_PRIVATE bytes), not the
 * length sent: the protocol does not carry it. */
#define CONDUIT_CM_RDMA_CM_PRIVATE 56
/* On a request or connection (peer_flags, flags), and on a refused connect's conn: the peer's
 * private data went on past CONDUIT_CM_MAX_PRIVATE bytes and private_data holds its first
 * CONDUIT_CM_MAX_PRIVATE. Over the IB CM, where no length is carried, a non-zero byte later in
 * the field: a REJ's (rdma_reject()) holds up to 148 bytes, a REP's (rdma_accept()) 196. The
 * rest is not kept: the structs' 64-byte arrays are part of the ABI an application was built
 * with. Ignored in a conduit_cm_param (a request's peer_flags may be passed on as is). */
#define CONDUIT_CM_PRIVATE_TRUNCATED 8u

/* What this side offers. NULL where a function takes one: all access flags, the daemon's
 * transport.pmtu, no flags, no private data. The ACK timeout and retry counts the QP gets
 * are the daemon's transport defaults. */
struct conduit_cm_param {
  uint32_t access;          /* conduit_access_flags the peer may use on this QP */
  uint32_t mtu;             /* enum conduit_mtu; 0: the daemon's transport.pmtu. The daemon
                               offers at most what its port's MTU carries (as rdma_cm) */
  uint32_t flags;           /* CONDUIT_CM_SELECTIVE_REPEAT, CONDUIT_CM_RDMA_CM */
  const void* private_data; /* handed to the peer's application; may be NULL */
  size_t private_len;       /* 0..CONDUIT_CM_MAX_PRIVATE */
};

/* A peer's request to connect to a service this context listens on. */
struct conduit_cm_request {
  uint32_t id; /* pass the request to conduit_accept or conduit_reject */
  uint64_t service;
  uint32_t peer_ipv4;   /* the requesting host's IPv4 address, host byte order; 0 over IPv6 */
  uint8_t peer_gid[16]; /* its address as a RoCE v2 GID: ::ffff:a.b.c.d, or the IPv6 address */
  uint32_t peer_qpn;
  uint32_t peer_mtu_bytes; /* its offer */
  uint32_t peer_flags;     /* CONDUIT_CM_SELECTIVE_REPEAT if offered, CONDUIT_CM_RDMA_CM,
                              CONDUIT_CM_PRIVATE_TRUNCATED */
  uint32_t private_len;
  uint8_t private_data[CONDUIT_CM_MAX_PRIVATE];
};

/* What an established connection agreed on (optional output). When the peer refused
 * the connection (its REJ), only the peer fields and the private data are set: the
 * REJ's private data, as a verbs peer's rdma_reject() or a conduit peer's
 * conduit_reject_data() sent it (over the IB CM the whole field, up to
 * CONDUIT_CM_MAX_PRIVATE bytes, and flags CONDUIT_CM_PRIVATE_TRUNCATED when the peer's went
 * on past them; from a conduit peer over its native CM, what it sent). */
struct conduit_cm_conn {
  uint32_t peer_ipv4;   /* host byte order; 0 when the peer is IPv6 */
  uint8_t peer_gid[16]; /* ::ffff:a.b.c.d, or the peer's IPv6 address */
  uint32_t remote_qpn;
  uint32_t mtu_bytes;
  uint32_t flags;       /* CONDUIT_CM_SELECTIVE_REPEAT when in use, CONDUIT_CM_RDMA_CM,
                           CONDUIT_CM_PRIVATE_TRUNCATED */
  uint32_t private_len; /* the peer's private data: its accept (for connect), request, or REJ */
  uint8_t private_data[CONDUIT_CM_MAX_PRIVATE];
};

/* Requests for `service` on this daemon come to this context from now on.
 * -EADDRINUSE: another client listens on it. */
CONDUIT_API int conduit_listen(struct conduit_context* ctx, uint64_t service);
CONDUIT_API int conduit_unlisten(struct conduit_context* ctx, uint64_t service);
/* Waits up to timeout_ms (-1: forever) for the next request to any service this
 * context listens on. 0 and *out filled, or -ETIMEDOUT. A request not answered
 * within about 1.2 s expires (the requester gives up); one from a verbs peer
 * (CONDUIT_CM_RDMA_CM) lives as long as its REQ's resends last (rdma_cm on rxe:
 * about 98 s from Linux 6.1, less from later kernels, whose RoCE packet life
 * time is shorter), and up to 120 s once the requester resent it (conduitd asks
 * it to wait, with an MRA, as Linux's rdma_cm does). */
CONDUIT_API int conduit_get_request(struct conduit_context* ctx, int timeout_ms,
                                    struct conduit_cm_request* out);
/* Accepts req with qp and waits up to timeout_ms (-1: until the connection
 * manager decides) until the connection is established. out may be NULL. */
CONDUIT_API int conduit_accept(struct conduit_qp* qp, const struct conduit_cm_request* req,
                               const struct conduit_cm_param* param, int timeout_ms,
                               struct conduit_cm_conn* out);
/* Refuses req; the requester sees the reason (CONDUIT_CM_REJ_REFUSED, _QUOTA or _POLICY). */
CONDUIT_API int conduit_reject(struct conduit_context* ctx, const struct conduit_cm_request* req,
                               int reason);
/* conduit_reject with private data for the requester, as rdma_reject(id, data, len): 0 to
 * CONDUIT_CM_MAX_PRIVATE bytes (private_data may be NULL when 0), -EINVAL beyond. A conduit
 * requester finds them in the conduit_cm_conn its failed connect filled in; an rdma_cm one in
 * its REJECTED event (over the IB CM, the REJ's private data field: it sees the whole field,
 * the rest zero). A conduitd peer older than this function refuses a REJ with private data as
 * malformed (its requester times out), so send none to one. */
CONDUIT_API int conduit_reject_data(struct conduit_context* ctx,
                                    const struct conduit_cm_request* req, int reason,
                                    const void* private_data, size_t private_len);
/* Connects qp to `service` at the conduitd with address `host` (dotted quad,
 * IPv6 address, or a name that resolves to IPv4 or else IPv6; IPv6 needs
 * port.address6 in the daemon's policy) and waits up to timeout_ms (-1: until
 * the connection manager decides) for the outcome. out may be NULL. */
CONDUIT_API int conduit_connect_service(struct conduit_qp* qp, const char* host, uint64_t service,
                                        const struct conduit_cm_param* param, int timeout_ms,
                                        struct conduit_cm_conn* out);
/* Ends qp's connection: this QP goes to ERROR (outstanding WRs complete with
 * CONDUIT_WC_WR_FLUSH_ERR) and the peer's daemon is told; the peer's QP is
 * left as it is (what it has received stays; new sends to us fail after the
 * retries). Destroying a connected QP, or the process exiting, tells the peer
 * the same way. -ENOTCONN: qp has no connection. */
CONDUIT_API int conduit_disconnect(struct conduit_qp* qp);
/* Waits up to timeout_ms (-1: forever) until the peer ends qp's connection
 * (it called conduit_disconnect, destroyed its QP or exited: its daemon sends
 * a disconnect). 0 when it ended (at once if this side already disconnected),
 * -ETIMEDOUT, -ENOTCONN when qp was never connected through the connection
 * manager. What the peer sent before stays receivable; our QP stays as it is
 * (sends to the peer fail after the retries): disconnect or destroy it. */
CONDUIT_API int conduit_wait_disconnect(struct conduit_qp* qp, int timeout_ms);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CONDUIT_CONDUIT_H_ */
