#pragma once

// The header of a NumPy .npy file, as np.save writes it (format versions
// 1.0 to 3.0): element type, shape, and where the elements begin. Torch-free:
// the data probe counts .npy samples with it, and the ranks read them.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainctl {

struct NpyHeader {
  char kind = 0;       // 'f' float, 'i' signed, 'u' unsigned, 'b' bool
  int item_bytes = 0;  // 1, 2, 4 or 8
  std::vector<int64_t> shape;
  int64_t data_offset = 0;  // bytes before the first element

  int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  // Elements per row: the product of shape[1:] (1 for a 1-D array).
  int64_t row_elements() const;
  int64_t row_bytes() const { return row_elements() * item_bytes; }
  // NumPy's name for the element type: float32, uint16, bool, ...
  std::string DtypeName() const;
};

// Reads the header of the open file `fd` (of `file_size` bytes) and checks
// that the file holds exactly the elements it announces, in C order and
// little-endian. Errors are INVALID_ARGUMENT "FIELD: PATH: why", and never
// quote the header or any other byte of the file.
absl::StatusOr<NpyHeader> ReadNpyHeader(int fd, int64_t file_size,
                                        const std::string& field,
                                        const std::string& path);

}  // namespace trainctl
