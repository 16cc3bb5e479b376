#pragma once

// The files jobs ship from their submitters' machines (common/shipped_files.h),
// kept by content: <dir>/<sha256>, with <dir>/<sha256>.owners listing the
// users who uploaded that content. A job may name only files its owner
// uploaded, so knowing a digest is not enough to obtain a file.

#include <chrono>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/atomic_file.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl::coordinator {

class FileStore {
 public:
  // `dir` is created (0700) when missing.
  FileStore(std::string dir, int64_t max_file_bytes);

  const std::string& dir() const { return dir_; }

  // Stores what `produce` hands its sink under `sha256` for `owner`: only
  // when it is exactly `size` bytes with that digest (otherwise
  // INVALID_ARGUMENT and nothing is kept). Returns true without calling
  // `produce` when `owner` has uploaded that content before.
  absl::StatusOr<bool> Put(const std::string& owner, const std::string& sha256,
                           int64_t size,
                           const std::function<absl::Status(const ByteSink&)>& produce);

  // OK when `owner` uploaded every file the spec's shipped_files names, with
  // the size listed; otherwise which one is missing (FAILED_PRECONDITION) or
  // not theirs (PERMISSION_DENIED), naming the field.
  absl::Status CheckJobFiles(const std::string& owner, const v1::JobSpec& spec) const;

  // Hands the file's content to `chunk` in pieces of at most `chunk_bytes`
  // until it returns false. NOT_FOUND when it is not kept.
  absl::Status Read(const std::string& sha256, size_t chunk_bytes,
                    const std::function<bool(absl::string_view)>& chunk) const;

  // Deletes the files no job names (`referenced`) that nobody uploaded for
  // `min_age` (a file is uploaded before the job that names it is
  // submitted), and unfinished uploads as old. Returns how many went.
  int Sweep(const std::set<std::string>& referenced, std::chrono::seconds min_age);

 private:
  std::string BlobPath(const std::string& sha256) const;
  std::string OwnersPath(const std::string& sha256) const;
  bool OwnsLocked(const std::string& owner, const std::string& sha256) const;

  const std::string dir_;
  const int64_t max_file_bytes_;
  // Serializes the owners files' read-modify-write and the sweep.
  mutable std::mutex mu_;
  std::atomic<int64_t> next_upload_{0};  // names uploads being written
};

}  // namespace trainctl::coordinator
