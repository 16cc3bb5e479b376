// Preemption on a real cluster (issue 17): two workers of one slot each, a
// low-priority job on both, an urgent job submitted. The low job's ranks
// checkpoint and stop within their grace period (not killed), it waits as
// PREEMPTED while the urgent job runs, then resumes to SUCCEEDED with the
// same parameters and optimizer state, bit for bit, as an uninterrupted run
// of the same spec.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "fault_test_util.h"
#include "local_cluster.h"
#include "tests/common/scoped_temp_dir.h"

namespace trainctl::testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr char kPolicy[] =
    "classes: {low: {value: 0, grace_seconds: 120}, urgent: 100}\n"
    "default_class: low\n";

// The model's tensors and AdamW's moments, by name, from a checkpoint file.
std::map<std::string, torch::Tensor> StateOf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  const std::string blob = bytes.str();
  torch::serialize::InputArchive archive;
  archive.load_from(blob.data(), blob.size());
  c10::IValue names;
  archive.read("model_names", names);
  const std::vector<std::string> model =
      absl::StrSplit(names.toStringRef(), '\n');
  std::map<std::string, torch::Tensor> state;
  for (size_t i = 0; i < model.size(); ++i) {
    torch::Tensor t;
    archive.read("model_" + std::to_string(i), t);
    state[model[i]] = t;
  }
  for (size_t i = 0;; ++i) {
    torch::Tensor moment;
    if (!archive.try_read("opt_" + std::to_string(i) + "_exp_avg", moment)) break;
    state["exp_avg " + std::to_string(i)] = moment;
  }
  return state;
}

// Polls the job's events for a log line holding `text` (bounded).
bool WaitForLogLine(LocalCluster& cluster, const std::string& id,
                    const std::string& text) {
  const auto deadline = std::chrono::steady_clock::now() + seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    for (const v1::JobEvent& e :
         cluster.EventsSoFar(id, std::chrono::milliseconds(200))) {
      if (e.has_log() && e.log().text().find(text) != std::string::npos) {
        return true;
      }
    }
  }
  return false;
}

TEST(PreemptionTest, AnUrgentJobStopsALowOneThatEndsAsIfNeverStopped) {
  const ScopedTempDir files("trainctl-preemption");
  const std::string policy = files.path() + "/scheduling.yaml";
  std::ofstream(policy) << kPolicy;
  ClusterOptions options;
  options.coordinator_flags = {"--scheduling", policy};
  std::unique_ptr<LocalCluster> cluster;
  {
    // job-2, the one preempted, waits before its step 12 until it is asked
    // to stop: the preemption lands at a known step, whatever the speed.
    ScopedEnv fault("TRAINCTL_FAULT", "wait_for_stop:rank=0,step=12,job=2");
    cluster = std::make_unique<LocalCluster>(/*workers=*/2, /*slots=*/1,
                                             /*cpus=*/1, options);
  }
  // 1536 samples in batches of 64: 24 steps, checkpointed only at the end.
  const std::string low_spec = SmallJobSpec(
      2, 1536, 1,
      "checkpoint: {dir: " + files.path() + "/ckpt, every_steps: 1000}\n");

  const v1::Job calm = WaitUntilFinal(*cluster, cluster->Submit(low_spec).id());
  ASSERT_EQ(calm.state(), v1::JOB_STATE_SUCCEEDED) << calm.reason();
  const v1::Job low = cluster->Submit(low_spec);
  ASSERT_EQ(low.id(), "job-2");
  // Rank 0 is past step index 11 (whose all-reduce carried every rank's
  // vote not to stop) and waits: the urgent job's request lands in step 12.
  ASSERT_TRUE(WaitForLogLine(*cluster, low.id(), "waiting before step 12"));
  const v1::Job urgent =
      cluster->Submit(SmallJobSpec(1, 640, 1, "priority: urgent\n"));

  const v1::Job urgent_done = WaitUntilFinal(*cluster, urgent.id());
  EXPECT_EQ(urgent_done.state(), v1::JOB_STATE_SUCCEEDED) << urgent_done.reason();
  const v1::Job done = WaitUntilFinal(*cluster, low.id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
  EXPECT_EQ(done.preemptions(), 1);
  EXPECT_EQ(done.restarts(), 0);
  EXPECT_EQ(done.generation(), 2);
  EXPECT_EQ(done.world_size(), 2);
  // Stopped after step index 12: 13 steps done, and resumed there.
  EXPECT_EQ(done.resume_from().step(), 13);
  std::string preempted_because;
  for (const v1::Transition& t : done.transitions()) {
    if (t.to() == v1::JOB_STATE_PREEMPTED) preempted_because = t.reason();
  }
  EXPECT_THAT(preempted_because,
              HasSubstr("preempted by job " + urgent.id() + " (priority 100 > 0)"));
  EXPECT_THAT(preempted_because, HasSubstr("grace 120 s"));
  // The ranks stopped on their own, not by a signal at the end of the grace.
  std::string log;
  for (const v1::JobEvent& e : cluster->Events(low.id())) {
    if (e.has_log()) log += e.log().text() + "\n";
  }
  EXPECT_THAT(log, HasSubstr("rank 0: asked to checkpoint and stop; "
                             "checkpointed at step 13"));
  EXPECT_THAT(log, HasSubstr("rank 1: asked to checkpoint and stop; stopped "
                             "at step 13"));
  const CliResult status = cluster->Cli({"status", low.id()});
  EXPECT_THAT(status.output, HasSubstr("preempted 1 time"));

  // Bit for bit: the same arithmetic in the same order as the calm run.
  const std::vector<v1::Checkpoint> calm_catalog = Catalog(*cluster, calm.id());
  const std::vector<v1::Checkpoint> done_catalog = Catalog(*cluster, low.id());
  ASSERT_FALSE(calm_catalog.empty());
  ASSERT_FALSE(done_catalog.empty());
  EXPECT_EQ(done_catalog.front().step(), 13);
  EXPECT_EQ(calm_catalog.back().step(), 24);
  EXPECT_EQ(done_catalog.back().step(), 24);
  const auto calm_state = StateOf(calm_catalog.back().path());
  const auto done_state = StateOf(done_catalog.back().path());
  ASSERT_EQ(calm_state.size(), done_state.size());
  EXPECT_GT(calm_state.size(), 4u);  // the MLP's tensors and their moments
  for (const auto& [name, tensor] : calm_state) {
    ASSERT_EQ(done_state.count(name), 1u) << name;
    EXPECT_TRUE(torch::equal(tensor, done_state.at(name))) << name;
  }
  EXPECT_EQ(done.latest_train().values().at("loss"),
            calm.latest_train().values().at("loss"));
}

}  // namespace
}  // namespace trainctl::testing
