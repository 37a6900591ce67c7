#include "control/sigbus_guard.h"

#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace conduit::control {
namespace {

struct Slot {
  // base != 0 marks a slot in use; it is written last (release) by guard() and
  // cleared first by unguard(), so the handler never sees a half-set slot.
  std::atomic<uintptr_t> base{0};
  std::atomic<size_t> len{0};
  std::atomic<size_t> page{0};
  std::atomic<uint64_t> faults{0};
  std::atomic<bool> claimed{false};  // owned by a guard() caller (control thread)
};

Slot g_slots[SigbusGuard::kSlots];
struct sigaction g_previous;
std::atomic<bool> g_installed{false};

void forward(int sig, siginfo_t* info, void* context) {
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN &&
      g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  // Default action: die with SIGBUS (returning would fault again forever).
  signal(SIGBUS, SIG_DFL);
  raise(SIGBUS);
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& s : g_slots) {
    const uintptr_t base = s.base.load(std::memory_order_acquire);
    if (base == 0 || addr - base >= s.len.load(std::memory_order_relaxed)) continue;
    const size_t page = s.page.load(std::memory_order_relaxed);
    void* at = reinterpret_cast<void*>(addr & ~(uintptr_t{page} - 1));
    // mmap is not on POSIX's async-signal-safe list, but on Linux it is a plain
    // system call; compositors recover from SIGBUS on client buffers the same way.
    void* got =
        ::mmap(at, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (got == at) {
      s.faults.fetch_add(1, std::memory_order_relaxed);
      errno = saved_errno;
      return;  // the faulting access is retried on the anonymous page
    }
    break;
  }
  errno = saved_errno;
  forward(sig, info, context);
}

}  // namespace

int SigbusGuard::install() {
  if (g_installed.exchange(true)) return 0;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  if (::sigaction(SIGBUS, &sa, &g_previous) != 0) {
    g_installed = false;
    return -errno;
  }
  return 0;
}

int SigbusGuard::guard(void* base, size_t len, size_t page_bytes) {
  const auto b = reinterpret_cast<uintptr_t>(base);
  if (b == 0 || len == 0 || page_bytes == 0 || (page_bytes & (page_bytes - 1)) != 0 ||
      b % page_bytes != 0 || len % page_bytes != 0) {
    return -1;
  }
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = g_slots[i];
    if (s.claimed.exchange(true, std::memory_order_acq_rel)) continue;
    s.len.store(len, std::memory_order_relaxed);
    s.page.store(page_bytes, std::memory_order_relaxed);
    s.faults.store(0, std::memory_order_relaxed);
    s.base.store(b, std::memory_order_release);  // pairs with the handler's acquire
    return i;
  }
  return -1;
}

void SigbusGuard::unguard(int slot) {
  if (slot < 0 || slot >= kSlots) return;
  Slot& s = g_slots[slot];
  s.base.store(0, std::memory_order_release);
  s.claimed.store(false, std::memory_order_release);
}

uint64_t SigbusGuard::faults(int slot) {
  if (slot < 0 || slot >= kSlots) return 0;
  return g_slots[slot].faults.load(std::memory_order_relaxed);
}

}  // namespace conduit::control
