#include "worker/train/torch_info.h"

#include <torch/torch.h>
#include <torch/version.h>

#include "absl/strings/str_cat.h"

namespace trainctl::train {

std::string TorchBuildInfo() {
  std::string info = absl::StrCat("LibTorch ", TORCH_VERSION);
#ifdef TRAINCTL_WITH_CUDA
  absl::StrAppend(&info, " (CUDA, NCCL)");
#else
  absl::StrAppend(&info, " (CPU, Gloo)");
#endif
  return info;
}

}  // namespace trainctl::train
