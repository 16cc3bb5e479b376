#include "coordinator/http/coordinator_metrics.h"

#include <functional>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "coordinator/job_accounting.h"
#include "coordinator/job_state.h"

namespace trainctl::coordinator::http {
namespace {

constexpr v1::JobState kStates[] = {
    v1::JOB_STATE_QUEUED,    v1::JOB_STATE_RUNNING, v1::JOB_STATE_RESTARTING,
    v1::JOB_STATE_PREEMPTED, v1::JOB_STATE_SUCCEEDED, v1::JOB_STATE_FAILED,
    v1::JOB_STATE_CANCELLED};

// One gauge (or counter) family with one sample per job from `value`; a job
// for which `value` returns false has no sample.
void PerJob(PrometheusText& out, const std::vector<const v1::Job*>& jobs,
            const char* name, const char* type, const char* help,
            const std::function<bool(const v1::Job&, double*)>& value) {
  out.Family(name, type, help);
  for (const v1::Job* job : jobs) {
    double v = 0;
    if (value(*job, &v)) out.Sample({{"job", job->id()}}, v);
  }
}

bool TrainValue(const v1::Job& job, const char* key, double* v) {
  const auto& values = job.latest_train().values();
  auto it = values.find(key);
  if (it == values.end()) return false;
  *v = it->second;
  return true;
}

// An eval point's timings and counts (eval_ms, eval_samples), which are
// not results: they go to their own families, not trainctl_job_eval.
bool IsEvalTiming(const std::string& key) {
  return absl::EndsWith(key, "_ms") || key == "eval_samples";
}

}  // namespace

void WriteBuildInfo(const ServerBuild& build, PrometheusText& out) {
  out.Family("trainctl_build_info", "gauge",
             "1, labelled with the coordinator's version and the gRPC and "
             "Protobuf it was built with.");
  out.Sample({{"version", build.version},
              {"grpc", build.grpc_version},
              {"protobuf", build.protobuf_version}},
             1);
  out.Family("trainctl_coordinator_start_time_seconds", "gauge",
             "Unix time the coordinator process started.");
  out.Sample({}, build.started_unix_ms / 1000.0);
}

std::string StateLabel(v1::JobState state) {
  return absl::AsciiStrToLower(StateName(state));
}

void WriteClusterMetrics(const std::vector<v1::Job>& jobs,
                         const std::vector<v1::WorkerInfo>& workers,
                         int64_t now_unix_ms, PrometheusText& out) {
  std::map<v1::JobState, int> by_state;
  for (const v1::Job& job : jobs) ++by_state[job.state()];
  out.Family("trainctl_jobs", "gauge", "Jobs the coordinator knows, by state.");
  for (v1::JobState state : kStates) {
    out.Sample({{"state", StateLabel(state)}}, by_state[state]);
  }
  out.Family("trainctl_jobs_submitted_total", "counter",
             "Jobs ever submitted (kept across coordinator restarts).");
  out.Sample({}, static_cast<double>(jobs.size()));
  out.Family("trainctl_jobs_finished_total", "counter",
             "Jobs that reached a final state, by that state.");
  for (v1::JobState state : kStates) {
    if (IsFinal(state)) out.Sample({{"state", StateLabel(state)}}, by_state[state]);
  }

  int slots_total = 0, slots_free = 0;
  for (const v1::WorkerInfo& w : workers) {
    slots_total += w.slots_total();
    slots_free += w.slots_free();
  }
  out.Family("trainctl_workers", "gauge", "Registered (connected) workers.");
  out.Sample({}, static_cast<double>(workers.size()));
  out.Family("trainctl_slots_total", "gauge", "Slots of all registered workers.");
  out.Sample({}, slots_total);
  out.Family("trainctl_slots_free", "gauge", "Slots not running a rank.");
  out.Sample({}, slots_free);
  out.Family("trainctl_worker_slots_free", "gauge", "Free slots per worker.");
  for (const v1::WorkerInfo& w : workers) {
    out.Sample({{"worker", w.name()}}, w.slots_free());
  }
  out.Family("trainctl_worker_last_heartbeat_timestamp_seconds", "gauge",
             "Unix time of each worker's last heartbeat.");
  for (const v1::WorkerInfo& w : workers) {
    out.Sample({{"worker", w.name()}}, w.last_heartbeat_unix_ms() / 1000.0);
  }

  std::vector<const v1::Job*> shown;
  for (const v1::Job& job : jobs) {
    if (!IsFinal(job.state()) ||
        now_unix_ms - job.finished_unix_ms() < kFinishedJobRetentionMs) {
      shown.push_back(&job);
    }
  }
  // The job's name and state ride on an info series only, so a rename or a
  // state change does not start new series for every other metric.
  out.Family("trainctl_job_info", "gauge",
             "1 per job shown: its name, owner and state (active jobs and "
             "jobs ended in the last 10 minutes).");
  for (const v1::Job* job : shown) {
    out.Sample({{"job", job->id()},
                {"name", job->spec().name()},
                {"owner", job->owner()},
                {"state", StateLabel(job->state())}},
               1);
  }
  std::map<const v1::Job*, v1::JobAccount> accounts;
  for (const v1::Job* job : shown) accounts[job] = AccountJob(*job, {}, now_unix_ms);
  PerJob(out, shown, "trainctl_job_submitted_timestamp_seconds", "gauge",
         "Unix time the job was submitted.", [](const v1::Job& j, double* v) {
           *v = j.created_unix_ms() / 1000.0;
           return true;
         });
  PerJob(out, shown, "trainctl_job_start_timestamp_seconds", "gauge",
         "Unix time the job first started running (none before).",
         [&](const v1::Job& j, double* v) {
           *v = accounts.at(&j).first_started_unix_ms() / 1000.0;
           return accounts.at(&j).first_started_unix_ms() > 0;
         });
  PerJob(out, shown, "trainctl_job_slot_seconds_total", "counter",
         "Slot time the job used: each RUNNING period times the ranks it "
         "held (trainctl history's slot-hours, in seconds).",
         [&](const v1::Job& j, double* v) {
           *v = accounts.at(&j).slot_hours() * 3600.0;
           return true;
         });
  PerJob(out, shown, "trainctl_job_step", "gauge",
         "Optimizer steps done, as of the latest train metric.",
         [](const v1::Job& j, double* v) {
           *v = static_cast<double>(j.latest_train().step());
           return true;
         });
  PerJob(out, shown, "trainctl_job_total_steps", "gauge",
         "Optimizer steps the job will run in all.",
         [](const v1::Job& j, double* v) {
           *v = static_cast<double>(j.total_steps());
           return j.total_steps() > 0;
         });
  PerJob(out, shown, "trainctl_job_epoch", "gauge",
         "Epoch of the latest train metric.", [](const v1::Job& j, double* v) {
           *v = j.latest_train().epoch();
           return j.has_latest_train();
         });
  PerJob(out, shown, "trainctl_job_loss", "gauge", "Latest training loss.",
         [](const v1::Job& j, double* v) { return TrainValue(j, "loss", v); });
  PerJob(out, shown, "trainctl_job_learning_rate", "gauge",
         "Learning rate of the latest training step.",
         [](const v1::Job& j, double* v) { return TrainValue(j, "lr", v); });
  PerJob(out, shown, "trainctl_job_step_seconds", "gauge",
         "Time per optimizer step over the latest logging window.",
         [](const v1::Job& j, double* v) {
           if (!TrainValue(j, "step_ms", v)) return false;
           *v /= 1000.0;
           return true;
         });
  PerJob(out, shown, "trainctl_job_samples_per_second", "gauge",
         "Training throughput of the latest logging window.",
         [](const v1::Job& j, double* v) {
           return TrainValue(j, "samples_per_sec", v);
         });
  PerJob(out, shown, "trainctl_job_restarts_total", "counter",
         "Generations restarted after a failure.",
         [](const v1::Job& j, double* v) {
           *v = j.restarts();
           return true;
         });
  PerJob(out, shown, "trainctl_job_generation", "gauge",
         "Current generation (1 for the first run).",
         [](const v1::Job& j, double* v) {
           *v = j.generation();
           return true;
         });
  PerJob(out, shown, "trainctl_job_world_size", "gauge",
         "Ranks of the current generation.", [](const v1::Job& j, double* v) {
           *v = j.world_size();
           return true;
         });
  out.Family("trainctl_job_eval", "gauge",
             "Latest evaluation results, one series per metric "
             "(eval_loss, eval_accuracy, eval_f1, eval_perplexity, ...); "
             "its time and sample count are trainctl_job_eval_seconds and "
             "trainctl_job_eval_samples.");
  for (const v1::Job* job : shown) {
    // std::map: a stable order, so the output is deterministic.
    std::map<std::string, double> values(job->latest_eval().values().begin(),
                                         job->latest_eval().values().end());
    for (const auto& [key, value] : values) {
      if (!IsEvalTiming(key)) out.Sample({{"job", job->id()}, {"metric", key}}, value);
    }
  }
  auto eval_value = [](const v1::Job& j, const char* key, double* v) {
    auto it = j.latest_eval().values().find(key);
    if (it == j.latest_eval().values().end()) return false;
    *v = it->second;
    return true;
  };
  PerJob(out, shown, "trainctl_job_eval_seconds", "gauge",
         "How long the latest evaluation took.", [&](const v1::Job& j, double* v) {
           if (!eval_value(j, "eval_ms", v)) return false;
           *v /= 1000.0;
           return true;
         });
  PerJob(out, shown, "trainctl_job_eval_samples", "gauge",
         "Samples the latest evaluation covered.",
         [&](const v1::Job& j, double* v) { return eval_value(j, "eval_samples", v); });
}

}  // namespace trainctl::coordinator::http
