#include "common/spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <limits>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/eval_metric_names.h"
#include "common/shipped_files.h"
#include "common/spec_outputs.h"
#include "common/spec_audio.h"
#include "common/spec_text.h"
#include "common/spec_inputs.h"
#include "common/spec_reader.h"
#include "common/vocabulary.h"

namespace trainctl {
namespace {

constexpr int kMaxRanks = 4096;
constexpr size_t kMaxSpecBytes = 256 << 10;  // real specs are < 4 KiB
constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();
constexpr int kMaxWidth = 1 << 16;

using Errors = std::vector<std::string>;

// Empty (the default class) or a plain short word; the coordinator checks
// that its scheduling config defines it.
bool IsPriorityClassName(const std::string& name) {
  if (name.size() > 32) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_')) {
      return false;
    }
  }
  return true;
}

template <typename Repeated>
void Assign(Repeated* field, const std::vector<int64_t>& values) {
  field->Clear();
  for (int64_t v : values) field->Add(static_cast<int32_t>(v));
}

void ReadModel(SpecReader& top, v1::ModelSpec* m, Errors* errors) {
  YAML::Node node = top.Child("model");
  const bool shorthand = node && node.IsScalar();
  SpecReader s(shorthand ? YAML::Node() : node, "model", errors);
  const std::vector<std::string>& kModels = ModelTypeNames();
  if (shorthand) {
    m->set_type(node.Scalar());
    if (std::find(kModels.begin(), kModels.end(), m->type()) == kModels.end()) {
      s.Error("model.type",
              absl::StrCat("unknown model '", Abbreviated(m->type()),
                           "' (known: ", absl::StrJoin(kModels, ", "), ")"));
    }
  } else if (!s.Has("type")) {
    s.Error("model.type",
            absl::StrCat("is required (known: ", absl::StrJoin(kModels, ", "), ")"));
  } else {
    m->set_type(s.Choice("type", "", kModels, "model"));
  }
  const ModelType type = ModelTypeOf(*m);
  const bool cnn = IsConvNet(type);
  Assign(m->mutable_hidden(),
         s.IntList("hidden", cnn ? std::vector<int64_t>{128}
                                 : std::vector<int64_t>{512, 256},
                   64, 1, kMaxWidth));
  Assign(m->mutable_channels(), s.IntList("channels", {32, 64}, 2, 1, 4096));
  if (m->channels_size() != 2) {
    s.Error("model.channels", "must list exactly 2 conv block widths");
  }
  const bool gpt = type == ModelType::kGpt;
  m->set_vocab_size(s.Int("vocab_size", 0, 0, 1 << 24));
  m->set_d_model(s.Int("d_model", gpt ? 128 : 64, 1, kMaxWidth));
  m->set_n_layers(s.Int("n_layers", 2, 1, 256));
  m->set_n_heads(s.Int("n_heads", 4, 1, 256));
  m->set_d_ff(s.Int("d_ff", 4 * m->d_model(), 1, 1 << 20));
  m->set_max_seq_len(s.Int("max_seq_len", 512, 1, 1 << 20));
  m->set_dropout(s.Double("dropout", 0.0, 0.0, 0.99));
  m->set_path(s.String("path", ""));
  m->set_num_classes(s.Int("num_classes", 0, 0, 1 << 24));
  if (m->d_model() % m->n_heads() != 0) {
    s.Error("model.d_model", absl::StrCat(m->d_model(),
                                          " is not divisible by model.n_heads ",
                                          m->n_heads()));
  }
  if (type == ModelType::kTorchScript && m->path().empty()) {
    s.Error("model.path", "is required for a torchscript model");
  }
  if (!shorthand) s.RejectUnknown();
}

// data.transforms: resize [h, w], normalize {mean, std} or {from_data},
// random_crop {size, padding}, horizontal_flip. Whether they fit the inputs' [C, H, W] is checked when
// the ranks open the data.
// An optional [height, width]; an empty list (JSON's unset field) is none.
std::vector<int64_t> HeightWidth(SpecReader& s, const std::string& key) {
  const YAML::Node n = s.Child(key);
  if (n && n.IsSequence() && n.size() == 0) return {};
  const std::vector<int64_t> hw = s.IntList(key, {}, 2, 1, kMaxWidth);
  if (hw.size() == 1) s.Error(s.Path(key), "must be [height, width]");
  return hw;
}

void ReadTransforms(SpecReader& data, v1::ImageTransformsSpec* t, Errors* errors) {
  SpecReader s(data.Child("transforms"), data.Path("transforms"), errors);
  constexpr size_t kMaxChannels = 64;
  if (s.Has("normalize")) {
    SpecReader n(s.Child("normalize"), s.Path("normalize"), errors);
    v1::NormalizeSpec* norm = t->mutable_normalize();
    for (double v : n.DoubleList("mean", kMaxChannels, -1e6, 1e6)) norm->add_mean(v);
    for (double v : n.DoubleList("std", kMaxChannels, 0, 1e6)) norm->add_std(v);
    norm->set_from_data(n.Bool("from_data", false));
    if (norm->from_data() && (norm->mean_size() > 0 || norm->std_size() > 0)) {
      n.Error(s.Path("normalize"), "give mean and std, or from_data, not both");
    } else if (!norm->from_data() && norm->mean_size() == 0) {
      n.Error(n.Path("mean"), "is required (or from_data: true)");
    }
    if (norm->mean_size() != norm->std_size()) {
      n.Error(n.Path("std"), absl::StrCat("lists ", norm->std_size(),
                                          " values but mean lists ",
                                          norm->mean_size(), " (one per channel)"));
    }
    for (double v : norm->std()) {
      if (v <= 0) n.Error(n.Path("std"), "every value must be > 0");
    }
    n.RejectUnknown();
  }
  if (s.Has("random_crop")) {
    const YAML::Node node = s.Child("random_crop");
    SpecReader c(node, s.Path("random_crop"), errors);
    v1::RandomCropSpec* crop = t->mutable_random_crop();
    if ((!node || node.IsNull() || node.IsMap()) && !c.Has("size") && !c.Has("padding")) {
      c.Error(s.Path("random_crop"), "give size [height, width], padding, or both");
    }
    Assign(crop->mutable_size(), HeightWidth(c, "size"));
    crop->set_padding(c.Int("padding", 0, 0, 4096));
    c.RejectUnknown();
  }
  t->set_horizontal_flip(s.Bool("horizontal_flip", false));
  Assign(t->mutable_resize(), HeightWidth(s, "resize"));
  s.RejectUnknown();
}

void ReadData(SpecReader& top, v1::DataSpec* d, Errors* errors) {
  SpecReader s(top.Child("data"), "data", errors);
  d->set_format(
      s.Choice("format", "idx",
               {"idx", "csv", "tokens", "text", "tensors", "npy", "webdataset", "audio"},
               "format"));
  d->set_train_images(s.String("train_images", ""));
  d->set_train_labels(s.String("train_labels", ""));
  d->set_eval_images(s.String("eval_images", ""));
  d->set_eval_labels(s.String("eval_labels", ""));
  d->set_train_path(s.String("train_path", ""));
  d->set_eval_path(s.String("eval_path", ""));
  d->set_train_limit(s.Int("train_limit", 0, 0, kMaxInt));
  d->set_eval_limit(s.Int("eval_limit", 0, 0, kMaxInt));
  d->set_eval_fraction(s.Double("eval_fraction", 0.0, 0.0, 0.99));
  d->set_label_column(s.String("label_column", ""));
  d->set_header(s.Bool("header", false));
  d->set_delimiter(s.String("delimiter", ","));
  d->set_token_dtype(s.Choice("token_dtype", "uint16", {"uint16", "uint32"}));
  d->set_seq_len(s.Int("seq_len", 128, 1, 1 << 20));
  ReadTransforms(s, d->mutable_transforms(), errors);
  ReadNamedInputs(s, d, errors);
  ReadAudioSpec(s, d, errors);
  ReadTextSpec(s, d);
  if (d->delimiter().size() != 1) {
    s.Error("data.delimiter", "must be exactly one character");
  }
  if (d->format() == "idx") {
    if (d->train_images().empty()) s.Error("data.train_images", "is required");
    if (d->train_labels().empty()) s.Error("data.train_labels", "is required");
    if (d->eval_images().empty() != d->eval_labels().empty()) {
      s.Error(d->eval_images().empty() ? "data.eval_images" : "data.eval_labels",
              "eval_images and eval_labels must be given together");
    }
  } else if (d->train_path().empty()) {
    s.Error("data.train_path", absl::StrCat("is required for format ",
                                            d->format()));
  }
  const bool has_eval_set =
      !d->eval_images().empty() || !d->eval_path().empty();
  if (has_eval_set && d->eval_fraction() > 0) {
    s.Error("data.eval_fraction",
            "give either an eval set by path or eval_fraction, not both");
  }
  s.RejectUnknown();
}

void ReadOptimizer(SpecReader& top, v1::OptimizerSpec* o, Errors* errors) {
  SpecReader s(top.Child("optimizer"), "optimizer", errors);
  o->set_type(s.Choice("type", "adamw",
                       {"adamw", "adam", "sgd", "adafactor", "adam8bit"},
                       "optimizer"));
  const bool sgd = o->type() == "sgd";
  o->set_lr(s.PositiveDouble("lr", sgd ? 0.01 : 0.001, 1e3));
  o->set_weight_decay(s.Double(
      "weight_decay",
      o->type() == "adamw" || o->type() == "adam8bit" ? 0.01 : 0.0, 0, 1e3));
  std::vector<double> betas = {o->type() == "adafactor" ? 0.0 : 0.9, 0.999};
  YAML::Node b = s.Child("betas");
  if (b && !b.IsNull()) {
    bool ok = b.IsSequence() && b.size() == 2;
    for (size_t i = 0; ok && i < 2; ++i) {
      ok = YAML::convert<double>::decode(b[i], betas[i]) && betas[i] >= 0 &&
           betas[i] < 1;
    }
    if (!ok) s.Error("optimizer.betas", "must be two numbers in [0, 1)");
  }
  o->clear_betas();
  o->add_betas(betas[0]);
  o->add_betas(betas[1]);
  o->set_eps(s.Double("eps", o->type() == "adafactor" ? 1e-30 : 1e-8, 0, 1));
  o->set_momentum(s.Double("momentum", 0.0, 0, 0.999999));
  o->set_nesterov(s.Bool("nesterov", false));
  if (o->nesterov() && (!sgd || o->momentum() <= 0)) {
    s.Error("optimizer.nesterov", "needs type sgd with momentum > 0");
  }
  o->set_relative_step(s.Bool("relative_step", false));
  o->set_clip_threshold(s.Double("clip_threshold", 1.0, 0, 1e6));
  o->set_decay_rate(s.Double("decay_rate", -0.8, -1.0, 0.0));
  o->set_scale_parameter(s.Bool("scale_parameter", false));
  o->set_block_size(s.Int("block_size", 2048, 16, 1 << 20));
  s.RejectUnknown();
}

void ReadScheduler(SpecReader& top, v1::SchedulerSpec* sch, Errors* errors) {
  SpecReader s(top.Child("scheduler"), "scheduler", errors);
  sch->set_type(s.Choice("type", "constant", {"constant", "linear", "cosine"},
                          "scheduler"));
  sch->set_warmup_steps(s.Int("warmup_steps", 0, 0, 1'000'000'000));
  sch->set_min_lr(s.Double("min_lr", 0.0, 0.0, 1e3));
  s.RejectUnknown();
}

void ReadTraining(SpecReader& top, v1::TrainingSpec* t, Errors* errors) {
  SpecReader s(top.Child("training"), "training", errors);
  t->set_epochs(s.Int("epochs", 1, 1, 100'000));
  t->set_batch_size(s.Int("batch_size", 64, 1, 1 << 24));
  t->set_max_steps(s.Int("max_steps", 0, 0, 1'000'000'000'000));
  t->set_log_every_steps(s.Int("log_every_steps", 50, 1, 1'000'000'000));
  t->set_threads_per_rank(s.Int("threads_per_rank", 0, 0, 1024));
  t->set_device(s.Choice("device", "auto", {"auto", "cpu", "cuda"}, "device"));
  t->set_grad_accum_steps(s.Int("grad_accum_steps", 1, 1, 1 << 16));
  t->set_max_grad_norm(s.Double("max_grad_norm", 0.0, 0.0, 1e9));
  t->set_precision(s.Choice("precision", "fp32", {"fp32", "bf16", "fp16"}, "precision"));
  t->set_gradient_checkpointing(s.Bool("gradient_checkpointing", false));
  t->set_local_sgd_steps(s.Int("local_sgd_steps", 0, 0, 1 << 20));
  t->set_eval_every_steps(s.Int("eval_every_steps", 0, 0, 1'000'000'000));
  t->set_eval_batch_size(s.Int("eval_batch_size", 512, 1, 1 << 20));
  t->set_bucket_mb(s.Int("bucket_mb", 25, 1, 4096));
  t->set_prefetch_batches(s.Int("prefetch_batches", 2, 1, 64));
  t->set_eval_top_k(s.Int("eval_top_k", 5, 0, 1000));
  t->set_eval_per_class(s.Bool("eval_per_class", false));
  s.RejectUnknown();
}

void ReadCheckpoint(SpecReader& top, v1::CheckpointSpec* c, Errors* errors) {
  SpecReader s(top.Child("checkpoint"), "checkpoint", errors);
  c->set_dir(s.String("dir", ""));
  if (!c->dir().empty() && c->dir().front() != '/') {
    s.Error(s.Path("dir"), "must be an absolute path (ranks run in the worker's "
                   "directory, not yours)");
  }
  c->set_every_steps(s.Int("every_steps", 0, 0, 1'000'000'000));
  c->set_keep_last(s.Int("keep_last", 0, 0, 1'000'000));
  c->set_keep_best_by(s.String("keep_best_by", ""));
  const std::string& best = c->keep_best_by();
  const bool lower_is_better = best.find("loss") != std::string::npos ||
                               best.find("perplexity") != std::string::npos ||
                               best.find("error") != std::string::npos;
  c->set_keep_best_mode(s.Choice("keep_best_mode", lower_is_better ? "min" : "max",
                                 {"min", "max"}, "mode"));
  c->set_async(s.Bool("async", false));
  s.RejectUnknown();
}

void ReadFaultTolerance(SpecReader& top, int ranks,
                        v1::FaultToleranceSpec* f, Errors* errors) {
  SpecReader s(top.Child("fault_tolerance"), "fault_tolerance", errors);
  f->set_max_restarts(s.Int("max_restarts", 3, 0, 1'000'000));
  f->set_min_workers(s.Int("min_workers", ranks, 1, kMaxRanks));
  f->set_max_workers(s.Int("max_workers", ranks, 1, kMaxRanks));
  f->set_hang_timeout_s(s.Double("hang_timeout_s", 60.0, 0.5, 86'400.0));
  const double phase_default = std::max(f->hang_timeout_s(), 600.0);
  f->set_eval_timeout_s(s.Double("eval_timeout_s", phase_default, 0.5, 86'400.0));
  f->set_checkpoint_timeout_s(
      s.Double("checkpoint_timeout_s", phase_default, 0.5, 86'400.0));
  f->set_first_step_timeout_s(
      s.Double("first_step_timeout_s", phase_default, 0.5, 86'400.0));
  f->set_elastic(s.Bool("elastic", false));
  f->set_in_place(s.Bool("in_place", false));
  f->set_spares(s.Int("spares", 0, 0, kMaxRanks));
  if (f->spares() > 0 && !f->in_place()) {
    s.Error(s.Path("spares"), "spares serve in-place recovery only: set "
                              "fault_tolerance.in_place: true as well");
  }
  f->set_straggler_ratio(s.Double("straggler_ratio", 1.5, 0, 100));
  if (f->straggler_ratio() != 0 && f->straggler_ratio() <= 1) {
    s.Error(s.Path("straggler_ratio"),
            absl::StrCat(f->straggler_ratio(), " would call every rank a "
                         "straggler; give a ratio above 1, or 0 for never"));
  }
  f->set_straggler_steps(s.Int("straggler_steps", 50, 1, 1'000'000));
  if (f->min_workers() > ranks) {
    s.Error(s.Path("min_workers"), absl::StrCat(f->min_workers(), " is more than ranks (",
                                        ranks, ")"));
  }
  if (f->max_workers() < ranks) {
    s.Error(s.Path("max_workers"), absl::StrCat(f->max_workers(),
                                        " is fewer than ranks (", ranks, ")"));
  }
  s.RejectUnknown();
}

// All problems in one message, capped so a hostile spec cannot make it huge.
std::string JoinErrors(const Errors& errors) {
  if (errors.size() <= kMaxSpecErrors) return absl::StrJoin(errors, "; ");
  Errors shown(errors.begin(), errors.begin() + kMaxSpecErrors);
  return absl::StrCat(absl::StrJoin(shown, "; "), "; and ",
                      errors.size() - kMaxSpecErrors, " more problems");
}

// Rules that span several sections.
void CheckCrossField(const v1::JobSpec& spec, Errors* errors) {
  CheckNamedInputs(spec, errors);
  const auto& t = spec.training();
  const auto& m = spec.model();
  const auto& d = spec.data();
  const ModelType type = ModelTypeOf(m);
  const Task task = TaskOf(spec);
  if (spec.ranks() > 0 && t.batch_size() % spec.ranks() != 0) {
    errors->push_back(absl::StrCat(
        "training.batch_size: ", t.batch_size(), " does not divide evenly over ",
        spec.ranks(),
        " ranks (the global batch is split equally; pick a multiple of ranks)"));
  }
  const bool token_data = d.format() == "tokens" || d.format() == "text";
  // tensors and npy hold token ids when their inputs are integers, which
  // only the ranks can tell.
  if (type == ModelType::kGpt && !token_data && d.format() != "npy" &&
      d.format() != "tensors") {
    errors->push_back(
        "model.type: gpt needs token data (data.format tokens, text, npy or "
        "tensors)");
  }
  if ((d.format() == "webdataset" || d.format() == "audio") &&
      task != Task::kClassification) {
    errors->push_back(absl::StrCat("task: data.format ", d.format(), " holds labelled ",
                                   d.format() == "audio" ? "sounds" : "images", "; task ",
                                   spec.task(), " needs another format"));
  }
  // npy: labels beside the inputs, unless the array is a token stream.
  if (d.format() == "npy" && task != Task::kLanguageModel) {
    if (d.train_labels().empty()) {
      errors->push_back(absl::StrCat(
          "data.train_labels: is required for format npy with task ",
          spec.task(), " (the class ids or targets, one row per input row)"));
    }
    if (d.eval_path().empty() != d.eval_labels().empty()) {
      errors->push_back(
          "data.eval_labels: eval_path and eval_labels must be given together");
    }
  }
  CheckTextData(spec, errors);
  const auto& tf = d.transforms();
  if ((tf.has_normalize() || tf.has_random_crop() || tf.horizontal_flip() ||
       tf.resize_size() > 0) &&
      (task == Task::kLanguageModel || d.format() == "csv")) {
    errors->push_back(absl::StrCat(
        "data.transforms: apply to image inputs [C, H, W]; ",
        task == Task::kLanguageModel ? "task language_model has token windows"
                                        : "data.format csv has feature rows"));
  }
  if (task == Task::kLanguageModel && type != ModelType::kGpt &&
      type != ModelType::kTorchScript) {
    errors->push_back(
        "task: language_model needs model.type gpt or torchscript");
  }
  if (token_data && task != Task::kLanguageModel) {
    errors->push_back(absl::StrCat("task: data.format ", d.format(),
                                   " yields next-token windows; use "
                                   "task: language_model"));
  }
  if (t.gradient_checkpointing() && type != ModelType::kMlp &&
      type != ModelType::kTransformerClassifier && type != ModelType::kGpt) {
    errors->push_back(absl::StrCat(
        "training.gradient_checkpointing: not supported for model.type ",
        m.type(), " (supported: mlp, transformer_classifier, gpt)"));
  }
  if (t.local_sgd_steps() > 0 && t.grad_accum_steps() > 1) {
    errors->push_back(
        "training.local_sgd_steps: cannot be combined with grad_accum_steps");
  }
  const auto& c = spec.checkpoint();
  if (c.dir().empty() && (c.every_steps() > 0 || c.keep_last() > 0 ||
                          !c.keep_best_by().empty() || c.async())) {
    errors->push_back("checkpoint.dir: is required when checkpoints are "
                      "configured");
  }
  if (!c.keep_best_by().empty()) {
    if (absl::Status known = CheckEvalMetricName(spec, c.keep_best_by());
        !known.ok()) {
      errors->push_back(absl::StrCat("checkpoint.keep_best_by: ", known.message()));
    }
  }
  if (spec.fault_tolerance().elastic() &&
      spec.fault_tolerance().max_workers() == spec.ranks()) {
    errors->push_back("fault_tolerance.elastic: needs max_workers above ranks "
                      "to have room to grow");
  }
  if (spec.optimizer().relative_step() && spec.optimizer().type() != "adafactor") {
    errors->push_back("optimizer.relative_step: only for type adafactor");
  }
}

}  // namespace

absl::StatusOr<v1::JobSpec> ParseJobSpec(const std::string& text) {
  if (text.size() > kMaxSpecBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec: ", text.size(), " bytes is over the limit of ", kMaxSpecBytes,
        "; a job spec names its data files, it does not hold the data"));
  }
  YAML::Node root;
  try {
    // The shape check first: the tree yaml-cpp builds hides duplicate keys,
    // and walking it would expand aliases without bound.
    Errors shape = CheckSpecShape(text);
    if (!shape.empty()) return absl::InvalidArgumentError(JoinErrors(shape));
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec: not valid YAML or JSON: ", e.what()));
  }
  if (!root || root.IsNull()) return absl::InvalidArgumentError("spec: is empty");
  Errors errors;
  SpecReader top(root, "", &errors);
  if (!root.IsMap()) return absl::InvalidArgumentError(errors.front());

  v1::JobSpec spec;
  spec.set_name(top.String("name", "job"));
  if (spec.name().empty() || spec.name().size() > 128) {
    top.Error("name", "must be 1 to 128 characters");
  }
  spec.set_ranks(top.Int("ranks", 1, 1, kMaxRanks));
  spec.set_priority(top.String("priority", ""));
  if (!IsPriorityClassName(spec.priority())) {
    top.Error("priority", "a priority class name is 1 to 32 of a-z, 0-9, "
                          "'-' and '_' (trainctl queue shows the classes)");
  }
  spec.set_seed(top.Int("seed", 0, 0, kMaxInt));
  ReadModel(top, spec.mutable_model(), &errors);
  ReadData(top, spec.mutable_data(), &errors);
  ReadOptimizer(top, spec.mutable_optimizer(), &errors);
  ReadScheduler(top, spec.mutable_scheduler(), &errors);
  ReadTraining(top, spec.mutable_training(), &errors);
  ReadCheckpoint(top, spec.mutable_checkpoint(), &errors);
  ReadFaultTolerance(top, spec.ranks(), spec.mutable_fault_tolerance(), &errors);
  ReadOutputs(top, &spec, &errors);
  ReadShippedFiles(top, &spec, &errors);
  const bool lm = ModelTypeOf(spec.model()) == ModelType::kGpt ||
                  spec.data().format() == "tokens" ||
                  spec.data().format() == "text";
  spec.set_task(top.Choice("task", TaskName(lm ? Task::kLanguageModel : Task::kClassification),
                           {TaskName(Task::kClassification), TaskName(Task::kLanguageModel),
                            TaskName(Task::kRegression)},
                           "task"));
  top.RejectUnknown();
  CheckCrossField(spec, &errors);
  if (!errors.empty()) return absl::InvalidArgumentError(JoinErrors(errors));
  return spec;
}

std::string JobSpecToJson(const v1::JobSpec& spec) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(spec, &out, options);
  return out;
}

}  // namespace trainctl
