#include "worker/train/models/torchscript_model.h"

#include <sys/stat.h>
#include <torch/script.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace trainctl::train {
namespace {

// Where one argument of a method comes from when it is called.
struct ArgumentSource {
  enum Kind { kInput, kTargets, kDefault } kind = kDefault;
  size_t input = 0;  // kInput: 0 is Batch::inputs, k is more_inputs[k - 1]
  c10::IValue default_value;
};

// How to call one method: its arguments (self excluded) in order.
using CallPlan = std::vector<ArgumentSource>;

std::vector<std::string> ArgumentNames(const c10::FunctionSchema& schema) {
  std::vector<std::string> names;
  for (size_t i = 1; i < schema.arguments().size(); ++i) {
    names.push_back(schema.arguments()[i].name());
  }
  return names;
}

// Plans `method` for the data's inputs (`names`; empty for one unnamed
// input). With `targets_last`, the last argument takes the targets.
absl::StatusOr<CallPlan> PlanCall(const c10::FunctionSchema& schema,
                                  const std::vector<std::string>& names,
                                  bool targets_last, const std::string& where) {
  const std::vector<c10::Argument>& args = schema.arguments();  // [0] is self
  const size_t count = args.size() - 1;
  const std::string takes =
      absl::StrCat(" (it takes ", absl::StrJoin(ArgumentNames(schema), ", "), ")");
  if (count < (targets_last ? 2u : 1u)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, " takes ", count, " arguments; it needs the inputs",
        targets_last ? " and the targets" : ""));
  }
  CallPlan plan(count);
  std::vector<bool> used(std::max<size_t>(names.size(), 1), false);
  for (size_t i = 0; i < count; ++i) {
    const c10::Argument& arg = args[i + 1];
    ArgumentSource& source = plan[i];
    const auto named = std::find(names.begin(), names.end(), arg.name());
    if (targets_last && i + 1 == count) {
      source.kind = ArgumentSource::kTargets;
    } else if (names.empty() && i == 0) {
      source.kind = ArgumentSource::kInput;
    } else if (named != names.end()) {
      source.kind = ArgumentSource::kInput;
      source.input = named - names.begin();
    } else if (arg.default_value().has_value()) {
      source.default_value = *arg.default_value();
      continue;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " takes ", arg.name(), ", which the data does not hold",
          names.empty() ? " (it holds one unnamed input; save x as a dict of "
                          "named inputs, docs/job-spec.md)"
                        : absl::StrCat(" (it holds ", names.size(), " named inputs)")));
    }
    if (source.kind == ArgumentSource::kInput) used[source.input] = true;
  }
  for (size_t k = 0; k < used.size(); ++k) {
    if (!used[k]) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " has no argument for the data's input ", k + 1, " of ",
          used.size(), takes));
    }
  }
  return plan;
}

bool ReturnsTensor(const c10::FunctionSchema& schema) {
  return schema.returns().size() == 1 &&
         schema.returns()[0].type()->kind() == c10::TypeKind::TensorType;
}

class TorchScriptModel : public Model {
 public:
  TorchScriptModel(torch::jit::Module module, std::string path,
                   CallPlan forward, std::optional<CallPlan> loss)
      : module_(std::move(module)),
        path_(std::move(path)),
        forward_(std::move(forward)),
        loss_(std::move(loss)) {}

  torch::Tensor Forward(const torch::Tensor& inputs,
                        const NamedInputs& more) override {
    return OutputTensor(
        module_.get_method("forward")(Stack(forward_, inputs, more, {})));
  }
  bool HasCustomLoss() const override { return loss_.has_value(); }
  torch::Tensor CustomLoss(const torch::Tensor& inputs, const NamedInputs& more,
                           const torch::Tensor& targets) override {
    return module_.get_method("loss")(Stack(*loss_, inputs, more, targets))
        .toTensor();
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
  static std::vector<c10::IValue> Stack(const CallPlan& plan,
                                        const torch::Tensor& inputs,
                                        const NamedInputs& more,
                                        const torch::Tensor& targets) {
    std::vector<c10::IValue> stack;
    stack.reserve(plan.size());
    for (const ArgumentSource& source : plan) {
      switch (source.kind) {
        case ArgumentSource::kInput:
          stack.emplace_back(source.input == 0 ? inputs
                                               : more.at(source.input - 1).second);
          break;
        case ArgumentSource::kTargets:
          stack.emplace_back(targets);
          break;
        case ArgumentSource::kDefault:
          stack.push_back(source.default_value);
          break;
      }
    }
    return stack;
  }

  // The logits of what forward returned (a traced Hugging Face model
  // returns a tuple, or a ModelOutput dict).
  torch::Tensor OutputTensor(const c10::IValue& out) const {
    if (out.isTensor()) return out.toTensor();
    if (out.isTuple()) {
      const auto& items = out.toTupleRef().elements();
      if (!items.empty() && items[0].isTensor()) return items[0].toTensor();
    }
    if (out.isGenericDict()) {
      const auto dict = out.toGenericDict();
      const auto logits = dict.find(c10::IValue("logits"));
      if (logits != dict.end() && logits->value().isTensor()) {
        return logits->value().toTensor();
      }
    }
    throw std::runtime_error(absl::StrCat(
        "model.path: ", path_, ": forward returned a ", out.tagKind(),
        "; expected a Tensor, a tuple whose first item is one, or a dict "
        "with a 'logits' Tensor"));
  }

  torch::jit::Module module_;
  const std::string path_;
  const CallPlan forward_;
  const std::optional<CallPlan> loss_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> LoadTorchScriptModel(
    const std::string& path, const DataInfo& data) {
  torch::jit::Module module;
  try {
    module = torch::jit::load(path);
  } catch (const std::exception&) {
    // Not torch's text: it quotes the archive's entry names and code, and
    // model.path may name any file the worker can read (security review C1).
    struct stat st;
    const bool exists = ::stat(path.c_str(), &st) == 0;
    const int stat_errno = errno;
    return absl::InvalidArgumentError(absl::StrCat(
        "model.path: cannot load TorchScript module ", path, ": ",
        exists ? "torch::jit::load refused it (not a torch.jit.save "
                 "archive, or one this LibTorch cannot read; the details "
                 "are not shown)"
               : strerror(stat_errno)));
  }
  const std::string where = absl::StrCat("model.path: ", path, ": ");
  const auto forward = module.find_method("forward");
  if (!forward.has_value()) {
    return absl::InvalidArgumentError(where + "the module has no forward method");
  }
  absl::StatusOr<CallPlan> forward_plan = PlanCall(
      forward->function().getSchema(), data.input_names, false, where + "its forward");
  if (!forward_plan.ok()) return forward_plan.status();

  std::optional<CallPlan> loss_plan;
  if (const auto loss = module.find_method("loss"); loss.has_value()) {
    const c10::FunctionSchema& schema = loss->function().getSchema();
    const bool single = data.input_names.empty();
    absl::StatusOr<CallPlan> plan =
        PlanCall(schema, data.input_names, true, "the loss method");
    if (!ReturnsTensor(schema) || (single && schema.arguments().size() != 3) ||
        !plan.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "its loss method must be ",
          single ? "loss(self, inputs: Tensor, targets: Tensor) -> Tensor"
                 : "loss(self, <the forward's inputs by name>, targets: "
                   "Tensor) -> Tensor",
          " (it takes ", absl::StrJoin(ArgumentNames(schema), ", "), " and returns ",
          schema.returns().size() == 1
              ? schema.returns()[0].type()->str()
              : absl::StrCat(schema.returns().size(), " values"),
          plan.ok() ? ")" : absl::StrCat("; ", plan.status().message(), ")")));
    }
    loss_plan = *std::move(plan);
  }
  return std::make_unique<TorchScriptModel>(std::move(module), path,
                                            *std::move(forward_plan),
                                            std::move(loss_plan));
}

}  // namespace trainctl::train
