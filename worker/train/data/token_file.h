#pragma once

// Next-token windows read from a token file as batches need them.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/train/data/dataset.h"

namespace trainctl::train {

// A flat stream of little-endian token ids (1, 2 or 4 bytes each) in a
// file, cut into next-token windows like TokenWindowDataset: sample i covers
// tokens [i*seq_len, i*seq_len + seq_len + 1). Nothing is loaded: each
// Gather reads its windows with pread, so the first step waits for no
// load, the ranks on a node share the file's page cache, and a rank's
// resident memory does not grow with the file. (A memory map reads the same
// pages, but every page a rank touched would stay counted in its RSS, and
// after one epoch that is the whole file per rank.)
class TokenFileDataset : public Dataset {
 public:
  struct Options {
    std::string path;
    std::string field;        // the spec field that named it, for errors
    int width = 2;            // bytes per token id
    int64_t seq_len = 0;
    int64_t windows = 0;      // windows used (0 = all the file holds)
    int64_t offset = 0;       // bytes before the first token (a .npy header)
  };

  // Opens the file. INVALID_ARGUMENT naming the field and path when it is
  // not a regular readable file, its size is not a multiple of the width,
  // or it holds not even one window.
  static absl::StatusOr<std::shared_ptr<TokenFileDataset>> Open(Options options);
  ~TokenFileDataset() override;

  int64_t size() const override { return windows_; }
  // inputs and targets int64 [n, seq_len]. Throws std::runtime_error naming
  // the field, path and token offset (never its bytes) for an id over the
  // limit or a file that shrank; std::out_of_range for a bad index.
  Batch Gather(const std::vector<int64_t>& indices) const override;

  // The largest id among the windows used, reading them once in chunks
  // (memory bounded by the chunk). INVALID_ARGUMENT for an id over 2^31-1.
  absl::StatusOr<int64_t> MaxId() const;

  // From now on ids must be below `limit`, checked as each window is read:
  // a declared vocabulary then needs no scan. Call before sharing.
  void CheckIdsBelow(int64_t limit) { vocab_limit_ = limit; }

 private:
  TokenFileDataset(Options options, int fd, int64_t windows);
  // Reads tokens [first, first + count) into `out` as int64 ids.
  void ReadTokens(int64_t first, int64_t count, std::vector<unsigned char>* bytes,
                  int64_t* out) const;

  Options options_;
  int fd_;
  int64_t windows_;
  int64_t vocab_limit_ = 0;  // 0: any id up to 2^31-1
};

}  // namespace trainctl::train
