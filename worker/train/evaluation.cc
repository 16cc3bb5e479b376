#include "worker/train/evaluation.h"

#include <chrono>
#include <cmath>
#include <numeric>

#include "common/shard_plan.h"
#include "worker/train/rank_spread.h"

namespace trainctl::train {

namespace F = torch::nn::functional;

torch::Tensor TaskLoss(const std::string& task, const torch::Tensor& outputs,
                       const torch::Tensor& targets) {
  if (task == "language_model") {
    return F::cross_entropy(outputs.reshape({-1, outputs.size(-1)}).to(torch::kFloat32),
                            targets.reshape(-1));
  }
  if (task == "regression") {
    return F::mse_loss(outputs.reshape(targets.sizes()).to(torch::kFloat32),
                       targets.to(torch::kFloat32));
  }
  return F::cross_entropy(outputs.to(torch::kFloat32), targets);
}

std::map<std::string, double> Evaluate(Model& model, const Dataset& data,
                                       const std::string& task, int rank,
                                       int world_size, int64_t batch_size,
                                       const torch::Device& device,
                                       RankCollectives& sync) {
  const auto start = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  model.SetTraining(false);
  const Range slice = EvalSlice(data.size(), rank, world_size);
  // Sums of the loss and of correct predictions, kept on the device (float64)
  // and read once at the end, so a GPU is not stopped every batch; and the
  // loss terms counted (samples or tokens), known from the shapes.
  torch::Tensor sums = torch::zeros({2}, torch::dtype(torch::kFloat64).device(device));
  torch::Tensor loss_sum_d = sums[0], correct_d = sums[1];
  double count = 0;
  for (int64_t begin = slice.begin; begin < slice.end; begin += batch_size) {
    std::vector<int64_t> indices(std::min(batch_size, slice.end - begin));
    std::iota(indices.begin(), indices.end(), begin);
    Batch batch = data.Gather(indices);
    torch::Tensor x = batch.inputs.to(device);
    torch::Tensor y = batch.targets.to(device);
    torch::Tensor out = model.Forward(x).to(torch::kFloat32);
    if (task == "language_model") {
      loss_sum_d.add_(F::cross_entropy(out.reshape({-1, out.size(-1)}), y.reshape(-1),
                                       F::CrossEntropyFuncOptions().reduction(torch::kSum))
                          .to(torch::kFloat64));
      count += y.numel();
    } else if (task == "regression") {
      loss_sum_d.add_(F::mse_loss(out.reshape(y.sizes()), y.to(torch::kFloat32),
                                  F::MSELossFuncOptions().reduction(torch::kSum))
                          .to(torch::kFloat64) /
                      double(std::max<int64_t>(1, y.numel() / y.size(0))));
      count += y.size(0);
    } else {
      loss_sum_d.add_(F::cross_entropy(out, y,
                                       F::CrossEntropyFuncOptions().reduction(torch::kSum))
                          .to(torch::kFloat64));
      correct_d.add_(out.argmax(1).eq(y).sum().to(torch::kFloat64));
      count += y.size(0);
    }
  }
  model.SetTraining(true);
  const torch::Tensor host_sums = sums.cpu();
  const double loss_sum = host_sums[0].item<double>();
  const double correct = host_sums[1].item<double>();
  const double eval_ms = std::chrono::duration<double, std::milli>(
                             std::chrono::steady_clock::now() - start)
                             .count();
  // One gather gives the exact totals and each rank's own figures.
  enum Column { kLossSum, kCorrect, kCount, kLoss, kMs };
  const double own_loss = count > 0 ? loss_sum / count : std::nan("");
  const std::vector<std::vector<double>> rows =
      sync.GatherScalars({loss_sum, correct, count, own_loss, eval_ms});
  double totals[3] = {0, 0, 0};
  for (const auto& row : rows) {
    for (int c : {kLossSum, kCorrect, kCount}) totals[c] += row[c];
  }
  std::map<std::string, double> metrics;
  const double n = std::max(totals[kCount], 1e-12);
  metrics["eval_loss"] = totals[kLossSum] / n;
  if (task == "classification") metrics["eval_accuracy"] = totals[kCorrect] / n;
  if (task == "language_model") metrics["eval_perplexity"] = std::exp(totals[kLossSum] / n);
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
