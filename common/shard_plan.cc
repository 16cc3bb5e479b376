#include "common/shard_plan.h"

#include <cstddef>

namespace trainctl {
namespace {

// SplitMix64: tiny, well-mixed, and identical on every platform.
uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

EpochOrder::EpochOrder(uint64_t seed, int64_t epoch, int64_t n) : n_(n) {
  int bits = 0;
  while (bits < 62 && (uint64_t{1} << bits) < static_cast<uint64_t>(n)) ++bits;
  half_bits_ = bits < 2 ? 1 : (bits + 1) / 2;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
  uint64_t state = seed * 0x2545F4914F6CDD1Dull + static_cast<uint64_t>(epoch);
  SplitMix64(state);
  for (uint64_t& key : keys_) key = SplitMix64(state);
}

uint64_t EpochOrder::Round(int round, uint64_t half) const {
  uint64_t state = half ^ keys_[round];
  return SplitMix64(state) & half_mask_;
}

uint64_t EpochOrder::Encrypt(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (int r = 0; r < kRounds; ++r) {
    const uint64_t next = left ^ Round(r, right);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t EpochOrder::Decrypt(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (int r = kRounds - 1; r >= 0; --r) {
    const uint64_t previous = right ^ Round(r, left);
    right = left;
    left = previous;
  }
  return (left << half_bits_) | right;
}

// Cycle walking: the network permutes the whole domain, so following it
// from a value inside [0, n) reaches the next value inside [0, n) on the
// same cycle, which makes the walk a bijection on [0, n) itself.
int64_t EpochOrder::At(int64_t position) const {
  uint64_t x = static_cast<uint64_t>(position);
  do {
    x = Encrypt(x);
  } while (x >= static_cast<uint64_t>(n_));
  return static_cast<int64_t>(x);
}

int64_t EpochOrder::PositionOf(int64_t sample) const {
  uint64_t x = static_cast<uint64_t>(sample);
  do {
    x = Decrypt(x);
  } while (x >= static_cast<uint64_t>(n_));
  return static_cast<int64_t>(x);
}

std::vector<int64_t> RankBatchIndices(const EpochOrder& order,
                                      int64_t step_in_epoch,
                                      int64_t global_batch, int rank,
                                      int world) {
  const int64_t per_rank = global_batch / world;
  const int64_t begin = step_in_epoch * global_batch + rank * per_rank;
  std::vector<int64_t> indices;
  indices.reserve(static_cast<size_t>(per_rank));
  for (int64_t p = begin; p < begin + per_rank; ++p) {
    indices.push_back(order.At(p));
  }
  return indices;
}

Range EvalSlice(int64_t n, int rank, int world) {
  return Range{n * rank / world, n * (rank + 1) / world};
}

}  // namespace trainctl
