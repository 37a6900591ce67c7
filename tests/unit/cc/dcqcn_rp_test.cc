#include "cc/dcqcn_rp.h"

#include <catch2/catch.hpp>
#include <cmath>

using namespace conduit::cc;

namespace {
constexpr uint64_t kG = 1'000'000'000;
constexpr uint64_t kM = 1'000'000;
constexpr uint64_t kUs = 1'000;
}  // namespace

TEST_CASE("paper preset: fast-recovery sequence 40 -> 20 -> 30, 35, 37.5, 38.75, 39.375 Gbit/s") {
  DcqcnRp rp(DcqcnParams::paper(), 40 * kG, 0);
  CHECK(rp.rate_bps() == 40 * kG);
  CHECK_FALSE(rp.rate_limited());
  CHECK(rp.next_deadline_ns() == kNoDeadline);

  CHECK(rp.on_cnp(0) == 20 * kG);
  CHECK(rp.target_rate_bps() == 40 * kG);
  const uint64_t expected[] = {30'000'000'000, 35'000'000'000, 37'500'000'000, 38'750'000'000,
                               39'375'000'000};
  uint64_t t = 0;
  for (uint64_t want : expected) {
    CHECK(rp.next_deadline_ns() == t + 55 * kUs);
    t = rp.next_deadline_ns();
    CHECK(rp.on_timer(t) == want);
  }
  CHECK(rp.time_stage() == 5);
}

TEST_CASE("a timer call early or late is harmless; late calls run every missed period") {
  DcqcnRp rp(DcqcnParams::paper(), 40 * kG, 0);
  rp.on_cnp(0);
  CHECK(rp.on_timer(54 * kUs) == 20 * kG);  // early: nothing due
  CHECK(rp.on_timer(3 * 55 * kUs) == 37'500'000'000);
  CHECK(rp.time_stage() == 3);
}

TEST_CASE("alpha decays with time constant K/g while no CNP arrives") {
  for (const auto& base : {DcqcnParams::paper(), DcqcnParams::mlx5_defaults()}) {
    DcqcnParams p = base;
    p.initial_alpha_value = 1024;
    p.rpg_time_reset = 10'000'000;  // keep the episode alive: no increases
    p.rpg_byte_reset = 0;
    DcqcnRp rp(p, 40 * kG, 0);
    rp.on_cnp(0);
    const double k_ns = p.dce_tcp_rtt * 1000.0;
    const double g = (1024.0 - p.dce_tcp_g) / 1024.0;
    // The period holding the CNP raises α: (1-g)·1 + g = 1.
    CHECK(rp.alpha(static_cast<uint64_t>(k_ns)) == Approx(1.0));
    // Then α(t) = (1-g)^((t-K)/K) ≈ exp(-(t-K)·g/K): after K/g it is ≈ 1/e.
    const auto tau_ns = static_cast<uint64_t>(k_ns / g);
    const double a = rp.alpha(static_cast<uint64_t>(k_ns) + tau_ns);
    CHECK(a == Approx(std::exp(-1.0)).epsilon(0.01));
    CHECK(rp.alpha(static_cast<uint64_t>(k_ns) + 2 * tau_ns) ==
          Approx(std::exp(-2.0)).epsilon(0.02));
  }
  // K/g is about 14 ms for the paper's 55 us and 1/256.
  const DcqcnParams paper = DcqcnParams::paper();
  CHECK(paper.dce_tcp_rtt * 1024.0 / (1024 - paper.dce_tcp_g) == Approx(14080.0));
}

TEST_CASE("alpha at a later cut reflects the decay") {
  DcqcnParams p = DcqcnParams::paper();
  p.rpg_time_reset = 10'000'000;
  p.rpg_byte_reset = 0;
  DcqcnRp rp(p, 40 * kG, 0);
  rp.on_cnp(0);  // 20 G, α = 1
  const uint64_t t = 55 * kUs * 101;
  const double a = rp.alpha(t);  // one raise then 100 decays
  CHECK(a == Approx(std::pow(1.0 - 1.0 / 256, 100)));
  const uint64_t before = rp.rate_bps();
  rp.on_cnp(t);
  CHECK(rp.rate_bps() == static_cast<uint64_t>(static_cast<double>(before) * (1.0 - a / 2)));
}

TEST_CASE("additive and hyper increase steps follow the stage counts") {
  DcqcnParams p = DcqcnParams::paper();  // F = 5, AI 40 Mb/s, HAI 200 Mb/s, B = 10 MB
  DcqcnRp rp(p, 100 * kG, 0);
  rp.on_cnp(0);        // RC 50 G, RT 100 G
  rp.on_cnp(1 * kUs);  // clamp: RT = 50 G, RC = 25 G (α still 1)
  REQUIRE(rp.target_rate_bps() == 50 * kG);
  REQUIRE(rp.rate_bps() == 25 * kG);
  const uint64_t b = uint64_t{p.rpg_byte_reset} * 64;

  // Byte stages 1..5: fast recovery, RT fixed.
  for (int i = 0; i < 5; ++i) {
    const uint64_t rc = rp.rate_bps();
    rp.on_bytes_sent(2 * kUs, b);
    CHECK(rp.target_rate_bps() == 50 * kG);
    CHECK(rp.rate_bps() == (50 * kG + rc + 1) / 2);
  }
  // Byte stage 6 > F, time stage 0: additive increase.
  rp.on_bytes_sent(2 * kUs, b);
  CHECK(rp.target_rate_bps() == 50 * kG + 40 * kM);
  // Time stages 1..5 with byte stage past F: still additive.
  uint64_t rt = rp.target_rate_bps();
  for (int i = 0; i < 5; ++i) {
    rp.on_timer(rp.next_deadline_ns());
    CHECK(rp.target_rate_bps() == rt + 40 * kM);
    rt = rp.target_rate_bps();
  }
  // Time stage 6: both past F, hyper increase.
  const uint64_t rc = rp.rate_bps();
  rp.on_timer(rp.next_deadline_ns());
  CHECK(rp.time_stage() == 6);
  CHECK(rp.target_rate_bps() == rt + 200 * kM);
  CHECK(rp.rate_bps() == (rt + 200 * kM + rc + 1) / 2);
}

TEST_CASE("timer-only increase: fast recovery up to F, then additive") {
  DcqcnParams p = DcqcnParams::mlx5_defaults();  // F = 1, AI 5 Mb/s
  p.rpg_byte_reset = 0;
  p.rate_reduce_monitor_period = 0;
  p.clamp_tgt_rate = true;
  DcqcnRp rp(p, 100 * kG, 0);
  rp.on_cnp(0);
  rp.on_cnp(1);
  const uint64_t rt = rp.target_rate_bps();
  rp.on_timer(rp.next_deadline_ns());
  CHECK(rp.target_rate_bps() == rt);  // stage 1 = F: fast recovery
  rp.on_timer(rp.next_deadline_ns());
  CHECK(rp.target_rate_bps() == rt + 5 * kM);
  rp.on_timer(rp.next_deadline_ns());
  CHECK(rp.target_rate_bps() == rt + 10 * kM);  // no hyper increase without the byte counter
}

TEST_CASE("rpg_min_rate is a floor") {
  DcqcnParams p = DcqcnParams::mlx5_defaults();
  p.rate_reduce_monitor_period = 0;
  DcqcnRp rp(p, 100 * kG, 0);
  for (uint64_t i = 0; i < 200; ++i) {
    rp.on_cnp(i * 10);
    CHECK(rp.rate_bps() >= 1 * kM);
  }
  CHECK(rp.rate_bps() == 1 * kM);
  p.rpg_min_rate = 250;
  DcqcnRp rp2(p, 100 * kG, 0);
  for (uint64_t i = 0; i < 200; ++i) rp2.on_cnp(i * 10);
  CHECK(rp2.rate_bps() == 250 * kM);
}

TEST_CASE("rpg_min_dec_fac limits one cut") {
  DcqcnParams p = DcqcnParams::paper();
  p.rpg_gd = 10;  // cut = α: with α = 1 the rate would go to zero
  p.rpg_min_dec_fac = 70;
  DcqcnRp rp(p, 40 * kG, 0);
  CHECK(rp.on_cnp(0) == 28 * kG);
  p.rpg_min_dec_fac = 0;
  DcqcnRp rp2(p, 40 * kG, 0);
  CHECK(rp2.on_cnp(0) == 100 * kM);  // only the floor is left
  p.rpg_gd = 12;                     // α/4 cut, factor 0.75 > 0.7: not binding
  p.rpg_min_dec_fac = 70;
  DcqcnRp rp3(p, 40 * kG, 0);
  CHECK(rp3.on_cnp(0) == 30 * kG);
}

namespace {
// Cut twice with one increase of the given kind in between; returns RT after
// the second cut.
uint64_t rt_after_second_cut(bool clamp, bool after_time_inc, int increase_kind) {
  DcqcnParams p = DcqcnParams::paper();
  p.clamp_tgt_rate = clamp;
  p.clamp_tgt_rate_after_time_inc = after_time_inc;
  DcqcnRp rp(p, 40 * kG, 0);
  rp.on_cnp(0);  // RC 20 G, RT 40 G
  uint64_t t = 1 * kUs;
  if (increase_kind == 1) {
    t = rp.next_deadline_ns();
    rp.on_timer(t);  // RC 30 G by the timer
  } else if (increase_kind == 2) {
    rp.on_bytes_sent(t, uint64_t{p.rpg_byte_reset} * 64);  // RC 30 G by the byte counter
  }
  REQUIRE(rp.rate_bps() == (increase_kind == 0 ? 20 * kG : 30 * kG));
  rp.on_cnp(t);
  return rp.target_rate_bps();
}
}  // namespace

TEST_CASE("clamp_tgt_rate = 1 clamps RT to RC on every CNP") {
  CHECK(rt_after_second_cut(true, false, 0) == 20 * kG);
  CHECK(rt_after_second_cut(true, false, 1) == 30 * kG);
  CHECK(rt_after_second_cut(true, false, 2) == 30 * kG);
}

TEST_CASE("clamp_tgt_rate = 0 clamps only after an increase; timer ones per the second knob") {
  // No increase since the last cut: RT keeps its value.
  CHECK(rt_after_second_cut(false, false, 0) == 40 * kG);
  CHECK(rt_after_second_cut(false, true, 0) == 40 * kG);
  // A byte-counter increase always clamps.
  CHECK(rt_after_second_cut(false, false, 2) == 30 * kG);
  CHECK(rt_after_second_cut(false, true, 2) == 30 * kG);
  // A timer increase clamps only with clamp_tgt_rate_after_time_inc.
  CHECK(rt_after_second_cut(false, false, 1) == 40 * kG);
  CHECK(rt_after_second_cut(false, true, 1) == 30 * kG);
}

TEST_CASE("rate_to_set_on_first_cnp sets RC and RT on the first CNP only") {
  DcqcnParams p = DcqcnParams::mlx5_defaults();
  p.rate_to_set_on_first_cnp = 1000;
  DcqcnRp rp(p, 100 * kG, 0);
  CHECK(rp.on_cnp(0) == 1 * kG);
  CHECK(rp.target_rate_bps() == 1 * kG);
  // The second CNP (past the monitor period) is a normal cut with α ≈ 1.
  const double a = rp.alpha(10 * kUs);
  CHECK(rp.on_cnp(10 * kUs) == static_cast<uint64_t>(1e9 * (1.0 - a / 2)));
  // 0 means a normal cut on the first CNP.
  p.rate_to_set_on_first_cnp = 0;
  DcqcnRp rp2(p, 100 * kG, 0);
  CHECK(rp2.on_cnp(0) == static_cast<uint64_t>(100e9 * (1.0 - 1023.0 / 2048)));
}

TEST_CASE("CNPs are coalesced to one cut per rate_reduce_monitor_period") {
  DcqcnParams p = DcqcnParams::mlx5_defaults();  // 4 us
  p.rpg_time_reset = 10'000;
  DcqcnRp rp(p, 100 * kG, 0);
  rp.on_cnp(0);
  const uint64_t after_first = rp.rate_bps();
  CHECK(rp.cuts() == 1);
  rp.on_cnp(1 * kUs);
  rp.on_cnp(2 * kUs);
  rp.on_cnp(3 * kUs);
  CHECK(rp.rate_bps() == after_first);
  CHECK(rp.cuts() == 1);
  CHECK(rp.cnps() == 4);
  CHECK(rp.next_deadline_ns() == 4 * kUs);  // the deferred cut
  rp.on_timer(4 * kUs);
  CHECK(rp.cuts() == 2);
  CHECK(rp.rate_bps() < after_first);
  CHECK(rp.next_deadline_ns() == 4 * kUs + 10'000 * kUs);  // only the increase timer now
  // Without CNPs in a period there is no cut.
  rp.on_timer(9 * kUs);
  CHECK(rp.cuts() == 2);
  // A CNP a full period after the last cut is acted on at once.
  rp.on_cnp(9 * kUs);
  CHECK(rp.cuts() == 3);
}

TEST_CASE("the episode ends at the maximum rate and the timers stop") {
  DcqcnRp rp(DcqcnParams::paper(), 40 * kG, 0);
  rp.on_cnp(0);
  int events = 0;
  while (rp.rate_limited() && events < 1000) {
    rp.on_timer(rp.next_deadline_ns());
    ++events;
  }
  CHECK_FALSE(rp.rate_limited());
  CHECK(rp.rate_bps() == 40 * kG);
  CHECK(rp.next_deadline_ns() == kNoDeadline);
  CHECK(events > 5);
  // A new episode starts with α = initial_alpha_value again.
  CHECK(rp.on_cnp(1'000'000'000) == 20 * kG);
}

TEST_CASE("rpg_max_rate caps the rate below the line rate") {
  DcqcnParams p = DcqcnParams::paper();
  p.rpg_max_rate = 10'000;
  DcqcnRp rp(p, 40 * kG, 0);
  CHECK(rp.rate_bps() == 10 * kG);
  CHECK(rp.on_cnp(0) == 5 * kG);
}

TEST_CASE("reconfigure keeps a congested flow's state and clamps it to the new bounds") {
  DcqcnRp rp(DcqcnParams::paper(), 40 * kG, 0);
  CHECK(rp.on_cnp(0) == 20 * kG);
  const double alpha = rp.alpha(10 * kUs);
  // New increase steps only: rate, target, alpha, stages and the timer carry over.
  DcqcnParams p = DcqcnParams::paper();
  p.rpg_ai_rate = 80;
  rp.reconfigure(p, 40 * kG, 10 * kUs);
  CHECK(rp.rate_bps() == 20 * kG);
  CHECK(rp.target_rate_bps() == 40 * kG);
  CHECK(rp.rate_limited());
  CHECK(rp.alpha(10 * kUs) == Approx(alpha));
  CHECK(rp.next_deadline_ns() == 55 * kUs);
  CHECK(rp.cuts() == 1);
  // A shorter timer period: the next increase comes no later than one new period away.
  p.rpg_time_reset = 20;
  rp.reconfigure(p, 40 * kG, 10 * kUs);
  CHECK(rp.next_deadline_ns() == 30 * kUs);
  // A floor above the current rate lifts it; the flow is still limited.
  p.rpg_min_rate = 30'000;
  rp.reconfigure(p, 40 * kG, 10 * kUs);
  CHECK(rp.rate_bps() == 30 * kG);
  CHECK(rp.target_rate_bps() == 40 * kG);
  CHECK(rp.rate_limited());
  // A ceiling at or below the current rate ends the episode: the flow runs at the ceiling.
  p.rpg_min_rate = 100;
  p.rpg_max_rate = 10'000;
  rp.reconfigure(p, 40 * kG, 10 * kUs);
  CHECK(rp.rate_bps() == 10 * kG);
  CHECK_FALSE(rp.rate_limited());
  CHECK(rp.next_deadline_ns() == kNoDeadline);
  // An unlimited flow follows the ceiling both ways.
  p.rpg_max_rate = 0;
  rp.reconfigure(p, 40 * kG, 20 * kUs);
  CHECK(rp.rate_bps() == 40 * kG);
}

TEST_CASE("a CNP stamped before the last cut is coalesced, not taken for a new period") {
  // Times come from the caller; one that reads its clock earlier than the cut's (a
  // caller's older timestamp) must not wrap now - last_cut into a huge gap and cut again.
  DcqcnParams p = DcqcnParams::mlx5_defaults();  // rate_reduce_monitor_period 4 us
  p.rpg_time_reset = 10'000;
  DcqcnRp rp(p, 100 * kG, 0);
  rp.on_cnp(10 * kUs);
  const uint64_t after_first = rp.rate_bps();
  rp.on_cnp(9 * kUs);
  CHECK(rp.cuts() == 1);
  CHECK(rp.rate_bps() == after_first);
  CHECK(rp.next_deadline_ns() == 14 * kUs);  // one deferred cut at the period's end
  rp.on_timer(14 * kUs);
  CHECK(rp.cuts() == 2);
}

TEST_CASE("a coalesced CNP still cuts when increases reach the ceiling before its period ends") {
  // A CNP inside rate_reduce_monitor_period is owed one cut at the period's end; the
  // flow climbing back to the ceiling in between must not drop it (mlx5 checks for CNPs
  // every period whatever the rate did meanwhile).
  DcqcnParams p = DcqcnParams::mlx5_defaults();
  p.rpg_min_dec_fac = 99;  // each cut keeps 99 %: 100 G -> 99 G
  p.rate_reduce_monitor_period = 100;
  p.rpg_time_reset = 1;
  p.rpg_byte_reset = 0;
  DcqcnRp rp(p, 100 * kG, 0);
  CHECK(rp.on_cnp(0) == 99 * kG);
  rp.on_cnp(500);         // coalesced: one cut owed at 100 us
  rp.on_timer(99 * kUs);  // fast recovery and additive increase reach 100 G by then
  CHECK(rp.rate_bps() == 100 * kG);
  rp.on_timer(100 * kUs);
  CHECK(rp.cuts() == 2);
  CHECK(rp.rate_bps() == 99 * kG);
  CHECK(rp.rate_limited());
  // With nothing owed, reaching the ceiling ends the episode as before.
  while (rp.rate_limited()) rp.on_timer(rp.next_deadline_ns());
  CHECK(rp.rate_bps() == 100 * kG);
  CHECK(rp.next_deadline_ns() == kNoDeadline);
}
