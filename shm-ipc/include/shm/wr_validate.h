// Daemon-side validation of work requests read from a client's rings.
//
// Input is always a private copy (SpscConsumer::dequeue_burst copies out of
// shared memory), so nothing can change between check and use. Each function
// returns CONDUIT_SHM_WR_OK or the first specific error (conduit_shm_wr_error,
// entries.h); the engine then posts an error completion with
// wc_status_for(error) and vendor_err = error at once, and the QP stays usable.
// libconduit refuses malformed WRs at post time, so only a WR whose memory was
// deregistered meanwhile, or one a client wrote into the ring itself, gets
// here. Unlike verbs, which moves the QP to error, its completion may come
// before those of WRs posted earlier. Memory is resolved to region offsets: the engine only ever
// touches [region_offset, region_offset + length) of the client's own region,
// which validation has proven lies inside the arena.
//
// Pure functions: no I/O, no allocation; safe on the engine's fast path.
#pragma once

#include <cstdint>

#include "shm/entries.h"

namespace conduit::shm {

// Access rights of a registered MR (verbs-like bits).
enum MrAccess : uint32_t {
  kMrLocalWrite = 1u << 0,
  kMrRemoteWrite = 1u << 1,
  kMrRemoteRead = 1u << 2,
};

// One registered MR as the daemon's own MR table records it (never read from
// shared memory). region_offset is from the region base.
struct MrBounds {
  uint64_t region_offset = 0;
  uint64_t length = 0;
  uint32_t access = 0;  // MrAccess bits
};

// The arena of the client's region, from the daemon's private RegionLayout.
struct ArenaBounds {
  uint64_t offset = 0;
  uint64_t size = 0;
};

// Per-QP limits fixed at QP creation (<= the ABI maxima).
struct WrLimits {
  uint32_t max_send_sge = CONDUIT_SHM_MAX_SGE;
  uint32_t max_recv_sge = CONDUIT_SHM_MAX_SGE;
  uint32_t max_inline = CONDUIT_SHM_MAX_INLINE;
};

// An SGE resolved to the client's region.
struct ResolvedSge {
  uint64_t region_offset = 0;
  uint32_t length = 0;
};

struct ValidSendWr {
  conduit_shm_send_wr wr{};                // the validated copy
  uint32_t total_len = 0;                  // message bytes (inline_len for INLINE)
  ResolvedSge sge[CONDUIT_SHM_MAX_SGE]{};  // wr.num_sge used; local source or READ target
};

struct ValidRecvWr {
  uint64_t wr_id = 0;
  uint32_t total_len = 0;  // capacity of the receive buffer
  uint32_t num_sge = 0;
  ResolvedSge sge[CONDUIT_SHM_MAX_SGE]{};
};

// Structural checks that need no MR table: opcode, flags, SGE count, inline
// length, reserved fields, fields the opcode does not use, remote range.
conduit_shm_wr_error check_send_wr(const conduit_shm_send_wr& wr, const WrLimits& limits);
conduit_shm_wr_error check_recv_wr(const conduit_shm_recv_wr& wr, const WrLimits& limits);

// Resolves one SGE against its MR (nullptr: unknown lkey). need_access is the
// MrAccess bits the use requires (kMrLocalWrite for receive and READ targets).
conduit_shm_wr_error resolve_sge(const conduit_shm_sge& sge, const MrBounds* mr,
                                 uint32_t need_access, const ArenaBounds& arena, ResolvedSge* out);

// The verbs status for an error completion caused by a rejected WR.
conduit_shm_wc_status wc_status_for(conduit_shm_wr_error err);
// A short constant name for logs and tests ("bad_opcode", ...).
const char* wr_error_name(conduit_shm_wr_error err);

// Full validation. lookup(lkey) returns const MrBounds* or nullptr.
template <class Lookup>
conduit_shm_wr_error validate_send_wr(const conduit_shm_send_wr& wr, const WrLimits& limits,
                                      const ArenaBounds& arena, Lookup&& lookup, ValidSendWr* out) {
  conduit_shm_wr_error err = check_send_wr(wr, limits);
  if (err != CONDUIT_SHM_WR_OK) return err;
  out->wr = wr;
  if (wr.flags & CONDUIT_SHM_SEND_INLINE) {
    out->total_len = wr.inline_len;
    return CONDUIT_SHM_WR_OK;
  }
  // READ and atomic targets are written locally.
  const uint32_t need = wr.opcode == CONDUIT_SHM_WR_RDMA_READ ||
                                wr.opcode == CONDUIT_SHM_WR_ATOMIC_CMP_AND_SWP ||
                                wr.opcode == CONDUIT_SHM_WR_ATOMIC_FETCH_AND_ADD
                            ? kMrLocalWrite
                            : 0u;
  uint64_t total = 0;
  for (uint32_t i = 0; i < wr.num_sge; ++i) {
    const conduit_shm_sge& sge = wr.u.sg_list[i];
    err = resolve_sge(sge, lookup(sge.lkey), need, arena, &out->sge[i]);
    if (err != CONDUIT_SHM_WR_OK) return err;
    total += sge.length;
  }
  if (total > CONDUIT_SHM_MAX_MSG_BYTES) return CONDUIT_SHM_WR_LENGTH_OVERFLOW;
  if (wr.opcode == CONDUIT_SHM_WR_RDMA_WRITE || wr.opcode == CONDUIT_SHM_WR_RDMA_WRITE_WITH_IMM ||
      wr.opcode == CONDUIT_SHM_WR_RDMA_READ) {
    if (wr.remote_addr + total < wr.remote_addr) return CONDUIT_SHM_WR_REMOTE_OVERFLOW;
  }
  out->total_len = static_cast<uint32_t>(total);
  return CONDUIT_SHM_WR_OK;
}

template <class Lookup>
conduit_shm_wr_error validate_recv_wr(const conduit_shm_recv_wr& wr, const WrLimits& limits,
                                      const ArenaBounds& arena, Lookup&& lookup, ValidRecvWr* out) {
  conduit_shm_wr_error err = check_recv_wr(wr, limits);
  if (err != CONDUIT_SHM_WR_OK) return err;
  uint64_t total = 0;
  for (uint32_t i = 0; i < wr.num_sge; ++i) {
    const conduit_shm_sge& sge = wr.sg_list[i];
    err = resolve_sge(sge, lookup(sge.lkey), kMrLocalWrite, arena, &out->sge[i]);
    if (err != CONDUIT_SHM_WR_OK) return err;
    total += sge.length;
  }
  if (total > CONDUIT_SHM_MAX_MSG_BYTES) return CONDUIT_SHM_WR_LENGTH_OVERFLOW;
  out->wr_id = wr.wr_id;
  out->num_sge = wr.num_sge;
  out->total_len = static_cast<uint32_t>(total);
  return CONDUIT_SHM_WR_OK;
}

}  // namespace conduit::shm
