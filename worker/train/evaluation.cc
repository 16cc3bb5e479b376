#include "worker/train/evaluation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/shard_plan.h"
#include "common/vocabulary.h"
#include "worker/support/eval_metrics.h"
#include "worker/support/rank_spread.h"

namespace trainctl::train {

namespace F = torch::nn::functional;

torch::Tensor TaskLoss(Task task, const torch::Tensor& outputs,
                       const torch::Tensor& targets) {
  if (task == Task::kLanguageModel) {
    return F::cross_entropy(outputs.reshape({-1, outputs.size(-1)}).to(torch::kFloat32),
                            targets.reshape(-1));
  }
  if (task == Task::kRegression) {
    return F::mse_loss(outputs.reshape(targets.sizes()).to(torch::kFloat32),
                       targets.to(torch::kFloat32));
  }
  return F::cross_entropy(outputs.to(torch::kFloat32), targets);
}

namespace {

// A confusion matrix bigger than this many classes is not gathered (its
// C * C counts would dwarf everything else an evaluation sends).
constexpr int64_t kMaxConfusionClasses = 64;

// Per-class counts of one rank's slice, on the device: row 0 true
// positives, row 1 predictions, row 2 labels, then (when asked) the
// confusion matrix, label-major. Sized on the first batch.
struct ClassTally {
  torch::Tensor counts;  // float64 [3 * C (+ C * C)]
  int64_t classes = 0;
  bool confusion = false;

  // index_add_ rather than bincount: no host sync on a GPU, and the labels
  // are below C (cross_entropy has checked them). Sums of ones are exact.
  void Add(const torch::Tensor& predicted, const torch::Tensor& labels) {
    const int64_t c = classes;
    const torch::Tensor ones = torch::ones({labels.size(0)}, counts.options());
    counts.narrow(0, 0, c).index_add_(0, labels, predicted.eq(labels).to(torch::kFloat64));
    counts.narrow(0, c, c).index_add_(0, predicted, ones);
    counts.narrow(0, 2 * c, c).index_add_(0, labels, ones);
    if (confusion) {
      counts.narrow(0, 3 * c, c * c).index_add_(0, labels * c + predicted, ones);
    }
  }
};

}  // namespace

std::map<std::string, double> Evaluate(Model& model, const Dataset& data,
                                       Task task, int rank,
                                       int world_size, int64_t batch_size,
                                       const torch::Device& device,
                                       RankCollectives& sync,
                                       const EvalOptions& options,
                                       std::vector<std::string>* confusion) {
  const auto start = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  model.SetTraining(false);
  const Range slice = EvalSlice(data.size(), rank, world_size);
  // Sums of the loss, of correct predictions (tokens for a language model)
  // and of top-k hits, kept on the device (float64) and read once at the
  // end, so a GPU is not stopped every batch; and the loss terms counted
  // (samples or tokens), known from the shapes.
  torch::Tensor sums = torch::zeros({3}, torch::dtype(torch::kFloat64).device(device));
  torch::Tensor loss_sum_d = sums[0], correct_d = sums[1], top_k_d = sums[2];
  ClassTally tally;
  double count = 0;
  int64_t top_k = 0;  // in use: below the model's class count
  for (int64_t begin = slice.begin; begin < slice.end; begin += batch_size) {
    std::vector<int64_t> indices(std::min(batch_size, slice.end - begin));
    std::iota(indices.begin(), indices.end(), begin);
    Batch batch = data.Gather(indices);
    torch::Tensor x = batch.inputs.to(device);
    for (auto& named : batch.more_inputs) named.second = named.second.to(device);
    torch::Tensor y = batch.targets.to(device);
    torch::Tensor out = model.Forward(x, batch.more_inputs).to(torch::kFloat32);
    if (task == Task::kLanguageModel) {
      loss_sum_d.add_(F::cross_entropy(out.reshape({-1, out.size(-1)}), y.reshape(-1),
                                       F::CrossEntropyFuncOptions().reduction(torch::kSum))
                          .to(torch::kFloat64));
      correct_d.add_(out.argmax(-1).eq(y).sum().to(torch::kFloat64));
      count += y.numel();
    } else if (task == Task::kRegression) {
      loss_sum_d.add_(F::mse_loss(out.reshape(y.sizes()), y.to(torch::kFloat32),
                                  F::MSELossFuncOptions().reduction(torch::kSum))
                          .to(torch::kFloat64) /
                      double(std::max<int64_t>(1, y.numel() / y.size(0))));
      count += y.size(0);
    } else {
      loss_sum_d.add_(F::cross_entropy(out, y,
                                       F::CrossEntropyFuncOptions().reduction(torch::kSum))
                          .to(torch::kFloat64));
      const torch::Tensor predicted = out.argmax(1);
      correct_d.add_(predicted.eq(y).sum().to(torch::kFloat64));
      if (tally.classes == 0) {
        tally.classes = out.size(1);
        tally.confusion = options.per_class && tally.classes <= kMaxConfusionClasses;
        tally.counts = torch::zeros(
            {3 * tally.classes + (tally.confusion ? tally.classes * tally.classes : 0)},
            torch::dtype(torch::kFloat64).device(device));
        if (options.top_k > 0 && options.top_k < tally.classes) top_k = options.top_k;
      }
      tally.Add(predicted, y);
      if (top_k > 0) {
        top_k_d.add_(std::get<1>(out.topk(top_k, 1))
                         .eq(y.unsqueeze(1))
                         .any(1)
                         .sum()
                         .to(torch::kFloat64));
      }
      count += y.size(0);
    }
  }
  model.SetTraining(true);
  const torch::Tensor host_sums = sums.cpu();
  const double loss_sum = host_sums[0].item<double>();
  const double correct = host_sums[1].item<double>();
  const double top_k_hits = host_sums[2].item<double>();
  const double eval_ms = std::chrono::duration<double, std::milli>(
                             std::chrono::steady_clock::now() - start)
                             .count();
  // One gather gives the exact totals and each rank's own figures (a rank
  // whose slice is empty knows no class count: 0).
  enum Column { kLossSum, kCorrect, kCount, kTopK, kLoss, kMs, kClasses, kTopKUsed };
  const double own_loss = count > 0 ? loss_sum / count : std::nan("");
  const std::vector<std::vector<double>> rows = sync.GatherScalars(
      {loss_sum, correct, count, top_k_hits, own_loss, eval_ms,
       double(tally.classes), double(top_k)});
  double totals[4] = {0, 0, 0, 0};
  int64_t classes = 0, top_k_used = 0;
  for (const auto& row : rows) {
    for (int c : {kLossSum, kCorrect, kCount, kTopK}) totals[c] += row[c];
    classes = std::max(classes, static_cast<int64_t>(row[kClasses]));
    top_k_used = std::max(top_k_used, static_cast<int64_t>(row[kTopKUsed]));
  }
  std::map<std::string, double> metrics;
  const double n = std::max(totals[kCount], 1e-12);
  metrics["eval_loss"] = totals[kLossSum] / n;
  if (task == Task::kClassification) {
    metrics["eval_accuracy"] = totals[kCorrect] / n;
    if (top_k_used > 0) {
      metrics[absl::StrCat("eval_top", top_k_used, "_accuracy")] = totals[kTopK] / n;
    }
  }
  if (task == Task::kLanguageModel) {
    metrics["eval_perplexity"] = std::exp(totals[kLossSum] / n);
    metrics["eval_token_accuracy"] = totals[kCorrect] / n;
  }
  if (task == Task::kClassification && classes > 0) {
    // Every rank sends counts sized for the largest class count (zeros
    // where it saw none), so the sums line up.
    const bool with_confusion = options.per_class && classes <= kMaxConfusionClasses;
    const size_t width = 3 * classes + (with_confusion ? classes * classes : 0);
    std::vector<double> mine(width, 0.0);
    if (tally.classes > 0) {
      const torch::Tensor host = tally.counts.cpu();
      const double* v = host.data_ptr<double>();
      for (int part = 0; part < 3; ++part) {
        for (int64_t c = 0; c < tally.classes; ++c) {
          mine[part * classes + c] = v[part * tally.classes + c];
        }
      }
      if (with_confusion && tally.confusion) {
        for (int64_t t = 0; t < tally.classes; ++t) {
          for (int64_t p = 0; p < tally.classes; ++p) {
            mine[3 * classes + t * classes + p] =
                v[3 * tally.classes + t * tally.classes + p];
          }
        }
      }
    }
    std::vector<double> total(width, 0.0);
    for (const auto& row : sync.GatherScalars(mine)) {
      for (size_t i = 0; i < width; ++i) total[i] += row[i];
    }
    ClassCounts counts;
    counts.true_positives.assign(total.begin(), total.begin() + classes);
    counts.predicted.assign(total.begin() + classes, total.begin() + 2 * classes);
    counts.labelled.assign(total.begin() + 2 * classes, total.begin() + 3 * classes);
    AddClassificationMetrics(counts, options.per_class, &metrics);
    if (with_confusion && confusion != nullptr) {
      *confusion = ConfusionMatrixLines(
          std::vector<double>(total.begin() + 3 * classes, total.end()),
          static_cast<int>(classes));
    }
  }
  // A rank whose slice scores apart from the others, or that evaluates
  // slowly, shows in these (a rank with an empty slice has no loss).
  const Spread loss = SpreadOf(rows, kLoss);
  if (loss.max_rank >= 0) {
    metrics["eval_loss_min"] = loss.min;
    metrics["eval_loss_max"] = loss.max;
  }
  AddSpread("eval_ms", SpreadOf(rows, kMs), &metrics);
  return metrics;
}

}  // namespace trainctl::train
