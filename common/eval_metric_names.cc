#include "common/eval_metric_names.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/vocabulary.h"

namespace trainctl {
namespace {

constexpr const char* kPerClass[] = {"precision", "recall", "f1"};

// "f1_3" and the like, with eval_per_class.
bool IsPerClassName(absl::string_view name) {
  for (const char* base : kPerClass) {
    absl::string_view rest = name;
    if (!absl::ConsumePrefix(&rest, absl::StrCat("eval_", base, "_"))) continue;
    if (!rest.empty() && std::all_of(rest.begin(), rest.end(), [](char c) {
          return absl::ascii_isdigit(static_cast<unsigned char>(c));
        })) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::vector<std::string> EvalMetricNames(const v1::JobSpec& spec) {
  std::vector<std::string> names = {"eval_loss", "eval_loss_min",
                                    "eval_loss_max"};
  const Task task = TaskOf(spec);
  if (task == Task::kClassification) {
    for (const char* name : {"eval_accuracy", "eval_precision", "eval_recall",
                             "eval_f1"}) {
      names.push_back(name);
    }
    if (spec.training().eval_top_k() > 0) {
      names.push_back(
          absl::StrCat("eval_top", spec.training().eval_top_k(), "_accuracy"));
    }
    if (spec.training().eval_per_class()) {
      for (const char* base : kPerClass) {
        names.push_back(absl::StrCat("eval_", base, "_<class>"));
      }
    }
  } else if (task == Task::kLanguageModel) {
    names.push_back("eval_perplexity");
    names.push_back("eval_token_accuracy");
  }
  return names;
}

absl::Status CheckEvalMetricName(const v1::JobSpec& spec,
                                 const std::string& name) {
  const std::string full =
      absl::StartsWith(name, "eval_") ? name : absl::StrCat("eval_", name);
  const std::vector<std::string> names = EvalMetricNames(spec);
  if (std::find(names.begin(), names.end(), full) != names.end()) {
    return absl::OkStatus();
  }
  const bool classifier = TaskOf(spec) == Task::kClassification;
  if (classifier && spec.training().eval_per_class() && IsPerClassName(full)) {
    return absl::OkStatus();
  }
  std::string hint;
  if (classifier && !spec.training().eval_per_class() && IsPerClassName(full)) {
    hint = " (per-class scores need training.eval_per_class: true)";
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "'", name, "' is not an evaluation metric of a ", spec.task(), " job",
      hint, " (known: ", absl::StrJoin(names, ", "),
      "; the eval_ prefix is optional)"));
}

}  // namespace trainctl
