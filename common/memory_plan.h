#pragma once

// What one rank of a job holds in memory, planned from its spec before it
// runs (submit --dry-run): the parameters, gradients and optimizer state,
// exactly, for the built-in models; the activations of one micro-batch as an
// estimate, with and without gradient checkpointing. Torch-free: the
// coordinator plans, and tests/unit/memory_plan_test.cc checks the exact
// parts against the models and optimizers the ranks build.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainctl/v1/jobs.pb.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl {

// What the data decides about the model's size (the rank's DataInfo); 0 or
// empty: not known here.
struct PlanData {
  std::vector<int64_t> input_shape;  // one sample as read (before transforms)
  int64_t num_classes = 0;           // max label + 1
  int64_t vocab_size = 0;            // max token id + 1
  int64_t target_width = 1;          // regression
};

// The sizes the spec and the data give; the spec's own values (num_classes,
// vocab_size, data.seq_len, the transforms) win over the data's, as in the
// rank. Text data is bytes: a vocabulary of 256.
PlanData ResolvePlanData(const v1::JobSpec& spec, PlanData from_data);

// The shapes of the built-in model's parameter tensors, in no particular
// order; FAILED_PRECONDITION naming what is missing (a TorchScript module
// is sized by its file; an input shape or class count from the data).
absl::StatusOr<std::vector<std::vector<int64_t>>> ParameterShapes(
    const v1::JobSpec& spec, const PlanData& data);

// Bytes of the optimizer's state for parameters of these shapes, once every
// one has had a step (AdamW 8 per element, SGD with momentum 4, Adafactor's
// factored rows and columns, 8-bit Adam's codes and block maxima).
int64_t PlannedOptimizerBytes(const v1::OptimizerSpec& optimizer,
                            const std::vector<std::vector<int64_t>>& shapes);

// One rank's plan for micro-batches of `per_rank_batch` samples.
v1::MemoryPlan PlanRankMemory(const v1::JobSpec& spec, const PlanData& data,
                              int64_t per_rank_batch);

// Sets plan->warning when the plan's total exceeds its available_bytes
// (clears it otherwise).
void WarnIfOverAvailable(v1::MemoryPlan* plan);

// "1.2 GiB", "340 MiB", "12 KiB", "512 B".
std::string FormatBytes(int64_t bytes);

}  // namespace trainctl
