// Results as perftest prints them, and as JSON lines.
//
// Bandwidth: Gb/s = bits / ns (1e9 bit/s); MsgRate in millions of messages/s.
// Latency: one-way microseconds = round trip / 2 (perftest's convention for
// send_lat and write_lat); t_typical is the median.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "perf_options.h"

namespace conduit::perf {

struct BwResult {
  uint64_t size_bytes = 0;
  uint64_t iterations = 0;  // messages counted (both directions with -b)
  double peak_gbps = 0;
  double avg_gbps = 0;
  double msg_rate_mpps = 0;
};

// messages of size_bytes in elapsed_ns; peak_bps from the best window.
BwResult make_bw_result(uint64_t size_bytes, uint64_t messages, uint64_t elapsed_ns,
                        uint64_t peak_bps);
// -b: the two directions ran at once; rates add, the count is the sum.
BwResult combine_bidirectional(const BwResult& a, const BwResult& b);

struct LatResult {
  uint64_t size_bytes = 0;
  uint64_t iterations = 0;
  double min_us = 0, max_us = 0, typical_us = 0, avg_us = 0, stdev_us = 0, p99_us = 0, p999_us = 0;
};

// rtt_ns: one round trip per sample, reported one way (halved) unless `whole_round_trip`
// (READ latency, as perftest's ib_read_lat). Sorts a copy; empty input gives zeros.
LatResult make_lat_result(uint64_t size_bytes, std::vector<uint64_t> rtt_ns,
                          bool whole_round_trip = false);

// perftest's latency report with -D: the sampled time per round trip (one way, or READ's whole
// round trip), averaged over the round trips completed in it, and those per second.
struct LatDurationResult {
  uint64_t size_bytes = 0;
  uint64_t iterations = 0;  // round trips completed in the sampled time
  double avg_us = 0;
  double tps = 0;  // perftest's "tps average": round trips per second
};
// `round_trips` in `sampled_ns`, halved unless `whole_round_trip`; 0 round trips give 0.
LatDurationResult make_lat_duration_result(uint64_t size_bytes, uint64_t round_trips,
                                           uint64_t sampled_ns, bool whole_round_trip = false);

std::string bw_header();
std::string bw_line(const BwResult& r);
std::string bw_json(const BwResult& r, TestKind test, uint32_t qps, bool bidirectional);
std::string lat_header();
std::string lat_line(const LatResult& r);
std::string lat_json(const LatResult& r, TestKind test);
std::string lat_duration_header();
std::string lat_duration_line(const LatDurationResult& r);

// Tracks the best rate over windows of at least kPeakWindowNs (whole run if shorter).
class PeakMeter {
 public:
  static constexpr uint64_t kPeakWindowNs = 10'000'000;
  void start(uint64_t now_ns);
  void add(uint64_t now_ns, uint64_t bytes);
  // Best window rate in bit/s, or the whole-run rate when no window closed.
  uint64_t peak_bps(uint64_t end_ns) const;

 private:
  uint64_t start_ns_ = 0;
  uint64_t window_start_ns_ = 0;
  uint64_t window_bytes_ = 0;
  uint64_t total_bytes_ = 0;
  uint64_t best_bps_ = 0;
};

}  // namespace conduit::perf
