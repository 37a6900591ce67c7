// A conduit-sim scenario: hosts on a single switch, flows between them, and
// the congestion-control, NP, ECN and traffic-class settings. Loaded from
// YAML (see tests/sim/scenarios/ for the format, documented in README.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cc/dcqcn_params.h"
#include "cc/rate_controller.h"
#include "sched/tx_scheduler.h"

namespace conduit::sim {

struct HostSpec {
  std::string name;
  uint64_t rate_bps = 0;  // host <-> switch link, both directions
  uint64_t delay_ns = 0;  // one-way propagation
};

struct ClassSpec {
  std::string name;
  sched::ClassConfig config;
};

struct FlowSpec {
  uint32_t id = 0;
  uint32_t src = 0;  // host index
  uint32_t dst = 0;
  uint32_t cls = 0;  // class index
  uint64_t start_ns = 0;
  uint64_t stop_ns = 0;
  cc::ControllerConfig cc;
};

struct SwitchSpec {
  uint64_t buffer_bytes = 1'000'000;  // per egress port, drop-tail beyond it
  uint64_t kmin_bytes = 5'000;
  uint64_t kmax_bytes = 200'000;
  double pmax = 0.01;
};

struct Scenario {
  std::string name;
  uint64_t duration_ns = 0;
  uint64_t window_start_ns = 0;  // steady-state window for the summary
  uint64_t window_end_ns = 0;
  uint32_t packet_bytes = 1000;  // data packet size on the wire
  uint32_t cnp_bytes = 64;
  uint64_t queue_sample_ns = 1000;  // queue percentile sampling period
  uint64_t csv_interval_ns = 100'000;
  uint64_t seed = 1;
  SwitchSpec sw;
  cc::NpParams np;
  std::vector<HostSpec> hosts;
  std::vector<ClassSpec> classes;
  std::vector<FlowSpec> flows;
  uint32_t monitor_host = 0;  // egress port whose queue and utilisation are reported
};

// Parses and validates a scenario file. Throws std::runtime_error with
// "FILE: KEY: problem" on any error.
Scenario load_scenario(const std::string& path);

}  // namespace conduit::sim
