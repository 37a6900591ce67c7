#include "policy/suggest.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace conduit::policy {
namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// Optimal string alignment distance: Levenshtein plus adjacent transpositions,
// the commonest typo ("contorl").
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1])) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::optional<std::string> did_you_mean(std::string_view word,
                                        const std::vector<std::string_view>& candidates) {
  // Unbounded input (a fuzzed key) must not cost quadratic time.
  if (word.empty() || word.size() > 64) return std::nullopt;
  size_t limit = std::clamp<size_t>(word.size() / 3, 1, 3);
  std::optional<std::string> best;
  // Ranked by distance, then by length difference: "qbit" is a typo of
  // "gbit" rather than of "bit".
  std::pair<size_t, size_t> best_rank{limit + 1, 0};
  for (std::string_view c : candidates) {
    if (c.size() > word.size() + limit || word.size() > c.size() + limit) continue;
    size_t length_gap = c.size() > word.size() ? c.size() - word.size() : word.size() - c.size();
    std::pair<size_t, size_t> rank{edit_distance(word, c), length_gap};
    if (rank < best_rank) {
      best_rank = rank;
      best = std::string(c);
    }
  }
  return best;
}

}  // namespace conduit::policy
