#include "coordinator/scheduler.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/free_slots.h"
#include "coordinator/quota_ledger.h"

namespace trainctl::coordinator {

namespace {

int Fewest(const PendingJob& job) {
  return job.min_ranks > 0 ? job.min_ranks : job.ranks;
}

// The world size for `job` from `available` slots: the most up to its ranks,
// at least its minimum, that divides its batch; 0 when none does.
int WorldFor(const PendingJob& job, int available) {
  for (int n = std::min(job.ranks, available); n >= Fewest(job); --n) {
    if (job.batch == 0 || job.batch % n == 0) return n;
  }
  return 0;
}

std::string Needs(const PendingJob& job, const char* what) {
  return Fewest(job) == job.ranks
             ? absl::StrCat("needs ", job.ranks, " ", what)
             : absl::StrCat("needs ", Fewest(job), " to ", job.ranks, " ", what,
                            " (a count that divides the batch of ", job.batch,
                            ")");
}

class Pass {
 public:
  explicit Pass(const SchedulingInput& in) : in_(in), free_(in.workers), quotas_(in) {
    for (const RunningJob& r : in.running) {
      if (r.stopping) {
        coming_ += r.slots;
        coming_gpu_ += r.gpu_slots;
      }
    }
    for (const RunningJob& r : in.running) {
      if (r.spares > 0 && !r.stopping) spare_holders_.push_back(&r);
    }
    std::sort(spare_holders_.begin(), spare_holders_.end(),
              [](const RunningJob* a, const RunningJob* b) {
                if (a->priority != b->priority) return a->priority > b->priority;
                if (a->started_unix_ms != b->started_unix_ms) {
                  return a->started_unix_ms < b->started_unix_ms;
                }
                return a->id < b->id;
              });
  }

  ScheduleResult Run() {
    // Jobs that would borrow wait for a second round, after every job
    // within its quotas: borrowed slots are the ones nobody else wants.
    std::vector<size_t> borrowers;
    for (size_t i : Order()) {
      const PendingJob& job = in_.pending[i];
      HoldSpares(job.priority);  // holders of its priority or higher come first
      const QuotaCheck quota = CheckQuotas(job);
      if (quota.borrowing && quota.never.empty() && quota.over.empty()) {
        borrowers.push_back(i);
        continue;
      }
      result_.order.push_back(job.id);
      Consider(job);
    }
    HoldSpares(std::numeric_limits<int>::min());  // before any borrowing
    for (size_t i : borrowers) {
      result_.order.push_back(in_.pending[i].id);
      Consider(in_.pending[i]);
    }
    return std::move(result_);
  }

 private:
  // Priority, then resuming jobs, then fair share, then submission order.
  std::vector<size_t> Order() const {
    std::vector<size_t> order(in_.pending.size());
    std::iota(order.begin(), order.end(), 0);
    std::vector<double> usage(order.size(), 0);
    for (size_t i = 0; i < order.size(); ++i) {
      auto it = in_.usage.find(in_.pending[i].user);
      if (it != in_.usage.end()) usage[i] = it->second;
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const PendingJob& x = in_.pending[a];
      const PendingJob& y = in_.pending[b];
      if (x.priority != y.priority) return x.priority > y.priority;
      if (x.resuming != y.resuming) return x.resuming;
      return usage[a] < usage[b];
    });
    return order;
  }

  QuotaCheck CheckQuotas(const PendingJob& job) const {
    return quotas_.Check(job.id, job.user, Fewest(job), job.device == "cuda");
  }

  void Wait(const PendingJob& job, WaitKind kind, std::string why) {
    result_.waiting[job.id] = std::move(why);
    result_.wait_kinds[job.id] = kind;
  }

  std::string NoRoom(const PendingJob& job) const {
    if (job.device == "cuda") {
      return absl::StrCat(Needs(job, "GPU slots"), "; ", free_.free_gpu(), " of ",
                          free_.total_gpu(), " registered GPU slots free");
    }
    return absl::StrCat(Needs(job, "slots"), "; ", free_.free(), " of ",
                        free_.total(), " registered slots free");
  }

  void Consider(const PendingJob& job) {
    const bool cuda = job.device == "cuda";
    if (free_.empty()) {
      return Wait(job, WaitKind::kNoWorkers,
                  absl::StrCat(Needs(job, cuda ? "GPU slots" : "slots"),
                               "; no workers registered"));
    }
    const int cluster = cuda ? free_.total_gpu() : free_.total();
    if (Fewest(job) > cluster) {
      return Wait(job, WaitKind::kNeverFits,
                  absl::StrCat(
                           Needs(job, cuda ? "GPU slots" : "slots"),
                           " and the cluster has ", cluster,
                           " in all; it waits for more workers and holds up no "
                           "other job",
                           cuda && cluster == 0
                               ? " (start workers with --gpus on GPU nodes)"
                               : ""));
    }
    const QuotaCheck quota = CheckQuotas(job);
    if (!quota.never.empty()) return Wait(job, WaitKind::kQuota, quota.never);
    if (!quota.over.empty()) return Wait(job, WaitKind::kQuota, quota.over);
    if (!job.not_ready.empty()) {
      // Its own ranks are stopping: later jobs must not take the slots it
      // will restart on.
      if (!reserved_) Reserve(job, job.ranks);
      return Wait(job, WaitKind::kNotReady, job.not_ready);
    }

    if (TryStart(job, quota.borrowing)) return;
    const int free = cuda ? free_.free_gpu() : free_.free();
    if (!reserved_ && free < Fewest(job)) {
      if (Claim(job)) return;
      // A job that would borrow takes idle slots only: were it to stop
      // others, jobs within their quota (considered before it) would take
      // the freed slots, and it would stop them again, for ever.
      if (in_.preemption && !quota.borrowing && Preempt(job)) return;
    }
    if (reserved_) {
      return Wait(job, WaitKind::kBehind,
                  absl::StrCat(NoRoom(job),
                                    free < Fewest(job)
                                        ? "; after job "
                                        : "; the free ones are held for job ",
                                    reserved_for_, ", ahead in the queue"));
    }
    Reserve(job, Fewest(job));
    Wait(job, WaitKind::kReserved, NoRoom(job));
  }

  // The spares of the holders of priority `down_to` or higher not yet
  // served: each takes what is free, within its owner's quotas.
  void HoldSpares(int down_to) {
    for (; next_holder_ < spare_holders_.size() &&
           spare_holders_[next_holder_]->priority >= down_to;
         ++next_holder_) {
      const RunningJob& r = *spare_holders_[next_holder_];
      if (victims_.count(r.id)) continue;  // being preempted
      HoldSparesOf(r.id, r.user, r.spares, r.rank_workers);
    }
  }

  void HoldSparesOf(const std::string& id, const std::string& user, int spares,
                    const std::vector<std::string>& rank_workers) {
    const int room = quotas_.RoomWithin(user, std::min(spares, free_.free()));
    if (room <= 0) return;
    const Placement held = free_.PlanSpares(
        id, room, std::set<std::string>(rank_workers.begin(), rank_workers.end()));
    free_.Take(held);
    quotas_.Charge(user, static_cast<int>(held.rank_workers.size()),
           static_cast<int>(std::count(held.on_gpu_slot.begin(), held.on_gpu_slot.end(), true)));
    result_.spares[id] = held.rank_workers;
  }

  // Starts the job now if it fits, within what a reservation leaves.
  bool TryStart(const PendingJob& job, bool borrowing) {
    const int limit = std::numeric_limits<int>::max();
    const int extra = reserved_ ? extra_ : limit;
    const bool backfill_ok = !reserved_ || in_.backfill;
    if (!backfill_ok) return false;
    for (bool gpu : {true, false}) {
      if (gpu && job.device == "cpu") continue;
      if (!gpu && job.device == "cuda") continue;
      const int world = WorldFor(job, gpu ? free_.free_gpu() : free_.free());
      if (world == 0) continue;
      Placement placement = free_.Plan(job.id, world, gpu);
      int used_of_reserved = world;
      if (reserved_ && reserved_gpu_) {
        used_of_reserved = static_cast<int>(std::count(
            placement.on_gpu_slot.begin(), placement.on_gpu_slot.end(), true));
      }
      if (used_of_reserved > extra) continue;
      if (reserved_) extra_ -= used_of_reserved;
      placement.borrowing = borrowing;
      placement.backfilled = reserved_;
      free_.Take(placement);
      quotas_.Charge(job.user, world,
             static_cast<int>(std::count(placement.on_gpu_slot.begin(),
                                         placement.on_gpu_slot.end(), true)));
      // Its spares now: it comes after the running holders of its
      // priority (they started first), before any job behind it.
      if (job.spares > 0 && !borrowing) {
        HoldSparesOf(job.id, job.user, job.spares, placement.rank_workers);
      }
      result_.placements.push_back(std::move(placement));
      return true;
    }
    return false;
  }

  // The job fits once slots of stopping jobs come free: it waits for them
  // and holds the free slots it will need with them.
  bool Claim(const PendingJob& job) {
    const bool gpu = job.device == "cuda";
    int& coming = gpu ? coming_gpu_ : coming_;
    const int free = gpu ? free_.free_gpu() : free_.free();
    const int need = Fewest(job);
    if (coming == 0 || free + coming < need) return false;
    coming -= need - std::min(free, need);
    Hold(job, std::min(free, need), gpu);
    Wait(job, WaitKind::kStoppingJobs,
         absl::StrCat(NoRoom(job), "; waiting for slots of stopping jobs"));
    return true;
  }

  // Takes `count` free slots out of the pass for a job that starts soon.
  void Hold(const PendingJob& job, int count, bool gpu) {
    if (count == 0) return;
    Placement held = free_.Plan(job.id, count, gpu);
    free_.Take(held);
  }

  bool Borrows(const RunningJob& r) const { return quotas_.Borrows(r.id); }

  // How many slots of the kind the job needs stopping `victim` frees.
  static int Frees(const RunningJob& victim, bool gpu) {
    return gpu ? victim.gpu_slots : victim.slots;
  }

  bool Preempt(const PendingJob& job) {
    const bool gpu = job.device == "cuda";
    const int free = gpu ? free_.free_gpu() : free_.free();
    int& coming = gpu ? coming_gpu_ : coming_;
    const int need = Fewest(job);
    const int shortfall = need - free - coming;
    std::vector<const RunningJob*> candidates;
    for (const RunningJob& r : in_.running) {
      if (r.stopping || !r.preemptible || victims_.count(r.id) ||
          Frees(r, gpu) == 0) {
        continue;
      }
      if (r.priority < job.priority || Borrows(r)) {
        candidates.push_back(&r);
      }
    }
    // Borrowers first, then the lowest priority, then the largest (fewest jobs).
    std::sort(candidates.begin(), candidates.end(),
              [this, gpu](const RunningJob* a, const RunningJob* b) {
                if (Borrows(*a) != Borrows(*b)) return Borrows(*a);
                if (a->priority != b->priority) return a->priority < b->priority;
                if (Frees(*a, gpu) != Frees(*b, gpu)) return Frees(*a, gpu) > Frees(*b, gpu);
                return a->id < b->id;
              });
    std::vector<const RunningJob*> chosen;
    int freed = 0;
    for (const RunningJob* c : candidates) {
      if (freed >= shortfall) break;
      chosen.push_back(c);
      freed += Frees(*c, gpu);
    }
    if (freed < shortfall) return false;
    // Drop victims not needed after all, the highest-priority ones first.
    for (size_t i = chosen.size(); i-- > 0;) {
      if (freed - Frees(*chosen[i], gpu) >= shortfall) {
        freed -= Frees(*chosen[i], gpu);
        chosen.erase(chosen.begin() + static_cast<long>(i));
      }
    }
    std::vector<std::string> names;
    for (size_t i = 0; i < chosen.size(); ++i) {
      const RunningJob& v = *chosen[i];
      Preemption p;
      p.victim = v.id;
      p.by = job.id;
      p.grace_ms = v.grace_ms;
      // The last victim may only need to give up part of its ranks.
      const int give = (i + 1 == chosen.size())
                           ? shortfall - (freed - Frees(v, gpu))
                           : Frees(v, gpu);
      p.shrink_to = ShrinkTo(v, give, gpu);
      p.reason = v.priority < job.priority
                     ? absl::StrCat("preempted by job ", job.id, " (priority ",
                                    job.priority, " > ", v.priority, ")")
                     : absl::StrCat("preempted by job ", job.id,
                                    ": it borrowed slots beyond its quota and ",
                                    job.id, " is within its own");
      if (p.shrink_to > 0) {
        absl::StrAppend(&p.reason, "; it can go on with ", p.shrink_to,
                        " of its ", v.slots, " ranks");
        coming += v.slots - p.shrink_to;
      } else {
        coming += Frees(v, gpu);
      }
      victims_.insert(v.id);
      names.push_back(v.id);
      result_.preemptions.push_back(std::move(p));
    }
    coming -= need - std::min(free, need);
    Hold(job, std::min(free, need), gpu);
    Wait(job, WaitKind::kPreempting, absl::StrCat("preempting job", names.size() == 1 ? " " : "s ",
                           absl::StrJoin(names, ", "),
                           "; starts once they have checkpointed and stopped"));
    return true;
  }

  // Elastic victims go on with fewer ranks when that gives up `give` slots:
  // the most ranks at or above their minimum that divide the batch.
  static int ShrinkTo(const RunningJob& v, int give, bool gpu) {
    if (v.min_ranks <= 0 || (gpu && v.gpu_slots != v.slots)) return 0;
    for (int n = v.slots - give; n >= v.min_ranks; --n) {
      if (v.batch == 0 || v.batch % n == 0) return n;
    }
    return 0;
  }

  // EASY backfill: by the running jobs' ETAs, the time enough slots are
  // free for `job`; what is free then beyond its need is all later jobs may
  // take now. A job without an ETA (no step reported yet) counts as never
  // ending: were it to count as ending at the end of time, every pass would
  // grant the same spare slots again to one more backfilled job, and a
  // stream of small jobs could hold the reserved one back for ever.
  void Reserve(const PendingJob& job, int need) {
    reserved_ = true;
    reserved_for_ = job.id;
    reserved_gpu_ = job.device == "cuda";
    std::vector<const RunningJob*> ending;
    for (const RunningJob& r : in_.running) {
      if (!r.stopping && !victims_.count(r.id) && r.eta_unix_ms >= 0) {
        ending.push_back(&r);
      }
    }
    std::sort(ending.begin(), ending.end(), [](const RunningJob* a, const RunningJob* b) {
      return a->eta_unix_ms < b->eta_unix_ms;
    });
    int free_then = (reserved_gpu_ ? free_.free_gpu() + coming_gpu_
                                   : free_.free() + coming_);
    size_t i = 0;
    while (free_then < need && i < ending.size()) {
      free_then += Frees(*ending[i++], reserved_gpu_);
    }
    // Jobs ending at the same time as the last one needed free slots too.
    while (i < ending.size() && i > 0 &&
           ending[i]->eta_unix_ms == ending[i - 1]->eta_unix_ms) {
      free_then += Frees(*ending[i++], reserved_gpu_);
    }
    extra_ = std::max(0, free_then - need);
    if (free_then >= need && i > 0) {
      result_.estimated_start_unix_ms[job.id] = ending[i - 1]->eta_unix_ms;
    }
  }

  const SchedulingInput& in_;
  FreeSlots free_;
  QuotaLedger quotas_;
  ScheduleResult result_;
  int coming_ = 0, coming_gpu_ = 0;  // slots of stopping jobs not yet claimed
  std::set<std::string> victims_;
  bool reserved_ = false;
  bool reserved_gpu_ = false;
  std::string reserved_for_;
  int extra_ = 0;  // slots a later job may take without delaying it
  // Running jobs that want spares, in the order they choose them.
  std::vector<const RunningJob*> spare_holders_;
  size_t next_holder_ = 0;
};

}  // namespace

ScheduleResult Schedule(const SchedulingInput& input) { return Pass(input).Run(); }

ScheduleResult Schedule(const std::vector<PendingJob>& pending,
                        const std::vector<WorkerSlots>& workers) {
  SchedulingInput input;
  input.pending = pending;
  input.workers = workers;
  return Schedule(input);
}

}  // namespace trainctl::coordinator
