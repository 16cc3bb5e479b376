#include "client/render.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/format.h"
#include "common/memory_plan.h"
#include "common/proto_json.h"
#include "common/vocabulary.h"
#include "client/live_view.h"

namespace trainctl::client {
namespace {

constexpr size_t kReasonWidth = 60;

// "Label:" padded so values line up in the status view.
std::string Field(const std::string& label, const std::string& value) {
  return absl::StrFormat("%-12s %s\n", label + ":", value);
}

std::string Indent(const std::string& block) {
  std::string out;
  for (absl::string_view line :
       absl::StrSplit(block, '\n', absl::SkipEmpty())) {
    absl::StrAppend(&out, "  ", line, "\n");
  }
  return out;
}

std::string TimeWithAge(int64_t ms, const RenderContext& ctx) {
  if (ms == 0) return "-";
  return absl::StrCat(FormatTimestamp(ms, ctx.tz), " (",
                      FormatAge(ms, ctx.now_unix_ms), " ago)");
}

std::string SpecSummary(const v1::JobSpec& spec) {
  std::string out;
  std::string model = spec.model().type();
  if (spec.model().hidden_size() > 0) {
    absl::StrAppend(&model, " hidden [",
                    absl::StrJoin(spec.model().hidden(), ","), "]");
  }
  out += Field("Model", model);
  out += Field("Ranks", absl::StrCat(spec.ranks()));
  std::string batch = absl::StrCat(spec.training().batch_size(), " global");
  if (spec.ranks() > 0) {
    absl::StrAppend(&batch, ", ", spec.training().batch_size() / spec.ranks(),
                    " per rank");
  }
  out += Field("Batch", batch);
  std::string epochs = absl::StrCat(spec.training().epochs());
  if (spec.training().max_steps() > 0) {
    absl::StrAppend(&epochs, " (max ", spec.training().max_steps(), " steps)");
  }
  out += Field("Epochs", epochs);
  out += Field("Optimizer",
               absl::StrCat(spec.optimizer().type(), " lr ",
                            absl::StrFormat("%g", spec.optimizer().lr())));
  return out;
}

std::string MetricSummary(const v1::MetricPoint& point,
                          const RenderContext& ctx) {
  return absl::StrCat(FormatMetricValues(point, ctx.wide), " (step ", point.step(),
                      ", epoch ", EpochForPeople(point.epoch()), ", at ",
                      FormatClock(point.time_unix_ms(), ctx.tz), ")");
}

}  // namespace

std::string FormatProgress(const v1::Job& job) {
  const int64_t step = job.latest_train().step();
  if (step == 0 && job.total_steps() == 0) return "-";
  if (job.total_steps() == 0) return absl::StrCat(step);
  return absl::StrCat(step, "/", job.total_steps());
}

std::string JobReason(const v1::Job& job) {
  if (IsWaiting(job.state()) &&
      !job.pending_reason().empty()) {
    return job.pending_reason();
  }
  return job.reason();
}

v1::ListJobsResponse RecentJobs(const v1::ListJobsResponse& response,
                                int64_t now_unix_ms, absl::Duration keep,
                                int* hidden) {
  v1::ListJobsResponse kept;
  *hidden = 0;
  const int64_t cutoff = now_unix_ms - absl::ToInt64Milliseconds(keep);
  for (const v1::Job& job : response.jobs()) {
    // A final job without a finish time (never started) counts by creation.
    const int64_t ended = job.finished_unix_ms() != 0 ? job.finished_unix_ms()
                                                      : job.created_unix_ms();
    if (IsFinalState(job.state()) && ended < cutoff) {
      ++*hidden;
      continue;
    }
    *kept.add_jobs() = job;
  }
  return kept;
}

const std::vector<std::string>& JobTableHeader() {
  static const auto* const kHeader = new std::vector<std::string>{
      "ID", "NAME", "STATE", "RANKS", "STEP", "AGE", "REASON"};
  return *kHeader;
}

std::vector<std::string> JobTableRow(const v1::Job& job, const RenderContext& ctx) {
  return {job.id(), job.spec().name(), StateName(job.state()),
          absl::StrCat(job.spec().ranks()), FormatProgress(job),
          FormatAge(job.created_unix_ms(), ctx.now_unix_ms),
          Truncate(JobReason(job), kReasonWidth)};
}

std::string RenderJobTable(const v1::ListJobsResponse& response,
                           const RenderContext& ctx) {
  std::vector<std::vector<std::string>> rows;
  for (const v1::Job& job : response.jobs()) rows.push_back(JobTableRow(job, ctx));
  return RenderTable(JobTableHeader(), rows);
}

std::string RenderJobStatus(const v1::Job& job, const RenderContext& ctx) {
  std::string out;
  out += Field("Job", job.id());
  out += Field("Name", job.spec().name());
  out += Field("State", StateName(job.state()));
  if (!job.spec().priority().empty()) {
    const bool pending = IsWaiting(job.state());
    out += Field("Priority",
                 absl::StrCat(job.spec().priority(),
                              pending ? " (trainctl queue shows its place)" : ""));
  }
  if (IsWaiting(job.state()) &&
      !job.pending_reason().empty()) {
    out += Field("Waiting", job.pending_reason());
  }
  if (!job.reason().empty()) out += Field("Reason", job.reason());
  out += Field("Generation",
               absl::StrCat(job.generation(), " (", job.world_size(),
                            " ranks), restarts ", job.restarts(), " of ",
                            job.spec().fault_tolerance().max_restarts(),
                            job.preemptions() > 0
                                ? absl::StrCat(", preempted ", job.preemptions(),
                                               job.preemptions() == 1 ? " time"
                                                                      : " times")
                                : ""));
  if (const int spares = job.spec().fault_tolerance().spares(); spares > 0) {
    out += Field("Spares",
                 job.state() == v1::JOB_STATE_RUNNING
                     ? absl::StrCat(job.spare_workers_size(), " of ", spares, " held",
                                    job.spare_workers_size() > 0
                                        ? absl::StrCat(" (", absl::StrJoin(job.spare_workers(), ", "), ")")
                                        : " (no free slot within its quotas)")
                     : absl::StrCat(spares, " asked for, held while it runs"));
  }
  for (const v1::Straggler& s : job.stragglers()) {
    out += Field("Straggler",
                 absl::StrFormat("rank %d on %s: %.2fx its peers' %s time per "
                                 "step (since step %d)",
                                 s.rank(), s.worker(), s.ratio(), s.phase(),
                                 s.since_step()));
  }
  if (!job.resume_from().path().empty()) {
    out += Field("Resumed from",
                 absl::StrCat(job.resume_from().job_id(), " step ",
                              job.resume_from().step(), " (",
                              job.resume_from().path(), ")"));
  }
  out += Field("Created", TimeWithAge(job.created_unix_ms(), ctx));
  out += Field("Started", TimeWithAge(job.started_unix_ms(), ctx));
  out += Field("Finished", TimeWithAge(job.finished_unix_ms(), ctx));
  out += SpecSummary(job.spec());

  std::string progress = FormatProgress(job);
  if (job.total_steps() > 0 && job.latest_train().step() > 0) {
    absl::StrAppendFormat(
        &progress, " (%.1f%%)",
        100.0 * job.latest_train().step() / job.total_steps());
  }
  out += Field("Progress", progress);
  if (job.state() == v1::JOB_STATE_RUNNING) {
    const std::string startup =
        StartupProgress(job, TrainedThisGeneration(job));
    if (!startup.empty()) out += Field("Starting", startup);
    std::optional<absl::Duration> eta =
        EstimateRemaining({job.latest_train()}, job.total_steps(), job.spec());
    if (eta) out += Field("ETA", FormatDurationShort(*eta));
  }
  if (job.has_latest_train()) {
    out += Field("Train", MetricSummary(job.latest_train(), ctx));
    const std::string step_time = StepTimeSummary(job.latest_train(), job);
    if (!step_time.empty()) out += Field("Step time", step_time.substr(10));
  }
  if (job.has_latest_eval()) {
    out += Field("Eval", MetricSummary(job.latest_eval(), ctx));
  }

  if (job.ranks_size() > 0) {
    std::vector<std::vector<std::string>> rows;
    for (const v1::RankInfo& r : job.ranks()) {
      const bool exited = r.state() == v1::RANK_STATE_EXITED;
      std::string step = "-", phase = "-";
      for (const v1::RankProgress& p : job.progress()) {
        if (p.rank() != r.rank()) continue;
        step = absl::StrCat(p.step());
        phase = p.phase();
      }
      rows.push_back({absl::StrCat(r.rank()), r.worker(), r.host(),
                      RankStateName(r.state()), r.joined() ? "yes" : "no",
                      step, phase,
                      exited ? absl::StrCat(r.exit_code()) : "-",
                      Truncate(r.message(), kReasonWidth)});
    }
    out += "\nRanks:\n";
    out += Indent(RenderTable({"RANK", "WORKER", "HOST", "STATE", "JOINED",
                               "STEP", "PHASE", "EXIT", "MESSAGE"},
                              rows));
  }
  if (job.transitions_size() > 0) {
    std::vector<std::vector<std::string>> rows;
    for (const v1::Transition& t : job.transitions()) {
      rows.push_back(
          {FormatTimestamp(t.time_unix_ms(), ctx.tz),
           t.from() == v1::JOB_STATE_UNSPECIFIED ? "-" : StateName(t.from()),
           StateName(t.to()), t.reason()});
    }
    out += "\nTransitions:\n";
    out += Indent(RenderTable({"TIME", "FROM", "TO", "REASON"}, rows));
  }
  return out;
}

std::string RenderMemoryPlan(const v1::MemoryPlan& m, const v1::JobSpec& spec) {
  if (m.parameters() == 0) {
    return absl::StrCat("not planned: ", m.note().empty() ? "unknown model size" : m.note());
  }
  const bool checkpointing = spec.training().gradient_checkpointing();
  const int64_t other = checkpointing ? m.activation_bytes_plain()
                                      : m.activation_bytes_checkpointed();
  std::string activations = absl::StrCat(FormatBytes(m.activation_bytes()), " (estimate");
  if (other != m.activation_bytes()) {
    absl::StrAppend(&activations, "; ", FormatBytes(other),
                    checkpointing ? " without" : " with", " gradient_checkpointing");
  }
  activations += ")";
  const double millions = static_cast<double>(m.parameters()) / 1e6;
  return absl::StrCat(FormatBytes(m.total_bytes()), " = parameters ",
                      FormatBytes(m.parameter_bytes()), " (",
                      absl::StrFormat(millions >= 10 ? "%.0f" : "%.2f", millions),
                      " M) + gradients ", FormatBytes(m.gradient_bytes()), " + ",
                      spec.optimizer().type(), " state ", FormatBytes(m.optimizer_bytes()),
                      " + activations ", activations);
}

std::string RenderDryRunPlan(const v1::SubmitJobResponse& response) {
  const v1::DryRunPlan& plan = response.plan();
  std::string out;
  const std::string slots =
      absl::StrCat("needs ", plan.ranks(), " slot", plan.ranks() == 1 ? "" : "s",
                   "; ", plan.slots_free(), " of ", plan.slots_total(), " free",
                   plan.slots_spare() > 0
                       ? absl::StrCat(" (", plan.slots_spare(), " held as ",
                                      plan.slots_spare() == 1 ? "a spare" : "spares", ")")
                       : "",
                   " on ", plan.workers(), " worker", plan.workers() == 1 ? "" : "s");
  if (!plan.placement().empty()) {
    out += Field("Would run", absl::StrCat(plan.placement(), " (", slots, ")"));
  } else {
    std::string wait = plan.waiting().empty() ? slots : plan.waiting();
    if (plan.jobs_ahead() > 0) {
      absl::StrAppend(&wait, " (", plan.jobs_ahead(), " job",
                      plan.jobs_ahead() == 1 ? "" : "s", " queued ahead)");
    }
    out += Field("Would wait", wait);
  }
  if (plan.train_samples() > 0) {
    out += Field("Shard plan",
                 absl::StrCat(plan.train_samples(), " samples per epoch in ",
                              plan.steps_per_epoch(), " steps of ",
                              plan.samples_per_step(), " (", plan.per_rank_batch(),
                              " per rank per micro-step); ",
                              plan.dropped_per_epoch(), " dropped per epoch"));
  } else {
    out += Field("Shard plan",
                 absl::StrCat(plan.samples_per_step(), " samples per step (",
                              plan.per_rank_batch(), " per rank per micro-step); ",
                              plan.data_note()));
  }
  out += Field("Memory/rank", RenderMemoryPlan(plan.memory(), response.job().spec()));
  if (!plan.memory().warning().empty()) out += Field("Warning", plan.memory().warning());
  const v1::Job& job = response.job();
  // "total steps: N" is what scripts grep; keep its spelling.
  if (job.total_steps() > 0) {
    absl::StrAppend(&out, "total steps: ", job.total_steps(), "\n");
  } else if (!job.reason().empty()) {
    absl::StrAppend(&out, job.reason(), "\n");
  }
  return out;
}

std::string RenderWorkerTable(const v1::ListWorkersResponse& response,
                              const RenderContext& ctx) {
  std::vector<std::vector<std::string>> rows;
  for (const v1::WorkerInfo& w : response.workers()) {
    std::string heartbeat =
        FormatAge(w.last_heartbeat_unix_ms(), ctx.now_unix_ms);
    if (heartbeat != "-") heartbeat += " ago";
    // Ranks 0 and 1 of job-3 -> "job-3:0,1", in the order the jobs appear.
    std::vector<std::pair<std::string, std::vector<std::string>>> by_job;
    for (const v1::RankRef& ref : w.ranks()) {
      auto it = std::find_if(by_job.begin(), by_job.end(),
                             [&](const auto& e) { return e.first == ref.job_id(); });
      if (it == by_job.end()) {
        by_job.push_back({ref.job_id(), {}});
        it = by_job.end() - 1;
      }
      it->second.push_back(absl::StrCat(ref.rank()));
    }
    std::vector<std::string> running;
    for (const auto& [job, ranks] : by_job) {
      running.push_back(ranks.empty() ? job
                                      : absl::StrCat(job, ":",
                                                     absl::StrJoin(ranks, ",")));
    }
    for (const std::string& job : w.spare_for()) running.push_back("spare:" + job);
    rows.push_back(
        {w.name(), w.host(), absl::StrCat(w.slots_free(), "/", w.slots_total()),
         w.gpu_slots_total() == 0
             ? "-"
             : absl::StrCat(w.gpu_slots_free(), "/", w.gpu_slots_total()),
         w.devices().empty() ? "-" : absl::StrJoin(w.devices(), ","), heartbeat,
         running.empty() ? "-" : absl::StrJoin(running, " ")});
  }
  // SLOTS and GPU SLOTS: free/total.
  return RenderTable({"NAME", "ADDRESS", "SLOTS", "GPU SLOTS", "DEVICES",
                      "LAST HEARTBEAT", "RUNNING"},
                     rows);
}

std::string RenderCheckpointTable(const v1::ListCheckpointsResponse& response,
                                  const RenderContext& ctx) {
  std::vector<std::vector<std::string>> rows;
  for (const v1::Checkpoint& c : response.checkpoints()) {
    // The eval results it was kept by; timings and spreads with --wide.
    v1::MetricPoint point;
    point.set_kind(MetricKindName(MetricKind::kEval));
    point.mutable_values()->insert(c.metrics().begin(), c.metrics().end());
    std::vector<std::string> keys = MetricHeadlineKeys(point);
    if (ctx.wide) {
      keys.clear();
      for (const auto& [name, value] : c.metrics()) keys.push_back(name);
    }
    std::vector<std::string> eval;
    for (const std::string& name : keys) {
      eval.push_back(absl::StrFormat("%s=%.4g", name, c.metrics().at(name)));
    }
    std::sort(eval.begin(), eval.end());
    rows.push_back({absl::StrCat(c.step()), absl::StrCat(EpochForPeople(c.epoch())),
                    absl::StrCat(c.samples_in_epoch()),
                    absl::StrCat(c.world_size()),
                    absl::StrFormat("%.1f MB", c.bytes() / 1e6),
                    // How long training stood still for it ("-": an older record).
                    c.blocked_ms() > 0 ? absl::StrFormat("%.0f ms", c.blocked_ms())
                                       : "-",
                    FormatAge(c.created_unix_ms(), ctx.now_unix_ms),
                    eval.empty() ? "-" : absl::StrJoin(eval, " "), c.path()});
  }
  return RenderTable({"STEP", "EPOCH", "SAMPLES", "RANKS", "SIZE", "BLOCKED",
                      "AGE", "EVAL", "PATH"},
                     rows);
}

std::string RenderEventLine(const v1::JobEvent& event, int64_t total_steps,
                            const RenderContext& ctx) {
  switch (event.kind_case()) {
    case v1::JobEvent::kTransition: {
      const v1::Transition& t = event.transition();
      const int64_t ms =
          t.time_unix_ms() != 0 ? t.time_unix_ms() : event.time_unix_ms();
      std::string line = FormatClock(ms, ctx.tz) + " ";
      // The first transition comes from nowhere: show only where it went.
      if (t.from() != v1::JOB_STATE_UNSPECIFIED) {
        absl::StrAppend(&line, StateName(t.from()), " -> ");
      }
      absl::StrAppend(&line, StateName(t.to()));
      if (!t.reason().empty()) absl::StrAppend(&line, ": ", t.reason());
      return line;
    }
    case v1::JobEvent::kMetric: {
      const v1::MetricPoint& m = event.metric();
      const int64_t ms =
          m.time_unix_ms() != 0 ? m.time_unix_ms() : event.time_unix_ms();
      const std::string kind = m.kind().empty() ? "metric" : m.kind();
      std::string step = absl::StrCat(m.step());
      if (ParseMetricKind(m.kind()) == MetricKind::kTrain && total_steps > 0) {
        absl::StrAppend(&step, "/", total_steps);
      }
      std::string line = absl::StrCat(FormatClock(ms, ctx.tz), " ", kind,
                                      " step ", step, " epoch ", EpochForPeople(m.epoch()));
      const std::string values = FormatMetricValues(m, ctx.wide);
      if (!values.empty()) absl::StrAppend(&line, " ", values);
      return line;
    }
    case v1::JobEvent::kLog: {
      absl::string_view text = event.log().text();
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
        text.remove_suffix(1);
      }
      return absl::StrCat("[rank ", event.log().rank(), "] ", text);
    }
    default:
      return absl::StrCat(FormatClock(event.time_unix_ms(), ctx.tz), " event ",
                          event.seq());
  }
}

std::string RenderSpecErrors(const std::string& path,
                             const std::string& message) {
  std::string out = absl::StrCat("invalid job spec ", path, ":\n");
  for (absl::string_view problem :
       absl::StrSplit(message, "; ", absl::SkipWhitespace())) {
    absl::StrAppend(&out, "  ", absl::StripAsciiWhitespace(problem), "\n");
  }
  return out;
}

std::string ToJson(const google::protobuf::Message& message, bool pretty) {
  std::string json;
  if (!ProtoToJson(message, pretty, &json)) {
    // Only invalid UTF-8 in a string field; still emit valid JSON.
    return absl::StrCat("{\"error\": \"cannot encode ", message.GetTypeName(),
                        " as JSON\"}");
  }
  return json;
}

}  // namespace trainctl::client
