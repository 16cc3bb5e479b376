#pragma once

// TorchScript modules made in C++ and saved as Python's torch.jit.save
// would, for the tests that load them as model.path.

#include <gtest/gtest.h>
#include <torch/script.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace trainctl::train {

// Saves `module` to a new temp file and returns its path (the caller
// removes it).
inline std::string SaveToTempFile(const torch::jit::Module& module) {
  char path[] = "/tmp/trainctl-ts-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  module.save(path);
  return path;
}

}  // namespace trainctl::train
