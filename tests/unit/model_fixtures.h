#pragma once

// For tests that build models without reading files: a parsed spec, and
// the DataInfo a rank gets from common data sets.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/spec.h"
#include "worker/train/data/dataset.h"

namespace trainctl::train {

// The spec `yaml` (a failure of the test when it does not parse).
inline v1::JobSpec Spec(const std::string& yaml) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(yaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : v1::JobSpec();
}

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
