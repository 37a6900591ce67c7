// Wire-layer microbenchmarks: CRC-32 / ICRC throughput side by side with
// zlib's crc32() and DPDK's rte_net_crc_calc(RTE_NET_CRC32_ETH), and frame
// build/parse cost. Reports only; never decides pass/fail.
//
// DPDK's rte_net_crc picks its vector (PCLMULQDQ / AVX-512 VPCLMULQDQ)
// handlers only when EAL reports a max SIMD width of at least 128 bits, which
// it does only after rte_eal_init(); without EAL it silently stays scalar. So
// main() initialises EAL (no hugepages, no PCI, SIMD width up to 512 bits)
// before the run, and the scalar, SSE4.2/PCLMULQDQ and AVX-512/VPCLMULQDQ
// DPDK handlers are all measured (rte_net_crc_set_alg falls back to the next
// best when the CPU or the DPDK build lacks one).
//
// Every CRC benchmark computes an independent CRC of the buffer from a zero
// start each iteration (as per-packet ICRCs are), so all contenders are
// measured the same way: throughput of independent calls, not the latency of
// a dependent chain.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "wire/frame.h"
#include "wire/icrc.h"
#include "wire/psn.h"

#ifdef CONDUIT_BENCH_ZLIB
#include <zlib.h>
#endif
#ifdef CONDUIT_BENCH_DPDK
#include <rte_eal.h>
#include <rte_net_crc.h>
#include <unistd.h>

#include <string>
#endif

using namespace conduit::wire;

namespace {

std::vector<uint8_t> random_bytes(size_t n) {
  std::mt19937 rng(1);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// The sizes every fast CRC is measured at: short frames (16..256 B in 16-byte
// steps, plus lengths that are not whole 16-byte blocks) and 1 and 4 KiB.
// The table-driven contenders (ours and DPDK's scalar) only at 64 B, 1 and 4 KiB.
void crc_sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n = 16; n <= 256; n += 16) b->Arg(n);
  for (int64_t n : {20, 44, 60, 100, 132, 1024, 4096}) b->Arg(n);
}
void table_sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {64, 1024, 4096}) b->Arg(n);
}

template <uint32_t (*Fn)(uint32_t, std::span<const uint8_t>)>
void BM_Crc32(benchmark::State& state) {
  const auto buf = random_bytes(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    uint32_t crc = Fn(0, buf);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK_TEMPLATE(BM_Crc32, crc32_update)->Name("crc32/conduit")->Apply(crc_sizes);
BENCHMARK_TEMPLATE(BM_Crc32, crc32_update_slice8)->Name("crc32/conduit_slice8")->Apply(table_sizes);

#ifdef CONDUIT_BENCH_ZLIB
void BM_Crc32Zlib(benchmark::State& state) {
  const auto buf = random_bytes(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    uLong crc = crc32(0, buf.data(), static_cast<uInt>(buf.size()));
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Crc32Zlib)->Name("crc32/zlib")->Apply(crc_sizes);
#endif

#ifdef CONDUIT_BENCH_DPDK
bool g_eal_ok = false;

void BM_Crc32Dpdk(benchmark::State& state, rte_net_crc_alg alg) {
  const auto buf = random_bytes(static_cast<size_t>(state.range(0)));
  if (!g_eal_ok && alg != RTE_NET_CRC_SCALAR) {
    state.SkipWithError("EAL not initialised: DPDK would stay scalar");
    return;
  }
  rte_net_crc_set_alg(alg);
  // Correctness guard: DPDK and conduit must agree on the value.
  if (rte_net_crc_calc(buf.data(), static_cast<uint32_t>(buf.size()), RTE_NET_CRC32_ETH) !=
      crc32_update(0, buf)) {
    state.SkipWithError("rte_net_crc_calc disagrees with crc32_update");
    return;
  }
  for (auto _ : state) {
    uint32_t crc =
        rte_net_crc_calc(buf.data(), static_cast<uint32_t>(buf.size()), RTE_NET_CRC32_ETH);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK_CAPTURE(BM_Crc32Dpdk, scalar, RTE_NET_CRC_SCALAR)
    ->Name("crc32/dpdk_scalar")
    ->Apply(table_sizes);
BENCHMARK_CAPTURE(BM_Crc32Dpdk, sse42, RTE_NET_CRC_SSE42)
    ->Name("crc32/dpdk_sse42_pclmul")
    ->Apply(crc_sizes);
BENCHMARK_CAPTURE(BM_Crc32Dpdk, avx512, RTE_NET_CRC_AVX512)
    ->Name("crc32/dpdk_avx512_vpclmul")
    ->Apply(crc_sizes);
#endif

RoceHeader send_only() {
  RoceHeader h;
  h.bth.opcode = static_cast<uint8_t>(Opcode::kSendOnly);
  h.bth.dest_qp = 0xABC;
  h.bth.psn = 17;
  h.bth.ack_req = true;
  return h;
}

FrameAddr bench_addr() {
  FrameAddr a;
  a.src_ip = 0xC6120001;
  a.dst_ip = 0xC6120002;
  a.src_port = udp_sport_for_qp(0x11, 0xABC);
  a.dscp = 26;
  a.ecn = kEcnEct0;
  return a;
}

// ICRC of a whole SEND_ONLY frame with this payload size (masking included), over IPv4
// (icrc_ipv4) or IPv6 (icrc_ipv6: the traffic class, flow label and hop limit masked too).
void icrc_frame_bench(benchmark::State& state, bool ipv6) {
  const auto payload = random_bytes(static_cast<size_t>(state.range(0)));
  RoceHeader h = send_only();
  FrameAddr a = bench_addr();
  if (ipv6) {
    a.ipv6 = true;
    a.src_ip6 = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xc0, 0, 0x11};
    a.dst_ip6 = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xc0, 0, 0x12};
    a.flow_label = flow_label_for_qp(0x11, 0xABC);
  }
  std::vector<uint8_t> f(frame_bytes(h, payload.size(), false, ipv6));
  build_frame(f, a, h, PayloadGather(payload));
  const std::span<const uint8_t> dgram(f.data() + kEthHeaderBytes,
                                       f.size() - kEthHeaderBytes - kIcrcBytes);
  for (auto _ : state) {
    uint32_t crc = ipv6 ? icrc_ipv6(dgram) : icrc_ipv4(dgram);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(dgram.size()));
}
void BM_IcrcFrame(benchmark::State& state) { icrc_frame_bench(state, false); }
void BM_Icrc6Frame(benchmark::State& state) { icrc_frame_bench(state, true); }
BENCHMARK(BM_IcrcFrame)->Name("icrc/send_only_frame")->Arg(64)->Arg(1024)->Arg(4096);
BENCHMARK(BM_Icrc6Frame)->Name("icrc/send_only_frame_ipv6")->Arg(64)->Arg(1024)->Arg(4096);

void BM_BuildFrame(benchmark::State& state) {
  const auto payload = random_bytes(static_cast<size_t>(state.range(0)));
  RoceHeader h = send_only();
  const FrameAddr a = bench_addr();
  std::vector<uint8_t> f(frame_bytes(h, payload.size(), false));
  for (auto _ : state) {
    h.bth.psn = psn_next(h.bth.psn);
    BuildResult r = build_frame(f, a, h, PayloadGather(payload));
    benchmark::DoNotOptimize(r);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_BuildFrame)->Name("frame/build_send_only")->Arg(64)->Arg(1024)->Arg(4096);

void parse_bench(benchmark::State& state, bool verify_icrc) {
  const auto payload = random_bytes(static_cast<size_t>(state.range(0)));
  RoceHeader h = send_only();
  std::vector<uint8_t> f(frame_bytes(h, payload.size(), false));
  build_frame(f, bench_addr(), h, PayloadGather(payload));
  ParseOptions opt;
  opt.verify_icrc = verify_icrc;
  ParsedFrame pf;
  if (parse_frame(f, opt, pf) != DropReason::kNone) {
    state.SkipWithError("frame does not parse");
    return;
  }
  for (auto _ : state) {
    DropReason r = parse_frame(f, opt, pf);
    benchmark::DoNotOptimize(r);
    benchmark::DoNotOptimize(pf);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
void BM_ParseFrame(benchmark::State& state) { parse_bench(state, true); }
void BM_ParseFrameNoIcrc(benchmark::State& state) { parse_bench(state, false); }
BENCHMARK(BM_ParseFrame)->Name("frame/parse_send_only")->Arg(64)->Arg(1024)->Arg(4096);
BENCHMARK(BM_ParseFrameNoIcrc)->Name("frame/parse_send_only_no_icrc")->Arg(64)->Arg(4096);

void BM_BuildAck(benchmark::State& state) {
  RoceHeader h;
  h.bth.opcode = static_cast<uint8_t>(Opcode::kAcknowledge);
  h.aeth = Aeth::ack(1);
  const FrameAddr a = bench_addr();
  std::vector<uint8_t> f(frame_bytes(h, 0, false));
  for (auto _ : state) {
    h.bth.psn = psn_next(h.bth.psn);
    BuildResult r = build_frame(f, a, h, PayloadGather{});
    benchmark::DoNotOptimize(r);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_BuildAck)->Name("frame/build_ack");

}  // namespace

int main(int argc, char** argv) {
#ifdef CONDUIT_BENCH_DPDK
  // Minimal EAL: no hugepages, no PCI, no shared config, quiet.
  char prog[] = "wire_bench";
  char a1[] = "--no-huge";
  char a2[] = "-m";
  char a3[] = "64";
  char a4[] = "--no-pci";
  char a5[] = "--no-shconf";
  char a6[] = "--log-level=error";
  char a7[] = "-l";
  char a8[] = "0";
  // EAL caps SIMD at 256 bits by default, which keeps rte_net_crc off its
  // AVX-512 handlers; allow them so DPDK runs its best code.
  char a9[] = "--force-max-simd-bitwidth=512";
  char a10[] = "--no-telemetry";
  char* eal_argv[] = {prog, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, nullptr};
  g_eal_ok = rte_eal_init(11, eal_argv) >= 0;
  if (!g_eal_ok) std::fprintf(stderr, "wire_bench: rte_eal_init failed; DPDK vector CRC skipped\n");
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
#ifdef CONDUIT_BENCH_DPDK
  if (g_eal_ok) {
    // EAL leaves its (empty) runtime directory, /run/dpdk/rte, behind: remove it.
    const std::string runtime_dir = rte_eal_get_runtime_dir();
    rte_eal_cleanup();
    ::rmdir(runtime_dir.c_str());
  }
#endif
  return 0;
}
