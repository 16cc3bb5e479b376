#pragma once

#include <cstdint>
#include <future>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "trainctl/v1/jobs.pb.h"
#include "trainctl/v1/spec.pb.h"
#include "worker/train/rank_context.h"
#include "worker/train/train_state.h"

namespace trainctl::train {

// A rank's side of checkpoints. Rank 0 writes <checkpoint.dir>/<job>/
// step-NNNNNNNNN-gG.ckpt (common/checkpoint_name.h) atomically (common/atomic_file.h) and reports it; the
// coordinator keeps the catalog and decides retention. Resuming, rank 0
// reads the file and broadcasts its bytes, so only rank 0's node needs to
// see it, and every rank loads the same state whatever the world size.
//
// With checkpoint.async, Save copies the state into host memory and a
// background thread serializes and writes it while training goes on; one
// write at a time (a Save waits for the previous one), so at most one
// extra copy of the state is held. A write is reported (ctx.on_checkpoint,
// from the training thread) by the first Poll, Save or Finish after it
// ends. Errors name the checkpoint's step.
class Checkpointer {
 public:
  Checkpointer(const v1::JobSpec& spec, const RankContext& ctx,
               TrainingStateRefs refs);

  // Loads ctx.resume_path into the refs; nullopt when there is none. Every
  // rank must call it (it is a collective). Errors name the file and the
  // mismatch (another model, a different global batch or training set).
  // Rank 0 also makes sure it can write checkpoint.dir, so a job whose
  // checkpoints would fail stops now rather than after hours of training.
  absl::StatusOr<std::optional<TrainingCursor>> Resume(
      int64_t global_batch, int64_t train_samples);

  // Whether the step just finished gets a checkpoint: every `every_steps`
  // and at the end of each epoch (so the end of training too).
  bool Due(int64_t steps_done, bool epoch_end) const;

  // Rank 0 writes the checkpoint (or, async, starts its write) and calls
  // ctx.on_checkpoint; other ranks return at once. `eval` is the
  // evaluation of this step, if there was one. An error is this
  // checkpoint's or, async, the previous one's.
  absl::Status Save(const TrainingCursor& cursor,
                    const std::map<std::string, double>& eval);

  // Async: reports a background write that has ended (its error, if it
  // failed); returns at once otherwise. Call between steps.
  absl::Status Poll();
  // Waits for a background write and reports it. Before the rank ends.
  absl::Status Finish();

  // Async: whether a write is in flight.
  bool writing() const { return pending_.valid(); }
  // Checkpoints written and reported so far.
  int64_t written() const { return written_; }

 private:
  struct Written {
    absl::Status status;
    v1::Checkpoint record;
  };

  // Rank 0: creates the job's directory once and removes stale temporaries.
  absl::Status PrepareDir();
  // Serializes and writes the snapshot; fills the record but for the
  // blocked time. Runs on the training thread or, async, the writer's.
  static Written Write(const TrainingSnapshot& snapshot, std::string path,
                       bool die_halfway, v1::Checkpoint record);
  // Reports a finished write: counts it and calls ctx.on_checkpoint.
  absl::Status Report(Written written);

  const v1::JobSpec& spec_;
  const RankContext& ctx_;
  TrainingStateRefs refs_;
  std::string dir_;  // <checkpoint.dir>/<job id>, empty when off
  bool dir_ready_ = false;
  int64_t written_ = 0;
  std::future<Written> pending_;  // async: the write in flight, if any
};

}  // namespace trainctl::train
