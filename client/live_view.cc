#include "client/live_view.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/format.h"
#include "common/vocabulary.h"

namespace trainctl::client {
namespace {

// Eighth blocks, lowest first (U+2581..U+2588).
constexpr const char* kBlocks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
// Left-aligned partial cells of the progress bar, 1/8 to 7/8.
constexpr const char* kPartial[] = {"▏", "▎", "▍", "▌", "▋", "▊", "▉"};

std::optional<double> Value(const v1::MetricPoint& point,
                            const std::string& key) {
  auto it = point.values().find(key);
  if (it == point.values().end() || !std::isfinite(it->second)) {
    return std::nullopt;
  }
  return it->second;
}

std::string Ms(double ms) {
  return ms >= 100 ? absl::StrFormat("%.0f", ms) : absl::StrFormat("%.1f", ms);
}

std::string RankWhere(const v1::Job& job, int rank) {
  for (const v1::RankInfo& r : job.ranks()) {
    if (r.rank() == rank && !r.worker().empty()) {
      return absl::StrCat("rank ", rank, " on ", r.worker());
    }
  }
  return absl::StrCat("rank ", rank);
}

// The rank the latest point names as slowest, or -1.
int SlowestRank(const LiveModel& model) {
  if (model.recent_train.empty()) return -1;
  std::optional<double> slowest = Value(model.recent_train.back(), "slowest_rank");
  return slowest ? static_cast<int>(*slowest) : -1;
}

std::string HeaderLine(const LiveModel& model) {
  const v1::Job& job = model.job;
  std::string line = absl::StrCat(job.id(), " ", job.spec().name(), "  ",
                                  StateName(model.state));
  if (job.generation() > 0) {
    absl::StrAppend(&line, "  generation ", job.generation(), ", ",
                    job.world_size() > 0 ? job.world_size() : job.spec().ranks(),
                    " ranks");
  }
  if (job.restarts() > 0) {
    absl::StrAppend(&line, ", restarts ", job.restarts(), " of ",
                    job.spec().fault_tolerance().max_restarts());
  }
  return line;
}

std::string ProgressLine(const LiveModel& model, const LiveViewOptions& options) {
  const v1::Job& job = model.job;
  const int64_t total = job.total_steps();
  const v1::MetricPoint* last =
      model.recent_train.empty() ? nullptr : &model.recent_train.back();
  const int64_t step = last != nullptr ? last->step() : 0;
  std::string tail = absl::StrCat(" step ", step);
  if (total > 0) absl::StrAppend(&tail, "/", total);
  if (last != nullptr) {
    absl::StrAppend(&tail, "  epoch ", EpochForPeople(last->epoch()));
    if (job.spec().training().epochs() > 0) {
      absl::StrAppend(&tail, "/", job.spec().training().epochs());
    }
  }
  std::optional<absl::Duration> eta =
      EstimateRemaining(model.recent_train, total, job.spec());
  if (eta) absl::StrAppend(&tail, "  ETA ", FormatDurationShort(*eta));
  if (total <= 0) return absl::StrCat("progress:", tail);
  const double fraction = static_cast<double>(step) / total;
  const std::string percent = absl::StrFormat(" %3.0f%%", 100 * fraction);
  // The bar takes what the text leaves, between 10 and 40 cells.
  const int text = static_cast<int>(tail.size() + percent.size()) + 2;
  const int cells = std::clamp(options.width - text, 10, 40);
  return absl::StrCat(ProgressBar(fraction, cells), percent, tail);
}

std::string LossLine(const LiveModel& model) {
  const v1::MetricPoint& last = model.recent_train.back();
  std::vector<std::string> parts;
  if (std::optional<double> loss = Value(last, "loss")) {
    std::vector<double> history;
    for (const v1::MetricPoint& p : model.recent_train) {
      std::optional<double> v = Value(p, "loss");
      history.push_back(v ? *v : NAN);
    }
    std::string loss_text = absl::StrCat(FormatMetricValue("loss", *loss), " ",
                                         Sparkline(history));
    std::optional<double> lo = Value(last, "loss_min");
    std::optional<double> hi = Value(last, "loss_max");
    if (lo && hi) {
      absl::StrAppendFormat(&loss_text, " (ranks %.4f-%.4f)", *lo, *hi);
    }
    parts.push_back(loss_text);
  }
  if (std::optional<double> sps = Value(last, "samples_per_sec")) {
    parts.push_back(FormatMetricValue("samples_per_sec", *sps));
  }
  if (std::optional<double> lr = Value(last, "lr")) {
    parts.push_back(absl::StrFormat("lr %.3g", *lr));
  }
  return absl::StrJoin(parts, "  ");
}

// One row per rank: worker, step and phase from the ranks' progress; the
// slowest rank marked.
std::vector<std::string> RankRows(const LiveModel& model, size_t max_rows) {
  const v1::Job& job = model.job;
  std::vector<std::string> rows;
  if (job.ranks_size() == 0) return rows;
  const int slowest = SlowestRank(model);
  if (static_cast<size_t>(job.ranks_size()) > max_rows) {
    if (slowest >= 0) {
      rows.push_back(absl::StrCat(job.ranks_size(), " ranks; slowest: ",
                                  RankWhere(job, slowest)));
    }
    return rows;
  }
  // The ranks' progress comes with their agents' heartbeats, up to a couple
  // of seconds behind the metrics. In synchronous data parallelism a logged
  // step was finished by every rank (each took part in its all-reduce), so
  // no rank is behind it; under local SGD the ranks may drift between
  // averages, and their own reports stand.
  int64_t logged_step = -1;
  if (model.trained_this_generation && !model.recent_train.empty() &&
      job.spec().training().local_sgd_steps() <= 0) {
    logged_step = model.recent_train.back().step();
  }
  std::vector<std::vector<std::string>> table;
  for (const v1::RankInfo& r : job.ranks()) {
    std::string step = "-", phase = "-";
    for (const v1::RankProgress& p : job.progress()) {
      if (p.rank() != r.rank()) continue;
      step = absl::StrCat(std::max(p.step(), logged_step));
      phase = p.phase();
    }
    if (r.state() == v1::RANK_STATE_EXITED) {
      phase = absl::StrCat("exited ", r.exit_code());
    } else if (!r.joined() && phase == "-") {
      // ASSIGNED: its process has not started; RUNNING: started, not yet
      // heard from.
      phase = r.state() == v1::RANK_STATE_ASSIGNED ? "assigned" : "starting";
    }
    table.push_back({absl::StrCat("rank ", r.rank()), r.worker(), step, phase,
                     r.rank() == slowest ? "◀ slowest" : ""});
  }
  const std::string text = RenderTable({"", "WORKER", "STEP", "PHASE", ""}, table);
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    rows.push_back("  " + text.substr(start, end - start));
    start = end + 1;
  }
  return rows;
}

}  // namespace

void ApplyJobSnapshot(LiveModel& model, const v1::Job& job) {
  model.job = job;
  model.have_job = true;
  if (model.state == v1::JOB_STATE_UNSPECIFIED) {
    model.state = job.state();
    model.state_reason = JobReason(job);
  }
}

std::vector<std::string> ApplyEvent(LiveModel& model, const v1::JobEvent& event,
                                    const RenderContext& ctx) {
  switch (event.kind_case()) {
    case v1::JobEvent::kTransition:
      model.state = event.transition().to();
      model.state_reason = event.transition().reason();
      if (model.state == v1::JOB_STATE_RUNNING) {
        model.trained_this_generation = false;
      }
      return {RenderEventLine(event, model.job.total_steps(), ctx)};
    case v1::JobEvent::kMetric: {
      const v1::MetricPoint& m = event.metric();
      // As the coordinator does: a metric (or log line, below) of the running
      // generation means its rank has joined; the next snapshot would say so
      // a second later.
      if (model.state == v1::JOB_STATE_RUNNING && m.rank() >= 0 &&
          m.rank() < model.job.ranks_size()) {
        model.job.mutable_ranks(m.rank())->set_joined(true);
      }
      const MetricKind kind = ParseMetricKind(m.kind());
      if (kind == MetricKind::kTrain) {
        model.trained_this_generation = true;
        // Steps trained again after a restart start a fresh history.
        if (!model.recent_train.empty() &&
            m.step() < model.recent_train.back().step()) {
          model.recent_train.clear();
        }
        model.recent_train.push_back(m);
        while (model.recent_train.size() > kRecentTrainPoints) {
          model.recent_train.pop_front();
        }
      } else if (kind == MetricKind::kEval) {
        model.latest_eval = m;
      } else if (kind == MetricKind::kPlan) {
        auto it = m.values().find("total_steps");
        if (it != m.values().end()) {
          model.job.set_total_steps(static_cast<int64_t>(it->second));
        }
      }
      return {};
    }
    case v1::JobEvent::kLog:
      model.last_log = RenderEventLine(event, 0, ctx);
      if (model.state == v1::JOB_STATE_RUNNING && event.log().rank() >= 0 &&
          event.log().rank() < model.job.ranks_size()) {
        model.job.mutable_ranks(event.log().rank())->set_joined(true);
      }
      return {};
    default:
      return {};
  }
}

std::vector<std::string> RenderLiveView(const LiveModel& model,
                                        const LiveViewOptions& options) {
  std::vector<std::string> lines;
  lines.push_back(HeaderLine(model));
  const v1::JobState state = model.state;
  if (IsWaiting(state)) {
    const std::string why = model.job.pending_reason().empty()
                                ? model.state_reason
                                : model.job.pending_reason();
    if (!why.empty()) lines.push_back(absl::StrCat("waiting: ", why));
  }
  if (state == v1::JOB_STATE_RUNNING) {
    const std::string startup = StartupProgress(
        model.job,
        model.trained_this_generation || TrainedThisGeneration(model.job));
    if (!startup.empty()) lines.push_back(absl::StrCat("starting: ", startup));
  }
  if (IsFinalState(state) && !model.state_reason.empty()) {
    lines.push_back(absl::StrCat("reason: ", model.state_reason));
  }
  if (!model.recent_train.empty() || model.job.total_steps() > 0) {
    lines.push_back(ProgressLine(model, options));
  }
  if (!model.recent_train.empty()) {
    const std::string loss = LossLine(model);
    if (!loss.empty()) lines.push_back(loss);
    const std::string step_time =
        StepTimeSummary(model.recent_train.back(), model.job);
    if (!step_time.empty()) lines.push_back(step_time);
  }
  if (state == v1::JOB_STATE_RUNNING) {
    for (std::string& row : RankRows(model, options.max_rank_rows)) {
      lines.push_back(std::move(row));
    }
  }
  if (model.latest_eval) {
    lines.push_back(absl::StrCat("eval  ", FormatMetricValues(*model.latest_eval, false),
                                 " (step ", model.latest_eval->step(), ")"));
  }
  if (!model.last_log.empty()) lines.push_back(model.last_log);
  for (std::string& line : lines) line = FitWidth(line, options.width);
  return lines;
}

std::string Sparkline(const std::vector<double>& values) {
  double lo = INFINITY, hi = -INFINITY;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  std::string out;
  for (double v : values) {
    if (!std::isfinite(v)) {
      out += " ";
    } else if (hi <= lo) {
      out += kBlocks[3];
    } else {
      const int level = static_cast<int>(std::lround((v - lo) / (hi - lo) * 7));
      out += kBlocks[std::clamp(level, 0, 7)];
    }
  }
  return out;
}

std::string ProgressBar(double fraction, int cells) {
  if (!std::isfinite(fraction)) fraction = 0;
  fraction = std::clamp(fraction, 0.0, 1.0);
  cells = std::max(cells, 1);
  const int eighths = static_cast<int>(std::floor(fraction * cells * 8));
  const int full = eighths / 8;
  const int partial = eighths % 8;
  std::string bar = "[";
  for (int i = 0; i < full; ++i) bar += kBlocks[7];
  int used = full;
  if (partial > 0 && used < cells) {
    bar += kPartial[partial - 1];
    ++used;
  }
  bar += std::string(cells - used, ' ');
  return bar + "]";
}

std::optional<absl::Duration> EstimateRemaining(
    const std::deque<v1::MetricPoint>& recent, int64_t total_steps,
    const v1::JobSpec& spec) {
  if (recent.empty() || total_steps <= 0) return std::nullopt;
  const v1::MetricPoint& last = recent.back();
  const int64_t left = total_steps - last.step();
  if (left <= 0) return std::nullopt;
  double steps_per_sec = 0;
  const v1::MetricPoint& first = recent.front();
  const int64_t dt_ms = last.time_unix_ms() - first.time_unix_ms();
  if (recent.size() >= 2 && last.step() > first.step() && dt_ms > 0) {
    steps_per_sec = (last.step() - first.step()) * 1000.0 / dt_ms;
  } else if (std::optional<double> sps = Value(last, "samples_per_sec")) {
    const int64_t per_step =
        spec.training().batch_size() *
        std::max<int64_t>(1, spec.training().grad_accum_steps());
    if (per_step > 0) steps_per_sec = *sps / per_step;
  }
  if (!(steps_per_sec > 0)) return std::nullopt;
  return absl::Seconds(std::ceil(left / steps_per_sec));
}

bool TrainedThisGeneration(const v1::Job& job) {
  for (const v1::RankProgress& p : job.progress()) {
    if (ParseRankPhase(p.phase()) != RankPhase::kStarting) return true;
  }
  return job.latest_train().step() > 0 && job.started_unix_ms() > 0 &&
         job.latest_train().time_unix_ms() >= job.started_unix_ms();
}

std::string StartupProgress(const v1::Job& job, bool trained_this_generation) {
  if (job.state() != v1::JOB_STATE_RUNNING || trained_this_generation ||
      job.ranks_size() == 0) {
    return "";
  }
  std::vector<std::string> missing;
  int joined = 0;
  for (const v1::RankInfo& r : job.ranks()) {
    if (r.joined()) {
      ++joined;
    } else {
      missing.push_back(r.worker().empty()
                            ? absl::StrCat("rank ", r.rank())
                            : absl::StrCat("rank ", r.rank(), " on ", r.worker()));
    }
  }
  std::string out = absl::StrCat(joined, " of ", job.ranks_size(), " ranks joined");
  if (missing.empty()) {
    return absl::StrCat(out, "; forming the process group");
  }
  constexpr size_t kNamed = 3;
  std::vector<std::string> named(missing.begin(),
                                 missing.begin() + std::min(kNamed, missing.size()));
  absl::StrAppend(&out, "; waiting for ", absl::StrJoin(named, ", "));
  if (missing.size() > kNamed) {
    absl::StrAppend(&out, " and ", missing.size() - kNamed, " more");
  }
  return out;
}

std::string StepTimeSummary(const v1::MetricPoint& point, const v1::Job& job) {
  std::optional<double> mean = Value(point, "step_ms");
  if (mean) {
    std::string out = absl::StrCat("step time ", Ms(*mean), " ms");
    std::optional<double> lo = Value(point, "step_ms_min");
    std::optional<double> hi = Value(point, "step_ms_max");
    std::optional<double> slowest = Value(point, "slowest_rank");
    std::vector<std::string> parts;
    if (lo && hi) parts.push_back(absl::StrCat("min ", Ms(*lo), ", max ", Ms(*hi)));
    if (slowest) {
      parts.push_back(absl::StrCat("slowest ",
                                   RankWhere(job, static_cast<int>(*slowest))));
    }
    if (!parts.empty()) absl::StrAppend(&out, " (", absl::StrJoin(parts, "; "), ")");
    return out;
  }
  // Rank 0's own breakdown, which every trainer reports.
  std::vector<std::string> parts;
  double total = 0;
  for (const auto& [key, label] :
       std::vector<std::pair<std::string, std::string>>{
           {"data_ms", "data"},
           {"compute_ms", "compute"},
           {"comm_ms", "comm"},
           {"optimizer_ms", "optimizer"}}) {
    if (std::optional<double> v = Value(point, key)) {
      total += *v;
      parts.push_back(absl::StrCat(label, " ", Ms(*v)));
    }
  }
  if (parts.empty()) return "";
  return absl::StrCat("step time ", Ms(total), " ms on rank ", point.rank(),
                      " (", absl::StrJoin(parts, ", "), ")");
}

std::string FitWidth(const std::string& line, int width) {
  if (width <= 0) return line;
  int columns = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    // A byte that does not continue a UTF-8 sequence starts a code point.
    if ((static_cast<unsigned char>(line[i]) & 0xC0) != 0x80) {
      if (columns == width) return line.substr(0, i);
      ++columns;
    }
  }
  return line;
}

}  // namespace trainctl::client
