#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace trainctl::coordinator {

// Gang scheduling as a pure function of the queue, the running jobs, the
// free slots, the users' recent usage and the quotas.
//
// Order. Pending jobs are considered by priority (higher first), then a job
// resuming after a restart or a preemption before a fresh one, then fair
// share (the user with the least recent usage, in slot-hours decayed by
// the caller, first), then submission order.
//
// Gangs. A job starts only when all of its ranks fit at once. Ranks are
// packed onto the workers with the most free slots first (ties by name), so
// ranks of a job share as few nodes as possible and the ranks on one node
// are consecutive. A job restarting may take fewer ranks (down to
// min_ranks): the most that fit and divide its global batch.
//
// No head-of-line blocking. A job that can never fit (more ranks than the
// cluster has slots of its kind, or than a quota that does not borrow
// allows) and a job held by its quota wait with the reason and block no
// one. The first job that fits the cluster but not its free slots holds a
// reservation (EASY backfill): a later job may start now only on slots the
// reserved job will not need when, by the running jobs' ETAs, enough slots
// are free for it, so starting it cannot delay the reserved one.
//
// Borrowing. A job beyond a quota that lets it borrow is considered after
// every job within its quotas, so it takes only slots no such job wants,
// and it never preempts (whatever its priority): what it freed would go to
// the jobs within their quotas first, and it would stop them again.
//
// Preemption. A job within its quotas that does not fit now may preempt
// running jobs of a strictly lower priority and jobs that borrow beyond
// their quotas, whatever their priority; a job that writes no checkpoints
// is never preempted. It takes the fewest,
// lowest: the lowest priority first, and of those the victims that free
// enough with the fewest jobs; an elastic victim that can go on with fewer
// ranks is shrunk instead. Slots of jobs already stopping count as coming
// free, so a pass never preempts twice for the same need. The preemptor
// then holds the free slots it needs until the victims have stopped.
//
// Spares. A running job with fault_tolerance.spares holds up to that many
// free slots for the replacement ranks of an in-place recovery, spread over
// the workers that run none of its ranks first (a lost node then takes no
// spare with it). No pending job of its priority or lower may take them;
// a pending job of a higher priority is placed before they are held, so it
// may. Spares are held within the owner's quotas only (never borrowed) and
// count towards them; higher-priority holders choose first.
//
// GPUs: some slots of a worker have a GPU of their own. A job on `cuda`
// runs only on such slots; one on `auto` takes them when all its ranks fit
// on free ones, else ordinary slots (its ranks then see no GPU); a job on
// `cpu` takes slots without a GPU first. All ranks of a job are of one kind
// (NCCL and Gloo ranks cannot form one group).

struct PendingJob {
  std::string id;
  int ranks = 0;          // the world size wanted, and the most it takes
  int min_ranks = 0;      // the fewest it may start with (0: exactly `ranks`)
  int64_t batch = 0;      // the world size must divide it (0: any size)
  std::string not_ready;  // set: it cannot start yet, and why
  std::string device = "cpu";  // training.device: cpu, auto or cuda
  int priority = 0;       // the value of its priority class
  std::string user;       // owner ("" without authentication)
  bool resuming = false;  // restarting or preempted: it ran before
  int spares = 0;         // fault_tolerance.spares, held once it starts
};

struct RunningJob {
  std::string id;
  int priority = 0;
  std::string user;
  int slots = 0;
  int gpu_slots = 0;      // of those, slots with a GPU
  // Beyond its user's or group's quota. The pass also finds borrowers
  // itself: of a user's (or group's) jobs, those started last that take
  // it past its quota.
  bool borrowing = false;
  int64_t started_unix_ms = 0;
  // It can stop without losing work (it writes checkpoints); a job that
  // cannot is never preempted.
  bool preemptible = true;
  bool stopping = false;  // its ranks are stopping (their slots come free)
  int min_ranks = 0;      // elastic: the fewest it may go on with (0: not)
  int64_t batch = 0;      // elastic: the world size must divide it
  int64_t eta_unix_ms = -1;  // when it should end (-1: unknown)
  int64_t grace_ms = 0;   // how long it may take to checkpoint when preempted
  // fault_tolerance.spares: free slots it holds for replacement ranks,
  // preferably on workers that run none of its ranks (`rank_workers`).
  int spares = 0;
  std::vector<std::string> rank_workers;
};

struct WorkerSlots {
  std::string name;
  int free_slots = 0;
  int total_slots = 0;
  // Of those, the slots with a GPU (free_gpu_slots <= free_slots).
  int free_gpu_slots = 0;
  int total_gpu_slots = 0;
};

// A limit on the slots (and GPU slots) running at once; -1: none. With
// `borrow`, a job beyond it may still start on idle slots, and is then
// preempted first when a job within its quota needs them.
struct Quota {
  int slots = -1;
  int gpus = -1;
  bool borrow = false;
};

struct SchedulingInput {
  std::vector<PendingJob> pending;   // in submission order
  std::vector<RunningJob> running;
  std::vector<WorkerSlots> workers;
  std::map<std::string, double> usage;  // slot-hours by user, decayed
  std::map<std::string, Quota> user_quotas;   // "*": every user without one
  std::map<std::string, Quota> group_quotas;  // by group name
  std::map<std::string, std::string> group_of_user;
  int64_t now_unix_ms = 0;
  bool backfill = true;
  bool preemption = true;
};

struct Placement {
  std::string job_id;
  std::vector<std::string> rank_workers;  // rank i runs on rank_workers[i]
  // Whether rank i takes one of its worker's GPU slots, and whether the
  // ranks use the GPU of theirs (a cpu job may fill GPU slots last).
  std::vector<bool> on_gpu_slot;
  bool gpu = false;
  bool borrowing = false;  // beyond a quota, on idle slots
  bool backfilled = false;  // ahead of a reserved job, on slots it will not need
};

struct Preemption {
  std::string victim;
  std::string by;
  std::string reason;  // "preempted by job X (priority 100 > 0) ..."
  int64_t grace_ms = 0;
  int shrink_to = 0;  // elastic: go on with this many ranks (0: stop)
};

// What a waiting job waits for, as a kind: a job's events record a
// decision when its kind changes, not each time the words do (the job
// ahead of it changes with every start).
enum class WaitKind {
  kNoWorkers,     // no worker registered
  kNeverFits,     // more ranks than the cluster has slots of its kind
  kQuota,         // over a quota, or one it can never fit
  kNotReady,      // its own ranks are still stopping
  kReserved,      // the first blocked job: holds the reservation
  kBehind,        // behind the reserved job
  kStoppingJobs,  // claimed the slots of jobs that are stopping
  kPreempting,    // preempted jobs to get slots
};

struct ScheduleResult {
  std::vector<Placement> placements;
  std::vector<Preemption> preemptions;
  // For each job left waiting: why, in words a person can act on.
  std::map<std::string, std::string> waiting;
  std::map<std::string, WaitKind> wait_kinds;  // the same jobs
  // The reserved job's start by the running jobs' ETAs, when they are known.
  std::map<std::string, int64_t> estimated_start_unix_ms;
  // Every pending job id, in the order the pass considered them.
  std::vector<std::string> order;
  // The spare slots each running job with fault_tolerance.spares holds:
  // one worker name per slot (fewer than it asks for when the cluster or
  // its quota has no more room; none: not listed).
  std::map<std::string, std::vector<std::string>> spares;
};

ScheduleResult Schedule(const SchedulingInput& input);
// The queue alone: one priority, no quotas, nothing running.
ScheduleResult Schedule(const std::vector<PendingJob>& pending,
                        const std::vector<WorkerSlots>& workers);

// A placement in words: "ranks 0-1 on node-a, 2 on node-b".
std::string DescribePlacement(const std::vector<std::string>& rank_workers);

}  // namespace trainctl::coordinator
