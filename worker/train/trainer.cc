#include "worker/train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/shard_plan.h"
#include "common/status_macros.h"
#include "worker/train/autocast_scope.h"
#include "worker/train/batch_prefetcher.h"
#include "worker/train/checkpointer.h"
#include "worker/support/shard_manifest.h"
#include "worker/train/evaluation.h"
#include "worker/train/grad_buckets.h"
#include "worker/train/grad_sync.h"
#include "worker/train/loss_scaler.h"
#include "worker/train/models/model.h"
#include "worker/train/optim/optimizers.h"
#include "worker/train/optim/schedule.h"
#include "worker/train/rank_spread.h"
#include "worker/train/step_profiler.h"
#include "worker/train/stream_timer.h"
#include "worker/support/straggler_watch.h"
#include "worker/train/metric_sinks.h"

namespace trainctl::train {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Per-window sums of the step-time split, reported as milliseconds per step.
struct StepTimes {
  double data = 0, compute = 0, comm = 0, optimizer = 0;
  int64_t steps = 0;
  Clock::time_point start = Clock::now();
};

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

absl::StatusOr<TrainResult> TrainOrThrow(const v1::JobSpec& spec,
                                         const RankContext& ctx) {
  const auto& t = spec.training();
  if (t.precision() == "fp16" && !ctx.device.is_cuda()) {
    return absl::InvalidArgumentError(
        "training.precision: fp16 needs a CUDA device; use bf16 on CPU");
  }
  // Before anything slow: a directory rank 0 cannot write fails the job now.
  ASSIGN_OR_RETURN(MetricSinks sinks, MetricSinks::Open(spec, ctx));
  const auto load_start = Clock::now();
  ASSIGN_OR_RETURN(Datasets data,
                   ctx.load_data ? ctx.load_data() : LoadDatasets(spec));
  const double data_wait_ms = Seconds(load_start) * 1000;
  // Nodes that hold different shard files must not train on different
  // data: every rank checks what it sees against rank 0.
  if (ctx.group) {
    ASSIGN_OR_RETURN(const std::string rank_zero,
                     BroadcastBytes(ctx.group, ctx.rank, ctx.device, data.manifest));
    if (std::string why = ManifestDifference(rank_zero, data.manifest, ctx.rank);
        !why.empty()) {
      return absl::InvalidArgumentError(why);
    }
  }
  const int64_t micro_batch = t.batch_size();
  const int64_t accum = t.grad_accum_steps();
  const int64_t samples_per_step = micro_batch * accum;
  const int64_t steps_per_epoch = data.train->size() / samples_per_step;
  if (steps_per_epoch == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.batch_size: ", micro_batch, " x grad_accum_steps ", accum,
        " is larger than the ", data.train->size(), " training samples"));
  }
  int64_t total_steps = steps_per_epoch * t.epochs();
  if (t.max_steps() > 0) total_steps = std::min(total_steps, t.max_steps());

  std::unique_ptr<Model> model;
  {
    // Initialisation draws from torch's global generator; ranks that share a
    // process (tests run them as threads) must not interleave their draws.
    static std::mutex init_mu;
    std::lock_guard<std::mutex> lock(init_mu);
    torch::manual_seed(spec.seed());
    ASSIGN_OR_RETURN(model, BuildModel(spec, data.info));
  }
  model->To(ctx.device);
  model->SetTraining(true);
  std::vector<torch::Tensor> params = model->Parameters();
  if (params.empty()) {
    return absl::InvalidArgumentError("model: has no trainable parameters");
  }
  BroadcastFromRankZero(ctx.group, params);
  std::unique_ptr<torch::optim::Optimizer> optimizer =
      BuildOptimizer(spec.optimizer(), params);
  RankCollectives sync(params, ctx.group, ctx.world_size);
  GradientBuckets buckets(params, ctx.group, ctx.world_size,
                          int64_t{t.bucket_mb()} << 20);
  std::unique_ptr<DynamicLossScaler> scaler;
  if (t.precision() == "fp16") {
    scaler = std::make_unique<DynamicLossScaler>(65536.0, 2000, ctx.device);
  }
  Checkpointer checkpoints(spec, ctx,
                           {model.get(), optimizer.get(), params, scaler.get()});
  int64_t first_step = 0;
  bool epoch_order_changed = false;
  {
    ASSIGN_OR_RETURN(std::optional<TrainingCursor> resumed,
                     checkpoints.Resume(samples_per_step, data.train->size()));
    if (resumed) {
      first_step = resumed->epoch * steps_per_epoch +
                   resumed->samples_in_epoch / samples_per_step;
      // Saved by a trainctl whose epochs visited the data in another
      // order: the rest of this epoch follows the new one, so it may
      // repeat or skip samples. Said, not hidden; exact from the next epoch.
      if (resumed->epoch_order != kEpochOrderVersion &&
          resumed->samples_in_epoch > 0) {
        epoch_order_changed = true;
        if (ctx.rank == 0) {
          std::cerr << "trainctl: the checkpoint was written with data order "
                    << resumed->epoch_order << "; this trainctl uses order "
                    << kEpochOrderVersion << ", so the rest of epoch "
                    << resumed->epoch << " is drawn from the new order and may "
                    << "repeat or skip samples; every epoch after it is exact\n";
        }
      }
    }
  }
  LoopPosition local_progress;
  LoopPosition& progress = ctx.progress ? *ctx.progress : local_progress;
  std::ofstream sample_log;
  if (!ctx.faults.sample_log_dir.empty()) {
    sample_log.open(absl::StrCat(ctx.faults.sample_log_dir, "/", ctx.job_id,
                                 "-g", ctx.generation, "-r", ctx.rank,
                                 ".samples"),
                    std::ios::app);
  }

  auto report = [&](const char* kind, int64_t step, int epoch,
                    const std::map<std::string, double>& values) {
    if (ctx.rank != 0 || (!ctx.report && sinks.empty())) return;
    v1::MetricPoint point;
    point.set_kind(kind);
    point.set_step(step);
    point.set_epoch(epoch);
    point.set_rank(ctx.rank);
    point.set_time_unix_ms(RealClock().NowUnixMs());
    for (const auto& [k, v] : values) (*point.mutable_values())[k] = v;
    if (ctx.report) ctx.report(point);
    sinks.Write(point);
  };
  const int64_t tokens_per_sample =
      spec.task() == "language_model" && !data.info.input_shape.empty()
          ? data.info.input_shape.back()
          : 0;
  std::map<std::string, double> plan_metric = {
      {"total_steps", double(total_steps)},
      {"steps_per_epoch", double(steps_per_epoch)},
      {"train_samples", double(data.train->size())},
      {"eval_samples", double(data.eval ? data.eval->size() : 0)},
      {"first_step", double(first_step)},
      {"data_wait_ms", data_wait_ms}};
  double parameter_count = 0;
  for (const auto& p : params) parameter_count += p.numel();
  plan_metric["parameters"] = parameter_count;
  plan_metric.insert(ctx.startup.begin(), ctx.startup.end());
  plan_metric.insert(data.plan_facts.begin(), data.plan_facts.end());
  if (epoch_order_changed) plan_metric["epoch_order_changed"] = 1;
  report("plan", 0, 0, plan_metric);

  TrainResult result;
  result.first_step = first_step;
  std::map<std::string, double> eval_now;  // this step's evaluation, if any
  auto evaluate = [&](int64_t step, int epoch) {
    if (!data.eval) return;
    progress.Enter(LoopPosition::Phase::kEvaluation);
    AutocastScope autocast(t.precision(), ctx.device);
    EvalOptions options;
    options.top_k = t.eval_top_k();
    options.per_class = t.eval_per_class();
    std::vector<std::string> confusion;
    result.eval = Evaluate(*model, *data.eval, spec.task(), ctx.rank,
                           ctx.world_size, t.eval_batch_size(), ctx.device, sync,
                           options, ctx.rank == 0 ? &confusion : nullptr);
    report("eval", step, epoch, result.eval);
    if (!confusion.empty()) {
      // Into the job's log, one line a row.
      std::cout << "confusion matrix at step " << step << " (rows: label, "
                << "columns: predicted class)\n";
      for (const std::string& line : confusion) std::cout << line << "\n";
      std::cout.flush();
    }
    eval_now = result.eval;
  };

  const bool local_sgd = t.local_sgd_steps() > 0;
  // Rank 0 names a rank whose own work stays above its peers'.
  std::optional<StragglerWatch> stragglers;
  const v1::FaultToleranceSpec& ft = spec.fault_tolerance();
  if (ctx.rank == 0 && ctx.world_size > 1 && ft.straggler_ratio() > 0) {
    StragglerWatch::Options options;
    options.ratio = ft.straggler_ratio();
    options.min_steps = ft.straggler_steps();
    stragglers.emplace(options);
  }
  BatchPlan plan;
  plan.seed = spec.seed();
  plan.steps_per_epoch = steps_per_epoch;
  plan.grad_accum = accum;
  plan.micro_batch = micro_batch;
  plan.first_step = first_step;
  plan.total_steps = total_steps;
  plan.keep_indices = sample_log.is_open();
  plan.rank = ctx.rank;
  plan.world_size = ctx.world_size;
  BatchPrefetcher batches(*data.train, plan, ctx.device, t.prefetch_batches(),
                          data.train_transforms.get());
  StepTimes window;
  StreamTimer comm_timer(ctx.device);
  // A request to stop is honoured only where it loses nothing: a job that
  // writes no checkpoints trains on (every rank decides so alike).
  const bool can_stop = !spec.checkpoint().dir().empty();
  bool stop_ignored_said = false;
  auto asked_to_stop = [&] {
    const bool asked = ctx.stop_requested && ctx.stop_requested();
    if (asked && !can_stop && !stop_ignored_said) {
      stop_ignored_said = true;
      std::cerr << "rank " << ctx.rank << ": asked to checkpoint and stop, but "
                << "the job has no checkpoint.dir; training on" << std::endl;
    }
    return asked && can_stop;
  };
  // A step's checkpoint, at its end.
  auto save_checkpoint = [&](int64_t steps_done) {
    progress.Enter(LoopPosition::Phase::kCheckpoint);
    // Local SGD replicas drift between averages; save their mean.
    if (local_sgd && steps_done % t.local_sgd_steps() != 0) sync.AverageParameters();
    TrainingCursor cursor;
    cursor.step = steps_done;
    cursor.epoch = static_cast<int>(steps_done / steps_per_epoch);
    cursor.samples_in_epoch = (steps_done % steps_per_epoch) * samples_per_step;
    cursor.global_batch = samples_per_step;
    cursor.train_samples = data.train->size();
    cursor.world_size = ctx.world_size;
    return checkpoints.Save(cursor, eval_now);
  };
  StepProfiler profiler(spec.profile(), ctx.job_id, ctx.rank, std::cerr);
  int64_t step = first_step;
  int epoch = 0;
  while (step < total_steps) {
    epoch = static_cast<int>(step / steps_per_epoch);
    progress.BeginStep(step);
    profiler.BeforeStep(step);
    eval_now.clear();
    if (ctx.faults.Fires("exit", ctx.rank, ctx.generation, step)) {
      std::cerr << "fault hook: exiting before step " << step << std::endl;
      _exit(3);
    }
    if (ctx.faults.Fires("hang", ctx.rank, ctx.generation, step)) {
      std::cerr << "fault hook: hanging before step " << step << std::endl;
      for (;;) pause();
    }
    if (ctx.faults.Fires("wait_for_stop", ctx.rank, ctx.generation, step)) {
      std::cerr << "fault hook: waiting before step " << step
                << " until asked to stop" << std::endl;
      while (!(ctx.stop_requested && ctx.stop_requested())) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    const double lr =
        ScheduledLr(spec.scheduler(), spec.optimizer().lr(), step, total_steps);
    SetLr(*optimizer, lr);
    buckets.ZeroGrad();
    // Summed on the device: read on the host at log steps only.
    torch::Tensor local_loss =
        torch::zeros({1}, torch::dtype(torch::kFloat32).device(ctx.device));
    for (int64_t m = 0; m < accum; ++m) {
      auto mark = Clock::now();
      ASSIGN_OR_RETURN(Batch batch, batches.Next());
      window.data += Seconds(mark);
      if (sample_log.is_open()) {
        sample_log << step;
        for (int64_t id : batch.indices) sample_log << ' ' << id;
        sample_log << '\n';
      }
      mark = Clock::now();
      {
        AutocastScope autocast(t.precision(), ctx.device);
        torch::Tensor loss;
        if (model->HasCustomLoss()) {
          loss = model->CustomLoss(batch.inputs, batch.targets);
          if (loss.numel() != 1) {
            return absl::InvalidArgumentError(absl::StrCat(
                "model.path: ", spec.model().path(), ": loss() returned a ",
                "tensor of ", loss.numel(), " elements; it must return a scalar"));
          }
          loss = loss.to(torch::kFloat32).reshape({}) / accum;
        } else {
          loss = TaskLoss(spec.task(), model->Forward(batch.inputs), batch.targets) /
                 accum;
        }
        local_loss.add_(loss.detach().to(torch::kFloat32).reshape({1}));
        // Only the last micro-batch's backward launches the all-reduce.
        const bool last = m + 1 == accum;
        buckets.SetSyncing(last && !local_sgd);
        if (last) {
          buckets.SetLoss(local_loss);
          if (!local_sgd) buckets.SetStopVote(asked_to_stop());
        }
        torch::Tensor scaled = scaler ? loss * scaler->scale_tensor().reshape({}) : loss;
        if (last && ctx.faults.Fires("inf_gradient", ctx.rank, ctx.generation, step)) {
          scaled = scaled * INFINITY;  // the all-reduce carries it to every rank
        }
        scaled.backward();
      }
      if (const int64_t ms = ctx.faults.DelayMs("slow_compute", ctx.rank,
                                                ctx.generation, step)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      }
      window.compute += Seconds(mark);
    }
    if (sample_log.is_open()) sample_log.flush();

    progress.Enter(LoopPosition::Phase::kAllReduce);
    comm_timer.Start();
    const torch::Tensor mean_loss = buckets.Finish();
    comm_timer.Stop();
    // No read for a job that cannot stop (it costs a wait for the device).
    bool stop = !local_sgd && can_stop && buckets.StopVoted();
    progress.Enter(LoopPosition::Phase::kOptimizer);
    auto mark = Clock::now();
    bool finite = true;
    if (scaler) {
      finite = scaler->Unscale(params);
      scaler->Update(finite);
    }
    const bool log_now =
        (step + 1) % t.log_every_steps() == 0 || step + 1 == total_steps;
    double grad_norm = -1;
    if (t.max_grad_norm() > 0 || log_now) {
      const torch::Tensor norm = sync.GradientNorm();
      if (t.max_grad_norm() > 0) sync.ClipGradients(norm, t.max_grad_norm());
      if (log_now) grad_norm = norm.item<double>();
    }
    if (finite) optimizer->step();
    window.optimizer += Seconds(mark);
    if (local_sgd && (step + 1) % t.local_sgd_steps() == 0) {
      comm_timer.Start();
      sync.AverageParameters();
      // Replicas agree only here: the votes to stop travel with the average.
      for (const auto& row : sync.GatherScalars({asked_to_stop() ? 1.0 : 0.0})) {
        stop = stop || row[0] > 0;
      }
      comm_timer.Stop();
    }
    ++step;
    ++window.steps;
    // Only at a log step: every rank's own values, in one small all-gather.
    std::vector<std::vector<double>> rank_rows;
    std::vector<double> loss(1, 0.0);
    if (log_now) {
      loss[0] = mean_loss.item<double>();
      window.comm = comm_timer.TakeSeconds();
      const double elapsed = Seconds(window.start);
      const double per_step = 1000.0 / window.steps;
      std::vector<double> mine(kNumRankValues);
      mine[kLoss] = local_loss.item<double>();
      mine[kStepMs] = elapsed * per_step;
      mine[kSamplesPerSec] =
          elapsed > 0 ? window.steps * samples_per_step / elapsed : 0;
      mine[kDataMs] = window.data * per_step;
      mine[kComputeMs] = window.compute * per_step;
      mine[kCommMs] = window.comm * per_step;
      mine[kOptimizerMs] = window.optimizer * per_step;
      result.logged.clear();
      for (int v = 0; v < kNumRankValues; ++v) result.logged[kRankValues[v]] = mine[v];
      rank_rows = sync.GatherScalars(mine);
      // With local SGD the loss is per rank; report the mean.
      if (local_sgd) loss[0] = SpreadOf(rank_rows, kLoss).mean;
    }
    if (log_now) result.final_train_loss = loss[0];
    if (step == 1) report("first_step", step, epoch, {});
    if (log_now) {
      std::map<std::string, double> values = {
          {"loss", loss[0]}, {"lr", lr}, {"grad_norm", grad_norm}};
      AddRankSpreads(rank_rows, &values);
      if (tokens_per_sample > 0) {
        values["tokens_per_sec"] = values["samples_per_sec"] * tokens_per_sample;
      }
      if (scaler) values["loss_scale"] = scaler->scale();
      report("train", step, epoch, values);
      if (stragglers) {
        std::vector<StragglerWatch::RankTimes> times;
        for (const auto& row : rank_rows) {
          times.push_back({row[kDataMs], row[kComputeMs]});
        }
        for (const StragglerWatch::Report& s :
             stragglers->Observe(times, window.steps)) {
          report("straggler", step, epoch,
                 {{"rank", s.rank},
                  {"phase", static_cast<double>(s.phase)},
                  {"ratio", s.ratio},
                  {"steps", static_cast<double>(s.steps)},
                  {"recovered", s.recovered ? 1.0 : 0.0}});
        }
      }
      window = StepTimes();
    }
    const bool epoch_end = step % steps_per_epoch == 0 || step == total_steps;
    if (t.eval_every_steps() > 0 && step % t.eval_every_steps() == 0 &&
        !epoch_end) {
      evaluate(step, epoch);
    }
    if (epoch_end) evaluate(step, epoch);
    // A failed write loses that checkpoint, not the run; it is on stderr.
    auto log_unsaved = [](const absl::Status& saved) {
      if (!saved.ok()) std::cerr << saved.message() << std::endl;
    };
    log_unsaved(checkpoints.Poll());  // a background write that has ended
    // The last step ends the run anyway: a stop there is a plain finish.
    stop = stop && step < total_steps;
    absl::Status saved;
    if (checkpoints.Due(step, epoch_end) || stop) saved = save_checkpoint(step);
    log_unsaved(saved);
    if (stop) {
      result.stopped = true;
      if (!saved.ok()) result.stop_checkpoint_error = std::string(saved.message());
      break;
    }
    profiler.AfterStep(step - 1);
  }
  profiler.Finish();
  if (checkpoints.writing()) progress.Enter(LoopPosition::Phase::kCheckpoint);
  if (absl::Status saved = checkpoints.Finish(); !saved.ok()) {
    std::cerr << saved.message() << std::endl;
    // Async: the stop's own write, the last one in flight.
    if (result.stopped && result.stop_checkpoint_error.empty()) {
      result.stop_checkpoint_error = std::string(saved.message());
    }
  }
  result.steps = step;
  result.checkpoints = checkpoints.written();
  if (scaler) result.skipped_steps = scaler->skipped_steps();
  for (const auto& p : params) result.parameters.push_back(p.detach().cpu());
  sinks.Finish(spec, ctx, *model, result.stopped, step, static_cast<int>(step / steps_per_epoch),
               result.eval, data.plan_facts);
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
