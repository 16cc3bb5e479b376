#include "worker/train/optim/optimizer_state.h"

#include <memory>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/train/optim/adafactor.h"
#include "worker/train/optim/adam8bit.h"
#include "worker/train/torch_compat.h"

namespace trainctl::train {
namespace {

namespace optim = torch::optim;

OptimizerStateKey StateKey(const torch::Tensor& param) { return StateKeyOf(param); }

// Named fields of each state type: one table drives export and import.
template <typename State>
struct Field {
  const char* name;
  // TORCH_ARG's accessors: `const T& name() const noexcept`, `name(const T&)`.
  const torch::Tensor& (State::*get)() const noexcept;
  State& (State::*set)(const torch::Tensor&);
};

template <typename State>
using Fields = std::vector<Field<State>>;

template <typename State>
ParamOptimizerState ExportFields(const State& state, const Fields<State>& fields,
                                 int64_t step, bool copy) {
  ParamOptimizerState out;
  out.present = true;
  out.step = step;
  for (const auto& f : fields) {
    const torch::Tensor t = (state.*f.get)();
    if (!t.defined()) continue;
    out.tensors[f.name] = copy ? t.detach().to(torch::kCPU).clone() : t.detach();
  }
  return out;
}

template <typename State>
absl::Status ImportFields(const ParamOptimizerState& saved,
                          const torch::Tensor& param, const Fields<State>& fields,
                          State& state) {
  size_t used = 0;
  for (const auto& f : fields) {
    auto it = saved.tensors.find(f.name);
    if (it == saved.tensors.end()) continue;
    ++used;
    (state.*f.set)(it->second.to(param.device()));
  }
  if (used != saved.tensors.size()) {
    return absl::InvalidArgumentError(
        "the checkpoint's optimizer state has fields this optimizer does not "
        "know (was it saved with another optimizer.type?)");
  }
  return absl::OkStatus();
}

const Fields<optim::SGDParamState>& SgdFields() {
  static const Fields<optim::SGDParamState> f = {
      {"momentum_buffer", &optim::SGDParamState::momentum_buffer,
       &optim::SGDParamState::momentum_buffer}};
  return f;
}
template <typename S>
Fields<S> AdamLikeFields() {
  return {{"exp_avg", &S::exp_avg, &S::exp_avg},
          {"exp_avg_sq", &S::exp_avg_sq, &S::exp_avg_sq},
          {"max_exp_avg_sq", &S::max_exp_avg_sq, &S::max_exp_avg_sq}};
}
const Fields<AdafactorParamState>& AdafactorFields() {
  using S = AdafactorParamState;
  static const Fields<S> f = {{"row", &S::row, &S::row},
                              {"col", &S::col, &S::col},
                              {"exp_avg_sq", &S::exp_avg_sq, &S::exp_avg_sq},
                              {"exp_avg", &S::exp_avg, &S::exp_avg}};
  return f;
}
const Fields<Adam8bitParamState>& Adam8bitFields() {
  using S = Adam8bitParamState;
  static const Fields<S> f = {
      {"exp_avg_code", &S::exp_avg_code, &S::exp_avg_code},
      {"exp_avg_absmax", &S::exp_avg_absmax, &S::exp_avg_absmax},
      {"exp_avg_sq_code", &S::exp_avg_sq_code, &S::exp_avg_sq_code},
      {"exp_avg_sq_absmax", &S::exp_avg_sq_absmax, &S::exp_avg_sq_absmax},
      {"exp_avg", &S::exp_avg, &S::exp_avg},
      {"exp_avg_sq", &S::exp_avg_sq, &S::exp_avg_sq},
      // Before the published maps: read, then converted at the first step.
      {"exp_avg_codes", &S::exp_avg_codes, &S::exp_avg_codes},
      {"exp_avg_scales", &S::exp_avg_scales, &S::exp_avg_scales},
      {"exp_avg_sq_codes", &S::exp_avg_sq_codes, &S::exp_avg_sq_codes},
      {"exp_avg_sq_scales", &S::exp_avg_sq_scales, &S::exp_avg_sq_scales}};
  return f;
}

// Exports one state of type S when `base` is one.
template <typename S>
bool TryExport(const optim::OptimizerParamState* base, const Fields<S>& fields,
               bool copy, ParamOptimizerState* out) {
  const auto* s = dynamic_cast<const S*>(base);
  if (s == nullptr) return false;
  *out = ExportFields(*s, fields, s->step(), copy);
  return true;
}

// SGD's state has no step counter; the others do.
template <typename S, typename = void>
struct HasStep : std::false_type {};
template <typename S>
struct HasStep<S, std::void_t<decltype(std::declval<S&>().step(int64_t{}))>>
    : std::true_type {};

template <typename S>
absl::Status ImportAs(optim::Optimizer& optimizer, const torch::Tensor& param,
                      const ParamOptimizerState& saved, const Fields<S>& fields) {
  auto state = std::make_unique<S>();
  if constexpr (HasStep<S>::value) state->step(saved.step);
  absl::Status s = ImportFields(saved, param, fields, *state);
  if (!s.ok()) return s;
  optimizer.state()[StateKey(param)] = std::move(state);
  return absl::OkStatus();
}

}  // namespace

std::vector<ParamOptimizerState> ExportOptimizerState(
    optim::Optimizer& optimizer, const std::vector<torch::Tensor>& params, bool copy) {
  std::vector<ParamOptimizerState> out(params.size());
  static const auto adam = AdamLikeFields<optim::AdamParamState>();
  static const auto adamw = AdamLikeFields<optim::AdamWParamState>();
  for (size_t i = 0; i < params.size(); ++i) {
    auto it = optimizer.state().find(StateKey(params[i]));
    if (it == optimizer.state().end()) continue;
    const optim::OptimizerParamState* base = it->second.get();
    // SGD's state has no step counter; its export uses step 0.
    if (const auto* sgd = dynamic_cast<const optim::SGDParamState*>(base)) {
      out[i] = ExportFields(*sgd, SgdFields(), 0, copy);
      continue;
    }
    TryExport(base, adam, copy, &out[i]) || TryExport(base, adamw, copy, &out[i]) ||
        TryExport(base, AdafactorFields(), copy, &out[i]) ||
        TryExport(base, Adam8bitFields(), copy, &out[i]);
  }
  return out;
}

absl::Status ImportOptimizerState(optim::Optimizer& optimizer,
                                  const std::vector<torch::Tensor>& params,
                                  const std::vector<ParamOptimizerState>& saved) {
  if (saved.size() != params.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint has optimizer state for ", saved.size(),
        " parameters; this model has ", params.size()));
  }
  optimizer.state().clear();
  for (size_t i = 0; i < params.size(); ++i) {
    if (!saved[i].present) continue;
    const torch::Tensor& p = params[i];
    absl::Status s;
    if (dynamic_cast<optim::SGD*>(&optimizer)) {
      s = ImportAs(optimizer, p, saved[i], SgdFields());
    } else if (dynamic_cast<optim::AdamW*>(&optimizer)) {
      s = ImportAs(optimizer, p, saved[i], AdamLikeFields<optim::AdamWParamState>());
    } else if (dynamic_cast<optim::Adam*>(&optimizer)) {
      s = ImportAs(optimizer, p, saved[i], AdamLikeFields<optim::AdamParamState>());
    } else if (dynamic_cast<Adafactor*>(&optimizer)) {
      s = ImportAs(optimizer, p, saved[i], AdafactorFields());
    } else if (dynamic_cast<Adam8bit*>(&optimizer)) {
      s = ImportAs(optimizer, p, saved[i], Adam8bitFields());
    } else {
      return absl::UnimplementedError("this optimizer's state cannot be loaded");
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace trainctl::train
