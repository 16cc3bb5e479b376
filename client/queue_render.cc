#include "client/queue_render.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/format.h"

namespace trainctl::client {
namespace {

std::string SlotHours(double hours) {
  return absl::StrFormat("%.1f", hours);
}

std::string Limit(int limit) { return limit < 0 ? "-" : absl::StrCat(limit); }

std::string EstimatedStart(int64_t at_ms, int64_t now_ms) {
  if (at_ms <= 0) return "-";
  if (at_ms <= now_ms) return "now";
  return absl::StrCat("in ", FormatDurationShort(absl::Milliseconds(at_ms - now_ms)));
}

std::string PolicyLine(const v1::GetQueueResponse& queue) {
  std::vector<std::string> classes;
  for (const v1::PriorityClassInfo& c : queue.classes()) {
    classes.push_back(absl::StrCat(c.name(), " ", c.value(),
                                   c.is_default() ? " (default)" : ""));
  }
  return absl::StrCat("policy: ", queue.policy_origin(), "\nclasses: ",
                      absl::StrJoin(classes, ", "), "; fair-share half-life ",
                      absl::StrFormat("%g", queue.half_life_hours()),
                      "h; backfill ", queue.backfill() ? "on" : "off",
                      ", preemption ", queue.preemption() ? "on" : "off", "\n");
}

}  // namespace

std::string RenderQueue(const v1::GetQueueResponse& queue,
                        const RenderContext& ctx) {
  std::string out = PolicyLine(queue);
  out += "\n";
  if (queue.jobs().empty()) {
    out += "no job is waiting\n";
  } else {
    std::vector<std::vector<std::string>> rows;
    for (const v1::QueueEntry& e : queue.jobs()) {
      std::string state = e.state() == v1::JOB_STATE_RESTARTING ? " (restarting)"
                          : e.state() == v1::JOB_STATE_PREEMPTED ? " (preempted)"
                                                                 : "";
      rows.push_back(
          {absl::StrCat(e.position()), e.job_id() + state,
           e.name().empty() ? "-" : Truncate(e.name(), 24),
           e.owner().empty() ? "-" : e.owner(),
           absl::StrCat(e.priority_class(), " ", e.priority()),
           absl::StrCat(e.ranks(), e.device() == "cuda" ? " GPU" : ""),
           SlotHours(e.owner_usage_slot_hours()),
           EstimatedStart(e.estimated_start_unix_ms(), ctx.now_unix_ms),
           e.reason().empty() ? "-" : e.reason()});
    }
    // USAGE: the owner's slot-hours, decayed; the least goes first within
    // a priority.
    out += RenderTable({"POS", "JOB", "NAME", "USER", "PRIORITY", "RANKS",
                        "USAGE", "STARTS", "WAITING FOR"},
                       rows);
  }
  if (!queue.users().empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const v1::UserStanding& u : queue.users()) {
      std::string quota = Limit(u.slot_quota());
      if (u.gpu_quota() >= 0) absl::StrAppend(&quota, ", ", u.gpu_quota(), " GPU");
      if (u.borrow() && u.slot_quota() >= 0) absl::StrAppend(&quota, " (borrows)");
      rows.push_back({u.user().empty() ? "(no login)" : u.user(),
                      absl::StrCat(u.slots_in_use()), quota,
                      SlotHours(u.usage_slot_hours()),
                      u.max_class().empty() ? "-" : u.max_class(),
                      u.group().empty() ? "-" : u.group()});
    }
    out += "\n";
    out += RenderTable({"USER", "SLOTS IN USE", "SLOT QUOTA", "USAGE (SLOT-H)",
                        "MAX CLASS", "GROUP"},
                       rows);
  }
  return out;
}

}  // namespace trainctl::client
