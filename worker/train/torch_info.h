#pragma once

#include <string>

namespace trainctl::train {

// "LibTorch 1.13.1 (CPU)" or with the CUDA/NCCL versions it was built with;
// for --version and registration.
std::string TorchBuildInfo();

}  // namespace trainctl::train
