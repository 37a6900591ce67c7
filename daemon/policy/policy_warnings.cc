#include "policy/policy_warnings.h"

namespace conduit::policy {

std::vector<std::string> policy_warnings(const Policy& p) {
  std::vector<std::string> out;
  const auto& lcores = p.daemon.lcores;
  if (lcores.size() > 1) {
    std::string unused;
    for (size_t i = 1; i < lcores.size(); ++i) {
      unused += (i > 1 ? ", " : "") + std::to_string(lcores[i]);
    }
    out.push_back("daemon.lcores lists " + std::to_string(lcores.size()) +
                  " lcores, but this conduitd runs one engine, on lcore " +
                  std::to_string(lcores.front()) + "; lcore" + (lcores.size() > 2 ? "s " : " ") +
                  unused + " stay" + (lcores.size() > 2 ? "" : "s") +
                  " unused (QPs are not sharded across engines yet)");
  }
  if (p.daemon.metrics) {
    out.push_back(
        "daemon.metrics_address is set, but this conduitd has no Prometheus endpoint: nothing "
        "listens there (the counters are in 'conduitctl stats --json')");
  }
  return out;
}

}  // namespace conduit::policy
