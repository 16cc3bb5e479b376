#pragma once

// A rank's whole training state handed to the ranks behind it over the
// job's collective group, in memory (fault_tolerance.in_place): a
// survivor's to a replacement, or to a survivor one optimizer step behind.
//
// No archive of the tensors: the sender describes them in a small header
// (names, shapes, types, with the cursor, loss scaler and random
// generators) and then sends each tensor point to point, straight from its
// live model and optimizer. The taker receives into stand-ins and takes
// them in only once all have arrived (its model costs twice its memory for
// that time), so a transfer that fails or is abandoned halfway changes
// nothing of it. Ranks that take nothing are not involved. A taker whose
// model or optimizer does not match the header says so before any tensor
// moves, so the sender never waits on it.

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/train/torch_compat.h"
#include "worker/train/train_state.h"

namespace trainctl::train {

// What a transfer moved and where its time went on this rank.
struct StateTransferStats {
  int64_t bytes = 0;       // the tensors' bytes, to each taker
  double prepare_ms = 0;   // sender: describing the state
  double move_ms = 0;      // the header and the tensors on the wire
  double load_ms = 0;      // taker: the model taken in, the optimizer, scaler and
                           // generators set
  std::vector<int> refused;  // sender: takers that did not match
};

// The source's side: sends `refs` (where training stands: `cursor`) to each
// rank of `takers`. A taker that refuses is left out and named in
// stats->refused; its own call fails. UNAVAILABLE when a taker is lost, or
// when the rank's group is abandoned (collective_wait.h) while it waits.
absl::Status SendTrainingState(CollectiveGroup& group, const std::vector<int>& takers,
                               const TrainingStateRefs& refs, const TrainingCursor& cursor,
                               StateTransferStats* stats);

// A taker's side: the state from `source`, written into `refs` (the model's
// tensors in place); returns its cursor. INVALID_ARGUMENT naming the first
// model tensor that differs from this rank's (found before anything
// changes) or an optimizer field this rank's optimizer does not have;
// UNAVAILABLE when the source is lost or the group abandoned, with this
// rank's state unchanged.
absl::StatusOr<TrainingCursor> ReceiveTrainingState(CollectiveGroup& group, int source,
                                                    const TrainingStateRefs& refs,
                                                    StateTransferStats* stats);

}  // namespace trainctl::train
