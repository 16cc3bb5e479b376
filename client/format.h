#pragma once

// Small pure formatting helpers shared by the renderers and the commands:
// state names, durations, timestamps, metric values, aligned tables and the
// mapping from outcomes to process exit codes.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainctl/v1/jobs.pb.h"

namespace trainctl::client {

// Process exit codes of trainctl (documented in docs/cli.md).
enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,       // job ended FAILED/CANCELLED, or server-side error
  kExitUsage = 2,        // bad usage or invalid job spec
  kExitUnreachable = 3,  // coordinator unreachable
  kExitNotFound = 4,     // job not found
  kExitDenied = 5,       // not logged in, or the job is another user's
};

// Exit code for an RPC outcome (OK -> 0).
int ExitCodeForStatus(const absl::Status& status);
// Exit code for a job's final state: 0 for SUCCEEDED, 1 otherwise.
int ExitCodeForState(v1::JobState state);

bool IsFinalState(v1::JobState state);

// "QUEUED", "RUNNING", ... ("UNKNOWN" for unspecified/unknown values).
std::string StateName(v1::JobState state);
std::string RankStateName(v1::RankState state);
// Queued, restarting or preempted: in the queue, with a reason it waits.
bool IsWaiting(v1::JobState state);
// Accepts "running", "RUNNING" or "JOB_STATE_RUNNING".
absl::StatusOr<v1::JobState> ParseStateName(const std::string& name);

// Compact human duration: "0s", "42s", "5m03s", "2h05m", "3d04h".
std::string FormatDurationShort(absl::Duration d);
// Age of a timestamp relative to now ("5m03s"), or "-" when ms is 0.
std::string FormatAge(int64_t then_unix_ms, int64_t now_unix_ms);
// "HH:MM:SS" and "YYYY-MM-DD HH:MM:SS" in tz; "-" when ms is 0.
std::string FormatClock(int64_t unix_ms, absl::TimeZone tz);
std::string FormatTimestamp(int64_t unix_ms, absl::TimeZone tz);

// Views for people count epochs from 1, as `training.epochs: 3` runs epochs
// 1 to 3; JSON and CSV keep the metric's 0-based `epoch` field.
inline int64_t EpochForPeople(int32_t epoch) { return int64_t{epoch} + 1; }

// One metric value with a precision that suits the key ("loss 0.4321").
std::string FormatMetricValue(const std::string& key, double value);
// "loss 0.4321 lr 0.001 samples/s 5230.1 grad_norm 1.25": well-known keys
// first in a fixed order, then the remaining keys sorted. Without `wide`,
// train and eval points show what a person reads (MetricHeadline); other
// kinds show every key.
std::string FormatMetricValues(const v1::MetricPoint& point, bool wide = true);

// A train or eval point's readable part: train loss, lr, throughput, step
// time and gradient norm, and the ranks' compute time as "min-max" when
// they differ by over 25% (a slow rank; the others wait in the all-reduce,
// so their comm time says nothing); eval its results (accuracy, loss,
// perplexity), not its timings. Other kinds: every key.
std::vector<std::string> MetricHeadlineKeys(const v1::MetricPoint& point);

// Shortens text to at most max_chars, ending in "..." when cut; newlines
// become spaces so table rows stay one line.
std::string Truncate(const std::string& text, size_t max_chars);

// Left-aligned columns separated by two spaces; the last column is not
// padded. Each row is newline-terminated.
std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);
// RenderTable's parts, for a table that grows a row at a time (list -w):
// the widths of its columns so far, and one row laid out in them (a wider
// cell pushes the rest of its row along).
std::vector<size_t> ColumnWidths(const std::vector<std::string>& header,
                                 const std::vector<std::vector<std::string>>& rows);
std::string RenderRow(const std::vector<std::string>& row,
                      const std::vector<size_t>& widths);

// Message for a failed RPC, with advice when the coordinator at address is
// unreachable.
std::string DescribeError(const absl::Status& status,
                          const std::string& address);

}  // namespace trainctl::client
