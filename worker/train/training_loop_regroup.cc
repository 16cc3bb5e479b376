// TrainingLoop's in-place recovery (fault_tolerance.in_place): a peer was
// lost, this rank's process and its state live on. It lets go of the
// failed group, joins the next generation's, and agrees with the other
// survivors on where training stands, so the interrupted step is redone
// on the new world size from its first sample and no completed optimizer
// step is lost or repeated.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/vocabulary.h"
#include "worker/support/rank_spread.h"
#include "worker/support/shard_manifest.h"
#include "worker/train/training_loop.h"

namespace trainctl::train {
namespace {

// Regroups one recovery may take when ranks keep being lost while the
// next generation forms.
constexpr int kRegroupAttempts = 3;

// The columns of a rank's row in the agreement (Agreement::rows).
enum AgreementColumn {
  kRowStepsDone, kRowReported, kRowEnded, kRowLoss, kRowLr, kRowGradNorm,
  kRowWasRankZero, kRowNewcomer
};

// Not a configuration error: the rank's exit lets the coordinator restart
// the job from its checkpoint instead.
absl::Status RecoveryFailed(const absl::Status& status) {
  return absl::AbortedError(absl::StrCat("in-place recovery: ", status.message()));
}

}  // namespace

absl::Status TrainingLoop::Regroup(const std::string& why, int64_t& step, bool planned) {
  const auto start = std::chrono::steady_clock::now();
  progress_.Enter(RankPhase::kRegroup);
  const int old_rank = ctx_.rank;
  std::cerr << "rank " << ctx_.rank << ": " << why
            << "; waiting for the coordinator to regroup the ranks" << std::endl;
  if (ctx_.faults.Fires("exit_in_regroup", ctx_.rank, ctx_.generation, step)) {
    std::cerr << "fault hook: exiting in the regroup after step " << step << std::endl;
    _exit(3);
  }
  // Everything that holds the failed group, before the group itself: its
  // batches were split for the old world, its collectives are broken.
  // Planned, the group is whole: it is closed once the next one has
  // formed, which needs every rank, so no peer is still sending in it (a
  // socket closed with data unread could cut a peer's last message).
  GroupPtr whole;
  if (planned) whole = ctx_.group;
  batches_.reset();
  Agreement agreed;
  for (int attempt = 1;; ++attempt) {
    buckets_.reset();
    sync_.reset();
    ctx_.group.reset();
    absl::StatusOr<RankContext::NextGeneration> next = ctx_.regroup();
    if (!next.ok() && next.status().code() == absl::StatusCode::kUnavailable &&
        attempt < kRegroupAttempts) {
      std::cerr << "rank " << ctx_.rank << ": " << next.status().message() << std::endl;
      continue;  // the group did not form: ask again where this rank goes
    }
    if (!next.ok()) return RecoveryFailed(next.status());
    ctx_.generation = next->generation;
    ctx_.rank = next->rank;
    ctx_.world_size = next->world_size;
    ctx_.group = next->group;
    sync_ = std::make_unique<RankCollectives>(params_, ctx_.group, ctx_.world_size);
    buckets_ = std::make_unique<GradientBuckets>(params_, ctx_.group, ctx_.world_size,
                                                 int64_t{t_.bucket_mb()} << 20);
    absl::StatusOr<Agreement> agreement;
    try {
      agreement = AgreeOnState(old_rank);
    } catch (const std::exception& e) {
      agreement = absl::UnavailableError(e.what());
    }
    if (agreement.ok()) {
      agreed = *std::move(agreement);
      break;
    }
    // Another rank lost while this generation formed: the coordinator
    // regroups again, or ends the generation (the next call says which).
    if (agreement.status().code() != absl::StatusCode::kUnavailable ||
        attempt >= kRegroupAttempts) {
      return RecoveryFailed(agreement.status());
    }
    std::cerr << "rank " << ctx_.rank << ": generation " << ctx_.generation
              << " lost a rank while it formed (" << agreement.status().message() << ")"
              << std::endl;
  }
  step = agreed.resume;
  GoOnAt(agreed, old_rank, start);
  return absl::OkStatus();
}

absl::Status TrainingLoop::JoinInPlace(int64_t& step) {
  const auto start = std::chrono::steady_clock::now();
  progress_.Enter(RankPhase::kRegroup);
  batches_.reset();  // made for step 0; the survivors say where they are
  absl::StatusOr<Agreement> agreed;
  try {
    agreed = AgreeOnState(ctx_.rank);
  } catch (const std::exception& e) {
    agreed = absl::UnavailableError(e.what());
  }
  if (!agreed.ok()) {
    return absl::Status(agreed.status().code(),
                        absl::StrCat("joining generation ", ctx_.generation,
                                     " in place: ", agreed.status().message()));
  }
  ctx_.joins_in_place = false;  // from now on a survivor like the others
  step = agreed->resume;
  GoOnAt(*agreed, ctx_.rank, start);
  return absl::OkStatus();
}

absl::StatusOr<TrainingLoop::Agreement> TrainingLoop::AgreeOnState(int old_rank) {
  Agreement agreed;
  // A collective can finish on some ranks before the loss shows on others,
  // so survivors may stand one optimizer step apart: the furthest wins, and
  // the lowest rank there sends its whole state to the ranks behind (and to
  // a replacement, which has none yet: -1 steps done).
  const bool newcomer = ctx_.joins_in_place;
  const bool logged = !newcomer && last_log_.step == steps_done_;
  agreed.rows = sync_->GatherScalars(
      {newcomer ? -1.0 : static_cast<double>(steps_done_),
       newcomer ? -1.0 : static_cast<double>(reported_through_),
       newcomer ? -1.0 : static_cast<double>(ended_through_), logged ? last_log_.loss : NAN,
       last_log_.lr, last_log_.grad_norm, old_rank == 0 && !newcomer ? 1.0 : 0.0,
       newcomer ? 1.0 : 0.0});
  const Spread done = SpreadOf(agreed.rows, kRowStepsDone);
  agreed.source = done.max_rank;
  agreed.apart = done.min != done.max;
  agreed.resume = static_cast<int64_t>(done.max);
  if (agreed.resume < 0) return absl::FailedPreconditionError("no rank holds a state");
  const bool any_newcomer = SpreadOf(agreed.rows, kRowNewcomer).max > 0;
  if (any_newcomer) {
    // A replacement reads its own node's copy of the data: it must hold
    // what the survivors train on (as every rank checks at a job's start).
    absl::StatusOr<std::string> theirs =
        BroadcastBytes(ctx_.group, ctx_.rank, ctx_.device, data_.manifest, agreed.source);
    if (!theirs.ok()) return theirs.status();
    if (newcomer) {
      if (std::string why = ManifestDifference(*theirs, agreed.source, data_.manifest, ctx_.rank);
          !why.empty()) {
        return absl::InvalidArgumentError(why);
      }
    }
  }
  if (agreed.apart) {
    // Only the ranks behind take it, straight into their model and
    // optimizer: one at the furthest step keeps its own random generators.
    std::vector<int> takers;
    for (int r = 0; r < static_cast<int>(agreed.rows.size()); ++r) {
      if (agreed.rows[r][kRowStepsDone] != done.max) takers.push_back(r);
    }
    StateTransferStats& stats = agreed.transfer;
    if (ctx_.rank == agreed.source) {
      RETURN_IF_ERROR(SendTrainingState(*ctx_.group, takers, StateRefs(),
                                        CursorAt(agreed.resume), &stats));
      for (int refused : stats.refused) {
        std::cerr << "rank " << ctx_.rank << ": rank " << refused
                  << " refused the training state (see its log)" << std::endl;
      }
    } else if (std::find(takers.begin(), takers.end(), ctx_.rank) != takers.end()) {
      if (ctx_.faults.Fires("freeze_before_state", ctx_.rank, ctx_.generation, agreed.resume)) {
        std::cerr << "fault hook: freezing this rank and its worker before the state" << std::endl;
        kill(getppid(), SIGSTOP);  // the worker: its heartbeats stop, no socket closes
        raise(SIGSTOP);
      }
      absl::StatusOr<TrainingCursor> loaded =
          ReceiveTrainingState(*ctx_.group, agreed.source, StateRefs(), &stats);
      if (!loaded.ok()) return loaded.status();
      agreed.took_state = true;
    }
  }
  return agreed;
}

void TrainingLoop::GoOnAt(const Agreement& agreed, int old_rank,
                          std::chrono::steady_clock::time_point start) {
  const int64_t resume = agreed.resume;
  steps_done_ = resume;
  first_step_ = resume;
  window_ = StepTimes();
  comm_timer_.TakeSeconds();
  StartStragglerWatch();  // rank 0's duties may have moved here
  if (ctx_.rank == 0 && old_rank != 0) {
    // Its TensorBoard file and MLflow run: a new event file in the job's
    // directory, the job's run resumed (as after a restart).
    absl::StatusOr<MetricSinks> sinks = MetricSinks::Open(spec_, ctx_);
    if (sinks.ok()) {
      reporter_.sinks() = *std::move(sinks);
    } else {
      std::cerr << "rank 0 (was " << old_rank << "): " << sinks.status().message()
                << "; the job's metrics go on to the coordinator only" << std::endl;
    }
  }
  OpenSampleLog();
  StartBatches();
  FinishInterruptedEnd(resume, agreed.source, agreed.rows);
  const double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start)
                        .count();
  const bool newcomer = agreed.rows[ctx_.rank][kRowNewcomer] > 0;
  std::cerr << "rank " << old_rank
            << (newcomer ? " joined in place as rank " : " is rank ") << ctx_.rank
            << " of " << ctx_.world_size << " in generation " << ctx_.generation
            << ": training goes on at step " << resume << " after "
            << static_cast<int64_t>(ms) << " ms"
            << StateNote(agreed, ctx_.rank) << std::endl;
}

// What the state's transfer cost this rank, for its log line: the bench and
// a person reading a slow recovery see where the time went.
std::string TrainingLoop::StateNote(const Agreement& agreed, int rank) {
  const StateTransferStats& stats = agreed.transfer;
  const double mb = static_cast<double>(stats.bytes) / (1 << 20);
  if (agreed.took_state) {
    return absl::StrFormat(" (state from rank %d: %.0f MiB, received in %.0f ms, loaded in %.0f ms)",
                           agreed.source, mb, stats.move_ms, stats.load_ms);
  }
  if (agreed.apart && rank == agreed.source) {
    return absl::StrFormat(" (sent its state: %.0f MiB, described in %.0f ms, sent in %.0f ms)",
                           mb, stats.prepare_ms, stats.move_ms);
  }
  return "";
}

void TrainingLoop::FinishInterruptedEnd(int64_t resume, int source,
                                        const std::vector<std::vector<double>>& rows) {
  if (resume <= 0) return;
  // Whether the old rank 0 survived and reported the step (if it was lost,
  // nobody knows: the step is reported again).
  bool reported = false;
  int64_t ended = -1;
  for (const std::vector<double>& row : rows) {
    if (static_cast<int64_t>(row[kRowStepsDone]) != resume) continue;
    ended = std::max(ended, static_cast<int64_t>(row[kRowEnded]));
    if (row[kRowWasRankZero] > 0) reported = static_cast<int64_t>(row[kRowReported]) >= resume;
  }
  const int epoch = static_cast<int>((resume - 1) / steps_per_epoch_);
  const bool log_step = resume % t_.log_every_steps() == 0 || resume == total_steps_;
  // A lost rank 0 may have reported it just before: the coordinator keeps
  // one point per step of a generation formed in place.
  if (log_step && !reported && !std::isnan(rows[source][kRowLoss])) {
    reporter_.Report(MetricKind::kTrain, resume, epoch,
                     {{"loss", rows[source][kRowLoss]},
                      {"lr", rows[source][kRowLr]},
                      {"grad_norm", rows[source][kRowGradNorm]}});
  }
  reported_through_ = resume;
  if (ended < resume) {
    eval_now_.clear();  // as at a step's start: a checkpoint records this step's eval
    EndStep(resume, epoch, /*stop=*/false);
  }
  ended_through_ = resume;
}

}  // namespace trainctl::train
