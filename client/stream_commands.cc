#include "client/stream_commands.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/json_text.h"
#include "client/log_fold.h"
#include "client/metrics_export.h"
#include "client/chart_data.h"
#include "client/chart_draw.h"
#include "client/png_plot.h"
#include "client/svg_plot.h"
#include "client/watch.h"

namespace trainctl::client {
namespace {

using EventFn = std::function<void(const v1::JobEvent&)>;

// Streams the job's events from from_seq to on_event: first what it has
// recorded so far, then on_caught_up(), then with follow every later event
// until the job ends, resuming after coordinator restarts from the last seq
// seen (FollowJob), so nothing is lost or repeated. `on_break` is told when
// the stream breaks. Returns the exit code: 0, or with follow that of the
// job's final state as for `watch`.
int ReadEvents(Env& env, const std::string& job_id, int64_t from_seq,
               bool follow, const EventFn& on_event,
               const std::function<void()>& on_caught_up,
               const std::function<void()>& on_break = [] {}) {
  // A unary call first: an unknown job or a dead coordinator is reported at
  // once (exit 4 / 3) instead of entering the reconnect loop.
  absl::StatusOr<v1::Job> job = env.client->GetJob(job_id);
  if (!job.ok()) return Fail(env, job.status());
  v1::JobState state = job->state();
  int64_t last_seq = std::max<int64_t>(from_seq, 1) - 1;
  // The history. With -f a broken replay is retried (from the last seq
  // seen) so that on_caught_up really comes after the whole history.
  absl::Status status;
  const absl::Time give_up = absl::Now() + FollowOptions().max_outage;
  absl::Duration backoff = FollowOptions().initial_backoff;
  while (true) {
    status = env.client->WatchJobSnapshot(
        job_id, last_seq + 1, [&](const v1::JobEvent& event) {
          if (event.seq() <= last_seq) return;
          last_seq = event.seq();
          if (event.has_transition()) state = event.transition().to();
          on_event(event);
        });
    if (status.ok() || !follow || !IsRetryableStreamEnd(status) ||
        absl::Now() >= give_up) {
      break;
    }
    on_break();
    env.err << "trainctl: event stream of job " << job_id << " broke ("
            << status.ToString() << "); resuming from seq " << last_seq + 1
            << " in " << absl::FormatDuration(backoff) << std::endl;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, FollowOptions().max_backoff);
  }
  if (!status.ok()) return Fail(env, status);
  on_caught_up();
  if (!follow) return kExitOk;
  if (IsFinalState(state)) return ExitCodeForState(state);

  FollowOptions options;
  options.from_seq = last_seq + 1;
  options.notice = [&env, &on_break](const std::string& message) {
    on_break();
    env.err << "trainctl: " << message << std::endl;
  };
  options.job_state = [&env, &job_id]() -> absl::StatusOr<v1::JobState> {
    absl::StatusOr<v1::Job> current = env.client->GetJob(job_id);
    if (!current.ok()) return current.status();
    return current->state();
  };
  absl::StatusOr<v1::JobState> final_state = FollowJob(
      job_id,
      [&env, &job_id](int64_t seq, const EventCallback& callback) {
        return env.client->WatchJob(job_id, seq, callback);
      },
      on_event, options);
  if (!final_state.ok()) return Fail(env, final_state.status());
  return ExitCodeForState(*final_state);
}

}  // namespace

int CmdLogs(Env& env, const StreamArgs& args) {
  int64_t since_ms = 0;
  if (!args.since.empty()) {
    absl::StatusOr<int64_t> since = ParseSince(args.since, absl::Now());
    if (!since.ok()) {
      env.err << "trainctl: " << since.status().message() << "\n";
      return kExitUsage;
    }
    since_ms = *since;
  }
  const std::set<int32_t> ranks(args.ranks.begin(), args.ranks.end());
  LogFolder folder;
  auto print = [&env](const std::vector<FoldedLog>& lines) {
    for (const FoldedLog& line : lines) {
      env.out << (env.json ? FoldedLogToJson(line) : RenderFoldedLog(line))
              << "\n";
    }
    // Followers read this live; keep it line-buffered in effect.
    if (!lines.empty()) env.out.flush();
  };
  auto on_event = [&](const v1::JobEvent& event) {
    if (!event.has_log()) {
      print(folder.Advance(event.time_unix_ms()));
      return;
    }
    const v1::LogLine& line = event.log();
    if (!ranks.empty() && ranks.count(line.rank()) == 0) return;
    if (line.time_unix_ms() < since_ms) return;
    print(folder.Add(LogEntry{event.seq(), line}));
  };
  auto flush = [&] { print(folder.Flush()); };
  const int code =
      ReadEvents(env, args.job_id, 1, args.follow, on_event, flush, flush);
  flush();
  return code;
}

int CmdMetrics(Env& env, const StreamArgs& args) {
  // Following, the keys to come are unknown: the long form has a column
  // per field, not per key, so it is the default there.
  const std::string format =
      !args.format.empty() ? args.format : env.json ? "jsonl" : args.follow ? "long" : "csv";
  if (format == "long") {
    // After the job is found (an unknown one prints only the error).
    bool header_done = false;
    auto header = [&] {
      if (!header_done) env.out << MetricsLongCsvHeader();
      header_done = true;
      env.out.flush();
    };
    auto on_event = [&](const v1::JobEvent& event) {
      if (!event.has_metric()) return;
      header();
      env.out << MetricLongCsvRows(MetricRowFromEvent(event));
      env.out.flush();
    };
    return ReadEvents(env, args.job_id, args.from_seq, args.follow, on_event, header);
  }
  const bool csv = format == "csv";
  // CSV needs its columns before the first row: rows of the history are
  // held until it has been read, then printed under the union of their
  // keys. Later rows (-f) are printed under that header.
  std::vector<MetricRow> held;
  bool header_done = false;
  std::vector<std::string> columns;
  std::set<std::string> warned;
  auto print_row = [&](const MetricRow& row) {
    if (!csv) {
      env.out << MetricToJson(row) << "\n";
      return;
    }
    for (const std::string& key : MetricKeysNotIn(row, columns)) {
      if (warned.insert(key).second) {
        env.err << "trainctl: metric '" << key << "' (first in a " 
                << row.point.kind() << " row at seq " << row.seq
                << ") is not in the CSV header; it is left out. Use "
                   "--format long or jsonl to follow every key.\n";
      }
    }
    env.out << MetricCsvRow(row, columns);
  };
  auto on_event = [&](const v1::JobEvent& event) {
    if (!event.has_metric()) return;
    MetricRow row = MetricRowFromEvent(event);
    if (csv && !header_done) {
      held.push_back(std::move(row));
      return;
    }
    print_row(row);
    env.out.flush();
  };
  auto on_caught_up = [&] {
    if (!csv || header_done) return;
    header_done = true;
    columns = MetricValueColumns(held);
    env.out << MetricsCsvHeader(columns);
    for (const MetricRow& row : held) print_row(row);
    held.clear();
    env.out.flush();
  };
  return ReadEvents(env, args.job_id, args.from_seq, args.follow, on_event,
                    on_caught_up);
}

int CmdPlot(Env& env, const StreamArgs& args) {
  // Checked before any RPC: a wrong file type is a usage error.
  const bool png = absl::EndsWithIgnoreCase(args.file, ".png");
  if (!png && !absl::EndsWithIgnoreCase(args.file, ".svg")) {
    env.err << "trainctl: cannot write " << args.file
            << ": the file must end in .svg or .png (for example -o "
               "loss.svg)\n";
    return kExitUsage;
  }
  std::vector<ChartPanel> panels(args.metrics.size());
  for (size_t m = 0; m < args.metrics.size(); ++m) panels[m].metric = args.metrics[m];
  std::vector<std::string> titles;
  for (const std::string& job_id : args.plot_jobs) {
    absl::StatusOr<v1::Job> job = env.client->GetJob(job_id);
    if (!job.ok()) return Fail(env, job.status());
    std::vector<MetricRow> rows;
    const int code = ReadEvents(
        env, job_id, 1, /*follow=*/false,
        [&rows](const v1::JobEvent& event) {
          if (event.has_metric()) rows.push_back(MetricRowFromEvent(event));
        },
        [] {});
    if (code != kExitOk) return code;
    const std::string label = absl::StrCat(job->id(), " ", job->spec().name());
    titles.push_back(label);
    std::vector<PlotSeries> series = ExtractSeries(rows, args.metrics);
    bool any = false;
    for (size_t m = 0; m < series.size(); ++m) {
      series[m].label = label;
      if (series[m].points.empty()) {
        env.err << "trainctl: job " << job_id << " has no points for "
                << series[m].name << "\n";
      }
      any = any || !series[m].points.empty();
      panels[m].series.push_back(std::move(series[m]));
    }
    if (!any) {
      env.err << "trainctl: job " << job_id << " has none of "
              << absl::StrJoin(args.metrics, ", ") << "; it has: "
              << absl::StrJoin(AvailableSeriesNames(rows), ", ") << "\n";
      if (args.plot_jobs.size() == 1) return kExitFailed;
    }
  }
  if (!HasPoints(panels)) {
    env.err << "trainctl: nothing to draw\n";
    return kExitFailed;
  }
  ChartOptions options;
  options.title = titles.size() == 1 ? titles[0] : absl::StrJoin(args.plot_jobs, " vs ");
  options.log_y = args.log_y;
  options.smoothing = args.smoothing;
  int dropped = 0;
  std::string image;
  if (png) {
    absl::StatusOr<std::string> encoded = RenderPngChart(panels, options, &dropped);
    if (!encoded.ok()) {
      env.err << "trainctl: cannot draw " << args.file << ": "
              << encoded.status().message() << "\n";
      return absl::IsUnimplemented(encoded.status()) ? kExitUsage : kExitFailed;
    }
    image = *std::move(encoded);
  } else {
    image = RenderSvgChart(panels, options, &dropped);
  }
  if (dropped > 0) {
    env.err << "trainctl: " << dropped
            << (dropped == 1 ? " value <= 0 is" : " values <= 0 are")
            << " not on the log scale\n";
  }
  // Write then rename: never a half-written chart where an old one was.
  const std::string tmp = args.file + ".tmp";
  std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
  file << image;
  file.close();
  if (!file || std::rename(tmp.c_str(), args.file.c_str()) != 0) {
    std::remove(tmp.c_str());
    env.err << "trainctl: cannot write " << args.file << "\n";
    return kExitFailed;
  }
  std::vector<std::string> parts, json;
  for (const ChartPanel& panel : panels) {
    for (const PlotSeries& s : panel.series) {
      const std::string who = args.plot_jobs.size() > 1 ? s.label.substr(0, s.label.find(' ')) + " " : "";
      parts.push_back(absl::StrCat(who, s.name, " (", s.points.size(),
                                   s.points.size() == 1 ? " point)" : " points)"));
      json.push_back(absl::StrCat("{\"job\":", JsonString(s.label.substr(0, s.label.find(' '))),
                                  ",\"metric\":", JsonString(s.name),
                                  ",\"points\":", s.points.size(), "}"));
    }
  }
  if (env.json) {
    env.out << "{\"file\":" << JsonString(args.file) << ",\"series\":["
            << absl::StrJoin(json, ",") << "]}\n";
  } else {
    env.out << "wrote " << args.file << ": " << absl::StrJoin(parts, ", ") << "\n";
  }
  return kExitOk;
}

StreamCommands AddStreamCommands(CLI::App& app, StreamArgs& args) {
  StreamCommands c;
  c.logs = app.add_subcommand("logs", "Print every rank's stdout/stderr");
  c.logs->add_option("JOB", args.job_id, "Job id")->required();
  c.logs->add_flag("-f,--follow", args.follow,
                   "Keep following until the job ends");
  c.logs->add_option("--rank", args.ranks,
                     "Only these ranks (comma-separated or repeated)")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber);
  c.logs->add_option("--since", args.since,
                     "Only lines since a duration ago (10m, 1h30m) or an "
                     "RFC 3339 time (2026-11-30T09:00:00Z)");
  c.logs->footer(
      "\nIdentical lines from several ranks in the same second are folded: "
      "[ranks 0-7] text\n"
      "\nExamples:\n  trainctl logs job-3\n  trainctl logs job-3 -f --rank 0\n"
      "  trainctl logs job-3 --since 10m --output json | jq -r .text");

  c.metrics = app.add_subcommand("metrics", "Print a job's metrics history");
  c.metrics->add_option("JOB", args.job_id, "Job id")->required();
  c.metrics->add_option("--format", args.format,
                        "csv (a column per key), long (a row per value) or "
                        "jsonl (default: csv, long with -f, jsonl with "
                        "--output json)")
      ->check(CLI::IsMember({"csv", "long", "jsonl"}));
  c.metrics->add_flag("-f,--follow", args.follow,
                      "Keep printing new points until the job ends");
  c.metrics->add_option("--from-seq", args.from_seq,
                        "Start at this event seq (resume after the last seq "
                        "you saw + 1)")
      ->check(CLI::PositiveNumber);
  c.metrics->footer(
      "\nExamples:\n  trainctl metrics job-3 > job-3.csv\n"
      "  trainctl metrics job-3 -f | grep ',loss,'\n"
      "  trainctl metrics job-3 --format jsonl -f\n"
      "  trainctl metrics job-3 --format jsonl --from-seq 120");

  c.plot = app.add_subcommand(
      "plot", "Draw jobs' metrics as an SVG or PNG chart: a panel per metric, "
              "one line per job");
  c.plot->add_option("JOB", args.plot_jobs, "Job ids (several: overlaid)")
      ->required();
  c.plot->add_option("--metric", args.metrics,
                     "Series to draw, comma-separated: value keys as "
                     "`metrics` shows them (loss, lr, eval_accuracy), or "
                     "KIND_KEY for another kind's key (train_loss)")
      ->delimiter(',')
      ->capture_default_str();
  c.plot->add_option("-o,--file", args.file, "Output file (.svg or .png)")
      ->required();
  c.plot->add_flag("--log-y", args.log_y,
                   "Log-scale value axes (values <= 0 are left out, and counted)");
  c.plot->add_option("--smooth", args.smoothing,
                     "Smooth lines as TensorBoard does: an exponential moving "
                     "average of this weight (0: off, 0.6 is TensorBoard's "
                     "default); the raw line stays, faint")
      ->check(CLI::Range(0.0, 0.999));
  c.plot->footer(
      "\nExamples:\n  trainctl plot job-3 -o job-3.svg\n"
      "  trainctl plot job-3 -o job-3.png --smooth 0.6\n"
      "  trainctl plot job-3 --metric loss,lr,eval_loss -o loss.png --log-y\n"
      "  trainctl plot job-3 job-4 job-5 --metric loss,eval_accuracy -o compare.png");
  return c;
}

}  // namespace trainctl::client
