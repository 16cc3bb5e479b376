// kill -9 of the coordinator of a TLS cluster at the moments that used to
// lose work (issue #15): while the ranks form their process group, mid-epoch,
// and as a checkpoint is written. Each time the same ranks finish the job
// (no rank dies, no restart), every event a watcher saw before the crash is
// the same event afterwards (no seq is reused), and the checkpoint catalog
// names exactly the files on disk (retention included).

#include <dirent.h>
#include <stdlib.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "google/protobuf/util/message_differencer.h"
#include "local_cluster.h"

namespace trainctl::testing {
namespace {

using std::chrono::seconds;

constexpr char kData[] = "/usr/share/datasets/fashion-mnist/";

enum class Moment {
  kDuringTheRendezvous,
  kGroupJustFormed,
  kMidEpoch,
  kWritingACheckpoint
};

std::string MomentName(const ::testing::TestParamInfo<Moment>& info) {
  switch (info.param) {
    case Moment::kDuringTheRendezvous: return "DuringTheRendezvous";
    case Moment::kGroupJustFormed: return "GroupJustFormed";
    case Moment::kMidEpoch: return "MidEpoch";
    case Moment::kWritingACheckpoint: return "WritingACheckpoint";
  }
  return "Unknown";
}

std::string Spec(const std::string& checkpoints) {
  return "name: crash\nranks: 2\nseed: 3\nmodel: mlp\ndata:\n"
         "  train_images: " + std::string(kData) + "train-images-idx3-ubyte.gz\n"
         "  train_labels: " + std::string(kData) + "train-labels-idx1-ubyte.gz\n"
         "  train_limit: 9600\n"
         "optimizer: {type: adamw, lr: 0.002}\n"
         "training: {epochs: 8, batch_size: 96, log_every_steps: 5}\n"
         "checkpoint: {dir: " + checkpoints + ", every_steps: 25, keep_last: 2}\n"
         "fault_tolerance: {max_restarts: 2}\n";
}


std::vector<std::string> CheckpointFiles(const std::string& dir) {
  std::vector<std::string> files;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = d ? readdir(d) : nullptr) {
    const std::string name = e->d_name;
    if (name.rfind("step-", 0) == 0 && name.size() > 5 &&
        name.substr(name.size() - 5) == ".ckpt") {
      files.push_back(dir + "/" + name);
    }
  }
  if (d) closedir(d);
  std::sort(files.begin(), files.end());
  return files;
}

bool IsFinal(const v1::Job& j) {
  return j.state() == v1::JOB_STATE_SUCCEEDED ||
         j.state() == v1::JOB_STATE_FAILED ||
         j.state() == v1::JOB_STATE_CANCELLED;
}

class CoordinatorCrashTest : public ::testing::TestWithParam<Moment> {};

TEST_P(CoordinatorCrashTest, NoRankDiesNoEventIsReusedAndTheCatalogMatchesTheDisk) {
  // Rank 1 joins 8 s late: rank 0 waits in the rendezvous for its key
  // through the whole outage below.
  if (GetParam() == Moment::kDuringTheRendezvous) {
    setenv("TRAINCTL_FAULT", "slow_join:rank=1,step=0", 1);
  }
  LocalCluster cluster(2, 1, 1);  // TLS, workers joined with the join token
  unsetenv("TRAINCTL_FAULT");  // the workers have it
  const std::string checkpoints = cluster.dir() + "/ckpt";
  v1::Job job = cluster.Submit(Spec(checkpoints));
  const std::string job_dir = checkpoints + "/" + job.id();

  std::function<bool(const v1::Job&)> moment;
  switch (GetParam()) {
    case Moment::kDuringTheRendezvous:
      // Every rank process runs (the agent said so); rank 1 sleeps, rank
      // 0 waits for its key. The keys rank 0 set must survive the crash
      // (the store keeps them) and its wait must be made again.
      moment = [](const v1::Job& j) {
        if (IsFinal(j)) return true;
        if (j.state() != v1::JOB_STATE_RUNNING || j.ranks_size() == 0) {
          return false;
        }
        for (const v1::RankInfo& r : j.ranks()) {
          if (r.state() != v1::RANK_STATE_RUNNING) return false;
        }
        return true;
      };
      break;
    case Moment::kGroupJustFormed:
      // The group has formed: rank 0 reports its plan once it joined, so
      // the job knows its total_steps.
      moment = [](const v1::Job& j) {
        return IsFinal(j) ||
               (j.state() == v1::JOB_STATE_RUNNING && j.total_steps() > 0);
      };
      break;
    case Moment::kMidEpoch:
      moment = [](const v1::Job& j) {
        return j.latest_train().step() >= 40 || IsFinal(j);
      };
      break;
    case Moment::kWritingACheckpoint:
      // The first file appears before rank 0's report reaches the catalog.
      moment = [&](const v1::Job& j) {
        return !CheckpointFiles(job_dir).empty() || IsFinal(j);
      };
      break;
  }
  v1::Job before = cluster.WaitForJob(job.id(), moment, seconds(300));
  ASSERT_EQ(before.state(), v1::JOB_STATE_RUNNING) << before.reason();
  const std::vector<v1::JobEvent> shown =
      cluster.EventsSoFar(job.id(), std::chrono::milliseconds(1500));
  ASSERT_FALSE(shown.empty());

  cluster.KillCoordinator();
  std::this_thread::sleep_for(seconds(3));  // the outage of the report
  ASSERT_TRUE(cluster.RestartCoordinator());

  v1::Job done = cluster.WaitForJob(job.id(), IsFinal, seconds(400));
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
  EXPECT_EQ(done.generation(), 1) << "the ranks were restarted";
  EXPECT_EQ(done.restarts(), 0);
  for (const v1::RankInfo& rank : done.ranks()) {
    EXPECT_EQ(rank.state(), v1::RANK_STATE_EXITED) << "rank " << rank.rank();
    EXPECT_EQ(rank.exit_code(), 0) << "rank " << rank.rank() << " died";
  }

  // Every event shown before the crash is still that event, under its seq.
  const std::vector<v1::JobEvent> all = cluster.Events(job.id());
  ASSERT_GE(all.size(), shown.size());
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(all[i].seq(), static_cast<int64_t>(i) + 1);
  }
  for (const v1::JobEvent& seen : shown) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
        seen, all[seen.seq() - 1]))
        << "seq " << seen.seq() << " was\n"
        << seen.DebugString() << "and is now\n"
        << all[seen.seq() - 1].DebugString();
  }

  // The catalog names the files on disk: retention saw every checkpoint.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + seconds(30));
  v1::ListCheckpointsRequest req;
  req.set_job_id(job.id());
  v1::ListCheckpointsResponse catalog;
  ASSERT_TRUE(cluster.jobs().ListCheckpoints(&ctx, req, &catalog).ok());
  std::vector<std::string> cataloged;
  for (const v1::Checkpoint& c : catalog.checkpoints()) {
    cataloged.push_back(c.path());
  }
  std::sort(cataloged.begin(), cataloged.end());
  EXPECT_EQ(cataloged.size(), 2u);  // keep_last
  // The agent deletes pruned files just after the catalog drops them.
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  while (CheckpointFiles(job_dir) != cataloged &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(CheckpointFiles(job_dir), cataloged);
}

// A checkpoint file whose deletion was lost (the coordinator forgot it and
// died before telling the agent; here planted before the job starts) goes
// with the next prune instead of filling the disk.
TEST(CheckpointRetentionTest, AFileTheCatalogForgotGoesWithTheNextPrune) {
  LocalCluster cluster(2, 1, 1);
  const std::string checkpoints = cluster.dir() + "/ckpt";
  const std::string forgotten = checkpoints + "/job-1/step-000000001.ckpt";
  std::filesystem::create_directories(checkpoints + "/job-1");
  std::ofstream(forgotten) << "a checkpoint nobody catalogs";
  std::string spec = Spec(checkpoints);
  spec.replace(spec.find("epochs: 8"), 9, "epochs: 2");
  v1::Job job = cluster.Submit(spec);
  ASSERT_EQ(job.id(), "job-1");
  const v1::Job done = cluster.WaitForJob(job.id(), IsFinal, seconds(400));
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  while (std::filesystem::exists(forgotten) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_FALSE(std::filesystem::exists(forgotten));
  EXPECT_EQ(CheckpointFiles(checkpoints + "/job-1").size(), 2u);  // keep_last
}

INSTANTIATE_TEST_SUITE_P(AtEachMoment, CoordinatorCrashTest,
                         ::testing::Values(Moment::kDuringTheRendezvous,
                                           Moment::kGroupJustFormed,
                                           Moment::kMidEpoch,
                                           Moment::kWritingACheckpoint),
                         MomentName);

}  // namespace
}  // namespace trainctl::testing
