#pragma once

// The DataInfo a rank gets from common data sets, for tests that build
// models without reading files.

#include <cstdint>
#include <utility>
#include <vector>

#include "worker/train/data/dataset.h"

namespace trainctl::train {

// Images of `shape` in 10 classes (Fashion-MNIST's [1, 28, 28] by default).
inline DataInfo Images(std::vector<int64_t> shape = {1, 28, 28}) {
  DataInfo info;
  info.input_shape = std::move(shape);
  info.num_classes = 10;
  return info;
}

// Windows of `seq_len` token ids below `vocab`, in 3 classes.
inline DataInfo Tokens(int64_t seq_len, int64_t vocab) {
  DataInfo info;
  info.input_shape = {seq_len};
  info.integer_inputs = true;
  info.vocab_size = vocab;
  info.num_classes = 3;
  return info;
}

}  // namespace trainctl::train
