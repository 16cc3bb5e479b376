// What a job reports about all of its ranks, and the TensorBoard event file
// rank 0 writes of it. Ranks are threads joined by Gloo over loopback
// running the real training loop; data: a slice of Fashion-MNIST.
//
// Each rank sees other samples, so the ranks' own losses differ; every
// rank's contribution (TrainResult::logged) must come back on rank 0 as
// exactly the min, mean and max of the reported metric, and the event file
// must hold exactly the reported values at the reported steps.

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <future>
#include <limits>
#include <mutex>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/script.h>

#include "common/atomic_file.h"
#include "common/spec.h"
#include "tests/integration/rank_threads.h"
#include "tests/unit/tensorboard_reader.h"
#include "worker/train/collective_group.h"
#include "worker/train/grad_sync.h"
#include "worker/support/rank_spread.h"
#include "worker/train/trainer.h"

namespace trainctl::train {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kData[] = "/usr/share/datasets/fashion-mnist/";
// The values each rank contributes at a log step (TrainResult::logged).
const char* const kRankValues[] = {
    "loss",       "step_ms", "samples_per_sec", "data_ms",
    "compute_ms", "comm_ms", "optimizer_ms"};

GroupPtr GlooGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                   int world) {
  return MakeGlooGroup(store, rank, world, {});
}

// Three ranks with known values, one of them without a value (NaN).
TEST(GatherScalarsTest, EveryRankGetsEveryRanksValuesAndTheirSpread) {
  constexpr int kWorld = 3;
  auto store = c10::make_intrusive<c10d::HashStore>();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<std::vector<double>> mine = {
      {1.5, 30, 7}, {-2.25, 10, nan}, {4.0, 30.5, 9}};
  std::vector<std::future<std::vector<std::vector<double>>>> futures;
  for (int rank = 0; rank < kWorld; ++rank) {
    futures.push_back(std::async(std::launch::async, [&, rank] {
      RankCollectives sync({torch::zeros({1})}, GlooGroup(store, rank, kWorld),
                           kWorld);
      return sync.GatherScalars(mine[rank]);
    }));
  }
  for (int rank = 0; rank < kWorld; ++rank) {
    std::vector<std::vector<double>> rows = futures[rank].get();
    ASSERT_EQ(rows.size(), 3u) << "rank " << rank;
    EXPECT_EQ(rows[0], mine[0]);
    EXPECT_EQ(rows[2], mine[2]);
    EXPECT_EQ(rows[1][0], -2.25);
    EXPECT_TRUE(std::isnan(rows[1][2]));
    const Spread first = SpreadOf(rows, 0);
    EXPECT_EQ(first.min, -2.25);
    EXPECT_EQ(first.mean, (1.5 - 2.25 + 4.0) / 3);
    EXPECT_EQ(first.max, 4.0);
    EXPECT_EQ(first.max_rank, 2);
    const Spread second = SpreadOf(rows, 1);
    EXPECT_EQ(second.min, 10);
    EXPECT_EQ(second.max, 30.5);
    EXPECT_EQ(second.max_rank, 2);
    const Spread third = SpreadOf(rows, 2);  // rank 1 has none
    EXPECT_EQ(third.min, 7);
    EXPECT_EQ(third.mean, 8);
    EXPECT_EQ(third.max, 9);
  }
  // Ties go to the lowest rank; with no values at all everything is NaN.
  EXPECT_EQ(SpreadOf({{5}, {5}, {1}}, 0).max_rank, 0);
  EXPECT_EQ(SpreadOf({{nan}, {}}, 0).max_rank, -1);
}

class RankMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    char pattern[] = "/tmp/rank_metrics_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // 1024 training samples (16 steps of 64), 256 eval samples; logs every 4
  // steps, evaluates every 8.
  v1::JobSpec MakeSpec(int ranks, const std::string& extra_training = "",
                       const std::string& tensorboard_dir = "") {
    std::string text =
        "ranks: " + std::to_string(ranks) +
        "\nseed: 3\nmodel: {type: mlp, hidden: [32]}\n"
        "data:\n  train_images: " +
        std::string(kData) +
        "train-images-idx3-ubyte.gz\n"
        "  train_labels: " +
        std::string(kData) +
        "train-labels-idx1-ubyte.gz\n"
        "  train_limit: 1280\n  eval_fraction: 0.2\n"
        "optimizer: {type: sgd, lr: 0.05}\n"
        "training: {batch_size: 64, max_steps: 12, log_every_steps: 4,"
        " eval_every_steps: 8" +
        extra_training + "}\n";
    if (!tensorboard_dir.empty()) {
      text += "tensorboard: {dir: " + tensorboard_dir + "}\n";
    }
    absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(text);
    EXPECT_TRUE(spec.ok()) << spec.status();
    return *spec;
  }

  // Runs the job on spec.ranks() threads; rank 0's reports go to reported_.
  std::vector<TrainResult> Run(const v1::JobSpec& spec, int generation = 1) {
    return TrainRanksAsThreads(spec, [&](int, RankContext& ctx) {
      ctx.job_id = "job-1";
      ctx.generation = generation;
      ctx.report = [this](const v1::MetricPoint& point) {
        std::lock_guard<std::mutex> lock(mu_);
        reported_.push_back(point);
      };
    });
  }

  std::vector<v1::MetricPoint> Reported(const std::string& kind) {
    std::vector<v1::MetricPoint> out;
    for (const auto& p : reported_) {
      if (p.kind() == kind) out.push_back(p);
    }
    return out;
  }

  std::vector<std::string> EventFiles(const std::string& dir) {
    std::vector<std::string> files;
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name.rfind("events.out.tfevents.", 0) == 0) {
          files.push_back(dir + "/" + name);
        }
      }
      closedir(d);
    }
    std::sort(files.begin(), files.end());
    return files;
  }

  std::string dir_;
  std::mutex mu_;
  std::vector<v1::MetricPoint> reported_;  // GUARDED_BY(mu_)
};

double Value(const v1::MetricPoint& point, const std::string& key) {
  auto it = point.values().find(key);
  EXPECT_NE(it, point.values().end()) << point.kind() << " has no " << key;
  return it == point.values().end() ? std::nan("") : it->second;
}

TEST_F(RankMetricsTest, RankZeroReportsTheMinMeanAndMaxOfEveryRanksValues) {
  std::vector<TrainResult> ranks = Run(MakeSpec(2));
  ASSERT_EQ(ranks[0].steps, 12);
  std::vector<v1::MetricPoint> train = Reported("train");
  ASSERT_EQ(train.size(), 3u);  // steps 4, 8, 12
  const v1::MetricPoint& last = train.back();
  EXPECT_EQ(last.step(), 12);
  for (const char* key : kRankValues) {
    SCOPED_TRACE(key);
    const double r0 = ranks[0].logged.at(key), r1 = ranks[1].logged.at(key);
    EXPECT_EQ(Value(last, std::string(key) + "_min"), std::min(r0, r1));
    EXPECT_EQ(Value(last, std::string(key) + "_max"), std::max(r0, r1));
    if (std::string(key) != "loss") {
      EXPECT_DOUBLE_EQ(Value(last, key), (r0 + r1) / 2);
    }
  }
  // Different samples, different losses; `loss` keeps its meaning, the
  // global mean (all-reduced with the gradients, in float32).
  const double l0 = ranks[0].logged.at("loss"), l1 = ranks[1].logged.at("loss");
  EXPECT_NE(l0, l1);
  EXPECT_NEAR(Value(last, "loss"), (l0 + l1) / 2, 1e-6);
  EXPECT_EQ(Value(last, "loss"), ranks[0].final_train_loss);
  // The slowest rank: the one that spent the most time not waiting for the
  // others (its step time less its communication wait).
  auto working = [&](int r) {
    return ranks[r].logged.at("step_ms") - ranks[r].logged.at("comm_ms");
  };
  EXPECT_EQ(Value(last, "slowest_rank"), working(1) > working(0) ? 1 : 0);
  // The keys consumers read before are all still there.
  for (const char* key : {"lr", "grad_norm", "samples_per_sec", "data_ms",
                          "compute_ms", "comm_ms", "optimizer_ms"}) {
    EXPECT_EQ(last.values().count(key), 1u) << key;
  }

  // Evaluation at step 8 and at the end: exact totals plus the spread of
  // the ranks' slices (equal halves here, so the mean of the two).
  std::vector<v1::MetricPoint> eval = Reported("eval");
  ASSERT_EQ(eval.size(), 2u);
  for (const auto& e : eval) {
    const double lo = Value(e, "eval_loss_min"), hi = Value(e, "eval_loss_max");
    EXPECT_LT(lo, hi);
    EXPECT_NEAR(Value(e, "eval_loss"), (lo + hi) / 2, 1e-9);
    EXPECT_LE(Value(e, "eval_ms_min"), Value(e, "eval_ms"));
    EXPECT_LE(Value(e, "eval_ms"), Value(e, "eval_ms_max"));
    EXPECT_GT(Value(e, "eval_accuracy"), 0);
  }
  EXPECT_EQ(ranks[0].eval, ranks[1].eval);  // every rank has the same view
}

// Precision, recall, F1 and top-5 are summed from every rank's class counts,
// never averaged: with the parameters held still (a learning rate too small
// to move a float32 weight), 1 rank and 4 ranks (uneven slices of 250 eval
// samples) report the same numbers.
// A rank made slow in compute (the test-only slow_compute hook) is reported
// by rank 0 once it has been slow for straggler_steps steps; training goes
// on. With straggler_ratio 0 nothing is reported. Only the compute phase is
// asserted: data waits are what a loaded machine makes them (a CI run once
// reported a data straggler beside it), and the 150 ms delay keeps the
// slow rank above 1.5 times its peer's compute however loaded.
TEST_F(RankMetricsTest, RankZeroNamesARankThatComputesSlowerThanItsPeers) {
  for (const double ratio : {1.5, 0.0}) {
    SCOPED_TRACE(ratio);
    v1::JobSpec spec = MakeSpec(2);
    spec.mutable_fault_tolerance()->set_straggler_ratio(ratio);
    spec.mutable_fault_tolerance()->set_straggler_steps(8);
    reported_.clear();
    const std::vector<TrainResult> ranks =
        TrainRanksAsThreads(spec, [&](int rank, RankContext& ctx) {
          ctx.job_id = "job-1";
          ctx.report = [this](const v1::MetricPoint& point) {
            std::lock_guard<std::mutex> lock(mu_);
            reported_.push_back(point);
          };
          if (rank == 1) {
            ctx.faults = *FaultHooks::Parse("slow_compute:rank=1,step=0,ms=150");
          }
        });
    ASSERT_EQ(ranks.size(), 2u);
    EXPECT_EQ(ranks[0].steps, 12);  // not stopped for it
    const std::vector<v1::MetricPoint> all = Reported("straggler");
    if (ratio == 0) {
      EXPECT_TRUE(all.empty());
      continue;
    }
    std::vector<v1::MetricPoint> found;  // the compute phase's
    for (const v1::MetricPoint& p : all) {
      if (Value(p, "phase") == 1) found.push_back(p);
    }
    ASSERT_EQ(found.size(), 1u) << found.size() << " compute reports";
    EXPECT_EQ(found[0].step(), 8);  // two windows of 4 steps
    EXPECT_EQ(Value(found[0], "rank"), 1);
    EXPECT_EQ(Value(found[0], "phase"), 1);  // compute
    EXPECT_GT(Value(found[0], "ratio"), 1.5);
    EXPECT_EQ(Value(found[0], "steps"), 8);
    EXPECT_EQ(Value(found[0], "recovered"), 0);
  }
}

TEST_F(RankMetricsTest, ClassMetricsAreExactWhateverTheNumberOfRanks) {
  auto last_eval = [&](int ranks) {
    reported_.clear();
    v1::JobSpec spec = MakeSpec(ranks, ", eval_per_class: true");
    spec.mutable_optimizer()->set_lr(1e-30);
    spec.mutable_data()->set_eval_limit(250);
    Run(spec);
    std::vector<v1::MetricPoint> eval = Reported("eval");
    EXPECT_FALSE(eval.empty());
    return eval.empty() ? v1::MetricPoint() : eval.back();
  };
  const v1::MetricPoint one = last_eval(1);
  const v1::MetricPoint four = last_eval(4);
  for (const std::string key :
       {"eval_accuracy", "eval_top5_accuracy", "eval_precision", "eval_recall",
        "eval_f1", "eval_f1_0", "eval_precision_9", "eval_recall_4"}) {
    EXPECT_DOUBLE_EQ(Value(one, key), Value(four, key)) << key;
  }
  // The loss is summed in float32 per batch, so only nearly the same.
  EXPECT_NEAR(Value(one, "eval_loss"), Value(four, "eval_loss"), 1e-6);
  EXPECT_GE(Value(one, "eval_top5_accuracy"), Value(one, "eval_accuracy"));
  // The macro recall is the mean of the per-class recalls (all 10 classes
  // occur among 250 Fashion-MNIST samples).
  double recall_sum = 0;
  for (int c = 0; c < 10; ++c) {
    recall_sum += Value(one, "eval_recall_" + std::to_string(c));
  }
  EXPECT_NEAR(Value(one, "eval_recall"), recall_sum / 10, 1e-12);
}

// Distillation from a frozen teacher, as a TorchScript module's own
// loss(inputs, targets): two ranks train the student toward the teacher's
// outputs (the labels unused), the teacher stays as it was, and evaluation
// still scores the student's forward on the labels.
TEST_F(RankMetricsTest, ATorchScriptLossDistilsAFrozenTeacher) {
  torch::manual_seed(5);
  torch::jit::Module module("Distil");
  module.register_parameter(
      "weight", torch::zeros({10, 784}).requires_grad_(true), false);
  module.register_parameter("bias", torch::zeros({10}).requires_grad_(true),
                            false);
  const torch::Tensor teacher = torch::randn({10, 784}) * 0.05;
  module.register_parameter("teacher", teacher.clone(), false);  // frozen
  module.define(R"(
    def forward(self, x):
        return torch.matmul(x.flatten(1), self.weight.t()) + self.bias
    def loss(self, x, y):
        target = torch.matmul(x.flatten(1), self.teacher.t())
        return torch.mean((self.forward(x) - target) ** 2)
  )");
  const std::string path = dir_ + "/distil.pt";
  module.save(path);
  v1::JobSpec spec = MakeSpec(2);
  spec.mutable_model()->Clear();
  spec.mutable_model()->set_type("torchscript");
  spec.mutable_model()->set_path(path);
  spec.mutable_optimizer()->set_type("adamw");
  spec.mutable_optimizer()->set_lr(0.01);
  spec.mutable_training()->set_epochs(5);
  spec.mutable_training()->set_max_steps(100);
  std::vector<TrainResult> ranks = Run(spec);
  ASSERT_EQ(ranks.size(), 2u);
  std::vector<v1::MetricPoint> train = Reported("train");
  ASSERT_GE(train.size(), 2u);
  const double first = Value(train.front(), "loss");
  const double last = Value(train.back(), "loss");
  // The squared distance to the teacher, not a cross-entropy (which stays
  // above 0.3 on Fashion-MNIST in 100 steps): it falls toward 0.
  EXPECT_LT(last, first * 0.2) << first << " -> " << last;
  EXPECT_LT(last, 0.05);
  // Only the student trained (the frozen teacher is no trainable
  // parameter): its two tensors, equal on both ranks.
  ASSERT_EQ(ranks[0].parameters.size(), 2u);
  EXPECT_EQ(ranks[0].parameters[0].sizes(), teacher.sizes());
  EXPECT_TRUE(torch::equal(ranks[0].parameters[0], ranks[1].parameters[0]));
  EXPECT_FALSE(torch::equal(ranks[0].parameters[0], teacher));  // close, not equal
  std::vector<v1::MetricPoint> eval = Reported("eval");
  ASSERT_FALSE(eval.empty());
  EXPECT_GE(Value(eval.back(), "eval_accuracy"), 0.0);
  EXPECT_GT(Value(eval.back(), "eval_loss"), 0.0);
}

TEST_F(RankMetricsTest, WithLocalSgdTheLossIsTheMeanOfTheRanksOwnLosses) {
  std::vector<TrainResult> ranks = Run(MakeSpec(2, ", local_sgd_steps: 3"));
  const v1::MetricPoint last = Reported("train").back();
  const double l0 = ranks[0].logged.at("loss"), l1 = ranks[1].logged.at("loss");
  EXPECT_NE(l0, l1);
  EXPECT_DOUBLE_EQ(Value(last, "loss"), (l0 + l1) / 2);
  EXPECT_EQ(Value(last, "loss_min"), std::min(l0, l1));
  EXPECT_EQ(Value(last, "loss_max"), std::max(l0, l1));
}

// Every train and eval value rank 0 reported, at its step, under
// "<kind>/<key>", and nothing else; a second generation of the same job
// writes a second file beside the first.
TEST_F(RankMetricsTest, TheEventFileHoldsExactlyWhatWasReported) {
  const std::string tb = dir_ + "/tb";
  const v1::JobSpec spec = MakeSpec(2, "", tb);
  Run(spec);
  std::vector<std::string> files = EventFiles(tb + "/job-1");
  ASSERT_EQ(files.size(), 1u);
  EXPECT_THAT(files[0], HasSubstr("/job-1/events.out.tfevents."));
  absl::StatusOr<testing::TensorBoardEventFile> file =
      testing::ReadTensorBoardEventFile(files[0]);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->file_version, "brain.Event:2");

  std::vector<testing::TensorBoardScalar> expected;
  int charted_points = 0;
  for (const auto& p : reported_) {
    if (p.kind() != "train" && p.kind() != "eval") continue;
    ++charted_points;
    std::map<std::string, double> sorted(p.values().begin(), p.values().end());
    for (const auto& [key, value] : sorted) {
      expected.push_back({p.kind() + "/" + key, p.step(),
                          static_cast<float>(value),
                          p.time_unix_ms() / 1000.0});
    }
  }
  EXPECT_EQ(charted_points, 5);  // 3 train, 2 eval
  EXPECT_EQ(file->events, 1 + charted_points);
  ASSERT_EQ(file->scalars.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(expected[i].tag);
    EXPECT_EQ(file->scalars[i].tag, expected[i].tag);
    EXPECT_EQ(file->scalars[i].step, expected[i].step);
    if (std::isnan(expected[i].value)) {
      EXPECT_TRUE(std::isnan(file->scalars[i].value));
    } else {
      EXPECT_EQ(file->scalars[i].value, expected[i].value);
    }
    EXPECT_EQ(file->scalars[i].wall_time, expected[i].wall_time);
  }
  // The loss curve, step by step, as the job reported it.
  std::vector<std::pair<int64_t, float>> losses;
  for (const auto& s : file->scalars) {
    if (s.tag == "train/loss") losses.emplace_back(s.step, s.value);
  }
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_EQ(losses[0].first, 4);
  EXPECT_EQ(losses[2].first, 12);
  EXPECT_EQ(losses[2].second,
            static_cast<float>(Value(Reported("train").back(), "loss")));

  reported_.clear();
  Run(spec, /*generation=*/2);
  files = EventFiles(tb + "/job-1");
  ASSERT_EQ(files.size(), 2u);
  for (const auto& f : files) {
    absl::StatusOr<testing::TensorBoardEventFile> read =
        testing::ReadTensorBoardEventFile(f);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->events, 6);
  }
}

TEST_F(RankMetricsTest, AnUnwritableTensorBoardDirFailsBeforeTheDataIsRead) {
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/not-a-dir", "").ok());
  const v1::JobSpec spec = MakeSpec(1, "", dir_ + "/not-a-dir");
  RankContext ctx;
  ctx.job_id = "job-1";
  bool loaded = false;
  ctx.load_data = [&]() -> absl::StatusOr<Datasets> {
    loaded = true;
    return LoadDatasets(spec);
  };
  bool reported = false;
  ctx.report = [&](const v1::MetricPoint&) { reported = true; };
  absl::StatusOr<TrainResult> result = Train(spec, ctx);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(std::string(result.status().message()),
              StartsWith("tensorboard.dir: "));
  EXPECT_THAT(std::string(result.status().message()),
              HasSubstr(dir_ + "/not-a-dir"));
  EXPECT_FALSE(loaded);
  EXPECT_FALSE(reported);
}

}  // namespace
}  // namespace trainctl::train
