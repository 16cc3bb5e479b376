#include "worker/train/device.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstdlib>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace trainctl::train {

absl::StatusOr<torch::Device> ResolveDevice(const std::string& wanted,
                                            int local_rank) {
  if (wanted == "cpu") return torch::Device(torch::kCPU);
#ifdef TRAINCTL_WITH_CUDA
  const int64_t gpus = torch::cuda::device_count();
  if (gpus > 0) {
    return torch::Device(torch::kCUDA,
                         static_cast<c10::DeviceIndex>(local_rank % gpus));
  }
  if (wanted == "auto") return torch::Device(torch::kCPU);
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return absl::FailedPreconditionError(absl::StrCat(
      "training.device: cuda, but this rank sees no GPU (",
      visible == nullptr ? std::string("CUDA_VISIBLE_DEVICES is unset")
                         : absl::StrCat("CUDA_VISIBLE_DEVICES='", visible, "'"),
      "): the worker has no GPU for this slot (see its --gpus), or the "
      "NVIDIA driver is missing; or use device: auto or cpu"));
#else
  (void)local_rank;
  if (wanted == "auto") return torch::Device(torch::kCPU);
  return absl::FailedPreconditionError(
      "training.device: cuda, but this worker was built without CUDA "
      "(Debian's LibTorch is CPU-only; `make build-cuda` builds against a "
      "CUDA wheel, docs/gpu.md); or use device: auto or cpu");
#endif
}

void BindDevice(const torch::Device& device) {
  if (!device.is_cuda()) return;
  c10::impl::getDeviceGuardImpl(device.type())->setDevice(device);
}

torch::Tensor GeneratorState(const torch::Device& device) {
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void SetGeneratorState(const torch::Device& device, const torch::Tensor& state) {
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

}  // namespace trainctl::train
