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

// Key-value store behind c10d rendezvous. Keys live in the scope of one job
// generation: a new generation starts empty, and DropJob forgets every scope
// of a finished job. Thread-safe; Get and Wait block the calling thread (at
// most `timeout_ms`) until the keys appear.
class Rendezvous {
 public:
  struct Scope {
    std::string job_id;
    int generation = 0;
    bool operator<(const Scope& o) const {
      return job_id != o.job_id ? job_id < o.job_id : generation < o.generation;
    }
  };

  void Set(const Scope& scope, const std::string& key, std::string value);
  // DEADLINE_EXCEEDED naming the key when it does not appear in time.
  absl::StatusOr<std::string> Get(const Scope& scope, const std::string& key,
                                  int64_t timeout_ms);
  // Adds delta to the integer stored at key (absent = 0); returns the sum.
  // INVALID_ARGUMENT when the stored value is not an integer.
  absl::StatusOr<int64_t> Add(const Scope& scope, const std::string& key,
                              int64_t delta);
  std::string CompareSet(const Scope& scope, const std::string& key,
                         const std::string& expected,
                         const std::string& desired);
  bool Check(const Scope& scope, const std::vector<std::string>& keys);
  // DEADLINE_EXCEEDED naming the missing keys when they do not all appear.
  absl::Status Wait(const Scope& scope, const std::vector<std::string>& keys,
                    int64_t timeout_ms);
  bool Delete(const Scope& scope, const std::string& key);
  int64_t NumKeys(const Scope& scope);

  // Forgets every generation of the job; blocked waiters time out as usual.
  void DropJob(const std::string& job_id);

  // Ends every blocked Get/Wait now with UNAVAILABLE, and all later ones.
  void Shutdown();

 private:
  bool AllPresentLocked(const Scope& scope,
                        const std::vector<std::string>& keys) const;

  std::mutex mu_;
  std::condition_variable changed_;
  std::map<Scope, std::map<std::string, std::string>> data_;  // GUARDED_BY(mu_)
  bool shutdown_ = false;                                      // GUARDED_BY(mu_)
};

}  // namespace trainctl::coordinator
