#pragma once

#include <chrono>
#include <string>

#include "worker/train/torch_compat.h"

namespace trainctl::train {

struct GroupOptions {
  // The address this rank's Gloo device binds and announces.
  std::string host = "127.0.0.1";
  // A collective that takes longer fails instead of hanging.
  std::chrono::milliseconds timeout{120'000};
  // Gloo's worker threads; a rank's collectives run one at a time, in order.
  int gloo_threads = 1;
};

// The rank's collective group over `store`: Gloo (TCP) for CPU tensors,
// NCCL for CUDA tensors. Like c10d itself they throw c10::Error when the
// group cannot form. This file is the only one that sees the backends'
// headers (ProcessGroupGloo.hpp pulls in gloo's, ProcessGroupNCCL.hpp
// CUDA's and NCCL's).
GroupPtr MakeGlooGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                       int world_size, const GroupOptions& options);
#ifdef TRAINCTL_WITH_CUDA
GroupPtr MakeNcclGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                       int world_size, const GroupOptions& options);
#endif

}  // namespace trainctl::train
