#pragma once

// One rank's data-parallel training loop as an object (trainer.h says what
// it guarantees). Prepare() builds what a run needs: the data, the model and
// its replicas' agreement, the optimizer, the collectives and the position a
// checkpoint resumes from. Run() then trains step by step; each step's parts
// (the micro-batches, the gradient sync and update, the log window, the
// evaluation and checkpoint at its end) are methods of their own. One object
// runs once, on one thread.

#include <torch/torch.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/vocabulary.h"
#include "trainctl/v1/spec.pb.h"
#include "worker/support/straggler_watch.h"
#include "worker/train/batch_prefetcher.h"
#include "worker/train/checkpointer.h"
#include "worker/train/grad_buckets.h"
#include "worker/train/grad_sync.h"
#include "worker/train/loss_scaler.h"
#include "worker/train/metric_sinks.h"
#include "worker/train/models/model.h"
#include "worker/train/rank_context.h"
#include "worker/train/state_transfer.h"
#include "worker/train/step_profiler.h"
#include "worker/train/stream_timer.h"
#include "worker/train/trainer.h"

namespace trainctl::train {

// Rank 0's metric points, to the coordinator (ctx.report) and to the job's
// own sinks (TensorBoard, MLflow); other ranks report nothing.
class MetricReporter {
 public:
  MetricReporter(const RankContext& ctx, MetricSinks sinks);
  void Report(MetricKind kind, int64_t step, int epoch,
              const std::map<std::string, double>& values);
  MetricSinks& sinks() { return sinks_; }

 private:
  const RankContext& ctx_;
  MetricSinks sinks_;
};

class TrainingLoop {
 public:
  TrainingLoop(const v1::JobSpec& spec, const RankContext& ctx, MetricSinks sinks);
  ~TrainingLoop();
  TrainingLoop(const TrainingLoop&) = delete;
  TrainingLoop& operator=(const TrainingLoop&) = delete;

  // Errors name the spec field at fault (a batch larger than the data, a
  // model without parameters, a checkpoint of another model).
  absl::Status Prepare();
  // Trains from the prepared position to the last step, or until asked to
  // stop; the result holds the final parameters (on the CPU).
  absl::StatusOr<TrainResult> Run();

 private:
  // Per-window sums of the step-time split (seconds), reported as
  // milliseconds per step.
  struct StepTimes {
    double data = 0, compute = 0, comm = 0, optimizer = 0;
    int64_t steps = 0;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  };
  // What one step's sync and update leave for its log line.
  struct Update {
    torch::Tensor mean_loss;  // the all-reduced mean, on the device
    bool stop = false;        // every rank agreed to checkpoint and stop
    double grad_norm = -1;    // read at log steps only
    bool regroup = false;     // every rank agreed to regroup after this step
  };

  absl::Status LoadData();
  absl::Status BuildModelAndOptimizer();
  absl::Status ResumeFromCheckpoint();
  void ReportPlan();
  void StartBatches();

  // One optimizer step with its end (log, evaluation, checkpoint); advances
  // `step`. True when the loop should stop here.
  absl::StatusOr<bool> Step(int64_t& step);
  // In-place recovery after a collective failed, or a planned regroup at a
  // step boundary (`why` says which): lets go of the group, takes this
  // rank's place in the next generation, agrees with the other survivors
  // on the furthest step (its state sent to those behind and to ranks
  // joining), and sets `step` to it. Throws when a collective fails again.
  absl::Status Regroup(const std::string& why, int64_t& step, bool planned = false);
  // A replacement's start (ctx.joins_in_place): agrees with the survivors
  // in its first generation, takes their state, and sets `step` to theirs.
  absl::Status JoinInPlace(int64_t& step);
  // What every rank of a generation formed in place tells the others (one
  // row each, columns in training_loop_regroup.cc), and what they conclude
  // from it: the step to go on at, and the rank whose state the ranks
  // behind took.
  struct Agreement {
    int64_t resume = 0;
    int source = 0;
    bool apart = false;  // not all at `resume`: the state was sent
    bool took_state = false;  // this rank was behind and took it
    // The state's size and where its time went on this rank.
    StateTransferStats transfer;
    std::vector<std::vector<double>> rows;
  };
  // The collectives of that agreement on the new group: they throw, or the
  // state's transfer says UNAVAILABLE, when a rank is lost; an error when a
  // replacement's data or model differs from the survivors'.
  absl::StatusOr<Agreement> AgreeOnState(int old_rank);
  // Training goes on from `agreed.resume` with the new group (its batches,
  // sinks, straggler watch, and the interrupted step's end).
  void GoOnAt(const Agreement& agreed, int old_rank,
              std::chrono::steady_clock::time_point start);
  // What the state's transfer cost this rank, for its log line.
  static std::string StateNote(const Agreement& agreed, int rank);
  // After Regroup agreed on `resume` from every survivor's `rows`: the
  // train point and the step's end (evaluation, checkpoint) that no
  // survivor finished before the loss.
  void FinishInterruptedEnd(int64_t resume, int source,
                            const std::vector<std::vector<double>>& rows);
  // The cursor after `steps_done` optimizer steps.
  TrainingCursor CursorAt(int64_t steps_done) const;
  TrainingStateRefs StateRefs();
  void StartStragglerWatch();
  void OpenSampleLog();
  // Before step `step`: the test-only fault hooks (exit, hang, wait).
  void FireFaultHooks(int64_t step);
  // The step's micro-batches, forward and backward; the last one's
  // backward launches the gradient all-reduce. Sums the local loss.
  absl::Status ForwardBackward(int64_t step, torch::Tensor& local_loss);
  // Waits for the gradients, unscales (fp16), clips and steps the optimizer;
  // with local SGD, averages the replicas when due.
  Update SyncAndStep(int64_t step, bool log_now);
  // The train metric of a log step: every rank's own values in one small
  // all-gather, their spread, and the straggler watch.
  void LogWindow(int64_t step, int epoch, double lr, const Update& update,
                 const torch::Tensor& local_loss);
  void Evaluate(int64_t step, int epoch);
  // Evaluation and checkpoint at the end of a step; true when the loop
  // should stop here.
  bool EndStep(int64_t step, int epoch, bool stop);
  absl::Status SaveCheckpoint(int64_t steps_done);
  bool AskedToStop();
  // Whether the agent asked this rank to regroup into a later generation.
  bool AskedToRegroup();
  TrainResult Finish(int64_t step);

  const v1::JobSpec& spec_;
  const v1::TrainingSpec& t_;
  // The loop's own copy: an in-place recovery gives it a new generation,
  // rank, world size and group.
  RankContext ctx_;
  MetricReporter reporter_;

  Datasets data_;
  double data_wait_ms_ = 0;
  int64_t micro_batch_ = 0, accum_ = 1, samples_per_step_ = 0;
  int64_t steps_per_epoch_ = 0, total_steps_ = 0, first_step_ = 0;
  // Optimizer steps applied to this rank's model (one ahead of the loop's
  // step between the update and the step's end).
  int64_t steps_done_ = 0;
  // For an in-place recovery, what a step's end got done before a peer was
  // lost: the last step whose train point this rank reported (rank 0), the
  // last whose evaluation and checkpoint ended, and the last log step's
  // values (to report it again when no survivor did).
  int64_t reported_through_ = 0, ended_through_ = 0;
  struct LoggedValues {
    int64_t step = -1;
    double loss = 0, lr = 0, grad_norm = -1;
  } last_log_;
  int64_t tokens_per_sample_ = 0;
  bool epoch_order_changed_ = false;
  bool local_sgd_ = false;
  bool can_stop_ = false;
  bool stop_ignored_said_ = false;
  bool regroup_due_ = false;    // the ranks agreed to regroup after this step

  std::unique_ptr<Model> model_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<RankCollectives> sync_;
  std::unique_ptr<GradientBuckets> buckets_;
  std::unique_ptr<DynamicLossScaler> scaler_;
  std::unique_ptr<Checkpointer> checkpoints_;
  std::unique_ptr<BatchPrefetcher> batches_;
  std::optional<StragglerWatch> stragglers_;

  LoopPosition local_progress_;
  LoopPosition& progress_;
  std::ofstream sample_log_;
  StepTimes window_;
  StreamTimer comm_timer_;
  StepProfiler profiler_;
  TrainResult result_;
  std::map<std::string, double> eval_now_;  // this step's evaluation, if any
};

}  // namespace trainctl::train
