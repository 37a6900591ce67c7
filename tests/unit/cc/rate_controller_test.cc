#include "cc/rate_controller.h"

#include <catch2/catch.hpp>
#include <string>

#include "cc/dcqcn_rp.h"

using namespace conduit::cc;

TEST_CASE("make_controller builds each kind behind one interface") {
  ControllerConfig none{ControllerKind::kNone, 0, {}};
  auto c = make_controller(none, 100'000'000'000, 0);
  REQUIRE(c);
  CHECK(c->rate_bps() == 100'000'000'000);
  CHECK(c->on_cnp(10) == 100'000'000'000);
  CHECK(c->next_deadline_ns() == kNoDeadline);

  ControllerConfig fixed{ControllerKind::kFixed, 7'000'000'000, {}};
  c = make_controller(fixed, 100'000'000'000, 0);
  REQUIRE(c);
  CHECK(c->rate_bps() == 7'000'000'000);
  CHECK(c->on_cnp(10) == 7'000'000'000);
  CHECK(c->on_bytes_sent(20, 4096) == 7'000'000'000);
  CHECK(c->on_rtt_sample(20, 5000) == 7'000'000'000);
  fixed.fixed_rate_bps = 500'000'000'000;  // above the line rate: capped
  CHECK(make_controller(fixed, 100'000'000'000, 0)->rate_bps() == 100'000'000'000);

  ControllerConfig dcqcn{ControllerKind::kDcqcn, 0, DcqcnParams::paper()};
  c = make_controller(dcqcn, 40'000'000'000, 0);
  REQUIRE(c);
  CHECK(c->on_cnp(0) == 20'000'000'000);
  CHECK(c->next_deadline_ns() == 55'000);
  CHECK(c->on_timer(55'000) == 30'000'000'000);
}

TEST_CASE("make_controller rejects invalid configurations") {
  CHECK_FALSE(make_controller({ControllerKind::kNone, 0, {}}, 0, 0));
  CHECK_FALSE(make_controller({ControllerKind::kFixed, 0, {}}, 1'000'000'000, 0));
  DcqcnParams bad = DcqcnParams::paper();
  bad.rpg_min_dec_fac = 101;
  CHECK_FALSE(make_controller({ControllerKind::kDcqcn, 0, bad}, 1'000'000'000, 0));
}

TEST_CASE("validate names the offending knob") {
  CHECK(validate(DcqcnParams::paper()) == nullptr);
  CHECK(validate(DcqcnParams::mlx5_defaults()) == nullptr);
  auto msg = [](DcqcnParams p) { return std::string(validate(p)); };
  DcqcnParams p;
  p.rpg_time_reset = 0;
  CHECK(msg(p).find("rpg_time_reset") != std::string::npos);
  p = {};
  p.rpg_min_rate = 0;
  CHECK(msg(p).find("rpg_min_rate") != std::string::npos);
  p = {};
  p.rpg_max_rate = 0;
  CHECK(validate(p) == nullptr);
  p.rpg_max_rate = 0;
  p.rpg_min_rate = 100;
  p.rpg_max_rate = 50;
  CHECK(msg(p).find("rpg_max_rate") != std::string::npos);
  p = {};
  p.initial_alpha_value = 1025;
  CHECK(msg(p).find("initial_alpha_value") != std::string::npos);
  p = {};
  p.dce_tcp_g = 2000;
  CHECK(msg(p).find("dce_tcp_g") != std::string::npos);
  p = {};
  p.dce_tcp_rtt = 0;
  CHECK(msg(p).find("dce_tcp_rtt") != std::string::npos);
  p = {};
  p.rpg_threshold = 32;
  CHECK(msg(p).find("rpg_threshold") != std::string::npos);
  p = {};
  p.rpg_gd = 40;
  CHECK(msg(p).find("rpg_gd") != std::string::npos);

  NpParams np;
  CHECK(validate(np) == nullptr);
  np.cnp_dscp = 64;
  CHECK(std::string(validate(np)).find("cnp_dscp") != std::string::npos);
  np = {};
  np.cnp_802p_prio = 8;
  CHECK(std::string(validate(np)).find("cnp_802p_prio") != std::string::npos);
}

TEST_CASE("reconfigure_controller: in place for the same algorithm, a new one otherwise") {
  const uint64_t line = 100'000'000'000;
  ControllerConfig none{ControllerKind::kNone, 0, {}};
  auto c = make_controller(none, line, 0);
  REQUIRE(c);
  const RateController* first = c.get();
  // none -> fixed: both constant rates, taken in place.
  ControllerConfig fixed{ControllerKind::kFixed, 7'000'000'000, {}};
  REQUIRE(reconfigure_controller(c, fixed, line, 10));
  CHECK(c.get() == first);
  CHECK(c->rate_bps() == 7'000'000'000);
  // fixed -> dcqcn: a new controller, starting unlimited at the line rate.
  ControllerConfig dcqcn{ControllerKind::kDcqcn, 0, DcqcnParams::mlx5_defaults()};
  REQUIRE(reconfigure_controller(c, dcqcn, line, 20));
  CHECK(c.get() != first);
  CHECK(c->rate_bps() == line);
  // dcqcn after a cut -> dcqcn with other knobs: in place, the cut rate stays.
  const uint64_t cut = c->on_cnp(30);
  CHECK(cut < line);
  const RateController* rp = c.get();
  dcqcn.dcqcn.rpg_ai_rate = 20;
  REQUIRE(reconfigure_controller(c, dcqcn, line, 31));
  CHECK(c.get() == rp);
  CHECK(c->rate_bps() == cut);
  // Invalid: refused, the controller stays as it was.
  ControllerConfig bad = dcqcn;
  bad.dcqcn.rpg_time_reset = 0;
  CHECK_FALSE(reconfigure_controller(c, bad, line, 32));
  CHECK(c.get() == rp);
  ControllerConfig bad_fixed{ControllerKind::kFixed, 0, {}};
  CHECK_FALSE(reconfigure_controller(c, bad_fixed, line, 33));
  CHECK(c.get() == rp);
  CHECK(c->rate_bps() == cut);
}

TEST_CASE("validate refuses increase steps of 0 (a flow would stay below its ceiling for good)") {
  // With R_AI or R_HAI 0 the target rate stops growing in that phase: RC settles at RT
  // below the ceiling, the episode never ends, and every rpg_time_reset of a stalled
  // engine is one more loop step. The policy refuses both below 1mbit too.
  auto names = [](const DcqcnParams& p, const char* knob) {
    const char* why = validate(p);
    return why != nullptr && std::string(why).find(knob) != std::string::npos;
  };
  DcqcnParams p = DcqcnParams::mlx5_defaults();
  p.rpg_ai_rate = 0;
  CHECK(names(p, "rpg_ai_rate"));
  CHECK_FALSE(make_controller({ControllerKind::kDcqcn, 0, p}, 1'000'000'000, 0));
  p = DcqcnParams::mlx5_defaults();
  p.rpg_hai_rate = 0;
  CHECK(names(p, "rpg_hai_rate"));
  p.rpg_hai_rate = 1;
  p.rpg_ai_rate = 1;
  CHECK(validate(p) == nullptr);
}
