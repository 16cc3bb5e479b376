// DescribePlacement (scheduler.h): a placement in words, for job events and
// dry runs, apart from the scheduler's decisions.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/scheduler.h"

namespace trainctl::coordinator {

std::string DescribePlacement(const std::vector<std::string>& rank_workers) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < rank_workers.size()) {
    size_t j = i;
    while (j + 1 < rank_workers.size() && rank_workers[j + 1] == rank_workers[i]) {
      ++j;
    }
    parts.push_back(i == j ? absl::StrCat(i, " on ", rank_workers[i])
                           : absl::StrCat(i, "-", j, " on ", rank_workers[i]));
    i = j + 1;
  }
  return absl::StrCat("ranks ", absl::StrJoin(parts, ", "));
}

}  // namespace trainctl::coordinator
