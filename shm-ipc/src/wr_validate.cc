#include "shm/wr_validate.h"

namespace conduit::shm {

namespace {

bool is_atomic(uint8_t opcode) {
  return opcode == CONDUIT_SHM_WR_ATOMIC_CMP_AND_SWP ||
         opcode == CONDUIT_SHM_WR_ATOMIC_FETCH_AND_ADD;
}

// Opcodes that name remote memory (remote_addr, rkey).
bool is_rdma(uint8_t opcode) {
  return opcode == CONDUIT_SHM_WR_RDMA_WRITE || opcode == CONDUIT_SHM_WR_RDMA_WRITE_WITH_IMM ||
         opcode == CONDUIT_SHM_WR_RDMA_READ || is_atomic(opcode);
}

bool has_imm(uint8_t opcode) {
  return opcode == CONDUIT_SHM_WR_SEND_WITH_IMM || opcode == CONDUIT_SHM_WR_RDMA_WRITE_WITH_IMM;
}

}  // namespace

conduit_shm_wr_error check_send_wr(const conduit_shm_send_wr& wr, const WrLimits& limits) {
  if (wr.opcode < CONDUIT_SHM_WR_SEND || wr.opcode > CONDUIT_SHM_WR_ATOMIC_FETCH_AND_ADD) {
    return CONDUIT_SHM_WR_BAD_OPCODE;
  }
  if ((wr.flags & ~CONDUIT_SHM_SEND_FLAGS_ALL) != 0) return CONDUIT_SHM_WR_BAD_FLAGS;
  const bool is_inline = (wr.flags & CONDUIT_SHM_SEND_INLINE) != 0;
  // An RDMA READ or an atomic places data locally: there is nothing to carry inline.
  if (is_inline && (wr.opcode == CONDUIT_SHM_WR_RDMA_READ || is_atomic(wr.opcode))) {
    return CONDUIT_SHM_WR_BAD_FLAGS;
  }
  if (wr.reserved0 != 0) return CONDUIT_SHM_WR_RESERVED_NOT_ZERO;
  if (!has_imm(wr.opcode) && wr.imm_data != 0) return CONDUIT_SHM_WR_FIELD_NOT_ALLOWED;
  if (!is_rdma(wr.opcode) && (wr.remote_addr != 0 || wr.rkey != 0)) {
    return CONDUIT_SHM_WR_FIELD_NOT_ALLOWED;
  }
  if (is_inline) {
    if (wr.num_sge != 0) return CONDUIT_SHM_WR_FIELD_NOT_ALLOWED;
    const uint32_t max_inline =
        limits.max_inline < CONDUIT_SHM_MAX_INLINE ? limits.max_inline : CONDUIT_SHM_MAX_INLINE;
    if (wr.inline_len > max_inline) return CONDUIT_SHM_WR_INLINE_TOO_LONG;
    if (is_rdma(wr.opcode) && wr.remote_addr + wr.inline_len < wr.remote_addr) {
      return CONDUIT_SHM_WR_REMOTE_OVERFLOW;
    }
    return CONDUIT_SHM_WR_OK;
  }
  if (wr.inline_len != 0) return CONDUIT_SHM_WR_FIELD_NOT_ALLOWED;
  if (is_atomic(wr.opcode)) {
    if (wr.num_sge != 1 || wr.u.atomic.sge.length != 8 || wr.remote_addr % 8 != 0) {
      return CONDUIT_SHM_WR_BAD_ATOMIC;
    }
    if (wr.opcode == CONDUIT_SHM_WR_ATOMIC_FETCH_AND_ADD && wr.u.atomic.swap != 0) {
      return CONDUIT_SHM_WR_FIELD_NOT_ALLOWED;
    }
    return CONDUIT_SHM_WR_OK;
  }
  const uint32_t max_sge =
      limits.max_send_sge < CONDUIT_SHM_MAX_SGE ? limits.max_send_sge : CONDUIT_SHM_MAX_SGE;
  if (wr.num_sge > max_sge) return CONDUIT_SHM_WR_TOO_MANY_SGE;
  return CONDUIT_SHM_WR_OK;
}

conduit_shm_wr_error check_recv_wr(const conduit_shm_recv_wr& wr, const WrLimits& limits) {
  for (uint8_t b : wr.reserved0) {
    if (b != 0) return CONDUIT_SHM_WR_RESERVED_NOT_ZERO;
  }
  for (uint8_t b : wr.reserved1) {
    if (b != 0) return CONDUIT_SHM_WR_RESERVED_NOT_ZERO;
  }
  const uint32_t max_sge =
      limits.max_recv_sge < CONDUIT_SHM_MAX_SGE ? limits.max_recv_sge : CONDUIT_SHM_MAX_SGE;
  if (wr.num_sge > max_sge) return CONDUIT_SHM_WR_TOO_MANY_SGE;
  return CONDUIT_SHM_WR_OK;
}

conduit_shm_wr_error resolve_sge(const conduit_shm_sge& sge, const MrBounds* mr,
                                 uint32_t need_access, const ArenaBounds& arena, ResolvedSge* out) {
  if (mr == nullptr) return CONDUIT_SHM_WR_BAD_LKEY;
  const uint64_t end = sge.offset + sge.length;
  if (end < sge.offset) return CONDUIT_SHM_WR_LENGTH_OVERFLOW;
  if (end > mr->length) return CONDUIT_SHM_WR_OUT_OF_MR;
  // The MR table is the daemon's, but a stale or buggy entry must still never
  // let the engine touch memory outside this client's arena.
  const uint64_t mr_end = mr->region_offset + mr->length;
  const uint64_t arena_end = arena.offset + arena.size;
  if (mr_end < mr->region_offset || arena_end < arena.offset || mr->region_offset < arena.offset ||
      mr_end > arena_end) {
    return CONDUIT_SHM_WR_OUT_OF_REGION;
  }
  if ((mr->access & need_access) != need_access) return CONDUIT_SHM_WR_MR_ACCESS;
  out->region_offset = mr->region_offset + sge.offset;
  out->length = sge.length;
  return CONDUIT_SHM_WR_OK;
}

conduit_shm_wc_status wc_status_for(conduit_shm_wr_error err) {
  switch (err) {
    case CONDUIT_SHM_WR_OK:
      return CONDUIT_SHM_WC_SUCCESS;
    case CONDUIT_SHM_WR_LENGTH_OVERFLOW:
      return CONDUIT_SHM_WC_LOC_LEN_ERR;
    case CONDUIT_SHM_WR_BAD_LKEY:
    case CONDUIT_SHM_WR_OUT_OF_MR:
    case CONDUIT_SHM_WR_OUT_OF_REGION:
    case CONDUIT_SHM_WR_MR_ACCESS:
      return CONDUIT_SHM_WC_LOC_PROT_ERR;
    case CONDUIT_SHM_WR_BAD_OPCODE:
    case CONDUIT_SHM_WR_BAD_FLAGS:
    case CONDUIT_SHM_WR_TOO_MANY_SGE:
    case CONDUIT_SHM_WR_INLINE_TOO_LONG:
    case CONDUIT_SHM_WR_RESERVED_NOT_ZERO:
    case CONDUIT_SHM_WR_FIELD_NOT_ALLOWED:
    case CONDUIT_SHM_WR_REMOTE_OVERFLOW:
    case CONDUIT_SHM_WR_BAD_ATOMIC:
      return CONDUIT_SHM_WC_LOC_QP_OP_ERR;
  }
  return CONDUIT_SHM_WC_FATAL_ERR;
}

const char* wr_error_name(conduit_shm_wr_error err) {
  switch (err) {
    case CONDUIT_SHM_WR_OK:
      return "ok";
    case CONDUIT_SHM_WR_BAD_OPCODE:
      return "bad_opcode";
    case CONDUIT_SHM_WR_BAD_FLAGS:
      return "bad_flags";
    case CONDUIT_SHM_WR_TOO_MANY_SGE:
      return "too_many_sge";
    case CONDUIT_SHM_WR_INLINE_TOO_LONG:
      return "inline_too_long";
    case CONDUIT_SHM_WR_RESERVED_NOT_ZERO:
      return "reserved_not_zero";
    case CONDUIT_SHM_WR_FIELD_NOT_ALLOWED:
      return "field_not_allowed";
    case CONDUIT_SHM_WR_LENGTH_OVERFLOW:
      return "length_overflow";
    case CONDUIT_SHM_WR_BAD_LKEY:
      return "bad_lkey";
    case CONDUIT_SHM_WR_OUT_OF_MR:
      return "out_of_mr";
    case CONDUIT_SHM_WR_OUT_OF_REGION:
      return "out_of_region";
    case CONDUIT_SHM_WR_MR_ACCESS:
      return "mr_access";
    case CONDUIT_SHM_WR_REMOTE_OVERFLOW:
      return "remote_overflow";
    case CONDUIT_SHM_WR_BAD_ATOMIC:
      return "bad_atomic";
  }
  return "unknown";
}

}  // namespace conduit::shm
