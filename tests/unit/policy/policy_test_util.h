// Helpers shared by the policy tests.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "policy/loader.h"

namespace conduit::policy::test {

// The two keys every policy needs.
inline constexpr std::string_view kPort =
    "port:\n"
    "  device: net_null0\n"
    "  address: 198.18.0.1/24\n";

inline LoadResult load(std::string_view text) { return load_policy_string(text, "t.yaml"); }

// Each error as "t.yaml:line:column: message".
inline std::vector<std::string> errors_of(std::string_view text) {
  std::vector<std::string> out;
  for (const auto& e : load(text).errors) out.push_back(e.to_string());
  return out;
}

}  // namespace conduit::policy::test
