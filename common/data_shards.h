#pragma once

// A data path that names several files, read as one dataset: a directory
// (its regular files whose names do not start with '.') or a glob pattern
// (its matches, e.g. tokens/*.bin; only the file name may hold * ? or [,
// and names starting with '.' match only a pattern that does), in byte
// order of their paths, so every
// node that sees the same files indexes them the same way. Shards may
// differ in size. Torch-free: the data probe counts sharded sets too.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainctl {

// Most shards one path may name.
inline constexpr int kMaxShards = 100000;

// Whether `path` names shards (a directory, or a pattern with * ? or [
// that is not itself the name of an existing file) rather than one file.
bool NamesShards(const std::string& path);

// The files `path` names: {path} for a plain file path (checked later, by
// whoever opens it), else the directory's files or the pattern's matches,
// sorted. INVALID_ARGUMENT "FIELD: PATH: why" when a directory or pattern
// names no regular file, more than kMaxShards, or cannot be read.
absl::StatusOr<std::vector<std::string>> ResolveShards(const std::string& field,
                                                       const std::string& path);

}  // namespace trainctl
