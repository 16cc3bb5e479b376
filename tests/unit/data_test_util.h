#pragma once

// Shared fixture for data_test.cc and data_tokens_test.cc: each test gets a
// fresh temp dir for the files it writes.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/unit/temp_dir_test.h"
#include "worker/train/data/dataset.h"

namespace trainctl::train::data_testing {

class DataTest : public trainctl::testing::TempDirTest {
 protected:
  // An IDX file of unsigned bytes (magic 0x08, `dims.size()` dimensions).
  std::string WriteIdx(const std::string& name, const std::vector<int>& dims,
                       const std::vector<uint8_t>& payload, bool gzip) {
    std::string bytes = {0, 0, 8, static_cast<char>(dims.size())};
    for (uint32_t d : dims) {
      for (int s = 24; s >= 0; s -= 8) bytes.push_back(char((d >> s) & 0xff));
    }
    bytes.append(payload.begin(), payload.end());
    return Write(name, bytes, gzip);
  }

  static v1::JobSpec Spec(const std::string& format) {
    v1::JobSpec spec;
    spec.set_seed(3);
    spec.set_task(format == "tokens" || format == "text" ? "language_model"
                                                         : "classification");
    v1::DataSpec* d = spec.mutable_data();
    d->set_format(format);
    d->set_delimiter(",");
    d->set_token_dtype("uint16");
    d->set_seq_len(128);
    return spec;
  }

};

// Runs `script` with the first python3 that runs it to success (a pyenv
// python3 may shadow Debian's, which has python3-torch and python3-numpy).
inline bool RunPython(const std::string& script, const std::string& args) {
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    const std::string cmd =
        std::string(py) + " " + script + " " + args + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return true;
  }
  return false;
}

inline torch::Tensor I64(std::vector<int64_t> v) {
  return torch::tensor(v, torch::kInt64);
}

inline std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// Token ids as `width`-byte little-endian integers.
inline std::string LittleEndian(const std::vector<uint32_t>& ids, int width) {
  std::string out;
  for (uint32_t id : ids) {
    for (int b = 0; b < width; ++b) out.push_back(char((id >> (8 * b)) & 0xff));
  }
  return out;
}

}  // namespace trainctl::train::data_testing
