// The DCQCN targets, with the paper's constants at 40 Gbit/s,
// kmin 5 KB, kmax 200 KB, pmax 1 %, 1 MB buffer, over the last half of a
// 100 ms run. Runs are deterministic (seeded), so the asserted numbers are
// exact outcomes of the model; BENCHMARKS.md records the measured values.
#include <catch2/catch.hpp>
#include <fstream>
#include <stdexcept>
#include <string>

#include "scenario.h"
#include "simulator.h"

using namespace conduit::sim;

namespace {

std::string path(const std::string& name) {
  return std::string(CONDUIT_SIM_SCENARIOS) + "/" + name + ".yaml";
}

Result run_file(const std::string& name, uint64_t seed = 1) {
  const Scenario s = load_scenario(path(name));
  return run(s, seed, nullptr);
}

void print(const std::string& name, const Result& r) {
  // Shown in the test log: the numbers BENCHMARKS.md quotes.
  std::printf(
      "%s: utilization %.4f jain %.4f queue p50/p99/max %llu/%llu/%llu B drops %llu "
      "(window %llu) marks %llu cnps %llu events %llu\n",
      name.c_str(), r.utilization, r.jain_index, static_cast<unsigned long long>(r.queue_p50_bytes),
      static_cast<unsigned long long>(r.queue_p99_bytes),
      static_cast<unsigned long long>(r.queue_max_bytes), static_cast<unsigned long long>(r.drops),
      static_cast<unsigned long long>(r.drops_window), static_cast<unsigned long long>(r.marks),
      static_cast<unsigned long long>(r.cnps), static_cast<unsigned long long>(r.events));
}

}  // namespace

TEST_CASE("two DCQCN flows converge: utilization, fairness, queue, no drops", "[two-flow]") {
  const Result r = run_file("two-flow");
  print("two-flow", r);
  CHECK(r.utilization >= 0.95);
  CHECK(r.jain_index >= 0.98);
  CHECK(r.queue_p99_bytes <= 200'000);
  CHECK(r.drops == 0);
  CHECK(r.cnps > 0);  // DCQCN was exercised, not idle
}

TEST_CASE("16:1 incast with DCQCN: utilization, fairness, queue, no drops in the window",
          "[incast-16]") {
  const Result r = run_file("incast-16");
  print("incast-16", r);
  CHECK(r.utilization >= 0.95);
  CHECK(r.jain_index >= 0.98);
  CHECK(r.queue_p99_bytes <= 200'000);
  // 16 senders starting together at line rate overflow the 1 MB buffer in the
  // first round trip before any CNP can arrive; the window itself is clean.
  CHECK(r.drops_window == 0);
  CHECK(r.flows.size() == 16);
}

TEST_CASE("16:1 incast without congestion control drops or pins the queue", "[incast-16-none]") {
  const Result r = run_file("incast-16-none");
  print("incast-16-none", r);
  CHECK((r.drops > 0 || r.queue_p50_bytes + 1000 >= 1'000'000));
  CHECK(r.drops > 0);
  CHECK(r.queue_p50_bytes + 1000 >= 1'000'000);  // within one packet of the buffer
}

TEST_CASE("flows joining and leaving: the remaining flows share the link again", "[join-leave]") {
  const Result r = run_file("join-leave");
  print("join-leave", r);
  CHECK(r.utilization >= 0.95);
  CHECK(r.jain_index >= 0.98);
  CHECK(r.drops == 0);
  REQUIRE(r.flows.size() == 4);
  CHECK(r.flows[0].active_whole_window);
  CHECK_FALSE(r.flows[2].active_whole_window);
  CHECK(r.flows[2].throughput_bps == 0);  // stopped before the window
  CHECK(r.flows[2].delivered_bytes > 0);  // but did run
}

TEST_CASE("two traffic classes share the sender's NIC 3:1", "[two-classes]") {
  const Result r = run_file("two-classes");
  print("two-classes", r);
  REQUIRE(r.flows.size() == 2);
  const double total = static_cast<double>(r.flows[0].throughput_bps + r.flows[1].throughput_bps);
  CHECK(r.flows[0].throughput_bps / total == Approx(0.75).epsilon(0.02));
  CHECK(r.flows[1].throughput_bps / total == Approx(0.25).epsilon(0.02));
  CHECK(r.utilization >= 0.95);
}

TEST_CASE("a run is deterministic for a seed and the seed matters", "[determinism]") {
  const Scenario s = load_scenario(path("two-flow"));
  const Result a = run(s, 7, nullptr);
  const Result b = run(s, 7, nullptr);
  const Result c = run(s, 8, nullptr);
  CHECK(a.events == b.events);
  CHECK(a.marks == b.marks);
  CHECK(a.flows[0].throughput_bps == b.flows[0].throughput_bps);
  CHECK((a.marks != c.marks || a.events != c.events));
  Trace t;
  const Result d = run(s, 7, &t);
  CHECK(d.marks == a.marks);      // tracing does not perturb the run
  CHECK(t.queue.size() == 1001);  // 0, 100 us, ..., 100 ms
  CHECK(t.rates.size() == 2002);
}

namespace {
std::string load_error(const std::string& yaml) {
  const std::string p = "conduit_sim_bad_scenario.yaml";
  {
    std::ofstream f(p);
    f << yaml;
  }
  try {
    load_scenario(p);
  } catch (const std::runtime_error& e) {
    std::remove(p.c_str());
    return e.what();
  }
  std::remove(p.c_str());
  return "";
}
}  // namespace

TEST_CASE("bad scenarios are rejected with the key that is wrong", "[scenario-errors]") {
  const std::string ok = "duration_ms: 1\nflows: [{src: a, dst: b}]\n";
  CHECK(load_error(ok).empty());
  CHECK(load_error("flows: [{src: a, dst: b}]\n").find("duration_ms") != std::string::npos);
  CHECK(load_error(ok + "bogus: 1\n").find("bogus: unknown key") != std::string::npos);
  CHECK(load_error("duration_ms: -1\nflows: [{src: a, dst: b}]\n").find("out of range") !=
        std::string::npos);
  CHECK(load_error("duration_ms: 1\nflows: [{src: a, dst: a}]\n").find("differ") !=
        std::string::npos);
  CHECK(load_error(ok + "cc: {algorithm: reno}\n").find("cc.algorithm") != std::string::npos);
  CHECK(load_error(ok + "cc: {knobs: {rpg_foo: 1}}\n").find("cc.knobs.rpg_foo") !=
        std::string::npos);
  CHECK(load_error(ok + "cc: {knobs: {rpg_min_dec_fac: 200}}\n").find("rpg_min_dec_fac") !=
        std::string::npos);
  CHECK(load_error(ok + "switch: {kmin_bytes: 10, kmax_bytes: 5}\n").find("kmin") !=
        std::string::npos);
  CHECK(load_error("duration_ms: 1\nflows: [{src: a, dst: b, class: x}]\n").find("no class") !=
        std::string::npos);
  CHECK(load_error("duration_ms: [1\n").find("conduit_sim_bad_scenario.yaml") != std::string::npos);
  CHECK(load_error("duration_ms: 1\nflows: [{src: [a], dst: b}]\n").size() > 0);
  CHECK(load_error(ok + "steady_state_ms: [5, 2]\n").find("steady_state_ms") != std::string::npos);
}
