#pragma once

#include <torch/torch.h>

#include <string>

#include "absl/status/statusor.h"

namespace trainctl::train {

// The device a rank trains on, from the spec's training.device:
//   auto  the rank's GPU when it has one, else the CPU;
//   cpu   the CPU;
//   cuda  the rank's GPU, or an error saying why there is none (a LibTorch
//         without CUDA, or no GPU given to this slot): never a silent CPU.
// The worker gives each slot its own GPU through CUDA_VISIBLE_DEVICES, so a
// rank sees one GPU, cuda:0. A rank started some other way that sees several
// takes local_rank modulo their number.
absl::StatusOr<torch::Device> ResolveDevice(const std::string& wanted,
                                            int local_rank);

// Makes `device` the process's current device, so that allocations, the
// NCCL communicator and the caching allocator's streams all land on it
// instead of on cuda:0. Nothing for the CPU.
void BindDevice(const torch::Device& device);

// The state of `device`'s default random generator (the CPU's for the
// CPU), and setting it back: dropout draws on the device of its input.
torch::Tensor GeneratorState(const torch::Device& device);
void SetGeneratorState(const torch::Device& device, const torch::Tensor& state);

}  // namespace trainctl::train
