#pragma once

// The samples of one WebDataset tar shard: members grouped by key (the
// member path up to the first '.' of its file name, as WebDataset groups
// them), each sample an image member (.jpg, .jpeg or .png) and an integer
// class label (.cls, decimal text). Only headers and labels are read; the
// images stay in the file, located by offset. Torch-free: the data probe
// counts samples with it, and the ranks read images by it.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace trainctl {

struct WebDatasetSample {
  int64_t image_offset = 0;  // bytes into the tar
  int64_t image_size = 0;
  bool png = false;          // else JPEG
  int64_t label = 0;
};

// Reads the tar at `fd` (`file_size` bytes; ustar, GNU and pax headers, as
// Python's tarfile and GNU tar write them). Members of other extensions
// are skipped. INVALID_ARGUMENT "FIELD: PATH: why" for a file that is not
// a tar, ends inside a member, or has a sample without an image or label,
// or a label that is not a non-negative integer; samples are named by
// their position (sample 12), never by member names or contents.
// DEADLINE_EXCEEDED past `deadline`.
absl::StatusOr<std::vector<WebDatasetSample>> IndexWebDatasetTar(
    int fd, int64_t file_size, const std::string& field,
    const std::string& path, absl::Time deadline = absl::InfiniteFuture());

}  // namespace trainctl
