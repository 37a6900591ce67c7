#include "cc/notification_point.h"

#include <catch2/catch.hpp>

using namespace conduit::cc;

TEST_CASE("NP: one CNP at once, then at most one per min_time_between_cnps") {
  NpParams p;
  p.min_time_between_cnps = 4;
  NotificationPoint np(p);
  CHECK(np.on_ce_marked(1000));  // first mark: CNP now
  CHECK_FALSE(np.on_ce_marked(2000));
  CHECK_FALSE(np.on_ce_marked(4999));
  CHECK(np.on_ce_marked(5000));  // 4 us after the last CNP
  CHECK_FALSE(np.on_ce_marked(5001));
  CHECK(np.on_ce_marked(100'000));  // after a quiet gap: at once
  CHECK(np.marks() == 6);
  CHECK(np.cnps() == 3);
}

TEST_CASE("NP: a steady stream of marks yields one CNP per interval") {
  NotificationPoint np(NpParams::paper());  // 50 us
  int cnps = 0;
  for (uint64_t t = 0; t < 1'000'000; t += 100) cnps += np.on_ce_marked(t) ? 1 : 0;
  CHECK(cnps == 20);  // 1 ms / 50 us
}

TEST_CASE("NP: an interval of zero sends a CNP for every mark") {
  NpParams p;
  p.min_time_between_cnps = 0;
  NotificationPoint np(p);
  for (int i = 0; i < 5; ++i) CHECK(np.on_ce_marked(7));
}

TEST_CASE("NP: a mark stamped before the last CNP is inside the interval") {
  NpParams p;
  p.min_time_between_cnps = 4;
  NotificationPoint np(p);
  CHECK(np.on_ce_marked(10'000));
  CHECK_FALSE(np.on_ce_marked(9'000));  // an older timestamp: no second CNP
  CHECK_FALSE(np.on_ce_marked(13'999));
  CHECK(np.on_ce_marked(14'000));
  CHECK(np.cnps() == 2);
}

TEST_CASE("NP: the mlx5 preset spaces CNPs 2 us apart, as the brief's knob table and the policy") {
  // roce-dcqcn-brief.md: min_time_between_cnps 2 (firmware-dependent) us; config/POLICY.md
  // and policy::CnpSection default to 2us as well.
  CHECK(NpParams::mlx5_defaults().min_time_between_cnps == 2);
  CHECK(NpParams{}.min_time_between_cnps == 2);
  CHECK(NpParams::paper().min_time_between_cnps == 50);
}

TEST_CASE("NP: a CNP that could not be sent does not hold the next mark's CNP back") {
  NpParams p;
  p.min_time_between_cnps = 4;
  NotificationPoint np(p);
  CHECK(np.on_ce_marked(10'000));
  np.cnp_not_sent();  // e.g. the sender's MAC not resolved yet, or no buffer
  CHECK(np.cnps() == 0);
  CHECK(np.on_ce_marked(10'500));  // the next mark asks again at once
  CHECK_FALSE(np.on_ce_marked(14'499));
  CHECK(np.on_ce_marked(14'500));  // spaced from the CNP that went
  CHECK(np.cnps() == 2);
  CHECK(np.marks() == 4);
  // Before any CNP went: the first mark after a failed one still sends at once.
  NotificationPoint fresh(p);
  CHECK(fresh.on_ce_marked(1'000));
  fresh.cnp_not_sent();
  CHECK(fresh.on_ce_marked(1'001));
}
