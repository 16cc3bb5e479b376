#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "trainctl/v1/spec.pb.h"
#include "worker/train/rank_context.h"
#include "worker/train/train_state.h"

namespace trainctl::train {

// A rank's side of checkpoints. Rank 0 writes <checkpoint.dir>/<job>/
// step-NNNNNNNNN.ckpt atomically (common/atomic_file.h) and reports it; the
// coordinator keeps the catalog and decides retention. Resuming, rank 0
// reads the file and broadcasts its bytes, so only rank 0's node needs to
// see it, and every rank loads the same state whatever the world size.
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

  // Rank 0 writes the checkpoint and calls ctx.on_checkpoint; other ranks
  // return at once. `eval` is the evaluation of this step, if there was one.
  absl::Status Save(const TrainingCursor& cursor,
                    const std::map<std::string, double>& eval);

  int64_t written() const { return written_; }

 private:
  // Rank 0: creates the job's directory once and removes stale temporaries.
  absl::Status PrepareDir();

  const v1::JobSpec& spec_;
  const RankContext& ctx_;
  TrainingStateRefs refs_;
  std::string dir_;  // <checkpoint.dir>/<job id>, empty when off
  bool dir_ready_ = false;
  int64_t written_ = 0;
};

}  // namespace trainctl::train
