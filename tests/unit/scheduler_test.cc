#include "coordinator/scheduler.h"

#include <gtest/gtest.h>

namespace trainctl::coordinator {
namespace {

using Workers = std::vector<WorkerSlots>;

TEST(SchedulerTest, PacksRanksOntoWorkersWithMostFreeSlots) {
  ScheduleResult r = Schedule({{"a", 3}}, Workers{{"w1", 1, 1}, {"w2", 2, 2}});
  ASSERT_EQ(r.placements.size(), 1u);
  EXPECT_EQ(r.placements[0].job_id, "a");
  EXPECT_EQ(r.placements[0].rank_workers,
            (std::vector<std::string>{"w2", "w2", "w1"}));
  EXPECT_TRUE(r.waiting.empty());
}

TEST(SchedulerTest, TiesBreakByName) {
  ScheduleResult r = Schedule({{"a", 2}}, Workers{{"w2", 1, 1}, {"w1", 1, 1}});
  ASSERT_EQ(r.placements.size(), 1u);
  EXPECT_EQ(r.placements[0].rank_workers,
            (std::vector<std::string>{"w1", "w2"}));
}

TEST(SchedulerTest, GangOnlyWhenAllRanksFitAndSaysWhy) {
  ScheduleResult r = Schedule({{"big", 4}}, Workers{{"w1", 1, 2}, {"w2", 1, 2}});
  EXPECT_TRUE(r.placements.empty());
  EXPECT_EQ(r.waiting.at("big"), "needs 4 slots; 2 of 4 registered slots free");
}

TEST(SchedulerTest, CountsOnlyFreeSlots) {
  ScheduleResult r = Schedule({{"j", 2}}, Workers{{"w1", 0, 2}, {"w2", 1, 2}});
  EXPECT_TRUE(r.placements.empty());
  EXPECT_EQ(r.waiting.at("j"), "needs 2 slots; 1 of 4 registered slots free");
}

TEST(SchedulerTest, NoWorkers) {
  ScheduleResult r = Schedule({{"j", 1}}, Workers{});
  EXPECT_EQ(r.waiting.at("j"), "needs 1 slots; no workers registered");
}

TEST(SchedulerTest, AJobThatCanNeverFitBlocksNoOne) {
  ScheduleResult r = Schedule({{"first", 1}, {"big", 3}, {"small", 1}},
                              Workers{{"w1", 2, 2}});
  ASSERT_EQ(r.placements.size(), 2u);
  EXPECT_EQ(r.placements[0].job_id, "first");
  EXPECT_EQ(r.placements[1].job_id, "small");
  EXPECT_FALSE(r.placements[1].backfilled);
  EXPECT_EQ(r.waiting.at("big"),
            "needs 3 slots and the cluster has 2 in all; it waits for more workers and holds up no other job");
}

TEST(SchedulerTest, PlacesSeveralJobsInOrderWhileSlotsLast) {
  ScheduleResult r =
      Schedule({{"a", 2}, {"b", 1}, {"c", 2}}, Workers{{"w1", 2, 2}, {"w2", 2, 2}});
  ASSERT_EQ(r.placements.size(), 2u);
  EXPECT_EQ(r.placements[0].rank_workers,
            (std::vector<std::string>{"w1", "w1"}));
  EXPECT_EQ(r.placements[1].rank_workers, (std::vector<std::string>{"w2"}));
  EXPECT_EQ(r.waiting.at("c"), "needs 2 slots; 1 of 4 registered slots free");
}

TEST(SchedulerTest, RestartTakesTheMostRanksThatFitAndDivideTheBatch) {
  PendingJob job{"r", 4, 2, 24, ""};
  // 3 free slots: 3 divides 24.
  ScheduleResult r = Schedule({job}, Workers{{"w1", 2, 2}, {"w2", 1, 1}});
  ASSERT_EQ(r.placements.size(), 1u);
  EXPECT_EQ(r.placements[0].rank_workers.size(), 3u);
  // Batch 20 over 3 free slots: 3 does not divide it, 2 does.
  job.batch = 20;
  r = Schedule({job}, Workers{{"w1", 2, 2}, {"w2", 1, 1}});
  ASSERT_EQ(r.placements.size(), 1u);
  EXPECT_EQ(r.placements[0].rank_workers.size(), 2u);
  // Only 1 free slot: below min_ranks.
  r = Schedule({job}, Workers{{"w1", 1, 2}});
  EXPECT_TRUE(r.placements.empty());
  EXPECT_EQ(r.waiting.at("r"),
            "needs 2 to 4 slots (a count that divides the batch of 20); 1 of 2 "
            "registered slots free");
}

TEST(SchedulerTest, ANotReadyJobKeepsTheSlotsItRestartsOn) {
  // r restarts on up to 2 ranks; nothing else runs, so both free slots
  // are its own once its stopping rank is gone: q may not take them.
  ScheduleResult r = Schedule(
      {{"r", 2, 1, 8, "waiting for 1 rank of generation 1 to stop"}, {"q", 1}},
      Workers{{"w1", 2, 2}});
  EXPECT_TRUE(r.placements.empty());
  EXPECT_EQ(r.waiting.at("r"), "waiting for 1 rank of generation 1 to stop");
  EXPECT_EQ(r.waiting.at("q"),
            "needs 1 slots; 2 of 2 registered slots free; the free ones are "
            "held for job r, ahead in the queue");
  // With a third slot the reservation leaves one over, and q takes it.
  r = Schedule(
      {{"r", 2, 1, 8, "waiting for 1 rank of generation 1 to stop"}, {"q", 1}},
      Workers{{"w1", 3, 3}});
  ASSERT_EQ(r.placements.size(), 1u);
  EXPECT_EQ(r.placements[0].job_id, "q");
  EXPECT_TRUE(r.placements[0].backfilled);
}

// GPU slots: WorkerSlots{name, free, total, free_gpu, total_gpu}.
PendingJob OnDevice(const std::string& id, int ranks, const std::string& device) {
  PendingJob job{id, ranks};
  job.device = device;
  return job;
}

TEST(SchedulerTest, CudaJobRunsOnlyOnGpuSlots) {
  ScheduleResult r = Schedule({OnDevice("g", 2, "cuda")},
                              Workers{{"cpu-node", 8, 8, 0, 0}, {"gpu-node", 4, 4, 2, 2}});
  ASSERT_EQ(r.placements.size(), 1u);
  EXPECT_TRUE(r.placements[0].gpu);
  EXPECT_EQ(r.placements[0].rank_workers,
            (std::vector<std::string>{"gpu-node", "gpu-node"}));
  EXPECT_EQ(r.placements[0].on_gpu_slot, (std::vector<bool>{true, true}));
}

TEST(SchedulerTest, CudaJobWaitsForGpuSlotsAndSaysSo) {
  ScheduleResult r = Schedule({OnDevice("g", 3, "cuda")},
                              Workers{{"gpu-node", 4, 4, 2, 2}});
  EXPECT_TRUE(r.placements.empty());
  EXPECT_EQ(r.waiting.at("g"),
            "needs 3 GPU slots and the cluster has 2 in all; it waits for more workers and holds up no other job");
  r = Schedule({OnDevice("g", 2, "cuda")}, Workers{{"gpu-node", 4, 4, 1, 2}});
  EXPECT_EQ(r.waiting.at("g"),
            "needs 2 GPU slots; 1 of 2 registered GPU slots free");
  r = Schedule({OnDevice("g", 1, "cuda")}, Workers{{"cpu-node", 4, 4, 0, 0}});
  EXPECT_EQ(r.waiting.at("g"),
            "needs 1 GPU slots and the cluster has 0 in all; it waits for more "
            "workers and holds up no other job (start workers with --gpus on "
            "GPU nodes)");
}

TEST(SchedulerTest, AutoJobTakesGpusWhenAllRanksFitElseOrdinarySlots) {
  ScheduleResult r = Schedule({OnDevice("fits", 2, "auto"), OnDevice("not", 2, "auto")},
                              Workers{{"n", 6, 6, 2, 2}});
  ASSERT_EQ(r.placements.size(), 2u);
  EXPECT_TRUE(r.placements[0].gpu);
  EXPECT_EQ(r.placements[0].on_gpu_slot, (std::vector<bool>{true, true}));
  // The GPUs are taken: the second runs on the CPU slots, all of one kind.
  EXPECT_FALSE(r.placements[1].gpu);
  EXPECT_EQ(r.placements[1].on_gpu_slot, (std::vector<bool>{false, false}));
}

TEST(SchedulerTest, CpuJobFillsSlotsWithoutGpuFirst) {
  ScheduleResult r = Schedule({OnDevice("c", 3, "cpu"), OnDevice("g", 1, "cuda")},
                              Workers{{"n", 4, 4, 2, 2}});
  ASSERT_EQ(r.placements.size(), 2u);
  EXPECT_FALSE(r.placements[0].gpu);
  // Two plain slots, then one GPU slot; the GPU job gets the last GPU slot.
  EXPECT_EQ(r.placements[0].on_gpu_slot, (std::vector<bool>{false, false, true}));
  EXPECT_TRUE(r.placements[1].gpu);
  EXPECT_EQ(r.placements[1].rank_workers, (std::vector<std::string>{"n"}));
}

}  // namespace
}  // namespace trainctl::coordinator
