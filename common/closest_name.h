#pragma once

#include <string>
#include <vector>

namespace trainctl {

// The candidate nearest to `word` by edit distance (insertions, deletions,
// substitutions and swaps of neighbours, each 1), when it is near enough to
// be a typo of it: at most 1 edit for words under 5 characters, 2 for
// longer ones. Empty when none is; the first of equally near ones.
// Case-sensitive.
std::string ClosestName(const std::string& word,
                        const std::vector<std::string>& candidates);

}  // namespace trainctl
