#pragma once

// The data-dependent half of a dry run (core/dry_run.cc). The
// coordinator never opens user-named data files (security review H2): a
// worker counts the samples (ProbeDataRequest/ProbeDataResult on the agent
// stream, worker/agent/data_probe_handler.h) and these functions fold its
// answer into the plan that JobManager::DryRun made without data.

#include <cstdint>

#include "trainctl/v1/jobs.pb.h"
#include "trainctl/v1/spec.pb.h"
#include "trainctl/v1/workers.pb.h"

namespace trainctl::coordinator {

// What DryRun leaves in data_note (and, prefixed, the job's reason) until a
// worker's counts are applied.
inline constexpr char kDataNotCountedYet[] =
    "training samples are counted on a worker, where the data lives; none "
    "has answered";

// Optimizer steps of `train_samples` per epoch: epochs x floor(samples /
// (batch_size x grad_accum_steps)), capped by max_steps; as the ranks.
int64_t TotalStepsFromSamples(const v1::JobSpec& spec, int64_t train_samples);

// Fills the plan's shard sizes (train_samples, steps_per_epoch,
// dropped_per_epoch) and the job's total_steps from a worker's counts, or,
// when `result.error` is set, says in data_note and the job's reason why
// they are unknown. `dry_run` is DryRun's answer for the same spec.
void ApplyDataProbeResult(const v1::ProbeDataResult& result,
                          v1::SubmitJobResponse* dry_run);

}  // namespace trainctl::coordinator
