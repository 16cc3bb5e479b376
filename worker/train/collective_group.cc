#include "worker/train/collective_group.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#ifdef TRAINCTL_WITH_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace trainctl::train {

GroupPtr MakeGlooGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                       int world_size, const GroupOptions& options) {
  auto gloo = c10d::ProcessGroupGloo::Options::create(options.timeout);
  gloo->devices.push_back(
      c10d::ProcessGroupGloo::createDeviceForHostname(options.host));
  gloo->threads = options.gloo_threads;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size,
                                                     gloo);
}

#ifdef TRAINCTL_WITH_CUDA
GroupPtr MakeNcclGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                       int world_size, const GroupOptions& options) {
  auto nccl = c10d::ProcessGroupNCCL::Options::create();
  // NCCL's own default is 10 minutes; the job's collective timeout applies
  // to both backends.
  nccl->timeout = options.timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size,
                                                     nccl);
}
#endif

}  // namespace trainctl::train
