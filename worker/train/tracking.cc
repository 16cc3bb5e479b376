#include "worker/train/tracking.h"

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/model_metadata.h"
#include "common/spec.h"
#include "worker/train/model_export.h"

namespace trainctl::train {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

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
  options.start_unix_ms = NowMs();
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
