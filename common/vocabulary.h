#pragma once

// The words that rank, coordinator and CLI share, as enums: a spec's task
// and model type, a metric point's kind and a rank's phase. The wire and
// the store keep the words (stored events, the JSON that scripts read and
// older peers send), so each is parsed here, in one place, and code
// compares enums. A word this build does not know maps to kOther. Only
// spec.proto is included: the spec fuzzer builds without the others.

#include <string>
#include <string_view>
#include <vector>

#include "trainctl/v1/spec.pb.h"

namespace trainctl {

// spec.task. An empty task is the spec's default, classification.
enum class Task { kClassification, kLanguageModel, kRegression, kOther };
Task TaskOf(const v1::JobSpec& spec);
const char* TaskName(Task task);

// model.type.
enum class ModelType { kMlp, kCnn, kAudioCnn, kTransformerClassifier, kGpt, kTorchScript, kOther };
ModelType ModelTypeOf(const v1::ModelSpec& model);
const char* ModelTypeName(ModelType type);
// Every known model type's word, in the order the spec's errors list them.
const std::vector<std::string>& ModelTypeNames();
// The built-in networks that read images or spectrograms with two conv blocks.
bool IsConvNet(ModelType type);

// MetricPoint.kind: what a rank (or the coordinator) reports.
enum class MetricKind {
  kTrain,       // a logged training step
  kEval,        // an evaluation
  kPlan,        // rank 0's plan at its start: data, model, memory
  kFirstStep,   // the first step is done (the first-step timeout ends)
  kCheckpoint,  // the coordinator's note of a cataloged checkpoint
  kStraggler,   // rank 0 names a slow rank, or one that is back
  kOther,
};
MetricKind ParseMetricKind(std::string_view word);
const char* MetricKindName(MetricKind kind);

// A rank's phase, as its heartbeat progress carries it. kStarting is 0: a
// rank's LoopPosition starts there.
enum class RankPhase {
  kStarting,
  kCompute,
  kAllReduce,
  kOptimizer,
  kEvaluation,
  kCheckpoint,
  kRegroup,  // in-place recovery: joining the next generation
  kOther,
};
RankPhase ParseRankPhase(std::string_view word);
const char* RankPhaseName(RankPhase phase);

}  // namespace trainctl
