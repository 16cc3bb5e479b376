#pragma once

// Everything that differs between the two LibTorch generations trainctl
// builds against, Debian's 1.13 and PyTorch 2.x, in one place. The rest of
// the worker uses these names and never tests a torch version itself.

#include <ATen/autocast_mode.h>

#include <cmath>
#include <limits>
#include <optional>

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/torch.h>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#define TRAINCTL_TORCH_2 1
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#define TRAINCTL_TORCH_2 0
#endif

namespace trainctl::train {

// The collective group the training loop calls. Gloo and NCCL derive from
// c10d::ProcessGroup in 1.13 and from c10d::Backend in 2.x, where
// ProcessGroup became a dispatcher over backends whose constructor changed
// twice; trainctl holds one backend and calls it directly in both.
#if TRAINCTL_TORCH_2
using CollectiveGroup = c10d::Backend;
#else
using CollectiveGroup = c10d::ProcessGroup;
#endif
using GroupPtr = c10::intrusive_ptr<CollectiveGroup>;

// Ends the group's communicators before it is destroyed: 2.x's NCCL backend
// expects shutdown() first (else it warns and may hang in its watchdog);
// 1.13 has no such call.
inline void ShutdownGroup(CollectiveGroup& group) {
#if TRAINCTL_TORCH_2
  group.shutdown();
#else
  (void)group;
#endif
}

// c10d::Store::clone() (a copy sharing the underlying store, for another
// thread) is pure virtual in 2.x and absent from 1.13: stores define it in
// both and mark it with this.
#if TRAINCTL_TORCH_2
#define TRAINCTL_STORE_CLONE_OVERRIDE override
#else
#define TRAINCTL_STORE_CLONE_OVERRIDE
#endif

// torch::optim::Optimizer::state() is keyed by the parameter's TensorImpl:
// as a string of its address up to 2.1, as the pointer itself since 2.2.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
using OptimizerStateKey = void*;
inline OptimizerStateKey StateKeyOf(const torch::Tensor& param) {
  return param.unsafeGetTensorImpl();
}
#else
using OptimizerStateKey = std::string;
inline OptimizerStateKey StateKeyOf(const torch::Tensor& param) {
  return c10::guts::to_string(param.unsafeGetTensorImpl());
}
#endif

// A profiler event's start and length in microseconds: 1.13 keeps them in
// microseconds, 2.x in nanoseconds.
inline double ProfilerEventStartUs(const torch::autograd::profiler::KinetoEvent& e) {
#if TRAINCTL_TORCH_2
  return static_cast<double>(e.startNs()) / 1000.0;
#else
  return static_cast<double>(e.startUs());
#endif
}
inline double ProfilerEventDurationUs(const torch::autograd::profiler::KinetoEvent& e) {
#if TRAINCTL_TORCH_2
  return static_cast<double>(e.durationNs()) / 1000.0;
#else
  return static_cast<double>(e.durationUs());
#endif
}

// torch's fused AdamW kernel, which updates a list of parameters (one
// device, one dtype) in one launch: 2.x has it for CUDA and CPU, 1.13 not
// at all (there FusedAdamW is torch::optim::AdamW's loop, and this is
// never called).
inline constexpr bool kFusedAdamW = TRAINCTL_TORCH_2 != 0;

inline void FusedAdamWUpdate(at::TensorList params, at::TensorList grads,
                             at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                             at::TensorList steps, double lr, double beta1,
                             double beta2, double weight_decay, double eps) {
#if TRAINCTL_TORCH_2
  at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs,
                    /*max_exp_avg_sqs=*/{}, steps, lr, beta1, beta2,
                    weight_decay, eps, /*amsgrad=*/false, /*maximize=*/false);
#else
  (void)params, (void)grads, (void)exp_avgs, (void)exp_avg_sqs, (void)steps;
  (void)lr, (void)beta1, (void)beta2, (void)weight_decay, (void)eps;
#endif
}

// The fused AMP kernels (unscale with a non-finite check, scale update)
// have a CPU implementation from 2.x on; 1.13 has them for CUDA only.
inline constexpr bool kAmpKernelsOnCpu = TRAINCTL_TORCH_2 != 0;

// Autocast per device type. 2.x has one call taking the device type; its
// old per-device names still exist there but warn on every call, which is
// once per micro-batch here.
struct AutocastState {
  bool enabled = false;
  at::ScalarType dtype = at::kFloat;
};

inline AutocastState GetAutocast(c10::DeviceType type) {
#if TRAINCTL_TORCH_2
  return {at::autocast::is_autocast_enabled(type),
          at::autocast::get_autocast_dtype(type)};
#else
  if (type == c10::DeviceType::CUDA) {
    return {at::autocast::is_enabled(), at::autocast::get_autocast_gpu_dtype()};
  }
  return {at::autocast::is_cpu_enabled(), at::autocast::get_autocast_cpu_dtype()};
#endif
}

// The dtype is set only when autocast is on: 1.13 refuses any CPU dtype but
// bf16, float among them.
inline void SetAutocast(c10::DeviceType type, const AutocastState& state) {
#if TRAINCTL_TORCH_2
  if (state.enabled) at::autocast::set_autocast_dtype(type, state.dtype);
  at::autocast::set_autocast_enabled(type, state.enabled);
#else
  if (type == c10::DeviceType::CUDA) {
    if (state.enabled) at::autocast::set_autocast_gpu_dtype(state.dtype);
    at::autocast::set_enabled(state.enabled);
  } else {
    if (state.enabled) at::autocast::set_autocast_cpu_dtype(state.dtype);
    at::autocast::set_cpu_enabled(state.enabled);
  }
#endif
}

// softmax(q k^T / sqrt(d)) v over [B, H, T, d] heads, with dropout on the
// weights while training. 2.x has the fused kernel (flash or memory-
// efficient attention on a GPU, never materializing the T x T scores);
// 1.13 only an experimental one, so there the same arithmetic in plain ops.
inline torch::Tensor ScaledDotProductAttention(const torch::Tensor& q,
                                               const torch::Tensor& k,
                                               const torch::Tensor& v,
                                               bool causal, double dropout,
                                               bool training,
                                               const torch::Tensor& keep = {}) {
  // keep: bool, broadcast to [B, H, T, T], true where a query may attend
  // to a key (a padding mask); undefined for all.
  const double p = training ? dropout : 0.0;
#if TRAINCTL_TORCH_2
  return at::scaled_dot_product_attention(
      q, k, v, keep.defined() ? std::optional<at::Tensor>(keep) : std::nullopt, p,
      causal);
#else
  torch::Tensor scores =
      torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(q.size(-1)));
  if (causal) {
    const int64_t t = q.size(-2);
    auto mask = torch::ones({t, t}, torch::dtype(torch::kBool).device(q.device())).triu(1);
    scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  }
  if (keep.defined()) {
    scores = scores.masked_fill(keep.logical_not(), -std::numeric_limits<float>::infinity());
  }
  return torch::matmul(torch::dropout(torch::softmax(scores, -1), p, training), v);
#endif
}

}  // namespace trainctl::train
