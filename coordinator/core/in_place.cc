// JobCore's in-place recovery (fault_tolerance.in_place): when a rank is
// lost, the surviving rank processes keep their model and optimizer state
// in memory and go on as the next generation, on fewer ranks, instead of
// every process being killed and the job reloading its last checkpoint.

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/vocabulary.h"
#include "coordinator/core/job_core.h"
#include "coordinator/free_slots.h"

namespace trainctl::coordinator {

int InPlaceWorldSize(int survivors, int min_workers, int64_t global_batch) {
  const int fewest = std::max(1, min_workers);
  for (int world = survivors; world >= fewest; --world) {
    if (global_batch > 0 && global_batch % world == 0) return world;
  }
  return 0;
}

bool JobCore::RecoverInPlace(v1::Job& job, std::string& why, Outbox* outbox) {
  const v1::FaultToleranceSpec& ft = job.spec().fault_tolerance();
  if (!ft.in_place() || job.state() != v1::JOB_STATE_RUNNING ||
      job.restarts() >= ft.max_restarts()) {
    return false;
  }
  const int from = job.generation();
  auto cannot = [&](const std::string& because) {
    absl::StrAppend(&why, "; not recovered in place: ", because);
    return false;
  };
  // Only survivors that are up and in the group can hand their state on;
  // a generation still forming its group restarts as before.
  auto trained = trained_generation_.find(job.id());
  const bool all_past_start =
      trained != trained_generation_.end() && trained->second == from;
  // A generation formed in place that has not logged a step yet: lost
  // while it formed. Its survivors still hold their state (in their
  // regroup, maybe waiting for the group that now cannot form); its
  // replacements hold none yet, so they are replaced again.
  auto formed = in_place_generation_.find(job.id());
  const bool forming = !all_past_start &&
                       formed != in_place_generation_.end() &&
                       formed->second == from;
  const std::set<int> no_state =
      forming ? in_place_newcomers_[job.id()] : std::set<int>();
  std::vector<int> survivors;
  std::vector<int> stateless;  // replacements that had not joined yet
  for (const v1::RankInfo& rank : job.ranks()) {
    if (rank.state() == v1::RANK_STATE_EXITED ||
        rank.state() == v1::RANK_STATE_LOST) {
      continue;
    }
    if (rank.gpu())
      return cannot("it trains on CUDA (NCCL cannot be rebuilt in place yet)");
    if (!registry_.Holds(rank.worker(), {job.id(), from, rank.rank()})) {
      return cannot(
          absl::StrCat("rank ", rank.rank(), " has not joined its group"));
    }
    if (no_state.count(rank.rank())) {
      stateless.push_back(rank.rank());
      continue;
    }
    if (forming) {
      survivors.push_back(rank.rank());
      continue;
    }
    if (rank.state() != v1::RANK_STATE_RUNNING || !rank.joined()) {
      return cannot(
          absl::StrCat("rank ", rank.rank(), " has not joined its group"));
    }
    // Past its start (the generation logged a step, or the rank's progress
    // says so): a rank still loading or forming the first group holds no
    // state worth keeping, and would not notice the regroup (one already
    // regrouping, "regroup", is past it).
    const auto progress = std::find_if(
        job.progress().begin(), job.progress().end(),
        [&](const v1::RankProgress& p) { return p.rank() == rank.rank(); });
    if (!all_past_start &&
        (progress == job.progress().end() || progress->phase().empty() ||
         ParseRankPhase(progress->phase()) == RankPhase::kStarting)) {
      return cannot(absl::StrCat("rank ", rank.rank(), " is still starting"));
    }
    survivors.push_back(rank.rank());
  }
  if (survivors.empty())
    return cannot("no rank that holds the training state is left");
  const int world_before = job.world_size();
  Placement spares = ReplacementSlots(
      job, world_before - static_cast<int>(survivors.size()), stateless,
      /*use_spares=*/true);
  const int world = InPlaceWorldSize(
      static_cast<int>(survivors.size() + spares.rank_workers.size()),
      ft.min_workers(), job.spec().training().batch_size());
  if (world == 0) {
    return cannot(absl::StrCat("no number of the ", survivors.size(),
                               " ranks left that is at least min_workers (",
                               ft.min_workers(), ") divides the global batch (",
                               job.spec().training().batch_size(), ")"));
  }
  // Where the batch does not split over them all, replacements are the
  // first left out: a survivor holds state, a replacement only a slot.
  const int replacing = std::max(0, world - static_cast<int>(survivors.size()));
  spares.rank_workers.resize(replacing);
  spares.on_gpu_slot.resize(replacing);

  const int to = FormInPlace(job, survivors, stateless, spares, world,
                             /*at_step_boundary=*/false, outbox);
  job.set_restarts(job.restarts() + 1);
  std::string reason =
      absl::StrCat(why, "; recovered in place: generation ", to,
                   " goes on with ", world, " of ", world_before, " ranks");
  if (replacing == 0) {
    absl::StrAppend(&reason, " from their state in memory");
  } else {
    absl::StrAppend(&reason, ": ", world - replacing,
                    " from their "
                    "state in memory, ",
                    replacing, " new on ",
                    absl::StrJoin(spares.rank_workers, ", "), " that receive",
                    replacing == 1 ? "s" : "", " it over the collective");
  }
  absl::StrAppend(&reason, " (recovery ", job.restarts(), " of ",
                  ft.max_restarts(), ")");
  const int64_t started = job.started_unix_ms();
  Transition(job, v1::JOB_STATE_RUNNING, reason);
  job.set_started_unix_ms(started);  // the ETA counts from the job's start
  RecordNote(job, 0, absl::StrCat("[trainctl] ", reason));
  return true;
}

int JobCore::FormInPlace(v1::Job& job, const std::vector<int>& survivors,
                         const std::vector<int>& stateless,
                         const Placement& spares, int world,
                         bool at_step_boundary, Outbox* outbox) {
  ChargeJob(job, now_);  // the old world size up to now
  const int from = job.generation();
  const int to = from + 1;
  const int replacing = static_cast<int>(spares.rank_workers.size());
  std::map<int, Rendezvous::RegroupPlace> places;
  std::map<std::string, v1::CoordinatorMessage> regroups;
  std::map<std::string, v1::CoordinatorMessage> cancels;
  std::map<std::string, v1::CoordinatorMessage> assigns;
  std::vector<v1::RankInfo> kept;
  std::map<std::string, int> ranks_on;  // the new generation's, by worker
  for (size_t i = 0; i < survivors.size(); ++i) {
    const v1::RankInfo& old = job.ranks(survivors[i]);
    registry_.Release(old.worker(), {job.id(), from, old.rank()});
    if (static_cast<int>(i) >= world) {
      v1::CoordinatorMessage& cancel = cancels[old.worker()];
      cancel.mutable_cancel()->set_job_id(job.id());
      cancel.mutable_cancel()->set_generation(from);
      cancel.mutable_cancel()->set_reason(
          absl::StrCat("regrouped in place on ", world,
                       " ranks (the global batch must divide)"));
      continue;
    }
    const int rank = static_cast<int>(i);
    places[old.rank()] = {to, rank, world};
    ++ranks_on[old.worker()];
    v1::RankInfo info = old;
    info.set_rank(rank);
    info.set_joined(false);
    info.set_last_report_seq(0);
    registry_.Occupy(old.worker(), {job.id(), to, rank}, old.gpu_slot());
    kept.push_back(std::move(info));
    v1::RegroupRanks* regroup = regroups[old.worker()].mutable_regroup();
    regroup->set_job_id(job.id());
    regroup->set_from_generation(from);
    regroup->set_generation(to);
    regroup->set_world_size(world);
    regroup->set_at_step_boundary(at_step_boundary);
    v1::RegroupRanks::Move* move = regroup->add_moves();
    move->set_from_rank(old.rank());
    move->set_rank(rank);
  }
  for (int r : stateless) {
    // Free at once, as for a survivor left out: the cancel reaches its
    // agent before any assignment to the same slot (one stream, in order).
    registry_.Release(job.ranks(r).worker(), {job.id(), from, r});
    v1::CoordinatorMessage& cancel = cancels[job.ranks(r).worker()];
    cancel.mutable_cancel()->set_job_id(job.id());
    cancel.mutable_cancel()->set_generation(from);
    cancel.mutable_cancel()->set_reason(
        absl::StrCat("generation ", from,
                     " lost a rank while it formed; a new replacement takes "
                     "the place of this one, which had no state yet"));
  }
  std::set<int>& newcomers = in_place_newcomers_[job.id()];
  newcomers.clear();
  for (const std::string& worker : spares.rank_workers) ++ranks_on[worker];
  std::map<std::string, int> local_next;
  for (const v1::RankInfo& info : kept) ++local_next[info.worker()];
  for (int i = 0; i < replacing; ++i) {
    const std::string& worker = spares.rank_workers[i];
    const int rank = static_cast<int>(kept.size());
    v1::RankInfo info;
    info.set_rank(rank);
    info.set_worker(worker);
    info.set_host(registry_.Find(worker)->info.collective_host());
    info.set_state(v1::RANK_STATE_ASSIGNED);
    info.set_gpu_slot(spares.on_gpu_slot[i]);
    registry_.Occupy(worker, {job.id(), to, rank}, spares.on_gpu_slot[i]);
    kept.push_back(std::move(info));
    newcomers.insert(rank);
    v1::RankAssignment* a = assigns[worker].mutable_assign()->add_ranks();
    a->set_job_id(job.id());
    a->set_generation(to);
    a->set_rank(rank);
    a->set_world_size(world);
    a->set_local_rank(local_next[worker]++);
    a->set_local_world_size(ranks_on[worker]);
    a->set_joins_in_place(true);
  }
  job.set_generation(to);
  in_place_generation_[job.id()] = to;
  job.clear_ranks();
  for (v1::RankInfo& info : kept) *job.add_ranks() = std::move(info);
  job.set_world_size(world);
  job.clear_progress();
  job.clear_stragglers();
  reattach_deadline_ms_.erase(job.id());
  // The places before the old scope closes: a survivor waiting for its
  // place must not read the close as "no place".
  effects_.changes.push_back(RegroupPosted{job.id(), from, std::move(places)});
  effects_.changes.push_back(GenerationsEnded{job.id(), from});
  effects_.changes.push_back(GenerationStarted{job.id(), to, world});
  // Renumbered before any cancel of the old generation reaches the same
  // agent (one stream, in order), so a cancel stops only the left-out.
  for (auto& [worker, message] : regroups) {
    outbox->push_back(
        {registry_.Find(worker)->link, worker, std::move(message)});
  }
  for (auto& [worker, message] : cancels) {
    if (const auto* w = registry_.Find(worker))
      outbox->push_back({w->link, worker, std::move(message)});
  }
  for (auto& [worker, message] : assigns) {
    *message.mutable_assign()->mutable_spec() = job.spec();
    outbox->push_back(
        {registry_.Find(worker)->link, worker, std::move(message)});
  }
  return to;
}

bool JobCore::GrowInPlace(v1::Job& job, int grown, Outbox* outbox) {
  const int from = job.generation();
  auto trained = trained_generation_.find(job.id());
  if (trained == trained_generation_.end() || trained->second != from)
    return false;
  std::vector<int> ranks;
  for (const v1::RankInfo& rank : job.ranks()) {
    if (rank.gpu() || rank.state() != v1::RANK_STATE_RUNNING ||
        !rank.joined() ||
        !registry_.Holds(rank.worker(), {job.id(), from, rank.rank()})) {
      return false;
    }
    ranks.push_back(rank.rank());
  }
  const int world_before = job.world_size();
  Placement newcomers =
      ReplacementSlots(job, grown - world_before, {}, /*use_spares=*/false);
  if (static_cast<int>(newcomers.rank_workers.size()) != grown - world_before)
    return false;
  const int to = FormInPlace(job, ranks, {}, newcomers, grown,
                             /*at_step_boundary=*/true, outbox);
  const std::string reason =
      absl::StrCat("growing from ", world_before, " to ", grown,
                   " ranks in place (elastic): ", grown - world_before,
                   " new on ", absl::StrJoin(newcomers.rank_workers, ", "),
                   " that receive", grown - world_before == 1 ? "s" : "",
                   " the state over the "
                   "collective at the next step boundary (generation ",
                   to, ")");
  const int64_t started = job.started_unix_ms();
  Transition(job, v1::JOB_STATE_RUNNING, reason);
  job.set_started_unix_ms(started);
  RecordNote(job, 0, absl::StrCat("[trainctl] ", reason));
  return true;
}

Placement JobCore::ReplacementSlots(const v1::Job& job, int wanted,
                                    const std::vector<int>& freeing,
                                    bool use_spares) const {
  Placement taken;
  taken.job_id = job.id();
  if (wanted <= 0) return taken;
  std::vector<WorkerSlots> slots = SlotsLeftFor(job, /*own_too=*/!use_spares);
  for (int r : freeing) {
    for (WorkerSlots& w : slots) {
      if (w.name != job.ranks(r).worker()) continue;
      ++w.free_slots;
      if (job.ranks(r).gpu_slot()) ++w.free_gpu_slots;
    }
  }
  // Its own spares first: held for it, whoever waits in the queue.
  auto own = held_spares_.find(job.id());
  if (use_spares && own != held_spares_.end()) {
    for (const std::string& worker : own->second) {
      if (static_cast<int>(taken.rank_workers.size()) == wanted) break;
      for (WorkerSlots& w : slots) {
        if (w.name != worker || w.free_slots == 0) continue;
        const bool gpu_slot =
            w.free_slots <= w.free_gpu_slots;  // slots without a GPU first
        --w.free_slots;
        if (gpu_slot) --w.free_gpu_slots;
        taken.rank_workers.push_back(worker);
        taken.on_gpu_slot.push_back(gpu_slot);
        break;
      }
    }
  }
  const int more = wanted - static_cast<int>(taken.rank_workers.size());
  if (more == 0 || HigherPriorityWaits(job)) return taken;
  const FreeSlots free(slots);
  const Placement rest =
      free.Plan(job.id(), std::min(more, free.free()), /*gpu=*/false);
  taken.rank_workers.insert(taken.rank_workers.end(), rest.rank_workers.begin(),
                            rest.rank_workers.end());
  taken.on_gpu_slot.insert(taken.on_gpu_slot.end(), rest.on_gpu_slot.begin(),
                           rest.on_gpu_slot.end());
  return taken;
}

bool JobCore::HigherPriorityWaits(const v1::Job& job) const {
  const int priority = scheduling_.ValueOf(job.spec().priority());
  for (const std::string& id : queue_) {
    // One that can never fit, or is held by its quota, wants no slot now.
    const auto kind = wait_kinds_.find(id);
    if (kind != wait_kinds_.end() && (kind->second == WaitKind::kNeverFits ||
                                      kind->second == WaitKind::kQuota)) {
      continue;
    }
    if (PendingOf(jobs_.at(id)).priority > priority) return true;
  }
  return false;
}

}  // namespace trainctl::coordinator
