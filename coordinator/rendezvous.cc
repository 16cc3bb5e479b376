#include "coordinator/rendezvous.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace trainctl::coordinator {
namespace {

std::chrono::steady_clock::time_point Deadline(int64_t timeout_ms) {
  return std::chrono::steady_clock::now() +
         std::chrono::milliseconds(timeout_ms);
}

std::string Describe(const Rendezvous::Scope& scope) {
  return absl::StrCat("job ", scope.job_id, " generation ", scope.generation);
}

}  // namespace

absl::Status Rendezvous::CheckOpenLocked(const Scope& scope) const {
  auto it = closed_below_.find(scope.job_id);
  if (it != closed_below_.end() && scope.generation < it->second) {
    return absl::FailedPreconditionError(
        absl::StrCat("the rendezvous of ", Describe(scope),
                     " is closed: that generation has ended"));
  }
  return absl::OkStatus();
}

absl::Status Rendezvous::PutLocked(const Scope& scope, const std::string& key,
                                   std::string value) {
  if (static_cast<int64_t>(value.size()) > kMaxValueBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "rendezvous value of key '", key, "' is ", value.size(),
        " bytes; at most ", kMaxValueBytes, " are allowed"));
  }
  Keys& keys = data_[scope];
  auto it = keys.values.find(key);
  const int64_t before =
      it == keys.values.end()
          ? 0
          : static_cast<int64_t>(key.size() + it->second.size());
  const int64_t after = static_cast<int64_t>(key.size() + value.size());
  if (it == keys.values.end() &&
      static_cast<int64_t>(keys.values.size()) >= kMaxKeysPerScope) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the rendezvous of ", Describe(scope), " already holds ",
                     kMaxKeysPerScope, " keys, the limit"));
  }
  if (keys.bytes - before + after > kMaxScopeBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the rendezvous of ", Describe(scope), " would hold over ",
                     kMaxScopeBytes, " bytes, the limit"));
  }
  if (journal_ != nullptr) {
    if (absl::Status kept = journal_->Put(scope.job_id, scope.generation, key, value);
        !kept.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "cannot keep rendezvous key '", key, "' of ", Describe(scope), ": ",
          kept.message()));
    }
  }
  keys.bytes += after - before;
  keys.values[key] = std::move(value);
  return absl::OkStatus();
}

absl::Status Rendezvous::Set(const Scope& scope, const std::string& key,
                             std::string value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::Status open = CheckOpenLocked(scope); !open.ok()) return open;
    if (absl::Status put = PutLocked(scope, key, std::move(value)); !put.ok()) {
      return put;
    }
  }
  changed_.notify_all();
  return absl::OkStatus();
}

void Rendezvous::ExpectWorld(const Scope& scope, int world_size) {
  std::lock_guard<std::mutex> lock(mu_);
  max_waiters_[scope] = 2 * std::max(world_size, 1) + 16;
}

int Rendezvous::Waiters(const Scope& scope) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = waiters_.find(scope);
  return it == waiters_.end() ? 0 : it->second;
}

absl::Status Rendezvous::AddWaiterLocked(const Scope& scope) {
  auto limit = max_waiters_.find(scope);
  const int most =
      limit == max_waiters_.end() ? kDefaultMaxWaiters : limit->second;
  int& waiting = waiters_[scope];
  if (waiting >= most) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the rendezvous of ", Describe(scope), " already has ", waiting,
        " calls waiting, the most its world size allows"));
  }
  ++waiting;
  return absl::OkStatus();
}

void Rendezvous::RemoveWaiterLocked(const Scope& scope) {
  auto it = waiters_.find(scope);
  if (it != waiters_.end() && --it->second <= 0) waiters_.erase(it);
}

absl::StatusOr<std::string> Rendezvous::Get(const Scope& scope,
                                            const std::string& key,
                                            int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status open = CheckOpenLocked(scope); !open.ok()) return open;
  if (absl::Status room = AddWaiterLocked(scope); !room.ok()) return room;
  const bool found = changed_.wait_until(lock, Deadline(timeout_ms), [&] {
    return shutdown_ || !CheckOpenLocked(scope).ok() ||
           AllPresentLocked(scope, {key});
  });
  RemoveWaiterLocked(scope);
  if (shutdown_) return absl::UnavailableError("coordinator is shutting down");
  if (absl::Status open = CheckOpenLocked(scope); !open.ok()) return open;
  if (!found) {
    return absl::DeadlineExceededError(
        absl::StrCat("rendezvous key '", key, "' of ", Describe(scope),
                     " did not appear within ", timeout_ms, " ms"));
  }
  return data_[scope].values[key];
}

absl::StatusOr<int64_t> Rendezvous::Add(const Scope& scope,
                                        const std::string& key,
                                        int64_t delta) {
  int64_t sum = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::Status open = CheckOpenLocked(scope); !open.ok()) return open;
    const auto& values = data_[scope].values;
    auto it = values.find(key);
    int64_t current = 0;
    if (it != values.end() && !it->second.empty() &&
        !absl::SimpleAtoi(it->second, &current)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rendezvous key '", key, "' holds a non-integer value"));
    }
    sum = current + delta;
    if (absl::Status put = PutLocked(scope, key, absl::StrCat(sum)); !put.ok()) {
      return put;
    }
  }
  changed_.notify_all();
  return sum;
}

absl::StatusOr<std::string> Rendezvous::CompareSet(
    const Scope& scope, const std::string& key, const std::string& expected,
    const std::string& desired) {
  std::string result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::Status open = CheckOpenLocked(scope); !open.ok()) return open;
    const auto& values = data_[scope].values;
    auto it = values.find(key);
    const bool swap = it == values.end() ? expected.empty()
                                         : it->second == expected;
    if (swap) {
      if (absl::Status put = PutLocked(scope, key, desired); !put.ok()) {
        return put;
      }
      result = desired;
    } else {
      // c10d's convention: an absent key returns `expected`.
      result = it == values.end() ? expected : it->second;
    }
  }
  changed_.notify_all();
  return result;
}

bool Rendezvous::Check(const Scope& scope,
                       const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  return AllPresentLocked(scope, keys);
}

absl::Status Rendezvous::Wait(const Scope& scope,
                              const std::vector<std::string>& keys,
                              int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status open = CheckOpenLocked(scope); !open.ok()) return open;
  if (absl::Status room = AddWaiterLocked(scope); !room.ok()) return room;
  const bool found = changed_.wait_until(lock, Deadline(timeout_ms), [&] {
    return shutdown_ || !CheckOpenLocked(scope).ok() ||
           AllPresentLocked(scope, keys);
  });
  RemoveWaiterLocked(scope);
  if (shutdown_) return absl::UnavailableError("coordinator is shutting down");
  if (absl::Status open = CheckOpenLocked(scope); !open.ok()) return open;
  if (found) return absl::OkStatus();
  std::vector<std::string> missing;
  for (const auto& key : keys) {
    if (!AllPresentLocked(scope, {key})) missing.push_back(key);
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "rendezvous of ", Describe(scope), ": keys [",
      absl::StrJoin(missing, ", "), "] did not appear within ", timeout_ms,
      " ms"));
}

bool Rendezvous::Delete(const Scope& scope, const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = data_.find(scope);
  if (it == data_.end()) return false;
  auto kv = it->second.values.find(key);
  if (kv == it->second.values.end()) return false;
  if (journal_ != nullptr) journal_->Erase(scope.job_id, scope.generation, key);
  it->second.bytes -= static_cast<int64_t>(kv->first.size() + kv->second.size());
  it->second.values.erase(kv);
  return true;
}

int64_t Rendezvous::NumKeys(const Scope& scope) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = data_.find(scope);
  return it == data_.end() ? 0
                           : static_cast<int64_t>(it->second.values.size());
}

void Rendezvous::EndGeneration(const std::string& job_id, int generation) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t& below = closed_below_[job_id];
    below = std::max<int64_t>(below, int64_t{generation} + 1);
    bool had_keys = false;
    for (auto it = data_.begin(); it != data_.end();) {
      if (it->first.job_id == job_id && it->first.generation < below) {
        had_keys |= !it->second.values.empty();
        it = data_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = max_waiters_.begin(); it != max_waiters_.end();) {
      it = it->first.job_id == job_id && it->first.generation < below
               ? max_waiters_.erase(it)
               : std::next(it);
    }
    // The journal holds no key the map does not (Restore loads them all),
    // so a job that set none costs no store call here: this runs under
    // the JobManager's lock at every job end.
    if (journal_ != nullptr && had_keys) {
      journal_->Drop(job_id, static_cast<int>(std::min<int64_t>(
                                 below, std::numeric_limits<int>::max())));
    }
  }
  changed_.notify_all();
}

void Rendezvous::Restore(const Scope& scope,
                         std::map<std::string, std::string> keys) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Keys& restored = data_[scope];
    restored.values = std::move(keys);
    restored.bytes = 0;
    for (const auto& [key, value] : restored.values) {
      restored.bytes += static_cast<int64_t>(key.size() + value.size());
    }
  }
  changed_.notify_all();
}

void Rendezvous::DropJob(const std::string& job_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    regroups_.erase(job_id);
  }
  EndGeneration(job_id, std::numeric_limits<int>::max() - 1);
}

void Rendezvous::PostRegroup(const Scope& from,
                             std::map<int, RegroupPlace> places) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& kept = regroups_[from.job_id];
    kept[from.generation] = std::move(places);
    while (kept.size() > kKeptRegroups) kept.erase(kept.begin());
  }
  changed_.notify_all();
}

absl::StatusOr<Rendezvous::RegroupPlace> Rendezvous::AwaitRegroup(
    const Scope& scope, int rank, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  auto decided = [&] {
    auto it = regroups_.find(scope.job_id);
    return it != regroups_.end() && it->second.count(scope.generation) != 0;
  };
  if (absl::Status room = AddWaiterLocked(scope); !room.ok()) return room;
  changed_.wait_until(lock, Deadline(timeout_ms), [&] {
    return shutdown_ || decided() || !CheckOpenLocked(scope).ok();
  });
  RemoveWaiterLocked(scope);
  if (shutdown_) return absl::UnavailableError("coordinator is shutting down");
  if (decided()) {
    const auto& regroups = regroups_.at(scope.job_id);
    Scope at = scope;
    RegroupPlace place{scope.generation, rank, 0};
    for (auto left = regroups.find(at.generation); left != regroups.end();
         left = regroups.find(at.generation)) {
      auto next = left->second.find(place.rank);
      if (next == left->second.end()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "rank ", place.rank, " of ", Describe(at),
            " has no place in the next generation (left out)"));
      }
      place = next->second;
      at.generation = place.generation;
    }
    return place;
  }
  if (!CheckOpenLocked(scope).ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        Describe(scope), " ended without in-place recovery"));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "no regroup of ", Describe(scope), " within ", timeout_ms, " ms"));
}

void Rendezvous::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  changed_.notify_all();
}

bool Rendezvous::AllPresentLocked(const Scope& scope,
                                  const std::vector<std::string>& keys) const {
  auto it = data_.find(scope);
  if (it == data_.end()) return keys.empty();
  for (const auto& key : keys) {
    if (!it->second.values.count(key)) return false;
  }
  return true;
}

}  // namespace trainctl::coordinator
