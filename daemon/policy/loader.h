// Loading and validating conduitd.yaml.
//
// The loader reads the whole file, checks every key and value, and returns
// either a complete Policy or every problem it found (not just the first),
// each as "file:line:column: message" with 1-based positions. It never
// throws and never returns a partly valid policy, so a reload is:
//
//   LoadResult r = load_policy_file(path);
//   if (!r.ok()) { log(r.error_text()); /* keep running with the old policy */ }
//   else running = std::make_shared<const Policy>(std::move(*r.policy));
//
// Thread role: none; pure function of its input (load_policy_file reads the
// file with std::ifstream, nothing else).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.h"

namespace conduit::policy {

struct PolicyError {
  std::string file;     // the name given to the loader
  uint32_t line = 0;    // 1-based; 0 when the error has no position (unreadable file)
  uint32_t column = 0;  // 1-based
  std::string message;  // starts with the key path, e.g. "traffic_classes[1].dscp: ..."

  // "file:line:column: message", or "file: message" without a position.
  std::string to_string() const;
  bool operator==(const PolicyError&) const = default;
};

struct LoadResult {
  std::optional<Policy> policy;     // set exactly when errors is empty
  std::vector<PolicyError> errors;  // sorted by position; at most kMaxErrors + 1
  bool unreadable = false;          // the file could not be opened or read (one error says why)

  bool ok() const { return policy.has_value(); }
  // All errors, one per line, each ending in '\n'.
  std::string error_text() const;
};

// Reporting stops after this many errors (one more line says so).
inline constexpr size_t kMaxErrors = 50;
// Larger files are rejected unread: a policy is a few kilobytes.
inline constexpr size_t kMaxPolicyFileBytes = 1 << 20;

// Reads and validates the file at path; errors name the file as given.
LoadResult load_policy_file(const std::string& path);

// Validates YAML text; `name` stands for the file name in errors.
LoadResult load_policy_string(std::string_view text, std::string_view name = "<string>");

}  // namespace conduit::policy
