// What `status`, `workers` and `submit --dry-run` print for hand-built
// protos: start-up progress, ETA and step time in status, job:ranks in the
// workers table, and the dry run's plan.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <utility>

#include "client/render.h"

namespace trainctl::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kT0 = 1'700'000'000'000;

RenderContext Ctx() {
  RenderContext ctx;
  ctx.now_unix_ms = kT0 + 10'000;
  return ctx;
}

v1::Job StartingJob() {
  v1::Job job;
  job.set_id("job-4");
  job.mutable_spec()->set_name("big");
  job.mutable_spec()->set_ranks(3);
  job.mutable_spec()->mutable_training()->set_batch_size(96);
  job.set_state(v1::JOB_STATE_RUNNING);
  job.set_generation(2);
  job.set_world_size(3);
  job.set_started_unix_ms(kT0);
  for (int r = 0; r < 3; ++r) {
    v1::RankInfo* info = job.add_ranks();
    info->set_rank(r);
    info->set_worker(r < 2 ? "node-a" : "node-c");
    info->set_host(r < 2 ? "10.0.0.1" : "10.0.0.3");
    info->set_state(v1::RANK_STATE_RUNNING);
    info->set_joined(r < 2);
  }
  return job;
}

TEST(StatusRenderTest, StartingJobSaysWhichRanksItWaitsFor) {
  const std::string s = RenderJobStatus(StartingJob(), Ctx());
  EXPECT_THAT(s, HasSubstr("Starting:    2 of 3 ranks joined; waiting for "
                           "rank 2 on node-c\n"));
  EXPECT_THAT(s, HasSubstr("  2     node-c  10.0.0.3  RUNNING  no "));
  EXPECT_THAT(s, HasSubstr("  0     node-a  10.0.0.1  RUNNING  yes "));
  EXPECT_THAT(s, Not(HasSubstr("ETA:")));
}

TEST(StatusRenderTest, AStragglerIsNamedWithItsWorkerAndPhase) {
  v1::Job job = StartingJob();
  v1::Straggler* s = job.add_stragglers();
  s->set_rank(2);
  s->set_worker("node-c");
  s->set_phase("compute");
  s->set_ratio(1.84);
  s->set_since_step(120);
  EXPECT_THAT(RenderJobStatus(job, Ctx()),
              HasSubstr("Straggler:   rank 2 on node-c: 1.84x its peers' "
                        "compute time per step (since step 120)\n"));
  EXPECT_THAT(RenderJobStatus(StartingJob(), Ctx()), Not(HasSubstr("Straggler")));
}

TEST(StatusRenderTest, TrainingJobShowsEtaStepTimeAndRankPhases) {
  v1::Job job = StartingJob();
  for (v1::RankInfo& r : *job.mutable_ranks()) r.set_joined(true);
  job.set_total_steps(1000);
  v1::MetricPoint* m = job.mutable_latest_train();
  m->set_kind("train");
  m->set_step(400);
  m->set_time_unix_ms(kT0 + 5'000);
  (*m->mutable_values())["loss"] = 0.25;
  (*m->mutable_values())["samples_per_sec"] = 960;  // 10 steps/s of 96
  (*m->mutable_values())["step_ms"] = 100;
  (*m->mutable_values())["step_ms_min"] = 95;
  (*m->mutable_values())["step_ms_max"] = 180;
  (*m->mutable_values())["slowest_rank"] = 2;
  v1::RankProgress* p = job.add_progress();
  p->set_rank(2);
  p->set_step(401);
  p->set_phase("compute");
  const std::string s = RenderJobStatus(job, Ctx());
  EXPECT_THAT(s, Not(HasSubstr("Starting:")));
  EXPECT_THAT(s, HasSubstr("Progress:    400/1000 (40.0%)\n"));
  EXPECT_THAT(s, HasSubstr("ETA:         1m00s\n"));
  EXPECT_THAT(s, HasSubstr("Step time:   100 ms (min 95.0, max 180; slowest "
                           "rank 2 on node-c)\n"));
  EXPECT_THAT(s, HasSubstr("  2     node-c  10.0.0.3  RUNNING  yes     401   "
                           "compute"));
}

TEST(WorkersRenderTest, AddressSlotsHeartbeatAndRunningAsJobRanks) {
  v1::ListWorkersResponse response;
  v1::WorkerInfo* w = response.add_workers();
  w->set_name("node-a");
  w->set_host("10.0.0.1");
  w->set_slots_total(4);
  w->set_slots_free(1);
  w->set_gpu_slots_total(2);
  w->set_gpu_slots_free(0);
  w->add_devices("cuda:0");
  w->add_devices("cuda:1");
  w->set_last_heartbeat_unix_ms(kT0 + 7'000);
  for (const auto& [job, rank] : {std::pair<const char*, int>{"job-4", 0}, {"job-4", 1},
                                   {"job-9", 3}}) {
    v1::RankRef* ref = w->add_ranks();
    ref->set_job_id(job);
    ref->set_generation(1);
    ref->set_rank(rank);
  }
  v1::WorkerInfo* idle = response.add_workers();
  idle->set_name("node-b");
  idle->set_host("10.0.0.2");
  idle->set_slots_total(2);
  idle->set_slots_free(2);
  EXPECT_EQ(RenderWorkerTable(response, Ctx()),
            "NAME    ADDRESS   SLOTS  GPU SLOTS  DEVICES        LAST HEARTBEAT  RUNNING\n"
            "node-a  10.0.0.1  1/4    0/2        cuda:0,cuda:1  3s ago          "
            "job-4:0,1 job-9:3\n"
            "node-b  10.0.0.2  2/2    -          -              -               -\n");
}

TEST(DryRunRenderTest, WhereItWouldRunOrWhyItWouldWaitAndTheShardPlan) {
  v1::SubmitJobResponse response;
  response.mutable_job()->set_total_steps(936);
  v1::DryRunPlan* plan = response.mutable_plan();
  plan->set_ranks(2);
  plan->set_workers(2);
  plan->set_slots_total(3);
  plan->set_slots_free(3);
  plan->set_placement("ranks 0-1 on w1");
  plan->set_train_samples(60000);
  plan->set_samples_per_step(128);
  plan->set_per_rank_batch(64);
  plan->set_steps_per_epoch(468);
  plan->set_dropped_per_epoch(96);
  EXPECT_EQ(RenderDryRunPlan(response),
            "Would run:   ranks 0-1 on w1 (needs 2 slots; 3 of 3 free on 2 "
            "workers)\n"
            "Shard plan:  60000 samples per epoch in 468 steps of 128 (64 per "
            "rank per micro-step); 96 dropped per epoch\n"
            "Memory/rank: not planned: unknown model size\n"
            "total steps: 936\n");

  // The memory plan, with the other checkpointing setting beside the
  // estimate, and its warning.
  v1::MemoryPlan* memory = plan->mutable_memory();
  memory->set_parameters(269322);
  memory->set_parameter_bytes(4 * 269322);
  memory->set_gradient_bytes(4 * 269322);
  memory->set_optimizer_bytes(8 * 269322);
  memory->set_activation_bytes_plain(int64_t{3} << 20);
  memory->set_activation_bytes_checkpointed(int64_t{1} << 20);
  memory->set_activation_bytes(int64_t{3} << 20);
  memory->set_total_bytes(16 * 269322 + (int64_t{3} << 20));
  memory->set_warning("one rank needs about 7.1 MiB, more than the 4 MiB of a slot of w1");
  response.mutable_job()->mutable_spec()->mutable_optimizer()->set_type("adamw");
  EXPECT_THAT(RenderDryRunPlan(response),
              HasSubstr("Memory/rank: 7.1 MiB = parameters 1.0 MiB (0.27 M) + gradients "
                        "1.0 MiB + adamw state 2.1 MiB + activations 3 MiB (estimate; "
                        "1 MiB with gradient_checkpointing)\n"
                        "Warning:     one rank needs about 7.1 MiB, more than the 4 MiB "
                        "of a slot of w1\n"));
  plan->clear_memory();

  // Free slots held as running jobs' spares are said apart.
  plan->set_slots_spare(1);
  EXPECT_THAT(RenderDryRunPlan(response),
              HasSubstr("(needs 2 slots; 3 of 3 free (1 held as a spare) on 2 workers)"));
  plan->set_slots_spare(0);

  plan->clear_placement();
  plan->set_waiting("waits behind job-3");
  plan->set_jobs_ahead(1);
  plan->set_train_samples(0);
  plan->set_data_note("training samples unknown here: data.train_path: no file");
  response.mutable_job()->set_total_steps(0);
  response.mutable_job()->set_reason("total steps unknown: no file");
  EXPECT_EQ(RenderDryRunPlan(response),
            "Would wait:  waits behind job-3 (1 job queued ahead)\n"
            "Shard plan:  128 samples per step (64 per rank per micro-step); "
            "training samples unknown here: data.train_path: no file\n"
            "Memory/rank: not planned: unknown model size\n"
            "total steps unknown: no file\n");
}

}  // namespace
}  // namespace trainctl::client
