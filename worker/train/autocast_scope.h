#pragma once

#include <string>

#include "worker/train/torch_compat.h"

namespace trainctl::train {

// Autocast to bf16 or fp16 on one device type for the scope's lifetime, then
// back to what was set before. Scopes nest: the gradient-checkpoint
// recompute opens one inside backward, after the forward's has closed.
class AutocastScope {
 public:
  // precision: "fp32" (no autocast), "bf16" or "fp16".
  AutocastScope(const std::string& precision, const torch::Device& device)
      : AutocastScope(ForPrecision(precision), device.type()) {}
  AutocastScope(const AutocastState& wanted, c10::DeviceType type)
      : type_(type), before_(GetAutocast(type)) {
    SetAutocast(type_, wanted);
  }
  ~AutocastScope() {
    SetAutocast(type_, before_);
    // The casts autocast cached are only valid while it stays on.
    if (!before_.enabled) at::autocast::clear_cache();
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

  static AutocastState ForPrecision(const std::string& precision) {
    if (precision == "bf16") return {true, at::kBFloat16};
    if (precision == "fp16") return {true, at::kHalf};
    return {false, at::kFloat};
  }

 private:
  c10::DeviceType type_;
  AutocastState before_;
};

}  // namespace trainctl::train
