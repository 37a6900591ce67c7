/* Ring entry formats: send and receive work requests, completions.
 *
 * C-compatible ABI (C11 and C++20), fixed size, trivially copyable. Memory is
 * named by (lkey, offset, length): lkey is the key the daemon returned when
 * the client registered a memory region (MR) inside its region's arena, and
 * offset is in bytes from the start of that MR. Never a pointer.
 *
 * Byte order: all fields are host order in the ring (imm_data too; the
 * daemon's wire layer converts to network order).
 *
 *   conduit_shm_send_wr  128 B  SQ entry   (client -> engine)
 *   conduit_shm_recv_wr  128 B  RQ entry   (client -> engine)
 *   conduit_shm_cqe       32 B  CQ entry   (engine -> client)
 *
 * Every reserved field must be zero; the daemon rejects a WR otherwise, so
 * the fields can be given a meaning later without a silent misread.
 */
#ifndef CONDUIT_SHM_ENTRIES_H_
#define CONDUIT_SHM_ENTRIES_H_

#include <stddef.h>
#include <stdint.h>

#include "shm/layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Scatter-gather elements per work request. */
#define CONDUIT_SHM_MAX_SGE 6u
/* Bytes of inline payload a send WR can carry instead of an SGE list. */
#define CONDUIT_SHM_MAX_INLINE 96u
/* Largest message (sum of SGE lengths): 2^31 bytes, as InfiniBand allows. */
#define CONDUIT_SHM_MAX_MSG_BYTES (UINT32_C(1) << 31)

/* conduit_shm_send_wr.opcode. Zero is invalid so a zeroed slot is caught. */
enum conduit_shm_wr_opcode {
  CONDUIT_SHM_WR_SEND = 1,
  CONDUIT_SHM_WR_SEND_WITH_IMM = 2,
  CONDUIT_SHM_WR_RDMA_WRITE = 3,
  CONDUIT_SHM_WR_RDMA_WRITE_WITH_IMM = 4,
  CONDUIT_SHM_WR_RDMA_READ = 5,
  /* 8-byte atomics at an 8-byte aligned remote_addr; the original value lands in
   * u.atomic.sge (one SGE of 8 bytes, local write): num_sge is 1. */
  CONDUIT_SHM_WR_ATOMIC_CMP_AND_SWP = 6,
  CONDUIT_SHM_WR_ATOMIC_FETCH_AND_ADD = 7,
};

/* conduit_shm_send_wr.flags */
enum conduit_shm_send_flags {
  CONDUIT_SHM_SEND_SIGNALED = 1u << 0,  /* post a CQE on success too */
  CONDUIT_SHM_SEND_SOLICITED = 1u << 1, /* set the BTH solicited-event bit */
  CONDUIT_SHM_SEND_FENCE = 1u << 2,     /* wait for earlier RDMA READs to finish */
  CONDUIT_SHM_SEND_INLINE = 1u << 3,    /* payload in inline_data, not sg_list */
};
#define CONDUIT_SHM_SEND_FLAGS_ALL 0x0Fu

/* One scatter-gather element. */
struct conduit_shm_sge {
  uint64_t offset; /* bytes from the start of the MR named by lkey */
  uint32_t length; /* bytes */
  uint32_t lkey;   /* local key of a registered MR */
};

/* An atomic's operands (u.atomic): sge overlays sg_list[0]. */
struct conduit_shm_atomic {
  struct conduit_shm_sge sge; /* 8 bytes: where the original value lands */
  uint64_t compare_add;       /* CMP_AND_SWP: compared; FETCH_AND_ADD: added */
  uint64_t swap;              /* CMP_AND_SWP: stored on a match; zero otherwise */
};

/* Send work request (SQ slot). */
struct conduit_shm_send_wr {
  uint64_t wr_id;       /* opaque to the daemon; returned in the CQE */
  uint8_t opcode;       /* enum conduit_shm_wr_opcode */
  uint8_t flags;        /* enum conduit_shm_send_flags */
  uint8_t num_sge;      /* used entries of sg_list; 0 with INLINE */
  uint8_t reserved0;    /* zero */
  uint32_t imm_data;    /* *_WITH_IMM only; zero otherwise */
  uint64_t remote_addr; /* RDMA_*: address in the peer's MR as the peer advertised it */
  uint32_t rkey;        /* RDMA_*: peer's remote key; zero for SEND */
  uint32_t inline_len;  /* INLINE only: bytes used in inline_data; zero otherwise */
  union {
    struct conduit_shm_sge sg_list[CONDUIT_SHM_MAX_SGE];
    uint8_t inline_data[CONDUIT_SHM_MAX_INLINE];
    struct conduit_shm_atomic atomic; /* ATOMIC_* only */
  } u;
};

/* Receive work request (RQ slot). */
struct conduit_shm_recv_wr {
  uint64_t wr_id;       /* returned in the CQE */
  uint8_t num_sge;      /* used entries of sg_list (0 is a valid zero-length receive) */
  uint8_t reserved0[7]; /* zero */
  struct conduit_shm_sge sg_list[CONDUIT_SHM_MAX_SGE];
  uint8_t reserved1[16]; /* zero */
};

/* conduit_shm_cqe.status: the verbs work-completion statuses conduit uses. */
enum conduit_shm_wc_status {
  CONDUIT_SHM_WC_SUCCESS = 0,
  CONDUIT_SHM_WC_LOC_LEN_ERR = 1,       /* receive buffer too small / bad length */
  CONDUIT_SHM_WC_LOC_QP_OP_ERR = 2,     /* malformed WR (opcode, flags, SGE count) */
  CONDUIT_SHM_WC_LOC_PROT_ERR = 3,      /* lkey/offset outside registered memory */
  CONDUIT_SHM_WC_WR_FLUSH_ERR = 4,      /* QP in error; WR not executed */
  CONDUIT_SHM_WC_REM_ACCESS_ERR = 5,    /* peer NAK: remote access error */
  CONDUIT_SHM_WC_REM_INV_REQ_ERR = 6,   /* peer NAK: invalid request */
  CONDUIT_SHM_WC_REM_OP_ERR = 7,        /* peer NAK: remote operational error */
  CONDUIT_SHM_WC_RETRY_EXC_ERR = 8,     /* transport retry counter exceeded */
  CONDUIT_SHM_WC_RNR_RETRY_EXC_ERR = 9, /* RNR retry counter exceeded */
  CONDUIT_SHM_WC_FATAL_ERR = 10,        /* daemon-side fatal error */
};

/* conduit_shm_cqe.opcode */
enum conduit_shm_wc_opcode {
  CONDUIT_SHM_WC_SEND = 1,
  CONDUIT_SHM_WC_RDMA_WRITE = 2,
  CONDUIT_SHM_WC_RDMA_READ = 3,
  CONDUIT_SHM_WC_RECV = 4,               /* SEND or SEND_WITH_IMM arrived */
  CONDUIT_SHM_WC_RECV_RDMA_WITH_IMM = 5, /* RDMA_WRITE_WITH_IMM arrived */
  CONDUIT_SHM_WC_COMP_SWAP = 6,
  CONDUIT_SHM_WC_FETCH_ADD = 7,
};

/* conduit_shm_cqe.flags */
enum conduit_shm_wc_flags {
  CONDUIT_SHM_WC_WITH_IMM = 1u << 0, /* imm_data is valid */
};

/* Why the daemon rejected a work request; carried in conduit_shm_cqe.vendor_err
 * of the error completion. Zero is "valid". */
enum conduit_shm_wr_error {
  CONDUIT_SHM_WR_OK = 0,
  CONDUIT_SHM_WR_BAD_OPCODE = 1,        /* opcode not in conduit_shm_wr_opcode */
  CONDUIT_SHM_WR_BAD_FLAGS = 2,         /* unknown flag bits, or INLINE with RDMA_READ */
  CONDUIT_SHM_WR_TOO_MANY_SGE = 3,      /* num_sge above the QP's limit */
  CONDUIT_SHM_WR_INLINE_TOO_LONG = 4,   /* inline_len above the QP's limit */
  CONDUIT_SHM_WR_RESERVED_NOT_ZERO = 5, /* a reserved field is not zero */
  CONDUIT_SHM_WR_FIELD_NOT_ALLOWED =
      6,                               /* imm/rkey/remote_addr/inline_len on an opcode without it */
  CONDUIT_SHM_WR_LENGTH_OVERFLOW = 7,  /* offset + length wraps, or message > 2^31 bytes */
  CONDUIT_SHM_WR_BAD_LKEY = 8,         /* no MR with this lkey */
  CONDUIT_SHM_WR_OUT_OF_MR = 9,        /* offset + length beyond the MR */
  CONDUIT_SHM_WR_OUT_OF_REGION = 10,   /* the MR is not inside the region's arena */
  CONDUIT_SHM_WR_MR_ACCESS = 11,       /* MR lacks local write for a receive/READ target */
  CONDUIT_SHM_WR_REMOTE_OVERFLOW = 12, /* remote_addr + length wraps */
  CONDUIT_SHM_WR_BAD_ATOMIC = 13,      /* atomic: not one 8-byte SGE, or remote_addr unaligned */
};

/* Completion (CQ slot). */
struct conduit_shm_cqe {
  uint64_t wr_id;      /* from the WR */
  uint32_t byte_len;   /* receives: bytes placed; RDMA READ: bytes read */
  uint32_t imm_data;   /* valid with CONDUIT_SHM_WC_WITH_IMM */
  uint32_t qp_num;     /* local QP number */
  uint32_t src_qp;     /* receives: remote QP number */
  uint8_t status;      /* enum conduit_shm_wc_status */
  uint8_t opcode;      /* enum conduit_shm_wc_opcode */
  uint8_t flags;       /* enum conduit_shm_wc_flags */
  uint8_t reserved0;   /* zero */
  uint32_t vendor_err; /* daemon detail code for errors (conduit_shm_wr_error), else 0 */
};

CONDUIT_SHM_STATIC_ASSERT(sizeof(struct conduit_shm_sge) == 16, "sge");
CONDUIT_SHM_STATIC_ASSERT(sizeof(struct conduit_shm_send_wr) == 128, "send wr is 128 B");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_send_wr, imm_data) == 12, "abi");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_send_wr, remote_addr) == 16, "abi");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_send_wr, inline_len) == 28, "abi");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_send_wr, u) == 32, "abi");
CONDUIT_SHM_STATIC_ASSERT(CONDUIT_SHM_MAX_INLINE ==
                              CONDUIT_SHM_MAX_SGE * sizeof(struct conduit_shm_sge),
                          "inline data shares the SGE space");
CONDUIT_SHM_STATIC_ASSERT(sizeof(struct conduit_shm_recv_wr) == 128, "recv wr is 128 B");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_recv_wr, sg_list) == 16, "abi");
CONDUIT_SHM_STATIC_ASSERT(sizeof(struct conduit_shm_cqe) == 32, "cqe is 32 B");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_cqe, status) == 24, "abi");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_cqe, vendor_err) == 28, "abi");

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CONDUIT_SHM_ENTRIES_H_ */
