#include "coordinator/rendezvous.h"

#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace trainctl::coordinator {
namespace {

std::chrono::steady_clock::time_point Deadline(int64_t timeout_ms) {
  return std::chrono::steady_clock::now() +
         std::chrono::milliseconds(timeout_ms);
}

}  // namespace

void Rendezvous::Set(const Scope& scope, const std::string& key,
                     std::string value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    data_[scope][key] = std::move(value);
  }
  changed_.notify_all();
}

absl::StatusOr<std::string> Rendezvous::Get(const Scope& scope,
                                            const std::string& key,
                                            int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool found = changed_.wait_until(lock, Deadline(timeout_ms), [&] {
    return shutdown_ || AllPresentLocked(scope, {key});
  });
  if (shutdown_) return absl::UnavailableError("coordinator is shutting down");
  if (!found) {
    return absl::DeadlineExceededError(absl::StrCat(
        "rendezvous key '", key, "' of job ", scope.job_id, " generation ",
        scope.generation, " did not appear within ", timeout_ms, " ms"));
  }
  return data_[scope][key];
}

absl::StatusOr<int64_t> Rendezvous::Add(const Scope& scope,
                                        const std::string& key,
                                        int64_t delta) {
  int64_t sum = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::string& stored = data_[scope][key];
    int64_t current = 0;
    if (!stored.empty() && !absl::SimpleAtoi(stored, &current)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rendezvous key '", key, "' holds a non-integer value"));
    }
    sum = current + delta;
    stored = absl::StrCat(sum);
  }
  changed_.notify_all();
  return sum;
}

std::string Rendezvous::CompareSet(const Scope& scope, const std::string& key,
                                   const std::string& expected,
                                   const std::string& desired) {
  std::string result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& kv = data_[scope];
    auto it = kv.find(key);
    if (it == kv.end()) {
      if (expected.empty()) {
        kv[key] = desired;
        result = desired;
      } else {
        result = expected;  // c10d's convention: absent key returns expected
      }
    } else if (it->second == expected) {
      it->second = desired;
      result = desired;
    } else {
      result = it->second;
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
  const bool found = changed_.wait_until(lock, Deadline(timeout_ms), [&] {
    return shutdown_ || AllPresentLocked(scope, keys);
  });
  if (shutdown_) return absl::UnavailableError("coordinator is shutting down");
  if (found) return absl::OkStatus();
  std::vector<std::string> missing;
  for (const auto& key : keys) {
    if (!AllPresentLocked(scope, {key})) missing.push_back(key);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("rendezvous of job ", scope.job_id, " generation ",
                   scope.generation, ": keys [", absl::StrJoin(missing, ", "),
                   "] did not appear within ", timeout_ms, " ms"));
}

bool Rendezvous::Delete(const Scope& scope, const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = data_.find(scope);
  return it != data_.end() && it->second.erase(key) > 0;
}

int64_t Rendezvous::NumKeys(const Scope& scope) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = data_.find(scope);
  return it == data_.end() ? 0 : static_cast<int64_t>(it->second.size());
}

void Rendezvous::DropJob(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = data_.begin(); it != data_.end();) {
    it = it->first.job_id == job_id ? data_.erase(it) : std::next(it);
  }
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
    if (!it->second.count(key)) return false;
  }
  return true;
}

}  // namespace trainctl::coordinator
