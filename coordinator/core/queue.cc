// JobCore's side of sharing the cluster: the scheduling policy it runs
// under, the users' fair-share usage, the policy's input on each pass, and
// what each pass decided (the queue view, the decisions in the job's log).

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "coordinator/core/job_core.h"
#include "coordinator/job_state.h"

namespace trainctl::coordinator {
namespace {

const char* WaitKindWords(WaitKind kind) {
  switch (kind) {
    case WaitKind::kNoWorkers:
      return "no workers";
    case WaitKind::kNeverFits:
      return "cluster too small";
    case WaitKind::kQuota:
      return "quota";
    case WaitKind::kNotReady:
      return "own ranks stopping";
    case WaitKind::kReserved:
      return "next to start";
    case WaitKind::kBehind:
      return "behind another job";
    case WaitKind::kStoppingJobs:
      return "slots of stopping jobs";
    case WaitKind::kPreempting:
      return "preempting";
  }
  return "waiting";
}

}  // namespace

void JobCore::SetSchedulingConfig(SchedulingConfig config) {
  const int64_t now = now_;
  ChargeUsage(now);  // at the old half-life up to now
  usage_.SetHalfLife(config.half_life_hours, now);
  const SchedulingConfig old = std::move(scheduling_);
  scheduling_ = std::move(config);
  Log(LogLevel::kInfo,
      absl::StrCat("scheduling policy from ", scheduling_.origin, ": ",
                   scheduling_.classes.size(), " priority classes (default ",
                   scheduling_.default_class, "), ",
                   scheduling_.user_quotas.size(), " user and ",
                   scheduling_.group_quotas.size(), " group quotas, backfill ",
                   scheduling_.backfill ? "on" : "off"));
  for (const std::string& id : order_) {
    v1::Job& job = jobs_.at(id);
    // Only a class this reload removed: not one that was already gone, nor
    // the empty class of a job stored before classes existed.
    const std::string& name = job.spec().priority();
    if (IsFinal(job.state()) || name.empty() ||
        old.FindClass(name) == nullptr ||
        scheduling_.FindClass(name) != nullptr) {
      continue;
    }
    RecordNote(job, 0,
               absl::StrCat("[trainctl] scheduler: priority class '",
                            job.spec().priority(), "' is no longer in ",
                            scheduling_.origin, "; the job counts as '",
                            scheduling_.default_class, "'"));
  }
  SchedulePass(&effects_.messages);
  Save();
}

absl::Status JobCore::ResolvePriority(v1::JobSpec* spec,
                                      const std::string& owner) const {
  absl::StatusOr<PriorityClass> resolved =
      scheduling_.Resolve(spec->priority(), owner);
  if (!resolved.ok()) return resolved.status();
  spec->set_priority(resolved->name);
  return absl::OkStatus();
}

SchedulingInput JobCore::SchedulingInputFor(std::vector<PendingJob> pending) {
  SchedulingInput input;
  input.pending = std::move(pending);
  input.running = RunningJobs();
  input.workers = registry_.FreeSlots();
  input.now_unix_ms = now_;
  input.usage = usage_.At(input.now_unix_ms);
  input.user_quotas = scheduling_.user_quotas;
  input.group_quotas = scheduling_.group_quotas;
  input.group_of_user = scheduling_.group_of_user;
  input.backfill = scheduling_.backfill;
  input.preemption = scheduling_.preemption;
  return input;
}

int JobCore::SlotsHeld(const v1::Job& job) const {
  // Its spares are slots nobody else may use: they cost fair share too
  // (those the last pass held, which is what it held since the last charge).
  return job.world_size() + job.spare_workers_size();
}

void JobCore::ChargeJob(const v1::Job& job, int64_t now) {
  auto it = charged_until_ms_.find(job.id());
  if (it == charged_until_ms_.end()) return;
  usage_.Charge(job.owner(), SlotsHeld(job), it->second, now, now);
  it->second = std::max(it->second, now);
}

void JobCore::ChargeUsage(int64_t now) {
  for (const auto& [id, since] : charged_until_ms_) {
    const v1::Job& job = jobs_.at(id);
    usage_.Charge(job.owner(), SlotsHeld(job), since, now, now);
  }
  for (auto& [id, since] : charged_until_ms_) since = std::max(since, now);
}

void JobCore::RebuildUsage() {
  const int64_t now = now_;
  for (const std::string& id : order_) {
    const v1::Job& job = jobs_.at(id);
    // Past generations' world sizes and spares are not kept: each counts
    // as the current ones (the spec's ranks for most jobs, and the spares
    // a running job held when it was last stored).
    const int slots = std::max(SlotsHeld(job), 1);
    int64_t running_since = -1;
    for (const v1::Transition& t : job.transitions()) {
      if (running_since >= 0) {
        usage_.Charge(job.owner(), slots, running_since, t.time_unix_ms(), now);
        running_since = -1;
      }
      if (t.to() == v1::JOB_STATE_RUNNING) running_since = t.time_unix_ms();
    }
    if (running_since >= 0 && job.state() == v1::JOB_STATE_RUNNING) {
      usage_.Charge(job.owner(), slots, running_since, now, now);
      charged_until_ms_[id] = now;
    }
  }
}

void JobCore::RecordPass(const ScheduleResult& result) {
  pass_order_ = result.order;
  estimated_start_ms_ = result.estimated_start_unix_ms;
  for (const auto& [id, why] : result.waiting) {
    v1::Job& job = jobs_.at(id);
    const bool same_words = job.pending_reason() == why;
    if (!same_words) {
      job.set_pending_reason(why);
      MarkDirty(id);
    }
    const WaitKind kind = result.wait_kinds.at(id);
    auto seen = wait_kinds_.find(id);
    if (seen != wait_kinds_.end() && seen->second == kind) continue;
    wait_kinds_[id] = kind;
    // After a coordinator restart the kinds are not known, but a reason
    // that is word for word the stored one was already said.
    if (seen == wait_kinds_.end() && same_words) continue;
    RecordNote(job, 0,
               absl::StrCat("[trainctl] scheduler: waits (",
                            WaitKindWords(kind), "): ", why));
  }
  for (const Placement& placement : result.placements) {
    wait_kinds_.erase(placement.job_id);
    if (placement.backfilled || placement.borrowing) {
      RecordNote(
          jobs_.at(placement.job_id), 0,
          absl::StrCat("[trainctl] scheduler: starts",
                       placement.backfilled
                           ? " ahead of a larger job, on slots it will not "
                             "need before it can start (backfill)"
                           : "",
                       placement.borrowing
                           ? " beyond its quota, on idle slots (borrowed)"
                           : ""));
    }
  }
  // Jobs that left the queue otherwise (cancelled) need no kind kept.
  for (auto it = wait_kinds_.begin(); it != wait_kinds_.end();) {
    it =
        result.waiting.count(it->first) ? std::next(it) : wait_kinds_.erase(it);
  }
}

absl::StatusOr<v1::Job> JobCore::SetPriority(const std::string& job_id,
                                             const std::string& priority,
                                             PriorityLimit limit,
                                             const std::string& by) {
  absl::StatusOr<v1::Job*> found = FindUnfinished(job_id);
  if (!found.ok()) return found.status();
  v1::Job* job = *found;
  if (priority.empty()) {
    return absl::InvalidArgumentError("priority: give a class name");
  }
  // An admin may go past the owner's max_class, never past the classes.
  absl::StatusOr<PriorityClass> resolved =
      limit == PriorityLimit::kAnyClass && scheduling_.FindClass(priority)
          ? *scheduling_.FindClass(priority)
          : scheduling_.Resolve(priority, job->owner());
  if (!resolved.ok()) return resolved.status();
  const std::string before = job->spec().priority().empty()
                                 ? scheduling_.default_class
                                 : job->spec().priority();
  if (before != resolved->name) {
    job->mutable_spec()->set_priority(resolved->name);
    MarkDirty(job_id);
    RecordNote(*job, 0,
               absl::StrCat("[trainctl] scheduler: priority changed "
                            "from '",
                            before, "' to '", resolved->name, "'",
                            by.empty() ? "" : " by " + by));
    SchedulePass(&effects_.messages);
    Save();
  }
  return *job;
}

v1::GetQueueResponse JobCore::Queue(const std::string* viewer,
                                    int64_t now) const {
  v1::GetQueueResponse response;
  // Usage decayed to now without charging (const): the running jobs'
  // slot time since the last pass is left for the next one.
  UsageLedger ledger = usage_;
  const std::map<std::string, double> usage = ledger.At(now);
  auto usage_of = [&usage](const std::string& user) {
    auto it = usage.find(user);
    return it == usage.end() ? 0.0 : it->second;
  };
  int position = 0;
  std::map<std::string, int> in_use;
  for (const std::string& id : order_) {
    const v1::Job& job = jobs_.at(id);
    if (job.state() == v1::JOB_STATE_RUNNING)
      in_use[job.owner()] += job.world_size();
  }
  for (const std::string& id : pass_order_) {
    auto found = jobs_.find(id);
    if (found == jobs_.end()) continue;
    const v1::Job& job = found->second;
    if (job.state() != v1::JOB_STATE_QUEUED &&
        job.state() != v1::JOB_STATE_RESTARTING &&
        job.state() != v1::JOB_STATE_PREEMPTED) {
      continue;  // started or ended since the pass
    }
    v1::QueueEntry* entry = response.add_jobs();
    entry->set_position(++position);
    entry->set_job_id(job.id());
    if (viewer == nullptr || *viewer == job.owner()) {
      entry->set_name(job.spec().name());
    }
    entry->set_owner(job.owner());
    entry->set_state(job.state());
    // Jobs stored before classes existed have none: they are the default.
    entry->set_priority_class(job.spec().priority().empty()
                                  ? scheduling_.default_class
                                  : job.spec().priority());
    entry->set_priority(scheduling_.ValueOf(job.spec().priority()));
    entry->set_owner_usage_slot_hours(usage_of(job.owner()));
    entry->set_ranks(job.spec().ranks());
    entry->set_device(job.spec().training().device());
    entry->set_reason(job.pending_reason());
    auto estimate = estimated_start_ms_.find(id);
    if (estimate != estimated_start_ms_.end()) {
      entry->set_estimated_start_unix_ms(estimate->second);
    }
    entry->set_submitted_unix_ms(job.created_unix_ms());
    in_use.emplace(job.owner(), 0);
  }
  for (const PriorityClass& c : scheduling_.classes) {
    v1::PriorityClassInfo* info = response.add_classes();
    info->set_name(c.name);
    info->set_value(c.value);
    info->set_is_default(c.name == scheduling_.default_class);
  }
  response.set_policy_origin(scheduling_.origin);
  response.set_half_life_hours(scheduling_.half_life_hours);
  response.set_backfill(scheduling_.backfill);
  response.set_preemption(scheduling_.preemption);
  std::map<std::string, bool> users;
  for (const auto& [user, slots] : in_use) users[user] = true;
  for (const auto& [user, hours] : usage) users[user] = true;
  for (const auto& [user, quota] : scheduling_.user_quotas) users[user] = true;
  for (const auto& [user, name] : scheduling_.max_class_of_user)
    users[user] = true;
  for (const auto& [user, unused] : users) {
    v1::UserStanding* standing = response.add_users();
    standing->set_user(user);
    standing->set_usage_slot_hours(usage_of(user));
    auto used = in_use.find(user);
    standing->set_slots_in_use(used == in_use.end() ? 0 : used->second);
    auto quota = scheduling_.user_quotas.find(user);
    if (quota == scheduling_.user_quotas.end() && user != "*") {
      quota = scheduling_.user_quotas.find("*");
    }
    const Quota q =
        quota == scheduling_.user_quotas.end() ? Quota{} : quota->second;
    standing->set_slot_quota(q.slots);
    standing->set_gpu_quota(q.gpus);
    standing->set_borrow(q.borrow);
    auto group = scheduling_.group_of_user.find(user);
    if (group != scheduling_.group_of_user.end())
      standing->set_group(group->second);
    auto max = scheduling_.max_class_of_user.find(user);
    if (max == scheduling_.max_class_of_user.end() && user != "*") {
      max = scheduling_.max_class_of_user.find("*");
    }
    if (max != scheduling_.max_class_of_user.end())
      standing->set_max_class(max->second);
  }
  return response;
}

}  // namespace trainctl::coordinator
