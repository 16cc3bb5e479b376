#include "worker/train/training_loop.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/shard_plan.h"
#include "common/status_macros.h"
#include "common/vocabulary.h"
#include "worker/support/shard_manifest.h"
#include "worker/train/autocast_scope.h"
#include "worker/train/evaluation.h"
#include "worker/train/optim/optimizers.h"
#include "worker/train/optim/schedule.h"

namespace trainctl::train {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

}  // namespace

MetricReporter::MetricReporter(const RankContext& ctx, MetricSinks sinks)
    : ctx_(ctx), sinks_(std::move(sinks)) {}

void MetricReporter::Report(MetricKind kind, int64_t step, int epoch,
                            const std::map<std::string, double>& values) {
  if (ctx_.rank != 0 || (!ctx_.report && sinks_.empty())) return;
  v1::MetricPoint point;
  point.set_kind(MetricKindName(kind));
  point.set_step(step);
  point.set_epoch(epoch);
  point.set_rank(ctx_.rank);
  point.set_time_unix_ms(RealClock().NowUnixMs());
  for (const auto& [k, v] : values) (*point.mutable_values())[k] = v;
  if (ctx_.report) ctx_.report(point);
  sinks_.Write(point);
}

TrainingLoop::TrainingLoop(const v1::JobSpec& spec, const RankContext& ctx,
                           MetricSinks sinks)
    : spec_(spec),
      t_(spec.training()),
      ctx_(ctx),
      reporter_(ctx_, std::move(sinks)),
      progress_(ctx.progress ? *ctx.progress : local_progress_),
      comm_timer_(ctx.device),
      profiler_(spec.profile(), ctx.job_id, ctx.rank, std::cerr) {}

// The prefetcher's thread reads the data and the model's device: it stops
// first.
TrainingLoop::~TrainingLoop() { batches_.reset(); }

absl::Status TrainingLoop::Prepare() {
  RETURN_IF_ERROR(LoadData());
  RETURN_IF_ERROR(BuildModelAndOptimizer());
  RETURN_IF_ERROR(ResumeFromCheckpoint());
  steps_done_ = reported_through_ = ended_through_ = first_step_;
  OpenSampleLog();
  ReportPlan();
  local_sgd_ = t_.local_sgd_steps() > 0;
  // A request to stop is honoured only where it loses nothing: a job that
  // writes no checkpoints trains on (every rank decides so alike).
  can_stop_ = !spec_.checkpoint().dir().empty();
  StartStragglerWatch();
  StartBatches();
  window_ = StepTimes();  // the first window starts with the first step
  return absl::OkStatus();
}

void TrainingLoop::OpenSampleLog() {
  if (ctx_.faults.sample_log_dir.empty()) return;
  if (sample_log_.is_open()) sample_log_.close();
  sample_log_.open(absl::StrCat(ctx_.faults.sample_log_dir, "/", ctx_.job_id, "-g",
                                ctx_.generation, "-r", ctx_.rank, ".samples"),
                   std::ios::app);
}

// Rank 0 names a rank whose own work stays above its peers'.
void TrainingLoop::StartStragglerWatch() {
  stragglers_.reset();
  const v1::FaultToleranceSpec& ft = spec_.fault_tolerance();
  if (ctx_.rank == 0 && ctx_.world_size > 1 && ft.straggler_ratio() > 0) {
    StragglerWatch::Options options;
    options.ratio = ft.straggler_ratio();
    options.min_steps = ft.straggler_steps();
    stragglers_.emplace(options);
  }
}

absl::Status TrainingLoop::LoadData() {
  const auto load_start = Clock::now();
  ASSIGN_OR_RETURN(data_, ctx_.load_data ? ctx_.load_data() : LoadDatasets(spec_));
  data_wait_ms_ = Seconds(load_start) * 1000;
  // Nodes that hold different shard files must not train on different
  // data: every rank checks what it sees against rank 0 (a replacement
  // joining in place, against the survivors: JoinInPlace).
  if (ctx_.group && !ctx_.joins_in_place) {
    ASSIGN_OR_RETURN(const std::string rank_zero,
                     BroadcastBytes(ctx_.group, ctx_.rank, ctx_.device, data_.manifest));
    if (std::string why = ManifestDifference(rank_zero, 0, data_.manifest, ctx_.rank);
        !why.empty()) {
      return absl::InvalidArgumentError(why);
    }
  }
  micro_batch_ = t_.batch_size();
  accum_ = t_.grad_accum_steps();
  samples_per_step_ = micro_batch_ * accum_;
  steps_per_epoch_ = data_.train->size() / samples_per_step_;
  if (steps_per_epoch_ == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.batch_size: ", micro_batch_, " x grad_accum_steps ", accum_,
        " is larger than the ", data_.train->size(), " training samples"));
  }
  total_steps_ = steps_per_epoch_ * t_.epochs();
  if (t_.max_steps() > 0) total_steps_ = std::min(total_steps_, t_.max_steps());
  tokens_per_sample_ = TaskOf(spec_) == Task::kLanguageModel && !data_.info.input_shape.empty()
                           ? data_.info.input_shape.back()
                           : 0;
  return absl::OkStatus();
}

absl::Status TrainingLoop::BuildModelAndOptimizer() {
  {
    // Initialisation draws from torch's global generator; ranks that share a
    // process (tests run them as threads) must not interleave their draws.
    static std::mutex init_mu;
    std::lock_guard<std::mutex> lock(init_mu);
    torch::manual_seed(spec_.seed());
    ASSIGN_OR_RETURN(model_, BuildModel(spec_, data_.info));
  }
  model_->To(ctx_.device);
  model_->SetTraining(true);
  params_ = model_->Parameters();
  if (params_.empty()) {
    return absl::InvalidArgumentError("model: has no trainable parameters");
  }
  // A replacement's state comes from the survivors (JoinInPlace).
  if (!ctx_.joins_in_place) BroadcastFromRankZero(ctx_.group, params_);
  optimizer_ = BuildOptimizer(spec_.optimizer(), params_);
  sync_ = std::make_unique<RankCollectives>(params_, ctx_.group, ctx_.world_size);
  buckets_ = std::make_unique<GradientBuckets>(params_, ctx_.group, ctx_.world_size,
                                               int64_t{t_.bucket_mb()} << 20);
  if (t_.precision() == "fp16") {
    scaler_ = std::make_unique<DynamicLossScaler>(65536.0, 2000, ctx_.device);
  }
  checkpoints_ = std::make_unique<Checkpointer>(spec_, ctx_, StateRefs());
  return absl::OkStatus();
}

TrainingStateRefs TrainingLoop::StateRefs() {
  return TrainingStateRefs{model_.get(), optimizer_.get(), params_, scaler_.get()};
}

absl::Status TrainingLoop::ResumeFromCheckpoint() {
  ASSIGN_OR_RETURN(std::optional<TrainingCursor> resumed,
                   checkpoints_->Resume(samples_per_step_, data_.train->size()));
  if (!resumed) return absl::OkStatus();
  first_step_ = resumed->epoch * steps_per_epoch_ + resumed->samples_in_epoch / samples_per_step_;
  // Saved by a trainctl whose epochs visited the data in another order: the
  // rest of this epoch follows the new one, so it may repeat or skip
  // samples. Said, not hidden; exact from the next epoch.
  if (resumed->epoch_order != kEpochOrderVersion && resumed->samples_in_epoch > 0) {
    epoch_order_changed_ = true;
    if (ctx_.rank == 0) {
      std::cerr << "trainctl: the checkpoint was written with data order "
                << resumed->epoch_order << "; this trainctl uses order " << kEpochOrderVersion
                << ", so the rest of epoch " << resumed->epoch << " is drawn from the new order "
                << "and may repeat or skip samples; every epoch after it is exact\n";
    }
  }
  return absl::OkStatus();
}

void TrainingLoop::ReportPlan() {
  std::map<std::string, double> plan = {
      {"total_steps", double(total_steps_)},
      {"steps_per_epoch", double(steps_per_epoch_)},
      {"train_samples", double(data_.train->size())},
      {"eval_samples", double(data_.eval ? data_.eval->size() : 0)},
      {"first_step", double(first_step_)},
      {"data_wait_ms", data_wait_ms_}};
  double parameter_count = 0;
  for (const auto& p : params_) parameter_count += p.numel();
  plan["parameters"] = parameter_count;
  plan.insert(ctx_.startup.begin(), ctx_.startup.end());
  plan.insert(data_.plan_facts.begin(), data_.plan_facts.end());
  if (epoch_order_changed_) plan["epoch_order_changed"] = 1;
  reporter_.Report(MetricKind::kPlan, 0, 0, plan);
}

void TrainingLoop::StartBatches() {
  BatchPlan plan;
  plan.seed = spec_.seed();
  plan.steps_per_epoch = steps_per_epoch_;
  plan.grad_accum = accum_;
  plan.micro_batch = micro_batch_;
  plan.first_step = first_step_;
  plan.total_steps = total_steps_;
  plan.keep_indices = sample_log_.is_open();
  plan.rank = ctx_.rank;
  plan.world_size = ctx_.world_size;
  batches_ = std::make_unique<BatchPrefetcher>(*data_.train, plan, ctx_.device,
                                               t_.prefetch_batches(),
                                               data_.train_transforms.get());
}

absl::StatusOr<TrainResult> TrainingLoop::Run() {
  int64_t step = first_step_;
  if (ctx_.joins_in_place) RETURN_IF_ERROR(JoinInPlace(step));
  result_.first_step = first_step_;
  while (step < total_steps_) {
    absl::StatusOr<bool> stop = false;
    try {
      stop = Step(step);
    } catch (const std::exception& e) {
      if (!ctx_.regroup) throw;
      RETURN_IF_ERROR(Regroup(
          absl::StrCat("a collective failed in step ", step, " (", e.what(), ")"), step));
      continue;
    }
    if (!stop.ok()) return stop.status();
    if (*stop) break;
    if (regroup_due_ && step < total_steps_) {
      regroup_due_ = false;
      RETURN_IF_ERROR(Regroup(
          absl::StrCat("asked to leave the group after step ", step, " (the job grows)"),
          step, /*planned=*/true));
    }
  }
  return Finish(step);
}

absl::StatusOr<bool> TrainingLoop::Step(int64_t& step) {
  const int epoch = static_cast<int>(step / steps_per_epoch_);
  progress_.BeginStep(step);
  profiler_.BeforeStep(step);
  eval_now_.clear();
  FireFaultHooks(step);
  const double lr = ScheduledLr(spec_.scheduler(), spec_.optimizer().lr(), step, total_steps_);
  SetLr(*optimizer_, lr);
  buckets_->ZeroGrad();
  // Summed on the device: read on the host at log steps only.
  torch::Tensor local_loss =
      torch::zeros({1}, torch::dtype(torch::kFloat32).device(ctx_.device));
  RETURN_IF_ERROR(ForwardBackward(step, local_loss));
  const bool log_now = (step + 1) % t_.log_every_steps() == 0 || step + 1 == total_steps_;
  const Update update = SyncAndStep(step, log_now);
  if (ctx_.faults.Fires("exit_after_update", ctx_.rank, ctx_.generation, step)) {
    std::cerr << "fault hook: exiting after the update of step " << step << std::endl;
    _exit(3);
  }
  ++step;
  ++window_.steps;
  if (step == 1) reporter_.Report(MetricKind::kFirstStep, step, epoch, {});
  if (log_now) {
    if (ctx_.regroup) {
      last_log_ = {step, update.mean_loss.item<double>(), lr, update.grad_norm};
    }
    LogWindow(step, epoch, lr, update, local_loss);
    if (ctx_.rank == 0) reported_through_ = step;
  }
  const bool stop = EndStep(step, epoch, update.stop);
  ended_through_ = step;
  if (stop) return true;
  regroup_due_ = update.regroup && ctx_.regroup;
  profiler_.AfterStep(step - 1);
  return false;
}

void TrainingLoop::FireFaultHooks(int64_t step) {
  if (ctx_.faults.Fires("exit", ctx_.rank, ctx_.generation, step)) {
    // With ms=N it waits first, so what its peers report just before (rank
    // 0's checkpoint) reaches the coordinator before the exit does.
    if (const int64_t ms = ctx_.faults.DelayMs("exit", ctx_.rank, ctx_.generation, step)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
    std::cerr << "fault hook: exiting before step " << step << std::endl;
    _exit(3);
  }
  if (ctx_.faults.Fires("hang", ctx_.rank, ctx_.generation, step)) {
    std::cerr << "fault hook: hanging before step " << step << std::endl;
    for (;;) pause();
  }
  if (ctx_.faults.Fires("wait_for_stop", ctx_.rank, ctx_.generation, step)) {
    std::cerr << "fault hook: waiting before step " << step << " until asked to stop"
              << std::endl;
    while (!(ctx_.stop_requested && ctx_.stop_requested())) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

absl::Status TrainingLoop::ForwardBackward(int64_t step, torch::Tensor& local_loss) {
  for (int64_t m = 0; m < accum_; ++m) {
    auto mark = Clock::now();
    ASSIGN_OR_RETURN(Batch batch, batches_->Next());
    window_.data += Seconds(mark);
    if (sample_log_.is_open()) {
      // Written out before the backward can send this batch's gradients:
      // a rank killed once its peers have them would otherwise lose the
      // record of samples that were trained.
      sample_log_ << step;
      for (int64_t id : batch.indices) sample_log_ << ' ' << id;
      sample_log_ << std::endl;
    }
    mark = Clock::now();
    {
      AutocastScope autocast(t_.precision(), ctx_.device);
      torch::Tensor loss;
      if (model_->HasCustomLoss()) {
        loss = model_->CustomLoss(batch.inputs, batch.more_inputs, batch.targets);
        if (loss.numel() != 1) {
          return absl::InvalidArgumentError(absl::StrCat(
              "model.path: ", spec_.model().path(), ": loss() returned a tensor of ",
              loss.numel(), " elements; it must return a scalar"));
        }
        loss = loss.to(torch::kFloat32).reshape({}) / accum_;
      } else {
        loss = TaskLoss(TaskOf(spec_), model_->Forward(batch.inputs, batch.more_inputs),
                        batch.targets) /
               accum_;
      }
      local_loss.add_(loss.detach().to(torch::kFloat32).reshape({1}));
      // Only the last micro-batch's backward launches the all-reduce.
      const bool last = m + 1 == accum_;
      buckets_->SetSyncing(last && !local_sgd_);
      if (last) {
        buckets_->SetLoss(local_loss);
        if (!local_sgd_) {
          buckets_->SetStopVote(AskedToStop());
          if (ctx_.regroup_requested_generation) {
            buckets_->SetRegroupVote(AskedToRegroup());
          }
        }
      }
      torch::Tensor scaled = scaler_ ? loss * scaler_->scale_tensor().reshape({}) : loss;
      if (last && ctx_.faults.Fires("inf_gradient", ctx_.rank, ctx_.generation, step)) {
        scaled = scaled * INFINITY;  // the all-reduce carries it to every rank
      }
      scaled.backward();
    }
    if (const int64_t ms = ctx_.faults.DelayMs("slow_compute", ctx_.rank, ctx_.generation, step)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
    window_.compute += Seconds(mark);
  }
  return absl::OkStatus();
}

TrainingLoop::Update TrainingLoop::SyncAndStep(int64_t step, bool log_now) {
  Update update;
  progress_.Enter(RankPhase::kAllReduce);
  comm_timer_.Start();
  update.mean_loss = buckets_->Finish();
  comm_timer_.Stop();
  // No read for a job that cannot stop (it costs a wait for the device).
  update.stop = !local_sgd_ && can_stop_ && buckets_->StopVoted();
  update.regroup =
      !local_sgd_ && ctx_.regroup_requested_generation && buckets_->RegroupVoted();
  progress_.Enter(RankPhase::kOptimizer);
  const auto mark = Clock::now();
  bool finite = true;
  if (scaler_) {
    finite = scaler_->Unscale(params_);
    scaler_->Update(finite);
  }
  if (t_.max_grad_norm() > 0 || log_now) {
    const torch::Tensor norm = sync_->GradientNorm();
    if (t_.max_grad_norm() > 0) sync_->ClipGradients(norm, t_.max_grad_norm());
    if (log_now) update.grad_norm = norm.item<double>();
  }
  if (finite) optimizer_->step();
  steps_done_ = step + 1;
  window_.optimizer += Seconds(mark);
  if (local_sgd_ && (step + 1) % t_.local_sgd_steps() == 0) {
    comm_timer_.Start();
    sync_->AverageParameters();
    // Replicas agree only here: the votes to stop (and to regroup) travel
    // with the average.
    for (const auto& row : sync_->GatherScalars(
             {AskedToStop() ? 1.0 : 0.0, AskedToRegroup() ? 1.0 : 0.0})) {
      update.stop = update.stop || row[0] > 0;
      update.regroup = update.regroup || row[1] > 0;
    }
    comm_timer_.Stop();
  }
  return update;
}

bool TrainingLoop::AskedToRegroup() {
  // One that arrives while this rank's vote is on its way counts at the
  // next step's vote, unless a peer's vote has already led to the regroup
  // it asked for (then the generation is as high).
  return ctx_.regroup_requested_generation &&
         ctx_.regroup_requested_generation() > ctx_.generation;
}

bool TrainingLoop::AskedToStop() {
  const bool asked = ctx_.stop_requested && ctx_.stop_requested();
  if (asked && !can_stop_ && !stop_ignored_said_) {
    stop_ignored_said_ = true;
    std::cerr << "rank " << ctx_.rank << ": asked to checkpoint and stop, but "
              << "the job has no checkpoint.dir; training on" << std::endl;
  }
  return asked && can_stop_;
}

TrainResult TrainingLoop::Finish(int64_t step) {
  profiler_.Finish();
  if (checkpoints_->writing()) progress_.Enter(RankPhase::kCheckpoint);
  if (absl::Status saved = checkpoints_->Finish(); !saved.ok()) {
    std::cerr << saved.message() << std::endl;
    // Async: the stop's own write, the last one in flight.
    if (result_.stopped && result_.stop_checkpoint_error.empty()) {
      result_.stop_checkpoint_error = std::string(saved.message());
    }
  }
  result_.steps = step;
  result_.checkpoints = checkpoints_->written();
  if (scaler_) result_.skipped_steps = scaler_->skipped_steps();
  for (const auto& p : params_) result_.parameters.push_back(p.detach().cpu());
  reporter_.sinks().Finish(spec_, ctx_, *model_, result_.stopped, step,
                           static_cast<int>(step / steps_per_epoch_), result_.eval,
                           data_.plan_facts);
  return std::move(result_);
}

}  // namespace trainctl::train
