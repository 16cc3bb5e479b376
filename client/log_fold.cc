#include "client/log_fold.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/json_text.h"

namespace trainctl::client {
namespace {

int64_t SecondOf(int64_t time_unix_ms) {
  // Floor, so negative (bogus) times still bucket consistently.
  return time_unix_ms >= 0 ? time_unix_ms / 1000
                           : -((-time_unix_ms + 999) / 1000);
}

std::string StripNewline(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
    text.pop_back();
  }
  return text;
}

// Folds lines that all belong to one second.
void FoldSecond(const std::vector<LogEntry>& lines,
                std::vector<FoldedLog>* out) {
  const size_t first = out->size();
  for (const LogEntry& entry : lines) {
    const std::string text = StripNewline(entry.line.text());
    const int32_t rank = entry.line.rank();
    FoldedLog* target = nullptr;
    for (size_t i = first; i < out->size(); ++i) {
      FoldedLog& candidate = (*out)[i];
      if (candidate.text == text && candidate.stream == entry.line.stream() &&
          std::find(candidate.ranks.begin(), candidate.ranks.end(), rank) ==
              candidate.ranks.end()) {
        target = &candidate;
        break;
      }
    }
    if (target == nullptr) {
      FoldedLog folded;
      folded.seq = entry.seq;
      folded.time_unix_ms = entry.line.time_unix_ms();
      folded.stream = entry.line.stream();
      folded.text = text;
      out->push_back(std::move(folded));
      target = &out->back();
    }
    target->ranks.push_back(rank);
  }
  for (size_t i = first; i < out->size(); ++i) {
    std::sort((*out)[i].ranks.begin(), (*out)[i].ranks.end());
  }
}

}  // namespace

std::vector<FoldedLog> FoldLogLines(const std::vector<LogEntry>& lines) {
  std::vector<FoldedLog> out;
  LogFolder folder;
  for (const LogEntry& entry : lines) {
    std::vector<FoldedLog> done = folder.Add(entry);
    out.insert(out.end(), done.begin(), done.end());
  }
  std::vector<FoldedLog> rest = folder.Flush();
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

std::vector<FoldedLog> LogFolder::Add(const LogEntry& entry) {
  std::vector<FoldedLog> done;
  const int64_t second = SecondOf(entry.line.time_unix_ms());
  if (!pending_.empty() && second != second_) done = Flush();
  second_ = second;
  pending_.push_back(entry);
  return done;
}

std::vector<FoldedLog> LogFolder::Advance(int64_t time_unix_ms) {
  if (pending_.empty() || SecondOf(time_unix_ms) <= second_) return {};
  return Flush();
}

std::vector<FoldedLog> LogFolder::Flush() {
  std::vector<FoldedLog> out;
  FoldSecond(pending_, &out);
  pending_.clear();
  return out;
}

std::string FormatRankSet(const std::vector<int32_t>& ranks) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < ranks.size()) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(ranks[i])
                           : absl::StrCat(ranks[i], "-", ranks[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

std::string RenderFoldedLog(const FoldedLog& line) {
  return absl::StrCat(line.ranks.size() == 1 ? "[rank " : "[ranks ",
                      FormatRankSet(line.ranks), "] ", line.text);
}

std::string FoldedLogToJson(const FoldedLog& line) {
  return absl::StrCat("{\"seq\":", line.seq,
                      ",\"time_unix_ms\":", line.time_unix_ms, ",\"ranks\":[",
                      absl::StrJoin(line.ranks, ","),
                      "],\"stream\":", JsonString(line.stream),
                      ",\"text\":", JsonString(line.text), "}");
}

absl::StatusOr<int64_t> ParseSince(const std::string& text, absl::Time now) {
  absl::Duration duration;
  if (absl::ParseDuration(text, &duration)) {
    if (duration < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--since: duration must not be negative: '", text, "'"));
    }
    return absl::ToUnixMillis(now - duration);
  }
  absl::Time time;
  std::string error;
  if (absl::ParseTime(absl::RFC3339_full, text, &time, &error)) {
    return absl::ToUnixMillis(time);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--since: '", text, "' is neither a duration (90s, 10m, 1h30m) nor an "
      "RFC 3339 time (2026-11-30T09:00:00Z)"));
}

}  // namespace trainctl::client
