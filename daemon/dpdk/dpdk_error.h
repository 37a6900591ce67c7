// Setup-time failure in the DPDK shell. The message says what failed, with
// DPDK's reason and what the operator can change; the datapath never throws.
#pragma once

#include <stdexcept>
#include <string>

namespace conduit::dpdk {

class DpdkError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "<what>: <rte_strerror(errnum)> (errno <errnum>)". errnum may be negative
// (DPDK's -errno return convention).
std::string dpdk_reason(const std::string& what, int errnum);

}  // namespace conduit::dpdk
