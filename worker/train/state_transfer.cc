#include "worker/train/state_transfer.h"

#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "worker/train/collective_wait.h"
#include "worker/train/optim/optimizer_state.h"

namespace trainctl::train {
namespace {

constexpr int64_t kTransferVersion = 1;

// Point-to-point tags: the header's length, the header, the taker's answer,
// then one per tensor in the header's order.
constexpr int kLengthTag = 1;
constexpr int kHeaderTag = 2;
constexpr int kAnswerTag = 3;
constexpr int kFirstTensorTag = 16;

constexpr char kModelPrefix[] = "model/";
constexpr char kOptimizerPrefix[] = "opt/";

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

void Send(CollectiveGroup& group, const torch::Tensor& t, int to, int tag,
          std::vector<WorkPtr>& works) {
  std::vector<torch::Tensor> one{t};
  works.push_back(group.send(one, to, tag));
}

void Receive(CollectiveGroup& group, const torch::Tensor& into, int from, int tag,
             std::vector<WorkPtr>& works) {
  std::vector<torch::Tensor> one{into};
  works.push_back(group.recv(one, from, tag));
}

// One tensor of the state, in the order they travel.
struct Piece {
  std::string key;  // "model/<name>" or "opt/<parameter index>/<field>"
  torch::Tensor tensor;
};

// The sender's live tensors (no copies, except of a tensor that is not
// contiguous) and each parameter's optimizer step (-1: no state yet).
std::vector<Piece> LivePieces(const TrainingStateRefs& refs, std::vector<int64_t>& steps) {
  std::vector<Piece> pieces;
  for (auto& [name, tensor] : refs.model->NamedState()) {
    pieces.push_back({kModelPrefix + name, tensor.detach().contiguous()});
  }
  const std::vector<ParamOptimizerState> optimizer =
      ExportOptimizerState(*refs.optimizer, refs.params, /*copy=*/false);
  for (size_t i = 0; i < optimizer.size(); ++i) {
    steps.push_back(optimizer[i].present ? optimizer[i].step : -1);
    for (const auto& [field, tensor] : optimizer[i].tensors) {
      pieces.push_back({absl::StrCat(kOptimizerPrefix, i, "/", field), tensor.contiguous()});
    }
  }
  return pieces;
}

// Numbers travel as tensors in the archive: one form in both LibTorch
// generations.
torch::Tensor Int64s(const std::vector<int64_t>& values) {
  return torch::tensor(values, torch::kInt64);
}
std::vector<int64_t> Int64s(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::Tensor t;
  archive.read(key, t);
  t = t.contiguous();
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

std::string EncodeHeader(const std::vector<Piece>& pieces, const std::vector<int64_t>& steps,
                         const TrainingSnapshot& rest) {
  torch::serialize::OutputArchive archive;
  archive.write("transfer_version", c10::IValue(kTransferVersion));
  WriteCursor(archive, rest.cursor);
  std::vector<std::string> keys;
  std::vector<int64_t> shapes;  // per tensor: its dimension count, then its sizes
  std::vector<int64_t> dtypes;
  for (const Piece& p : pieces) {
    keys.push_back(p.key);
    shapes.push_back(p.tensor.dim());
    for (int64_t size : p.tensor.sizes()) shapes.push_back(size);
    dtypes.push_back(static_cast<int64_t>(p.tensor.scalar_type()));
  }
  archive.write("keys", c10::IValue(absl::StrJoin(keys, "\n")));
  archive.write("shapes", Int64s(shapes));
  archive.write("dtypes", Int64s(dtypes));
  archive.write("optimizer_steps", Int64s(steps));
  WriteScalerAndGenerators(archive, rest);
  std::string bytes;
  archive.save_to([&bytes](const void* data, size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  return bytes;
}

// What the header announces, and where each tensor goes on this rank.
struct Plan {
  TrainingCursor cursor;
  std::vector<torch::Tensor> into;  // in the header's order
  // Every model tensor is received into a stand-in and copied in only once
  // all have arrived: a source lost halfway leaves this rank's model as it
  // was (it may be the furthest survivor at the next try), and an
  // abandoned receive stays posted into memory nobody uses.
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copy_in;  // {live, stand-in}
  std::vector<ParamOptimizerState> optimizer;
};

std::string Describe(const std::string& key, at::IntArrayRef sizes, c10::ScalarType type) {
  return absl::StrCat(key, " ", c10::str(sizes), " ", c10::toString(type));
}

absl::StatusOr<Plan> PlanReceive(torch::serialize::InputArchive& archive, int source,
                                 const TrainingStateRefs& refs) {
  c10::IValue version;
  if (!archive.try_read("transfer_version", version) || !version.isInt() ||
      version.toInt() != kTransferVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", source, " sends its state in a form this worker does not read "
        "(are the workers of one trainctl version?)"));
  }
  Plan plan;
  plan.cursor = ReadCursor(archive);
  c10::IValue keys_value;
  archive.read("keys", keys_value);
  const std::vector<std::string> keys =
      absl::StrSplit(keys_value.toStringRef(), '\n', absl::SkipEmpty());
  const std::vector<int64_t> shapes = Int64s(archive, "shapes");
  const std::vector<int64_t> dtypes = Int64s(archive, "dtypes");
  const std::vector<int64_t> steps = Int64s(archive, "optimizer_steps");
  if (dtypes.size() != keys.size() || steps.size() != refs.params.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", source, "'s state has optimizer state for ", steps.size(),
        " parameters; this rank's model has ", refs.params.size()));
  }
  plan.optimizer.resize(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    plan.optimizer[i].present = steps[i] >= 0;
    plan.optimizer[i].step = steps[i];
  }
  auto mine = refs.model->NamedState();
  size_t model_tensors = 0;
  size_t at = 0;  // in `shapes`
  for (size_t k = 0; k < keys.size(); ++k) {
    const int64_t dim = shapes.at(at);
    const std::vector<int64_t> sizes(shapes.begin() + at + 1, shapes.begin() + at + 1 + dim);
    at += 1 + dim;
    const auto type = static_cast<c10::ScalarType>(dtypes[k]);
    const std::string& key = keys[k];
    if (absl::StartsWith(key, kModelPrefix)) {
      const size_t i = model_tensors++;
      const std::string name = key.substr(sizeof(kModelPrefix) - 1);
      if (i >= mine.size() || mine[i].first != name || !mine[i].second.sizes().equals(sizes) ||
          mine[i].second.scalar_type() != type) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rank ", source, "'s model tensor ", i, " is ", Describe(name, sizes, type),
            "; this rank's is ",
            i < mine.size() ? Describe(mine[i].first, mine[i].second.sizes(),
                                       mine[i].second.scalar_type())
                            : "missing",
            " (is its model built from another spec?)"));
      }
      torch::Tensor live = mine[i].second.detach();
      plan.into.push_back(torch::empty_like(live, at::MemoryFormat::Contiguous));
      plan.copy_in.emplace_back(live, plan.into.back());
      continue;
    }
    // "opt/<parameter index>/<field>"
    const std::vector<std::string> parts = absl::StrSplit(key, '/');
    size_t param = 0;
    if (parts.size() != 3 || !absl::SimpleAtoi(parts[1], &param) ||
        param >= plan.optimizer.size() || !plan.optimizer[param].present) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", source, "'s state has a tensor this rank cannot place: ", key));
    }
    torch::Tensor t = torch::empty(sizes, torch::dtype(type).device(refs.params[param].device()));
    plan.optimizer[param].tensors[parts[2]] = t;
    plan.into.push_back(t);
  }
  if (model_tensors != mine.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", source, "'s model has ", model_tensors, " tensors; this rank's has ",
        mine.size(), " (is its model built from another spec?)"));
  }
  return plan;
}

absl::Status LostPeer(const char* what, int peer, const std::exception& e) {
  return absl::UnavailableError(absl::StrCat(what, " rank ", peer, ": ", e.what()));
}

}  // namespace

absl::Status SendTrainingState(CollectiveGroup& group, const std::vector<int>& takers,
                               const TrainingStateRefs& refs, const TrainingCursor& cursor,
                               StateTransferStats* stats) {
  torch::NoGradGuard no_grad;
  auto mark = Clock::now();
  const torch::Device device = ParamDevice(refs);
  std::vector<int64_t> steps;
  const std::vector<Piece> pieces = LivePieces(refs, steps);
  TrainingSnapshot rest;
  rest.cursor = cursor;
  TakeScalerAndGenerators(refs, rest);
  const std::string header = EncodeHeader(pieces, steps, rest);
  stats->bytes = 0;
  for (const Piece& p : pieces) stats->bytes += static_cast<int64_t>(p.tensor.nbytes());
  stats->prepare_ms = MsSince(mark);
  mark = Clock::now();

  const torch::Tensor length =
      torch::full({1}, static_cast<int64_t>(header.size()), torch::dtype(torch::kInt64))
          .to(device);
  torch::Tensor header_bytes = torch::empty({static_cast<int64_t>(header.size())}, torch::kUInt8);
  std::memcpy(header_bytes.data_ptr(), header.data(), header.size());
  header_bytes = header_bytes.to(device);
  std::vector<torch::Tensor> answers;
  std::vector<WorkPtr> works;
  int peer = -1;
  try {
    for (int taker : takers) {
      peer = taker;
      Send(group, length, taker, kLengthTag, works);
      Send(group, header_bytes, taker, kHeaderTag, works);
      answers.push_back(torch::zeros({1}, torch::dtype(torch::kInt64).device(device)));
      Receive(group, answers.back(), taker, kAnswerTag, works);
    }
    WaitForPointToPoint(works);
    for (size_t t = 0; t < takers.size(); ++t) {
      peer = takers[t];
      if (answers[t].item<int64_t>() != 1) {
        stats->refused.push_back(takers[t]);
        continue;
      }
      for (size_t k = 0; k < pieces.size(); ++k) {
        Send(group, pieces[k].tensor, takers[t], kFirstTensorTag + static_cast<int>(k), works);
      }
    }
    WaitForPointToPoint(works);
  } catch (const std::exception& e) {
    return LostPeer("sending the training state to", peer, e);
  }
  stats->move_ms = MsSince(mark);
  return absl::OkStatus();
}

absl::StatusOr<TrainingCursor> ReceiveTrainingState(CollectiveGroup& group, int source,
                                                    const TrainingStateRefs& refs,
                                                    StateTransferStats* stats) {
  torch::NoGradGuard no_grad;
  auto mark = Clock::now();
  const torch::Device device = ParamDevice(refs);
  std::vector<WorkPtr> works;
  torch::serialize::InputArchive archive;
  absl::StatusOr<Plan> plan;
  try {
    torch::Tensor length = torch::zeros({1}, torch::dtype(torch::kInt64).device(device));
    Receive(group, length, source, kLengthTag, works);
    WaitForPointToPoint(works);
    torch::Tensor header =
        torch::empty({length.item<int64_t>()}, torch::dtype(torch::kUInt8).device(device));
    Receive(group, header, source, kHeaderTag, works);
    WaitForPointToPoint(works);
    header = header.cpu();
    try {
      archive.load_from(static_cast<const char*>(header.data_ptr()),
                        static_cast<size_t>(header.numel()));
      plan = PlanReceive(archive, source, refs);
    } catch (const std::exception& e) {
      plan = absl::DataLossError(
          absl::StrCat("rank ", source, "'s state header is unreadable: ", e.what()));
    }
    const torch::Tensor answer =
        torch::full({1}, plan.ok() ? int64_t{1} : int64_t{0}, torch::dtype(torch::kInt64))
            .to(device);
    Send(group, answer, source, kAnswerTag, works);
    WaitForPointToPoint(works);
    if (!plan.ok()) return plan.status();
    for (size_t k = 0; k < plan->into.size(); ++k) {
      Receive(group, plan->into[k], source, kFirstTensorTag + static_cast<int>(k), works);
    }
    WaitForPointToPoint(works);
  } catch (const std::exception& e) {
    return LostPeer("receiving the training state from", source, e);
  }
  for (const torch::Tensor& t : plan->into) stats->bytes += static_cast<int64_t>(t.nbytes());
  stats->move_ms = MsSince(mark);
  mark = Clock::now();
  // All of it arrived: only now does this rank's state change.
  for (auto& [live, stand_in] : plan->copy_in) live.copy_(stand_in);
  absl::Status imported = ImportOptimizerState(*refs.optimizer, refs.params, plan->optimizer);
  if (!imported.ok()) return imported;
  try {
    RestoreScalerAndGenerators(archive, refs);
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat("rank ", source, "'s state header: ", e.what()));
  }
  stats->load_ms = MsSince(mark);
  return plan->cursor;
}

}  // namespace trainctl::train
