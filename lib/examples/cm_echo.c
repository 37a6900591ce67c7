/* conduit-cm-echo: the peer of librdmacm's rdma_server and rdma_client examples
 * (rdmacm-utils), connecting through the InfiniBand CM as rdma_cm does.
 *
 *   conduit-cm-echo [OPTIONS]            server: listens on port -p (7471)
 *   conduit-cm-echo [OPTIONS] SERVER     client: connects to SERVER's port -p
 *
 * The client posts a receive, connects (rdma_connect's peer: CONDUIT_CM_RDMA_CM),
 * sends -s bytes (16) and waits for the answer; the server accepts, waits for
 * the message and sends the same number of bytes back. Then the client
 * disconnects, and the server waits for that. With -n N they exchange N
 * messages each way. Every message carries the byte pattern (i + n) & 0xFF;
 * -c checks it (the rdmacm-utils examples send zeros: leave -c off for them).
 * -N uses conduit's native connection manager instead (both ends conduit).
 *
 * Exit status 0 when every message went and came back; it prints
 * "conduit-cm-echo: N messages of S bytes each way" last.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <conduit/conduit.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct options {
  const char* socket_path;
  const char* server;
  unsigned port;
  unsigned size;
  unsigned count;
  int wait_s;
  int retry_s;
  bool check;
  bool native;
};

/* A connection's peer as text: dotted quad, or IPv6. */
static const char* peer_text(uint32_t ipv4, const uint8_t gid[16], char* buf, size_t len) {
  if (ipv4 != 0) {
    struct in_addr a = {htonl(ipv4)};
    return inet_ntop(AF_INET, &a, buf, (socklen_t)len);
  }
  return inet_ntop(AF_INET6, gid, buf, (socklen_t)len);
}

static void usage(const char* argv0) {
  printf(
      "usage: %s [OPTIONS] [SERVER]\n"
      "  the peer of rdmacm-utils' rdma_server (give SERVER) and rdma_client (no SERVER)\n"
      "  -S, --socket PATH   conduitd's control socket (default $CONDUIT_SOCKET or %s)\n"
      "  -p, --port N        rdma_cm port / service number (default 7471)\n"
      "  -s, --size N        bytes per message (default 16)\n"
      "  -n, --count N       messages each way (default 1)\n"
      "  -W, --wait S        give up after S seconds without progress (default 30)\n"
      "  -w, --retry S       client: while nobody listens yet, retry for up to S seconds\n"
      "  -c, --check         check each message's bytes\n"
      "  -N, --native        conduit's native connection manager (both ends conduit)\n",
      argv0, CONDUIT_DEFAULT_SOCKET);
}

static int die(const char* what, int rc) {
  fprintf(stderr, "conduit-cm-echo: %s: %s\n", what, conduit_strerror(rc));
  return 1;
}

/* Waits for one completion of `opcode` (CONDUIT_WC_SEND or CONDUIT_WC_RECV). */
static int wait_wc(struct conduit_cq* cq, uint32_t opcode, int wait_s, struct conduit_wc* out) {
  const time_t end = time(NULL) + wait_s;
  for (;;) {
    struct conduit_wc wc;
    int n = conduit_poll_cq(cq, 1, &wc);
    if (n < 0) return n;
    if (n == 1) {
      if (wc.status != CONDUIT_WC_SUCCESS) {
        fprintf(stderr, "conduit-cm-echo: completion failed: %s\n",
                conduit_wc_status_str(wc.status));
        return -EIO;
      }
      if (wc.opcode == opcode) {
        *out = wc;
        return 0;
      }
      continue;
    }
    if (time(NULL) >= end) return -ETIMEDOUT;
    n = conduit_wait_cq(cq, 100);
    if (n < 0) return n;
  }
}

static void fill(uint8_t* p, unsigned size, unsigned n) {
  for (unsigned i = 0; i < size; ++i) p[i] = (uint8_t)(i + n);
}

int main(int argc, char** argv) {
  struct options o = {NULL, NULL, 7471, 16, 1, 30, 0, false, false};
  static const struct option longopts[] = {
      {"socket", required_argument, NULL, 'S'}, {"port", required_argument, NULL, 'p'},
      {"size", required_argument, NULL, 's'},   {"count", required_argument, NULL, 'n'},
      {"wait", required_argument, NULL, 'W'},   {"retry", required_argument, NULL, 'w'},
      {"check", no_argument, NULL, 'c'},        {"native", no_argument, NULL, 'N'},
      {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
  for (int c; (c = getopt_long(argc, argv, "S:p:s:n:W:w:cNh", longopts, NULL)) != -1;) {
    switch (c) {
      case 'S':
        o.socket_path = optarg;
        break;
      case 'p':
        o.port = (unsigned)strtoul(optarg, NULL, 0);
        break;
      case 's':
        o.size = (unsigned)strtoul(optarg, NULL, 0);
        break;
      case 'n':
        o.count = (unsigned)strtoul(optarg, NULL, 0);
        break;
      case 'W':
        o.wait_s = atoi(optarg);
        break;
      case 'w':
        o.retry_s = atoi(optarg);
        break;
      case 'c':
        o.check = true;
        break;
      case 'N':
        o.native = true;
        break;
      case 'h':
        usage(argv[0]);
        return 0;
      default:
        usage(argv[0]);
        return 2;
    }
  }
  if (optind < argc) o.server = argv[optind];
  if (o.size == 0 || o.size > (1u << 30) || o.count == 0 || o.port > 0xFFFF || o.wait_s <= 0) {
    fprintf(stderr, "conduit-cm-echo: -s must be 1..2^30, -n > 0, -p 0..65535, -W > 0\n");
    return 2;
  }

  struct conduit_context_attr ca = {o.socket_path, 0, "conduit-cm-echo"};
  struct conduit_context* ctx;
  int rc = conduit_open(&ca, &ctx);
  if (rc < 0) return die("conduit_open", rc);
  struct conduit_mr *send_mr, *recv_mr;
  struct conduit_cq* cq;
  struct conduit_qp* qp;
  if ((rc = conduit_alloc_mr(ctx, o.size, CONDUIT_ACCESS_LOCAL_WRITE, &send_mr)) < 0 ||
      (rc = conduit_alloc_mr(ctx, o.size, CONDUIT_ACCESS_LOCAL_WRITE, &recv_mr)) < 0) {
    return die("conduit_alloc_mr", rc);
  }
  if ((rc = conduit_create_cq(ctx, 16, &cq)) < 0) return die("conduit_create_cq", rc);
  struct conduit_qp_init_attr qa = {cq, cq, 4, 4, NULL};
  if ((rc = conduit_create_qp(ctx, &qa, &qp)) < 0) return die("conduit_create_qp", rc);

  struct conduit_sge rsge = {(uint64_t)(uintptr_t)recv_mr->addr, o.size, recv_mr->lkey};
  struct conduit_recv_wr rwr = {1, NULL, &rsge, 1};
  struct conduit_recv_wr* bad_rwr;
  struct conduit_sge ssge = {(uint64_t)(uintptr_t)send_mr->addr, o.size, send_mr->lkey};
  struct conduit_send_wr swr;
  memset(&swr, 0, sizeof swr);
  swr.wr_id = 2;
  swr.sg_list = &ssge;
  swr.num_sge = 1;
  swr.opcode = CONDUIT_WR_SEND;
  swr.send_flags = CONDUIT_SEND_SIGNALED;
  struct conduit_send_wr* bad_swr;
  if ((rc = conduit_post_recv(qp, &rwr, &bad_rwr)) < 0) return die("conduit_post_recv", rc);

  struct conduit_cm_param cp = {CONDUIT_ACCESS_LOCAL_WRITE, 0, o.native ? 0 : CONDUIT_CM_RDMA_CM,
                                NULL, 0};
  struct conduit_cm_conn conn;
  const bool client = o.server != NULL;
  if (client) {
    const time_t give_up = time(NULL) + o.retry_s;
    while ((rc = conduit_connect_service(qp, o.server, o.port, &cp, o.wait_s * 1000, &conn)) ==
               -ECONNREFUSED &&
           time(NULL) < give_up) {
      nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL);
    }
    if (rc < 0) return die("conduit_connect_service", rc);
  } else {
    if ((rc = conduit_listen(ctx, o.port)) < 0) return die("conduit_listen", rc);
    printf("conduit-cm-echo: listening on port %u\n", o.port);
    fflush(stdout);
    struct conduit_cm_request req;
    if ((rc = conduit_get_request(ctx, o.wait_s * 1000, &req)) < 0) {
      return die("conduit_get_request", rc);
    }
    char text[INET6_ADDRSTRLEN];
    printf("conduit-cm-echo: request from %s qpn %u%s\n",
           peer_text(req.peer_ipv4, req.peer_gid, text, sizeof text), req.peer_qpn,
           (req.peer_flags & CONDUIT_CM_RDMA_CM) ? " (rdma_cm)" : "");
    if ((rc = conduit_accept(qp, &req, &cp, o.wait_s * 1000, &conn)) < 0) {
      return die("conduit_accept", rc);
    }
  }
  char peer[INET6_ADDRSTRLEN];
  printf("conduit-cm-echo: connected to %s qpn %u, MTU %u%s\n",
         peer_text(conn.peer_ipv4, conn.peer_gid, peer, sizeof peer), conn.remote_qpn,
         conn.mtu_bytes, (conn.flags & CONDUIT_CM_RDMA_CM) ? " (IB CM)" : "");
  fflush(stdout);

  struct conduit_wc wc;
  for (unsigned n = 0; n < o.count; ++n) {
    if (client) {
      fill(send_mr->addr, o.size, n);
      if ((rc = conduit_post_send(qp, &swr, &bad_swr)) < 0) return die("conduit_post_send", rc);
      if ((rc = wait_wc(cq, CONDUIT_WC_SEND, o.wait_s, &wc)) < 0) return die("send", rc);
    }
    if ((rc = wait_wc(cq, CONDUIT_WC_RECV, o.wait_s, &wc)) < 0) return die("receive", rc);
    if (wc.byte_len != o.size) {
      fprintf(stderr, "conduit-cm-echo: message %u has %u bytes, expected %u\n", n, wc.byte_len,
              o.size);
      return 1;
    }
    if (o.check) {
      uint8_t* want = malloc(o.size);
      fill(want, o.size, n);
      const bool same = memcmp(want, recv_mr->addr, o.size) == 0;
      free(want);
      if (!same) {
        fprintf(stderr, "conduit-cm-echo: message %u has other bytes than sent\n", n);
        return 1;
      }
    }
    if (n + 1 < o.count && (rc = conduit_post_recv(qp, &rwr, &bad_rwr)) < 0) {
      return die("conduit_post_recv", rc);
    }
    if (!client) {
      memcpy(send_mr->addr, recv_mr->addr, o.size);
      if ((rc = conduit_post_send(qp, &swr, &bad_swr)) < 0) return die("conduit_post_send", rc);
      if ((rc = wait_wc(cq, CONDUIT_WC_SEND, o.wait_s, &wc)) < 0) return die("send", rc);
    }
  }
  if (client) {
    if ((rc = conduit_disconnect(qp)) < 0) return die("conduit_disconnect", rc);
  } else if ((rc = conduit_wait_disconnect(qp, o.wait_s * 1000)) < 0) {
    return die("waiting for the peer to disconnect", rc);
  }
  printf("conduit-cm-echo: %u messages of %u bytes each way\n", o.count, o.size);
  conduit_destroy_qp(qp);
  conduit_destroy_cq(cq);
  conduit_free_mr(send_mr);
  conduit_free_mr(recv_mr);
  conduit_close(ctx);
  return 0;
}
