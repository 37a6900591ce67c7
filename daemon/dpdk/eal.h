// The DPDK Environment Abstraction Layer, initialised once per process.
//
// Arguments are EAL's own command line without the program name, e.g.
//   {"--no-huge", "-m", "512", "--no-pci", "--no-shconf", "--file-prefix=conduit1",
//    "--vdev=net_af_packet0,iface=veth0"}
// or, on a real NIC, {"-a", "0000:3b:00.0", "--in-memory"}.
//
// Thread role: construct and destroy on the main thread, before/after every
// port and lcore user. DPDK cannot initialise the EAL a second time in one
// process (even after cleanup), so constructing a second Eal throws.
#pragma once

#include <string>
#include <vector>

namespace conduit::dpdk {

class Eal {
 public:
  // Throws DpdkError with DPDK's reason and the arguments it was given.
  explicit Eal(const std::vector<std::string>& args);
  ~Eal();
  Eal(const Eal&) = delete;
  Eal& operator=(const Eal&) = delete;

  const std::vector<std::string>& args() const { return args_; }

 private:
  std::vector<std::string> args_;
};

}  // namespace conduit::dpdk
