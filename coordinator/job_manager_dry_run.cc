// JobManager's dry run: validates a spec and says what the coordinator
// would do with it now (where it would run or why it would wait, and the
// shard plan), without creating, queueing or reserving anything.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/data_probe.h"
#include "common/shard_plan.h"
#include "common/spec.h"
#include "coordinator/job_manager.h"
#include "coordinator/scheduler.h"

namespace trainctl::coordinator {
namespace {

// A job id no real job has, for the scheduler's answer about this one.
constexpr char kDryRunId[] = "(dry run)";

void FillShardPlan(const v1::JobSpec& spec, v1::DryRunPlan* plan) {
  const v1::TrainingSpec& t = spec.training();
  plan->set_samples_per_step(t.batch_size() *
                             std::max<int64_t>(1, t.grad_accum_steps()));
  if (spec.ranks() > 0) plan->set_per_rank_batch(t.batch_size() / spec.ranks());
  // The data may live only on the workers; then the sizes stay unknown.
  absl::StatusOr<int64_t> samples = CountTrainSamples(spec.data());
  if (!samples.ok()) {
    plan->set_data_note(absl::StrCat("training samples unknown here: ",
                                     samples.status().message()));
    return;
  }
  plan->set_train_samples(*samples);
  plan->set_steps_per_epoch(StepsPerEpoch(*samples, plan->samples_per_step()));
  plan->set_dropped_per_epoch(*samples - plan->steps_per_epoch() *
                                             plan->samples_per_step());
}

}  // namespace

absl::StatusOr<v1::SubmitJobResponse> JobManager::DryRun(
    const std::string& spec_text, const std::string& resume_from) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(spec_text);
  if (!spec.ok()) return spec.status();
  v1::SubmitJobResponse response;
  v1::Job& job = *response.mutable_job();
  *job.mutable_spec() = *std::move(spec);
  if (!resume_from.empty()) {
    absl::StatusOr<v1::Checkpoint> from = FindCheckpoint(resume_from);
    if (!from.ok()) return from.status();
    *job.mutable_resume_from() = *std::move(from);
  }
  absl::StatusOr<int64_t> steps = TotalSteps(job.spec());
  if (steps.ok()) {
    job.set_total_steps(*steps);
  } else {
    job.set_reason(
        absl::StrCat("total steps unknown: ", steps.status().message()));
  }
  v1::DryRunPlan& plan = *response.mutable_plan();
  plan.set_ranks(job.spec().ranks());
  FillShardPlan(job.spec(), &plan);

  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<WorkerSlots> slots = registry_.FreeSlots();
  plan.set_workers(static_cast<int>(slots.size()));
  for (const WorkerSlots& w : slots) {
    plan.set_slots_total(plan.slots_total() + w.total_slots);
    plan.set_slots_free(plan.slots_free() + w.free_slots);
  }
  // The real scheduler over the real queue with this job at its end: the
  // same answer a submission would get now.
  std::vector<PendingJob> fifo;
  for (const std::string& id : queue_) fifo.push_back(PendingLocked(jobs_.at(id)));
  plan.set_jobs_ahead(static_cast<int>(fifo.size()));
  PendingJob self;
  self.id = kDryRunId;
  self.ranks = job.spec().ranks();
  fifo.push_back(self);
  const ScheduleResult result = Schedule(fifo, slots);
  for (const Placement& placement : result.placements) {
    if (placement.job_id == kDryRunId) {
      plan.set_placement(DescribePlacement(placement.rank_workers));
    }
  }
  auto waiting = result.waiting.find(kDryRunId);
  if (waiting != result.waiting.end()) plan.set_waiting(waiting->second);
  return response;
}

}  // namespace trainctl::coordinator
