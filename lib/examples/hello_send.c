/* hello_send: one SEND between two queue pairs of this process, through conduitd.
 *
 *   cc hello_send.c $(pkg-config --cflags --libs conduit) -o hello_send
 *   ./hello_send            # uses $CONDUIT_SOCKET or /run/conduit/conduitd.sock
 *
 * The steps are those of any verbs program: open, register memory, create CQs
 * and QPs, connect each QP to its peer (here: the other QP; across hosts, the
 * QPN/PSN/GID come from your own out-of-band exchange), post, wait, poll.
 */
#include <conduit/conduit.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                     \
  do {                                                                  \
    int rc_ = (call);                                                   \
    if (rc_ < 0) {                                                      \
      fprintf(stderr, "%s failed: %s\n", #call, conduit_strerror(rc_)); \
      return 1;                                                         \
    }                                                                   \
  } while (0)

int main(void) {
  struct conduit_context* ctx;
  CHECK(conduit_open(NULL, &ctx)); /* says which socket if conduitd is not running */

  struct conduit_mr* mr; /* 4 KiB: bytes 0..63 to send from, 64..127 to receive into */
  CHECK(conduit_alloc_mr(ctx, 4096, CONDUIT_ACCESS_LOCAL_WRITE, &mr));

  struct conduit_cq* cq;
  CHECK(conduit_create_cq(ctx, 16, &cq));
  struct conduit_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq};
  struct conduit_qp *a, *b;
  CHECK(conduit_create_qp(ctx, &qa, &a));
  CHECK(conduit_create_qp(ctx, &qa, &b));

  /* ::ffff:127.0.0.1 - this host. */
  struct conduit_qp_connect_attr ca = {
      .remote_gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1},
      .mtu = CONDUIT_MTU_1024,
      .timeout = 14,
      .retry_cnt = 7,
      .rnr_retry = 7,
      .min_rnr_timer = 12};
  ca.remote_qpn = conduit_qp_num(b), ca.remote_psn = 200, ca.local_psn = 100;
  CHECK(conduit_connect_qp(a, &ca));
  ca.remote_qpn = conduit_qp_num(a), ca.remote_psn = 100, ca.local_psn = 200;
  CHECK(conduit_connect_qp(b, &ca));

  char* buf = mr->addr;
  struct conduit_sge rsge = {(uint64_t)(buf + 64), 64, mr->lkey};
  struct conduit_recv_wr rwr = {.wr_id = 2, .sg_list = &rsge, .num_sge = 1};
  CHECK(conduit_post_recv(b, &rwr, NULL));

  strcpy(buf, "hello, conduit");
  struct conduit_sge ssge = {(uint64_t)buf, (uint32_t)strlen(buf) + 1, mr->lkey};
  struct conduit_send_wr swr = {.wr_id = 1,
                                .sg_list = &ssge,
                                .num_sge = 1,
                                .opcode = CONDUIT_WR_SEND,
                                .send_flags = CONDUIT_SEND_SIGNALED};
  CHECK(conduit_post_send(a, &swr, NULL));

  for (int done = 0; done < 2;) { /* the send's and the receive's completion */
    CHECK(conduit_wait_cq(cq, 2000));
    struct conduit_wc wc[2];
    int n = conduit_poll_cq(cq, 2, wc);
    if (n == 0) {
      fprintf(stderr,
              "no completion within 2 s: is conduitd running its engine? "
              "(conduitctl status)\n");
      return 1;
    }
    for (int i = 0; i < n; ++i, ++done) {
      if (wc[i].status != CONDUIT_WC_SUCCESS) {
        fprintf(stderr, "wr %llu: %s\n", (unsigned long long)wc[i].wr_id,
                conduit_wc_status_str(wc[i].status));
        return 1;
      }
    }
  }
  printf("received: %s\n", buf + 64);

  conduit_destroy_qp(a);
  conduit_destroy_qp(b);
  conduit_destroy_cq(cq);
  conduit_free_mr(mr);
  return conduit_close(ctx);
}
