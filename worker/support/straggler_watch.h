#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainctl::train {

// Finds a rank whose own work stays well above its peers'. In synchronous
// data parallelism every rank's step takes as long as the slowest one's
// (the others wait in the all-reduce), so a slow node costs the whole job;
// what singles it out is the time it spends loading data or computing.
//
// Fed, at each log step, every rank's mean data and compute time per step
// over the window since the last one (the all-gather the loop already
// does). A rank is a straggler in a phase once its time there has been
// above `ratio` times the median of the other ranks' (and at least
// `floor_ms` above it, so noise on tiny steps does not count) for
// `min_steps` steps in a row; it is reported once, then once again when it
// is back within the ratio. Pure: no clock, no I/O.
class StragglerWatch {
 public:
  enum class Phase { kData = 0, kCompute = 1 };
  struct Options {
    double ratio = 1.5;
    int64_t min_steps = 50;
    double floor_ms = 1.0;
  };
  struct Report {
    int rank = 0;
    Phase phase = Phase::kCompute;
    double ratio = 0;       // its time over the peers' median, this window
    int64_t steps = 0;      // steps in a row above the ratio (0: recovered)
    bool recovered = false;
  };
  // One rank's window: mean milliseconds per step.
  struct RankTimes {
    double data_ms = 0;
    double compute_ms = 0;
  };

  explicit StragglerWatch(Options options) : options_(options) {}

  // What changed with this window of `window_steps` steps: ranks that just
  // became stragglers, and stragglers that are back within the ratio.
  std::vector<Report> Observe(const std::vector<RankTimes>& ranks,
                              int64_t window_steps);

 private:
  struct State {
    int64_t slow_steps = 0;
    bool reported = false;
  };
  Options options_;
  std::vector<State> states_;  // [rank * 2 + phase]
};

// "data" or "compute".
const char* PhaseName(StragglerWatch::Phase phase);

}  // namespace trainctl::train
