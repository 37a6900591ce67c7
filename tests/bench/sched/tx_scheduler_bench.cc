// Per-packet cost of the pacer: enqueue + dequeue of one packet with N paced
// flows backlogged, driven the way the engine drives it (dequeue at now, else
// jump to next_wakeup_ns). Reports time per packet; decides nothing.
#include <benchmark/benchmark.h>

#include <vector>

#include "sched/tx_scheduler.h"

using namespace conduit::sched;

static void BM_PacedFlows(benchmark::State& state) {
  const auto n_flows = static_cast<uint32_t>(state.range(0));
  TxScheduler s;
  const ClassId c = s.add_class({});
  std::vector<FlowId> flows;
  // Aggregate 400 Gbit/s spread over the flows, 4 KiB packets.
  for (uint32_t i = 0; i < n_flows; ++i) flows.push_back(s.add_flow(c, 400'000'000'000 / n_flows));
  uint64_t now = 0;
  for (FlowId f : flows) s.enqueue(f, {4096, 0}, now);
  Departure d;
  for (auto _ : state) {
    while (!s.dequeue(now, &d)) now = s.next_wakeup_ns(now);
    s.enqueue(d.flow, {4096, 0}, now);  // keep it backlogged
    benchmark::DoNotOptimize(d);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PacedFlows)->Arg(1)->Arg(64)->Arg(1024)->Arg(16384);

static void BM_TwoClassesDwrr(benchmark::State& state) {
  TxScheduler s;
  const ClassId a = s.add_class({false, 0, 3, 0});
  const ClassId b = s.add_class({false, 0, 1, 0});
  const FlowId fa = s.add_flow(a, 1'000'000'000'000);
  const FlowId fb = s.add_flow(b, 1'000'000'000'000);
  uint64_t now = 0;
  s.enqueue(fa, {1024, 0}, now);
  s.enqueue(fb, {1024, 0}, now);
  Departure d;
  for (auto _ : state) {
    if (!s.dequeue(now, &d)) now = s.next_wakeup_ns(now);
    s.enqueue(d.flow, {1024, 0}, now);
    now += 8;  // a 1 KiB packet at ~1 Tbit/s of link
    benchmark::DoNotOptimize(d);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TwoClassesDwrr);

BENCHMARK_MAIN();
