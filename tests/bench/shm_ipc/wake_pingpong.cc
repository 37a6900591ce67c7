// Wake-up cost of conduitd's wakeup channels against an eventfd (what they
// replaced), in one run: two threads ping-pong through one channel each way,
// each side poll(2)s and drains as conduit_wait_cq does, and the one-way time
// (half a round trip) is reported as p50 and p99 over N rounds.
//
//   bench_wake_pingpong [ROUNDS] [CPU_A CPU_B]   (default 20000, 0 0: one core)
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "shm/doorbell.h"

namespace {

namespace shm = conduit::shm;

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

template <class Wake>
void wait_one(const Wake& w) {
  pollfd p{w.fd(), POLLIN, 0};
  ::poll(&p, 1, 5);  // a missed kick costs 5 ms, and shows in p99
  w.drain();
}

// Channels: [0] a -> b, [1] b -> a; kick(i) / wait(i) on them.
template <class Kick, class Wait>
void run(const char* name, int rounds, int cpu_a, int cpu_b, Kick kick, Wait wait) {
  std::vector<double> us;
  us.reserve(static_cast<size_t>(rounds));
  std::thread b([&] {
    pin(cpu_b);
    for (int i = 0; i < rounds; ++i) {
      wait(0);
      kick(1);
    }
  });
  pin(cpu_a);
  for (int i = 0; i < rounds; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    kick(0);
    wait(1);
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        2);
  }
  b.join();
  std::sort(us.begin(), us.end());
  std::printf("%-34s cpu %d<->%d  one-way p50 %6.2f us  p99 %6.2f us\n", name, cpu_a, cpu_b,
              us[us.size() / 2], us[us.size() * 99 / 100]);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 20000;
  const int cpu_a = argc > 3 ? std::atoi(argv[2]) : 0;
  const int cpu_b = argc > 3 ? std::atoi(argv[3]) : 0;
  if (rounds <= 0) {
    std::fprintf(stderr, "usage: bench_wake_pingpong [ROUNDS] [CPU_A CPU_B]\n");
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  {
    shm::EventFd e[2];
    for (auto& x : e) shm::EventFd::create(&x);
    run(
        "eventfd (before)", rounds, cpu_a, cpu_b, [&](int i) { e[i].kick(); },
        [&](int i) { wait_one(e[i]); });
  }
  for (const auto kind : {shm::WakeFd::Kind::kPipe, shm::WakeFd::Kind::kSocket}) {
    shm::WakeFd w[2], r[2];
    for (int i = 0; i < 2; ++i) shm::WakeFd::create(kind, &w[i], &r[i]);
    run(
        kind == shm::WakeFd::Kind::kPipe ? "WakeFd pipe (conduitd -> client)"
                                         : "WakeFd socket (client -> conduitd)",
        rounds, cpu_a, cpu_b, [&](int i) { w[i].kick(); }, [&](int i) { wait_one(r[i]); });
  }
  return 0;
}
