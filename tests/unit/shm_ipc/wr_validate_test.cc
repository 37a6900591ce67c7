// Daemon-side validation of hostile work requests.
#include <cstdint>
#include <cstring>
#include <string>

#include <catch2/catch.hpp>

#include "shm/wr_validate.h"

using namespace conduit::shm;

namespace {

// Arena [1 MiB, 2 MiB) of the region; MR 7 covers [1 MiB + 4096, +8192) read-only,
// MR 9 covers [1 MiB, +65536) with local write.
const ArenaBounds kArena{1u << 20, 1u << 20};
const MrBounds kMr7{(1u << 20) + 4096, 8192, 0};
const MrBounds kMr9{1u << 20, 65536, kMrLocalWrite | kMrRemoteWrite};

const MrBounds* lookup(uint32_t lkey) {
  if (lkey == 7) return &kMr7;
  if (lkey == 9) return &kMr9;
  return nullptr;
}

conduit_shm_send_wr send_wr(uint8_t opcode) {
  conduit_shm_send_wr wr{};
  wr.wr_id = 42;
  wr.opcode = opcode;
  wr.flags = CONDUIT_SHM_SEND_SIGNALED;
  wr.num_sge = 2;
  wr.u.sg_list[0] = {0, 100, 7};
  wr.u.sg_list[1] = {1000, 24, 9};
  if (opcode == CONDUIT_SHM_WR_RDMA_WRITE || opcode == CONDUIT_SHM_WR_RDMA_WRITE_WITH_IMM ||
      opcode == CONDUIT_SHM_WR_RDMA_READ) {
    wr.remote_addr = 0x7f0000001000;
    wr.rkey = 0x1234;
  }
  if (opcode == CONDUIT_SHM_WR_SEND_WITH_IMM || opcode == CONDUIT_SHM_WR_RDMA_WRITE_WITH_IMM) {
    wr.imm_data = 0xdeadbeef;
  }
  return wr;
}

conduit_shm_wr_error validate(const conduit_shm_send_wr& wr, ValidSendWr* out = nullptr) {
  ValidSendWr tmp;
  return validate_send_wr(wr, WrLimits{}, kArena, lookup, out ? out : &tmp);
}

conduit_shm_wr_error validate(const conduit_shm_recv_wr& wr, ValidRecvWr* out = nullptr) {
  ValidRecvWr tmp;
  return validate_recv_wr(wr, WrLimits{}, kArena, lookup, out ? out : &tmp);
}

}  // namespace

TEST_CASE("well-formed send WRs of every opcode validate and resolve", "[validate]") {
  for (uint8_t op : {CONDUIT_SHM_WR_SEND, CONDUIT_SHM_WR_SEND_WITH_IMM, CONDUIT_SHM_WR_RDMA_WRITE,
                     CONDUIT_SHM_WR_RDMA_WRITE_WITH_IMM}) {
    ValidSendWr v;
    CHECK(validate(send_wr(op), &v) == CONDUIT_SHM_WR_OK);
    CHECK(v.total_len == 124u);
    CHECK(v.sge[0].region_offset == (1u << 20) + 4096);
    CHECK(v.sge[1].region_offset == (1u << 20) + 1000);
    CHECK(v.wr.wr_id == 42u);
  }
  // READ writes into local memory: every SGE needs an MR with local write.
  auto rd = send_wr(CONDUIT_SHM_WR_RDMA_READ);
  CHECK(validate(rd) == CONDUIT_SHM_WR_MR_ACCESS);
  rd.u.sg_list[0].lkey = 9;
  CHECK(validate(rd) == CONDUIT_SHM_WR_OK);
}

TEST_CASE("bad opcodes and flags are rejected", "[validate]") {
  for (uint8_t op : {0, 8, 0x80, 0xFF}) {
    auto wr = send_wr(CONDUIT_SHM_WR_SEND);
    wr.opcode = op;
    CHECK(validate(wr) == CONDUIT_SHM_WR_BAD_OPCODE);
  }
  auto wr = send_wr(CONDUIT_SHM_WR_SEND);
  wr.flags = 0x10;
  CHECK(validate(wr) == CONDUIT_SHM_WR_BAD_FLAGS);
  wr = send_wr(CONDUIT_SHM_WR_RDMA_READ);
  wr.flags = CONDUIT_SHM_SEND_INLINE;
  wr.num_sge = 0;
  CHECK(validate(wr) == CONDUIT_SHM_WR_BAD_FLAGS);
  wr = send_wr(CONDUIT_SHM_WR_SEND);
  wr.reserved0 = 1;
  CHECK(validate(wr) == CONDUIT_SHM_WR_RESERVED_NOT_ZERO);
}

TEST_CASE("atomics: one 8-byte writable SGE, an aligned remote address", "[validate]") {
  auto atomic = [](uint8_t op) {
    conduit_shm_send_wr wr{};
    wr.wr_id = 7;
    wr.opcode = op;
    wr.flags = CONDUIT_SHM_SEND_SIGNALED;
    wr.num_sge = 1;
    wr.u.atomic.sge = {64, 8, 9};
    wr.u.atomic.compare_add = 5;
    wr.u.atomic.swap = op == CONDUIT_SHM_WR_ATOMIC_CMP_AND_SWP ? 6 : 0;
    wr.remote_addr = 0x7f0000001008;
    wr.rkey = 0x1234;
    return wr;
  };
  for (uint8_t op : {CONDUIT_SHM_WR_ATOMIC_CMP_AND_SWP, CONDUIT_SHM_WR_ATOMIC_FETCH_AND_ADD}) {
    INFO(int(op));
    ValidSendWr v;
    CHECK(validate(atomic(op), &v) == CONDUIT_SHM_WR_OK);
    CHECK(v.total_len == 8u);
    CHECK(v.sge[0].region_offset == (1u << 20) + 64);
    auto wr = atomic(op);
    wr.u.atomic.sge.lkey = 7;  // read-only MR: the old value cannot land there
    CHECK(validate(wr) == CONDUIT_SHM_WR_MR_ACCESS);
    wr = atomic(op);
    wr.u.atomic.sge.length = 4;
    CHECK(validate(wr) == CONDUIT_SHM_WR_BAD_ATOMIC);
    wr = atomic(op);
    wr.num_sge = 2;
    CHECK(validate(wr) == CONDUIT_SHM_WR_BAD_ATOMIC);
    wr = atomic(op);
    wr.remote_addr += 4;
    CHECK(validate(wr) == CONDUIT_SHM_WR_BAD_ATOMIC);
    wr = atomic(op);
    wr.flags |= CONDUIT_SHM_SEND_INLINE;
    wr.num_sge = 0;
    CHECK(validate(wr) == CONDUIT_SHM_WR_BAD_FLAGS);
    wr = atomic(op);
    wr.imm_data = 1;
    CHECK(validate(wr) == CONDUIT_SHM_WR_FIELD_NOT_ALLOWED);
  }
  auto fa = atomic(CONDUIT_SHM_WR_ATOMIC_FETCH_AND_ADD);
  fa.u.atomic.swap = 1;  // fetch-and-add has no swap value
  CHECK(validate(fa) == CONDUIT_SHM_WR_FIELD_NOT_ALLOWED);
  CHECK(wc_status_for(CONDUIT_SHM_WR_BAD_ATOMIC) == CONDUIT_SHM_WC_LOC_QP_OP_ERR);
  CHECK(std::string(wr_error_name(CONDUIT_SHM_WR_BAD_ATOMIC)) == "bad_atomic");
}

TEST_CASE("fields an opcode does not use must be zero", "[validate]") {
  auto wr = send_wr(CONDUIT_SHM_WR_SEND);
  wr.imm_data = 1;
  CHECK(validate(wr) == CONDUIT_SHM_WR_FIELD_NOT_ALLOWED);
  wr = send_wr(CONDUIT_SHM_WR_SEND);
  wr.rkey = 5;
  CHECK(validate(wr) == CONDUIT_SHM_WR_FIELD_NOT_ALLOWED);
  wr = send_wr(CONDUIT_SHM_WR_RDMA_READ);
  wr.imm_data = 1;
  CHECK(validate(wr) == CONDUIT_SHM_WR_FIELD_NOT_ALLOWED);
  wr = send_wr(CONDUIT_SHM_WR_SEND);
  wr.inline_len = 4;
  CHECK(validate(wr) == CONDUIT_SHM_WR_FIELD_NOT_ALLOWED);
}

TEST_CASE("too many SGEs, per ABI and per QP limit", "[validate]") {
  auto wr = send_wr(CONDUIT_SHM_WR_SEND);
  wr.num_sge = CONDUIT_SHM_MAX_SGE + 1;
  CHECK(validate(wr) == CONDUIT_SHM_WR_TOO_MANY_SGE);
  wr.num_sge = 255;
  CHECK(validate(wr) == CONDUIT_SHM_WR_TOO_MANY_SGE);
  wr = send_wr(CONDUIT_SHM_WR_SEND);
  WrLimits one;
  one.max_send_sge = 1;
  ValidSendWr v;
  CHECK(validate_send_wr(wr, one, kArena, lookup, &v) == CONDUIT_SHM_WR_TOO_MANY_SGE);
  conduit_shm_recv_wr rwr{};
  rwr.num_sge = 7;
  CHECK(validate(rwr) == CONDUIT_SHM_WR_TOO_MANY_SGE);
}

TEST_CASE("inline sends", "[validate]") {
  auto wr = send_wr(CONDUIT_SHM_WR_SEND);
  wr.flags = CONDUIT_SHM_SEND_INLINE;
  wr.num_sge = 0;
  wr.inline_len = CONDUIT_SHM_MAX_INLINE;
  ValidSendWr v;
  CHECK(validate(wr, &v) == CONDUIT_SHM_WR_OK);
  CHECK(v.total_len == CONDUIT_SHM_MAX_INLINE);
  wr.inline_len = CONDUIT_SHM_MAX_INLINE + 1;
  CHECK(validate(wr) == CONDUIT_SHM_WR_INLINE_TOO_LONG);
  wr.inline_len = 0xFFFFFFFF;
  CHECK(validate(wr) == CONDUIT_SHM_WR_INLINE_TOO_LONG);
  wr.inline_len = 8;
  wr.num_sge = 1;
  CHECK(validate(wr) == CONDUIT_SHM_WR_FIELD_NOT_ALLOWED);
  wr = send_wr(CONDUIT_SHM_WR_RDMA_WRITE);
  wr.flags = CONDUIT_SHM_SEND_INLINE;
  wr.num_sge = 0;
  wr.inline_len = 16;
  wr.remote_addr = ~uint64_t{0} - 4;
  CHECK(validate(wr) == CONDUIT_SHM_WR_REMOTE_OVERFLOW);
}

TEST_CASE("offset + length overflow and out-of-MR ranges", "[validate]") {
  auto wr = send_wr(CONDUIT_SHM_WR_SEND);
  wr.u.sg_list[0] = {~uint64_t{0} - 10, 100, 7};
  CHECK(validate(wr) == CONDUIT_SHM_WR_LENGTH_OVERFLOW);
  wr.u.sg_list[0] = {8100, 100, 7};  // ends at 8200 > 8192
  CHECK(validate(wr) == CONDUIT_SHM_WR_OUT_OF_MR);
  wr.u.sg_list[0] = {8092, 100, 7};  // ends exactly at the MR end
  CHECK(validate(wr) == CONDUIT_SHM_WR_OK);
  wr.u.sg_list[0] = {0, 100, 8};
  CHECK(validate(wr) == CONDUIT_SHM_WR_BAD_LKEY);
  wr = send_wr(CONDUIT_SHM_WR_RDMA_WRITE);
  wr.remote_addr = ~uint64_t{0} - 50;
  CHECK(validate(wr) == CONDUIT_SHM_WR_REMOTE_OVERFLOW);
}

TEST_CASE("messages above 2^31 bytes are rejected", "[validate]") {
  const MrBounds big{0, uint64_t{1} << 40, kMrLocalWrite};
  const ArenaBounds big_arena{0, uint64_t{1} << 40};
  auto lookup_big = [&](uint32_t) { return &big; };
  conduit_shm_send_wr wr = send_wr(CONDUIT_SHM_WR_SEND);
  wr.u.sg_list[0] = {0, 0x80000000u, 1};
  wr.u.sg_list[1] = {0, 1, 1};
  ValidSendWr v;
  CHECK(validate_send_wr(wr, WrLimits{}, big_arena, lookup_big, &v) ==
        CONDUIT_SHM_WR_LENGTH_OVERFLOW);
  wr.num_sge = 1;
  CHECK(validate_send_wr(wr, WrLimits{}, big_arena, lookup_big, &v) == CONDUIT_SHM_WR_OK);
  CHECK(v.total_len == 0x80000000u);
}

TEST_CASE("an MR outside the arena never resolves", "[validate]") {
  ResolvedSge out;
  const conduit_shm_sge sge{0, 16, 1};
  const MrBounds below{4096, 65536, 0};  // starts before the arena
  CHECK(resolve_sge(sge, &below, 0, kArena, &out) == CONDUIT_SHM_WR_OUT_OF_REGION);
  const MrBounds past{(2u << 20) - 100, 200, 0};  // runs past the arena end
  CHECK(resolve_sge(sge, &past, 0, kArena, &out) == CONDUIT_SHM_WR_OUT_OF_REGION);
  const MrBounds wraps{~uint64_t{0} - 10, 100, 0};
  CHECK(resolve_sge({0, 1, 1}, &wraps, 0, kArena, &out) == CONDUIT_SHM_WR_OUT_OF_REGION);
}

TEST_CASE("receive WRs", "[validate]") {
  conduit_shm_recv_wr wr{};
  wr.wr_id = 5;
  ValidRecvWr v;
  CHECK(validate(wr, &v) == CONDUIT_SHM_WR_OK);  // zero-length receive
  CHECK(v.total_len == 0u);
  wr.num_sge = 1;
  wr.sg_list[0] = {0, 4096, 9};
  CHECK(validate(wr, &v) == CONDUIT_SHM_WR_OK);
  CHECK(v.total_len == 4096u);
  CHECK(v.sge[0].region_offset == 1u << 20);
  wr.sg_list[0].lkey = 7;  // read-only MR
  CHECK(validate(wr) == CONDUIT_SHM_WR_MR_ACCESS);
  wr.sg_list[0].lkey = 9;
  wr.reserved1[15] = 1;
  CHECK(validate(wr) == CONDUIT_SHM_WR_RESERVED_NOT_ZERO);
}

TEST_CASE("every error maps to a verbs status and a name", "[validate]") {
  CHECK(wc_status_for(CONDUIT_SHM_WR_OK) == CONDUIT_SHM_WC_SUCCESS);
  CHECK(wc_status_for(CONDUIT_SHM_WR_OUT_OF_MR) == CONDUIT_SHM_WC_LOC_PROT_ERR);
  CHECK(wc_status_for(CONDUIT_SHM_WR_LENGTH_OVERFLOW) == CONDUIT_SHM_WC_LOC_LEN_ERR);
  CHECK(wc_status_for(CONDUIT_SHM_WR_BAD_OPCODE) == CONDUIT_SHM_WC_LOC_QP_OP_ERR);
  for (int e = 1; e <= CONDUIT_SHM_WR_REMOTE_OVERFLOW; ++e) {
    const auto err = static_cast<conduit_shm_wr_error>(e);
    CHECK(wc_status_for(err) != CONDUIT_SHM_WC_SUCCESS);
    CHECK(std::strcmp(wr_error_name(err), "unknown") != 0);
  }
}
