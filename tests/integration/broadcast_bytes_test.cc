// BroadcastBytes between ranks that are threads joined by Gloo over
// loopback: a small payload goes by broadcast, a large one (a checkpoint,
// a survivor's training state) by an all-reduce of words in which only the
// root's are not zero. Either way every rank gets the root's bytes exactly,
// whatever they are and whatever their length, and a root that has no
// bytes makes every rank fail naming it.

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <future>
#include <random>
#include <string>
#include <vector>

#include "worker/train/collective_group.h"
#include "worker/train/grad_sync.h"

namespace trainctl::train {
namespace {

constexpr int kWorld = 3;

// What each rank got when rank `root` sent `payload` (or its error).
std::vector<absl::StatusOr<std::string>> Broadcast(const absl::StatusOr<std::string>& payload,
                                                   int root) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::future<absl::StatusOr<std::string>>> futures;
  for (int rank = 0; rank < kWorld; ++rank) {
    futures.push_back(std::async(std::launch::async, [&, rank] {
      GroupPtr group = MakeGlooGroup(store, rank, kWorld, {});
      absl::StatusOr<std::string> mine = std::string("not the root's");
      if (rank == root) mine = payload;
      absl::StatusOr<std::string> got = BroadcastBytes(group, rank, torch::kCPU, mine, root);
      ShutdownGroup(*group);
      return got;
    }));
  }
  std::vector<absl::StatusOr<std::string>> out;
  for (auto& f : futures) out.push_back(f.get());
  return out;
}

std::string RandomBytes(size_t n) {
  std::mt19937_64 rng(7);
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  return bytes;
}

TEST(BroadcastBytesTest, EveryRankGetsTheRootsBytesExactly) {
  // Below, at and above the all-reduce threshold, and lengths that are not
  // a multiple of the 8-byte words it sums.
  for (const size_t n : {size_t{0}, size_t{1}, size_t{1000},
                         static_cast<size_t>(kBytesByAllReduce),
                         static_cast<size_t>(kBytesByAllReduce) + 3,
                         (size_t{64} << 20) + 5 /* two of its 64 MiB all-reduces */}) {
    SCOPED_TRACE(n);
    const std::string payload = RandomBytes(n);
    for (int root : {0, 2}) {
      const std::vector<absl::StatusOr<std::string>> got = Broadcast(payload, root);
      for (int rank = 0; rank < kWorld; ++rank) {
        ASSERT_TRUE(got[rank].ok()) << got[rank].status();
        EXPECT_TRUE(*got[rank] == payload) << "rank " << rank << " from root " << root;
      }
    }
  }
}

TEST(BroadcastBytesTest, ARootWithoutItsBytesFailsEveryRank) {
  const std::vector<absl::StatusOr<std::string>> got =
      Broadcast(absl::NotFoundError("no such checkpoint"), 1);
  EXPECT_EQ(got[1].status().code(), absl::StatusCode::kNotFound);
  for (int rank : {0, 2}) {
    EXPECT_EQ(got[rank].status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(got[rank].status().message().find("rank 1 could not produce its bytes"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace trainctl::train
