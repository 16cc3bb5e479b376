// TrainingLoop at the end of a step: the log window's train metric (every
// rank's own values in one all-gather, their spread, the straggler watch),
// the evaluation and the checkpoint.

#include <chrono>
#include <iostream>

#include "common/vocabulary.h"
#include "worker/support/rank_spread.h"
#include "worker/train/autocast_scope.h"
#include "worker/train/evaluation.h"
#include "worker/train/training_loop.h"

namespace trainctl::train {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// What every rank contributes at a log step, in this order (one all-gather):
// its own loss before averaging, and its view of the logging window.
constexpr const char* kRankValues[] = {"loss",         "step_ms",
                                       "samples_per_sec", "data_ms",
                                       "compute_ms",   "comm_ms",
                                       "optimizer_ms"};
enum RankValue { kLoss, kStepMs, kSamplesPerSec, kDataMs, kComputeMs, kCommMs,
                 kOptimizerMs, kNumRankValues };

// The train metric's cross-rank values from every rank's kRankValues.
// `loss` itself is left to the caller (it is the all-reduced mean).
void AddRankSpreads(const std::vector<std::vector<double>>& rows,
                    std::map<std::string, double>* values) {
  const Spread loss = SpreadOf(rows, kLoss);
  (*values)["loss_min"] = loss.min;
  (*values)["loss_max"] = loss.max;
  for (int v = kStepMs; v < kNumRankValues; ++v) {
    AddSpread(kRankValues[v], SpreadOf(rows, v), values);
  }
  // In synchronous data parallelism every rank's step takes about as long:
  // the others wait in the all-reduce for the slowest. What tells it apart
  // is the time it does not spend waiting for the others.
  std::vector<std::vector<double>> working;
  for (const auto& row : rows) working.push_back({row[kStepMs] - row[kCommMs]});
  (*values)["slowest_rank"] = SpreadOf(working, 0).max_rank;
}

}  // namespace

void TrainingLoop::LogWindow(int64_t step, int epoch, double lr, const Update& update,
                             const torch::Tensor& local_loss) {
  double loss = update.mean_loss.item<double>();
  window_.comm = comm_timer_.TakeSeconds();
  const double elapsed = Seconds(window_.start);
  const double per_step = 1000.0 / window_.steps;
  std::vector<double> mine(kNumRankValues);
  mine[kLoss] = local_loss.item<double>();
  mine[kStepMs] = elapsed * per_step;
  mine[kSamplesPerSec] = elapsed > 0 ? window_.steps * samples_per_step_ / elapsed : 0;
  mine[kDataMs] = window_.data * per_step;
  mine[kComputeMs] = window_.compute * per_step;
  mine[kCommMs] = window_.comm * per_step;
  mine[kOptimizerMs] = window_.optimizer * per_step;
  result_.logged.clear();
  for (int v = 0; v < kNumRankValues; ++v) result_.logged[kRankValues[v]] = mine[v];
  // Only at a log step: every rank's own values, in one small all-gather.
  const std::vector<std::vector<double>> rank_rows = sync_->GatherScalars(mine);
  // With local SGD the loss is per rank; report the mean.
  if (local_sgd_) loss = SpreadOf(rank_rows, kLoss).mean;
  result_.final_train_loss = loss;
  std::map<std::string, double> values = {
      {"loss", loss}, {"lr", lr}, {"grad_norm", update.grad_norm}};
  AddRankSpreads(rank_rows, &values);
  if (tokens_per_sample_ > 0) {
    values["tokens_per_sec"] = values["samples_per_sec"] * tokens_per_sample_;
  }
  if (scaler_) values["loss_scale"] = scaler_->scale();
  reporter_.Report(MetricKind::kTrain, step, epoch, values);
  if (stragglers_) {
    std::vector<StragglerWatch::RankTimes> times;
    for (const auto& row : rank_rows) times.push_back({row[kDataMs], row[kComputeMs]});
    for (const StragglerWatch::Report& s : stragglers_->Observe(times, window_.steps)) {
      reporter_.Report(MetricKind::kStraggler, step, epoch,
                       {{"rank", s.rank},
                        {"phase", static_cast<double>(s.phase)},
                        {"ratio", s.ratio},
                        {"steps", static_cast<double>(s.steps)},
                        {"recovered", s.recovered ? 1.0 : 0.0}});
    }
  }
  window_ = StepTimes();
}

void TrainingLoop::Evaluate(int64_t step, int epoch) {
  if (!data_.eval) return;
  progress_.Enter(RankPhase::kEvaluation);
  AutocastScope autocast(t_.precision(), ctx_.device);
  EvalOptions options;
  options.top_k = t_.eval_top_k();
  options.per_class = t_.eval_per_class();
  std::vector<std::string> confusion;
  result_.eval = train::Evaluate(*model_, *data_.eval, TaskOf(spec_), ctx_.rank,
                                 ctx_.world_size, t_.eval_batch_size(), ctx_.device, *sync_,
                                 options, ctx_.rank == 0 ? &confusion : nullptr);
  reporter_.Report(MetricKind::kEval, step, epoch, result_.eval);
  if (!confusion.empty()) {
    // Into the job's log, one line a row.
    std::cout << "confusion matrix at step " << step << " (rows: label, "
              << "columns: predicted class)\n";
    for (const std::string& line : confusion) std::cout << line << "\n";
    std::cout.flush();
  }
  eval_now_ = result_.eval;
}

bool TrainingLoop::EndStep(int64_t step, int epoch, bool stop) {
  const bool epoch_end = step % steps_per_epoch_ == 0 || step == total_steps_;
  if (t_.eval_every_steps() > 0 && step % t_.eval_every_steps() == 0 && !epoch_end) {
    Evaluate(step, epoch);
  }
  if (epoch_end) Evaluate(step, epoch);
  // A failed write loses that checkpoint, not the run; it is on stderr.
  auto log_unsaved = [](const absl::Status& saved) {
    if (!saved.ok()) std::cerr << saved.message() << std::endl;
  };
  log_unsaved(checkpoints_->Poll());  // a background write that has ended
  // The last step ends the run anyway: a stop there is a plain finish.
  stop = stop && step < total_steps_;
  absl::Status saved;
  if (checkpoints_->Due(step, epoch_end) || stop) saved = SaveCheckpoint(step);
  log_unsaved(saved);
  if (!stop) return false;
  result_.stopped = true;
  if (!saved.ok()) result_.stop_checkpoint_error = std::string(saved.message());
  return true;
}

absl::Status TrainingLoop::SaveCheckpoint(int64_t steps_done) {
  progress_.Enter(RankPhase::kCheckpoint);
  // Local SGD replicas drift between averages; save their mean.
  if (local_sgd_ && steps_done % t_.local_sgd_steps() != 0) sync_->AverageParameters();
  return checkpoints_->Save(CursorAt(steps_done), eval_now_);
}

TrainingCursor TrainingLoop::CursorAt(int64_t steps_done) const {
  TrainingCursor cursor;
  cursor.step = steps_done;
  cursor.epoch = static_cast<int>(steps_done / steps_per_epoch_);
  cursor.samples_in_epoch = (steps_done % steps_per_epoch_) * samples_per_step_;
  cursor.global_batch = samples_per_step_;
  cursor.train_samples = data_.train->size();
  cursor.world_size = ctx_.world_size;
  return cursor;
}

}  // namespace trainctl::train
