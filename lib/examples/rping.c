/* conduit-rping: the peer of librdmacm's rping (rdmacm-utils), connecting
 * through the InfiniBand CM as rdma_cm does.
 *
 *   conduit-rping -s [-vV] [-S size] [-C count] [-p port]            server
 *   conduit-rping -c [-vV] [-S size] [-C count] -a addr [-p port]    client
 *
 * The exchange is rping's, per ping: the client SENDs the address, rkey and
 * length of its source buffer (16 bytes: be64 addr, be32 rkey, be32 size); the
 * server RDMA READs that buffer and SENDs a go-ahead; the client SENDs its sink
 * buffer's address; the server RDMA WRITEs what it read there (the string's
 * length + 1) and SENDs a go-ahead. The client fills the source with rping's
 * text ("rdma-ping-N: " then letters A..z rotating per ping, NUL at the end);
 * -V compares the sink with it, -v prints the data as rping does. The client
 * disconnects after -C pings (default 1 here; rping's default, 0, means
 * forever); the server serves until the client disconnects, then exits 0.
 * --socket PATH (or $CONDUIT_SOCKET) names conduitd's control socket.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <conduit/conduit.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kInfoBytes = 16, kMaxSize = 64 * 1024 - 1, kWaitS = 30 };

struct rping {
  struct conduit_context* ctx;
  struct conduit_cq* cq;
  struct conduit_qp* qp;
  struct conduit_mr* recv_mr;  /* the peer's 16-byte messages */
  struct conduit_mr* send_mr;  /* ours */
  struct conduit_mr* rdma_mr;  /* server: READ into, WRITE from; client: the sink */
  struct conduit_mr* start_mr; /* client: the source the server READs */
  unsigned size;
  bool verbose, validate;
};

/* A connection's peer as text: dotted quad, or IPv6. */
static const char* peer_text(uint32_t ipv4, const uint8_t gid[16], char* buf, size_t len) {
  if (ipv4 != 0) {
    struct in_addr a = {htonl(ipv4)};
    return inet_ntop(AF_INET, &a, buf, (socklen_t)len);
  }
  return inet_ntop(AF_INET6, gid, buf, (socklen_t)len);
}

static int fail(const char* what, int rc) {
  fprintf(stderr, "conduit-rping: %s: %s\n", what, conduit_strerror(rc));
  return 1;
}

/* Waits for the next completion of `opcode`. -ENOTCONN when the peer
 * disconnected first (nothing pending is lost: what it sent was reaped, and
 * conduitd puts what completed before the disconnect on the CQ before it
 * reports the disconnect, so the CQ is polled once more after seeing it). */
static int wait_for(struct rping* r, uint32_t opcode, struct conduit_wc* out) {
  const time_t end = time(NULL) + kWaitS;
  bool disconnected = false;
  for (;;) {
    struct conduit_wc wc;
    int n = conduit_poll_cq(r->cq, 1, &wc);
    if (n < 0) return n;
    if (n == 0 && disconnected) return -ENOTCONN;
    if (n == 1) {
      if (wc.status != CONDUIT_WC_SUCCESS) {
        fprintf(stderr, "conduit-rping: completion failed: %s\n", conduit_wc_status_str(wc.status));
        return -EIO;
      }
      if (wc.opcode != opcode) {
        fprintf(stderr, "conduit-rping: completion %u while waiting for %u\n", wc.opcode, opcode);
        return -EPROTO;
      }
      *out = wc;
      return 0;
    }
    if (conduit_wait_disconnect(r->qp, 0) == 0) {
      disconnected = true;
      continue;
    }
    if (time(NULL) >= end) return -ETIMEDOUT;
    if ((n = conduit_wait_cq(r->cq, 20)) < 0) return n;
  }
}

static int post_recv(struct rping* r) {
  struct conduit_sge sge = {(uint64_t)(uintptr_t)r->recv_mr->addr, kInfoBytes, r->recv_mr->lkey};
  struct conduit_recv_wr wr = {1, NULL, &sge, 1};
  struct conduit_recv_wr* bad;
  return conduit_post_recv(r->qp, &wr, &bad);
}

/* Posts one signaled WR over `len` bytes of `mr` and waits for its completion. */
static int run_wr(struct rping* r, uint32_t opcode, struct conduit_mr* mr, uint32_t len,
                  uint64_t remote_addr, uint32_t rkey) {
  struct conduit_sge sge = {(uint64_t)(uintptr_t)mr->addr, len, mr->lkey};
  struct conduit_send_wr wr;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = opcode;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = opcode;
  wr.send_flags = CONDUIT_SEND_SIGNALED;
  wr.remote_addr = remote_addr;
  wr.rkey = rkey;
  struct conduit_send_wr* bad;
  int rc = conduit_post_send(r->qp, &wr, &bad);
  if (rc < 0) return rc;
  struct conduit_wc wc;
  const uint32_t done = opcode == CONDUIT_WR_SEND        ? CONDUIT_WC_SEND
                        : opcode == CONDUIT_WR_RDMA_READ ? CONDUIT_WC_RDMA_READ
                                                         : CONDUIT_WC_RDMA_WRITE;
  return wait_for(r, done, &wc);
}

/* SENDs rping's buffer advertisement: mr's address as the peer sees it, its rkey, -S. */
static int advertise(struct rping* r, struct conduit_mr* mr) {
  uint8_t* p = r->send_mr->addr;
  const uint64_t addr = htobe64(mr->iova);
  const uint32_t rkey = htobe32(mr->rkey), size = htobe32(r->size);
  memcpy(p, &addr, 8);
  memcpy(p + 8, &rkey, 4);
  memcpy(p + 12, &size, 4);
  return run_wr(r, CONDUIT_WR_SEND, r->send_mr, kInfoBytes, 0, 0);
}

static int receive_info(struct rping* r, uint64_t* addr, uint32_t* rkey, uint32_t* len) {
  struct conduit_wc wc;
  int rc = wait_for(r, CONDUIT_WC_RECV, &wc);
  if (rc < 0) return rc;
  if (wc.byte_len != kInfoBytes) {
    fprintf(stderr, "conduit-rping: received bogus data, size %u\n", wc.byte_len);
    return -EPROTO;
  }
  const uint8_t* p = r->recv_mr->addr;
  uint64_t a;
  uint32_t k, l;
  memcpy(&a, p, 8);
  memcpy(&k, p + 8, 4);
  memcpy(&l, p + 12, 4);
  *addr = be64toh(a);
  *rkey = be32toh(k);
  *len = be32toh(l);
  return post_recv(r); /* before the go-ahead: the peer answers it at once */
}

static int serve(struct rping* r) {
  unsigned pings = 0;
  for (;;) {
    uint64_t addr;
    uint32_t rkey, len;
    int rc = receive_info(r, &addr, &rkey, &len);
    if (rc == -ENOTCONN) break; /* the client is done */
    if (rc < 0) return fail("waiting for the source advertisement", rc);
    if (len == 0 || len > r->size) {
      fprintf(stderr, "conduit-rping: the client's buffer is %u bytes, ours %u\n", len, r->size);
      return 1;
    }
    if ((rc = run_wr(r, CONDUIT_WR_RDMA_READ, r->rdma_mr, len, addr, rkey)) < 0) {
      return fail("RDMA READ", rc);
    }
    char* data = r->rdma_mr->addr;
    data[r->size - 1] = 0;
    if (r->verbose) printf("server ping data: %s\n", data);
    memset(r->send_mr->addr, 0, kInfoBytes);
    if ((rc = run_wr(r, CONDUIT_WR_SEND, r->send_mr, kInfoBytes, 0, 0)) < 0) {
      return fail("go-ahead", rc);
    }
    if ((rc = receive_info(r, &addr, &rkey, &len)) < 0) {
      return fail("waiting for the sink advertisement", rc);
    }
    const uint32_t n = (uint32_t)strlen(data) + 1;
    if (n > len) {
      fprintf(stderr, "conduit-rping: the client's sink holds %u bytes, the data %u\n", len, n);
      return 1;
    }
    if ((rc = run_wr(r, CONDUIT_WR_RDMA_WRITE, r->rdma_mr, n, addr, rkey)) < 0) {
      return fail("RDMA WRITE", rc);
    }
    if ((rc = run_wr(r, CONDUIT_WR_SEND, r->send_mr, kInfoBytes, 0, 0)) < 0) {
      return fail("go-ahead", rc);
    }
    ++pings;
  }
  printf("conduit-rping: served %u pings of %u bytes\n", pings, r->size);
  return 0;
}

static int ping(struct rping* r, unsigned count) {
  unsigned char start = 65;
  for (unsigned i = 0; i < count; ++i) {
    char* src = r->start_mr->addr;
    int cc = snprintf(src, r->size, "rdma-ping-%u: ", i);
    unsigned char c = start;
    for (unsigned k = (unsigned)cc; k < r->size; ++k) {
      src[k] = (char)c;
      if (++c > 122) c = 65;
    }
    if (++start > 122) start = 65;
    src[r->size - 1] = 0;
    memset(r->rdma_mr->addr, 0, r->size);
    struct conduit_wc wc;
    int rc = advertise(r, r->start_mr);
    if (rc < 0) return fail("source advertisement", rc);
    if ((rc = wait_for(r, CONDUIT_WC_RECV, &wc)) < 0 || (rc = post_recv(r)) < 0) {
      return fail("waiting for the go-ahead", rc);
    }
    if ((rc = advertise(r, r->rdma_mr)) < 0) return fail("sink advertisement", rc);
    if ((rc = wait_for(r, CONDUIT_WC_RECV, &wc)) < 0 || (rc = post_recv(r)) < 0) {
      return fail("waiting for the write's go-ahead", rc);
    }
    if (r->validate && memcmp(src, r->rdma_mr->addr, r->size) != 0) {
      fprintf(stderr, "data mismatch!\n");
      return 1;
    }
    if (r->verbose) printf("ping data: %s\n", (char*)r->rdma_mr->addr);
  }
  printf("conduit-rping: %u pings of %u bytes%s\n", count, r->size,
         r->validate ? ", every one validated" : "");
  return 0;
}

static void usage(void) {
  printf(
      "usage: conduit-rping -s [-vV] [-S size] [-C count] [-p port]\n"
      "       conduit-rping -c [-vV] [-S size] [-C count] -a addr [-p port]\n"
      "  rping's peer (rdmacm-utils), through conduitd; connects with the IB CM\n"
      "  -s / -c      server / client\n"
      "  -a addr      the server's address (client)\n"
      "  -p port      rdma_cm port (default 7174, as rping)\n"
      "  -S size      ping data size, %d..%d (default 64)\n"
      "  -C count     pings (client; default 1)\n"
      "  -v / -V      print / validate the ping data\n"
      "  --socket P   conduitd's control socket (default $CONDUIT_SOCKET or %s)\n",
      30, kMaxSize, CONDUIT_DEFAULT_SOCKET);
}

int main(int argc, char** argv) {
  int role = -1;
  const char* addr = NULL;
  const char* socket_path = NULL;
  unsigned port = 7174, count = 1;
  struct rping r;
  memset(&r, 0, sizeof r);
  r.size = 64;
  static const struct option longopts[] = {{"socket", required_argument, NULL, 'X'},
                                           {"help", no_argument, NULL, 'h'},
                                           {NULL, 0, NULL, 0}};
  for (int c; (c = getopt_long(argc, argv, "a:p:C:S:scvVh", longopts, NULL)) != -1;) {
    switch (c) {
      case 'a':
        addr = optarg;
        break;
      case 'p':
        port = (unsigned)strtoul(optarg, NULL, 0);
        break;
      case 'C':
        count = (unsigned)strtoul(optarg, NULL, 0);
        break;
      case 'S':
        r.size = (unsigned)strtoul(optarg, NULL, 0);
        break;
      case 's':
        role = 1;
        break;
      case 'c':
        role = 0;
        break;
      case 'v':
        r.verbose = true;
        break;
      case 'V':
        r.validate = true;
        break;
      case 'X':
        socket_path = optarg;
        break;
      case 'h':
        usage();
        return 0;
      default:
        usage();
        return 2;
    }
  }
  if (role < 0 || (role == 0 && addr == NULL) || r.size < 30 || r.size > kMaxSize ||
      port > 0xFFFF || count == 0) {
    usage();
    return 2;
  }
  struct conduit_context_attr ca = {socket_path, 0, "conduit-rping"};
  int rc = conduit_open(&ca, &r.ctx);
  if (rc < 0) return fail("conduit_open", rc);
  const uint32_t remote =
      CONDUIT_ACCESS_LOCAL_WRITE | CONDUIT_ACCESS_REMOTE_READ | CONDUIT_ACCESS_REMOTE_WRITE;
  if ((rc = conduit_alloc_mr(r.ctx, kInfoBytes, CONDUIT_ACCESS_LOCAL_WRITE, &r.recv_mr)) < 0 ||
      (rc = conduit_alloc_mr(r.ctx, kInfoBytes, 0, &r.send_mr)) < 0 ||
      (rc = conduit_alloc_mr(r.ctx, r.size, remote, &r.rdma_mr)) < 0 ||
      (role == 0 && (rc = conduit_alloc_mr(r.ctx, r.size, remote, &r.start_mr)) < 0)) {
    return fail("conduit_alloc_mr", rc);
  }
  if ((rc = conduit_create_cq(r.ctx, 32, &r.cq)) < 0) return fail("conduit_create_cq", rc);
  struct conduit_qp_init_attr qa = {r.cq, r.cq, 16, 2, NULL};
  if ((rc = conduit_create_qp(r.ctx, &qa, &r.qp)) < 0) return fail("conduit_create_qp", rc);
  if ((rc = post_recv(&r)) < 0) return fail("conduit_post_recv", rc);
  struct conduit_cm_param cp = {remote, 0, CONDUIT_CM_RDMA_CM, NULL, 0};
  struct conduit_cm_conn conn;
  if (role == 1) {
    if ((rc = conduit_listen(r.ctx, port)) < 0) return fail("conduit_listen", rc);
    printf("conduit-rping: listening on port %u\n", port);
    fflush(stdout);
    struct conduit_cm_request req;
    if ((rc = conduit_get_request(r.ctx, kWaitS * 1000, &req)) < 0) {
      return fail("conduit_get_request", rc);
    }
    if ((rc = conduit_accept(r.qp, &req, &cp, kWaitS * 1000, &conn)) < 0) {
      return fail("conduit_accept", rc);
    }
  } else if ((rc = conduit_connect_service(r.qp, addr, port, &cp, kWaitS * 1000, &conn)) < 0) {
    return fail("conduit_connect_service", rc);
  }
  char peer[INET6_ADDRSTRLEN];
  printf("conduit-rping: connected to %s qpn %u, MTU %u%s\n",
         peer_text(conn.peer_ipv4, conn.peer_gid, peer, sizeof peer), conn.remote_qpn,
         conn.mtu_bytes, (conn.flags & CONDUIT_CM_RDMA_CM) ? " (IB CM)" : "");
  fflush(stdout);
  if (role == 1) {
    rc = serve(&r);
  } else {
    rc = ping(&r, count);
    int d = conduit_disconnect(r.qp);
    if (rc == 0 && d < 0) rc = fail("conduit_disconnect", d);
  }
  conduit_close(r.ctx);
  return rc;
}
