#include "common/closest_name.h"

#include <algorithm>

namespace trainctl {
namespace {

// Optimal string alignment distance (Damerau-Levenshtein without repeated
// edits of one substring).
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string ClosestName(const std::string& word,
                        const std::vector<std::string>& candidates) {
  // Long inputs are not names; the table would only cost time.
  if (word.empty() || word.size() > 64) return "";
  const size_t allowed = word.size() < 5 ? 1 : 2;
  std::string best;
  size_t best_distance = allowed + 1;
  for (const std::string& c : candidates) {
    if (c.size() > 64) continue;
    const size_t distance = EditDistance(word, c);
    if (distance < best_distance) {
      best = c;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace trainctl
