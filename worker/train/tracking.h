#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "trainctl/v1/spec.pb.h"
#include "worker/support/mlflow_sender.h"
#include "worker/train/models/model.h"
#include "worker/train/rank_context.h"

namespace trainctl::train {

// Rank 0's MLflow run for `tracking.mlflow` (null on other ranks, or when
// unset): finds or creates the experiment (tracking.experiment, else the
// job's name) and the job's run, the spec flattened into its params. Before
// anything slow, as for tensorboard.dir: a server rank 0 cannot reach fails
// the rank at once, naming tracking.mlflow and the server.
absl::StatusOr<std::unique_ptr<MlflowSender>> OpenTracking(const v1::JobSpec& spec,
                                                           const RankContext& ctx);

// The model file a finished job logs as model/model.safetensors: the
// model's tensors and the metadata trainctl export writes
// (common/model_metadata.h). `plan_facts`: the data's (normalize_mean_C,
// normalize_std_C for normalize.from_data).
absl::StatusOr<std::string> TrackedModelFile(const v1::JobSpec& spec, const RankContext& ctx,
                                             Model& model, int64_t step, int epoch,
                                             const std::map<std::string, double>& eval,
                                             const std::map<std::string, double>& plan_facts);

}  // namespace trainctl::train
