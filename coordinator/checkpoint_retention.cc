#include "coordinator/checkpoint_retention.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"

namespace trainctl::coordinator {

std::optional<double> BestByValue(const v1::Checkpoint& checkpoint,
                                  const v1::CheckpointSpec& spec) {
  if (spec.keep_best_by().empty()) return std::nullopt;
  std::string name = spec.keep_best_by();
  auto it = checkpoint.metrics().find(name);
  if (it == checkpoint.metrics().end()) {
    it = checkpoint.metrics().find(absl::StartsWith(name, "eval_")
                                       ? name.substr(5)
                                       : "eval_" + name);
  }
  if (it == checkpoint.metrics().end()) return std::nullopt;
  return it->second;
}

std::vector<int64_t> CheckpointsToPrune(
    const std::vector<v1::Checkpoint>& catalog, const v1::CheckpointSpec& spec) {
  std::vector<const v1::Checkpoint*> by_step;
  for (const auto& c : catalog) by_step.push_back(&c);
  std::sort(by_step.begin(), by_step.end(),
            [](const v1::Checkpoint* a, const v1::Checkpoint* b) {
              return a->step() < b->step();
            });
  std::set<int64_t> keep;
  const size_t n = by_step.size();
  const size_t keep_last =
      spec.keep_last() > 0 ? static_cast<size_t>(spec.keep_last()) : n;
  for (size_t i = n - std::min(n, std::max<size_t>(keep_last, 1)); i < n; ++i) {
    keep.insert(by_step[i]->step());
  }
  const bool lower_is_better = spec.keep_best_mode() == "min";
  std::optional<double> best;
  int64_t best_step = -1;
  for (const v1::Checkpoint* c : by_step) {
    const std::optional<double> value = BestByValue(*c, spec);
    if (!value) continue;
    // Ties go to the later checkpoint: more training for the same score.
    if (!best || (lower_is_better ? *value <= *best : *value >= *best)) {
      best = value;
      best_step = c->step();
    }
  }
  if (best) keep.insert(best_step);
  std::vector<int64_t> prune;
  for (const v1::Checkpoint* c : by_step) {
    if (keep.count(c->step()) == 0) prune.push_back(c->step());
  }
  return prune;
}

}  // namespace trainctl::coordinator
