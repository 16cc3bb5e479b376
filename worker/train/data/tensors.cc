// format tensors: a dict {"x": X, "y": Y} written by Python torch.save.

#include <torch/serialize.h>

#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/vocabulary.h"
#include "worker/train/data/in_memory.h"
#include "worker/train/data/readers.h"

namespace trainctl::train {
namespace {

std::string Shape(const torch::Tensor& t) {
  return absl::StrCat("[", absl::StrJoin(t.sizes(), ", "), "]");
}

bool IsIntegral(const torch::Tensor& t) {
  return c10::isIntegralType(t.scalar_type(), /*includeBool=*/false);
}

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;
constexpr size_t kMaxInputs = 16;
constexpr const char kInputIds[] = "input_ids";
constexpr const char kAttentionMask[] = "attention_mask";

// Each name is passed to the model's forward as a keyword argument.
bool IsIdentifier(const std::string& name) {
  if (name.empty() || name.size() > 64 || std::isdigit(static_cast<unsigned char>(name[0]))) {
    return false;
  }
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// A padding mask: 1 for a token to attend to, 0 for padding; every sample
// keeps at least one token (attention over none is undefined).
template <typename Fail>
absl::Status CheckAttentionMask(const torch::Tensor& mask, const Fail& fail) {
  const std::string where = absl::StrCat("x['", kAttentionMask, "']");
  if (mask.is_floating_point() ||
      !mask.eq(0).logical_or(mask.eq(1)).all().item<bool>()) {
    return fail(where + " must hold integers 0 (padding) and 1 (a token) only");
  }
  if (mask.dim() < 2) {
    return fail(absl::StrCat(where, " has shape ", Shape(mask), "; expected [N, T]"));
  }
  const torch::Tensor empty = mask.flatten(1).sum(1).eq(0).nonzero();
  if (empty.numel() > 0) {
    return fail(absl::StrCat(where, ": sample ", empty[0][0].item<int64_t>(),
                             " has no token (all padding)"));
  }
  return absl::OkStatus();
}

// x as one unnamed tensor, or a dict of named inputs with input_ids (else
// the dict's first) moved to the front. The dict's keys are not quoted in
// errors (they are bytes of the user's file), only their positions.
template <typename Fail>
absl::StatusOr<NamedTensors> InputsOf(const torch::IValue& x, const Fail& fail) {
  if (x.isTensor()) {
    torch::Tensor t = x.toTensor().detach();
    if (t.is_complex()) return fail("complex tensors");
    return NamedTensors{{"", t}};
  }
  if (!x.isGenericDict()) {
    return fail(absl::StrCat("'x' is a ", x.tagKind(),
                             "; expected a tensor or a dict of named input tensors"));
  }
  const c10::Dict<torch::IValue, torch::IValue> dict = x.toGenericDict();
  if (dict.size() == 0 || dict.size() > kMaxInputs) {
    return fail(absl::StrCat("x is a dict of ", dict.size(),
                             " inputs; expected 1 to ", kMaxInputs));
  }
  NamedTensors out;
  int64_t n = -1;
  size_t position = 0;
  for (const auto& entry : dict) {
    const std::string where =
        absl::StrCat("x's input ", ++position, " of ", dict.size());
    if (!entry.key().isString() || !IsIdentifier(entry.key().toStringRef())) {
      return fail(where + " is not named by a Python identifier (each name "
                          "is an argument of the model's forward)");
    }
    if (!entry.value().isTensor()) {
      return fail(absl::StrCat(where, " is a ", entry.value().tagKind(),
                               ", not a tensor"));
    }
    torch::Tensor t = entry.value().toTensor().detach();
    if (t.is_complex()) return fail(where + " holds complex values");
    if (t.dim() < 1 || (n >= 0 && t.size(0) != n)) {
      return fail(absl::StrCat(where, " has shape ", Shape(t),
                               "; every input needs the same N first (", n, ")"));
    }
    n = t.size(0);
    const std::string& name = entry.key().toStringRef();
    if (name == kAttentionMask) RETURN_IF_ERROR(CheckAttentionMask(t, fail));
    if (name == kInputIds) {
      out.insert(out.begin(), {name, t});
    } else {
      out.emplace_back(name, t);
    }
  }
  // The first is converted with the sample kind it decides; the others
  // take the model's usual types (masks and type ids as int64).
  for (size_t i = 1; i < out.size(); ++i) {
    torch::Tensor& t = out[i].second;
    t = t.is_floating_point() ? t.to(torch::kFloat32) : t.to(torch::kInt64);
  }
  return out;
}

}  // namespace

absl::StatusOr<LoadedSet> ReadTensors(const ReadRequest& req) {
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat(req.field, ": ", req.path, ": ", why));
  };
  torch::IValue value;
  {
    ASSIGN_OR_RETURN(const std::string bytes,
                     ReadWholeFile(req.path, req.field));
    const std::vector<char> buffer(bytes.begin(), bytes.end());
    try {
      value = torch::pickle_load(buffer);
    } catch (const c10::Error&) {
      // Not the unpickler's text: it can quote the file (an opcode, a
      // class or archive entry name), and the file may be any the worker
      // can read (security review C1).
      return fail(
          "not readable as a torch.save file (torch.save({\"x\": X, \"y\": "
          "Y}) from Python writes one)");
    }
  }
  if (!value.isGenericDict()) {
    return fail(absl::StrCat("holds a ", value.tagKind(),
                             "; expected a dict {\"x\": X, \"y\": Y}"));
  }
  const c10::Dict<torch::IValue, torch::IValue> dict = value.toGenericDict();
  auto find = [&](const std::string& key) -> absl::StatusOr<torch::IValue> {
    auto it = dict.find(torch::IValue(key));
    if (it == dict.end()) {
      return fail(absl::StrCat("missing key '", key,
                               "' (expected a dict {\"x\": X, \"y\": Y})"));
    }
    return it->value();
  };
  ASSIGN_OR_RETURN(const torch::IValue x_value, find("x"));
  ASSIGN_OR_RETURN(const torch::IValue y_value, find("y"));
  if (!y_value.isTensor()) {
    return fail(absl::StrCat("'y' is a ", y_value.tagKind(), ", not a tensor"));
  }
  torch::Tensor y = y_value.toTensor().detach();
  ASSIGN_OR_RETURN(NamedTensors inputs, InputsOf(x_value, fail));
  torch::Tensor x = inputs.front().second;
  const std::string x_name = inputs.size() == 1             ? "x"
                             : inputs.front().first == kInputIds ? "x['input_ids']"
                                                                 : "x's first input";
  if (x.dim() < 2) {
    return fail(absl::StrCat(x_name, " has shape ", Shape(x),
                             "; expected [N, ...] (unsqueeze(1) for one "
                             "feature per sample)"));
  }
  if (y.dim() < 1 || y.size(0) != x.size(0)) {
    return fail(absl::StrCat("y has shape ", Shape(y), " but ", x_name, " has ",
                             Shape(x), "; both need the same N first"));
  }
  if (x.size(0) == 0) return fail("x and y hold 0 samples");
  if (y.is_complex()) return fail("complex tensors");
  if (req.limit > 0 && req.limit < x.size(0)) {
    // clone so the dropped rows' memory is released.
    for (auto& named : inputs) {
      named.second = named.second.narrow(0, 0, req.limit).clone();
    }
    x = inputs.front().second;
    y = y.narrow(0, 0, req.limit).clone();
  }

  LoadedSet out;
  out.info.input_shape.assign(x.sizes().begin() + 1, x.sizes().end());
  int64_t max_id = -1;
  if (IsIntegral(x)) {  // token ids
    x = x.to(torch::kInt64);
    if (x.min().item<int64_t>() < 0) return fail(x_name + " holds negative token ids");
    out.info.integer_inputs = true;
    max_id = x.max().item<int64_t>();
  } else {
    x = x.to(torch::kFloat32);
  }
  if (req.task == Task::kRegression) {
    if (y.dim() > 2) {
      return fail(absl::StrCat("y has shape ", Shape(y),
                               "; regression expects [N] or [N, k]"));
    }
    y = y.to(torch::kFloat32);
    out.info.target_width = y.dim() == 1 ? 1 : y.size(1);
  } else {
    const bool lm = req.task == Task::kLanguageModel;
    if (!IsIntegral(y) || (!lm && y.dim() != 1)) {
      return fail(absl::StrCat("y is ", y.scalar_type(), " ", Shape(y),
                               "; task ", TaskName(req.task), " expects integer ",
                               lm ? "token ids [N, ...]" : "class ids [N]"));
    }
    y = y.to(torch::kInt64);
    if (y.min().item<int64_t>() < 0) {
      return fail(
          absl::StrCat("y holds negative ", lm ? "token ids" : "class ids"));
    }
    if (lm) {
      out.info.vocab_size = std::max(max_id, y.max().item<int64_t>()) + 1;
    } else {
      out.info.num_classes = y.max().item<int64_t>() + 1;
    }
  }
  if (out.info.integer_inputs && out.info.vocab_size == 0) {
    out.info.vocab_size = max_id + 1;
  }
  NamedInputs more;
  if (inputs.size() > 1) {
    for (const auto& named : inputs) out.info.input_names.push_back(named.first);
    more.assign(inputs.begin() + 1, inputs.end());
  }
  out.data = std::make_shared<TensorDataset>(std::move(x), std::move(y),
                                             /*input_scale=*/0, std::move(more));
  return out;
}

}  // namespace trainctl::train
