// config/conduitd.yaml is documentation that must keep loading.
#include <catch2/catch.hpp>

#include "policy/loader.h"
#include "policy/policy_dump.h"

using namespace conduit::policy;

TEST_CASE("config/conduitd.yaml loads cleanly") {
  LoadResult r = load_policy_file(CONDUIT_SOURCE_ROOT "/config/conduitd.yaml");
  INFO(r.error_text());
  REQUIRE(r.ok());
  const Policy& p = *r.policy;
  CHECK(p.port.device_kind == DeviceKind::kVdev);
  CHECK(p.traffic_classes.size() == 4);
  CHECK(p.default_class().name == "roce");
  // The example spells out the mlx5 preset knob by knob: same values.
  CHECK(p.default_class().congestion_control.dcqcn == dcqcn_preset(DcqcnPreset::kMlx5));
  const TrafficClass* bulk = p.find_class("bulk");
  REQUIRE(bulk != nullptr);
  CHECK(bulk->congestion_control.preset == DcqcnPreset::kPaper);
  CHECK(bulk->congestion_control.dcqcn.rpg_ai_rate_bps == 20'000'000);
  CHECK(p.transport.min_rnr_timer == 12);

  LoadResult again = load_policy_string(to_yaml(p), "dump");
  INFO(again.error_text());
  REQUIRE(again.ok());
  CHECK(*again.policy == p);
}
