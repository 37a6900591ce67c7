// Keeps a client from killing the daemon with SIGBUS.
//
// A client holds the fd of its own region, so it can punch a hole into it
// (fallocate) and, with a hugetlb-backed region, use up the pool: the daemon's
// next touch of that page then faults with SIGBUS instead of getting a fresh
// page. The guard catches a SIGBUS whose address lies in a guarded region,
// maps private anonymous memory over the faulting page (the access is retried
// and sees zeros), and counts a fault against that region; the control thread
// then disconnects the client. A SIGBUS anywhere else gets the action that was
// installed before the guard (by default: the process dies, as it should).
//
// Thread role: install() once, at start-up; guard()/unguard() from the
// control thread; faults() from any thread. The signal handler runs on the
// thread that faulted (usually the engine) and only reads the slot table with
// atomics, so guard()/unguard() need no lock. unguard() must be called before
// the region is unmapped, and only once no thread touches it any more.
#pragma once

#include <cstddef>
#include <cstdint>

namespace conduit::control {

class SigbusGuard {
 public:
  static constexpr int kSlots = 1024;

  // Installs the SIGBUS handler (idempotent). 0 or -errno.
  static int install();
  // Guards [base, base + len), whose pages are page_bytes large (4096 or the
  // huge page size; base and len are multiples of it). A slot (>= 0), or -1
  // when the table is full or the arguments are not page-aligned.
  static int guard(void* base, size_t len, size_t page_bytes);
  static void unguard(int slot);
  // SIGBUS faults caught in the slot since guard().
  static uint64_t faults(int slot);
};

}  // namespace conduit::control
