#include "worker/train/metric_sinks.h"

#include <cstdlib>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/model_metadata.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "common/vocabulary.h"
#include "worker/train/model_export.h"

namespace trainctl::train {
namespace {

// Rank 0's event file for TensorBoard, or null when the spec has none.
absl::StatusOr<std::unique_ptr<TensorBoardWriter>> OpenTensorBoard(
    const v1::JobSpec& spec, const RankContext& ctx) {
  if (ctx.rank != 0 || spec.tensorboard().dir().empty()) return nullptr;
  auto writer = TensorBoardWriter::Create(
      absl::StrCat(spec.tensorboard().dir(), "/", ctx.job_id),
      RealClock().NowUnixMs() / 1000, HostName());
  if (!writer.ok()) {
    return absl::Status(writer.status().code(),
                        absl::StrCat("tensorboard.dir: ", writer.status().message()));
  }
  return writer;
}

// Rank 0's MLflow run, or null when the spec has none.
absl::StatusOr<std::unique_ptr<MlflowSender>> OpenTracking(const v1::JobSpec& spec,
                                                           const RankContext& ctx) {
  const v1::TrackingSpec& tracking = spec.tracking();
  if (ctx.rank != 0 || tracking.mlflow().empty()) return nullptr;
  std::unique_ptr<HttpClient> http = MakeCurlHttpClient(
      MlflowHttpOptions([](const char* name) { return std::getenv(name); }));
  if (!http) {
    return absl::FailedPreconditionError(
        "tracking.mlflow: this trainctl-worker was built without libcurl, so it "
        "cannot reach an MLflow server; rebuild it with libcurl4-openssl-dev");
  }
  MlflowRun::Options options;
  options.server = tracking.mlflow();
  options.experiment = tracking.experiment().empty() ? spec.name() : tracking.experiment();
  options.job_id = ctx.job_id;
  options.job_name = spec.name();
  options.cluster = ctx.cluster;
  options.start_unix_ms = RealClock().NowUnixMs();
  options.params = FlattenForParams(JobSpecToJson(spec));
  absl::StatusOr<std::unique_ptr<MlflowRun>> run = MlflowRun::Open(*http, options);
  if (!run.ok()) {
    return absl::Status(run.status().code(),
                        absl::StrCat("tracking.mlflow: ", run.status().message()));
  }
  std::cerr << "tracking: MLflow run " << (*run)->run_id() << " in experiment "
            << (*run)->experiment_id() << ((*run)->resumed() ? " (resumed)" : "")
            << " on " << options.server << std::endl;
  return std::make_unique<MlflowSender>(
      std::move(http), *std::move(run),
      [](const std::string& warning) { std::cerr << warning << std::endl; });
}

}  // namespace

absl::StatusOr<MetricSinks> MetricSinks::Open(const v1::JobSpec& spec,
                                              const RankContext& ctx) {
  MetricSinks sinks;
  ASSIGN_OR_RETURN(sinks.tensorboard_, OpenTensorBoard(spec, ctx));
  ASSIGN_OR_RETURN(sinks.mlflow_, OpenTracking(spec, ctx));
  return sinks;
}

void MetricSinks::Write(const v1::MetricPoint& point) {
  const MetricKind kind = ParseMetricKind(point.kind());
  if (empty() || (kind != MetricKind::kTrain && kind != MetricKind::kEval)) return;
  std::map<std::string, double> tagged;
  for (const auto& [k, v] : point.values()) tagged[absl::StrCat(point.kind(), "/", k)] = v;
  if (mlflow_) mlflow_->Log(point.step(), point.time_unix_ms(), tagged);
  if (!tensorboard_) return;
  absl::Status written =
      tensorboard_->WriteScalars(point.step(), point.time_unix_ms() / 1000.0, tagged);
  if (!written.ok()) {
    std::cerr << "tensorboard: " << written.message()
              << "; no more event records for this run" << std::endl;
    tensorboard_.reset();
  }
}

void MetricSinks::Finish(const v1::JobSpec& spec, const RankContext& ctx, Model& model,
                         bool stopped, int64_t step, int epoch,
                         const std::map<std::string, double>& eval,
                         const std::map<std::string, double>& plan_facts) {
  if (!mlflow_) return;
  std::vector<std::pair<std::string, std::string>> artifacts;
  if (!stopped) {
    absl::StatusOr<std::string> file =
        TrackedModelFile(spec, ctx, model, step, epoch, eval, plan_facts);
    if (file.ok()) {
      artifacts.emplace_back("model/model.safetensors", *std::move(file));
    } else {
      std::cerr << "tracking.mlflow: the model file: " << file.status().message() << std::endl;
    }
  }
  absl::Status closed =
      mlflow_->Close(stopped ? "" : "FINISHED", artifacts, RealClock().NowUnixMs());
  if (!closed.ok()) std::cerr << closed.message() << std::endl;
  mlflow_.reset();
}

absl::StatusOr<std::string> TrackedModelFile(const v1::JobSpec& spec, const RankContext& ctx,
                                             Model& model, int64_t step, int epoch,
                                             const std::map<std::string, double>& eval,
                                             const std::map<std::string, double>& plan_facts) {
  v1::ImageTransformsSpec transforms = spec.data().transforms();
  if (transforms.normalize().from_data()) {
    v1::NormalizeSpec* normalize = transforms.mutable_normalize();
    for (int c = 0; plan_facts.count(absl::StrCat("normalize_mean_", c)); ++c) {
      normalize->add_mean(plan_facts.at(absl::StrCat("normalize_mean_", c)));
      normalize->add_std(plan_facts.at(absl::StrCat("normalize_std_", c)));
    }
  }
  return EncodeSafetensors(model.NamedState(),
                           ModelFileMetadata(spec, ctx.job_id, step, epoch, eval, transforms));
}

}  // namespace trainctl::train
