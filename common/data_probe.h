#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl {

// Counts a spec's samples from file headers and sizes, without loading the
// data or linking torch. It opens user-named files, so it runs only where
// the data lives: on a worker, as the user its ranks run as (the agent's
// data-probe handler). The coordinator never calls it (security review H2).

// Bounds on one probe, so that a hostile spec cannot make it read forever.
struct DataProbeLimits {
  // A file that would need more bytes read than this (csv rows are counted
  // by reading the file) is not counted; the ranks count it at start.
  int64_t max_bytes_read = int64_t{256} << 20;
  // Past this, the probe gives up with DEADLINE_EXCEEDED.
  absl::Time deadline = absl::InfiniteFuture();
};

struct DataSampleCounts {
  // After train_limit and the eval_fraction split, exactly as the ranks.
  int64_t train_samples = 0;
  // The eval set (eval_limit applied) or the eval_fraction split; 0 without.
  int64_t eval_samples = 0;
};

// Opens `path` (named by spec field `field` in errors) read-only if it is a
// regular file; symlinks are followed. A FIFO, device, socket or directory
// is refused without being opened. Returns the descriptor, which the caller
// closes; fills `stat_out` when given. Errors never quote the file's bytes.
absl::StatusOr<int> OpenRegularFile(const std::string& field,
                                    const std::string& path,
                                    struct stat* stat_out = nullptr);

// Reads exactly `size` bytes at `offset` of `fd` into `out`; false when the
// file ends first or a read fails.
bool ReadFullyAt(int fd, int64_t offset, size_t size, std::string* out);

// Checks that every file the format needs is a readable regular file
// (images and labels for idx, the eval set's too when given) and counts the
// samples. Errors name the spec field and the path, never bytes of a file:
//   INVALID_ARGUMENT: missing, unreadable, not a regular file (a FIFO, a
//     device such as /dev/zero, a directory), or not of the format;
//   RESOURCE_EXHAUSTED: over limits.max_bytes_read;
//   DEADLINE_EXCEEDED: past limits.deadline;
//   UNIMPLEMENTED: `tensors` files (counting them needs torch), after the
//     files were checked.
absl::StatusOr<DataSampleCounts> ProbeDataSamples(
    const v1::DataSpec& data, const DataProbeLimits& limits = {});

}  // namespace trainctl
