#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainctl::agent {

// The GPUs a worker gives its slots, one each, from its --gpus flag:
//   auto  the GPUs CUDA_VISIBLE_DEVICES lists, when the agent was started
//         with it (a container runtime or a batch system sets it); else one
//         per /dev/nvidiaN device node, numbered 0.. as CUDA numbers them in
//         PCI order (ranks get CUDA_DEVICE_ORDER=PCI_BUS_ID);
//   none  no GPU;
//   a comma-separated list of CUDA device ids ("0,1,3", or GPU UUIDs).
// `visible` is the agent's CUDA_VISIBLE_DEVICES (null when unset); `dev` is
// where the device nodes are (/dev). INVALID_ARGUMENT names the flag and the
// entry at fault.
absl::StatusOr<std::vector<std::string>> ParseGpus(const std::string& flag,
                                                   const char* visible,
                                                   const std::string& dev);

// Which of the slots' GPUs are free. Not thread-safe (the agent's lock).
class GpuPool {
 public:
  explicit GpuPool(std::vector<std::string> gpus) : free_(std::move(gpus)) {}
  // The free GPU returned longest ago; nullopt when every one is taken.
  std::optional<std::string> Take();
  void Give(std::string gpu);
  int free_count() const { return static_cast<int>(free_.size()); }

 private:
  std::vector<std::string> free_;
};

}  // namespace trainctl::agent
