#include "common/spec_outputs.h"

#include "absl/strings/match.h"

namespace trainctl {
namespace {

using Errors = std::vector<std::string>;

// Ranks write there, on their nodes, so a relative path would name a
// different place on each.
void CheckAbsolute(SpecReader& s, const std::string& dir) {
  if (!dir.empty() && dir.front() != '/') {
    s.Error(s.Path("dir"), "must be an absolute path (ranks run in the worker's "
                           "directory, not yours)");
  }
}

void ReadTensorBoard(SpecReader& top, v1::TensorBoardSpec* tb, Errors* errors) {
  SpecReader s(top.Child("tensorboard"), "tensorboard", errors);
  tb->set_dir(s.String("dir", ""));
  CheckAbsolute(s, tb->dir());
  s.RejectUnknown();
}

void ReadTracking(SpecReader& top, v1::TrackingSpec* tracking, Errors* errors) {
  SpecReader s(top.Child("tracking"), "tracking", errors);
  tracking->set_mlflow(s.String("mlflow", ""));
  const std::string& uri = tracking->mlflow();
  const bool http = absl::StartsWith(uri, "http://") || absl::StartsWith(uri, "https://");
  if (!uri.empty() && (!http || uri.size() > 2048 ||
                       uri.find_first_of(" \t\r\n") != std::string::npos)) {
    s.Error(s.Path("mlflow"), "must be the tracking server's http:// or https:// "
                              "address (as MLFLOW_TRACKING_URI), with no spaces");
  }
  tracking->set_experiment(s.String("experiment", ""));
  if (tracking->experiment().size() > 500) {
    s.Error(s.Path("experiment"), "must be at most 500 characters");
  }
  s.RejectUnknown();
}

// A trace of every operator and kernel grows by megabytes a step on a big
// model: a few steps are what anyone reads.
constexpr int kMaxProfiledSteps = 50;

void ReadProfile(SpecReader& top, v1::ProfileSpec* profile, Errors* errors) {
  SpecReader s(top.Child("profile"), "profile", errors);
  profile->set_dir(s.String("dir", ""));
  CheckAbsolute(s, profile->dir());
  // Past the first steps' warm-up (allocator, cuBLAS heuristics, caches).
  profile->set_start_step(s.Int("start_step", 10, 0, int64_t{1} << 40));
  profile->set_steps(static_cast<int32_t>(s.Int("steps", 3, 1, kMaxProfiledSteps)));
  s.RejectUnknown();
}

}  // namespace

void ReadOutputs(SpecReader& top, v1::JobSpec* spec, Errors* errors) {
  ReadTensorBoard(top, spec->mutable_tensorboard(), errors);
  ReadTracking(top, spec->mutable_tracking(), errors);
  ReadProfile(top, spec->mutable_profile(), errors);
}

}  // namespace trainctl
