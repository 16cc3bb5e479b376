#include "worker/train/checkpointer.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/atomic_file.h"
#include "common/checkpoint_name.h"
#include "worker/train/grad_sync.h"

namespace trainctl::train {
namespace {

// Checkpoints hold the model's weights: readable by the worker's user and
// its group (where an operator puts who may read them), never by others.
constexpr unsigned kCheckpointDirMode = 0750;
constexpr unsigned kCheckpointFileMode = 0640;

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Checkpointer::Checkpointer(const v1::JobSpec& spec, const RankContext& ctx,
                           TrainingStateRefs refs)
    : spec_(spec), ctx_(ctx), refs_(std::move(refs)) {
  if (!spec.checkpoint().dir().empty()) {
    dir_ = absl::StrCat(spec.checkpoint().dir(), "/", ctx.job_id);
  }
}

absl::Status Checkpointer::PrepareDir() {
  if (ctx_.rank != 0 || dir_.empty() || dir_ready_) return absl::OkStatus();
  // Model weights: the worker's user and its group, nobody else.
  absl::Status made = MakeDirs(dir_, kCheckpointDirMode);
  if (made.ok()) {
    // Creating the directory can succeed where writing in it does not.
    made = WriteFileAtomically(dir_ + "/.write-test", "");
    ::unlink((dir_ + "/.write-test").c_str());
  }
  if (!made.ok()) {
    return absl::Status(made.code(),
                        absl::StrCat("checkpoint.dir: ", made.message()));
  }
  RemoveStaleTemporaries(dir_);
  dir_ready_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<TrainingCursor>> Checkpointer::Resume(
    int64_t global_batch, int64_t train_samples) {
  if (absl::Status ready = PrepareDir(); !ready.ok()) return ready;
  if (ctx_.resume_path.empty()) return std::nullopt;
  absl::StatusOr<std::string> mine = std::string();
  if (ctx_.rank == 0) mine = ReadWholeFile(ctx_.resume_path);
  absl::StatusOr<std::string> bytes = BroadcastBytes(ctx_.group, ctx_.rank, ctx_.device, mine);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(),
                        absl::StrCat("resume from ", ctx_.resume_path, ": ",
                                     bytes.status().message()));
  }
  absl::StatusOr<TrainingCursor> cursor = DecodeTrainingState(*bytes, refs_);
  if (!cursor.ok()) {
    return absl::Status(cursor.status().code(),
                        absl::StrCat("resume from ", ctx_.resume_path, ": ",
                                     cursor.status().message()));
  }
  if (cursor->global_batch != global_batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resume from ", ctx_.resume_path, ": it was trained with ",
        cursor->global_batch,
        " samples per optimizer step; training.batch_size x grad_accum_steps "
        "is ",
        global_batch, " here (keep them equal to resume)"));
  }
  if (cursor->train_samples != train_samples) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resume from ", ctx_.resume_path, ": it was trained on ",
        cursor->train_samples, " samples; the training set here has ",
        train_samples));
  }
  return *cursor;
}

bool Checkpointer::Due(int64_t steps_done, bool epoch_end) const {
  if (dir_.empty()) return false;
  const int64_t every = spec_.checkpoint().every_steps();
  return epoch_end || (every > 0 && steps_done % every == 0);
}

absl::Status Checkpointer::Save(const TrainingCursor& cursor,
                                const std::map<std::string, double>& eval) {
  if (ctx_.rank != 0 || dir_.empty()) return absl::OkStatus();
  const auto start = std::chrono::steady_clock::now();
  const bool async = spec_.checkpoint().async();
  // One write at a time: the previous one's copy is then freed.
  absl::Status previous = Finish();
  if (absl::Status ready = PrepareDir(); !ready.ok()) return ready;
  const std::string path =
      absl::StrCat(dir_, "/", CheckpointFileName(cursor.step, ctx_.generation));
  const bool die_halfway = ctx_.faults.Fires("crash_in_checkpoint", ctx_.rank,
                                             ctx_.generation, cursor.step);
  v1::Checkpoint record;
  record.set_job_id(ctx_.job_id);
  record.set_step(cursor.step);
  record.set_epoch(cursor.epoch);
  record.set_samples_in_epoch(cursor.samples_in_epoch);
  record.set_path(path);
  record.set_world_size(ctx_.world_size);
  record.set_generation(ctx_.generation);
  for (const auto& [name, value] : eval) (*record.mutable_metrics())[name] = value;
  auto blocked_ms = [&start] {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now() - start)
        .count();
  };
  if (!async) {
    Written written = Write(SnapshotTrainingState(refs_, cursor, /*copy=*/false),
                            path, die_halfway, std::move(record));
    written.record.set_blocked_ms(blocked_ms());
    return Report(std::move(written));
  }
  auto snapshot = std::make_shared<TrainingSnapshot>(
      SnapshotTrainingState(refs_, cursor, /*copy=*/true));
  record.set_blocked_ms(blocked_ms());
  pending_ = std::async(std::launch::async,
                        [snapshot, path, die_halfway, record = std::move(record)] {
                          return Write(*snapshot, path, die_halfway, record);
                        });
  return previous;
}

Checkpointer::Written Checkpointer::Write(const TrainingSnapshot& snapshot,
                                          std::string path, bool die_halfway,
                                          v1::Checkpoint record) {
  const auto start = std::chrono::steady_clock::now();
  Written out;
  AtomicWriteOptions write;
  write.mode = kCheckpointFileMode;
  if (die_halfway) {
    write.halfway = [] {
      std::fprintf(stderr, "fault hook: dying halfway through a checkpoint\n");
      _exit(4);
    };
  }
  // Serialized straight into the file: never a second copy in memory.
  int64_t bytes = 0;
  absl::Status written = WriteFileAtomicallyStreamed(
      path,
      [&](const ByteSink& file) {
        return SerializeTrainingSnapshot(snapshot, [&](const void* data, size_t size) {
          bytes += static_cast<int64_t>(size);
          return file(data, size);
        });
      },
      write);
  if (!written.ok()) {
    out.status = absl::Status(
        written.code(), absl::StrCat("checkpoint of step ", snapshot.cursor.step,
                                     " not written: ", written.message()));
    return out;
  }
  record.set_bytes(bytes);
  record.set_created_unix_ms(NowUnixMs());
  record.set_write_ms(std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count());
  out.record = std::move(record);
  return out;
}

absl::Status Checkpointer::Report(Written written) {
  if (!written.status.ok()) return written.status;
  ++written_;
  if (ctx_.on_checkpoint) ctx_.on_checkpoint(written.record);
  return absl::OkStatus();
}

absl::Status Checkpointer::Poll() {
  if (!pending_.valid() ||
      pending_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    return absl::OkStatus();
  }
  return Report(pending_.get());
}

absl::Status Checkpointer::Finish() {
  if (!pending_.valid()) return absl::OkStatus();
  return Report(pending_.get());
}

}  // namespace trainctl::train
