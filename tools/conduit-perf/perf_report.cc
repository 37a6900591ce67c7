#include "perf_report.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>

namespace conduit::perf {

namespace {

// printf into a string; every line and JSON object here is far shorter than the buffer.
[[gnu::format(printf, 1, 2)]] std::string formatted(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

double bits_per_ns(uint64_t bytes, uint64_t ns) {
  return ns == 0 ? 0.0 : static_cast<double>(bytes) * 8.0 / static_cast<double>(ns);
}

// Nearest-rank percentile of sorted samples (q in (0, 1]).
uint64_t percentile(const std::vector<uint64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

}  // namespace

BwResult make_bw_result(uint64_t size_bytes, uint64_t messages, uint64_t elapsed_ns,
                        uint64_t peak_bps) {
  BwResult r;
  r.size_bytes = size_bytes;
  r.iterations = messages;
  r.avg_gbps = bits_per_ns(size_bytes * messages, elapsed_ns);
  r.peak_gbps = std::max(static_cast<double>(peak_bps) / 1e9, r.avg_gbps);
  r.msg_rate_mpps =
      elapsed_ns == 0 ? 0.0 : static_cast<double>(messages) * 1e3 / static_cast<double>(elapsed_ns);
  return r;
}

BwResult combine_bidirectional(const BwResult& a, const BwResult& b) {
  BwResult r = a;
  r.iterations = a.iterations + b.iterations;
  r.peak_gbps = a.peak_gbps + b.peak_gbps;
  r.avg_gbps = a.avg_gbps + b.avg_gbps;
  r.msg_rate_mpps = a.msg_rate_mpps + b.msg_rate_mpps;
  return r;
}

LatResult make_lat_result(uint64_t size_bytes, std::vector<uint64_t> rtt_ns,
                          bool whole_round_trip) {
  const double per_sample = whole_round_trip ? 1.0 : 2.0;
  const auto sample_us = [per_sample](double ns) { return ns / per_sample / 1000.0; };
  LatResult r;
  r.size_bytes = size_bytes;
  r.iterations = rtt_ns.size();
  if (rtt_ns.empty()) return r;
  std::sort(rtt_ns.begin(), rtt_ns.end());
  double sum = 0;
  for (uint64_t v : rtt_ns) sum += static_cast<double>(v);
  const double mean = sum / static_cast<double>(rtt_ns.size());
  double var = 0;
  for (uint64_t v : rtt_ns)
    var += (static_cast<double>(v) - mean) * (static_cast<double>(v) - mean);
  var /= static_cast<double>(rtt_ns.size());
  r.min_us = sample_us(static_cast<double>(rtt_ns.front()));
  r.max_us = sample_us(static_cast<double>(rtt_ns.back()));
  r.typical_us = sample_us(static_cast<double>(percentile(rtt_ns, 0.5)));
  r.avg_us = sample_us(mean);
  r.stdev_us = sample_us(std::sqrt(var));
  r.p99_us = sample_us(static_cast<double>(percentile(rtt_ns, 0.99)));
  r.p999_us = sample_us(static_cast<double>(percentile(rtt_ns, 0.999)));
  return r;
}

LatDurationResult make_lat_duration_result(uint64_t size_bytes, uint64_t round_trips,
                                           uint64_t sampled_ns, bool whole_round_trip) {
  LatDurationResult r;
  r.size_bytes = size_bytes;
  r.iterations = round_trips;
  if (round_trips != 0 && sampled_ns != 0) {
    r.avg_us = static_cast<double>(sampled_ns) / 1000.0 / (whole_round_trip ? 1.0 : 2.0) /
               static_cast<double>(round_trips);
    r.tps = static_cast<double>(round_trips) * 1e9 / static_cast<double>(sampled_ns);
  }
  return r;
}

std::string bw_header() {
  return " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
}

std::string bw_line(const BwResult& r) {
  return formatted(
      " %-10llu %-10llu     %-18.2f %-20.2f %-.6f", static_cast<unsigned long long>(r.size_bytes),
      static_cast<unsigned long long>(r.iterations), r.peak_gbps, r.avg_gbps, r.msg_rate_mpps);
}

std::string bw_json(const BwResult& r, TestKind test, uint32_t qps, bool bidirectional) {
  return formatted(
      "{\"test\":\"%s\",\"bytes\":%llu,\"iterations\":%llu,\"qps\":%u,"
      "\"bidirectional\":%s,\"bw_peak_gbps\":%.4f,\"bw_avg_gbps\":%.4f,"
      "\"msg_rate_mpps\":%.6f}",
      test_name(test), static_cast<unsigned long long>(r.size_bytes),
      static_cast<unsigned long long>(r.iterations), qps, bidirectional ? "true" : "false",
      r.peak_gbps, r.avg_gbps, r.msg_rate_mpps);
}

std::string lat_header() {
  return " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]"
         "    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]";
}

std::string lat_line(const LatResult& r) {
  return formatted(
      " %-7llu %-10llu     %-10.2f     %-10.2f   %-10.2f       %-10.2f     %-10.2f"
      "      %-10.2f             %-10.2f",
      static_cast<unsigned long long>(r.size_bytes), static_cast<unsigned long long>(r.iterations),
      r.min_us, r.max_us, r.typical_us, r.avg_us, r.stdev_us, r.p99_us, r.p999_us);
}

std::string lat_json(const LatResult& r, TestKind test) {
  return formatted(
      "{\"test\":\"%s\",\"bytes\":%llu,\"iterations\":%llu,\"t_min_us\":%.3f,"
      "\"t_max_us\":%.3f,\"t_typical_us\":%.3f,\"t_avg_us\":%.3f,\"t_stdev_us\":%.3f,"
      "\"t_p99_us\":%.3f,\"t_p999_us\":%.3f}",
      test_name(test), static_cast<unsigned long long>(r.size_bytes),
      static_cast<unsigned long long>(r.iterations), r.min_us, r.max_us, r.typical_us, r.avg_us,
      r.stdev_us, r.p99_us, r.p999_us);
}

std::string lat_duration_header() {
  return " #bytes        #iterations       t_avg[usec]    tps average";
}

std::string lat_duration_line(const LatDurationResult& r) {
  return formatted(" %-7llu       %llu            %-7.2f        %-7.2f",
                   static_cast<unsigned long long>(r.size_bytes),
                   static_cast<unsigned long long>(r.iterations), r.avg_us, r.tps);
}

void PeakMeter::start(uint64_t now_ns) {
  start_ns_ = window_start_ns_ = now_ns;
  window_bytes_ = total_bytes_ = best_bps_ = 0;
}

void PeakMeter::add(uint64_t now_ns, uint64_t bytes) {
  window_bytes_ += bytes;
  total_bytes_ += bytes;
  const uint64_t span = now_ns - window_start_ns_;
  if (span >= kPeakWindowNs) {
    const uint64_t bps =
        static_cast<uint64_t>(static_cast<double>(window_bytes_) * 8e9 / static_cast<double>(span));
    best_bps_ = std::max(best_bps_, bps);
    window_start_ns_ = now_ns;
    window_bytes_ = 0;
  }
}

uint64_t PeakMeter::peak_bps(uint64_t end_ns) const {
  if (best_bps_ != 0) return best_bps_;
  const uint64_t span = end_ns - start_ns_;
  if (span == 0) return 0;
  return static_cast<uint64_t>(static_cast<double>(total_bytes_) * 8e9 / static_cast<double>(span));
}

}  // namespace conduit::perf
