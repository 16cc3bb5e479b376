#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace trainctl::train {

// Decompressed copies of gzip-compressed data files on the worker's local
// disk, so that a job, its restarts and the next job on the same data do not
// inflate the same file again (26 MB of Fashion-MNIST gzip take about half
// a second to inflate, most of a warm start).
//
// A copy is named after the source's real path, size, mtime, ctime, inode
// and device, all taken from one open descriptor, and the source is checked
// again after decoding, so an edited, replaced or still-growing source is a
// miss, never stale data. A copy is written under a temporary name, fsynced
// and renamed, so a reader sees a whole copy or none; ranks on one node that
// miss together each write their own and the last rename wins with
// identical bytes. Over the limit, the least recently used copies go first;
// only files named like copies are ever counted or deleted. The directory
// must be this user's and writable by no one else. Any failure (disk full,
// no permission, a corrupt gzip) only means the source is read as before:
// the cache never fails a job. Thread-safe; one directory may be shared by
// any number of processes.
class DecodedFileCache {
 public:
  enum class Outcome { kNotCompressed, kHit, kStored, kBypassed };
  struct Resolved {
    std::string path;  // the file to read: the copy, or the source itself
    Outcome outcome = Outcome::kNotCompressed;
    std::string note;  // why it was bypassed, for the rank's log
    ino_t inode = 0;   // the copy's, so a reader drops only the copy it read
  };

  // Free space a copy must leave on the cache's filesystem by default.
  static constexpr int64_t kDefaultFreeSpaceReserve = int64_t{256} << 20;

  // `dir` is created (0700) on first use. `limit_bytes` bounds the copies
  // kept; a file decoding to more than that is never cached, nor one whose
  // copy would leave less than `free_space_reserve` bytes free.
  DecodedFileCache(std::string dir, int64_t limit_bytes,
                   int64_t free_space_reserve = kDefaultFreeSpaceReserve);

  // The cache the worker agent configured for this rank process through
  // TRAINCTL_DATA_CACHE_DIR and TRAINCTL_DATA_CACHE_MB; null when unset or
  // the limit is 0.
  static std::unique_ptr<DecodedFileCache> FromEnvironment();

  // Where to read `path` from: for a gzip file, its decoded copy (made now
  // on a miss); for anything else, `path` unchanged.
  Resolved Resolve(const std::string& path) const;

  const std::string& dir() const { return dir_; }

  // 16 hex digits naming one version of the file open at `fd` (`st` its
  // fstat): its real path, size, mtime, ctime, inode and device. Keys
  // other per-file facts (shard checksums) the way copies are keyed.
  static absl::StatusOr<std::string> VersionKey(int fd, const struct stat& st);

  // Creates the directory, or says why it is not safe to use ("" = it is).
  std::string UnusableDirReason() const;
  // Resolutions so far that found a copy, and that made one.
  int hits() const { return hits_.load(); }
  int stored() const { return stored_.load(); }

 private:
  Resolved Store(int source_fd, const std::string& source,
                 const std::string& target) const;
  void Evict(const std::string& keep) const;

  std::string dir_;
  int64_t limit_bytes_;
  int64_t free_space_reserve_;
  mutable std::atomic<int> hits_{0};
  mutable std::atomic<int> stored_{0};
};

}  // namespace trainctl::train
