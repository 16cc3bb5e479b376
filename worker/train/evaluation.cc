#include "worker/train/evaluation.h"

#include <cmath>
#include <numeric>

#include "common/shard_plan.h"

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
  torch::NoGradGuard no_grad;
  model.SetTraining(false);
  const Range slice = EvalSlice(data.size(), rank, world_size);
  // Sums: loss, correct predictions, loss terms counted (samples or tokens).
  double loss_sum = 0, correct = 0, count = 0;
  for (int64_t begin = slice.begin; begin < slice.end; begin += batch_size) {
    std::vector<int64_t> indices(std::min(batch_size, slice.end - begin));
    std::iota(indices.begin(), indices.end(), begin);
    Batch batch = data.Gather(indices);
    torch::Tensor x = batch.inputs.to(device);
    torch::Tensor y = batch.targets.to(device);
    torch::Tensor out = model.Forward(x).to(torch::kFloat32);
    if (task == "language_model") {
      loss_sum += F::cross_entropy(out.reshape({-1, out.size(-1)}), y.reshape(-1),
                                   F::CrossEntropyFuncOptions().reduction(torch::kSum))
                      .item<double>();
      count += y.numel();
    } else if (task == "regression") {
      loss_sum += F::mse_loss(out.reshape(y.sizes()), y.to(torch::kFloat32),
                              F::MSELossFuncOptions().reduction(torch::kSum))
                      .item<double>() /
                  std::max<int64_t>(1, y.numel() / y.size(0));
      count += y.size(0);
    } else {
      loss_sum += F::cross_entropy(out, y,
                                   F::CrossEntropyFuncOptions().reduction(torch::kSum))
                      .item<double>();
      correct += out.argmax(1).eq(y).sum().item<double>();
      count += y.size(0);
    }
  }
  model.SetTraining(true);
  // AverageScalars returns means; the ratios of means equal ratios of sums.
  std::vector<double> totals = sync.AverageScalars({loss_sum, correct, count});
  std::map<std::string, double> metrics;
  const double n = std::max(totals[2], 1e-12);
  metrics["eval_loss"] = totals[0] / n;
  if (task == "classification") metrics["eval_accuracy"] = totals[1] / n;
  if (task == "language_model") metrics["eval_perplexity"] = std::exp(totals[0] / n);
  return metrics;
}

}  // namespace trainctl::train
