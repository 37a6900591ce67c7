#include "dpdk/eal.h"

#include <rte_eal.h>
#include <rte_errno.h>

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "dpdk/dpdk_error.h"

namespace conduit::dpdk {
namespace {

// rte_eal_init may run once per process; remember that it was tried.
std::atomic<bool> g_eal_used{false};

// EAL makes a runtime directory per --file-prefix (/run/dpdk/PREFIX) and leaves it behind
// when the process ends, so a host whose daemons start under fresh prefixes would gather
// empty directories. Ours is removed when it is empty: at ~Eal, and again at exit, after
// the telemetry socket is gone (DPDK unlinks it in an exit handler registered during
// rte_eal_init, which runs before this one, registered earlier). A file another process of
// the same prefix keeps in it keeps the directory, and that is not an error.
std::string g_runtime_dir;
void remove_runtime_dir() {
  if (!g_runtime_dir.empty()) ::rmdir(g_runtime_dir.c_str());
}

std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += (s.empty() ? "" : " ") + a;
  return s;
}

}  // namespace

std::string dpdk_reason(const std::string& what, int errnum) {
  const int e = errnum < 0 ? -errnum : errnum;
  return what + ": " + rte_strerror(e) + " (errno " + std::to_string(e) + ")";
}

Eal::Eal(const std::vector<std::string>& args) : args_(args) {
  if (g_eal_used.exchange(true)) {
    throw DpdkError("DPDK EAL was already initialised in this process; create one Eal only");
  }
  // EAL keeps pointers into argv and may reorder it: give it stable copies.
  static std::vector<std::string> storage;
  static std::vector<char*> argv;
  storage.clear();
  storage.push_back("conduitd");
  storage.insert(storage.end(), args.begin(), args.end());
  argv.clear();
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  const int argc = static_cast<int>(storage.size());
  std::atexit(remove_runtime_dir);
  if (rte_eal_init(argc, argv.data()) < 0) {
    const int err = rte_errno;
    std::string hint;
    if (err == EALREADY) hint = " (EAL already initialised)";
    if (err == EACCES) hint = " (needs root or access to hugepages/devices)";
    if (err == ENOMEM) {
      hint = " (no memory: give hugepages, or use --no-huge -m <MB>)";
    }
    throw DpdkError(dpdk_reason(
        "DPDK EAL initialisation failed with arguments [" + joined(args) + "]" + hint, err));
  }
  g_runtime_dir = rte_eal_get_runtime_dir();
}

Eal::~Eal() {
  rte_eal_cleanup();
  remove_runtime_dir();
}

}  // namespace conduit::dpdk
