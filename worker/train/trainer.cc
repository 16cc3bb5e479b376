#include "worker/train/trainer.h"

#include <chrono>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/shard_plan.h"
#include "common/status_macros.h"
#include "worker/train/idx_dataset.h"
#include "worker/train/model.h"
#include "worker/train/optim.h"

namespace trainctl::train {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void AllReduceSum(const RankContext& ctx, torch::Tensor& buffer) {
  if (!ctx.group) return;
  std::vector<torch::Tensor> tensors{buffer};
  ctx.group->allreduce(tensors)->wait();
}

// Gradients of all parameters in one preallocated flat buffer, reduced in a
// single collective; one extra element carries the step's loss.
class GradientSync {
 public:
  explicit GradientSync(const std::vector<torch::Tensor>& params)
      : params_(params) {
    int64_t total = 0;
    for (const auto& p : params_) total += p.numel();
    buffer_ = torch::zeros({total + 1}, params_.front().options());
  }

  // Returns the global mean loss.
  double Reduce(const RankContext& ctx, const torch::Tensor& loss) {
    if (!ctx.group) return loss.item<double>();
    torch::NoGradGuard no_grad;
    int64_t offset = 0;
    for (const auto& p : params_) {
      buffer_.narrow(0, offset, p.numel()).copy_(p.grad().reshape(-1));
      offset += p.numel();
    }
    buffer_[offset].copy_(loss.detach());
    AllReduceSum(ctx, buffer_);
    buffer_.div_(ctx.world_size);
    offset = 0;
    for (auto& p : params_) {
      p.mutable_grad().copy_(
          buffer_.narrow(0, offset, p.numel()).view_as(p.grad()));
      offset += p.numel();
    }
    return buffer_[offset].item<double>();
  }

 private:
  std::vector<torch::Tensor> params_;
  torch::Tensor buffer_;
};

void BroadcastFromRankZero(const RankContext& ctx,
                           const std::vector<torch::Tensor>& params) {
  if (!ctx.group) return;
  torch::NoGradGuard no_grad;
  for (auto p : params) {
    std::vector<torch::Tensor> tensors{p};
    ctx.group->broadcast(tensors)->wait();
  }
}

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
};

EvalResult Evaluate(torch::nn::Sequential& model, const Dataset& data,
                    const RankContext& ctx, int64_t batch) {
  torch::NoGradGuard no_grad;
  model->eval();
  const Range slice = EvalSlice(data.size(), ctx.rank, ctx.world_size);
  double loss_sum = 0, correct = 0;
  for (int64_t begin = slice.begin; begin < slice.end; begin += batch) {
    const int64_t n = std::min(batch, slice.end - begin);
    torch::Tensor x = data.inputs.narrow(0, begin, n).to(ctx.device);
    torch::Tensor y = data.labels.narrow(0, begin, n).to(ctx.device);
    torch::Tensor logits = model->forward(x);
    loss_sum += torch::nn::functional::cross_entropy(
                    logits, y,
                    torch::nn::functional::CrossEntropyFuncOptions().reduction(
                        torch::kSum))
                    .item<double>();
    correct += logits.argmax(1).eq(y).sum().item<double>();
  }
  model->train();
  torch::Tensor totals = torch::tensor(
      {loss_sum, correct, static_cast<double>(slice.end - slice.begin)},
      torch::kFloat64);
  AllReduceSum(ctx, totals);
  const double count = totals[2].item<double>();
  return {totals[0].item<double>() / count, totals[1].item<double>() / count};
}

absl::StatusOr<TrainResult> TrainOrThrow(const v1::JobSpec& spec,
                                         const RankContext& ctx) {
  const auto& data_spec = spec.data();
  ASSIGN_OR_RETURN(Dataset train,
                   LoadIdx(data_spec.train_images(), data_spec.train_labels(),
                           data_spec.train_limit(), "data.train"));
  Dataset eval;
  const bool has_eval = !data_spec.eval_images().empty();
  if (has_eval) {
    ASSIGN_OR_RETURN(eval, LoadIdx(data_spec.eval_images(),
                                   data_spec.eval_labels(),
                                   data_spec.eval_limit(), "data.eval"));
  }
  const int64_t global_batch = spec.training().batch_size();
  const int64_t steps_per_epoch = StepsPerEpoch(train.size(), global_batch);
  if (steps_per_epoch == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.batch_size: ", global_batch, " is larger than the ",
        train.size(), " training samples"));
  }
  int64_t total_steps = steps_per_epoch * spec.training().epochs();
  if (spec.training().max_steps() > 0) {
    total_steps = std::min(total_steps, spec.training().max_steps());
  }
  const int64_t features = train.inputs[0].numel();
  const int64_t classes = 10;

  torch::nn::Sequential model;
  {
    // Initialisation draws from torch's global generator; ranks that share a
    // process (tests run them as threads) must not interleave their draws.
    static std::mutex init_mu;
    std::lock_guard<std::mutex> lock(init_mu);
    torch::manual_seed(spec.seed());
    ASSIGN_OR_RETURN(model, BuildModel(spec.model(), features, classes));
  }
  model->to(ctx.device);
  std::vector<torch::Tensor> params = model->parameters();
  BroadcastFromRankZero(ctx, params);
  auto optimizer = BuildOptimizer(spec.optimizer(), params);
  GradientSync sync(params);

  auto report = [&](const char* kind, int64_t step, int epoch,
                    std::map<std::string, double> values) {
    if (ctx.rank != 0 || !ctx.report) return;
    v1::MetricPoint point;
    point.set_kind(kind);
    point.set_step(step);
    point.set_epoch(epoch);
    point.set_rank(ctx.rank);
    point.set_time_unix_ms(NowMs());
    for (auto& [k, v] : values) (*point.mutable_values())[k] = v;
    ctx.report(point);
  };
  report("plan", 0, 0,
         {{"total_steps", static_cast<double>(total_steps)},
          {"steps_per_epoch", static_cast<double>(steps_per_epoch)},
          {"train_samples", static_cast<double>(train.size())},
          {"eval_samples", static_cast<double>(has_eval ? eval.size() : 0)}});

  TrainResult result;
  const int64_t log_every = spec.training().log_every_steps();
  auto window_start = std::chrono::steady_clock::now();
  int64_t window_steps = 0;
  int64_t step = 0;
  for (int epoch = 0; epoch < spec.training().epochs() && step < total_steps;
       ++epoch) {
    const std::vector<int64_t> perm =
        EpochPermutation(spec.seed(), epoch, train.size());
    for (int64_t s = 0; s < steps_per_epoch && step < total_steps; ++s) {
      std::vector<int64_t> indices = RankBatchIndices(
          perm, s, global_batch, ctx.rank, ctx.world_size);
      torch::Tensor index = torch::tensor(indices, torch::kInt64);
      torch::Tensor x = train.inputs.index_select(0, index).to(ctx.device);
      torch::Tensor y = train.labels.index_select(0, index).to(ctx.device);

      const double lr = ScheduledLr(spec.scheduler(), spec.optimizer().lr(),
                                    step, total_steps);
      SetLr(*optimizer, lr);
      optimizer->zero_grad();
      torch::Tensor loss =
          torch::nn::functional::cross_entropy(model->forward(x), y);
      loss.backward();
      const double global_loss = sync.Reduce(ctx, loss);
      optimizer->step();
      ++step;
      ++window_steps;
      result.final_train_loss = global_loss;
      if (step % log_every == 0 || step == total_steps) {
        const double seconds = std::chrono::duration<double>(
                                   std::chrono::steady_clock::now() -
                                   window_start)
                                   .count();
        report("train", step, epoch,
               {{"loss", global_loss},
                {"lr", lr},
                {"samples_per_sec",
                 seconds > 0 ? window_steps * global_batch / seconds : 0}});
        window_start = std::chrono::steady_clock::now();
        window_steps = 0;
      }
    }
    if (has_eval) {
      EvalResult e = Evaluate(model, eval, ctx, 1024);
      result.eval_accuracy = e.accuracy;
      result.eval_loss = e.loss;
      report("eval", step, epoch,
             {{"eval_loss", e.loss}, {"eval_accuracy", e.accuracy}});
    }
  }
  result.steps = step;
  for (const auto& p : params) result.parameters.push_back(p.detach().cpu());
  return result;
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
