#include "worker/train/trainer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/train/metric_sinks.h"
#include "worker/train/training_loop.h"

namespace trainctl::train {
namespace {

absl::StatusOr<TrainResult> TrainOrThrow(const v1::JobSpec& spec,
                                         const RankContext& ctx) {
  if (spec.training().precision() == "fp16" && !ctx.device.is_cuda()) {
    return absl::InvalidArgumentError(
        "training.precision: fp16 needs a CUDA device; use bf16 on CPU");
  }
  // Before anything slow: a directory rank 0 cannot write fails the job now.
  ASSIGN_OR_RETURN(MetricSinks sinks, MetricSinks::Open(spec, ctx));
  TrainingLoop loop(spec, ctx, std::move(sinks));
  RETURN_IF_ERROR(loop.Prepare());
  return loop.Run();
}

}  // namespace

absl::StatusOr<TrainResult> Train(const v1::JobSpec& spec,
                                  const RankContext& ctx) {
  try {
    return TrainOrThrow(spec, ctx);
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("training failed on rank ", ctx.rank, ": ", e.what()));
  }
}

}  // namespace trainctl::train
