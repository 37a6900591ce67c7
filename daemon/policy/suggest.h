// "Did you mean ...?" for unknown keys, enum values and units.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conduit::policy {

// The candidate closest to word by case-insensitive edit distance, if it is
// close enough to be a likely typo (at most a third of the word's length,
// and at least 1, capped at 3 edits). Ties go to the earlier candidate.
std::optional<std::string> did_you_mean(std::string_view word,
                                        const std::vector<std::string_view>& candidates);

}  // namespace conduit::policy
