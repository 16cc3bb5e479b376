#include "common/spec.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace trainctl {
namespace {

constexpr int kMaxRanks = 4096;
constexpr size_t kMaxSpecBytes = 1 << 20;

// Reads one YAML mapping, remembering which keys were used so the leftovers
// can be reported as unknown fields. Errors go to a shared list.
class Section {
 public:
  Section(const YAML::Node& node, std::string path,
          std::vector<std::string>* errors)
      : node_(node), path_(std::move(path)), errors_(errors) {
    if (node_ && !node_.IsNull() && !node_.IsMap()) {
      Error(path_.empty() ? "spec" : path_, "must be a mapping");
      valid_ = false;
    }
  }

  std::string Path(const std::string& key) const {
    return path_.empty() ? key : absl::StrCat(path_, ".", key);
  }

  YAML::Node Child(const std::string& key) {
    used_.insert(key);
    if (!valid_ || !node_ || node_.IsNull()) return YAML::Node();
    return node_[key];
  }

  std::string String(const std::string& key, const std::string& fallback) {
    YAML::Node n = Child(key);
    if (!n || n.IsNull()) return fallback;
    if (!n.IsScalar()) {
      Error(Path(key), "must be a string");
      return fallback;
    }
    return n.Scalar();
  }

  int64_t Int(const std::string& key, int64_t fallback, int64_t min,
              int64_t max) {
    YAML::Node n = Child(key);
    if (!n || n.IsNull()) return fallback;
    int64_t value = 0;
    if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, value)) {
      Error(Path(key), absl::StrCat("must be an integer, got '",
                                    n.IsScalar() ? n.Scalar() : "<non-scalar>",
                                    "'"));
      return fallback;
    }
    if (value < min || value > max) {
      Error(Path(key), absl::StrCat("must be in [", min, ", ", max, "], got ",
                                    value));
      return fallback;
    }
    return value;
  }

  double Double(const std::string& key, double fallback, double min,
                double max) {
    YAML::Node n = Child(key);
    if (!n || n.IsNull()) return fallback;
    double value = 0;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, value) ||
        !std::isfinite(value)) {
      Error(Path(key), absl::StrCat("must be a finite number, got '",
                                    n.IsScalar() ? n.Scalar() : "<non-scalar>",
                                    "'"));
      return fallback;
    }
    if (value < min || value > max) {
      Error(Path(key), absl::StrCat("must be in [", min, ", ", max, "], got ",
                                    value));
      return fallback;
    }
    return value;
  }

  // Reports keys present in the mapping that no reader asked for.
  void RejectUnknown() {
    if (!valid_ || !node_ || !node_.IsMap()) return;
    for (const auto& kv : node_) {
      std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "<complex>";
      if (!used_.count(key)) Error(Path(key), "unknown field");
    }
  }

  void Error(const std::string& field, const std::string& what) {
    errors_->push_back(absl::StrCat(field, ": ", what));
  }

 private:
  YAML::Node node_;
  std::string path_;
  std::vector<std::string>* errors_;
  std::set<std::string> used_;
  bool valid_ = true;
};

void ReadModel(Section& top, v1::ModelSpec* model,
               std::vector<std::string>* errors) {
  YAML::Node node = top.Child("model");
  const bool shorthand = node && node.IsScalar();
  Section s(shorthand ? YAML::Node() : node, "model", errors);
  if (shorthand) {
    // "model: mlp" is shorthand for "model: {type: mlp}".
    model->set_type(node.Scalar());
  } else {
    model->set_type(s.String("type", ""));
  }
  if (model->type().empty()) {
    s.Error("model.type", "is required (known models: mlp)");
  } else if (model->type() != "mlp") {
    s.Error("model.type",
            absl::StrCat("unknown model '", model->type(), "' (known: mlp)"));
  }
  YAML::Node hidden = node && node.IsMap() ? s.Child("hidden") : YAML::Node();
  if (hidden && !hidden.IsNull()) {
    if (!hidden.IsSequence() || hidden.size() == 0 || hidden.size() > 64) {
      s.Error("model.hidden", "must be a list of 1 to 64 layer widths");
    } else {
      for (size_t i = 0; i < hidden.size(); ++i) {
        int width = 0;
        if (!hidden[i].IsScalar() ||
            !YAML::convert<int>::decode(hidden[i], width) || width < 1 ||
            width > 65536) {
          s.Error(absl::StrCat("model.hidden[", i, "]"),
                  "must be an integer in [1, 65536]");
        }
        model->add_hidden(width);
      }
    }
  } else {
    model->add_hidden(512);
    model->add_hidden(256);
  }
  if (node && node.IsMap()) s.RejectUnknown();
}

void ReadData(Section& top, v1::DataSpec* data,
              std::vector<std::string>* errors) {
  Section s(top.Child("data"), "data", errors);
  data->set_format(s.String("format", "idx"));
  if (data->format() != "idx") {
    s.Error("data.format",
            absl::StrCat("unknown format '", data->format(), "' (known: idx)"));
  }
  data->set_train_images(s.String("train_images", ""));
  data->set_train_labels(s.String("train_labels", ""));
  data->set_eval_images(s.String("eval_images", ""));
  data->set_eval_labels(s.String("eval_labels", ""));
  if (data->train_images().empty()) s.Error("data.train_images", "is required");
  if (data->train_labels().empty()) s.Error("data.train_labels", "is required");
  if (data->eval_images().empty() != data->eval_labels().empty()) {
    s.Error(data->eval_images().empty() ? "data.eval_images"
                                        : "data.eval_labels",
            "eval_images and eval_labels must be given together");
  }
  const int64_t kMaxInt = std::numeric_limits<int64_t>::max();
  data->set_train_limit(s.Int("train_limit", 0, 0, kMaxInt));
  data->set_eval_limit(s.Int("eval_limit", 0, 0, kMaxInt));
  s.RejectUnknown();
}

void ReadOptimizer(Section& top, v1::OptimizerSpec* opt,
                   std::vector<std::string>* errors) {
  Section s(top.Child("optimizer"), "optimizer", errors);
  opt->set_type(s.String("type", "adamw"));
  static const std::set<std::string> kKnown = {"adamw", "adam", "sgd"};
  if (!kKnown.count(opt->type())) {
    s.Error("optimizer.type", absl::StrCat("unknown optimizer '", opt->type(),
                                           "' (known: adamw, adam, sgd)"));
  }
  const bool is_sgd = opt->type() == "sgd";
  opt->set_lr(s.Double("lr", is_sgd ? 0.01 : 0.001, 0, 1e3));
  if (opt->lr() <= 0) s.Error("optimizer.lr", "must be > 0");
  opt->set_weight_decay(
      s.Double("weight_decay", opt->type() == "adamw" ? 0.01 : 0.0, 0, 1e3));
  double beta1 = 0.9, beta2 = 0.999;
  YAML::Node betas = s.Child("betas");
  if (betas && !betas.IsNull()) {
    double b1 = 0, b2 = 0;
    if (!betas.IsSequence() || betas.size() != 2 ||
        !YAML::convert<double>::decode(betas[0], b1) ||
        !YAML::convert<double>::decode(betas[1], b2) || b1 < 0 || b1 >= 1 ||
        b2 < 0 || b2 >= 1) {
      s.Error("optimizer.betas", "must be two numbers in [0, 1)");
    } else {
      beta1 = b1;
      beta2 = b2;
    }
  }
  opt->add_betas(beta1);
  opt->add_betas(beta2);
  opt->set_eps(s.Double("eps", 1e-8, 0, 1));
  opt->set_momentum(s.Double("momentum", 0.0, 0, 0.999999));
  s.RejectUnknown();
}

void ReadScheduler(Section& top, v1::SchedulerSpec* sched,
                   std::vector<std::string>* errors) {
  Section s(top.Child("scheduler"), "scheduler", errors);
  sched->set_type(s.String("type", "constant"));
  if (sched->type() != "constant" && sched->type() != "linear") {
    s.Error("scheduler.type", absl::StrCat("unknown scheduler '", sched->type(),
                                           "' (known: constant, linear)"));
  }
  sched->set_warmup_steps(s.Int("warmup_steps", 0, 0, 1'000'000'000));
  s.RejectUnknown();
}

void ReadTraining(Section& top, v1::TrainingSpec* t,
                  std::vector<std::string>* errors) {
  Section s(top.Child("training"), "training", errors);
  t->set_epochs(s.Int("epochs", 1, 1, 100'000));
  t->set_batch_size(s.Int("batch_size", 64, 1, 1 << 24));
  t->set_max_steps(s.Int("max_steps", 0, 0, 1'000'000'000'000));
  t->set_log_every_steps(s.Int("log_every_steps", 50, 1, 1'000'000'000));
  t->set_threads_per_rank(s.Int("threads_per_rank", 0, 0, 1024));
  t->set_device(s.String("device", "auto"));
  if (t->device() != "auto" && t->device() != "cpu" && t->device() != "cuda") {
    s.Error("training.device", absl::StrCat("unknown device '", t->device(),
                                            "' (known: auto, cpu, cuda)"));
  }
  s.RejectUnknown();
}

// Rules that span several sections.
void CheckCrossField(const v1::JobSpec& spec, std::vector<std::string>* errors) {
  if (spec.ranks() > 0 && spec.training().batch_size() % spec.ranks() != 0) {
    errors->push_back(absl::StrCat(
        "training.batch_size: ", spec.training().batch_size(),
        " does not divide evenly over ", spec.ranks(),
        " ranks (the global batch is split equally; pick a multiple of ranks)"));
  }
}

}  // namespace

absl::StatusOr<v1::JobSpec> ParseJobSpec(const std::string& text) {
  if (text.size() > kMaxSpecBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec: ", text.size(), " bytes is over the limit of ", kMaxSpecBytes));
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec: not valid YAML or JSON: ", e.what()));
  }
  if (!root || root.IsNull()) {
    return absl::InvalidArgumentError("spec: is empty");
  }
  std::vector<std::string> errors;
  v1::JobSpec spec;
  Section top(root, "", &errors);
  if (!root.IsMap()) return absl::InvalidArgumentError(errors.front());

  spec.set_name(top.String("name", "job"));
  if (spec.name().empty() || spec.name().size() > 128) {
    top.Error("name", "must be 1 to 128 characters");
  }
  spec.set_ranks(top.Int("ranks", 1, 1, kMaxRanks));
  spec.set_seed(top.Int("seed", 0, 0, std::numeric_limits<int64_t>::max()));
  ReadModel(top, spec.mutable_model(), &errors);
  ReadData(top, spec.mutable_data(), &errors);
  ReadOptimizer(top, spec.mutable_optimizer(), &errors);
  ReadScheduler(top, spec.mutable_scheduler(), &errors);
  ReadTraining(top, spec.mutable_training(), &errors);
  top.RejectUnknown();
  CheckCrossField(spec, &errors);
  if (!errors.empty()) {
    return absl::InvalidArgumentError(absl::StrJoin(errors, "; "));
  }
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
