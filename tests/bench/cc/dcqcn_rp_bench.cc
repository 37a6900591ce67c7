// Cost of the DCQCN reaction point's per-packet and per-CNP paths.
#include <benchmark/benchmark.h>

#include "cc/dcqcn_rp.h"

using namespace conduit::cc;

static void BM_OnBytesSentLimited(benchmark::State& state) {
  DcqcnRp rp(DcqcnParams::mlx5_defaults(), 100'000'000'000, 0);
  uint64_t now = 0;
  rp.on_cnp(now);
  for (auto _ : state) {
    now += 40;  // 4 KiB at ~800 Gbit/s: the timer and byte counter both fire now and then
    benchmark::DoNotOptimize(rp.on_bytes_sent(now, 4096));
    if (!rp.rate_limited()) rp.on_cnp(now);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_OnBytesSentLimited);

static void BM_OnCnp(benchmark::State& state) {
  DcqcnRp rp(DcqcnParams::mlx5_defaults(), 100'000'000'000, 0);
  uint64_t now = 0;
  for (auto _ : state) {
    now += 5'000;  // past rate_reduce_monitor_period: every CNP cuts
    benchmark::DoNotOptimize(rp.on_cnp(now));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_OnCnp);

BENCHMARK_MAIN();
