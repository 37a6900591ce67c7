// conduit's SPSC ring vs DPDK rte_ring (SP/SC, burst) vs
// boost::lockfree::spsc_queue, side by side in one run:
//   SameThread/<elem>/<queue>/<burst>             one thread enqueues then dequeues a burst
//   Throughput/<thread|process>/<elem>/<queue>/<burst>  both sides move bursts of 1 or 32
//   RoundTrip/<thread|process>/u64/<queue>        ping-pong of one uint64_t, time = round trip
// <elem> is u64 (8 B, what rte_ring is usually measured with) or wr128 (the
// real 128 B conduit_shm_send_wr, rte_ring's _elem API with esize 128).
// Every queue lives in the same memfd mapping; in the process variants a
// forked child maps the memfd again at its own address (as a client does).
// The consumer checks that every value arrives once and in order; a
// mismatch is reported in the "errors" counter (benchmarks never fail CI).
//
// rte_ring needs no EAL here: rte_ring_init() only fills the struct, and the
// enqueue/dequeue functions are inline, so the ring is placed in our own
// shared memory with rte_ring_get_memsize() bytes.
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "shm/entries.h"
#include "shm/spsc_ring.h"

#ifdef CONDUIT_BENCH_HAVE_RTE_RING
#include <rte_ring.h>
#endif
#ifdef CONDUIT_BENCH_HAVE_BOOST
#include <boost/lockfree/spsc_queue.hpp>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace {

constexpr uint32_t kSlots = 1024;
constexpr uint64_t kStop = ~uint64_t{0};

// Spin-wait step for every queue alike: pause, and after 256 empty polls in a
// row (about 6 µs on the 2-core EPYC VM) yield, so that on an oversubscribed
// machine the peer gets the core instead of both sides burning whole time
// slices. reset() after progress. The yields are counted: a row with many
// yields per item measures the scheduler, not the queue.
// With pinning (below) the two sides have a core each and only pause, as
// DPDK's own ring benchmarks do: a yield then only hands the core to some
// other process, and it hits the side that waits most, i.e. the faster one.
bool g_yield = true;

struct Backoff {
  uint32_t spins = 0;
  uint64_t yields = 0;
  void wait() {
    if (!g_yield || ++spins < 256) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else {
      spins = 0;
      ++yields;
      sched_yield();
    }
  }
  void reset() { spins = 0; }
};

// Optional pinning, CONDUIT_BENCH_PIN=<cpu of the measuring side>,<cpu of the
// peer>: keeps the two sides on different cores, which then spin without
// yielding. Unset: the scheduler places them and waiting sides yield (the
// default, as in runs A-C).
struct PinSpec {
  int self = -1;
  int peer = -1;
};
PinSpec pin_spec() {
  PinSpec p;
  if (const char* env = std::getenv("CONDUIT_BENCH_PIN")) {
    if (std::sscanf(env, "%d,%d", &p.self, &p.peer) != 2) p = PinSpec{};
  }
  return p;
}
void pin_to(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);  // 0 = the calling thread
}
void unpin() {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

// ---- per-interval timing, robust to preemption ----
//
// Google Benchmark's time is the mean over the whole loop, so a few time
// slices lost to other processes dominate it on a busy machine. The
// workloads therefore also time short intervals (one round trip, or a chunk
// of kChunkItems items) and report their median: the speed while both sides
// were actually running. Ticks are the TSC where there is one (a few cycles
// to read, the same for every queue), converted to ns over the whole loop.

inline uint64_t ticks() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
#endif
}

class TickClock {
 public:
  TickClock() : t0_(ticks()), c0_(std::chrono::steady_clock::now()) {}
  double ns_per_tick() const {
    const uint64_t dt = ticks() - t0_;
    const auto dc = std::chrono::steady_clock::now() - c0_;
    return dt == 0 ? 0.0 : std::chrono::duration<double, std::nano>(dc).count() / dt;
  }

 private:
  uint64_t t0_;
  std::chrono::steady_clock::time_point c0_;
};

// The q-quantile (0..1) of v, in ticks; reorders v.
double quantile(std::vector<uint64_t>& v, double q) {
  if (v.empty()) return 0.0;
  const auto k = static_cast<size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return static_cast<double>(v[k]);
}

// Throughput chunk: a multiple of both bursts, and a few times the ring, so
// that a chunk measures the steady rate rather than filling the ring.
constexpr uint64_t kChunkItems = 4096;

// ---- queue adapters: place() constructs in shared memory; Side attaches ----

// The sequence number each workload checks, for both element types.
inline uint64_t seq_of(uint64_t v) { return v; }
inline void set_seq(uint64_t& v, uint64_t s) { v = s; }
inline uint64_t seq_of(const conduit_shm_send_wr& w) { return w.wr_id; }
inline void set_seq(conduit_shm_send_wr& w, uint64_t s) { w.wr_id = s; }
template <class E>
const char* elem_name() {
  return sizeof(E) == 8 ? "u64" : "wr128";
}

template <class E>
struct ConduitRing {
  using Elem = E;
  static constexpr const char* kName = "conduit";
  static size_t bytes() { return sizeof(conduit_shm_ring_ctrl) + kSlots * sizeof(E); }
  static void place(void* mem) {
    new (mem) conduit_shm_ring_ctrl{};
    conduit::shm::reset_ring(static_cast<conduit_shm_ring_ctrl*>(mem), 0);
  }
  struct Side {
    explicit Side(void* mem)
        : ctrl(static_cast<conduit_shm_ring_ctrl*>(mem)),
          slots(reinterpret_cast<E*>(ctrl + 1)),
          p(ctrl, slots, kSlots, 0),
          c(ctrl, slots, kSlots, 0) {}
    uint32_t enq(const E* v, uint32_t n) { return p.enqueue_burst(v, n); }
    uint32_t deq(E* v, uint32_t n) { return c.dequeue_burst(v, n); }
    conduit_shm_ring_ctrl* ctrl;
    E* slots;
    conduit::shm::SpscProducer<E> p;
    conduit::shm::SpscConsumer<E> c;
  };
};

#ifdef CONDUIT_BENCH_HAVE_RTE_RING
template <class E>
struct RteRing {
  using Elem = E;
  static_assert(sizeof(E) % 4 == 0, "rte_ring elements are multiples of 4 bytes");
  static constexpr const char* kName = "rte_ring";
  static size_t bytes() {
    return static_cast<size_t>(rte_ring_get_memsize_elem(sizeof(E), kSlots));
  }
  static void place(void* mem) {
    if (rte_ring_init(static_cast<rte_ring*>(mem), "bench", kSlots,
                      RING_F_SP_ENQ | RING_F_SC_DEQ) != 0) {
      std::fprintf(stderr, "rte_ring_init failed\n");
      std::abort();
    }
  }
  struct Side {
    explicit Side(void* mem) : r(static_cast<rte_ring*>(mem)) {}
    uint32_t enq(const E* v, uint32_t n) {
      return rte_ring_sp_enqueue_burst_elem(r, v, sizeof(E), n, nullptr);
    }
    uint32_t deq(E* v, uint32_t n) {
      return rte_ring_sc_dequeue_burst_elem(r, v, sizeof(E), n, nullptr);
    }
    rte_ring* r;
  };
};
#endif

#ifdef CONDUIT_BENCH_HAVE_BOOST
template <class E>
struct BoostSpsc {
  using Elem = E;
  static constexpr const char* kName = "boost_spsc";
  // Compile-time capacity keeps the storage inside the object (no pointers),
  // so it works at different addresses in two processes.
  using Queue = boost::lockfree::spsc_queue<E, boost::lockfree::capacity<kSlots>>;
  static size_t bytes() { return sizeof(Queue); }
  static void place(void* mem) { new (mem) Queue(); }
  struct Side {
    explicit Side(void* mem) : q(static_cast<Queue*>(mem)) {}
    uint32_t enq(const E* v, uint32_t n) { return static_cast<uint32_t>(q->push(v, n)); }
    uint32_t deq(E* v, uint32_t n) { return static_cast<uint32_t>(q->pop(v, n)); }
    Queue* q;
  };
};
#endif

// ---- shared mapping: control block, then queue A, then queue B ----

struct Control {
  std::atomic<uint64_t> total{kStop};  // items the consumer must drain; set after the loop
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> peer_yields{0};
  std::atomic<uint32_t> ready{0};
};

constexpr size_t kQueueOffset = 4096;

struct Shared {
  int fd = -1;
  uint8_t* base = nullptr;
  size_t size = 0;
  size_t queue_stride = 0;
  Control* control() const { return reinterpret_cast<Control*>(base); }
  void* queue(int i) const { return base + kQueueOffset + i * queue_stride; }
};

template <class Q>
Shared make_shared_queues() {
  Shared s;
  s.queue_stride = (Q::bytes() + 4095) & ~size_t{4095};
  s.size = kQueueOffset + 2 * s.queue_stride;
  s.fd = memfd_create("spsc-bench", MFD_CLOEXEC);
  if (s.fd < 0 || ftruncate(s.fd, static_cast<off_t>(s.size)) != 0) std::abort();
  s.base =
      static_cast<uint8_t*>(mmap(nullptr, s.size, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd, 0));
  if (s.base == MAP_FAILED) std::abort();
  new (s.base) Control();
  Q::place(s.queue(0));
  Q::place(s.queue(1));
  return s;
}

void unmap(Shared& s) {
  munmap(s.base, s.size);
  close(s.fd);
}

// The child maps the memfd again so its addresses differ from the parent's.
Shared remap(const Shared& s) {
  Shared c = s;
  c.base =
      static_cast<uint8_t*>(mmap(nullptr, s.size, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd, 0));
  if (c.base == MAP_FAILED) _exit(3);
  return c;
}

// ---- the two workloads' far sides ----

template <class Q>
void drain(const Shared& s, uint32_t burst) {
  typename Q::Side q(s.queue(0));
  Control* ctl = s.control();
  typename Q::Elem buf[32];
  uint64_t expect = 0, errors = 0;
  ctl->ready.store(1, std::memory_order_release);
  Backoff backoff;
  for (;;) {
    const uint32_t got = q.deq(buf, burst);
    for (uint32_t i = 0; i < got; ++i) errors += seq_of(buf[i]) != expect++;
    if (got == 0) {
      if (expect == ctl->total.load(std::memory_order_acquire)) break;
      backoff.wait();
    } else {
      backoff.reset();
    }
  }
  ctl->peer_yields.store(backoff.yields, std::memory_order_relaxed);
  ctl->errors.store(errors, std::memory_order_release);
}

template <class Q>
void echo(const Shared& s) {
  typename Q::Side ping(s.queue(0));
  typename Q::Side pong(s.queue(1));
  s.control()->ready.store(1, std::memory_order_release);
  uint64_t v;
  Backoff backoff;
  for (;;) {
    while (ping.deq(&v, 1) == 0) backoff.wait();
    backoff.reset();
    if (v == kStop) break;
    while (pong.enq(&v, 1) == 0) backoff.wait();
  }
  s.control()->peer_yields.store(backoff.yields, std::memory_order_relaxed);
}

// Runs far(shared) in a thread or in a forked child; returns a joiner.
template <class Fn>
struct Peer {
  Peer(const Shared& s, bool process, Fn fn) : process_(process), pin_(pin_spec()) {
    if (process_) {
      pid_ = fork();
      if (pid_ == 0) {
        pin_to(pin_.peer);
        Shared mine = remap(s);
        fn(mine);
        _exit(0);
      }
    } else {
      thread_ = std::thread([s, fn, cpu = pin_.peer] {
        pin_to(cpu);
        fn(s);
      });
    }
    pin_to(pin_.self);
    Backoff backoff;
    while (s.control()->ready.load(std::memory_order_acquire) == 0) backoff.wait();
  }
  void join() {
    if (pin_.self >= 0) unpin();
    if (process_) {
      int status = 0;
      waitpid(pid_, &status, 0);
    } else {
      thread_.join();
    }
  }
  bool process_;
  PinSpec pin_;
  pid_t pid_ = -1;
  std::thread thread_;
};

// "yields": sched_yield calls of both sides per 1000 items (Throughput) or
// per round trip (RoundTrip). Near 0: the queues ran on two cores; large:
// the row measures time slices.
void set_yield_counter(benchmark::State& state, uint64_t yields, double per) {
  state.counters["yields"] = per > 0 ? static_cast<double>(yields) / per : 0.0;
}

template <class Q>
void BM_Throughput(benchmark::State& state, bool process) {
  const auto burst = static_cast<uint32_t>(state.range(0));
  Shared s = make_shared_queues<Q>();
  Peer peer(s, process, [burst](const Shared& sh) { drain<Q>(sh, burst); });
  typename Q::Side q(s.queue(0));
  uint64_t next = 0;
  typename Q::Elem buf[32]{};
  Backoff backoff;
  std::vector<uint64_t> chunks;
  chunks.reserve(static_cast<size_t>(state.max_iterations) * burst / kChunkItems + 1);
  const TickClock clock;
  uint64_t chunk_start = ticks();
  for (auto _ : state) {
    for (uint32_t i = 0; i < burst; ++i) set_seq(buf[i], next + i);
    uint32_t done = 0;
    while (done < burst) {
      const uint32_t put = q.enq(buf + done, burst - done);
      if (put == 0) {
        backoff.wait();
      } else {
        backoff.reset();
      }
      done += put;
    }
    next += burst;
    if (next % kChunkItems == 0) {
      const uint64_t now = ticks();
      chunks.push_back(now - chunk_start);
      chunk_start = now;
    }
  }
  const double ns_per_tick = clock.ns_per_tick();
  s.control()->total.store(next, std::memory_order_release);
  peer.join();
  state.SetItemsProcessed(static_cast<int64_t>(next));
  state.counters["errors"] = static_cast<double>(s.control()->errors.load());
  set_yield_counter(state, backoff.yields + s.control()->peer_yields.load(),
                    static_cast<double>(next) / 1000);
  // "rate_p50": items/s over the median chunk of kChunkItems items.
  const double chunk_ns = quantile(chunks, 0.5) * ns_per_tick;
  state.counters["rate_p50"] = chunk_ns > 0 ? kChunkItems * 1e9 / chunk_ns : 0.0;
  unmap(s);
}

template <class Q>
void BM_RoundTrip(benchmark::State& state, bool process) {
  Shared s = make_shared_queues<Q>();
  Peer peer(s, process, [](const Shared& sh) { echo<Q>(sh); });
  typename Q::Side ping(s.queue(0));
  typename Q::Side pong(s.queue(1));
  uint64_t next = 0, errors = 0, v = 0;
  Backoff backoff;
  std::vector<uint64_t> rtt;
  rtt.reserve(static_cast<size_t>(state.max_iterations));
  const TickClock clock;
  uint64_t last = ticks();
  for (auto _ : state) {
    while (ping.enq(&next, 1) == 0) backoff.wait();
    while (pong.deq(&v, 1) == 0) backoff.wait();
    const uint64_t now = ticks();
    rtt.push_back(now - last);
    last = now;
    backoff.reset();
    errors += v != next++;
  }
  const double ns_per_tick = clock.ns_per_tick();
  const uint64_t yields = backoff.yields;
  const uint64_t stop = kStop;
  while (ping.enq(&stop, 1) == 0) backoff.wait();
  peer.join();
  state.counters["errors"] = static_cast<double>(errors);
  set_yield_counter(state, yields + s.control()->peer_yields.load(), static_cast<double>(next));
  // Single round trips: median and 99th percentile, ns.
  state.counters["rtt_p50_ns"] = quantile(rtt, 0.5) * ns_per_tick;
  state.counters["rtt_p99_ns"] = quantile(rtt, 0.99) * ns_per_tick;
  unmap(s);
}

// One thread enqueues a burst and dequeues it again: the per-item cost of
// each queue's code with no cross-core traffic, which stays comparable even
// when the machine is too busy for the two-sided runs to be scheduled well.
template <class Q>
void BM_SameThread(benchmark::State& state) {
  const auto burst = static_cast<uint32_t>(state.range(0));
  Shared s = make_shared_queues<Q>();
  typename Q::Side q(s.queue(0));
  typename Q::Elem in[32]{}, out[32]{};
  uint64_t next = 0, errors = 0;
  for (auto _ : state) {
    for (uint32_t i = 0; i < burst; ++i) set_seq(in[i], next + i);
    const uint32_t put = q.enq(in, burst);
    const uint32_t got = q.deq(out, burst);
    errors += (put != burst) + (got != burst) + (seq_of(out[burst - 1]) != next + burst - 1);
    benchmark::DoNotOptimize(out);
    next += burst;
  }
  state.SetItemsProcessed(static_cast<int64_t>(next));
  state.counters["errors"] = static_cast<double>(errors);
  unmap(s);
}

// CONDUIT_BENCH_ITERATIONS=<n> fixes SameThread's iteration count, so that an
// instruction count (valgrind --tool=callgrind) divides into a cost per item.
template <class Q>
void register_same_thread() {
  auto* b =
      benchmark::RegisterBenchmark(
          ("SameThread/" + std::string(elem_name<typename Q::Elem>()) + "/" + Q::kName).c_str(),
          BM_SameThread<Q>)
          ->Arg(1)
          ->Arg(32);
  if (const char* env = std::getenv("CONDUIT_BENCH_ITERATIONS")) {
    if (const long n = std::strtol(env, nullptr, 10); n > 0) b->Iterations(n);
  }
}

template <class Q>
void register_throughput(bool process) {
  benchmark::RegisterBenchmark(("Throughput/" + std::string(process ? "process/" : "thread/") +
                                elem_name<typename Q::Elem>() + "/" + Q::kName)
                                   .c_str(),
                               [process](benchmark::State& st) { BM_Throughput<Q>(st, process); })
      ->Arg(1)
      ->Arg(32)
      ->UseRealTime();
}

template <class Q>
void register_round_trip(bool process) {
  benchmark::RegisterBenchmark(
      ("RoundTrip/" + std::string(process ? "process/" : "thread/") + "u64/" + Q::kName).c_str(),
      [process](benchmark::State& st) { BM_RoundTrip<Q>(st, process); })
      ->UseRealTime();
}

// Registers kind for every queue that was found, so that the queues of one
// workload sit next to each other in the output.
template <class E, class Fn>
void for_each_queue(Fn fn) {
  fn.template operator()<ConduitRing<E>>();
#ifdef CONDUIT_BENCH_HAVE_RTE_RING
  fn.template operator()<RteRing<E>>();
#endif
#ifdef CONDUIT_BENCH_HAVE_BOOST
  fn.template operator()<BoostSpsc<E>>();
#endif
}

}  // namespace

int main(int argc, char** argv) {
#ifndef CONDUIT_BENCH_HAVE_RTE_RING
  std::fprintf(stderr, "rte_ring: DPDK not found at configure time, skipped\n");
#endif
#ifndef CONDUIT_BENCH_HAVE_BOOST
  std::fprintf(stderr, "boost::lockfree::spsc_queue: Boost not found at configure time, skipped\n");
#endif
  g_yield = pin_spec().self < 0;
  for_each_queue<uint64_t>([]<class Q>() { register_same_thread<Q>(); });
  for_each_queue<conduit_shm_send_wr>([]<class Q>() { register_same_thread<Q>(); });
  for (bool process : {false, true}) {
    for_each_queue<uint64_t>([process]<class Q>() { register_throughput<Q>(process); });
    for_each_queue<conduit_shm_send_wr>([process]<class Q>() { register_throughput<Q>(process); });
    for_each_queue<uint64_t>([process]<class Q>() { register_round_trip<Q>(process); });
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
