// The C view of the ABI (c_abi_probe.c, compiled as C11) matches the C++ view.
#include <cstddef>

#include <catch2/catch.hpp>

#include "shm/entries.h"
#include "shm/layout.h"

extern "C" size_t conduit_shm_c_probe(int which);

TEST_CASE("C and C++ agree on the shared-memory ABI", "[abi]") {
  CHECK(conduit_shm_c_probe(0) == sizeof(conduit_shm_header));
  CHECK(conduit_shm_c_probe(1) == offsetof(conduit_shm_header, arena_size));
  CHECK(conduit_shm_c_probe(2) == sizeof(conduit_shm_ring_ctrl));
  CHECK(conduit_shm_c_probe(3) == offsetof(conduit_shm_ring_ctrl, cons));
  CHECK(conduit_shm_c_probe(4) == sizeof(conduit_shm_send_wr));
  CHECK(conduit_shm_c_probe(5) == offsetof(conduit_shm_send_wr, u.inline_data));
  CHECK(conduit_shm_c_probe(6) == sizeof(conduit_shm_recv_wr));
  CHECK(conduit_shm_c_probe(7) == sizeof(conduit_shm_cqe));
  CHECK(conduit_shm_c_probe(8) == offsetof(conduit_shm_cqe, src_qp));
  CHECK(conduit_shm_c_probe(9) == sizeof(conduit_shm_ring_desc));
  CHECK(conduit_shm_c_probe(10) == sizeof(conduit_shm_wakeup));
  CHECK(conduit_shm_c_probe(11) == offsetof(conduit_shm_wakeup, cqes_lost));
  // The lost count sits where the padding was zero, on the line's second 64 bytes.
  CHECK(offsetof(conduit_shm_wakeup, cqes_lost) == 64);
}
