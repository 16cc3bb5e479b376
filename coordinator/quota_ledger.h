#pragma once

// What each user and group uses of its quotas during one scheduling pass
// (scheduler.h): charged with the running jobs, then with every start and
// spare the pass decides, and asked whether a job may start within them.

#include <map>
#include <set>
#include <string>

#include "coordinator/scheduler.h"

namespace trainctl::coordinator {

// The quotas that apply to one job, and where they stand.
struct QuotaCheck {
  std::string never;       // set: the job can never start under its quota
  std::string over;        // set: it must wait until the owner's jobs end
  bool borrowing = false;  // beyond a quota that lets it borrow idle slots
};

class QuotaLedger {
 public:
  // Charges the running jobs and finds those that borrow: of each owner's
  // jobs, in the order they started, those from the first one past a
  // quota on (a quota lowered by the operator makes borrowers too).
  explicit QuotaLedger(const SchedulingInput& in);

  void Charge(const std::string& user, int slots, int gpus);
  // Job `job_id` of `user` needs `need` more slots (GPU slots when `gpus`).
  // Its own stopping ranks (a restarting or preempted job's) are the slots
  // it resumes on, not more of its owner's use.
  QuotaCheck Check(const std::string& job_id, const std::string& user, int need,
                   bool gpus) const;
  // How many of `wanted` more slots `user` may hold within its quotas,
  // never borrowing (spares).
  int RoomWithin(const std::string& user, int wanted) const;
  bool Borrows(const std::string& job_id) const { return borrowers_.count(job_id) != 0; }

 private:
  struct InUse {
    int slots = 0;
    int gpus = 0;
  };
  const Quota* UserQuota(const std::string& user) const;
  const Quota* GroupQuota(const std::string& user) const;
  const std::string* GroupOf(const std::string& user) const;
  void FindBorrowers();
  static InUse UseOf(const std::map<std::string, InUse>& uses, const std::string& key);

  const SchedulingInput& in_;
  std::map<std::string, InUse> user_use_;
  std::map<std::string, InUse> group_use_;
  std::set<std::string> borrowers_;            // running jobs beyond a quota
  std::map<std::string, InUse> own_stopping_;  // stopping slots by job
};

}  // namespace trainctl::coordinator
