// Discrete-event simulation of DCQCN over one switch, running conduit's real
// cc/ (reaction and notification points) and sched/ (pacer, classes) code.
//
// Model: every host has one full-duplex link to the switch (rate, one-way
// propagation delay). Senders keep each active flow backlogged (infinite
// data), pace it with a TxScheduler at the rate its RateController returns,
// and serialise packets on their link. The switch has one FIFO egress queue
// per destination host with RED/ECN marking at dequeue (kmin, kmax, pmax on
// the instantaneous queue length) and drop-tail at buffer_bytes. Receivers
// run a NotificationPoint per flow; a CNP reaches the sender after the
// propagation delay of both links plus the CNP's serialisation (CNPs never
// queue: the reverse path is uncongested in these scenarios). Lost packets
// are not retransmitted (there is no transport in the loop), so drops only
// count. Time is kept in picoseconds; RED draws come from a seeded PRNG, so a
// run is deterministic for a given scenario and seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scenario.h"

namespace conduit::sim {

struct FlowResult {
  uint32_t id = 0;
  uint64_t throughput_bps = 0;   // delivered in the steady-state window
  uint64_t delivered_bytes = 0;  // whole run
  uint64_t final_rate_bps = 0;
  bool active_whole_window = false;
};

struct Result {
  double utilization = 0;  // monitored egress port, steady-state window
  double jain_index = 0;   // flows active for the whole window
  uint64_t queue_p50_bytes = 0;
  uint64_t queue_p99_bytes = 0;
  uint64_t queue_max_bytes = 0;  // all three over the window, monitored port
  uint64_t drops = 0;            // whole run, all ports
  uint64_t marks = 0;
  uint64_t cnps = 0;
  uint64_t drops_window = 0;
  uint64_t events = 0;
  double wall_seconds = 0;  // filled in by the caller that measures it
  double cpu_seconds = 0;   // likewise (process CPU time: robust on a shared machine)
  std::vector<FlowResult> flows;
};

// Time series for plotting, sampled every scenario.csv_interval_ns.
struct Trace {
  struct RateSample {
    uint64_t time_ns;
    uint32_t flow;
    uint64_t rate_bps;        // the controller's rate
    uint64_t throughput_bps;  // delivered during the last interval
  };
  struct QueueSample {
    uint64_t time_ns;
    uint64_t queue_bytes;
  };
  std::vector<RateSample> rates;
  std::vector<QueueSample> queue;
};

// Runs the scenario. trace may be null (no time series kept).
Result run(const Scenario& scenario, uint64_t seed, Trace* trace);

std::string to_json(const Scenario& scenario, uint64_t seed, const Result& r);

}  // namespace conduit::sim
