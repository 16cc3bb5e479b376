#include "common/shard_plan.h"

#include <numeric>
#include <utility>

namespace trainctl {
namespace {

// SplitMix64: tiny, well-mixed, and identical on every platform.
uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform integer in [0, bound) without modulo bias (Lemire's method).
uint64_t Below(uint64_t& state, uint64_t bound) {
  __uint128_t m = static_cast<__uint128_t>(SplitMix64(state)) * bound;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t threshold = -bound % bound;
    while (low < threshold) {
      m = static_cast<__uint128_t>(SplitMix64(state)) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

}  // namespace

std::vector<int64_t> EpochPermutation(uint64_t seed, int64_t epoch,
                                      int64_t n) {
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  uint64_t state = seed * 0x2545F4914F6CDD1Dull + static_cast<uint64_t>(epoch);
  SplitMix64(state);
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(Below(state, i + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

std::vector<int64_t> RankBatchIndices(const std::vector<int64_t>& permutation,
                                      int64_t step_in_epoch,
                                      int64_t global_batch, int rank,
                                      int world) {
  const int64_t per_rank = global_batch / world;
  const int64_t begin = step_in_epoch * global_batch + rank * per_rank;
  return std::vector<int64_t>(permutation.begin() + begin,
                              permutation.begin() + begin + per_rank);
}

Range EvalSlice(int64_t n, int rank, int world) {
  return Range{n * rank / world, n * (rank + 1) / world};
}

}  // namespace trainctl
