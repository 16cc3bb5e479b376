#include "worker/train/models/model.h"

#include <type_traits>

#include "absl/strings/str_cat.h"
#include "common/vocabulary.h"
#include "worker/train/models/networks.h"
#include "worker/train/models/torchscript_model.h"

namespace trainctl::train {
namespace {

// The data's named input a built-in transformer_classifier reads besides
// the token ids: 1 for a token, 0 for padding.
constexpr const char kAttentionMask[] = "attention_mask";

torch::Tensor AttentionMaskOf(const NamedInputs& more) {
  for (const auto& [name, values] : more) {
    if (name == kAttentionMask) return values;
  }
  return {};
}

// A built-in torch::nn module behind the Model interface.
template <typename Holder>
class NativeModel : public Model {
 public:
  explicit NativeModel(Holder module) : module_(std::move(module)) {}
  torch::Tensor Forward(const torch::Tensor& inputs,
                        const NamedInputs& more) override {
    if constexpr (std::is_same_v<Holder, Transformer>) {
      return module_->forward(inputs, AttentionMaskOf(more));
    } else {
      return module_->forward(inputs);
    }
  }
  std::vector<torch::Tensor> Parameters() override {
    return module_->parameters();
  }
  std::vector<std::pair<std::string, torch::Tensor>> NamedState() override {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& p : module_->named_parameters()) out.emplace_back(p.key(), p.value());
    for (const auto& b : module_->named_buffers()) out.emplace_back(b.key(), b.value());
    return out;
  }
  void SetTraining(bool training) override { module_->train(training); }
  void To(const torch::Device& device) override { module_->to(device); }

 private:
  Holder module_;
};

// OK when a built-in model of `type` reads every input the data names.
absl::Status CheckBuiltInInputs(ModelType type, const DataInfo& data) {
  if (data.input_names.empty()) return absl::OkStatus();
  const bool mask_only = data.input_names.size() == 2 &&
                         data.input_names[1] == kAttentionMask;
  if (type == ModelType::kTransformerClassifier && mask_only) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "model.type: ", ModelTypeName(type), " reads ",
      type == ModelType::kTransformerClassifier
          ? "token ids and, optionally, their attention_mask"
          : "one input",
      "; the data has ", data.input_names.size(),
      " named inputs (a TorchScript model takes any it names in its forward)"));
}

int64_t Product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> BuildModel(const v1::JobSpec& spec,
                                                  const DataInfo& data) {
  const v1::ModelSpec& m = spec.model();
  const Task task = TaskOf(spec);
  int64_t outputs = 0;
  if (task == Task::kClassification) {
    outputs = m.num_classes() > 0 ? m.num_classes() : data.num_classes;
    if (outputs < 1) {
      return absl::InvalidArgumentError(
          "model.num_classes: the data has no labels to size the head from; "
          "set it");
    }
  } else if (task == Task::kRegression) {
    outputs = data.target_width;
  }
  const std::vector<int64_t> hidden(m.hidden().begin(), m.hidden().end());
  const ModelType type = ModelTypeOf(m);
  if (type != ModelType::kTorchScript) {
    if (absl::Status fits = CheckBuiltInInputs(type, data); !fits.ok()) return fits;
  }
  try {
    if (type == ModelType::kMlp || IsConvNet(type)) {
      if (data.integer_inputs) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model.type: ", m.type(), " takes numeric features, but the data "
            "holds token ids (use transformer_classifier or gpt)"));
      }
      if (type == ModelType::kMlp) {
        return std::make_unique<NativeModel<Mlp>>(
            Mlp(Product(data.input_shape), hidden, outputs,
                spec.training().gradient_checkpointing()));
      }
      if (data.input_shape.size() < 2 || data.input_shape.size() > 3) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model.type: ", m.type(), " needs ",
            type == ModelType::kCnn ? "image inputs [C, H, W] or [H, W] (idx data)"
                                    : "spectrograms [C, F, T] (data.format audio)"));
      }
      const std::vector<int64_t> channels(m.channels().begin(), m.channels().end());
      return std::make_unique<NativeModel<Cnn>>(Cnn(data.input_shape, channels, hidden, outputs,
                                                    /*average_over_width=*/type == ModelType::kAudioCnn));
    }
    if (type == ModelType::kTransformerClassifier || type == ModelType::kGpt) {
      if (!data.integer_inputs) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model.type: ", m.type(), " takes token ids, but the data holds "
            "numeric features"));
      }
      TransformerSizes s;
      s.vocab_size = m.vocab_size() > 0 ? m.vocab_size() : data.vocab_size;
      if (s.vocab_size < data.vocab_size) {
        // Not the data's vocabulary: it is the largest id + 1, bytes of
        // the file (security review C1).
        return absl::InvalidArgumentError(absl::StrCat(
            "model.vocab_size: ", s.vocab_size,
            " is smaller than the data's largest token id + 1"));
      }
      s.d_model = m.d_model();
      s.n_layers = m.n_layers();
      s.n_heads = m.n_heads();
      s.d_ff = m.d_ff();
      s.max_seq_len = m.max_seq_len();
      s.dropout = m.dropout();
      if (!data.input_shape.empty() && data.input_shape.back() > s.max_seq_len) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model.max_seq_len: ", s.max_seq_len, " is shorter than the data's ",
            data.input_shape.back(), "-token samples"));
      }
      const bool lm = type == ModelType::kGpt;
      return std::make_unique<NativeModel<Transformer>>(
          Transformer(s, lm ? s.vocab_size : outputs, lm,
                      spec.training().gradient_checkpointing()));
    }
    if (type == ModelType::kTorchScript) return LoadTorchScriptModel(m.path(), data);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: cannot build ", m.type(), ": ", e.what()));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("model.type: unknown model '", m.type(), "'"));
}

}  // namespace trainctl::train
