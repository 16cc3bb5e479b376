#include "coordinator/caller_view.h"

#include <algorithm>
#include <cstdint>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "coordinator/job_accounting.h"

namespace trainctl::coordinator {

std::vector<v1::Job> CallerView::Jobs(
    const std::vector<v1::JobState>& states) const {
  if (caller_.IsAdmin()) return jobs_.List(states);
  if (!caller_.IsPerson()) return {};
  return jobs_.List(states, &caller_.name);  // copies only theirs
}

namespace {

absl::Status CheckPageToken(const std::string& page_token) {
  absl::string_view digits = page_token;
  int64_t number = 0;
  if (!page_token.empty() && (!absl::ConsumePrefix(&digits, "job-") ||
                              !absl::SimpleAtoi(digits, &number) || number < 1)) {
    return absl::InvalidArgumentError(
        "page_token: not a job id (pass the next_page_token of the last page)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JobManager::Page> CallerView::JobsPage(
    const std::vector<v1::JobState>& states, const std::string& page_token,
    size_t max_jobs, size_t max_bytes) const {
  if (absl::Status token = CheckPageToken(page_token); !token.ok()) return token;
  if (!caller_.IsPerson()) return JobManager::Page{};
  return jobs_.ListPage(states, caller_.IsAdmin() ? nullptr : &caller_.name,
                        page_token, max_jobs, max_bytes);
}

absl::StatusOr<v1::GetHistoryResponse> CallerView::History(
    const v1::GetHistoryRequest& request, int64_t now_ms) const {
  if (absl::Status token = CheckPageToken(request.page_token()); !token.ok()) {
    return token;
  }
  if (request.until_unix_ms() > 0 && request.since_unix_ms() >= request.until_unix_ms()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "since_unix_ms ", request.since_unix_ms(), " is not before until_unix_ms ",
        request.until_unix_ms()));
  }
  const std::string& owner = request.owner();
  if (!owner.empty() && !caller_.MayTouchJobOf(owner)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the history of ", owner, "'s jobs is for ", owner, " or an admin"));
  }
  v1::GetHistoryResponse response;
  response.set_as_of_unix_ms(now_ms);
  if (!caller_.IsPerson()) return response;
  std::vector<v1::JobState> states;
  for (int s : request.states()) states.push_back(static_cast<v1::JobState>(s));
  const std::string* only =
      !owner.empty() ? &owner : caller_.IsAdmin() ? nullptr : &caller_.name;
  constexpr size_t kMaxPageBytes = 16 << 20;  // of whole jobs read
  const size_t max_jobs = request.page_size() > 0
                              ? static_cast<size_t>(request.page_size())
                              : SIZE_MAX;
  JobManager::Page page =
      jobs_.ListPage(states, only, request.page_token(), max_jobs, kMaxPageBytes);
  const AccountWindow window{request.since_unix_ms(), request.until_unix_ms()};
  for (const v1::Job& job : page.jobs) {
    if (ExistedIn(job, window)) *response.add_jobs() = AccountJob(job, window, now_ms);
  }
  // The token is the last job read, kept or not, so paging goes on.
  if (page.more && !page.jobs.empty()) {
    response.set_next_page_token(page.jobs.back().id());
  }
  return response;
}

absl::StatusOr<v1::Job> CallerView::Job(const std::string& job_id,
                                        const char* action) const {
  absl::StatusOr<v1::Job> job = jobs_.Get(job_id);
  if (!job.ok()) return job.status();
  if (!caller_.MayTouchJobOf(job->owner())) {
    return absl::PermissionDeniedError(absl::StrCat(
        "job ", job_id, " belongs to ", job->owner(), "; only ", job->owner(),
        " or an admin may ", action, " it"));
  }
  return job;
}

std::vector<v1::WorkerInfo> CallerView::Workers() const {
  std::vector<v1::WorkerInfo> workers = jobs_.Workers();
  if (caller_.IsAdmin()) return workers;
  std::set<std::string> own;
  for (const v1::Job& job : Jobs()) own.insert(job.id());
  for (v1::WorkerInfo& worker : workers) {
    auto* ranks = worker.mutable_ranks();
    ranks->erase(std::remove_if(ranks->begin(), ranks->end(),
                                [&](const v1::RankRef& r) { return own.count(r.job_id()) == 0; }),
                 ranks->end());
  }
  return workers;
}

}  // namespace trainctl::coordinator
