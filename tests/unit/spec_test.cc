#include "common/spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainctl {
namespace {

using ::testing::HasSubstr;

constexpr char kMinimal[] = R"(
name: tiny
ranks: 2
model: mlp
data:
  train_images: /data/train-images.gz
  train_labels: /data/train-labels.gz
)";

TEST(SpecTest, FillsDefaults) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(kMinimal);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "tiny");
  EXPECT_EQ(spec->ranks(), 2);
  EXPECT_EQ(spec->model().type(), "mlp");
  EXPECT_THAT(spec->model().hidden(), ::testing::ElementsAre(512, 256));
  EXPECT_EQ(spec->data().format(), "idx");
  EXPECT_EQ(spec->optimizer().type(), "adamw");
  EXPECT_DOUBLE_EQ(spec->optimizer().lr(), 1e-3);
  EXPECT_THAT(spec->optimizer().betas(), ::testing::ElementsAre(0.9, 0.999));
  EXPECT_EQ(spec->scheduler().type(), "constant");
  EXPECT_EQ(spec->training().epochs(), 1);
  EXPECT_EQ(spec->training().batch_size(), 64);
  EXPECT_EQ(PerRankBatch(*spec), 32);
  EXPECT_EQ(spec->training().eval_top_k(), 5);
  EXPECT_FALSE(spec->training().eval_per_class());
}

TEST(SpecTest, PriorityIsAClassNameTheCoordinatorChecks) {
  EXPECT_EQ(ParseJobSpec(kMinimal)->priority(), "");  // the default class
  EXPECT_EQ(ParseJobSpec(std::string(kMinimal) + "priority: urgent\n")->priority(),
            "urgent");
  absl::StatusOr<v1::JobSpec> bad =
      ParseJobSpec(std::string(kMinimal) + "priority: \"Top Priority\"\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("priority: a priority class name is 1 to 32 of a-z"));
}

TEST(SpecTest, AcceptsJson) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(
      R"({"name": "j", "model": {"type": "mlp", "hidden": [8]},
          "data": {"train_images": "a", "train_labels": "b"},
          "optimizer": {"type": "sgd", "lr": 0.5, "momentum": 0.9},
          "training": {"batch_size": 10, "epochs": 3}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->model().hidden(), ::testing::ElementsAre(8));
  EXPECT_DOUBLE_EQ(spec->optimizer().lr(), 0.5);
  EXPECT_DOUBLE_EQ(spec->optimizer().momentum(), 0.9);
  EXPECT_EQ(spec->training().epochs(), 3);
}

// Each bad input must be rejected with a message naming the field at fault.
struct BadCase {
  const char* yaml;
  const char* expected;
};

class SpecErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(SpecErrorTest, NamesTheField) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(GetParam().yaml);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()),
              HasSubstr(GetParam().expected));
}

INSTANTIATE_TEST_SUITE_P(
    All, SpecErrorTest,
    ::testing::Values(
        BadCase{"model: resnet\ndata: {train_images: a, train_labels: b}",
                "model.type: unknown model 'resnet' (known: mlp, cnn, audio_cnn, "
                "transformer_classifier, gpt, torchscript)"},
        BadCase{"data: {train_images: a, train_labels: b}",
                "model.type: is required"},
        // Every spec string reaches tables and logs: no ESC, no newline.
        BadCase{"model: mlp\ndata: {train_images: \"/d/\\e[2Ja\", "
                "train_labels: b}",
                "data.train_images: must not contain control characters"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "checkpoint: {dir: \"/ck\\npt\"}",
                "checkpoint.dir: must not contain control characters"},
        BadCase{"model: mlp\ndata: {format: csv, train_path: a.csv, "
                "label_column: \"y\\x9b\"}",
                "data.label_column: must not contain control characters"},
        BadCase{"model: {type: mlp, dropout: 2}\n"
                "data: {train_images: a, train_labels: b}",
                "model.dropout: must be in [0, 0.99], got 2"},
        BadCase{"model: {type: gpt, d_model: 30, n_heads: 4}\n"
                "data: {format: text, train_path: f}",
                "model.d_model: 30 is not divisible by model.n_heads 4"},
        BadCase{"model: gpt\ndata: {train_images: a, train_labels: b}",
                "model.type: gpt needs token data"},
        BadCase{"model: torchscript\ndata: {train_images: a, train_labels: b}",
                "model.path: is required for a torchscript model"},
        BadCase{"model: cnn\ndata: {train_images: a, train_labels: b}\n"
                "training: {gradient_checkpointing: true}",
                "training.gradient_checkpointing: not supported for model.type cnn"},
        BadCase{"model: mlp\ndata: {format: csv}",
                "data.train_path: is required for format csv"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "training: {precision: fp8}",
                "training.precision: unknown precision 'fp8' (known: fp32, bf16, fp16)"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "optimizer: {type: sgd, nesterov: true}",
                "optimizer.nesterov: needs type sgd with momentum > 0"},
        BadCase{"model: mlp\ndata: {train_images: a}",
                "data.train_labels: is required"},
        BadCase{"model: mlp\ntask: regression\n"
                "data: {format: webdataset, train_path: shards/}",
                "task: data.format webdataset holds labelled images; task "
                "regression needs another format"},
        BadCase{"model: mlp\ndata: {format: npy, train_path: x.npy}",
                "data.train_labels: is required for format npy with task "
                "classification"},
        BadCase{"model: mlp\ndata: {format: npy, train_path: x.npy, "
                "train_labels: y.npy, eval_path: e.npy}",
                "data.eval_labels: eval_path and eval_labels must be given "
                "together"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "optimizer: {lr: -1}",
                "optimizer.lr: must be in (0, 1000], got -1"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "optimizer: {lr: 0}",
                "optimizer.lr: must be in (0, 1000], got 0"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "optimizer: {lr: 5000}",
                "optimizer.lr: must be in (0, 1000], got 5000"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "optimizer: {lr: fast}",
                "optimizer.lr: must be a finite number, got 'fast'"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "training: {epochs: 0}",
                "training.epochs: must be in [1, 100000], got 0"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "training: {bach_size: 3}",
                "training.bach_size: unknown field; did you mean batch_size?"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "training: {epochz: 3}",
                "training.epochz: unknown field; did you mean epochs?"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "learning_rate: 3",
                "learning_rate: unknown field"},  // nothing near it at the top
        BadCase{"ranks: 3\nmodel: mlp\ndata: {train_images: a, "
                "train_labels: b}\ntraining: {batch_size: 64}",
                "training.batch_size: 64 does not divide evenly over 3 ranks"},
        BadCase{"ranks: -2\nmodel: mlp\ndata: {train_images: a, "
                "train_labels: b}",
                "ranks: must be in [1, 4096], got -2"},
        BadCase{"model: {type: mlp, hidden: [0]}\n"
                "data: {train_images: a, train_labels: b}",
                "model.hidden[0]: must be an integer in [1, 65536]"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b,"
                " eval_images: c}",
                "data.eval_labels: eval_images and eval_labels must be given"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "checkpoint: {dir: ckpt}",
                "checkpoint.dir: must be an absolute path"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "checkpoint: {every_steps: 10}",
                "checkpoint.dir: is required when checkpoints are configured"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "fault_tolerance: {eval_timeout_s: 0}",
                "fault_tolerance.eval_timeout_s"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "checkpoint: {async: true}",
                "checkpoint.dir: is required when checkpoints are configured"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "checkpoint: {dir: /c, async: sometimes}",
                "checkpoint.async"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "checkpoint: {dir: /c, keep_best_by: f1, keep_best_mode: up}",
                "checkpoint.keep_best_mode: unknown mode 'up' (known: min, max)"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "tensorboard: {dir: runs}",
                "tensorboard.dir: must be an absolute path"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "tensorboard: {dir: /runs, every: 5}",
                "tensorboard.every: unknown field"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "tensorboard: /runs",
                "tensorboard: must be a mapping"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "profile: {dir: traces}",
                "profile.dir: must be an absolute path"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "profile: {dir: /t, steps: 0}",
                "profile.steps"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "profile: {dir: /t, steps: 51}",
                "profile.steps"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "profile: {dir: /t, start_step: -1}",
                "profile.start_step"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "tracking: {mlflow: file:///tmp/mlruns}",
                "tracking.mlflow: must be the tracking server's http:// or https://"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "tracking: {mlflow: http://x, project: y}",
                "tracking.project: unknown field"},
        BadCase{"ranks: 2\nmodel: mlp\ndata: {train_images: a, "
                "train_labels: b}\nfault_tolerance: {min_workers: 3}",
                "fault_tolerance.min_workers: 3 is more than ranks (2)"},
        BadCase{"ranks: 2\nmodel: mlp\ndata: {train_images: a, "
                "train_labels: b}\nfault_tolerance: {max_workers: 1}",
                "fault_tolerance.max_workers: 1 is fewer than ranks (2)"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "fault_tolerance: {elastic: true}",
                "fault_tolerance.elastic: needs max_workers above ranks"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b}\n"
                "fault_tolerance: {hang_timeout_s: 0}",
                "fault_tolerance.hang_timeout_s: must be in [0.5, 86400], got 0"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b, "
                "transforms: {normalize: {mean: [0.5, 0.5], std: [0.2]}}}",
                "data.transforms.normalize.std: lists 1 values but mean lists 2"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b, "
                "transforms: {normalize: {mean: [0.5], std: [0]}}}",
                "data.transforms.normalize.std: every value must be > 0"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b, "
                "transforms: {normalize: {std: [1]}}}",
                "data.transforms.normalize.mean: is required (or from_data: true)"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b, "
                "transforms: {normalize: {from_data: true, mean: [0.5], std: [1]}}}",
                "data.transforms.normalize: give mean and std, or from_data, not both"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b, "
                "transforms: {normalize: {mean: [x], std: [1]}}}",
                "data.transforms.normalize.mean[0]: must be a number"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b, "
                "transforms: {random_crop: {}}}",
                "data.transforms.random_crop: give size [height, width], padding"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b, "
                "transforms: {random_crop: {size: [24]}}}",
                "data.transforms.random_crop.size: must be [height, width]"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b, "
                "transforms: {random_crop: {padding: 4, fill: 1}}}",
                "data.transforms.random_crop.fill: unknown field"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b, "
                "transforms: {resize: [32]}}",
                "data.transforms.resize: must be [height, width]"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b, "
                "transforms: {resize: [32, 0]}}",
                "data.transforms.resize[1]: must be an integer in [1, 65536]"},
        BadCase{"model: mlp\ndata: {train_images: a, train_labels: b, "
                "transforms: {vertical_flip: true}}",
                "data.transforms.vertical_flip: unknown field"},
        BadCase{"model: gpt\ndata: {format: tokens, train_path: t.bin, "
                "transforms: {horizontal_flip: true}}",
                "data.transforms: apply to image inputs [C, H, W]; task "
                "language_model has token windows"},
        BadCase{"model: mlp\ndata: {format: csv, train_path: t.csv, "
                "transforms: {normalize: {mean: [0], std: [1]}}}",
                "data.transforms: apply to image inputs [C, H, W]; data.format "
                "csv has feature rows"},
        BadCase{"[1, 2", "spec: not valid YAML or JSON"},
        BadCase{"- a\n- b", "spec: must be a mapping"},
        BadCase{"", "spec: is empty"}));

TEST(SpecTest, NpyTokenArraysTrainAGptWithoutLabels) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(
      "model: gpt\ndata: {format: npy, train_path: tokens.npy, seq_len: 64}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->task(), "language_model");
  EXPECT_EQ(spec->data().format(), "npy");
}

TEST(SpecTest, ImageTransformsAreReadInFull) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(
      "model: cnn\n"
      "data:\n"
      "  format: webdataset\n"
      "  train_path: shards/\n"
      "  transforms:\n"
      "    normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}\n"
      "    random_crop: {size: [24, 28], padding: 4}\n"
      "    horizontal_flip: true\n"
      "    resize: [32, 30]\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const v1::ImageTransformsSpec& t = spec->data().transforms();
  ASSERT_EQ(t.normalize().mean_size(), 3);
  EXPECT_DOUBLE_EQ(t.normalize().mean(1), 0.456);
  EXPECT_DOUBLE_EQ(t.normalize().std(2), 0.225);
  EXPECT_TRUE(t.has_random_crop());
  ASSERT_EQ(t.random_crop().size_size(), 2);
  EXPECT_EQ(t.random_crop().size(0), 24);
  EXPECT_EQ(t.random_crop().size(1), 28);
  EXPECT_EQ(t.random_crop().padding(), 4);
  EXPECT_TRUE(t.horizontal_flip());
  ASSERT_EQ(t.resize_size(), 2);
  EXPECT_EQ(t.resize(0), 32);
  EXPECT_EQ(t.resize(1), 30);
  // The JSON form (dry run, `trainctl status -o json`) parses to the same.
  absl::StatusOr<v1::JobSpec> again = ParseJobSpec(JobSpecToJson(*spec));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), spec->SerializeAsString());
  // Statistics computed from the data; the JSON form parses back to it.
  spec = ParseJobSpec("model: mlp\ndata: {train_images: a, train_labels: b, "
                      "transforms: {normalize: {from_data: true}}}");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->data().transforms().normalize().from_data());
  again = ParseJobSpec(JobSpecToJson(*spec));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), spec->SerializeAsString());
  // Padding alone keeps the image's size; nothing given, nothing applied.
  spec = ParseJobSpec("model: mlp\ndata: {train_images: a, train_labels: b, "
                      "transforms: {random_crop: {padding: 2}}}");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->data().transforms().has_random_crop());
  EXPECT_EQ(spec->data().transforms().random_crop().size_size(), 0);
  again = ParseJobSpec(JobSpecToJson(*spec));  // "size": [] is no size
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), spec->SerializeAsString());
  spec = ParseJobSpec("model: mlp\ndata: {train_images: a, train_labels: b}");
  ASSERT_TRUE(spec.ok());
  EXPECT_FALSE(spec->data().transforms().has_random_crop());
  EXPECT_FALSE(spec->data().transforms().has_normalize());
}

TEST(SpecTest, TensorBoardIsOffUnlessADirIsGiven) {
  const std::string base = "model: mlp\ndata: {train_images: a, train_labels: b}\n";
  EXPECT_EQ(ParseJobSpec(base)->tensorboard().dir(), "");
  EXPECT_EQ(ParseJobSpec(base + "tensorboard:\n")->tensorboard().dir(), "");
  // As --dry-run prints a spec without one (the JSON round trip).
  EXPECT_EQ(ParseJobSpec(base + "tensorboard: {dir: ''}\n")->tensorboard().dir(), "");
  absl::StatusOr<v1::JobSpec> on =
      ParseJobSpec(base + "tensorboard: {dir: /shared/runs}\n");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(on->tensorboard().dir(), "/shared/runs");
}

TEST(SpecTest, FaultToleranceAndCheckpointDefaults) {
  v1::JobSpec spec = *ParseJobSpec(
      "ranks: 4\nmodel: mlp\ndata: {train_images: a, train_labels: b}\n"
      "checkpoint: {dir: /c, keep_best_by: eval_loss}\n");
  EXPECT_EQ(spec.fault_tolerance().max_restarts(), 3);
  EXPECT_EQ(spec.fault_tolerance().min_workers(), 4);
  EXPECT_EQ(spec.fault_tolerance().max_workers(), 4);
  EXPECT_EQ(spec.fault_tolerance().hang_timeout_s(), 60.0);
  // Long phases: at least ten minutes, never less than hang_timeout_s.
  EXPECT_EQ(spec.fault_tolerance().eval_timeout_s(), 600.0);
  EXPECT_EQ(spec.fault_tolerance().checkpoint_timeout_s(), 600.0);
  EXPECT_EQ(spec.fault_tolerance().first_step_timeout_s(), 600.0);
  const v1::FaultToleranceSpec slow =
      ParseJobSpec("model: mlp\ndata: {train_images: a, train_labels: b}\n"
                   "fault_tolerance: {hang_timeout_s: 900, eval_timeout_s: 7200}\n")
          ->fault_tolerance();
  EXPECT_EQ(slow.eval_timeout_s(), 7200.0);
  EXPECT_EQ(slow.checkpoint_timeout_s(), 900.0);
  EXPECT_EQ(slow.first_step_timeout_s(), 900.0);
  EXPECT_FALSE(spec.fault_tolerance().elastic());
  EXPECT_EQ(spec.checkpoint().keep_best_mode(), "min");  // a loss
  EXPECT_EQ(spec.checkpoint().every_steps(), 0);
  EXPECT_FALSE(spec.checkpoint().async());
  EXPECT_TRUE(ParseJobSpec("model: mlp\ndata: {train_images: a, train_labels: b}\n"
                           "checkpoint: {dir: /c, async: true}\n")
                  ->checkpoint()
                  .async());
}

// keep_best_by names a metric the job reports, or it is refused at
// submission (a typo used to keep no best checkpoint, silently).
TEST(SpecTest, KeepBestByMustNameAMetricTheJobReports) {
  const std::string base =
      "model: mlp\ndata: {train_images: a, train_labels: b}\n";
  for (const std::string good :
       {"f1", "eval_f1", "precision", "recall", "top5_accuracy", "accuracy",
        "eval_loss"}) {
    absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(
        base + "checkpoint: {dir: /c, keep_best_by: " + good + "}\n");
    ASSERT_TRUE(spec.ok()) << good << ": " << spec.status();
    EXPECT_EQ(spec->checkpoint().keep_best_mode(),
              good.find("loss") != std::string::npos ? "min" : "max")
        << good;
  }
  absl::StatusOr<v1::JobSpec> typo = ParseJobSpec(
      base + "checkpoint: {dir: /c, keep_best_by: f1_macro}\n");
  ASSERT_FALSE(typo.ok());
  EXPECT_THAT(std::string(typo.status().message()),
              HasSubstr("checkpoint.keep_best_by: 'f1_macro' is not an "
                        "evaluation metric of a classification job"));
  EXPECT_THAT(std::string(typo.status().message()), HasSubstr("eval_f1"));
  absl::StatusOr<v1::JobSpec> per_class = ParseJobSpec(
      base + "checkpoint: {dir: /c, keep_best_by: f1_3}\n");
  ASSERT_FALSE(per_class.ok());
  EXPECT_THAT(std::string(per_class.status().message()),
              HasSubstr("need training.eval_per_class: true"));
  EXPECT_TRUE(ParseJobSpec(base +
                           "training: {eval_per_class: true, eval_top_k: 3}\n"
                           "checkpoint: {dir: /c, keep_best_by: f1_3}\n")
                  .ok());
  EXPECT_FALSE(ParseJobSpec(base + "training: {eval_top_k: 3}\n"
                            "checkpoint: {dir: /c, keep_best_by: top5_accuracy}\n")
                   .ok());
  // A language model has no F1, and a perplexity is kept by its minimum.
  const std::string lm =
      "task: language_model\nmodel: {type: gpt}\n"
      "data: {format: text, train_path: /t}\n";
  EXPECT_FALSE(ParseJobSpec(lm + "checkpoint: {dir: /c, keep_best_by: f1}\n").ok());
  absl::StatusOr<v1::JobSpec> ppl = ParseJobSpec(
      lm + "checkpoint: {dir: /c, keep_best_by: perplexity}\n");
  ASSERT_TRUE(ppl.ok()) << ppl.status();
  EXPECT_EQ(ppl->checkpoint().keep_best_mode(), "min");
}

TEST(SpecTest, ReportsEveryProblemAtOnce) {
  absl::StatusOr<v1::JobSpec> spec =
      ParseJobSpec("model: cnn2\noptimizer: {type: lion}\n");
  ASSERT_FALSE(spec.ok());
  const std::string message(spec.status().message());
  EXPECT_THAT(message, HasSubstr("model.type"));
  EXPECT_THAT(message, HasSubstr("optimizer.type: unknown optimizer 'lion'"));
  EXPECT_THAT(message, HasSubstr("data.train_images: is required"));
}

TEST(SpecTest, JsonRoundTripParsesToTheSameSpec) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(kMinimal);
  ASSERT_TRUE(spec.ok());
  absl::StatusOr<v1::JobSpec> again = ParseJobSpec(JobSpecToJson(*spec));
  ASSERT_TRUE(again.ok()) << again.status() << JobSpecToJson(*spec);
  EXPECT_EQ(again->SerializeAsString(), spec->SerializeAsString());
}

TEST(SpecTest, ATabIsTheOneControlCharacterASpecStringMayHold) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(
      "model: mlp\ndata: {format: csv, train_path: a.tsv, "
      "label_column: y, delimiter: \"\\t\"}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->data().delimiter(), "\t");
}

}  // namespace
}  // namespace trainctl
