// format tensors: a dict {"x": X, "y": Y} written by Python torch.save.

#include <torch/serialize.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
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
  auto get = [&](const std::string& key) -> absl::StatusOr<torch::Tensor> {
    auto it = dict.find(torch::IValue(key));
    if (it == dict.end()) {
      return fail(absl::StrCat("missing key '", key,
                               "' (expected a dict {\"x\": X, \"y\": Y})"));
    }
    if (!it->value().isTensor()) {
      return fail(absl::StrCat("'", key, "' is a ", it->value().tagKind(),
                               ", not a tensor"));
    }
    return it->value().toTensor().detach();
  };
  ASSIGN_OR_RETURN(torch::Tensor x, get("x"));
  ASSIGN_OR_RETURN(torch::Tensor y, get("y"));
  if (x.dim() < 2) {
    return fail(absl::StrCat("x has shape ", Shape(x),
                             "; expected [N, ...] (unsqueeze(1) for one "
                             "feature per sample)"));
  }
  if (y.dim() < 1 || y.size(0) != x.size(0)) {
    return fail(absl::StrCat("y has shape ", Shape(y), " but x has ", Shape(x),
                             "; both need the same N first"));
  }
  if (x.size(0) == 0) return fail("x and y hold 0 samples");
  if (x.is_complex() || y.is_complex()) return fail("complex tensors");
  if (req.limit > 0 && req.limit < x.size(0)) {
    // clone so the dropped rows' memory is released.
    x = x.narrow(0, 0, req.limit).clone();
    y = y.narrow(0, 0, req.limit).clone();
  }

  LoadedSet out;
  out.info.input_shape.assign(x.sizes().begin() + 1, x.sizes().end());
  int64_t max_id = -1;
  if (IsIntegral(x)) {  // token ids
    x = x.to(torch::kInt64);
    if (x.min().item<int64_t>() < 0) return fail("x holds negative token ids");
    out.info.integer_inputs = true;
    max_id = x.max().item<int64_t>();
  } else {
    x = x.to(torch::kFloat32);
  }
  if (req.task == "regression") {
    if (y.dim() > 2) {
      return fail(absl::StrCat("y has shape ", Shape(y),
                               "; regression expects [N] or [N, k]"));
    }
    y = y.to(torch::kFloat32);
    out.info.target_width = y.dim() == 1 ? 1 : y.size(1);
  } else {
    const bool lm = req.task == "language_model";
    if (!IsIntegral(y) || (!lm && y.dim() != 1)) {
      return fail(absl::StrCat("y is ", y.scalar_type(), " ", Shape(y),
                               "; task ", req.task, " expects integer ",
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
  out.data = std::make_shared<TensorDataset>(std::move(x), std::move(y));
  return out;
}

}  // namespace trainctl::train
