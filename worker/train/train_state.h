#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/atomic_file.h"
#include "common/shard_plan.h"
#include "worker/train/loss_scaler.h"
#include "worker/train/models/model.h"
#include "worker/train/optim/optimizer_state.h"

namespace trainctl::train {

// Where training stands, as a checkpoint records it. The data cursor
// (epoch, samples_in_epoch) does not depend on the world size: step s of an
// epoch always covers the same global window of that epoch's permutation,
// only its split over ranks changes (common/shard_plan.h).
struct TrainingCursor {
  int64_t step = 0;              // optimizer steps done
  int epoch = 0;                 // epoch in progress
  int64_t samples_in_epoch = 0;  // samples of it already trained
  int64_t global_batch = 0;      // samples per optimizer step
  int64_t train_samples = 0;     // size of the training set
  int world_size = 0;            // ranks that saved it (informational)
  // The shard plan's order (kEpochOrderVersion) the epochs were visited in;
  // read back as 1 from checkpoints older than the field.
  int epoch_order = kEpochOrderVersion;
};

// The live objects a checkpoint saves from and loads into.
struct TrainingStateRefs {
  Model* model = nullptr;
  torch::optim::Optimizer* optimizer = nullptr;
  std::vector<torch::Tensor> params;  // the optimizer's, in order
  DynamicLossScaler* scaler = nullptr;  // null unless fp16
};

// Everything a checkpoint holds, in host memory. Taken with `copy`, it
// shares no storage with the live model and optimizer, so it can be
// serialized on another thread while training goes on.
struct TrainingSnapshot {
  TrainingCursor cursor;
  std::vector<std::pair<std::string, torch::Tensor>> model;  // by name
  std::vector<ParamOptimizerState> optimizer;                // per parameter
  std::optional<DynamicLossScaler::State> scaler;
  torch::Tensor rng_cpu;
  torch::Tensor rng_device;  // undefined unless the parameters are on a GPU
};

// `copy`: also clone the tensors that are already in host memory (a GPU's
// are always copied to the host, the optimizer's state always cloned).
TrainingSnapshot SnapshotTrainingState(const TrainingStateRefs& refs,
                                       const TrainingCursor& cursor, bool copy);

// The parts of a state that are not tensors of the model or optimizer,
// shared by a checkpoint and a live transfer (state_transfer.h): the
// cursor, the loss scaler and the random generators, taken from `refs`,
// written to and read back from a torch archive.
void TakeScalerAndGenerators(const TrainingStateRefs& refs, TrainingSnapshot& snapshot);
void WriteCursor(torch::serialize::OutputArchive& archive, const TrainingCursor& cursor);
TrainingCursor ReadCursor(torch::serialize::InputArchive& archive);
void WriteScalerAndGenerators(torch::serialize::OutputArchive& archive,
                              const TrainingSnapshot& snapshot);
void RestoreScalerAndGenerators(torch::serialize::InputArchive& archive,
                                const TrainingStateRefs& refs);
// Where the parameters live (the CPU for a model without any).
torch::Device ParamDevice(const TrainingStateRefs& refs);

// The snapshot as a checkpoint blob (below), handed to `sink` as it is
// produced; the first error of the sink stops it and is returned. Touches
// nothing but the snapshot.
absl::Status SerializeTrainingSnapshot(const TrainingSnapshot& snapshot,
                                       const ByteSink& sink);
// The same blob, whole.
absl::StatusOr<std::string> SerializeTrainingSnapshot(
    const TrainingSnapshot& snapshot);

// One self-contained blob (torch's archive format): model parameters and
// buffers by name, optimizer state per parameter, loss scaler, the CPU random
// generator (and the GPU's, on one) and the cursor. The LR schedule is a function of the step, so
// the step restores it.
absl::StatusOr<std::string> EncodeTrainingState(const TrainingStateRefs& refs,
                                                const TrainingCursor& cursor);

// Loads a blob into `refs` and returns its cursor. DATA_LOSS when the bytes
// are not a checkpoint; INVALID_ARGUMENT naming the mismatch when it belongs
// to another model or optimizer.
absl::StatusOr<TrainingCursor> DecodeTrainingState(const std::string& bytes,
                                                   const TrainingStateRefs& refs);

// The model's half of a checkpoint: its tensors by name, in the order the
// model lists them, on the CPU, and where training stood. Needs no model
// (trainctl export reads it without building one).
struct CheckpointModel {
  TrainingCursor cursor;
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
};
// DATA_LOSS when the bytes are not a checkpoint (the message does not quote
// them).
absl::StatusOr<CheckpointModel> DecodeCheckpointModel(const std::string& bytes);

}  // namespace trainctl::train
