// GPU slots in the coordinator: a worker registers how many of its slots
// have a GPU; a job on `cuda` runs only there, and its ranks are told to
// take one (RankAssignment.gpu).

#include "tests/unit/job_manager_fixture.h"

namespace trainctl::coordinator {
namespace {

std::string GpuSpec(int ranks, const std::string& device) {
  return "name: g\nranks: " + std::to_string(ranks) +
         "\nmodel: mlp\ndata: {train_images: a, train_labels: b}\n"
         "training: {batch_size: " + std::to_string(ranks * 8) +
         ", device: " + device + "}\nfault_tolerance: {max_restarts: 0}\n";
}

class JobManagerGpuTest : public JobManagerTest {
 protected:
  std::shared_ptr<FakeAgentLink> AddGpuWorker(const std::string& name,
                                              int slots, int gpu_slots) {
    auto link = std::make_shared<FakeAgentLink>();
    v1::RegisterRequest reg;
    reg.set_name(name);
    reg.set_slots(slots);
    reg.set_gpu_slots(gpu_slots);
    reg.set_collective_host("127.0.0.1");
    EXPECT_TRUE(jobs_.RegisterWorker(reg, link).ok());
    return link;
  }
};

TEST_F(JobManagerGpuTest, CudaJobGoesToGpuSlotsAndItsRanksAreToldSo) {
  auto cpu = AddWorker("cpu-node", 8);
  auto gpu = AddGpuWorker("gpu-node", 2, 2);
  v1::Job job = *jobs_.Submit(GpuSpec(2, "cuda"), false);
  EXPECT_EQ(job.state(), v1::JOB_STATE_RUNNING);
  EXPECT_TRUE(cpu->Assignments().empty());
  ASSERT_EQ(gpu->Assignments().size(), 2u);
  for (const auto& a : gpu->Assignments()) EXPECT_TRUE(a.gpu());
  const v1::Job running = *jobs_.Get(job.id());
  for (const auto& r : running.ranks()) {
    EXPECT_TRUE(r.gpu());
    EXPECT_TRUE(r.gpu_slot());
  }
}

TEST_F(JobManagerGpuTest, SecondCudaJobWaitsForTheGpusThenStarts) {
  AddWorker("cpu-node", 8);
  AddGpuWorker("gpu-node", 4, 1);
  v1::Job first = *jobs_.Submit(GpuSpec(1, "cuda"), false);
  v1::Job second = *jobs_.Submit(GpuSpec(1, "cuda"), false);
  EXPECT_EQ(jobs_.Get(second.id())->state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(jobs_.Get(second.id())->pending_reason(),
            "needs 1 GPU slots; 0 of 1 registered GPU slots free");
  for (const v1::WorkerInfo& w : jobs_.Workers()) {
    if (w.name() == "gpu-node") {
      EXPECT_EQ(w.gpu_slots_total(), 1);
      EXPECT_EQ(w.gpu_slots_free(), 0);
    }
  }
  Exit("gpu-node", first.id(), 0, 0);
  EXPECT_EQ(jobs_.Get(first.id())->state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(jobs_.Get(second.id())->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(jobs_.Get(second.id())->ranks(0).worker(), "gpu-node");
}

TEST_F(JobManagerGpuTest, CpuJobLeavesTheGpuSlotForAGpuJob) {
  auto node = AddGpuWorker("node", 2, 1);
  v1::Job cpu_job = *jobs_.Submit(GpuSpec(1, "cpu"), false);
  v1::Job gpu_job = *jobs_.Submit(GpuSpec(1, "cuda"), false);
  EXPECT_EQ(jobs_.Get(cpu_job.id())->state(), v1::JOB_STATE_RUNNING);
  EXPECT_FALSE(jobs_.Get(cpu_job.id())->ranks(0).gpu_slot());
  EXPECT_EQ(jobs_.Get(gpu_job.id())->state(), v1::JOB_STATE_RUNNING);
  const auto assigned = node->Assignments();
  ASSERT_EQ(assigned.size(), 2u);
  EXPECT_FALSE(assigned[0].gpu());
  EXPECT_TRUE(assigned[1].gpu());
}

TEST_F(JobManagerGpuTest, AutoJobUsesGpusWhenTheyAreFree) {
  AddGpuWorker("node", 4, 2);
  v1::Job job = *jobs_.Submit(GpuSpec(2, "auto"), false);
  v1::Job on_cpu = *jobs_.Submit(GpuSpec(2, "auto"), false);
  EXPECT_TRUE(jobs_.Get(job.id())->ranks(0).gpu());
  EXPECT_EQ(jobs_.Get(on_cpu.id())->state(), v1::JOB_STATE_RUNNING);
  EXPECT_FALSE(jobs_.Get(on_cpu.id())->ranks(0).gpu());
}

TEST_F(JobManagerGpuTest, MoreGpuSlotsThanSlotsIsRefused) {
  v1::RegisterRequest reg;
  reg.set_name("liar");
  reg.set_slots(2);
  reg.set_gpu_slots(3);
  reg.set_collective_host("127.0.0.1");
  absl::Status s = jobs_.RegisterWorker(reg, std::make_shared<FakeAgentLink>());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "register.gpu_slots: must be from 0 to the 2 slots, got 3");
}

}  // namespace
}  // namespace trainctl::coordinator
