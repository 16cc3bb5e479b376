// JobCore's dry run: validates a spec and says what the coordinator
// would do with it now (where it would run or why it would wait, and the
// shard plan), without creating, queueing or reserving anything. It opens
// no data file: the sample counts come from a worker (dry_run_data.h).

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/memory_plan.h"
#include "common/shard_plan.h"
#include "common/spec.h"
#include "coordinator/core/job_core.h"
#include "coordinator/dry_run_data.h"
#include "coordinator/scheduler.h"

namespace trainctl::coordinator {
namespace {

// A job id no real job has, for the scheduler's answer about this one.
constexpr char kDryRunId[] = "(dry run)";

constexpr char kStepsUnknown[] = "total steps unknown: ";

}  // namespace

int64_t TotalStepsFromSamples(const v1::JobSpec& spec, int64_t train_samples) {
  const v1::TrainingSpec& t = spec.training();
  const int64_t per_step =
      t.batch_size() * std::max<int64_t>(1, t.grad_accum_steps());
  if (per_step <= 0) return 0;
  int64_t total = (train_samples / per_step) * t.epochs();
  if (t.max_steps() > 0) total = std::min(total, t.max_steps());
  return total;
}

void ApplyDataProbeResult(const v1::ProbeDataResult& result,
                          v1::SubmitJobResponse* dry_run) {
  v1::DryRunPlan& plan = *dry_run->mutable_plan();
  v1::Job& job = *dry_run->mutable_job();
  if (!result.error().empty()) {
    plan.set_train_samples(0);
    plan.set_steps_per_epoch(0);
    plan.set_dropped_per_epoch(0);
    plan.set_data_note(
        absl::StrCat("training samples unknown: ", result.error()));
    job.set_total_steps(0);
    job.set_reason(absl::StrCat(kStepsUnknown, result.error()));
    return;
  }
  const int64_t samples = std::max<int64_t>(0, result.train_samples());
  plan.set_train_samples(samples);
  plan.set_steps_per_epoch(StepsPerEpoch(samples, plan.samples_per_step()));
  plan.set_dropped_per_epoch(samples -
                             plan.steps_per_epoch() * plan.samples_per_step());
  plan.clear_data_note();
  job.set_total_steps(TotalStepsFromSamples(job.spec(), samples));
  // The data's sizes complete the memory plan (the spec's own win).
  PlanData data;
  data.input_shape.assign(result.input_shape().begin(),
                          result.input_shape().end());
  data.num_classes = result.num_classes();
  data.vocab_size = result.vocab_size();
  v1::MemoryPlan memory =
      PlanRankMemory(job.spec(), data, plan.per_rank_batch());
  memory.set_available_bytes(plan.memory().available_bytes());
  memory.set_available_on(plan.memory().available_on());
  WarnIfOverAvailable(&memory);
  *plan.mutable_memory() = std::move(memory);
  // Only the reason DryRun set; anything else stays.
  if (job.reason().rfind(kStepsUnknown, 0) == 0) job.clear_reason();
}

void JobCore::SetAvailableMemory(bool gpu, v1::MemoryPlan* memory) const {
  for (const WorkerSlots& w : registry_.FreeSlots()) {
    const WorkerRegistry::Worker* worker = registry_.Find(w.name);
    if (worker == nullptr) continue;
    const v1::RegisterRequest& info = worker->info;
    int64_t available = 0;
    std::string where;
    if (gpu) {
      if (info.gpu_slots() == 0 || info.gpu_memory_bytes() <= 0) continue;
      available = info.gpu_memory_bytes();
      where = absl::StrCat("the smallest GPU of ", w.name);
    } else {
      if (info.memory_bytes() <= 0 || info.slots() <= 0) continue;
      available = info.memory_bytes() / info.slots();
      where = absl::StrCat(
          "a slot of ", w.name, " (", FormatBytes(info.memory_bytes()),
          " over ", info.slots(), " slot", info.slots() == 1 ? "" : "s", ")");
    }
    if (memory->available_bytes() == 0 ||
        available < memory->available_bytes()) {
      memory->set_available_bytes(available);
      memory->set_available_on(where);
    }
  }
  WarnIfOverAvailable(memory);
}

absl::StatusOr<v1::SubmitJobResponse> JobCore::DryRun(
    v1::JobSpec spec, const std::string& resume_from,
    const std::string& owner) {
  if (absl::Status allowed = ResolvePriority(&spec, owner); !allowed.ok()) {
    return allowed;
  }
  v1::SubmitJobResponse response;
  v1::Job& job = *response.mutable_job();
  *job.mutable_spec() = std::move(spec);
  if (!resume_from.empty()) {
    absl::StatusOr<v1::Checkpoint> from = FindCheckpoint(resume_from);
    if (!from.ok()) return from.status();
    *job.mutable_resume_from() = *std::move(from);
  }
  // The sizes wait for a worker's count (ApplyDataProbeResult): the data
  // is opened only where it lives, never here.
  job.set_reason(absl::StrCat(kStepsUnknown, kDataNotCountedYet));
  v1::DryRunPlan& plan = *response.mutable_plan();
  plan.set_ranks(job.spec().ranks());
  const v1::TrainingSpec& t = job.spec().training();
  plan.set_samples_per_step(t.batch_size() *
                            std::max<int64_t>(1, t.grad_accum_steps()));
  if (job.spec().ranks() > 0) {
    plan.set_per_rank_batch(t.batch_size() / job.spec().ranks());
  }
  plan.set_data_note(kDataNotCountedYet);
  *plan.mutable_memory() =
      PlanRankMemory(job.spec(), PlanData{}, plan.per_rank_batch());

  const std::vector<WorkerSlots> slots = registry_.FreeSlots();
  plan.set_workers(static_cast<int>(slots.size()));
  for (const WorkerSlots& w : slots) {
    plan.set_slots_total(plan.slots_total() + w.total_slots);
    plan.set_slots_free(plan.slots_free() + w.free_slots);
  }
  for (const auto& [id, workers] : held_spares_) {
    plan.set_slots_spare(plan.slots_spare() + static_cast<int>(workers.size()));
  }
  SetAvailableMemory(job.spec().training().device() == "cuda",
                     plan.mutable_memory());
  // The real scheduler over the real queue with this job at its end: the
  // same answer a submission would get now.
  std::vector<PendingJob> fifo;
  for (const std::string& id : queue_) fifo.push_back(PendingOf(jobs_.at(id)));
  PendingJob self;
  self.id = kDryRunId;
  self.ranks = job.spec().ranks();
  self.device = job.spec().training().device();
  self.user = owner;
  self.priority = scheduling_.ValueOf(job.spec().priority());
  fifo.push_back(self);
  const ScheduleResult result = Schedule(SchedulingInputFor(std::move(fifo)));
  for (size_t i = 0; i < result.order.size(); ++i) {
    if (result.order[i] == kDryRunId) plan.set_jobs_ahead(static_cast<int>(i));
  }
  for (const Placement& placement : result.placements) {
    if (placement.job_id == kDryRunId) {
      plan.set_placement(absl::StrCat(DescribePlacement(placement.rank_workers),
                                      placement.gpu ? ", one GPU each" : ""));
    }
  }
  auto waiting = result.waiting.find(kDryRunId);
  if (waiting != result.waiting.end()) plan.set_waiting(waiting->second);
  return response;
}

}  // namespace trainctl::coordinator
