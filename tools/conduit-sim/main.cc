// conduit-sim SCENARIO.yaml [--json FILE] [--csv DIR] [--seed N]
//
// Runs a DCQCN scenario through the real cc/ and sched/ code and prints a JSON
// summary (also written to FILE with --json). --csv writes rates.csv and
// queue.csv into DIR for scripts/plot-sim. --seed overrides the scenario's.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>

#include "scenario.h"
#include "simulator.h"

namespace {

int usage() {
  std::cerr << "usage: conduit-sim SCENARIO.yaml [--json FILE] [--csv DIR] [--seed N]\n";
  return 2;
}

bool write_csv(const std::string& dir, const conduit::sim::Trace& t) {
  std::ofstream r(dir + "/rates.csv");
  std::ofstream q(dir + "/queue.csv");
  if (!r || !q) return false;
  r << "time_us,flow,rate_bps,throughput_bps\n";
  for (const auto& s : t.rates) {
    r << static_cast<double>(s.time_ns) / 1000 << ',' << s.flow << ',' << s.rate_bps << ','
      << s.throughput_bps << '\n';
  }
  q << "time_us,queue_bytes\n";
  for (const auto& s : t.queue)
    q << static_cast<double>(s.time_ns) / 1000 << ',' << s.queue_bytes << '\n';
  return static_cast<bool>(r) && static_cast<bool>(q);
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenario_path;
  std::string json_path;
  std::string csv_dir;
  bool have_seed = false;
  uint64_t seed = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--json" || a == "--csv" || a == "--seed") && i + 1 < argc) {
      const std::string v = argv[++i];
      if (a == "--json") {
        json_path = v;
      } else if (a == "--csv") {
        csv_dir = v;
      } else {
        char* end = nullptr;
        seed = std::strtoull(v.c_str(), &end, 10);
        if (end == v.c_str() || *end != '\0') return usage();
        have_seed = true;
      }
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (!a.empty() && a[0] != '-' && scenario_path.empty()) {
      scenario_path = a;
    } else {
      return usage();
    }
  }
  if (scenario_path.empty()) return usage();

  conduit::sim::Scenario s;
  try {
    s = conduit::sim::load_scenario(scenario_path);
  } catch (const std::exception& e) {
    std::cerr << "conduit-sim: " << e.what() << "\n";
    return 1;
  }
  if (!have_seed) seed = s.seed;

  conduit::sim::Trace trace;
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  conduit::sim::Result r = conduit::sim::run(s, seed, csv_dir.empty() ? nullptr : &trace);
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.cpu_seconds = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;

  const std::string json = conduit::sim::to_json(s, seed, r);
  std::cout << json;
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << json;
    if (!f) {
      std::cerr << "conduit-sim: cannot write " << json_path << "\n";
      return 1;
    }
  }
  if (!csv_dir.empty() && !write_csv(csv_dir, trace)) {
    std::cerr << "conduit-sim: cannot write CSV files into " << csv_dir << "\n";
    return 1;
  }
  return 0;
}
