#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "trainctl/v1/spec.pb.h"

namespace at {
class RecordFunction;
}

namespace trainctl::train {

// Traces steps [start_step, start_step + steps) of one rank with torch's
// profiler (Kineto: every operator on the host and, on a GPU, every kernel
// and copy with its stream time), and writes them as one Chrome trace
// (Perfetto, chrome://tracing, TensorBoard's profile plugin) to
// <dir>/<job id>/rank-<rank>-steps-<first>-<last>.json. Each step is a
// "trainctl step N" range in it. Off when spec.dir is empty.
//
// A trace is diagnostics: a profiler that cannot start or a file that cannot
// be written is said on `say` (the rank's stderr), never a failed step, as
// is the path of each file written. One profiler per process (torch's is
// process-wide): one per rank.
class StepProfiler {
 public:
  StepProfiler(const v1::ProfileSpec& spec, std::string job_id, int rank,
               std::ostream& say);
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  // Before step `step` runs: starts the trace at start_step.
  void BeforeStep(int64_t step);
  // After step `step` ran: after the last traced step, stops and writes the
  // file.
  void AfterStep(int64_t step);
  // The loop ended (early, or before the last traced step): writes what was
  // traced, if anything was.
  void Finish();

 private:
  absl::Status Start(int64_t step);
  absl::StatusOr<std::string> StopAndWrite();
  void Say(const absl::StatusOr<std::string>& written);

  v1::ProfileSpec spec_;
  std::string job_id_;
  int rank_;
  std::ostream& say_;
  bool tracing_ = false;
  int64_t first_traced_ = -1;
  int64_t last_traced_ = -1;
  std::unique_ptr<at::RecordFunction> step_range_;
};

}  // namespace trainctl::train
