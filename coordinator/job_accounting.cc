#include "coordinator/job_accounting.h"

#include <algorithm>
#include <vector>

#include "coordinator/job_state.h"

namespace trainctl::coordinator {
namespace {

constexpr double kMsPerHour = 3600.0 * 1000.0;

// A RUNNING period and the slots it held.
struct RunningPeriod {
  int64_t from_ms;
  int64_t to_ms;
  int slots;
  int gpu_slots;
};

// Records stored before transitions carried their slots: the job's last
// generation stands for all of them.
RunningPeriod Opened(const v1::Job& job, const v1::Transition& t) {
  if (t.slots() > 0) return {t.time_unix_ms(), 0, t.slots(), t.gpu_slots()};
  int gpu = 0;
  for (const v1::RankInfo& rank : job.ranks()) gpu += rank.gpu() ? 1 : 0;
  return {t.time_unix_ms(), 0, std::max(job.world_size(), 1), gpu};
}

}  // namespace

bool ExistedIn(const v1::Job& job, const AccountWindow& window) {
  if (window.until_ms > 0 && job.created_unix_ms() >= window.until_ms) {
    return false;
  }
  return !(IsFinal(job.state()) && window.since_ms > 0 &&
           job.finished_unix_ms() < window.since_ms);
}

v1::JobAccount AccountJob(const v1::Job& job, const AccountWindow& window,
                          int64_t now_ms) {
  v1::JobAccount account;
  account.set_job_id(job.id());
  account.set_name(job.spec().name());
  account.set_owner(job.owner());
  account.set_state(job.state());
  account.set_reason(job.reason());
  account.set_device(job.spec().training().device());
  account.set_submitted_unix_ms(job.created_unix_ms());
  account.set_finished_unix_ms(IsFinal(job.state()) ? job.finished_unix_ms() : 0);
  account.set_ranks(job.world_size());
  account.set_generations(job.generation());
  account.set_restarts(job.restarts());
  account.set_preemptions(job.preemptions());
  if (job.has_latest_train()) *account.mutable_final_train() = job.latest_train();
  if (job.has_latest_eval()) *account.mutable_final_eval() = job.latest_eval();

  std::vector<RunningPeriod> periods;
  for (const v1::Transition& t : job.transitions()) {
    if (!periods.empty() && periods.back().to_ms == 0 &&
        t.from() == v1::JOB_STATE_RUNNING) {
      periods.back().to_ms = t.time_unix_ms();
    }
    if (t.to() == v1::JOB_STATE_RUNNING) periods.push_back(Opened(job, t));
  }
  const int64_t end_ms =
      account.finished_unix_ms() > 0 ? account.finished_unix_ms() : now_ms;
  if (!periods.empty() && periods.back().to_ms == 0) {
    periods.back().to_ms = std::max(end_ms, periods.back().from_ms);
  }

  const int64_t first_start = periods.empty() ? 0 : periods.front().from_ms;
  account.set_first_started_unix_ms(first_start);
  account.set_waited_ms(
      std::max<int64_t>(0, (first_start > 0 ? first_start : end_ms) -
                               job.created_unix_ms()));
  account.set_elapsed_ms(first_start > 0 ? std::max<int64_t>(0, end_ms - first_start)
                                         : 0);

  const int64_t window_from = window.since_ms;
  const int64_t window_to =
      window.until_ms > 0 ? std::min(window.until_ms, now_ms) : now_ms;
  int64_t running_ms = 0;
  double slot_ms = 0, gpu_ms = 0;
  for (const RunningPeriod& p : periods) {
    const int64_t from = std::max(p.from_ms, window_from);
    const int64_t to = std::min(p.to_ms, window_to);
    if (to <= from) continue;
    running_ms += to - from;
    slot_ms += static_cast<double>(to - from) * p.slots;
    gpu_ms += static_cast<double>(to - from) * p.gpu_slots;
  }
  account.set_running_ms(running_ms);
  account.set_slot_hours(slot_ms / kMsPerHour);
  account.set_gpu_hours(gpu_ms / kMsPerHour);
  return account;
}

}  // namespace trainctl::coordinator
