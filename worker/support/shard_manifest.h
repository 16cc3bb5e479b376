#pragma once

// What each rank sees of a sharded data set, so that ranks on nodes whose
// files differ refuse to train on different data. Torch-free.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/support/decoded_cache.h"

namespace trainctl::train {

// One line "FIELD<TAB>PATH<TAB>SIZE<TAB>CRC32" per shard. The CRC-32 of a
// whole shard is computed once per version of the file on a node: with a
// `cache`, it is kept under its directory's checksums/ (keyed by
// DecodedFileCache::VersionKey) and read back on later starts.
// INVALID_ARGUMENT naming the field and shard when one cannot be read.
absl::StatusOr<std::string> ShardManifest(const std::string& field,
                                          const std::vector<std::string>& shards,
                                          const DecodedFileCache* cache);

// Why this rank's manifest differs from rank `their_rank`'s (rank 0's at a
// job's start, the furthest survivor's for a replacement), naming the first
// shard that differs, its size on both sides, and never its checksum
// (derived from the file's bytes); "" when they are equal.
std::string ManifestDifference(const std::string& theirs, int their_rank,
                               const std::string& mine, int rank);

}  // namespace trainctl::train
