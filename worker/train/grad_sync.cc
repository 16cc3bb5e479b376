#include "worker/train/grad_sync.h"

#include <cmath>

namespace trainctl::train {

RankCollectives::RankCollectives(std::vector<torch::Tensor> params,
                           c10::intrusive_ptr<c10d::ProcessGroup> group,
                           int world_size)
    : params_(std::move(params)),
      group_(std::move(group)),
      world_size_(world_size) {
  int64_t total = 0;
  for (const auto& p : params_) total += p.numel();
  buffer_ = torch::zeros({total}, params_.front().options().dtype(torch::kFloat32));
}

void RankCollectives::AllReduceMean(torch::Tensor& buffer) {
  if (!group_ || world_size_ == 1) return;
  std::vector<torch::Tensor> tensors{buffer};
  group_->allreduce(tensors)->wait();
  buffer.div_(world_size_);
}

void RankCollectives::AverageParameters() {
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

std::vector<double> RankCollectives::AverageScalars(
    const std::vector<double>& values) {
  if (!group_ || world_size_ == 1) return values;
  torch::Tensor t = torch::tensor(values, torch::kFloat64);
  AllReduceMean(t);
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

double RankCollectives::GradientNorm() const {
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
