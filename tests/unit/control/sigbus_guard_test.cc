// SigbusGuard: a SIGBUS on a guarded region is absorbed (zeros, counted), one
// anywhere else still kills the process. SIGBUS is provoked without root or
// hugepages by touching a file mapping beyond the end of its (shrunk) file.
#include "control/sigbus_guard.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdint>

using conduit::control::SigbusGuard;

namespace {

constexpr size_t kPage = 4096;

// Two mapped pages of a memfd whose second page has been cut off the file:
// touching it raises SIGBUS, like a hole in an exhausted hugetlb pool.
struct TruncatedMapping {
  int fd = -1;
  uint8_t* base = nullptr;
  TruncatedMapping() {
    fd = memfd_create("sigbus-test", MFD_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, 2 * kPage) == 0);
    void* p = mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    REQUIRE(p != MAP_FAILED);
    base = static_cast<uint8_t*>(p);
    base[0] = 0x11;
    base[kPage] = 0x22;
    REQUIRE(ftruncate(fd, kPage) == 0);
  }
  ~TruncatedMapping() {
    munmap(base, 2 * kPage);
    close(fd);
  }
};

// Runs f in a child; true if the child died of it (killed by SIGBUS, or, under
// AddressSanitizer, whose SIGBUS report ends in _exit(1), a non-zero exit).
template <class F>
bool dies(F f) {
  const pid_t pid = fork();
  if (pid == 0) {
    f();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGBUS;
  return WIFEXITED(status) && WEXITSTATUS(status) != 0;
}

}  // namespace

TEST_CASE("a SIGBUS inside a guarded region reads zeros and is counted") {
  REQUIRE(SigbusGuard::install() == 0);
  REQUIRE(SigbusGuard::install() == 0);  // idempotent
  TruncatedMapping m;
  const int slot = SigbusGuard::guard(m.base, 2 * kPage, kPage);
  REQUIRE(slot >= 0);
  CHECK(SigbusGuard::faults(slot) == 0);
  volatile uint8_t* cut = m.base + kPage;
  CHECK(cut[0] == 0);  // faulted, replaced by a zero page
  CHECK(SigbusGuard::faults(slot) == 1);
  cut[1] = 7;  // the replacement is writable and stays
  CHECK(cut[1] == 7);
  CHECK(SigbusGuard::faults(slot) == 1);
  CHECK(m.base[0] == 0x11);  // the page still in the file is untouched
  SigbusGuard::unguard(slot);
}

TEST_CASE("a SIGBUS outside every guarded region still kills the process") {
  REQUIRE(SigbusGuard::install() == 0);
  TruncatedMapping guarded;
  TruncatedMapping other;
  const int slot = SigbusGuard::guard(guarded.base, 2 * kPage, kPage);
  REQUIRE(slot >= 0);
  CHECK(dies([&] { (void)*(volatile uint8_t*)(other.base + kPage); }));
  SigbusGuard::unguard(slot);
  // Once unguarded, the region is no longer protected either.
  CHECK(dies([&] { (void)*(volatile uint8_t*)(guarded.base + kPage); }));
  // And a guarded fault in a child does not kill it.
  const int again = SigbusGuard::guard(guarded.base, 2 * kPage, kPage);
  REQUIRE(again >= 0);
  CHECK_FALSE(dies([&] { (void)*(volatile uint8_t*)(guarded.base + kPage); }));
  SigbusGuard::unguard(again);
}

TEST_CASE("guard() refuses bad ranges and reuses freed slots") {
  alignas(4096) static uint8_t buf[2 * kPage];
  CHECK(SigbusGuard::guard(nullptr, kPage, kPage) == -1);
  CHECK(SigbusGuard::guard(buf + 1, kPage, kPage) == -1);
  CHECK(SigbusGuard::guard(buf, kPage + 1, kPage) == -1);
  CHECK(SigbusGuard::guard(buf, kPage, 3000) == -1);
  CHECK(SigbusGuard::guard(buf, 0, kPage) == -1);
  const int a = SigbusGuard::guard(buf, kPage, kPage);
  REQUIRE(a >= 0);
  SigbusGuard::unguard(a);
  const int b = SigbusGuard::guard(buf, 2 * kPage, kPage);
  CHECK(b == a);
  SigbusGuard::unguard(b);
  SigbusGuard::unguard(-1);  // harmless
  SigbusGuard::unguard(SigbusGuard::kSlots);
  CHECK(SigbusGuard::faults(-1) == 0);
}
