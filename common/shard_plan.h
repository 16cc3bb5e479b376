#pragma once

#include <cstdint>
#include <vector>

namespace trainctl {

// The data shard plan: pure functions, identical on every rank and on the
// coordinator, so no index lists ever travel over the network.
//
// Each epoch visits the training set in a permutation derived only from
// (seed, epoch). Step s of the epoch takes permutation positions
// [s*B, (s+1)*B) for global batch B, and rank r of W takes the r-th of the W
// equal slices of that window. The last partial window of an epoch is
// dropped, so every rank has the same number of equal-sized steps.

// A permutation of [0, n) from a portable generator (not the C++ library's
// distributions, whose output differs between implementations).
std::vector<int64_t> EpochPermutation(uint64_t seed, int64_t epoch, int64_t n);

// Number of full global batches in one epoch of n samples.
inline int64_t StepsPerEpoch(int64_t n, int64_t global_batch) {
  return global_batch > 0 ? n / global_batch : 0;
}

// Sample indices that `rank` of `world` trains on at `step_in_epoch`.
std::vector<int64_t> RankBatchIndices(const std::vector<int64_t>& permutation,
                                      int64_t step_in_epoch,
                                      int64_t global_batch, int rank,
                                      int world);

// Contiguous, non-overlapping slice [begin, end) of an n-sample evaluation
// set for `rank`; the slices cover every sample exactly once, no padding.
struct Range {
  int64_t begin;
  int64_t end;
};
Range EvalSlice(int64_t n, int rank, int world);

}  // namespace trainctl
