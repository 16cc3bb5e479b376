// The live view of `trainctl watch`: its pure pieces (sparkline, bar, ETA,
// start-up progress, step time) and whole rendered blocks for hand-built
// models, plus the in-place redraw escapes.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include <sstream>

#include "client/live_terminal.h"
#include "client/live_view.h"

namespace trainctl::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kT0 = 1'700'000'000'000;

v1::MetricPoint Train(int64_t step, int64_t time_ms, double loss) {
  v1::MetricPoint p;
  p.set_kind("train");
  p.set_step(step);
  p.set_epoch(static_cast<int>(step / 500));
  p.set_time_unix_ms(time_ms);
  (*p.mutable_values())["loss"] = loss;
  (*p.mutable_values())["samples_per_sec"] = 640;
  return p;
}

v1::JobEvent Event(int64_t seq, const v1::MetricPoint& point) {
  v1::JobEvent e;
  e.set_seq(seq);
  e.set_time_unix_ms(point.time_unix_ms());
  *e.mutable_metric() = point;
  return e;
}

v1::JobEvent Transition(int64_t seq, v1::JobState from, v1::JobState to,
                        const std::string& reason) {
  v1::JobEvent e;
  e.set_seq(seq);
  e.set_time_unix_ms(kT0);
  e.mutable_transition()->set_from(from);
  e.mutable_transition()->set_to(to);
  e.mutable_transition()->set_time_unix_ms(kT0);
  e.mutable_transition()->set_reason(reason);
  return e;
}

// A RUNNING 4-rank job on node-a..node-d; `joined` ranks have joined.
v1::Job FourRankJob(int joined) {
  v1::Job job;
  job.set_id("job-7");
  job.mutable_spec()->set_name("mnist");
  job.mutable_spec()->set_ranks(4);
  job.mutable_spec()->mutable_training()->set_batch_size(64);
  job.mutable_spec()->mutable_training()->set_epochs(2);
  job.set_state(v1::JOB_STATE_RUNNING);
  job.set_generation(1);
  job.set_world_size(4);
  job.set_total_steps(1000);
  job.set_started_unix_ms(kT0);
  for (int r = 0; r < 4; ++r) {
    v1::RankInfo* info = job.add_ranks();
    info->set_rank(r);
    info->set_worker(std::string("node-") + static_cast<char>('a' + r));
    info->set_state(v1::RANK_STATE_RUNNING);
    info->set_joined(r < joined);
  }
  return job;
}

RenderContext Utc() {
  RenderContext ctx;
  ctx.now_unix_ms = kT0;
  return ctx;
}

TEST(SparklineTest, ScalesBetweenMinAndMax) {
  EXPECT_EQ(Sparkline({1, 2, 3, 4, 5, 6, 7, 8}), "▁▂▃▄▅▆▇█");
  EXPECT_EQ(Sparkline({8, 1}), "█▁");
  EXPECT_EQ(Sparkline({2, 2, 2}), "▄▄▄");
  EXPECT_EQ(Sparkline({1, NAN, 3}), "▁ █");
  EXPECT_EQ(Sparkline({}), "");
}

TEST(ProgressBarTest, FullCellsThenAnEighthCell) {
  EXPECT_EQ(ProgressBar(0.5, 10), "[█████     ]");
  EXPECT_EQ(ProgressBar(0, 4), "[    ]");
  EXPECT_EQ(ProgressBar(1, 4), "[████]");
  EXPECT_EQ(ProgressBar(2, 4), "[████]");  // clamped
  EXPECT_EQ(ProgressBar(1.0 / 16, 2), "[▏ ]");  // one eighth of 2 cells
  EXPECT_EQ(ProgressBar(0.5 + 1.0 / 16, 4), "[██▎ ]");  // 2 cells + 2/8
}

TEST(EstimateRemainingTest, FromRecentStepsElseFromSamplesPerSecond) {
  v1::JobSpec spec;
  spec.mutable_training()->set_batch_size(64);
  // 100 steps in 10 s: 10 steps/s; 800 left.
  std::deque<v1::MetricPoint> recent = {Train(100, kT0, 1),
                                        Train(200, kT0 + 10'000, 1)};
  EXPECT_EQ(EstimateRemaining(recent, 1000, spec), absl::Seconds(80));
  // One point: 640 samples/s over 64 per step is 10 steps/s; 900 left.
  EXPECT_EQ(EstimateRemaining({Train(100, kT0, 1)}, 1000, spec),
            absl::Seconds(90));
  spec.mutable_training()->set_grad_accum_steps(2);
  EXPECT_EQ(EstimateRemaining({Train(100, kT0, 1)}, 1000, spec),
            absl::Seconds(180));
  EXPECT_EQ(EstimateRemaining(recent, 0, spec), std::nullopt);     // unknown
  EXPECT_EQ(EstimateRemaining(recent, 200, spec), std::nullopt);   // done
  EXPECT_EQ(EstimateRemaining({}, 1000, spec), std::nullopt);
}

TEST(StartupProgressTest, NamesTheRanksNotJoinedAndWhere) {
  EXPECT_EQ(StartupProgress(FourRankJob(3), false),
            "3 of 4 ranks joined; waiting for rank 3 on node-d");
  EXPECT_EQ(StartupProgress(FourRankJob(0), false),
            "0 of 4 ranks joined; waiting for rank 0 on node-a, rank 1 on "
            "node-b, rank 2 on node-c and 1 more");
  EXPECT_EQ(StartupProgress(FourRankJob(4), false),
            "4 of 4 ranks joined; forming the process group");
  EXPECT_EQ(StartupProgress(FourRankJob(3), true), "");  // training
  v1::Job queued = FourRankJob(0);
  queued.set_state(v1::JOB_STATE_QUEUED);
  EXPECT_EQ(StartupProgress(queued, false), "");
}

TEST(StartupProgressTest, ASnapshotTellsWhenTheGenerationTrains) {
  v1::Job job = FourRankJob(4);
  EXPECT_FALSE(TrainedThisGeneration(job));
  v1::RankProgress* p = job.add_progress();
  p->set_phase("starting");
  EXPECT_FALSE(TrainedThisGeneration(job));
  p->set_phase("compute");
  EXPECT_TRUE(TrainedThisGeneration(job));
  job.clear_progress();
  // A train point from before this generation started does not count.
  *job.mutable_latest_train() = Train(50, kT0 - 1, 1);
  EXPECT_FALSE(TrainedThisGeneration(job));
  *job.mutable_latest_train() = Train(50, kT0 + 1, 1);
  EXPECT_TRUE(TrainedThisGeneration(job));
}

TEST(StepTimeTest, CrossRankKeysNameTheSlowestRankElseRankZerosBreakdown) {
  const v1::Job job = FourRankJob(4);
  v1::MetricPoint p = Train(10, kT0, 1);
  (*p.mutable_values())["data_ms"] = 5;
  (*p.mutable_values())["compute_ms"] = 80;
  (*p.mutable_values())["comm_ms"] = 30;
  (*p.mutable_values())["optimizer_ms"] = 5;
  EXPECT_EQ(StepTimeSummary(p, job),
            "step time 120 ms on rank 0 (data 5.0, compute 80.0, comm 30.0, "
            "optimizer 5.0)");
  (*p.mutable_values())["step_ms"] = 121.5;
  (*p.mutable_values())["step_ms_min"] = 110;
  (*p.mutable_values())["step_ms_max"] = 150;
  (*p.mutable_values())["slowest_rank"] = 2;
  EXPECT_EQ(StepTimeSummary(p, job),
            "step time 122 ms (min 110, max 150; slowest rank 2 on node-c)");
  EXPECT_EQ(StepTimeSummary(Train(1, kT0, 1), job).find("step time "),
            std::string::npos);
}

TEST(LiveViewTest, StartingJobShowsRendezvousProgress) {
  LiveModel model;
  ApplyJobSnapshot(model, FourRankJob(3));
  ApplyEvent(model,
             Transition(2, v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING, "placed"),
             Utc());
  const std::vector<std::string> lines = RenderLiveView(model, {});
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[0], "job-7 mnist  RUNNING  generation 1, 4 ranks");
  EXPECT_EQ(lines[1],
            "starting: 3 of 4 ranks joined; waiting for rank 3 on node-d");
  // Rank 3's process runs but has not been heard from.
  EXPECT_THAT(lines, testing::Contains(testing::AllOf(HasSubstr("rank 3"),
                                                      HasSubstr("starting"))));
  // Its first metric (the plan) arrives before the next snapshot.
  v1::MetricPoint plan;
  plan.set_kind("plan");
  plan.set_rank(3);
  ApplyEvent(model, Event(3, plan), Utc());
  EXPECT_EQ(RenderLiveView(model, {})[1],
            "starting: 4 of 4 ranks joined; forming the process group");
}

TEST(LiveViewTest, TrainingJobShowsBarLossSparklineAndSlowestRank) {
  LiveModel model;
  v1::Job job = FourRankJob(4);
  for (int r = 0; r < 4; ++r) {
    v1::RankProgress* p = job.add_progress();
    p->set_rank(r);
    p->set_step(200);
    p->set_phase(r == 1 ? "compute" : "all-reduce");
  }
  ApplyJobSnapshot(model, job);
  int64_t seq = 1;
  ApplyEvent(model,
             Transition(seq++, v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING, "x"),
             Utc());
  ApplyEvent(model, Event(seq++, Train(100, kT0, 0.9)), Utc());
  v1::MetricPoint last = Train(200, kT0 + 10'000, 0.5);
  (*last.mutable_values())["step_ms"] = 100;
  (*last.mutable_values())["step_ms_min"] = 90;
  (*last.mutable_values())["step_ms_max"] = 140;
  (*last.mutable_values())["slowest_rank"] = 1;
  (*last.mutable_values())["loss_min"] = 0.45;
  (*last.mutable_values())["loss_max"] = 0.55;
  ApplyEvent(model, Event(seq++, last), Utc());

  LiveViewOptions options;
  options.width = 100;
  const std::vector<std::string> lines = RenderLiveView(model, options);
  ASSERT_GE(lines.size(), 4u);
  EXPECT_THAT(lines[1], HasSubstr("[█"));
  EXPECT_THAT(lines[1], HasSubstr(" 20% step 200/1000  epoch 1/2  ETA 1m20s"));
  EXPECT_EQ(lines[2],
            "loss 0.5000 █▁ (ranks 0.4500-0.5500)  samples/s 640.0");
  EXPECT_EQ(lines[3],
            "step time 100 ms (min 90.0, max 140; slowest rank 1 on node-b)");
  // One row per rank; only rank 1's is marked.
  int marked = 0;
  for (const std::string& line : lines) {
    if (line.find("◀ slowest") == std::string::npos) continue;
    ++marked;
    EXPECT_THAT(line, HasSubstr("rank 1"));
    EXPECT_THAT(line, HasSubstr("node-b"));
    EXPECT_THAT(line, HasSubstr("compute"));
  }
  EXPECT_EQ(marked, 1);
  EXPECT_THAT(lines, Not(testing::Contains(HasSubstr("starting:"))));
}

// Heartbeat progress lags the metrics: a rank row never shows a step
// before the last logged one (every rank finished it), unless the ranks
// drift on their own under local SGD.
TEST(LiveViewTest, RankRowsKeepUpWithTheBar) {
  auto rank_steps = [](bool local_sgd) {
    LiveModel model;
    v1::Job job = FourRankJob(4);
    if (local_sgd) job.mutable_spec()->mutable_training()->set_local_sgd_steps(8);
    for (int r = 0; r < 4; ++r) {
      v1::RankProgress* p = job.add_progress();
      p->set_rank(r);
      p->set_step(r == 3 ? 260 : 230);  // rank 3's report is the newest
      p->set_phase("compute");
    }
    ApplyJobSnapshot(model, job);
    ApplyEvent(model, Transition(1, v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING, "x"),
               Utc());
    ApplyEvent(model, Event(2, Train(250, kT0, 0.5)), Utc());
    LiveViewOptions options;
    options.width = 100;
    std::vector<std::string> steps;
    for (const std::string& line : RenderLiveView(model, options)) {
      std::smatch m;
      if (std::regex_search(line, m, std::regex("rank [0-3] +node-[a-d] +([0-9]+) "))) {
        steps.push_back(m[1]);
      }
    }
    return steps;
  };
  EXPECT_THAT(rank_steps(false), ElementsAre("250", "250", "250", "260"));
  EXPECT_THAT(rank_steps(true), ElementsAre("230", "230", "230", "260"));
}

TEST(LiveViewTest, StateChangesGoAboveAndARestartStartsAFreshHistory) {
  LiveModel model;
  ApplyJobSnapshot(model, FourRankJob(4));
  std::vector<std::string> above = ApplyEvent(
      model,
      Transition(1, v1::JOB_STATE_RUNNING, v1::JOB_STATE_RESTARTING, "rank 2 died"),
      Utc());
  EXPECT_THAT(above, ElementsAre("22:13:20 RUNNING -> RESTARTING: rank 2 died"));
  EXPECT_TRUE(ApplyEvent(model, Event(2, Train(300, kT0, 0.4)), Utc()).empty());
  ApplyEvent(model, Event(3, Train(200, kT0 + 1, 0.6)), Utc());
  ASSERT_EQ(model.recent_train.size(), 1u);
  EXPECT_EQ(model.recent_train.back().step(), 200);
  const std::vector<std::string> lines = RenderLiveView(model, {});
  EXPECT_THAT(lines[0], HasSubstr("RESTARTING"));
  EXPECT_THAT(lines[1], HasSubstr("waiting: rank 2 died"));
}

TEST(LiveViewTest, FinalViewSaysWhyAndLinesFitTheWidth) {
  LiveModel model;
  ApplyJobSnapshot(model, FourRankJob(4));
  ApplyEvent(model, Event(1, Train(1000, kT0, 0.1)), Utc());
  ApplyEvent(model,
             Transition(2, v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED,
                        "all 4 ranks finished"),
             Utc());
  LiveViewOptions options;
  options.width = 30;
  const std::vector<std::string> lines = RenderLiveView(model, options);
  EXPECT_THAT(lines[0], HasSubstr("SUCCEEDED"));
  EXPECT_EQ(lines[1], "reason: all 4 ranks finished");
  for (const std::string& line : lines) {
    EXPECT_EQ(FitWidth(line, 30), line);
    EXPECT_LE(FitWidth(line, 1000).size(), line.size());
  }
  EXPECT_THAT(lines[2], HasSubstr("100%"));
}

TEST(FitWidthTest, CountsCodePointsNotBytes) {
  EXPECT_EQ(FitWidth("▁▂▃▄", 2), "▁▂");
  EXPECT_EQ(FitWidth("abc", 5), "abc");
  EXPECT_EQ(FitWidth("abc", 0), "abc");  // unknown width: unchanged
}

TEST(LiveBlockTest, RedrawMovesUpOverTheOldBlockAndClears) {
  std::ostringstream out;
  LiveBlock block(out);
  block.Draw({"a", "b"});
  EXPECT_EQ(out.str(), "a\nb\n");
  out.str("");
  block.Draw({"c"});
  EXPECT_EQ(out.str(), "\r\x1b[2A\x1b[Jc\n");
  out.str("");
  block.PrintAbove({"event"});
  EXPECT_EQ(out.str(), "\r\x1b[1A\x1b[Jevent\nc\n");
  out.str("");
  block.Draw({"c"});  // unchanged: nothing written
  EXPECT_EQ(out.str(), "");
  block.Draw({"d"}, {"e1", "e2"});
  EXPECT_EQ(out.str(), "\r\x1b[1A\x1b[Je1\ne2\nd\n");
}

}  // namespace
}  // namespace trainctl::client
