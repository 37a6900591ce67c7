/* conduit-rc-pingpong: ibv_rc_pingpong's peer on top of libconduit.
 *
 *   conduit-rc-pingpong -x 198.18.200.1 [OPTIONS]            server: waits on TCP 18515
 *   conduit-rc-pingpong -x 198.18.200.1 [OPTIONS] SERVER     client
 *
 * It talks to rdma-core's ibv_rc_pingpong (or to itself) in both roles:
 *
 *  - Out of band, over TCP (port 18515 unless -p): the client connects and
 *    writes its 52-byte record "LLLL:QQQQQQ:PPPPPP:GGGG...GGGG\0" (LID, QPN,
 *    PSN in hex, the GID as 32 hex digits of its 16 bytes in wire order); the
 *    server moves its QP to RTR/RTS towards it, answers with its own record,
 *    and the client closes the exchange with "done\0".
 *  - In band: RC SEND/RECV ping-pong. The client sends first; each side sends
 *    its next message once its previous send and the peer's message have both
 *    completed, until -n messages went each way. Messages are -s bytes of
 *    0x7b, as ibv_rc_pingpong sends them; every receive is checked for its
 *    length and (with -c) its bytes.
 *
 * Our GID is the IPv4-mapped address of conduitd's port (-x), or its IPv6
 * address (port.address6) when -x is one: RoCEv2 over IPv6. The peer's LID
 * is ignored (RoCE has none); -g is accepted for command-line compatibility
 * and ignored: conduitd has one address. The output has ibv_rc_pingpong's
 * lines, so scripts that read its results read ours.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getopt_long, lrand48 */
#endif
#include <arpa/inet.h>
#include <conduit/conduit.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum { kRecvWrid = 1, kSendWrid = 2 };

/* "0000:000000:000000:" + 32 hex digits + NUL, as ibv_rc_pingpong sizes it. */
#define PP_MSG_BYTES 52
#define PP_DONE_BYTES 5 /* "done" and its NUL */

struct pp_dest {
  unsigned lid;
  unsigned qpn;
  unsigned psn;
  uint8_t gid[16];
};

struct pp_options {
  unsigned port;
  unsigned size_bytes;
  unsigned mtu; /* enum conduit_mtu */
  unsigned rx_depth;
  unsigned iters;
  bool check;
  int connect_wait_s; /* client: retry the TCP connect this long */
  int stall_s;        /* fail when no completion arrives for this long */
  const char* socket_path;
  const char* local_addr;
  const char* server;
};

static int mtu_enum(long bytes) {
  switch (bytes) {
    case 256:
      return CONDUIT_MTU_256;
    case 512:
      return CONDUIT_MTU_512;
    case 1024:
      return CONDUIT_MTU_1024;
    case 2048:
      return CONDUIT_MTU_2048;
    case 4096:
      return CONDUIT_MTU_4096;
    default:
      return 0;
  }
}

static bool parse_uint(const char* s, unsigned long max, unsigned* out) {
  char* end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 0);
  if (errno || end == s || *end || v > max || s[0] == '-') return false;
  *out = (unsigned)v;
  return true;
}

static void usage(const char* argv0) {
  printf(
      "Usage:\n"
      "  %s -x ADDR [options]          start a server and wait for connection\n"
      "  %s -x ADDR [options] <host>   connect to server at <host>\n"
      "\n"
      "Options:\n"
      "  -x, --local-addr=<ip>  conduitd's port address, IPv4 or IPv6 (port.address6): our GID\n"
      "                         (required)\n"
      "  -S, --socket=<path>    conduitd's control socket (default $CONDUIT_SOCKET or %s)\n"
      "  -p, --port=<port>      listen on/connect to port <port> (default 18515)\n"
      "  -s, --size=<size>      size of message to exchange (default 4096)\n"
      "  -m, --mtu=<size>       path MTU (default 1024)\n"
      "  -r, --rx-depth=<dep>   number of receives to post at a time (default 128)\n"
      "  -n, --iters=<iters>    number of exchanges (default 1000)\n"
      "  -c, --chk              validate the received bytes (0x7b each)\n"
      "  -w, --wait=<secs>      client: retry the TCP connect for this long (default 0)\n"
      "  -W, --stall=<secs>     fail when no completion arrives for this long (default 30)\n"
      "  -d, -i, -l, -g, -e     accepted for ibv_rc_pingpong compatibility, ignored\n",
      argv0, argv0, CONDUIT_DEFAULT_SOCKET);
}

static int parse_options(int argc, char** argv, struct pp_options* o) {
  static const struct option long_options[] = {{"port", required_argument, NULL, 'p'},
                                               {"ib-dev", required_argument, NULL, 'd'},
                                               {"ib-port", required_argument, NULL, 'i'},
                                               {"size", required_argument, NULL, 's'},
                                               {"mtu", required_argument, NULL, 'm'},
                                               {"rx-depth", required_argument, NULL, 'r'},
                                               {"iters", required_argument, NULL, 'n'},
                                               {"sl", required_argument, NULL, 'l'},
                                               {"events", no_argument, NULL, 'e'},
                                               {"gid-idx", required_argument, NULL, 'g'},
                                               {"chk", no_argument, NULL, 'c'},
                                               {"local-addr", required_argument, NULL, 'x'},
                                               {"socket", required_argument, NULL, 'S'},
                                               {"wait", required_argument, NULL, 'w'},
                                               {"stall", required_argument, NULL, 'W'},
                                               {"help", no_argument, NULL, 'h'},
                                               {NULL, 0, NULL, 0}};
  *o = (struct pp_options){.port = 18515,
                           .size_bytes = 4096,
                           .mtu = CONDUIT_MTU_1024,
                           /* ibv_rc_pingpong's 500 is deeper than conduitd's default
                              rings (256); one outstanding message needs only a few. */
                           .rx_depth = 128,
                           .iters = 1000,
                           .stall_s = 30};
  unsigned v;
  for (;;) {
    int c = getopt_long(argc, argv, "p:d:i:s:m:r:n:l:eg:cx:S:w:W:h", long_options, NULL);
    if (c == -1) break;
    switch (c) {
      case 'p':
        if (!parse_uint(optarg, 65535, &o->port)) goto bad;
        break;
      case 's':
        if (!parse_uint(optarg, 1u << 30, &o->size_bytes) || o->size_bytes == 0) goto bad;
        break;
      case 'm':
        if (!parse_uint(optarg, 4096, &v) || !(o->mtu = (unsigned)mtu_enum((long)v))) goto bad;
        break;
      case 'r':
        if (!parse_uint(optarg, 1u << 16, &o->rx_depth) || o->rx_depth < 2) goto bad;
        break;
      case 'n':
        if (!parse_uint(optarg, 1u << 30, &o->iters) || o->iters == 0) goto bad;
        break;
      case 'c':
        o->check = true;
        break;
      case 'x':
        o->local_addr = optarg;
        break;
      case 'S':
        o->socket_path = optarg;
        break;
      case 'w':
        if (!parse_uint(optarg, 3600, &v)) goto bad;
        o->connect_wait_s = (int)v;
        break;
      case 'W':
        if (!parse_uint(optarg, 3600, &v) || v == 0) goto bad;
        o->stall_s = (int)v;
        break;
      case 'd':
      case 'i':
      case 'l':
      case 'g':
      case 'e':
        break;
      case 'h':
        usage(argv[0]);
        exit(0);
      default:
        goto bad;
    }
  }
  if (optind == argc - 1) {
    o->server = argv[optind];
  } else if (optind < argc) {
    goto bad;
  }
  if (!o->local_addr) {
    fprintf(stderr, "%s: -x ADDR (the address of conduitd's port) is required\n", argv[0]);
    return -1;
  }
  return 0;
bad:
  usage(argv[0]);
  return -1;
}

/* ---- the 52-byte record ---------------------------------------------------- */

static void format_dest(const struct pp_dest* d, char msg[PP_MSG_BYTES]) {
  int n = snprintf(msg, PP_MSG_BYTES, "%04x:%06x:%06x:", d->lid & 0xffff, d->qpn & 0xffffff,
                   d->psn & 0xffffff);
  for (int i = 0; i < 16; ++i)
    n += snprintf(msg + n, (size_t)(PP_MSG_BYTES - n), "%02x", d->gid[i]);
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Parses `digits` hex digits at s; false on anything else. */
static bool parse_hex_field(const char* s, int digits, unsigned* out) {
  unsigned v = 0;
  for (int i = 0; i < digits; ++i) {
    int h = hex_value(s[i]);
    if (h < 0) return false;
    v = v << 4 | (unsigned)h;
  }
  *out = v;
  return true;
}

/* The peer's record, validated field by field: fixed widths, ':' separators, NUL at the end. */
static bool parse_dest(const char msg[PP_MSG_BYTES], struct pp_dest* d) {
  if (msg[4] != ':' || msg[11] != ':' || msg[18] != ':' || msg[PP_MSG_BYTES - 1] != '\0')
    return false;
  if (!parse_hex_field(msg, 4, &d->lid) || !parse_hex_field(msg + 5, 6, &d->qpn) ||
      !parse_hex_field(msg + 12, 6, &d->psn))
    return false;
  for (int i = 0; i < 16; ++i) {
    unsigned b;
    if (!parse_hex_field(msg + 19 + 2 * i, 2, &b)) return false;
    d->gid[i] = (uint8_t)b;
  }
  return true;
}

static void print_dest(const char* what, const struct pp_dest* d) {
  char text[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, d->gid, text, sizeof text);
  printf("  %s LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", what, d->lid, d->qpn, d->psn, text);
}

/* ---- TCP ------------------------------------------------------------------ */

static bool read_full(int fd, void* buf, size_t len) {
  for (size_t got = 0; got < len;) {
    ssize_t n = read(fd, (char*)buf + got, len - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += (size_t)n;
  }
  return true;
}

static bool write_full(int fd, const void* buf, size_t len) {
  for (size_t put = 0; put < len;) {
    ssize_t n = write(fd, (const char*)buf + put, len - put);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    put += (size_t)n;
  }
  return true;
}

static int tcp_connect(const char* host, unsigned port, int wait_s) {
  char service[8];
  snprintf(service, sizeof service, "%u", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo* res;
  int rc = getaddrinfo(host, service, &hints, &res);
  if (rc != 0) {
    fprintf(stderr, "%s for %s:%u\n", gai_strerror(rc), host, port);
    return -1;
  }
  time_t deadline = time(NULL) + wait_s;
  int fd = -1;
  for (;;) {
    for (struct addrinfo* t = res; t && fd < 0; t = t->ai_next) {
      fd = socket(t->ai_family, t->ai_socktype, t->ai_protocol);
      if (fd >= 0 && connect(fd, t->ai_addr, t->ai_addrlen) != 0) {
        close(fd);
        fd = -1;
      }
    }
    if (fd >= 0 || time(NULL) >= deadline) break;
    usleep(200 * 1000);
  }
  freeaddrinfo(res);
  if (fd < 0) fprintf(stderr, "Couldn't connect to %s:%u\n", host, port);
  return fd;
}

static int tcp_accept_one(unsigned port) {
  int lfd = socket(AF_INET6, SOCK_STREAM, 0);
  bool v6 = lfd >= 0;
  if (!v6) lfd = socket(AF_INET, SOCK_STREAM, 0);
  if (lfd < 0) {
    perror("socket");
    return -1;
  }
  int one = 1, zero = 0;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc;
  if (v6) {
    setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero); /* IPv4 clients too */
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
    rc = bind(lfd, (struct sockaddr*)&a, sizeof a);
  } else {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    rc = bind(lfd, (struct sockaddr*)&a, sizeof a);
  }
  if (rc != 0 || listen(lfd, 1) != 0) {
    fprintf(stderr, "Couldn't listen to port %u: %s\n", port, strerror(errno));
    close(lfd);
    return -1;
  }
  int fd = accept(lfd, NULL, NULL);
  close(lfd);
  if (fd < 0) perror("accept");
  return fd;
}

/* ---- the ping-pong -------------------------------------------------------- */

struct pp_context {
  struct conduit_context* ctx;
  struct conduit_mr* mr; /* [0, size): what we send; [size, 2 size): where receives land */
  struct conduit_cq* cq;
  struct conduit_qp* qp;
  unsigned size_bytes;
  unsigned rx_depth;
};

static int post_recvs(struct pp_context* pp, unsigned n) {
  char* buf = pp->mr->addr;
  struct conduit_sge sge = {(uint64_t)(uintptr_t)(buf + pp->size_bytes), pp->size_bytes,
                            pp->mr->lkey};
  struct conduit_recv_wr wr = {.wr_id = kRecvWrid, .sg_list = &sge, .num_sge = 1};
  unsigned i = 0;
  for (; i < n; ++i)
    if (conduit_post_recv(pp->qp, &wr, NULL) < 0) break;
  return (int)i;
}

static int post_send(struct pp_context* pp) {
  struct conduit_sge sge = {(uint64_t)(uintptr_t)pp->mr->addr, pp->size_bytes, pp->mr->lkey};
  struct conduit_send_wr wr = {.wr_id = kSendWrid,
                               .sg_list = &sge,
                               .num_sge = 1,
                               .opcode = CONDUIT_WR_SEND,
                               .send_flags = CONDUIT_SEND_SIGNALED};
  return conduit_post_send(pp->qp, &wr, NULL);
}

static int connect_qp(struct pp_context* pp, const struct pp_options* o, unsigned my_psn,
                      const struct pp_dest* rem) {
  struct conduit_qp_connect_attr ca = {.remote_qpn = rem->qpn,
                                       .remote_psn = rem->psn,
                                       .local_psn = my_psn,
                                       .mtu = o->mtu,
                                       .timeout = 14,
                                       .retry_cnt = 7,
                                       .rnr_retry = 7,
                                       .min_rnr_timer = 12};
  memcpy(ca.remote_gid, rem->gid, 16);
  int rc = conduit_connect_qp(pp->qp, &ca);
  if (rc < 0) fprintf(stderr, "Couldn't connect to remote QP: %s\n", conduit_strerror(rc));
  return rc;
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* ibv_rc_pingpong's loop: the next send goes out when both the previous send and a receive
 * completed. Returns 0 when -n sends and -n receives completed. */
static int run_pingpong(struct pp_context* pp, const struct pp_options* o, int routs) {
  unsigned scnt = 0, rcnt = 0;
  int pending = kRecvWrid;
  if (o->server == NULL) {
    /* server: waits for the client's first message */
  } else {
    if (post_send(pp) < 0) {
      fprintf(stderr, "Couldn't post send\n");
      return 1;
    }
    pending |= kSendWrid;
  }
  const uint8_t* rbuf = (const uint8_t*)pp->mr->addr + pp->size_bytes;
  while (rcnt < o->iters || scnt < o->iters) {
    int ready = conduit_wait_cq(pp->cq, o->stall_s * 1000);
    if (ready < 0) {
      fprintf(stderr, "wait CQ failed: %s\n", conduit_strerror(ready));
      return 1;
    }
    struct conduit_wc wc[2];
    int ne = conduit_poll_cq(pp->cq, 2, wc);
    if (ne < 0) {
      fprintf(stderr, "poll CQ failed %d\n", ne);
      return 1;
    }
    if (ne == 0) {
      fprintf(stderr, "no completion for %d s (sent %u, received %u of %u)\n", o->stall_s, scnt,
              rcnt, o->iters);
      return 1;
    }
    for (int i = 0; i < ne; ++i) {
      if (wc[i].status != CONDUIT_WC_SUCCESS) {
        fprintf(stderr, "Failed status %s (%u) for wr_id %d (vendor_err %u)\n",
                conduit_wc_status_str(wc[i].status), wc[i].status, (int)wc[i].wr_id,
                wc[i].vendor_err);
        return 1;
      }
      if (wc[i].wr_id == kSendWrid) {
        ++scnt;
      } else if (wc[i].wr_id == kRecvWrid) {
        if (wc[i].byte_len != pp->size_bytes) {
          fprintf(stderr, "message %u: %u bytes, expected %u\n", rcnt, wc[i].byte_len,
                  pp->size_bytes);
          return 1;
        }
        if (o->check) {
          for (unsigned b = 0; b < pp->size_bytes; ++b) {
            if (rbuf[b] != 0x7b) {
              fprintf(stderr, "message %u: byte %u is 0x%02x, expected 0x7b\n", rcnt, b, rbuf[b]);
              return 1;
            }
          }
        }
        if (--routs <= 1) {
          routs += post_recvs(pp, pp->rx_depth - (unsigned)routs);
          if (routs < (int)pp->rx_depth) {
            fprintf(stderr, "Couldn't post receive (%d)\n", routs);
            return 1;
          }
        }
        ++rcnt;
      } else {
        fprintf(stderr, "Completion for unknown wr_id %d\n", (int)wc[i].wr_id);
        return 1;
      }
      pending &= ~(int)wc[i].wr_id;
      if (scnt < o->iters && !pending) {
        if (post_send(pp) < 0) {
          fprintf(stderr, "Couldn't post send\n");
          return 1;
        }
        pending = kRecvWrid | kSendWrid;
      }
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  struct pp_options o;
  if (parse_options(argc, argv, &o) != 0) return 1;

  struct pp_dest me = {.lid = 0};
  struct in_addr v4;
  if (inet_pton(AF_INET, o.local_addr, &v4) == 1) {
    me.gid[10] = me.gid[11] = 0xff;
    memcpy(&me.gid[12], &v4, 4);
  } else if (inet_pton(AF_INET6, o.local_addr, me.gid) != 1) {
    fprintf(stderr, "-x %s: neither an IPv4 nor an IPv6 address\n", o.local_addr);
    return 1;
  }

  struct pp_context pp = {.size_bytes = o.size_bytes, .rx_depth = o.rx_depth};
  struct conduit_context_attr attr = {.socket_path = o.socket_path,
                                      .client_name = "conduit-rc-pingpong"};
  int rc = conduit_open(&attr, &pp.ctx);
  if (rc < 0) {
    fprintf(stderr, "conduit_open: %s\n", conduit_strerror(rc));
    return 1;
  }
  int status = 1;
  if ((rc = conduit_alloc_mr(pp.ctx, 2 * (size_t)o.size_bytes, CONDUIT_ACCESS_LOCAL_WRITE,
                             &pp.mr)) < 0 ||
      (rc = conduit_create_cq(pp.ctx, o.rx_depth + 1, &pp.cq)) < 0) {
    fprintf(stderr, "Couldn't set up memory and CQ: %s\n", conduit_strerror(rc));
    goto out;
  }
  struct conduit_qp_init_attr qa = {
      .send_cq = pp.cq, .recv_cq = pp.cq, .max_send_wr = 1, .max_recv_wr = o.rx_depth};
  if ((rc = conduit_create_qp(pp.ctx, &qa, &pp.qp)) < 0) {
    fprintf(stderr, "Couldn't create QP: %s\n", conduit_strerror(rc));
    goto out;
  }
  memset(pp.mr->addr, 0x7b, o.size_bytes);

  int routs = post_recvs(&pp, o.rx_depth);
  if (routs < (int)o.rx_depth) {
    fprintf(stderr, "Couldn't post receive (%d)\n", routs);
    goto out;
  }
  me.qpn = conduit_qp_num(pp.qp);
  srand48((long)getpid() * (long)time(NULL));
  me.psn = (unsigned)lrand48() & 0xffffff;
  print_dest("local address: ", &me);

  char msg[PP_MSG_BYTES];
  struct pp_dest rem;
  if (o.server) {
    int fd = tcp_connect(o.server, o.port, o.connect_wait_s);
    if (fd < 0) goto out;
    format_dest(&me, msg);
    bool ok = write_full(fd, msg, sizeof msg);
    if (!ok) fprintf(stderr, "Couldn't send local address\n");
    ok = ok && read_full(fd, msg, sizeof msg) && write_full(fd, "done", PP_DONE_BYTES);
    close(fd);
    if (!ok) {
      fprintf(stderr, "Couldn't read/write remote address\n");
      goto out;
    }
    if (!parse_dest(msg, &rem)) {
      fprintf(stderr, "The server's address record is malformed\n");
      goto out;
    }
    print_dest("remote address:", &rem);
    if (connect_qp(&pp, &o, me.psn, &rem) < 0) goto out;
  } else {
    int fd = tcp_accept_one(o.port);
    if (fd < 0) goto out;
    bool ok = read_full(fd, msg, sizeof msg);
    if (!ok) {
      fprintf(stderr, "Couldn't read remote address\n");
    } else if (!(ok = parse_dest(msg, &rem))) {
      fprintf(stderr, "The client's address record is malformed\n");
    } else if (connect_qp(&pp, &o, me.psn, &rem) < 0) {
      ok = false;
    } else {
      format_dest(&me, msg);
      char done[PP_DONE_BYTES];
      ok = write_full(fd, msg, sizeof msg) && read_full(fd, done, sizeof done) &&
           memcmp(done, "done", PP_DONE_BYTES) == 0;
      if (!ok) fprintf(stderr, "Couldn't send/recv local address\n");
    }
    close(fd);
    if (!ok) goto out;
    print_dest("remote address:", &rem);
  }

  double start = now_us();
  if (run_pingpong(&pp, &o, routs) != 0) goto out;
  double usec = now_us() - start;
  long long bytes = (long long)o.size_bytes * o.iters * 2;
  printf("%lld bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, usec / 1e6,
         (double)bytes * 8. / usec);
  printf("%u iters in %.2f seconds = %.2f usec/iter\n", o.iters, usec / 1e6, usec / o.iters);
  status = 0;
  /* Keep the QP a moment before destroying it: if our ACK of the peer's last message was lost,
   * the peer resends that message, and only a live QP can answer it (the daemon's responder
   * re-ACKs the duplicate). Without this, a peer such as ibv_rc_pingpong waits for a send
   * completion that never comes (the classic end-of-run race of rc_pingpong under loss). */
  fflush(stdout);
  const struct timespec linger = {1, 0};
  nanosleep(&linger, NULL);

out:
  if (pp.qp) conduit_destroy_qp(pp.qp);
  if (pp.cq) conduit_destroy_cq(pp.cq);
  if (pp.mr) conduit_free_mr(pp.mr);
  conduit_close(pp.ctx);
  return status;
}
