#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainctl::coordinator {

// Where the rendezvous keeps its keys durable (the job store), so that a
// restarted coordinator still has every key the ranks of a running
// generation had set: ranks forming their group across a crash find them
// (their store retries once the coordinator is back). Put is durable when
// it returns; Erase and Drop may be made durable later.
class RendezvousJournal {
 public:
  virtual ~RendezvousJournal() = default;
  virtual absl::Status Put(const std::string& job_id, int generation,
                           const std::string& key, const std::string& value) = 0;
  virtual void Erase(const std::string& job_id, int generation,
                     const std::string& key) = 0;
  // Forgets the job's keys of every generation below `below_generation`.
  virtual void Drop(const std::string& job_id, int below_generation) = 0;
};

// Key-value store behind c10d rendezvous. Keys live in the scope of one job
// generation: a new generation starts empty, an ended generation's scope is
// closed for good (a straggler or a key holder cannot bring it back), and
// DropJob closes every scope of a finished job. Bounded: at most
// kMaxKeysPerScope keys, values of at most kMaxValueBytes and
// kMaxScopeBytes in all per scope (RESOURCE_EXHAUSTED beyond). Thread-safe;
// Get and Wait block the calling thread (at most `timeout_ms`) until the
// keys appear or the scope closes.
class Rendezvous {
 public:
  // With a journal every key change is kept there first (a change the
  // journal refuses fails with UNAVAILABLE and changes nothing).
  explicit Rendezvous(RendezvousJournal* journal = nullptr) : journal_(journal) {}

  // c10d's own keys number a few per rank; Gloo's values are addresses.
  static constexpr int64_t kMaxKeysPerScope = 65'536;
  static constexpr int64_t kMaxValueBytes = 1 << 20;
  static constexpr int64_t kMaxScopeBytes = 64 << 20;

  struct Scope {
    std::string job_id;
    int generation = 0;
    bool operator<(const Scope& o) const {
      return job_id != o.job_id ? job_id < o.job_id : generation < o.generation;
    }
  };

  // Every call below answers FAILED_PRECONDITION for a closed scope.
  absl::Status Set(const Scope& scope, const std::string& key,
                   std::string value);
  // DEADLINE_EXCEEDED naming the key when it does not appear in time.
  absl::StatusOr<std::string> Get(const Scope& scope, const std::string& key,
                                  int64_t timeout_ms);
  // Adds delta to the integer stored at key (absent = 0); returns the sum.
  // INVALID_ARGUMENT when the stored value is not an integer.
  absl::StatusOr<int64_t> Add(const Scope& scope, const std::string& key,
                              int64_t delta);
  absl::StatusOr<std::string> CompareSet(const Scope& scope,
                                         const std::string& key,
                                         const std::string& expected,
                                         const std::string& desired);
  bool Check(const Scope& scope, const std::vector<std::string>& keys);
  // DEADLINE_EXCEEDED naming the missing keys when they do not all appear.
  absl::Status Wait(const Scope& scope, const std::vector<std::string>& keys,
                    int64_t timeout_ms);
  bool Delete(const Scope& scope, const std::string& key);
  int64_t NumKeys(const Scope& scope);

  // The generation's world size, from the coordinator that started it:
  // Get and Wait calls waiting at once on its scope are capped at
  // 2 x world_size + 16 (RESOURCE_EXHAUSTED beyond), kDefaultMaxWaiters
  // while unknown. Each waiting call holds a server thread, so a key holder
  // cannot take them all.
  void ExpectWorld(const Scope& scope, int world_size);
  // Calls now waiting in Get or Wait on the scope.
  int Waiters(const Scope& scope);
  static constexpr int kDefaultMaxWaiters = 64;

  // Forgets the job's generations up to `generation` and closes them;
  // blocked waiters on them return at once.
  void EndGeneration(const std::string& job_id, int generation);
  // Forgets and closes every generation of the job, present and future.
  void DropJob(const std::string& job_id);

  // In-place recovery: where a surviving rank of an ended generation goes.
  struct RegroupPlace {
    int generation = 0;
    int rank = 0;
    int world_size = 0;
  };
  // The survivors of generation `from` (by their rank in it) and their
  // places in the next one; posted before EndGeneration closes `from`. A
  // job's latest few regroups are kept (kKeptRegroups).
  void PostRegroup(const Scope& from, std::map<int, RegroupPlace> places);
  // Waits, at most timeout_ms, until the coordinator has decided what
  // becomes of `rank` of `scope`'s generation, and returns its latest
  // place: when the generation it was placed in also regrouped before it
  // asked (lost a rank while it formed), its place in that one's next,
  // and so on. FAILED_PRECONDITION when the
  // generation ended without a place for it (a restart from the checkpoint,
  // the job's end, or it was left out); DEADLINE_EXCEEDED when nothing was
  // decided in time; UNAVAILABLE when shutting down.
  absl::StatusOr<RegroupPlace> AwaitRegroup(const Scope& scope, int rank,
                                            int64_t timeout_ms);

  // Ends every blocked Get/Wait now with UNAVAILABLE, and all later ones.
  void Shutdown();

  // At startup: the scope's keys as the journal kept them.
  void Restore(const Scope& scope, std::map<std::string, std::string> keys);

 private:
  struct Keys {
    std::map<std::string, std::string> values;
    int64_t bytes = 0;  // keys and values
  };
  // FAILED_PRECONDITION when the scope's generation has ended.
  absl::Status CheckOpenLocked(const Scope& scope) const;
  // Stores key = value within the scope's limits.
  absl::Status PutLocked(const Scope& scope, const std::string& key,
                         std::string value);
  bool AllPresentLocked(const Scope& scope,
                        const std::vector<std::string>& keys) const;

  RendezvousJournal* const journal_;
  std::mutex mu_;
  std::condition_variable changed_;
  // RESOURCE_EXHAUSTED when the scope has its most waiters already; else
  // counts one more until the returned guard is released.
  absl::Status AddWaiterLocked(const Scope& scope);
  void RemoveWaiterLocked(const Scope& scope);

  std::map<Scope, Keys> data_;  // GUARDED_BY(mu_)
  std::map<Scope, int> waiters_;      // GUARDED_BY(mu_)
  std::map<Scope, int> max_waiters_;  // GUARDED_BY(mu_)
  // Per job, the generations below this one are closed. GUARDED_BY(mu_)
  std::map<std::string, int64_t> closed_below_;
  bool shutdown_ = false;  // GUARDED_BY(mu_)
  // Per job, its latest regroups: by the generation left, the places of
  // its survivors in the next one.
  static constexpr size_t kKeptRegroups = 8;
  std::map<std::string, std::map<int, std::map<int, RegroupPlace>>>
      regroups_;  // GUARDED_BY(mu_)
};

}  // namespace trainctl::coordinator
