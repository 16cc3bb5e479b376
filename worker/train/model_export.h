#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainctl::train {

// A trained model out of trainctl, in formats Python loads (trainctl
// export): safetensors for any model, and a TorchScript job's own module
// with the trained weights. Runs where the checkpoint file is readable.

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// The safetensors header: its 8-byte little-endian length, then the JSON
// ({"__metadata__": {...}, name: {dtype, shape, data_offsets}}) padded with
// spaces to a multiple of 8, so every tensor's data starts 8-aligned.
// Tensors' data follows in the given order. INVALID_ARGUMENT naming the
// tensor when its dtype has no safetensors name or a name repeats.
absl::StatusOr<std::string> SafetensorsHeader(
    const NamedTensors& tensors, const std::map<std::string, std::string>& metadata);

// The whole file in memory (for an upload: models that fit in memory).
absl::StatusOr<std::string> EncodeSafetensors(
    const NamedTensors& tensors, const std::map<std::string, std::string>& metadata);

// Writes the whole file atomically (a temporary, then renamed): header and
// each tensor's bytes, on the CPU, contiguous, little-endian. Errors name
// `path`.
absl::Status WriteSafetensors(const NamedTensors& tensors,
                              const std::map<std::string, std::string>& metadata,
                              const std::string& path);

// Loads the TorchScript module at `module_path` (the job's model.path),
// copies `tensors` into its parameters and buffers by name, and saves it
// in eval mode to `out_path` atomically. INVALID_ARGUMENT naming the first tensor
// whose name or shape does not match (the checkpoint is of another model).
absl::Status SaveTorchScriptWithState(const std::string& module_path,
                                      const NamedTensors& tensors,
                                      const std::string& out_path);

}  // namespace trainctl::train
