#include "common/memory_plan.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec_audio.h"
#include "common/vocabulary.h"

namespace trainctl {
namespace {

using Shapes = std::vector<std::vector<int64_t>>;

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void AddLinear(Shapes* shapes, int64_t in, int64_t out) {
  shapes->push_back({out, in});
  shapes->push_back({out});
}

// 8-bit Adam keeps fp32 moments below this many elements (adam8bit.h).
constexpr int64_t kMin8bitSize = 4096;

bool IsLanguageModel(const v1::JobSpec& spec) {
  return ModelTypeOf(spec.model()) == ModelType::kGpt;
}

bool IsTransformer(const v1::JobSpec& spec) {
  const ModelType type = ModelTypeOf(spec.model());
  return type == ModelType::kGpt || type == ModelType::kTransformerClassifier;
}

}  // namespace

PlanData ResolvePlanData(const v1::JobSpec& spec, PlanData data) {
  const v1::DataSpec& d = spec.data();
  const bool csv_text = d.format() == "csv" && !d.text_column().empty();
  // Text is bytes unless a tokenizer makes it subwords (the probe's count).
  if ((d.format() == "text" || csv_text) && d.tokenizer().empty()) data.vocab_size = 256;
  // A spectrogram's shape is the spec's, whatever the sound files hold.
  if (d.format() == "audio") data.input_shape = {1, d.audio().n_mels(), AudioFrames(d.audio())};
  if ((d.format() == "text" || d.format() == "tokens" || csv_text) && d.seq_len() > 0) {
    data.input_shape = {d.seq_len()};
  }
  if (spec.model().num_classes() > 0) data.num_classes = spec.model().num_classes();
  if (spec.model().vocab_size() > 0) data.vocab_size = spec.model().vocab_size();
  // Image transforms change [C, H, W] (or [H, W]) as the rank applies them.
  std::vector<int64_t>& shape = data.input_shape;
  const v1::ImageTransformsSpec& t = d.transforms();
  if (shape.size() >= 2) {
    if (t.resize_size() == 2) {
      shape[shape.size() - 2] = t.resize(0);
      shape[shape.size() - 1] = t.resize(1);
    }
    if (t.random_crop().size_size() == 2) {
      shape[shape.size() - 2] = t.random_crop().size(0);
      shape[shape.size() - 1] = t.random_crop().size(1);
    }
  }
  return data;
}

absl::StatusOr<Shapes> ParameterShapes(const v1::JobSpec& spec, const PlanData& data) {
  const v1::ModelSpec& m = spec.model();
  const ModelType type = ModelTypeOf(m);
  const Task task = TaskOf(spec);
  if (type == ModelType::kTorchScript) {
    return absl::FailedPreconditionError(
        "a TorchScript module's parameters are counted when the ranks load it");
  }
  int64_t outputs = task == Task::kClassification ? data.num_classes
                    : task == Task::kRegression       ? data.target_width
                                                      : 0;
  // Asked after the input's size, which the data decides first.
  auto need_classes = [&]() -> absl::Status {
    if (task == Task::kClassification && outputs < 1) {
      return absl::FailedPreconditionError(
          "the head's size comes from the data's labels (set model.num_classes to plan it)");
    }
    return absl::OkStatus();
  };
  Shapes shapes;
  const bool cnn = IsConvNet(type);
  if (type == ModelType::kMlp || cnn) {
    if (data.input_shape.empty()) {
      return absl::FailedPreconditionError(
          "the input size comes from the data, which no worker has read yet");
    }
    if (absl::Status s = need_classes(); !s.ok()) return s;
    int64_t width = Numel(data.input_shape);
    if (cnn) {
      const std::vector<int64_t>& in = data.input_shape;
      if (in.size() < 2 || in.size() > 3 || m.channels_size() != 2) {
        return absl::FailedPreconditionError(
            absl::StrCat(m.type(), " needs inputs [C, H, W] or [H, W]"));
      }
      const int64_t c = in.size() == 3 ? in[0] : 1;
      const int64_t h = in[in.size() - 2], w = in[in.size() - 1];
      shapes.push_back({m.channels(0), c, 3, 3});
      shapes.push_back({m.channels(0)});
      shapes.push_back({m.channels(1), m.channels(0), 3, 3});
      shapes.push_back({m.channels(1)});
      // audio_cnn averages the blocks' output over its width (time).
      width = m.channels(1) * (h / 4) * (type == ModelType::kAudioCnn ? 1 : w / 4);
    }
    for (int32_t hidden : m.hidden()) {
      AddLinear(&shapes, width, hidden);
      width = hidden;
    }
    AddLinear(&shapes, width, outputs);
    return shapes;
  }
  if (IsTransformer(spec)) {
    const int64_t vocab = data.vocab_size;
    if (vocab < 1) {
      return absl::FailedPreconditionError(
          "the vocabulary comes from the data's largest token id (set model.vocab_size to plan it)");
    }
    if (!IsLanguageModel(spec)) {
      if (absl::Status s = need_classes(); !s.ok()) return s;
    }
    const int64_t d = m.d_model();
    shapes.push_back({vocab, d});
    shapes.push_back({m.max_seq_len(), d});
    for (int32_t layer = 0; layer < m.n_layers(); ++layer) {
      for (int ln = 0; ln < 2; ++ln) {
        shapes.push_back({d});
        shapes.push_back({d});
      }
      AddLinear(&shapes, d, 3 * d);
      AddLinear(&shapes, d, d);
      AddLinear(&shapes, d, m.d_ff());
      AddLinear(&shapes, m.d_ff(), d);
    }
    shapes.push_back({d});
    shapes.push_back({d});
    AddLinear(&shapes, d, IsLanguageModel(spec) ? vocab : outputs);
    return shapes;
  }
  return absl::FailedPreconditionError(absl::StrCat("no plan for model ", m.type()));
}

int64_t PlannedOptimizerBytes(const v1::OptimizerSpec& o, const Shapes& shapes) {
  int64_t bytes = 0;
  const int64_t block = o.block_size() > 0 ? o.block_size() : 2048;
  const double beta1 = o.betas_size() > 0 ? o.betas(0) : 0.9;
  for (const std::vector<int64_t>& shape : shapes) {
    const int64_t n = Numel(shape);
    if (o.type() == "sgd") {
      bytes += o.momentum() > 0 ? 4 * n : 0;
    } else if (o.type() == "adafactor") {
      if (shape.size() >= 2) {
        // Rows: every dimension but the last; columns: all but the one
        // before the last.
        bytes += 4 * (n / shape.back() + n / shape[shape.size() - 2]);
      } else {
        bytes += 4 * n;
      }
      if (beta1 > 0) bytes += 4 * n;
    } else if (o.type() == "adam8bit" && n >= kMin8bitSize) {
      bytes += 2 * n + 2 * 4 * ((n + block - 1) / block);
    } else {  // adam, adamw, adam8bit's small tensors: two fp32 moments
      bytes += 8 * n;
    }
  }
  return bytes;
}

namespace {

// Elements kept for backward per sample: a count of the tensors autograd
// saves, layer by layer (estimates; see docs/job-spec.md).
struct ActivationElements {
  int64_t plain = 0;
  int64_t checkpointed = 0;
};

ActivationElements MlpActivations(const v1::ModelSpec& m, int64_t in, int64_t out) {
  // Each hidden layer keeps its input and its ReLU output (and mask).
  ActivationElements a;
  int64_t inputs = in, largest = 0;
  a.plain = in;
  for (int32_t h : m.hidden()) {
    a.plain += 2 * h;
    inputs += h;
    largest = std::max<int64_t>(largest, h);
  }
  a.plain += 2 * out;
  // With checkpointing, the blocks' inputs (and the last one's output),
  // and the pre-activation of the one block recomputed at a time.
  a.checkpointed = inputs + largest + 2 * out;
  return a;
}

ActivationElements CnnActivations(const v1::ModelSpec& m, const std::vector<int64_t>& in,
                                  int64_t out) {
  const int64_t c = in.size() == 3 ? in[0] : 1;
  const int64_t h = in[in.size() - 2], w = in[in.size() - 1];
  int64_t e = c * h * w;
  // conv, ReLU, pool (a quarter) for each of the two blocks.
  e += 2 * m.channels(0) * h * w + m.channels(0) * (h / 2) * (w / 2);
  e += 2 * m.channels(1) * (h / 2) * (w / 2) + m.channels(1) * (h / 4) * (w / 4);
  if (ModelTypeOf(m) == ModelType::kAudioCnn) e += m.channels(1) * (h / 4);  // the time average
  for (int32_t hidden : m.hidden()) e += 2 * hidden;
  e += 2 * out;
  return {e, e};  // cnn and audio_cnn do not checkpoint
}

ActivationElements TransformerActivations(const v1::JobSpec& spec, int64_t tokens,
                                          int64_t vocab, int64_t out) {
  const v1::ModelSpec& m = spec.model();
  const int64_t d = m.d_model(), ff = m.d_ff(), heads = m.n_heads(), t = tokens;
  // Per block: LayerNorms, q/k/v, attention output and projection,
  // residuals (about 11 x d per token), the MLP's two d_ff tensors, and the
  // attention scores and their softmax (2 x heads x T x T).
  const int64_t block = t * (11 * d + 2 * ff) + 2 * heads * t * t;
  const int64_t head = IsLanguageModel(spec) ? 2 * t * vocab : 2 * out;
  const int64_t ends = 2 * t * d + head;  // embeddings, final norm, logits
  ActivationElements a;
  a.plain = m.n_layers() * block + ends;
  // With checkpointing, each block's input, and one block recomputed.
  a.checkpointed = m.n_layers() * t * d + block + ends;
  return a;
}

}  // namespace

v1::MemoryPlan PlanRankMemory(const v1::JobSpec& spec, const PlanData& given,
                              int64_t per_rank_batch) {
  v1::MemoryPlan plan;
  const PlanData data = ResolvePlanData(spec, given);
  absl::StatusOr<Shapes> shapes = ParameterShapes(spec, data);
  if (!shapes.ok()) {
    plan.set_note(std::string(shapes.status().message()));
    return plan;
  }
  int64_t params = 0;
  for (const std::vector<int64_t>& s : *shapes) params += Numel(s);
  plan.set_parameters(params);
  plan.set_parameter_bytes(4 * params);
  plan.set_gradient_bytes(4 * params);
  plan.set_optimizer_bytes(PlannedOptimizerBytes(spec.optimizer(), *shapes));
  const v1::ModelSpec& m = spec.model();
  ActivationElements a;
  const int64_t out = TaskOf(spec) == Task::kClassification ? data.num_classes : data.target_width;
  const ModelType type = ModelTypeOf(m);
  if (type == ModelType::kMlp) {
    a = MlpActivations(m, Numel(data.input_shape), out);
  } else if (IsConvNet(type)) {
    a = CnnActivations(m, data.input_shape, out);
  } else {
    const int64_t tokens = data.input_shape.empty() ? m.max_seq_len() : data.input_shape.back();
    a = TransformerActivations(spec, tokens, data.vocab_size, out);
  }
  // Under autocast most saved tensors are half precision.
  const int64_t element = spec.training().precision() == "fp32" ||
                                  spec.training().precision().empty()
                              ? 4
                              : 2;
  plan.set_activation_bytes_plain(a.plain * element * per_rank_batch);
  plan.set_activation_bytes_checkpointed(a.checkpointed * element * per_rank_batch);
  plan.set_activation_bytes(spec.training().gradient_checkpointing()
                                ? plan.activation_bytes_checkpointed()
                                : plan.activation_bytes_plain());
  plan.set_total_bytes(plan.parameter_bytes() + plan.gradient_bytes() +
                       plan.optimizer_bytes() + plan.activation_bytes());
  return plan;
}

void WarnIfOverAvailable(v1::MemoryPlan* plan) {
  plan->clear_warning();
  if (plan->available_bytes() <= 0 || plan->total_bytes() <= plan->available_bytes()) return;
  plan->set_warning(absl::StrCat("one rank needs about ", FormatBytes(plan->total_bytes()),
                                 ", more than the ", FormatBytes(plan->available_bytes()),
                                 " of ", plan->available_on(),
                                 "; use fewer or smaller micro-batches, gradient_checkpointing, "
                                 "adam8bit or adafactor, or larger nodes"));
}

std::string FormatBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  const bool whole = unit == 0 || value >= 100 || value == static_cast<int64_t>(value);
  std::snprintf(text, sizeof(text), whole ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

}  // namespace trainctl
