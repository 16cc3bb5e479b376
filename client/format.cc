#include "client/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/names.h"
#include "common/vocabulary.h"
#include "absl/strings/str_replace.h"

namespace trainctl::client {
namespace {

// Keys shown first, in this order; the rest follow sorted by name.
constexpr const char* kKnownMetricKeys[] = {"loss", "accuracy", "lr",
                                            "samples_per_sec"};

std::string MetricLabel(const std::string& key) {
  if (key == "samples_per_sec") return "samples/s";
  return key == "tokens_per_sec" ? "tokens/s" : key;
}

}  // namespace

int ExitCodeForStatus(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kInvalidArgument:
      return kExitUsage;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return kExitUnreachable;
    case absl::StatusCode::kNotFound:
      return kExitNotFound;
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
      return kExitDenied;
    default:
      return kExitFailed;
  }
}

int ExitCodeForState(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED ? kExitOk : kExitFailed;
}

bool IsFinalState(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

std::string StateName(v1::JobState state) { return JobStateName(state); }

std::string RankStateName(v1::RankState state) {
  return trainctl::RankStateName(state);
}

bool IsWaiting(v1::JobState state) {
  return state == v1::JOB_STATE_QUEUED || state == v1::JOB_STATE_RESTARTING ||
         state == v1::JOB_STATE_PREEMPTED;
}

absl::StatusOr<v1::JobState> ParseStateName(const std::string& name) {
  std::string upper = absl::AsciiStrToUpper(name);
  if (absl::StartsWith(upper, "JOB_STATE_")) upper = upper.substr(10);
  for (v1::JobState s :
       {v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING, v1::JOB_STATE_RESTARTING,
        v1::JOB_STATE_PREEMPTED, v1::JOB_STATE_SUCCEEDED,
        v1::JOB_STATE_FAILED, v1::JOB_STATE_CANCELLED}) {
    if (StateName(s) == upper) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown job state '", name,
                   "' (known: queued, running, restarting, preempted, succeeded, failed, "
                   "cancelled)"));
}

std::string FormatDurationShort(absl::Duration d) {
  int64_t s = absl::ToInt64Seconds(d);
  if (s < 0) s = 0;
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, s % 86400 / 3600);
}

std::string FormatAge(int64_t then_unix_ms, int64_t now_unix_ms) {
  if (then_unix_ms == 0) return "-";
  return FormatDurationShort(absl::Milliseconds(now_unix_ms - then_unix_ms));
}

std::string FormatClock(int64_t unix_ms, absl::TimeZone tz) {
  if (unix_ms == 0) return "-";
  return absl::FormatTime("%H:%M:%S", absl::FromUnixMillis(unix_ms), tz);
}

std::string FormatTimestamp(int64_t unix_ms, absl::TimeZone tz) {
  if (unix_ms == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixMillis(unix_ms),
                          tz);
}

std::string FormatMetricValue(const std::string& key, double value) {
  std::string number;
  if (key == "loss" || absl::EndsWith(key, "_loss") || key == "accuracy" ||
      absl::EndsWith(key, "_accuracy") || key == "eval_f1" ||
      key == "eval_precision" || key == "eval_recall") {
    number = absl::StrFormat("%.4f", value);
  } else if (key == "samples_per_sec" || key == "tokens_per_sec") {
    number = absl::StrFormat("%.1f", value);
  } else if (value == std::floor(value) && std::fabs(value) < 1e15) {
    number = absl::StrFormat("%.0f", value);  // counts: 60000, not 6e+04
  } else {
    number = absl::StrFormat("%.4g", value);
  }
  return absl::StrCat(MetricLabel(key), " ", number);
}

std::vector<std::string> MetricHeadlineKeys(const v1::MetricPoint& point) {
  const auto& v = point.values();
  std::vector<std::string> keys;
  auto add = [&](const std::string& key) {
    if (v.count(key)) keys.push_back(key);
  };
  const MetricKind kind = ParseMetricKind(point.kind());
  if (kind == MetricKind::kTrain) {
    for (const char* key : {"loss", "lr", "samples_per_sec", "tokens_per_sec",
                            "step_ms", "grad_norm", "loss_scale"}) {
      add(key);
    }
    return keys;
  }
  if (kind == MetricKind::kEval) {
    for (const auto& [key, value] : v) {
      // Per-class scores (eval_f1_3) and the precision/recall behind the
      // F1 are there with --wide.
      const bool result = absl::EndsWith(key, "accuracy") || absl::EndsWith(key, "loss") ||
                          absl::EndsWith(key, "perplexity") || absl::EndsWith(key, "mse") ||
                          key == "eval_f1";
      if (result) keys.push_back(key);
    }
    std::sort(keys.begin(), keys.end());
    return keys;
  }
  for (const auto& [key, value] : v) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  return keys;
}

namespace {

// "compute_ms 18.9-22.7" when the ranks' compute times differ by over 25%.
std::string ComputeSpread(const v1::MetricPoint& point) {
  const auto& v = point.values();
  auto lo = v.find("compute_ms_min"), hi = v.find("compute_ms_max");
  if (lo == v.end() || hi == v.end() || !(hi->second > 1.25 * lo->second)) return "";
  return absl::StrFormat("compute_ms %.4g-%.4g", lo->second, hi->second);
}

}  // namespace

std::string FormatMetricValues(const v1::MetricPoint& point, bool wide) {
  const MetricKind kind = ParseMetricKind(point.kind());
  if (!wide && (kind == MetricKind::kTrain || kind == MetricKind::kEval)) {
    std::vector<std::string> parts;
    for (const std::string& key : MetricHeadlineKeys(point)) {
      parts.push_back(FormatMetricValue(key, point.values().at(key)));
    }
    if (const std::string spread = ComputeSpread(point); !spread.empty()) {
      parts.push_back(spread);
    }
    return absl::StrJoin(parts, " ");
  }
  std::vector<std::string> parts;
  for (const char* key : kKnownMetricKeys) {
    auto it = point.values().find(key);
    if (it != point.values().end()) {
      parts.push_back(FormatMetricValue(key, it->second));
    }
  }
  // protobuf maps iterate in no particular order; sort for stable output.
  std::vector<std::string> rest;
  for (const auto& [key, value] : point.values()) {
    if (std::find(std::begin(kKnownMetricKeys), std::end(kKnownMetricKeys),
                  key) == std::end(kKnownMetricKeys)) {
      rest.push_back(key);
    }
  }
  std::sort(rest.begin(), rest.end());
  for (const std::string& key : rest) {
    parts.push_back(FormatMetricValue(key, point.values().at(key)));
  }
  return absl::StrJoin(parts, " ");
}

std::string Truncate(const std::string& text, size_t max_chars) {
  std::string flat = absl::StrReplaceAll(text, {{"\r", ""}, {"\n", " "}});
  if (flat.size() <= max_chars) return flat;
  if (max_chars <= 3) return flat.substr(0, max_chars);
  return absl::StrCat(flat.substr(0, max_chars - 3), "...");
}

std::vector<size_t> ColumnWidths(const std::vector<std::string>& header,
                                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  };
  measure(header);
  for (const auto& row : rows) measure(row);
  return widths;
}

std::string RenderRow(const std::vector<std::string>& row,
                      const std::vector<size_t>& widths) {
  std::string out;
  for (size_t i = 0; i < widths.size(); ++i) {
    const std::string cell = i < row.size() ? row[i] : "";
    if (i + 1 == widths.size()) {
      out += cell;
    } else {
      out += cell + std::string(widths[i] - std::min(widths[i], cell.size()) + 2, ' ');
    }
  }
  // Trailing blanks from an empty last column are noise in diffs.
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out + "\n";
}

std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows) {
  const std::vector<size_t> widths = ColumnWidths(header, rows);
  std::string out = RenderRow(header, widths);
  for (const auto& row : rows) out += RenderRow(row, widths);
  return out;
}

std::string DescribeError(const absl::Status& status,
                          const std::string& address) {
  const std::string code = absl::StatusCodeToString(status.code());
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded: {
      const absl::string_view why = status.message();
      // The TLS handshake failed: something answered, and its certificate
      // is not one this client trusts.
      if (absl::StrContains(why, "certificate verify failed") ||
          absl::StrContains(why, "CERTIFICATE_VERIFY_FAILED")) {
        return absl::StrCat(
            "the coordinator at ", address, " answered, but its TLS "
            "certificate is not signed by the CA this client trusts: give "
            "the cluster's tls/ca.crt as --ca-cert (or TRAINCTL_CA_CERT, or "
            "ca_cert: in the config file)");
      }
      if (absl::StrContains(why, "Connection refused")) {
        return absl::StrCat(
            "cannot reach the coordinator at ", address,
            ": nothing listens there (connection refused); is "
            "trainctl-coordinator running? set --coordinator or "
            "TRAINCTL_COORDINATOR (or coordinator: in the config file)");
      }
      return absl::StrCat(
          "cannot reach the coordinator at ", address, " (", code, ": ", why,
          "); is trainctl-coordinator running? set --coordinator or "
          "TRAINCTL_COORDINATOR (or coordinator: in the config file); a "
          "coordinator run --insecure needs --insecure here");
    }
    case absl::StatusCode::kUnauthenticated:
      return absl::StrCat("not logged in to ", address, ": ",
                          status.message());
    case absl::StatusCode::kPermissionDenied:
      return absl::StrCat("not allowed: ", status.message());
    default:
      return absl::StrCat(code, ": ", status.message());
  }
}

}  // namespace trainctl::client
