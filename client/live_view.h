#pragma once

// The live view of `trainctl watch` on a terminal, as a model fed by the
// job's events and GetJob snapshots, and a pure renderer from the model to
// the lines of the block that is redrawn in place (client/live_terminal.h
// does the drawing). Also the small pure pieces `status` shares with it:
// ETA, sparkline, progress bar, start-up (rendezvous) progress.

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/render.h"
#include "trainctl/v1/jobs.pb.h"

namespace trainctl::client {

// The last `train` points kept for the sparkline and the throughput.
inline constexpr size_t kRecentTrainPoints = 24;

struct LiveModel {
  // From the latest GetJob snapshot (ranks, joined flags, progress, spec).
  v1::Job job;
  bool have_job = false;
  // From the events, in seq order.
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  std::string state_reason;
  std::deque<v1::MetricPoint> recent_train;  // oldest first
  std::optional<v1::MetricPoint> latest_eval;
  // A train metric arrived since the latest transition to RUNNING: the
  // current generation is past its start-up.
  bool trained_this_generation = false;
  std::string last_log;  // "[rank 1] text" of the newest log line
};

// Takes a GetJob snapshot. The state of the events wins while they are
// behind the snapshot only if the snapshot is newer (it is used until the
// first transition event arrives).
void ApplyJobSnapshot(LiveModel& model, const v1::Job& job);

// Takes one event; returns the lines to print above the live block (the
// state change, as `watch` prints it in plain mode), or nothing.
std::vector<std::string> ApplyEvent(LiveModel& model, const v1::JobEvent& event,
                                    const RenderContext& ctx);

struct LiveViewOptions {
  int width = 80;         // terminal columns; lines are cut to fit
  int64_t now_unix_ms = 0;
  size_t max_rank_rows = 8;  // more ranks: a summary line instead of rows
};

// The block: a header (job, state, generation), the progress bar with step,
// epoch and ETA, loss with a sparkline and samples/s, the step time with
// the slowest rank marked, per-rank rows from the ranks' progress, the
// latest evaluation, and while starting up the rendezvous progress. Pure.
std::vector<std::string> RenderLiveView(const LiveModel& model,
                                        const LiveViewOptions& options);

// "▁▂▄█" for the values scaled between their min and max (flat series: the
// middle block; non-finite values: a space).
std::string Sparkline(const std::vector<double>& values);

// "[██████▌     ]" with `cells` cells inside the brackets, eighths for the
// partial cell; fraction is clamped to [0, 1].
std::string ProgressBar(double fraction, int cells);

// Time left from the throughput: steps per second over the recent points
// (first to last), else from samples_per_sec of the latest point and the
// spec's samples per step. nullopt when unknown or done.
std::optional<absl::Duration> EstimateRemaining(
    const std::deque<v1::MetricPoint>& recent, int64_t total_steps,
    const v1::JobSpec& spec);

// The job's current generation is past its start-up, as far as a snapshot
// tells: a rank reported a phase other than "starting", or the latest train
// point came after the generation started.
bool TrainedThisGeneration(const v1::Job& job);

// While a RUNNING job's current generation starts up: "3 of 4 ranks joined;
// waiting for rank 3 on node-c" (or once all joined, "4 of 4 ranks joined;
// forming the process group"). "" when not starting up.
std::string StartupProgress(const v1::Job& job, bool trained_this_generation);

// "step time 120 ms (min 110, max 150; slowest rank 3 on w2)" from the
// cross-rank keys step_ms, step_ms_min, step_ms_max, slowest_rank; without
// them rank 0's breakdown (data, compute, comm, optimizer ms); "" when the
// point has neither.
std::string StepTimeSummary(const v1::MetricPoint& point, const v1::Job& job);

// Cuts a line to `width` display columns (UTF-8 code points count one each).
std::string FitWidth(const std::string& line, int width);

}  // namespace trainctl::client
