// Fuzz target: any bytes through the policy loader. The loader must not
// crash, must return either a policy or errors (never both, never neither),
// and a policy it accepts must be valid, give one-line warnings, differ from
// itself in nothing, and survive dump + reload unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string_view>

#include "policy/loader.h"
#include "policy/policy_diff.h"
#include "policy/policy_dump.h"
#include "policy/policy_warnings.h"

using namespace conduit::policy;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

void check_valid(const Policy& p) {
  require(!p.port.device.empty());
  require(p.port.prefix_len >= 1 && p.port.prefix_len <= 32);
  // A host of its subnet: not its network or broadcast address (unless /31 or /32).
  const uint32_t host_bits = p.port.prefix_len >= 32 ? 0 : ~0u >> p.port.prefix_len;
  require(p.port.prefix_len >= 31 || ((p.port.address.value & host_bits) != 0 &&
                                      (p.port.address.value & host_bits) != host_bits));
  require(p.port.roce_udp_port != p.port.cm_udp_port);
  require(!p.daemon.lcores.empty());
  require(!p.traffic_classes.empty() && p.traffic_classes.size() <= 16);
  std::set<std::string_view> names;
  std::set<int> dscps;
  int defaults = 0;
  for (const TrafficClass& tc : p.traffic_classes) {
    require(names.insert(tc.name).second);
    require(dscps.insert(tc.dscp).second);
    require(tc.dscp < 64 && tc.dscp != p.cnp.dscp && tc.priority < 8);
    require(tc.strict || (tc.weight >= 1 && tc.weight <= 1000));
    if (tc.congestion_control.algorithm == CcAlgorithm::kFixed) {
      require(tc.congestion_control.fixed_rate_bps > 0);
    }
    defaults += tc.is_default ? 1 : 0;
  }
  require(defaults == 1);
  uint32_t pmtu = p.transport.pmtu_bytes;
  require(pmtu >= 256 && pmtu <= 4096 && (pmtu & (pmtu - 1)) == 0);
  require(pmtu + 64 <= p.port.mtu_bytes);
  require(p.clients.quotas.max_region_bytes <= p.clients.quotas.max_registered_bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  LoadResult r = load_policy_string(text, "fuzz.yaml");
  require(r.ok() != !r.errors.empty());
  for (const PolicyError& e : r.errors) {
    require(!e.message.empty());
    require((e.line == 0) == (e.column == 0));
    require(e.to_string().find('\n') == std::string::npos);
  }
  if (r.ok()) {
    check_valid(*r.policy);
    // What conduitd and --check-config do with an accepted policy.
    for (const std::string& w : policy_warnings(*r.policy)) {
      require(!w.empty() && w.find('\n') == std::string::npos);
    }
    require(restart_required_changes(*r.policy, *r.policy).empty());
    LoadResult again = load_policy_string(to_yaml(*r.policy), "dump.yaml");
    require(again.ok() && *again.policy == *r.policy);
  }
  return 0;
}
