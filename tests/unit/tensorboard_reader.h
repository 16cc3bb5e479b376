#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainctl::testing {

// One scalar of an event file.
struct TensorBoardScalar {
  std::string tag;
  int64_t step = 0;
  float value = 0;
  double wall_time = 0;
};

struct TensorBoardEventFile {
  std::string file_version;  // of the first record
  int events = 0;            // records, the file_version one included
  std::vector<TensorBoardScalar> scalars;  // in file order
};

// Reads a whole TensorBoard event file for tests: checks both masked CRCs of
// every TFRecord and that the first record carries a file_version. Errors
// name the file, the record and its byte offset (a bad CRC, a truncated
// record, bytes that do not parse as an Event).
absl::StatusOr<TensorBoardEventFile> ReadTensorBoardEventFile(
    const std::string& path);

}  // namespace trainctl::testing
