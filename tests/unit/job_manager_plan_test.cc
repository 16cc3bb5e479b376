// What the coordinator tells before and during start-up: the dry run's plan
// (slots, placement or the reason to wait, the shard plan) and which ranks
// have joined a generation.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "coordinator/dry_run_data.h"
#include "job_manager_fixture.h"

namespace trainctl::coordinator {
namespace {

using ::testing::HasSubstr;

constexpr char kFashion[] = "/usr/share/datasets/fashion-mnist/";

std::string FashionSpec(int ranks, int64_t train_limit) {
  return "name: t\nranks: " + std::to_string(ranks) +
         "\nmodel: mlp\ndata: {train_images: " + kFashion +
         "train-images-idx3-ubyte.gz, train_labels: " + kFashion +
         "train-labels-idx1-ubyte.gz, train_limit: " +
         std::to_string(train_limit) +
         "}\ntraining: {batch_size: 16, epochs: 2}\n";
}

TEST_F(JobManagerTest, DryRunPlansPlacementAndShardsWithoutQueueing) {
  AddWorker("w1", 2);
  AddWorker("w2", 1);
  absl::StatusOr<v1::SubmitJobResponse> dry =
      jobs_.DryRun(FashionSpec(2, 1000));
  ASSERT_TRUE(dry.ok()) << dry.status();
  const v1::DryRunPlan& plan = dry->plan();
  EXPECT_TRUE(dry->job().id().empty());
  EXPECT_EQ(plan.ranks(), 2);
  EXPECT_EQ(plan.workers(), 2);
  EXPECT_EQ(plan.slots_total(), 3);
  EXPECT_EQ(plan.slots_free(), 3);
  EXPECT_EQ(plan.jobs_ahead(), 0);
  EXPECT_EQ(plan.placement(), "ranks 0-1 on w1");
  EXPECT_EQ(plan.waiting(), "");
  EXPECT_EQ(plan.samples_per_step(), 16);
  EXPECT_EQ(plan.per_rank_batch(), 8);
  // The samples are a worker's to count (security review H2).
  EXPECT_EQ(plan.train_samples(), 0);
  EXPECT_EQ(plan.data_note(), kDataNotCountedYet);
  // A worker counted 1000: 62 steps of 16, the last 8 samples dropped.
  v1::ProbeDataResult counted;
  counted.set_train_samples(1000);
  ApplyDataProbeResult(counted, &*dry);
  EXPECT_EQ(plan.train_samples(), 1000);
  EXPECT_EQ(plan.steps_per_epoch(), 62);
  EXPECT_EQ(plan.dropped_per_epoch(), 8);
  EXPECT_EQ(plan.data_note(), "");
  EXPECT_EQ(dry->job().total_steps(), 124);
  EXPECT_EQ(dry->job().reason(), "");
  EXPECT_TRUE(jobs_.List({}).empty());
  // Nothing was reserved: a second dry run sees the same free slots.
  EXPECT_EQ(jobs_.DryRun(FashionSpec(2, 1000))->plan().slots_free(), 3);
}

// The memory plan: from the spec alone where it can, completed by the
// worker's look at the data, and a warning when a rank would not fit in the
// smallest slot's share of a node.
TEST_F(JobManagerTest, DryRunPlansEachRanksMemory) {
  auto link = std::make_shared<FakeAgentLink>();
  v1::RegisterRequest reg;
  reg.set_name("small");
  reg.set_slots(2);
  reg.set_collective_host("127.0.0.1");
  reg.set_memory_bytes(int64_t{64} << 20);  // 32 MiB a slot
  ASSERT_TRUE(jobs_.RegisterWorker(reg, link).ok());
  absl::StatusOr<v1::SubmitJobResponse> dry = jobs_.DryRun(FashionSpec(2, 1000));
  ASSERT_TRUE(dry.ok()) << dry.status();
  // The mlp's input size is the data's.
  EXPECT_EQ(dry->plan().memory().parameters(), 0);
  EXPECT_THAT(dry->plan().memory().note(), HasSubstr("the input size comes from the data"));
  EXPECT_EQ(dry->plan().memory().available_bytes(), int64_t{32} << 20);
  v1::ProbeDataResult counted;
  counted.set_train_samples(1000);
  counted.add_input_shape(28);
  counted.add_input_shape(28);
  counted.set_num_classes(10);
  ApplyDataProbeResult(counted, &*dry);
  const v1::MemoryPlan& memory = dry->plan().memory();
  const int64_t params = (784 * 512 + 512) + (512 * 256 + 256) + (256 * 10 + 10);
  EXPECT_EQ(memory.parameters(), params);
  EXPECT_EQ(memory.optimizer_bytes(), 8 * params);  // adamw
  EXPECT_EQ(memory.warning(), "");
  EXPECT_EQ(memory.available_on(), "a slot of small (64 MiB over 2 slots)");
  // A GPT of 12 x 768 on bytes does not fit in 32 MiB.
  dry = jobs_.DryRun(
      "model: {type: gpt, d_model: 768, n_layers: 12, n_heads: 12, max_seq_len: 256}\n"
      "data: {format: text, train_path: /corpus.txt, seq_len: 256}\n");
  ASSERT_TRUE(dry.ok()) << dry.status();
  EXPECT_GT(dry->plan().memory().parameters(), 85'000'000);
  EXPECT_THAT(dry->plan().memory().warning(),
              HasSubstr("more than the 32 MiB of a slot of small (64 MiB over 2 slots)"));
}

TEST_F(JobManagerTest, DryRunSaysWhyItWouldWait) {
  AddWorker("w1", 1);
  v1::Job running = *jobs_.Submit(Spec(1), false);
  ASSERT_EQ(running.state(), v1::JOB_STATE_RUNNING);
  v1::Job queued = *jobs_.Submit(Spec(1), false);
  ASSERT_EQ(queued.state(), v1::JOB_STATE_QUEUED);

  absl::StatusOr<v1::SubmitJobResponse> dry = jobs_.DryRun(Spec(1));
  ASSERT_TRUE(dry.ok()) << dry.status();
  EXPECT_EQ(dry->plan().slots_free(), 0);
  EXPECT_EQ(dry->plan().jobs_ahead(), 1);
  EXPECT_EQ(dry->plan().placement(), "");
  EXPECT_THAT(dry->plan().waiting(), HasSubstr(queued.id()));
  EXPECT_EQ(dry->plan().train_samples(), 0);
  EXPECT_EQ(dry->plan().data_note(), kDataNotCountedYet);
}

// Security review H2: the coordinator opens no user-named data file, even
// one it could read; a worker's answer, error included, fills the plan.
TEST_F(JobManagerTest, DryRunLeavesTheDataToAWorker) {
  char path[] = "/tmp/dry_run_data.XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "1,0\n2,1\n3,0\n";
  absl::StatusOr<v1::SubmitJobResponse> dry = jobs_.DryRun(
      std::string("name: t\nmodel: mlp\ndata: {format: csv, train_path: ") +
      path + "}\ntraining: {batch_size: 1, epochs: 2}\n");
  std::remove(path);
  ASSERT_TRUE(dry.ok()) << dry.status();
  EXPECT_EQ(dry->plan().train_samples(), 0);  // before: 3, read here
  EXPECT_EQ(dry->job().total_steps(), 0);
  EXPECT_EQ(dry->plan().data_note(), kDataNotCountedYet);
  EXPECT_THAT(dry->job().reason(), HasSubstr(kDataNotCountedYet));

  v1::ProbeDataResult refused;
  refused.set_error("data.train_path: /dev/zero is a character device");
  ApplyDataProbeResult(refused, &*dry);
  EXPECT_EQ(dry->plan().train_samples(), 0);
  EXPECT_EQ(dry->plan().data_note(),
            "training samples unknown: data.train_path: /dev/zero is a "
            "character device");
  EXPECT_EQ(dry->job().reason(),
            "total steps unknown: data.train_path: /dev/zero is a character "
            "device");
}

TEST(DryRunData, TotalStepsFromSamplesAsTheRanks) {
  v1::JobSpec spec;
  spec.mutable_training()->set_batch_size(16);
  spec.mutable_training()->set_grad_accum_steps(2);
  spec.mutable_training()->set_epochs(3);
  EXPECT_EQ(TotalStepsFromSamples(spec, 100), 9);  // 3 x floor(100 / 32)
  spec.mutable_training()->set_max_steps(5);
  EXPECT_EQ(TotalStepsFromSamples(spec, 100), 5);
  spec.mutable_training()->set_batch_size(0);
  EXPECT_EQ(TotalStepsFromSamples(spec, 100), 0);
}

TEST_F(JobManagerTest, DryRunRefusesABadSpecNamingTheField) {
  absl::StatusOr<v1::SubmitJobResponse> dry =
      jobs_.DryRun(Spec(2) + "optimizer: {lr: -1}\n");
  ASSERT_FALSE(dry.ok());
  EXPECT_EQ(dry.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(dry.status().message()), HasSubstr("optimizer.lr"));
}

TEST_F(JobManagerTest, RanksJoinWhenTheCoordinatorFirstHearsFromThem) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  v1::Job job = *jobs_.Submit(Spec(2), false);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING);
  for (const v1::RankInfo& r : job.ranks()) EXPECT_FALSE(r.joined());
  const std::string w0 = job.ranks(0).worker();
  const std::string w1 = job.ranks(1).worker();

  v1::Heartbeat beat;
  v1::RankHeartbeat* progress = beat.add_ranks();
  progress->set_job_id(job.id());
  progress->set_generation(1);
  progress->set_rank(0);
  progress->set_phase("starting");
  jobs_.OnProgress(w0, beat);
  job = *jobs_.Get(job.id());
  EXPECT_TRUE(job.ranks(0).joined());
  EXPECT_FALSE(job.ranks(1).joined());

  // A metric counts too; one from another worker than the rank's does not.
  v1::RankMetrics metrics;
  metrics.set_job_id(job.id());
  metrics.set_generation(1);
  metrics.set_seq(1);
  metrics.mutable_point()->set_rank(1);
  metrics.mutable_point()->set_kind("plan");
  EXPECT_FALSE(jobs_.OnRankMetrics(w0, metrics).ok());
  EXPECT_FALSE(jobs_.Get(job.id())->ranks(1).joined());
  ASSERT_TRUE(jobs_.OnRankMetrics(w1, metrics).ok());
  EXPECT_TRUE(jobs_.Get(job.id())->ranks(1).joined());
}

TEST_F(JobManagerTest, ALogLineOfTheRankJoinsIt) {
  AddWorker("w1", 2);
  v1::Job job = *jobs_.Submit(Spec(2), false);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING);
  v1::RankLog log;
  log.set_job_id(job.id());
  log.set_generation(2);  // not this generation: ignored
  log.set_seq(1);
  log.mutable_line()->set_rank(1);
  log.mutable_line()->set_text("rank 1/2 on cpu");
  jobs_.OnRankLog("w1", log).IgnoreError();
  EXPECT_FALSE(jobs_.Get(job.id())->ranks(1).joined());
  log.set_generation(1);
  ASSERT_TRUE(jobs_.OnRankLog("w1", log).ok());
  job = *jobs_.Get(job.id());
  EXPECT_TRUE(job.ranks(1).joined());
  EXPECT_FALSE(job.ranks(0).joined());
}

}  // namespace
}  // namespace trainctl::coordinator
