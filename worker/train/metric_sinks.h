#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "trainctl/v1/jobs.pb.h"
#include "trainctl/v1/spec.pb.h"
#include "worker/support/mlflow_sender.h"
#include "worker/support/tensorboard_writer.h"
#include "worker/train/models/model.h"
#include "worker/train/rank_context.h"

namespace trainctl::train {

// Where rank 0's train and eval metrics go besides the coordinator: a
// TensorBoard event file (tensorboard.dir) and the job's MLflow run
// (tracking.mlflow, worker/support/mlflow_run.h). Empty on other ranks and
// when the spec sets neither. Not thread-safe: the training thread's.
class MetricSinks {
 public:
  // Opens both before anything slow: a directory rank 0 cannot write or a
  // server it cannot reach fails the rank at once, naming the field. The
  // MLflow run is found or created (tracking.experiment, else the job's
  // name), the spec flattened into its params.
  static absl::StatusOr<MetricSinks> Open(const v1::JobSpec& spec, const RankContext& ctx);

  bool empty() const { return !tensorboard_ && !mlflow_; }

  // A train or eval point, tagged `<kind>/<key>`; other kinds are one-off
  // bookkeeping, not series. A failed TensorBoard write is said on stderr
  // and ends the event file; MLflow sends from its own thread.
  void Write(const v1::MetricPoint& point);

  // Rank 0 at the end of training: the MLflow run gets the model file
  // (model/model.safetensors, as trainctl export writes it) and ends
  // FINISHED; a stopped (preempted) job's run is left RUNNING, to resume
  // into. Failures are said on stderr; training's result stands.
  // `plan_facts`: the data's (normalize.from_data's statistics).
  void Finish(const v1::JobSpec& spec, const RankContext& ctx, Model& model, bool stopped,
              int64_t step, int epoch, const std::map<std::string, double>& eval,
              const std::map<std::string, double>& plan_facts);

 private:
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::unique_ptr<MlflowSender> mlflow_;  // ends its run FAILED if not finished
};

// The model file a finished job logs: the model's tensors and the metadata
// trainctl export writes (common/model_metadata.h).
absl::StatusOr<std::string> TrackedModelFile(const v1::JobSpec& spec, const RankContext& ctx,
                                             Model& model, int64_t step, int epoch,
                                             const std::map<std::string, double>& eval,
                                             const std::map<std::string, double>& plan_facts);

}  // namespace trainctl::train
