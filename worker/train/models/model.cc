#include "worker/train/models/model.h"

#include <sys/stat.h>
#include <torch/script.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "worker/train/models/networks.h"

namespace trainctl::train {
namespace {

// A built-in torch::nn module behind the Model interface.
template <typename Holder>
class NativeModel : public Model {
 public:
  explicit NativeModel(Holder module) : module_(std::move(module)) {}
  torch::Tensor Forward(const torch::Tensor& inputs) override {
    return module_->forward(inputs);
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

// A module saved from Python with torch.jit.save, trained in place.
class TorchScriptModel : public Model {
 public:
  explicit TorchScriptModel(torch::jit::Module module)
      : module_(std::move(module)),
        custom_loss_(module_.find_method("loss").has_value()) {}
  torch::Tensor Forward(const torch::Tensor& inputs) override {
    return module_.forward({inputs}).toTensor();
  }
  bool HasCustomLoss() const override { return custom_loss_; }
  torch::Tensor CustomLoss(const torch::Tensor& inputs,
                           const torch::Tensor& targets) override {
    return module_.run_method("loss", inputs, targets).toTensor();
  }
  std::vector<torch::Tensor> Parameters() override {
    std::vector<torch::Tensor> out;
    for (const auto& p : module_.parameters()) {
      if (p.requires_grad()) out.push_back(p);
    }
    return out;
  }
  std::vector<std::pair<std::string, torch::Tensor>> NamedState() override {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& p : module_.named_parameters()) out.emplace_back(p.name, p.value);
    for (const auto& b : module_.named_buffers()) out.emplace_back(b.name, b.value);
    return out;
  }
  void SetTraining(bool training) override { module_.train(training); }
  void To(const torch::Device& device) override { module_.to(device); }

 private:
  torch::jit::Module module_;
  const bool custom_loss_;
};

// OK when the module has no `loss` method or one that takes (inputs,
// targets) and returns a tensor; else INVALID_ARGUMENT naming model.path.
absl::Status CheckCustomLoss(torch::jit::Module& module, const std::string& path) {
  const auto method = module.find_method("loss");
  if (!method.has_value()) return absl::OkStatus();
  const c10::FunctionSchema& schema = method->function().getSchema();
  const bool takes_two = schema.arguments().size() == 3;  // self, inputs, targets
  const bool returns_tensor =
      schema.returns().size() == 1 &&
      schema.returns()[0].type()->kind() == c10::TypeKind::TensorType;
  if (takes_two && returns_tensor) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "model.path: ", path, ": its loss method must be "
      "loss(self, inputs: Tensor, targets: Tensor) -> Tensor (it has ",
      schema.arguments().size() - 1, " arguments besides self and returns ",
      schema.returns().size() == 1 ? schema.returns()[0].type()->str()
                                   : absl::StrCat(schema.returns().size(), " values"),
      ")"));
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
  const std::string& task = spec.task();
  int64_t outputs = 0;
  if (task == "classification") {
    outputs = m.num_classes() > 0 ? m.num_classes() : data.num_classes;
    if (outputs < 1) {
      return absl::InvalidArgumentError(
          "model.num_classes: the data has no labels to size the head from; "
          "set it");
    }
  } else if (task == "regression") {
    outputs = data.target_width;
  }
  const std::vector<int64_t> hidden(m.hidden().begin(), m.hidden().end());
  try {
    if (m.type() == "mlp" || m.type() == "cnn") {
      if (data.integer_inputs) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model.type: ", m.type(), " takes numeric features, but the data "
            "holds token ids (use transformer_classifier or gpt)"));
      }
      if (m.type() == "mlp") {
        return std::make_unique<NativeModel<Mlp>>(
            Mlp(Product(data.input_shape), hidden, outputs,
                spec.training().gradient_checkpointing()));
      }
      if (data.input_shape.size() < 2 || data.input_shape.size() > 3) {
        return absl::InvalidArgumentError(
            "model.type: cnn needs image inputs [C, H, W] or [H, W] (idx data)");
      }
      const std::vector<int64_t> channels(m.channels().begin(), m.channels().end());
      return std::make_unique<NativeModel<Cnn>>(
          Cnn(data.input_shape, channels, hidden, outputs));
    }
    if (m.type() == "transformer_classifier" || m.type() == "gpt") {
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
      const bool lm = m.type() == "gpt";
      return std::make_unique<NativeModel<Transformer>>(
          Transformer(s, lm ? s.vocab_size : outputs, lm,
                      spec.training().gradient_checkpointing()));
    }
    if (m.type() == "torchscript") {
      torch::jit::Module module;
      try {
        module = torch::jit::load(m.path());
      } catch (const std::exception&) {
        // Not torch's text: it quotes the archive's entry names and code,
        // and model.path may name any file the worker can read (security
        // review C1).
        struct stat st;
        const bool exists = ::stat(m.path().c_str(), &st) == 0;
        const int stat_errno = errno;
        return absl::InvalidArgumentError(absl::StrCat(
            "model.path: cannot load TorchScript module ", m.path(), ": ",
            exists ? "torch::jit::load refused it (not a torch.jit.save "
                     "archive, or one this LibTorch cannot read; the details "
                     "are not shown)"
                   : strerror(stat_errno)));
      }
      if (absl::Status loss = CheckCustomLoss(module, m.path()); !loss.ok()) {
        return loss;
      }
      return std::make_unique<TorchScriptModel>(std::move(module));
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: cannot build ", m.type(), ": ", e.what()));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("model.type: unknown model '", m.type(), "'"));
}

}  // namespace trainctl::train
