// JobManager's dry run with data: the sample counts come from a connected
// worker, which opens the spec's files where they live and as the ranks'
// user; the coordinator never opens a user-named file (security review H2).

#include <algorithm>
#include <chrono>
#include <future>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "coordinator/dry_run_data.h"
#include "coordinator/job_manager.h"

namespace trainctl::coordinator {
namespace {

// Longer than the agent's own limit on one check (10 s), so its answer,
// even a time-out, arrives before the coordinator gives up.
constexpr auto kProbeWait = std::chrono::seconds(12);
// Dry runs waiting for a worker at once; each holds a server thread.
constexpr size_t kMaxPendingProbes = 8;

v1::ProbeDataResult ProbeError(std::string why) {
  v1::ProbeDataResult result;
  result.set_error(std::move(why));
  return result;
}

}  // namespace

absl::StatusOr<v1::SubmitJobResponse> JobManager::DryRunOnWorker(
    const std::string& spec_text, const std::string& resume_from,
    const std::string& owner) {
  absl::StatusOr<v1::SubmitJobResponse> dry =
      DryRun(spec_text, resume_from, owner);
  if (!dry.ok()) return dry;
  std::string id;
  std::shared_ptr<AgentLink> link;
  std::future<v1::ProbeDataResult> answer;
  v1::ProbeDataResult result;
  const auto& shipped = dry->job().spec().shipped_files();
  const bool data_shipped =
      std::any_of(shipped.begin(), shipped.end(), [](const v1::ShippedFile& f) {
        return absl::StartsWith(f.field(), "data.");
      });
  {
    std::lock_guard<std::mutex> lock(mu_);
    const WorkerRegistry::Worker* pick = core_.RoomiestWorker();
    if (data_shipped) {
      // A worker gets them only as a rank of the job (Rendezvous.FetchFile).
      result = ProbeError(
          "the data files are shipped with the job (relative paths): the ranks "
          "count their samples when they start");
    } else if (pick == nullptr) {
      result = ProbeError("no worker is connected to check the data");
    } else if (probes_.size() >= kMaxPendingProbes) {
      result =
          ProbeError(absl::StrCat(kMaxPendingProbes,
                                  " dry runs are already waiting for a worker; "
                                  "try again in a few seconds"));
    } else {
      id = absl::StrCat("probe-", next_probe_++);
      PendingProbe& pending = probes_[id];
      pending.worker = pick->info.name();
      answer = pending.done.get_future();
      link = pick->link;
    }
  }
  if (link != nullptr) {
    v1::CoordinatorMessage m;
    m.mutable_probe_data()->set_request_id(id);
    *m.mutable_probe_data()->mutable_data() = dry->job().spec().data();
    if (!link->Send(m)) {
      result = ProbeError("the worker's stream closed before it was asked");
    } else if (answer.wait_for(kProbeWait) == std::future_status::ready) {
      result = answer.get();
    } else {
      result = ProbeError(absl::StrCat(
          "worker did not answer within ",
          std::chrono::duration_cast<std::chrono::seconds>(kProbeWait).count(),
          " s"));
    }
    std::lock_guard<std::mutex> lock(mu_);
    probes_.erase(id);
  }
  ApplyDataProbeResult(result, &*dry);
  return dry;
}

void JobManager::OnProbeDataResult(const std::string& worker,
                                   const v1::ProbeDataResult& result) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = probes_.find(result.request_id());
  // Only the worker that was asked answers; late answers are dropped.
  if (it == probes_.end() || it->second.worker != worker) {
    TLOG_WARNING << "worker " << worker
                 << " answered a data check nobody waits for";
    return;
  }
  it->second.done.set_value(result);
  probes_.erase(it);
}

}  // namespace trainctl::coordinator
