#include "coordinator/quota_ledger.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace trainctl::coordinator {
namespace {

// One quota against `need` more slots (gpus: they are GPU slots).
void CheckOne(const Quota& q, int used_slots, int used_gpus, int need, bool gpus,
              const std::string& whose, QuotaCheck* check) {
  const auto one = [&](int limit, int used, const char* what) {
    if (limit < 0 || used + need <= limit) return;
    if (need > limit && !q.borrow) {
      check->never = absl::StrCat("can never start: it needs ", need, " ",
                                  what, " and ", whose, " quota is ", limit);
    } else if (!q.borrow) {
      if (check->over.empty()) {
        check->over = absl::StrCat("over quota: ", whose, " jobs use ", used,
                                   " of ", limit, " ", what,
                                   " and it needs ", need);
      }
    } else {
      check->borrowing = true;
    }
  };
  one(q.slots, used_slots, "slots");
  if (gpus) one(q.gpus, used_gpus, "GPU slots");
}

}  // namespace

QuotaLedger::QuotaLedger(const SchedulingInput& in) : in_(in) {
  for (const RunningJob& r : in.running) {
    Charge(r.user, r.slots, r.gpu_slots);
    if (r.stopping) own_stopping_[r.id] = {r.slots, r.gpu_slots};
  }
  FindBorrowers();
}

const Quota* QuotaLedger::UserQuota(const std::string& user) const {
  auto it = in_.user_quotas.find(user);
  if (it == in_.user_quotas.end()) it = in_.user_quotas.find("*");
  return it == in_.user_quotas.end() ? nullptr : &it->second;
}

const Quota* QuotaLedger::GroupQuota(const std::string& user) const {
  const std::string* group = GroupOf(user);
  if (group == nullptr) return nullptr;
  auto it = in_.group_quotas.find(*group);
  return it == in_.group_quotas.end() ? nullptr : &it->second;
}

const std::string* QuotaLedger::GroupOf(const std::string& user) const {
  auto it = in_.group_of_user.find(user);
  return it == in_.group_of_user.end() ? nullptr : &it->second;
}

void QuotaLedger::FindBorrowers() {
  std::vector<const RunningJob*> by_start;
  for (const RunningJob& r : in_.running) {
    if (r.borrowing) borrowers_.insert(r.id);
    if (!r.stopping) by_start.push_back(&r);
  }
  std::sort(by_start.begin(), by_start.end(),
            [](const RunningJob* a, const RunningJob* b) {
              if (a->started_unix_ms != b->started_unix_ms) {
                return a->started_unix_ms < b->started_unix_ms;
              }
              return a->id < b->id;
            });
  std::map<std::string, InUse> user_use, group_use;
  const auto past = [](const Quota* q, InUse& use, const RunningJob& r) {
    if (q == nullptr) return false;
    use.slots += r.slots;
    use.gpus += r.gpu_slots;
    return (q->slots >= 0 && use.slots > q->slots) ||
           (q->gpus >= 0 && use.gpus > q->gpus);
  };
  for (const RunningJob* r : by_start) {
    const bool user_past = past(UserQuota(r->user), user_use[r->user], *r);
    const std::string* group = GroupOf(r->user);
    const bool group_past =
        group != nullptr && past(GroupQuota(r->user), group_use[*group], *r);
    if (user_past || group_past) borrowers_.insert(r->id);
  }
}

void QuotaLedger::Charge(const std::string& user, int slots, int gpus) {
  InUse& u = user_use_[user];
  u.slots += slots;
  u.gpus += gpus;
  if (const std::string* group = GroupOf(user)) {
    InUse& g = group_use_[*group];
    g.slots += slots;
    g.gpus += gpus;
  }
}

QuotaLedger::InUse QuotaLedger::UseOf(const std::map<std::string, InUse>& uses,
                                      const std::string& key) {
  auto it = uses.find(key);
  return it == uses.end() ? InUse() : it->second;
}

QuotaCheck QuotaLedger::Check(const std::string& job_id, const std::string& user,
                              int need, bool gpus) const {
  QuotaCheck check;
  InUse own;
  if (auto it = own_stopping_.find(job_id); it != own_stopping_.end()) own = it->second;
  if (const Quota* q = UserQuota(user)) {
    const InUse use = UseOf(user_use_, user);
    CheckOne(*q, use.slots - own.slots, use.gpus - own.gpus, need, gpus,
             absl::StrCat("user ", user, "'s"), &check);
  }
  if (const Quota* q = GroupQuota(user)) {
    const std::string& group = *GroupOf(user);
    const InUse use = UseOf(group_use_, group);
    CheckOne(*q, use.slots - own.slots, use.gpus - own.gpus, need, gpus,
             absl::StrCat("group ", group, "'s"), &check);
  }
  return check;
}

int QuotaLedger::RoomWithin(const std::string& user, int wanted) const {
  int room = wanted;
  if (const Quota* q = UserQuota(user); q != nullptr && q->slots >= 0) {
    room = std::min(room, q->slots - UseOf(user_use_, user).slots);
  }
  if (const Quota* q = GroupQuota(user); q != nullptr && q->slots >= 0) {
    room = std::min(room, q->slots - UseOf(group_use_, *GroupOf(user)).slots);
  }
  return std::max(room, 0);
}

}  // namespace trainctl::coordinator
