#pragma once

// How far apart two runs' parameters ended: the worst, over the tensors, of
// max|a - b| / max|b|. Shared by the data-parallel equivalence tests (CPU
// and GPU).

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <vector>

namespace trainctl::train {

inline double MaxRelativeDifference(const std::vector<torch::Tensor>& a,
                                    const std::vector<torch::Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  EXPECT_FALSE(a.empty());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double scale = std::max(b[i].abs().max().item<double>(), 1e-12);
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>() / scale);
  }
  return worst;
}

}  // namespace trainctl::train
