#pragma once

// `trainctl logs`: folding identical lines that many ranks print at the same
// moment into one, and the pure helpers around it. Hundreds of ranks print
// the same start-up banner; folded, it is one line.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainctl/v1/jobs.pb.h"

namespace trainctl::client {

// One log line as received, with the seq of its event.
struct LogEntry {
  int64_t seq = 0;
  v1::LogLine line;
};

// One output line: text printed by `ranks` (ascending) on one stream.
struct FoldedLog {
  int64_t seq = 0;           // seq of the first line folded in
  int64_t time_unix_ms = 0;  // time of the first line folded in
  std::string stream;
  std::string text;          // without trailing newline
  std::vector<int32_t> ranks;
};

// Folds a run of lines. Lines fold together when they have the same text
// and stream, fall in the same wall-clock second (time_unix_ms / 1000) and
// are not separated by a line of another second; a rank that repeats a line
// within the second starts a new folded line (no line is ever dropped).
// Output keeps the order of each folded line's first appearance.
std::vector<FoldedLog> FoldLogLines(const std::vector<LogEntry>& lines);

// Streaming form of FoldLogLines for `logs -f`: lines are held while their
// second is still open and released when a later second is seen (Add with
// a line, or Advance with any event's time) or on Flush.
class LogFolder {
 public:
  // Returns the folded lines that this line closes (those of earlier
  // seconds).
  std::vector<FoldedLog> Add(const LogEntry& entry);
  // Any event (metric, transition) stamped at time_unix_ms closes earlier
  // seconds too.
  std::vector<FoldedLog> Advance(int64_t time_unix_ms);
  std::vector<FoldedLog> Flush();

 private:
  int64_t second_ = 0;
  std::vector<LogEntry> pending_;
};

// "3", "0-7", "0-3,5,8-9" for ascending ranks.
std::string FormatRankSet(const std::vector<int32_t>& ranks);
// "[rank 3] text" or "[ranks 0-7] text".
std::string RenderFoldedLog(const FoldedLog& line);
// One JSON object (no newline): {"seq":..,"time_unix_ms":..,"ranks":[..],
// "stream":"..","text":".."}.
std::string FoldedLogToJson(const FoldedLog& line);

// --since: a duration back from now ("90s", "10m", "1h30m") or an RFC 3339
// timestamp ("2026-11-30T09:00:00Z", "2026-11-30T10:00:00+01:00").
// Returns the earliest time_unix_ms to show.
absl::StatusOr<int64_t> ParseSince(const std::string& text, absl::Time now);

}  // namespace trainctl::client
