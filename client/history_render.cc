#include "client/history_render.h"

#include <map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/format.h"
#include "common/vocabulary.h"

namespace trainctl::client {
namespace {

constexpr size_t kNameWidth = 24;

std::string Hours(double hours) { return absl::StrFormat("%.2f", hours); }

std::string Duration(int64_t ms) {
  return FormatDurationShort(absl::Milliseconds(ms));
}

std::string FinalLoss(const v1::JobAccount& job) {
  auto it = job.final_train().values().find("loss");
  if (it == job.final_train().values().end()) return "-";
  return absl::StrFormat("%.4f", it->second);
}

// The eval result a person looks at first (accuracy, else the loss or
// perplexity): the eval point's headline, which leaves out its timings.
std::string FinalEval(const v1::JobAccount& job) {
  if (job.final_eval().values().empty()) return "-";
  v1::MetricPoint point = job.final_eval();
  point.set_kind(MetricKindName(MetricKind::kEval));
  const std::vector<std::string> keys = MetricHeadlineKeys(point);
  if (keys.empty()) return "-";
  return FormatMetricValue(keys.front(), point.values().at(keys.front()));
}

}  // namespace

std::string RenderHistory(const v1::GetHistoryResponse& history,
                          const RenderContext& ctx) {
  if (history.jobs().empty()) return "No jobs in this window.\n";
  std::vector<std::vector<std::string>> rows;
  double slot_hours = 0, gpu_hours = 0;
  std::map<std::string, double> by_user;
  for (const v1::JobAccount& job : history.jobs()) {
    const bool ended = job.finished_unix_ms() > 0;
    rows.push_back({
        job.job_id(),
        Truncate(job.name(), kNameWidth),
        job.owner().empty() ? "-" : job.owner(),
        StateName(job.state()),
        FormatTimestamp(job.submitted_unix_ms(), ctx.tz),
        Duration(job.waited_ms()),
        job.first_started_unix_ms() == 0
            ? "-"
            : Duration(job.elapsed_ms()) + (ended ? "" : "+"),
        job.ranks() > 0 ? absl::StrCat(job.ranks()) : "-",
        Hours(job.slot_hours()),
        job.gpu_hours() > 0 ? Hours(job.gpu_hours()) : "-",
        job.preemptions() > 0
            ? absl::StrCat(job.restarts(), "/", job.preemptions())
            : absl::StrCat(job.restarts()),
        FinalLoss(job),
        FinalEval(job),
    });
    slot_hours += job.slot_hours();
    gpu_hours += job.gpu_hours();
    by_user[job.owner().empty() ? "-" : job.owner()] += job.slot_hours();
  }
  std::string out = RenderTable({"JOB", "NAME", "OWNER", "STATE", "SUBMITTED",
                                 "WAITED", "ELAPSED", "RANKS", "SLOT-H", "GPU-H",
                                 "RESTARTS", "LOSS", "EVAL"},
                                rows);
  absl::StrAppend(&out, history.jobs_size(), history.jobs_size() == 1 ? " job" : " jobs",
                  ": ", Hours(slot_hours), " slot-hours, ", Hours(gpu_hours),
                  " GPU-hours");
  if (by_user.size() > 1) {
    std::vector<std::string> shares;
    for (const auto& [user, hours] : by_user) {
      shares.push_back(absl::StrCat(user, " ", Hours(hours)));
    }
    absl::StrAppend(&out, " (", absl::StrJoin(shares, ", "), ")");
  }
  absl::StrAppend(&out, "\n");
  return out;
}

absl::StatusOr<int64_t> ParseWhen(const std::string& text, const std::string& flag,
                                  int64_t now_unix_ms, absl::TimeZone tz) {
  if (text.size() >= 2) {
    const char unit = text.back();
    int64_t count = 0;
    const std::map<char, int64_t> unit_ms = {
        {'m', 60'000}, {'h', 3'600'000}, {'d', 86'400'000}, {'w', 604'800'000}};
    auto it = unit_ms.find(unit);
    if (it != unit_ms.end() &&
        absl::SimpleAtoi(text.substr(0, text.size() - 1), &count) && count >= 0 &&
        count <= 100 * 365) {
      return now_unix_ms - count * it->second;
    }
  }
  for (const char* format : {"%Y-%m-%d", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M",
                             "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S"}) {
    absl::Time when;
    std::string error;
    if (absl::ParseTime(format, text, tz, &when, &error)) {
      return absl::ToUnixMillis(when);
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      flag, ": '", Truncate(text, 40),
      "' is neither a date (2026-12-01, 2026-12-01 14:30) nor an age before "
      "now (90m, 36h, 7d, 2w)"));
}

}  // namespace trainctl::client
