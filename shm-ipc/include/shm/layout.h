/* Shared-memory region between conduitd and one client process: the layout.
 *
 * C-compatible ABI (C11 and C++20): every struct here is plain data with
 * fixed-width fields and explicit padding, so a C client, the C++ daemon and a
 * future verbs shim agree byte for byte. All offsets are from the start of the
 * region, never pointers, so each process maps the region wherever it likes.
 *
 * ==========================================================================
 *  Region layout (one memfd per client, created and sealed by the daemon)
 * ==========================================================================
 *
 *  offset (from region base)          size                         contents
 *  ---------------------------------  ---------------------------  ----------------------------
 *  0                                  4096 (HEADER_BYTES)          conduit_shm_header
 *  header.ring_table_offset           ring_count * 32              conduit_shm_ring_desc[]
 *  header.doorbell_offset             doorbell_count * 128         conduit_shm_wakeup[]
 *  header.rings_offset                sum over rings of            per ring: conduit_shm_ring_ctrl
 *                                     256 + capacity*entry_size      (256 B) then capacity slots
 *  header.arena_offset (page aligned) header.arena_size            registered memory (MRs)
 *  (end)                              header.region_size           multiple of header.page_size
 *
 *  Ring table order (ring index i):
 *    i = 2*q      send queue of QP slot q        (client produces, engine consumes)
 *    i = 2*q + 1  receive queue of QP slot q     (client produces, engine consumes)
 *    i = 2*max_qps + c  completion ring of CQ slot c (engine produces, client consumes)
 *  Every ring of a kind has the same depth (header.sq_depth / rq_depth /
 *  cq_depth, powers of two) and entry size (sq/rq/cq_entry_size).
 *
 *  Doorbell area (one 128-byte line each, see conduit_shm_wakeup):
 *    [0]      engine: set by the engine before it sleeps; a client that posts
 *             to any SQ/RQ and sees it set kicks the client's doorbell eventfd.
 *    [1 + c]  CQ slot c: set by the client before it blocks on the CQ's
 *             eventfd; the engine kicks that eventfd after publishing a CQE.
 *             The line also holds the CQ's lost-completion count (cqes_lost,
 *             engine-written: a CQ overrun).
 *
 *  Sections start on 128-byte boundaries; each ring's control block holds the
 *  producer index and the consumer index on separate 128-byte lines (two
 *  cache lines each, so the adjacent-line prefetcher does not couple them).
 *
 *  Sizing: the daemon picks max_qps, max_cqs, depths and arena size from the
 *  client's quotas at attach time. The memfd is then sized and sealed with
 *  F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL, so a client cannot truncate it
 *  under the daemon (which would turn daemon reads into SIGBUS). With
 *  hugetlb pages the region size is a multiple of the huge page size.
 *
 *  Trust: the header and ring table are written once by the daemon before the
 *  fd is handed out. The client validates them on attach (magic, version,
 *  sizes, every offset inside the region). The daemon never reads them back:
 *  it keeps its own copy of the layout, because the client can write anywhere
 *  in the region. Ring slots, indices and wakeup flags written by the client
 *  are hostile input to the daemon (copied, then validated; see
 *  spsc_ring.h and wr_validate.h).
 * ==========================================================================
 */
#ifndef CONDUIT_SHM_LAYOUT_H_
#define CONDUIT_SHM_LAYOUT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define CONDUIT_SHM_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
extern "C" {
#else
#define CONDUIT_SHM_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* "CNDTSHM1" read as a little-endian uint64_t. */
#define CONDUIT_SHM_MAGIC UINT64_C(0x314D485354444E43)
/* Bumped on any change to a struct in layout.h or entries.h that an older peer
 * would misread. A field carved from padding that was always zero, whose zero
 * means what the padding meant and which either side may ignore, keeps it
 * (conduit_shm_wakeup.cqes_lost). */
#define CONDUIT_SHM_ABI_VERSION 1u

#define CONDUIT_SHM_HEADER_BYTES 4096u
#define CONDUIT_SHM_SECTION_ALIGN 128u
#define CONDUIT_SHM_INDEX_LINE_BYTES 128u
/* Upper bounds a daemon will ever configure; a client rejects more. */
#define CONDUIT_SHM_MAX_QPS 4096u
#define CONDUIT_SHM_MAX_CQS 4096u
#define CONDUIT_SHM_MAX_RING_DEPTH (1u << 16)

/* header.flags */
#define CONDUIT_SHM_F_HUGETLB 0x1u

/* conduit_shm_ring_desc.kind */
enum conduit_shm_ring_kind {
  CONDUIT_SHM_RING_SQ = 1,
  CONDUIT_SHM_RING_RQ = 2,
  CONDUIT_SHM_RING_CQ = 3,
};

/* Region header at offset 0. Written once by the daemon before the fd is
 * passed to the client; read-only by convention afterwards. */
struct conduit_shm_header {
  uint64_t magic;                                   /* CONDUIT_SHM_MAGIC */
  uint32_t abi_version;                             /* CONDUIT_SHM_ABI_VERSION */
  uint32_t header_bytes;                            /* sizeof(struct conduit_shm_header) */
  uint64_t region_size;                             /* bytes; equals the memfd size */
  uint32_t page_size;                               /* 4096, or the huge page size with hugetlb */
  uint32_t flags;                                   /* CONDUIT_SHM_F_* */
  uint32_t max_qps;                                 /* QP slots (each has an SQ and an RQ ring) */
  uint32_t max_cqs;                                 /* CQ slots */
  uint32_t sq_depth;                                /* entries per SQ ring, power of two */
  uint32_t rq_depth;                                /* entries per RQ ring, power of two */
  uint32_t cq_depth;                                /* entries per CQ ring, power of two */
  uint32_t sq_entry_size;                           /* sizeof(struct conduit_shm_send_wr) */
  uint32_t rq_entry_size;                           /* sizeof(struct conduit_shm_recv_wr) */
  uint32_t cq_entry_size;                           /* sizeof(struct conduit_shm_cqe) */
  uint32_t ring_count;                              /* 2 * max_qps + max_cqs */
  uint32_t doorbell_count;                          /* 1 + max_cqs */
  uint64_t ring_table_offset;                       /* conduit_shm_ring_desc[ring_count] */
  uint64_t doorbell_offset;                         /* conduit_shm_wakeup[doorbell_count] */
  uint64_t rings_offset;                            /* first ring control block */
  uint64_t arena_offset;                            /* registered memory, page aligned */
  uint64_t arena_size;                              /* bytes */
  uint8_t reserved[CONDUIT_SHM_HEADER_BYTES - 112]; /* zero */
};

/* One entry of the ring table. */
struct conduit_shm_ring_desc {
  uint64_t ctrl_offset;  /* conduit_shm_ring_ctrl, 128-byte aligned */
  uint64_t slots_offset; /* ctrl_offset + sizeof(conduit_shm_ring_ctrl) */
  uint32_t capacity;     /* slots, power of two */
  uint32_t entry_size;   /* bytes per slot */
  uint16_t kind;         /* enum conduit_shm_ring_kind */
  uint16_t reserved;     /* zero */
  uint32_t owner;        /* QP slot (SQ/RQ) or CQ slot (CQ) */
};

/* SPSC ring control block. Indices are free running (they wrap at 2^32);
 * slot = index & (capacity - 1). Each index is written by one side only:
 * `prod` by the producer, `cons` by the consumer. See spsc_ring.h for the
 * orderings. */
struct conduit_shm_ring_ctrl {
  uint32_t prod; /* next index the producer will fill; written by producer */
  uint8_t pad0[CONDUIT_SHM_INDEX_LINE_BYTES - 4];
  uint32_t cons; /* next index the consumer will read; written by consumer */
  uint8_t pad1[CONDUIT_SHM_INDEX_LINE_BYTES - 4];
};

/* One needs-wakeup flag on its own 128-byte line. Written by the sleeper
 * (1 before sleeping, 0 after waking), read and cleared by the waker.
 * See doorbell.h for the Dekker-style protocol.
 *
 * cqes_lost (CQ lines only; zero in the engine's line): how many completions
 * the engine could not write into this CQ because its ring was full, free
 * running (wraps at 2^32). Completions of the transport wait for room; those
 * that cannot wait are lost: a WR the engine rejected, and the WR_FLUSH_ERR
 * completions of a QP's outstanding WRs when the QP is removed (destroyed,
 * its client released, conduitd stopping). The verbs equivalent is a CQ
 * overrun (IBV_EVENT_CQ_ERR). Written by the engine only, with a release
 * store after the failed enqueue and before the kick (so a client that loads
 * it with acquire and then finds the ring empty has taken every completion
 * written before the loss); the control thread zeroes it when the CQ slot is
 * (re)created. The engine keeps its own count and never reads this field:
 * whatever a client writes here is ignored. It sits on the second 64-byte
 * half of the line, away from needs_wakeup, which both sides write on every
 * sleep: an empty poll's load of it is not invalidated by those writes.
 *
 * ABI: carved from padding that was always zero, and zero means "nothing
 * lost", as before; a client built before it ignores it, a daemon built
 * before it never writes it (such a client sees no overrun, as before). Both
 * directions work unchanged, so CONDUIT_SHM_ABI_VERSION stays 1 (a bump
 * would refuse every existing client for a field each side may ignore). */
struct conduit_shm_wakeup {
  uint32_t needs_wakeup;
  uint8_t pad0[CONDUIT_SHM_INDEX_LINE_BYTES / 2 - 4];
  uint32_t cqes_lost;
  uint8_t pad1[CONDUIT_SHM_INDEX_LINE_BYTES / 2 - 4];
};

CONDUIT_SHM_STATIC_ASSERT(sizeof(struct conduit_shm_header) == CONDUIT_SHM_HEADER_BYTES,
                          "header is one 4 KiB page");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_header, abi_version) == 8, "abi");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_header, region_size) == 16, "abi");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_header, page_size) == 24, "abi");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_header, max_qps) == 32, "abi");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_header, sq_depth) == 40, "abi");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_header, sq_entry_size) == 52, "abi");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_header, ring_count) == 64, "abi");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_header, ring_table_offset) == 72, "abi");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_header, arena_offset) == 96, "abi");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_header, reserved) == 112, "abi");
CONDUIT_SHM_STATIC_ASSERT(sizeof(struct conduit_shm_ring_desc) == 32, "ring descriptor");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_ring_desc, capacity) == 16, "abi");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_ring_desc, owner) == 28, "abi");
CONDUIT_SHM_STATIC_ASSERT(sizeof(struct conduit_shm_ring_ctrl) == 2 * CONDUIT_SHM_INDEX_LINE_BYTES,
                          "ring control block");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_ring_ctrl, cons) ==
                              CONDUIT_SHM_INDEX_LINE_BYTES,
                          "producer and consumer indices on separate lines");
CONDUIT_SHM_STATIC_ASSERT(sizeof(struct conduit_shm_wakeup) == CONDUIT_SHM_INDEX_LINE_BYTES,
                          "one wakeup flag per line");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_wakeup, needs_wakeup) == 0, "abi");
CONDUIT_SHM_STATIC_ASSERT(offsetof(struct conduit_shm_wakeup, cqes_lost) ==
                              CONDUIT_SHM_INDEX_LINE_BYTES / 2,
                          "the lost count on the line's second 64 bytes, apart from the flag");

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CONDUIT_SHM_LAYOUT_H_ */
