/* A hostile libconduit client: it punches a hole into its own hugetlb-backed
 * region, takes the freed huge page for itself so the pool is empty, then
 * posts a SEND whose payload lies in the hole. Without protection, conduitd's
 * engine dies of SIGBUS when it reads the payload. Used by hugepages_test.sh.
 *
 * Exit status: 0 when conduitd disconnected this client (the expected
 * outcome), 2 when the set-up was impossible (no hugetlb region: the caller
 * skips), 1 otherwise (still attached, or an unexpected error).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <conduit/conduit.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HUGE_BYTES (2u << 20)

#define CHECK(call)                                                     \
  do {                                                                  \
    int rc_ = (call);                                                   \
    if (rc_ < 0) {                                                      \
      fprintf(stderr, "%s failed: %s\n", #call, conduit_strerror(rc_)); \
      return 1;                                                         \
    }                                                                   \
  } while (0)

/* The region as this process mapped it: the fd libconduit received, and the
 * start of its mapping (found the way any process can: /proc/self). */
static int find_region(int* fd_out, uintptr_t* base_out) {
  char path[64], target[256];
  *fd_out = -1;
  for (int fd = 3; fd < 1024; ++fd) {
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = 0;
    if (strstr(target, "memfd:conduit-client") != NULL) {
      *fd_out = fd;
      break;
    }
  }
  FILE* maps = fopen("/proc/self/maps", "r");
  if (maps == NULL) return -1;
  char line[512];
  *base_out = 0;
  while (fgets(line, sizeof(line), maps) != NULL) {
    if (strstr(line, "memfd:conduit-client") == NULL) continue;
    unsigned long lo = 0, hi = 0, off = 0;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s %lx", &lo, &hi, perms, &off) == 4 && off == 0) {
      *base_out = lo;
      break;
    }
  }
  fclose(maps);
  return *fd_out >= 0 && *base_out != 0 ? 0 : -1;
}

static long free_huge_pages(void) {
  FILE* f = fopen("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "r");
  long n = -1;
  if (f != NULL) {
    if (fscanf(f, "%ld", &n) != 1) n = -1;
    fclose(f);
  }
  return n;
}

int main(void) {
  struct conduit_context* ctx;
  CHECK(conduit_open(NULL, &ctx));
  struct conduit_mr* mr; /* 8 MiB: holds at least one whole, aligned huge page */
  CHECK(conduit_alloc_mr(ctx, 8u << 20, CONDUIT_ACCESS_LOCAL_WRITE, &mr));
  struct conduit_cq* cq;
  CHECK(conduit_create_cq(ctx, 16, &cq));
  struct conduit_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq};
  struct conduit_qp *a, *b;
  CHECK(conduit_create_qp(ctx, &qa, &a));
  CHECK(conduit_create_qp(ctx, &qa, &b));
  struct conduit_qp_connect_attr ca = {
      .remote_gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1},
      .mtu = CONDUIT_MTU_1024,
      .timeout = 14,
      .retry_cnt = 7,
      .rnr_retry = 7,
      .min_rnr_timer = 12};
  ca.remote_qpn = conduit_qp_num(b), ca.remote_psn = 1, ca.local_psn = 1;
  CHECK(conduit_connect_qp(a, &ca));
  ca.remote_qpn = conduit_qp_num(a);
  CHECK(conduit_connect_qp(b, &ca));

  int fd;
  uintptr_t base;
  if (find_region(&fd, &base) != 0) {
    fprintf(stderr, "cannot find the region's fd and mapping in /proc/self\n");
    return 1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_blksize != HUGE_BYTES) {
    fprintf(stderr, "the region is not hugetlb-backed (block size %ld)\n", (long)st.st_blksize);
    return 2;
  }
  const uintptr_t addr = (uintptr_t)mr->addr;
  const uintptr_t hole = (addr + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1);
  if (hole + HUGE_BYTES > addr + mr->length) {
    fprintf(stderr, "the MR holds no whole huge page\n");
    return 1;
  }
  /* Receive buffer outside the hole, in the MR's first bytes. */
  struct conduit_sge rsge = {(uint64_t)addr, 4096, mr->lkey};
  struct conduit_recv_wr rwr = {.wr_id = 2, .sg_list = &rsge, .num_sge = 1};
  CHECK(conduit_post_recv(b, &rwr, NULL));

  if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(hole - base), HUGE_BYTES) !=
      0) {
    perror("fallocate(PUNCH_HOLE)");
    return 1;
  }
  /* Take every free huge page, the one just freed included. */
  const long free_pages = free_huge_pages();
  if (free_pages > 0) {
    int hog = memfd_create("hog", MFD_HUGETLB | MFD_CLOEXEC);
    if (hog < 0 || ftruncate(hog, (off_t)free_pages * HUGE_BYTES) != 0 ||
        mmap(NULL, (size_t)free_pages * HUGE_BYTES, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_POPULATE, hog, 0) == MAP_FAILED) {
      perror("taking the free huge pages");
      return 1;
    }
  }
  if (free_huge_pages() != 0) {
    fprintf(stderr, "the pool is not empty (%ld pages free)\n", free_huge_pages());
    return 1;
  }
  printf("hole punched at region offset %#lx, pool empty; posting a SEND from it\n",
         (unsigned long)(hole - base));
  fflush(stdout);

  struct conduit_sge ssge = {(uint64_t)hole, 4096, mr->lkey};
  struct conduit_send_wr swr = {.wr_id = 1,
                                .sg_list = &ssge,
                                .num_sge = 1,
                                .opcode = CONDUIT_WR_SEND,
                                .send_flags = CONDUIT_SEND_SIGNALED};
  CHECK(conduit_post_send(a, &swr, NULL));

  /* The daemon either completes the SEND with zeros or fails it; either way it
   * must then disconnect us. A control request shows whether we are attached. */
  for (int i = 0; i < 50; ++i) {
    struct conduit_wc wc[4];
    (void)conduit_wait_cq(cq, 100);
    int n = conduit_poll_cq(cq, 4, wc);
    for (int k = 0; k < n; ++k) {
      printf("completion wr %llu: %s\n", (unsigned long long)wc[k].wr_id,
             conduit_wc_status_str(wc[k].status));
    }
    struct conduit_cq* probe;
    int rc = conduit_create_cq(ctx, 4, &probe);
    if (rc < 0) {
      printf("disconnected by conduitd: %s\n", conduit_strerror(rc));
      return 0;
    }
    conduit_destroy_cq(probe);
  }
  fprintf(stderr, "still attached 5 s after the fault\n");
  return 1;
}
