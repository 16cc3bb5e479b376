#include "worker/support/straggler_watch.h"

#include <algorithm>
#include <cmath>

namespace trainctl::train {
namespace {

double Of(const StragglerWatch::RankTimes& t, StragglerWatch::Phase phase) {
  return phase == StragglerWatch::Phase::kData ? t.data_ms : t.compute_ms;
}

// The median of every rank's value but `skip`'s; NaN with no other rank.
double PeersMedian(const std::vector<StragglerWatch::RankTimes>& ranks,
                   size_t skip, StragglerWatch::Phase phase) {
  std::vector<double> peers;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const double v = Of(ranks[r], phase);
    if (r != skip && std::isfinite(v)) peers.push_back(v);
  }
  if (peers.empty()) return NAN;
  const size_t mid = peers.size() / 2;
  std::nth_element(peers.begin(), peers.begin() + mid, peers.end());
  if (peers.size() % 2 == 1) return peers[mid];
  const double upper = peers[mid];
  return (upper + *std::max_element(peers.begin(), peers.begin() + mid)) / 2;
}

}  // namespace

const char* PhaseName(StragglerWatch::Phase phase) {
  return phase == StragglerWatch::Phase::kData ? "data" : "compute";
}

std::vector<StragglerWatch::Report> StragglerWatch::Observe(
    const std::vector<RankTimes>& ranks, int64_t window_steps) {
  std::vector<Report> reports;
  if (ranks.size() < 2 || window_steps <= 0) return reports;
  states_.resize(ranks.size() * 2);
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (Phase phase : {Phase::kData, Phase::kCompute}) {
      State& state = states_[r * 2 + static_cast<int>(phase)];
      const double mine = Of(ranks[r], phase);
      const double median = PeersMedian(ranks, r, phase);
      const bool slow = std::isfinite(mine) && std::isfinite(median) &&
                        mine > options_.ratio * median &&
                        mine - median >= options_.floor_ms;
      Report report;
      report.rank = static_cast<int>(r);
      report.phase = phase;
      report.ratio = median > 0 ? mine / median : 0;
      if (slow) {
        state.slow_steps += window_steps;
        if (!state.reported && state.slow_steps >= options_.min_steps) {
          state.reported = true;
          report.steps = state.slow_steps;
          reports.push_back(report);
        }
      } else {
        if (state.reported) {
          report.recovered = true;
          reports.push_back(report);
        }
        state = State();
      }
    }
  }
  return reports;
}

}  // namespace trainctl::train
