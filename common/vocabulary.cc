#include "common/vocabulary.h"

#include <array>
#include <utility>

namespace trainctl {
namespace {

// One table per vocabulary: the enum value and its word.
template <typename E, size_t N>
E Parse(const std::array<std::pair<E, const char*>, N>& table, std::string_view word, E other) {
  for (const auto& [value, name] : table) {
    if (word == name) return value;
  }
  return other;
}

template <typename E, size_t N>
const char* Name(const std::array<std::pair<E, const char*>, N>& table, E value) {
  for (const auto& [v, name] : table) {
    if (v == value) return name;
  }
  return "other";
}

constexpr std::array<std::pair<Task, const char*>, 3> kTasks = {{
    {Task::kClassification, "classification"},
    {Task::kLanguageModel, "language_model"},
    {Task::kRegression, "regression"},
}};

constexpr std::array<std::pair<ModelType, const char*>, 6> kModelTypes = {{
    {ModelType::kMlp, "mlp"},
    {ModelType::kCnn, "cnn"},
    {ModelType::kAudioCnn, "audio_cnn"},
    {ModelType::kTransformerClassifier, "transformer_classifier"},
    {ModelType::kGpt, "gpt"},
    {ModelType::kTorchScript, "torchscript"},
}};

constexpr std::array<std::pair<MetricKind, const char*>, 6> kMetricKinds = {{
    {MetricKind::kTrain, "train"},
    {MetricKind::kEval, "eval"},
    {MetricKind::kPlan, "plan"},
    {MetricKind::kFirstStep, "first_step"},
    {MetricKind::kCheckpoint, "checkpoint"},
    {MetricKind::kStraggler, "straggler"},
}};

constexpr std::array<std::pair<RankPhase, const char*>, 7> kRankPhases = {{
    {RankPhase::kStarting, "starting"},
    {RankPhase::kCompute, "compute"},
    {RankPhase::kAllReduce, "all-reduce"},
    {RankPhase::kOptimizer, "optimizer"},
    {RankPhase::kEvaluation, "evaluation"},
    {RankPhase::kCheckpoint, "checkpoint"},
    {RankPhase::kRegroup, "regroup"},
}};

}  // namespace

Task TaskOf(const v1::JobSpec& spec) {
  return spec.task().empty() ? Task::kClassification : Parse(kTasks, spec.task(), Task::kOther);
}
const char* TaskName(Task task) { return Name(kTasks, task); }

ModelType ModelTypeOf(const v1::ModelSpec& model) {
  return Parse(kModelTypes, model.type(), ModelType::kOther);
}
const char* ModelTypeName(ModelType type) { return Name(kModelTypes, type); }
const std::vector<std::string>& ModelTypeNames() {
  static const auto* names = [] {
    auto* out = new std::vector<std::string>;
    for (const auto& entry : kModelTypes) out->push_back(entry.second);
    return out;
  }();
  return *names;
}
bool IsConvNet(ModelType type) { return type == ModelType::kCnn || type == ModelType::kAudioCnn; }

MetricKind ParseMetricKind(std::string_view word) {
  return Parse(kMetricKinds, word, MetricKind::kOther);
}
const char* MetricKindName(MetricKind kind) { return Name(kMetricKinds, kind); }

RankPhase ParseRankPhase(std::string_view word) {
  return Parse(kRankPhases, word, RankPhase::kOther);
}
const char* RankPhaseName(RankPhase phase) { return Name(kRankPhases, phase); }

}  // namespace trainctl
