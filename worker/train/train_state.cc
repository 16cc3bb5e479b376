#include "worker/train/train_state.h"

#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/shard_plan.h"
#include "common/status_macros.h"
#include "worker/train/device.h"
#include "worker/train/optim/optimizer_state.h"

namespace trainctl::train {
namespace {

constexpr int64_t kFormatVersion = 1;

// Archive keys may not contain '.', which parameter names do; tensors are
// stored by index and the names once, joined, to check the match on load.
std::string ModelKey(size_t i) { return absl::StrCat("model_", i); }

int64_t ReadInt(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue value;
  archive.read(key, value);
  return value.toInt();
}

}  // namespace

TrainingSnapshot SnapshotTrainingState(const TrainingStateRefs& refs,
                                       const TrainingCursor& cursor, bool copy) {
  torch::NoGradGuard no_grad;
  TrainingSnapshot snapshot;
  snapshot.cursor = cursor;
  for (auto& [name, tensor] : refs.model->NamedState()) {
    // to(kCPU) of a host tensor shares its storage.
    torch::Tensor host = tensor.detach().to(torch::kCPU);
    if (copy && tensor.is_cpu()) host = host.clone();
    snapshot.model.emplace_back(name, std::move(host));
  }
  snapshot.optimizer = ExportOptimizerState(*refs.optimizer, refs.params);
  TakeScalerAndGenerators(refs, snapshot);
  return snapshot;
}

void TakeScalerAndGenerators(const TrainingStateRefs& refs, TrainingSnapshot& snapshot) {
  if (refs.scaler != nullptr) snapshot.scaler = refs.scaler->Save();
  snapshot.rng_cpu = GeneratorState(torch::kCPU);
  // On a GPU dropout draws from the device's generator.
  const torch::Device device = ParamDevice(refs);
  if (!device.is_cpu()) snapshot.rng_device = GeneratorState(device);
}

torch::Device ParamDevice(const TrainingStateRefs& refs) {
  return refs.params.empty() ? torch::Device(torch::kCPU) : refs.params.front().device();
}

void WriteCursor(torch::serialize::OutputArchive& archive, const TrainingCursor& cursor) {
  archive.write("step", c10::IValue(cursor.step));
  archive.write("epoch", c10::IValue(int64_t{cursor.epoch}));
  archive.write("samples_in_epoch", c10::IValue(cursor.samples_in_epoch));
  archive.write("global_batch", c10::IValue(cursor.global_batch));
  archive.write("train_samples", c10::IValue(cursor.train_samples));
  archive.write("world_size", c10::IValue(int64_t{cursor.world_size}));
  archive.write("epoch_order", c10::IValue(int64_t{cursor.epoch_order}));
}

TrainingCursor ReadCursor(torch::serialize::InputArchive& archive) {
  TrainingCursor cursor;
  cursor.step = ReadInt(archive, "step");
  cursor.epoch = static_cast<int>(ReadInt(archive, "epoch"));
  cursor.samples_in_epoch = ReadInt(archive, "samples_in_epoch");
  cursor.global_batch = ReadInt(archive, "global_batch");
  cursor.train_samples = ReadInt(archive, "train_samples");
  cursor.world_size = static_cast<int>(ReadInt(archive, "world_size"));
  c10::IValue order;
  cursor.epoch_order = archive.try_read("epoch_order", order) && order.isInt()
                           ? static_cast<int>(order.toInt())
                           : 1;
  return cursor;
}

void WriteScalerAndGenerators(torch::serialize::OutputArchive& archive,
                              const TrainingSnapshot& snapshot) {
  if (snapshot.scaler) {
    archive.write("scaler_scale", c10::IValue(snapshot.scaler->scale));
    archive.write("scaler_good_steps", c10::IValue(int64_t{snapshot.scaler->good_steps}));
    archive.write("scaler_skipped", c10::IValue(snapshot.scaler->skipped));
  }
  archive.write("rng_cpu", snapshot.rng_cpu);
  if (snapshot.rng_device.defined()) archive.write("rng_device", snapshot.rng_device);
}

void RestoreScalerAndGenerators(torch::serialize::InputArchive& archive,
                                const TrainingStateRefs& refs) {
  if (refs.scaler != nullptr) {
    c10::IValue scale;
    if (archive.try_read("scaler_scale", scale)) {
      refs.scaler->Restore({scale.toDouble(),
                            static_cast<int>(ReadInt(archive, "scaler_good_steps")),
                            ReadInt(archive, "scaler_skipped")});
    }
  }
  torch::Tensor rng;
  if (archive.try_read("rng_cpu", rng)) SetGeneratorState(torch::kCPU, rng);
  // A checkpoint written on a GPU resumed on the CPU (or the other way)
  // keeps the CPU's stream and starts the device's afresh.
  const torch::Device device = ParamDevice(refs);
  torch::Tensor device_rng;
  if (!device.is_cpu() && archive.try_read("rng_device", device_rng)) {
    SetGeneratorState(device, device_rng);
  }
}

namespace {

void SerializeOrThrow(const TrainingSnapshot& snapshot,
                      const std::function<size_t(const void*, size_t)>& writer) {
  torch::NoGradGuard no_grad;
  torch::serialize::OutputArchive archive;
  archive.write("format_version", c10::IValue(kFormatVersion));
  WriteCursor(archive, snapshot.cursor);

  std::vector<std::string> names;
  for (size_t i = 0; i < snapshot.model.size(); ++i) {
    names.push_back(snapshot.model[i].first);
    archive.write(ModelKey(i), snapshot.model[i].second);
  }
  archive.write("model_names", c10::IValue(absl::StrJoin(names, "\n")));

  const std::vector<ParamOptimizerState>& optimizer = snapshot.optimizer;
  archive.write("optimizer_params", c10::IValue(int64_t(optimizer.size())));
  for (size_t i = 0; i < optimizer.size(); ++i) {
    const ParamOptimizerState& p = optimizer[i];
    if (!p.present) continue;
    std::vector<std::string> fields;
    for (const auto& [name, tensor] : p.tensors) {
      fields.push_back(name);
      archive.write(absl::StrCat("opt_", i, "_", name), tensor);
    }
    archive.write(absl::StrCat("opt_", i, "_step"), c10::IValue(p.step));
    archive.write(absl::StrCat("opt_", i, "_fields"),
                  c10::IValue(absl::StrJoin(fields, ",")));
  }
  WriteScalerAndGenerators(archive, snapshot);
  archive.save_to(writer);
}

}  // namespace

absl::Status SerializeTrainingSnapshot(const TrainingSnapshot& snapshot,
                                       const ByteSink& sink) {
  absl::Status sunk;
  try {
    // After an error the rest is dropped, not refused: a short count makes
    // torch's writer throw from its destructor, which terminates.
    SerializeOrThrow(snapshot, [&](const void* data, size_t size) -> size_t {
      if (sunk.ok()) sunk = sink(data, size);
      return size;
    });
  } catch (const std::exception& e) {
    if (!sunk.ok()) return sunk;
    return absl::InternalError(absl::StrCat("serializing the state: ", e.what()));
  }
  return sunk;
}

absl::StatusOr<std::string> SerializeTrainingSnapshot(
    const TrainingSnapshot& snapshot) {
  std::string bytes;
  absl::Status done =
      SerializeTrainingSnapshot(snapshot, [&bytes](const void* data, size_t size) {
        bytes.append(static_cast<const char*>(data), size);
        return absl::OkStatus();
      });
  if (!done.ok()) return done;
  return bytes;
}

absl::StatusOr<std::string> EncodeTrainingState(const TrainingStateRefs& refs,
                                                const TrainingCursor& cursor) {
  return SerializeTrainingSnapshot(
      SnapshotTrainingState(refs, cursor, /*copy=*/false));
}

namespace {

// Opens the archive and reads its cursor; DATA_LOSS when the bytes are not
// a checkpoint of a known version.
absl::StatusOr<TrainingCursor> OpenCheckpoint(
    const std::string& bytes, torch::serialize::InputArchive& archive) {
  try {
    archive.load_from(bytes.data(), bytes.size());
  } catch (const std::exception& e) {
    return absl::DataLossError(
        absl::StrCat("not a readable checkpoint: ", e.what()));
  }
  c10::IValue version;
  if (!archive.try_read("format_version", version) || !version.isInt() ||
      version.toInt() != kFormatVersion) {
    return absl::DataLossError("not a trainctl checkpoint of a known version");
  }
  return ReadCursor(archive);
}

std::vector<std::string> ModelNames(torch::serialize::InputArchive& archive) {
  c10::IValue names_value;
  archive.read("model_names", names_value);
  return absl::StrSplit(names_value.toStringRef(), '\n', absl::SkipEmpty());
}

absl::StatusOr<TrainingCursor> DecodeOrThrow(const std::string& bytes,
                                             const TrainingStateRefs& refs) {
  torch::serialize::InputArchive archive;
  absl::StatusOr<TrainingCursor> opened = OpenCheckpoint(bytes, archive);
  if (!opened.ok()) return opened.status();
  const TrainingCursor cursor = *opened;

  torch::NoGradGuard no_grad;
  const std::vector<std::string> names = ModelNames(archive);
  auto state = refs.model->NamedState();
  if (names.size() != state.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint holds ", names.size(), " model tensors; this model has ",
        state.size(), " (was it saved from another model?)"));
  }
  for (size_t i = 0; i < state.size(); ++i) {
    auto& [name, tensor] = state[i];
    torch::Tensor saved;
    archive.read(ModelKey(i), saved);
    if (names[i] != name || !saved.sizes().equals(tensor.sizes())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint's model tensor ", i, " is ", names[i], " ",
          c10::str(saved.sizes()), "; this model has ", name, " ",
          c10::str(tensor.sizes())));
    }
    tensor.copy_(saved);
  }

  const int64_t count = ReadInt(archive, "optimizer_params");
  std::vector<ParamOptimizerState> optimizer(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    c10::IValue fields;
    if (!archive.try_read(absl::StrCat("opt_", i, "_fields"), fields)) continue;
    ParamOptimizerState& p = optimizer[static_cast<size_t>(i)];
    p.present = true;
    p.step = ReadInt(archive, absl::StrCat("opt_", i, "_step"));
    for (absl::string_view field :
         absl::StrSplit(fields.toStringRef(), ',', absl::SkipEmpty())) {
      torch::Tensor t;
      archive.read(absl::StrCat("opt_", i, "_", field), t);
      p.tensors[std::string(field)] = t;
    }
  }
  absl::Status imported =
      ImportOptimizerState(*refs.optimizer, refs.params, optimizer);
  if (!imported.ok()) return imported;

  RestoreScalerAndGenerators(archive, refs);
  return cursor;
}

}  // namespace

absl::StatusOr<TrainingCursor> DecodeTrainingState(
    const std::string& bytes, const TrainingStateRefs& refs) {
  try {
    return DecodeOrThrow(bytes, refs);
  } catch (const std::exception& e) {
    return absl::DataLossError(
        absl::StrCat("the checkpoint is incomplete or damaged: ", e.what()));
  }
}

absl::StatusOr<CheckpointModel> DecodeCheckpointModel(const std::string& bytes) {
  try {
    torch::serialize::InputArchive archive;
    CheckpointModel out;
    ASSIGN_OR_RETURN(out.cursor, OpenCheckpoint(bytes, archive));
    const std::vector<std::string> names = ModelNames(archive);
    for (size_t i = 0; i < names.size(); ++i) {
      torch::Tensor saved;
      archive.read(ModelKey(i), saved);
      out.tensors.emplace_back(names[i], std::move(saved));
    }
    return out;
  } catch (const std::exception& e) {
    return absl::DataLossError(
        absl::StrCat("the checkpoint is incomplete or damaged: ", e.what()));
  }
}

}  // namespace trainctl::train
