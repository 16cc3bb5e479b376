// Checkpoints are exact and do not depend on the world size: a run resumed
// from a checkpoint ends where the uninterrupted run ends, for every
// optimizer, and a checkpoint written by 4 ranks loads into 2 or 3 ranks
// with identical parameters. Ranks are threads joined by Gloo over loopback;
// data: a slice of Fashion-MNIST.

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>

#include "common/spec.h"
#include "common/atomic_file.h"
#include "tests/integration/rank_threads.h"
#include "worker/train/models/model.h"
#include "worker/train/optim/optimizers.h"
#include "worker/train/checkpointer.h"
#include "worker/train/train_state.h"
#include "worker/train/trainer.h"

namespace trainctl::train {
namespace {

constexpr char kData[] = "/usr/share/datasets/fashion-mnist/";

class CheckpointResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/checkpoint_resume_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // 1536 samples, global batch 48 (divisible by 1, 2, 3 and 4 ranks).
  v1::JobSpec MakeSpec(int ranks, const std::string& optimizer, int max_steps,
                       int every_steps) {
    std::string text =
        "ranks: " + std::to_string(ranks) +
        "\nseed: 5\nmodel: {type: mlp, hidden: [64]}\n"
        "data:\n  train_images: " + std::string(kData) +
        "train-images-idx3-ubyte.gz\n"
        "  train_labels: " + std::string(kData) + "train-labels-idx1-ubyte.gz\n"
        "  train_limit: 1536\n"
        "optimizer: " + optimizer + "\n"
        "scheduler: {type: linear, warmup_steps: 4}\n"
        "training: {batch_size: 48, max_steps: " + std::to_string(max_steps) +
        ", log_every_steps: 1000}\n"
        "checkpoint: {dir: " + dir_ + ", every_steps: " +
        std::to_string(every_steps) + "}\n";
    absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(text);
    EXPECT_TRUE(spec.ok()) << spec.status();
    return *spec;
  }

  // Runs the job on spec.ranks() threads; `job` names its checkpoint folder.
  std::vector<TrainResult> Run(const v1::JobSpec& spec, const std::string& job,
                               const std::string& resume = "") {
    return TrainRanksAsThreads(spec, [&](int, RankContext& ctx) {
      ctx.job_id = job;
      ctx.resume_path = resume;
      ctx.on_checkpoint = [this](const v1::Checkpoint& c) {
        std::lock_guard<std::mutex> lock(mu_);
        written_.push_back(c);
      };
    });
  }

  std::string PathAt(const std::string& job, int64_t step) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const v1::Checkpoint& c : written_) {
      if (c.job_id() == job && c.step() == step) return c.path();
    }
    ADD_FAILURE() << "no checkpoint of " << job << " at step " << step;
    return "";
  }

  std::string dir_;
  std::mutex mu_;
  std::vector<v1::Checkpoint> written_;
};

double MaxAbsDifference(const std::vector<torch::Tensor>& a,
                        const std::vector<torch::Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  EXPECT_FALSE(a.empty());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  }
  return worst;
}

TEST_F(CheckpointResumeTest, ResumedRunEndsWhereTheUninterruptedOneEnds) {
  for (const std::string optimizer :
       {"{type: sgd, lr: 0.05, momentum: 0.9}", "{type: adam, lr: 0.001}",
        "{type: adamw, lr: 0.001}", "{type: adafactor, lr: 0.01, betas: [0.9, 0.999]}",
        "{type: adam8bit, lr: 0.001, block_size: 256}"}) {
    SCOPED_TRACE(optimizer);
    const std::string whole = "whole" + std::to_string(written_.size());
    const std::string resumed = "resumed" + std::to_string(written_.size());
    std::vector<TrainResult> a = Run(MakeSpec(1, optimizer, 12, 6), whole);
    std::vector<TrainResult> b =
        Run(MakeSpec(1, optimizer, 12, 6), resumed, PathAt(whole, 6));
    EXPECT_EQ(b[0].first_step, 6);
    EXPECT_EQ(b[0].steps, 12);
    // Model weights are not readable by other local accounts.
    struct stat st;
    const std::string path = PathAt(whole, 6);
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0007, 0u) << path;
    const std::string job_dir = path.substr(0, path.rfind('/'));
    ASSERT_EQ(::stat(job_dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0007, 0u) << job_dir;
    const double diff = MaxAbsDifference(a[0].parameters, b[0].parameters);
    // Same arithmetic in the same order: identical, not merely close.
    EXPECT_EQ(diff, 0.0);
    EXPECT_EQ(a[0].final_train_loss, b[0].final_train_loss);
  }
}

// Rank `asking` is asked to stop from its `nth` read of the request on
// (the loop reads it once a step, or once per parameter average with
// local SGD).
std::function<void(int, RankContext&)> AskToStop(
    int asking, int nth, const std::function<void(int, RankContext&)>& base) {
  return [=](int rank, RankContext& ctx) {
    base(rank, ctx);
    if (rank == asking) {
      ctx.stop_requested = [reads = std::make_shared<int>(0), nth] {
        return ++*reads >= nth;
      };
    }
  };
}

// Preemption's contract with the loop: one rank asked is enough, every rank
// stops after the same step, rank 0 checkpoints it, and resuming from that
// checkpoint ends exactly where the uninterrupted run ends.
TEST_F(CheckpointResumeTest, AStopRequestEndsEveryRankAfterTheSameStepAndResumesExactly) {
  const v1::JobSpec spec = MakeSpec(2, "{type: adamw, lr: 0.001}", 12, 1000);
  const std::vector<TrainResult> whole = Run(spec, "calm");
  auto named = [this](const std::string& job) {
    return [this, job](int, RankContext& ctx) {
      ctx.job_id = job;
      ctx.on_checkpoint = [this](const v1::Checkpoint& c) {
        std::lock_guard<std::mutex> lock(mu_);
        written_.push_back(c);
      };
    };
  };
  const std::vector<TrainResult> stopped =
      TrainRanksAsThreads(spec, AskToStop(1, 5, named("stopped")));
  ASSERT_EQ(stopped.size(), 2u);
  for (const TrainResult& r : stopped) {
    EXPECT_TRUE(r.stopped);
    EXPECT_EQ(r.steps, 5);
  }
  const std::vector<TrainResult> resumed =
      Run(spec, "resumed-after-stop", PathAt("stopped", 5));
  ASSERT_EQ(resumed.size(), 2u);
  EXPECT_EQ(resumed[0].first_step, 5);
  EXPECT_FALSE(resumed[0].stopped);
  EXPECT_EQ(resumed[0].steps, 12);
  EXPECT_EQ(MaxAbsDifference(whole[0].parameters, resumed[0].parameters), 0.0);
  EXPECT_EQ(whole[0].final_train_loss, resumed[0].final_train_loss);
}

TEST_F(CheckpointResumeTest, WithLocalSgdRanksStopOnlyWhereTheyAverage) {
  v1::JobSpec spec = MakeSpec(2, "{type: sgd, lr: 0.05}", 12, 1000);
  spec.mutable_training()->set_local_sgd_steps(4);
  // Rank 0 asks at the first average (step 4): every rank stops there.
  const std::vector<TrainResult> stopped =
      TrainRanksAsThreads(spec, AskToStop(0, 1, [](int, RankContext& ctx) {
                            ctx.job_id = "local-sgd";
                          }));
  ASSERT_EQ(stopped.size(), 2u);
  for (const TrainResult& r : stopped) {
    EXPECT_TRUE(r.stopped);
    EXPECT_EQ(r.steps, 4);
  }
}

TEST_F(CheckpointResumeTest, AJobWithoutCheckpointsTrainsOnWhenAskedToStop) {
  v1::JobSpec spec = MakeSpec(2, "{type: sgd, lr: 0.05}", 6, 1000);
  spec.mutable_checkpoint()->clear_dir();
  const std::vector<TrainResult> results =
      TrainRanksAsThreads(spec, AskToStop(1, 1, [](int, RankContext&) {}));
  ASSERT_EQ(results.size(), 2u);
  for (const TrainResult& r : results) {
    EXPECT_FALSE(r.stopped);
    EXPECT_EQ(r.steps, 6);
  }
}

// A checkpoint written by a trainctl whose epochs visited the data in an
// older order still resumes, and the job says the rest of that epoch is
// drawn from the new order (the plan metric's epoch_order_changed).
TEST_F(CheckpointResumeTest, ACheckpointOfAnOlderDataOrderResumesAndSaysSo) {
  const v1::JobSpec spec = MakeSpec(1, "{type: sgd, lr: 0.05}", 12, 6);
  Run(spec, "current");
  const std::string current = PathAt("current", 6);  // mid-epoch: 32 steps each
  // The same state as an older trainctl wrote it: order 1.
  absl::StatusOr<Datasets> data = LoadDatasets(spec);
  ASSERT_TRUE(data.ok()) << data.status();
  absl::StatusOr<std::unique_ptr<Model>> model = BuildModel(spec, data->info);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<torch::Tensor> params = (*model)->Parameters();
  std::unique_ptr<torch::optim::Optimizer> optimizer =
      BuildOptimizer(spec.optimizer(), params);
  const TrainingStateRefs refs{model->get(), optimizer.get(), params, nullptr};
  absl::StatusOr<std::string> bytes = ReadWholeFile(current);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<TrainingCursor> cursor = DecodeTrainingState(*bytes, refs);
  ASSERT_TRUE(cursor.ok()) << cursor.status();
  EXPECT_EQ(cursor->epoch_order, kEpochOrderVersion);
  cursor->epoch_order = 1;
  absl::StatusOr<std::string> old_bytes = EncodeTrainingState(refs, *cursor);
  ASSERT_TRUE(old_bytes.ok()) << old_bytes.status();
  const std::string old = dir_ + "/order-1.ckpt";
  std::ofstream(old, std::ios::binary) << *old_bytes;

  auto resume_plan = [&](const std::string& job, const std::string& from) {
    v1::MetricPoint plan;
    std::vector<TrainResult> results = TrainRanksAsThreads(spec, [&](int, RankContext& ctx) {
      ctx.job_id = job;
      ctx.resume_path = from;
      ctx.report = [&plan](const v1::MetricPoint& p) {
        if (p.kind() == "plan") plan = p;
      };
    });
    EXPECT_EQ(results[0].steps, 12);
    return plan;
  };
  const v1::MetricPoint from_old = resume_plan("from-old", old);
  EXPECT_EQ(from_old.values().at("first_step"), 6);
  ASSERT_TRUE(from_old.values().count("epoch_order_changed"));
  EXPECT_EQ(from_old.values().at("epoch_order_changed"), 1);
  const v1::MetricPoint from_current = resume_plan("from-current", current);
  EXPECT_EQ(from_current.values().at("first_step"), 6);
  EXPECT_EQ(from_current.values().count("epoch_order_changed"), 0u);
}

TEST_F(CheckpointResumeTest, FourRankCheckpointLoadsIntoTwoAndThreeRanks) {
  const std::string optimizer = "{type: adamw, lr: 0.001}";
  std::vector<TrainResult> four = Run(MakeSpec(4, optimizer, 8, 8), "four");
  const std::string path = PathAt("four", 8);
  for (int world : {2, 3}) {
    SCOPED_TRACE(world);
    // max_steps 8: nothing left to train, so the result is what was loaded.
    std::vector<TrainResult> loaded =
        Run(MakeSpec(world, optimizer, 8, 8), "load" + std::to_string(world),
            path);
    for (const TrainResult& r : loaded) {
      EXPECT_EQ(r.first_step, 8);
      EXPECT_EQ(MaxAbsDifference(r.parameters, four[0].parameters), 0.0);
    }
  }
  // Continuing on 3 ranks tracks 4 ranks continuing, to float tolerance
  // (the global batch, and so every update, is the same).
  // (Same max_steps on both sides: the LR schedule spans the whole run.)
  std::vector<TrainResult> four_more = Run(MakeSpec(4, optimizer, 16, 8), "f16");
  std::vector<TrainResult> three_more =
      Run(MakeSpec(3, optimizer, 16, 8), "t16", PathAt("f16", 8));
  EXPECT_LT(MaxAbsDifference(three_more[0].parameters, four_more[0].parameters),
            1e-5);
}

// A model on Fashion-MNIST's shapes and its optimizer, outside the loop,
// for tests of what a checkpoint takes from them.
struct LiveState {
  explicit LiveState(const v1::JobSpec& spec) {
    DataInfo info;
    info.input_shape = {784};
    info.num_classes = 10;
    absl::StatusOr<std::unique_ptr<Model>> built = BuildModel(spec, info);
    if (!built.ok()) return;
    model = std::move(*built);
    params = model->Parameters();
    optimizer = BuildOptimizer(spec.optimizer(), params);
  }
  std::unique_ptr<Model> model;
  std::vector<torch::Tensor> params;
  std::unique_ptr<torch::optim::Optimizer> optimizer;

  TrainingStateRefs Refs() { return {model.get(), optimizer.get(), params, nullptr}; }
};

// checkpoint.async: every checkpoint is written and reported, in step
// order, with what it cost; each holds the state of its own step although
// training went on while it was written (resuming from it ends where the
// uninterrupted run ends); the rank ends only after the last write.
TEST_F(CheckpointResumeTest, AsyncCheckpointsHoldTheirStepsStateAndResumeExactly) {
  const std::string optimizer = "{type: adamw, lr: 0.001}";
  v1::JobSpec spec = MakeSpec(2, optimizer, 12, 2);
  spec.mutable_checkpoint()->set_async(true);
  std::vector<TrainResult> whole = Run(spec, "async");
  ASSERT_EQ(whole.size(), 2u);
  EXPECT_EQ(whole[0].checkpoints, 6);
  std::vector<v1::Checkpoint> written;
  {
    std::lock_guard<std::mutex> lock(mu_);
    written = written_;
  }
  ASSERT_EQ(written.size(), 6u);
  for (size_t i = 0; i < written.size(); ++i) {
    const v1::Checkpoint& c = written[i];
    SCOPED_TRACE(c.path());
    EXPECT_EQ(c.step(), int64_t(2 * (i + 1)));
    struct stat st;
    ASSERT_EQ(::stat(c.path().c_str(), &st), 0);
    EXPECT_EQ(c.bytes(), st.st_size);
    EXPECT_GT(c.write_ms(), 0);
    EXPECT_GT(c.blocked_ms(), 0);
  }
  for (int64_t step : {4, 10}) {
    SCOPED_TRACE(step);
    std::vector<TrainResult> resumed =
        Run(MakeSpec(2, optimizer, 12, 0), "from" + std::to_string(step),
            PathAt("async", step));
    EXPECT_EQ(resumed[0].first_step, step);
    EXPECT_EQ(MaxAbsDifference(resumed[0].parameters, whole[0].parameters), 0.0);
  }
  // The same run written synchronously: the same parameters (writing in
  // the background changes nothing of the training).
  std::vector<TrainResult> sync = Run(MakeSpec(2, optimizer, 12, 2), "sync");
  EXPECT_EQ(MaxAbsDifference(sync[0].parameters, whole[0].parameters), 0.0);
}

// What an async write serializes shares no storage with the live state:
// training on after the snapshot changes none of it.
TEST_F(CheckpointResumeTest, ACopiedSnapshotIsUntouchedByTrainingOn) {
  const v1::JobSpec spec = MakeSpec(1, "{type: adamw, lr: 0.01}", 4, 0);
  LiveState live(spec);
  ASSERT_TRUE(live.model) << "cannot build the spec's model";
  auto step = [&] {
    live.optimizer->zero_grad();
    torch::Tensor x = torch::randn({8, 784});
    live.model->Forward(x).pow(2).mean().backward();
    live.optimizer->step();
  };
  step();  // the optimizer has state
  const TrainingStateRefs refs = live.Refs();
  TrainingCursor cursor;
  cursor.step = 1;
  TrainingSnapshot copied = SnapshotTrainingState(refs, cursor, /*copy=*/true);
  TrainingSnapshot shared = SnapshotTrainingState(refs, cursor, /*copy=*/false);
  std::vector<torch::Tensor> before;
  for (const auto& [name, tensor] : copied.model) before.push_back(tensor.clone());
  absl::StatusOr<std::string> bytes_before = SerializeTrainingSnapshot(copied);
  ASSERT_TRUE(bytes_before.ok());
  step();
  step();
  bool shared_moved = false;
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(torch::equal(copied.model[i].second, before[i])) << copied.model[i].first;
    shared_moved |= !torch::equal(shared.model[i].second, before[i]);
  }
  EXPECT_TRUE(shared_moved);  // the uncopied one is the live tensors
  // A sink that fails (a full disk) stops the serializer with its error.
  int pieces = 0;
  absl::Status full = SerializeTrainingSnapshot(copied, [&](const void*, size_t) {
    return ++pieces < 3 ? absl::OkStatus()
                        : absl::ResourceExhaustedError("cannot write: disk full");
  });
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_EQ(pieces, 3);
  // What it serializes still loads as the state of step 1.
  absl::StatusOr<std::string> bytes_after = SerializeTrainingSnapshot(copied);
  ASSERT_TRUE(bytes_after.ok());
  absl::StatusOr<TrainingCursor> loaded = DecodeTrainingState(*bytes_after, refs);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->step, 1);
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(torch::equal(live.model->NamedState()[i].second, before[i]));
  }
}

// Fencing: rank 0 of a generation that was replaced (cut off, training on)
// writes files of its own generation's name, never over the new one's.
TEST_F(CheckpointResumeTest, AStaleGenerationNeverWritesOverTheNewOnesFile) {
  const v1::JobSpec spec = MakeSpec(1, "{type: adamw, lr: 0.01}", 4, 0);
  LiveState live(spec);
  ASSERT_TRUE(live.model) << "cannot build the spec's model";
  const TrainingStateRefs refs = live.Refs();
  TrainingCursor cursor;
  cursor.step = 5;
  std::vector<v1::Checkpoint> written;
  auto save = [&](int generation) {
    RankContext ctx;
    ctx.job_id = "fenced";
    ctx.generation = generation;
    ctx.on_checkpoint = [&](const v1::Checkpoint& c) { written.push_back(c); };
    Checkpointer checkpointer(spec, ctx, refs);
    ASSERT_TRUE(checkpointer.Save(cursor, {}).ok());
  };
  save(2);
  const absl::StatusOr<std::string> current = ReadWholeFile(written.back().path());
  ASSERT_TRUE(current.ok());
  torch::NoGradGuard no_grad;
  for (auto& p : live.params) p.add_(1.0);  // the stale one trained on
  save(1);
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(written[0].path(), dir_ + "/fenced/step-000000005-g2.ckpt");
  EXPECT_EQ(written[1].path(), dir_ + "/fenced/step-000000005-g1.ckpt");
  EXPECT_EQ(*ReadWholeFile(written[0].path()), *current);
}

TEST_F(CheckpointResumeTest, ACheckpointOfAnotherModelIsRefusedByName) {
  Run(MakeSpec(1, "{type: adamw}", 4, 4), "small");
  v1::JobSpec other = MakeSpec(1, "{type: adamw}", 8, 4);
  other.mutable_model()->clear_hidden();
  other.mutable_model()->add_hidden(32);
  RankContext ctx;
  ctx.job_id = "other";
  ctx.resume_path = PathAt("small", 4);
  absl::StatusOr<TrainResult> result = Train(other, ctx);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(std::string(result.status().message()).find("model tensor"),
            std::string::npos)
      << result.status();
}

TEST_F(CheckpointResumeTest, AnUnwritableCheckpointDirFailsAtStart) {
  std::ofstream(dir_ + "/file") << "x";
  v1::JobSpec spec = MakeSpec(1, "{type: adamw}", 4, 2);
  spec.mutable_checkpoint()->set_dir(dir_ + "/file");
  RankContext ctx;
  ctx.job_id = "blocked";
  absl::StatusOr<TrainResult> result = Train(spec, ctx);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(std::string(result.status().message()).find("checkpoint.dir: "),
            std::string::npos)
      << result.status();
}

}  // namespace
}  // namespace trainctl::train
