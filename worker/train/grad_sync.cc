#include "worker/train/grad_sync.h"

#include <cmath>

namespace trainctl::train {

GradientSync::GradientSync(std::vector<torch::Tensor> params,
                           c10::intrusive_ptr<c10d::ProcessGroup> group,
                           int world_size, int extra_slots)
    : params_(std::move(params)),
      group_(std::move(group)),
      world_size_(world_size),
      extra_slots_(extra_slots) {
  int64_t total = extra_slots_;
  for (const auto& p : params_) total += p.numel();
  buffer_ = torch::zeros({total}, params_.front().options().dtype(torch::kFloat32));
}

void GradientSync::AllReduceMean(torch::Tensor& buffer) {
  if (!group_ || world_size_ == 1) return;
  std::vector<torch::Tensor> tensors{buffer};
  group_->allreduce(tensors)->wait();
  buffer.div_(world_size_);
}

void GradientSync::AverageGradients(std::vector<double>* extras) {
  if (!group_ || world_size_ == 1) return;
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (const auto& p : params_) {
    auto slot = buffer_.narrow(0, offset, p.numel());
    if (p.grad().defined()) {
      slot.copy_(p.grad().reshape(-1));
    } else {
      slot.zero_();
    }
    offset += p.numel();
  }
  for (int i = 0; i < extra_slots_; ++i) {
    buffer_[offset + i] = i < static_cast<int>(extras->size()) ? (*extras)[i] : 0.0;
  }
  AllReduceMean(buffer_);
  offset = 0;
  for (auto& p : params_) {
    auto slot = buffer_.narrow(0, offset, p.numel()).view_as(p);
    if (p.grad().defined()) {
      p.mutable_grad().copy_(slot);
    } else {
      p.mutable_grad() = slot.to(p.dtype()).clone();
    }
    offset += p.numel();
  }
  for (int i = 0; i < extra_slots_ && i < static_cast<int>(extras->size()); ++i) {
    (*extras)[i] = buffer_[offset + i].item<double>();
  }
}

void GradientSync::AverageParameters() {
  if (!group_ || world_size_ == 1) return;
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (const auto& p : params_) {
    buffer_.narrow(0, offset, p.numel()).copy_(p.reshape(-1));
    offset += p.numel();
  }
  AllReduceMean(buffer_);
  offset = 0;
  for (auto& p : params_) {
    p.copy_(buffer_.narrow(0, offset, p.numel()).view_as(p));
    offset += p.numel();
  }
}

std::vector<double> GradientSync::AverageScalars(
    const std::vector<double>& values) {
  if (!group_ || world_size_ == 1) return values;
  torch::Tensor t = torch::tensor(values, torch::kFloat64);
  AllReduceMean(t);
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

double GradientSync::GradientNorm() const {
  double sum = 0;
  for (const auto& p : params_) {
    if (p.grad().defined()) sum += p.grad().to(torch::kFloat64).pow(2).sum().item<double>();
  }
  return std::sqrt(sum);
}

void BroadcastFromRankZero(const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                           const std::vector<torch::Tensor>& tensors) {
  if (!group) return;
  torch::NoGradGuard no_grad;
  for (auto t : tensors) {
    std::vector<torch::Tensor> one{t};
    group->broadcast(one)->wait();
  }
}

}  // namespace trainctl::train
