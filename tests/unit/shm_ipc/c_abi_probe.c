/* Compiled as C11: the layout and entry headers must be valid C, and C must
 * see the same sizes and offsets as C++ (checked in c_abi_test.cc). */
#include <stddef.h>
#include <stdint.h>

#include "shm/entries.h"
#include "shm/layout.h"

size_t conduit_shm_c_probe(int which);

size_t conduit_shm_c_probe(int which) {
  switch (which) {
    case 0:
      return sizeof(struct conduit_shm_header);
    case 1:
      return offsetof(struct conduit_shm_header, arena_size);
    case 2:
      return sizeof(struct conduit_shm_ring_ctrl);
    case 3:
      return offsetof(struct conduit_shm_ring_ctrl, cons);
    case 4:
      return sizeof(struct conduit_shm_send_wr);
    case 5:
      return offsetof(struct conduit_shm_send_wr, u.inline_data);
    case 6:
      return sizeof(struct conduit_shm_recv_wr);
    case 7:
      return sizeof(struct conduit_shm_cqe);
    case 8:
      return offsetof(struct conduit_shm_cqe, src_qp);
    case 9:
      return sizeof(struct conduit_shm_ring_desc);
    case 10:
      return sizeof(struct conduit_shm_wakeup);
    case 11:
      return offsetof(struct conduit_shm_wakeup, cqes_lost);
    default:
      return 0;
  }
}
