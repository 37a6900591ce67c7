/* Helper for the hang-up test: attaches, creates resources, says "ready" on
 * stdout, then waits to be killed. Written against the public C API only. */
#include <conduit/conduit.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  struct conduit_context_attr attr = {.socket_path = argv[1], .client_name = "hangup-client"};
  struct conduit_context* ctx;
  struct conduit_mr* mr;
  struct conduit_cq* cq;
  struct conduit_qp *a, *b;
  if (conduit_open(&attr, &ctx) < 0 || conduit_alloc_mr(ctx, 1 << 16, 0, &mr) < 0 ||
      conduit_create_cq(ctx, 8, &cq) < 0) {
    return 1;
  }
  struct conduit_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq};
  if (conduit_create_qp(ctx, &qa, &a) < 0 || conduit_create_qp(ctx, &qa, &b) < 0) return 1;
  printf("ready %u %u\n", conduit_qp_num(a), conduit_qp_num(b));
  fflush(stdout);
  for (;;) pause();
}
