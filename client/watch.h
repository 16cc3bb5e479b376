#pragma once

// Following a job's event stream across coordinator restarts. The stream is
// injected as a function so the resume/backoff logic is testable without a
// server.

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainctl/v1/jobs.pb.h"

namespace trainctl::client {

using EventCallback = std::function<void(const v1::JobEvent&)>;
// Opens the stream at from_seq, feeds events to the callback and returns
// the stream's final status (CoordinatorClient::WatchJob fits).
using OpenStreamFn =
    std::function<absl::Status(int64_t from_seq, const EventCallback&)>;

struct FollowOptions {
  // Give up when no event arrives for this long while reconnecting.
  absl::Duration max_outage = absl::Seconds(60);
  absl::Duration initial_backoff = absl::Milliseconds(250);
  absl::Duration max_backoff = absl::Seconds(5);
  // A stream that stayed open this long was connected even if it carried
  // no events (failed connects end within seconds, see CoordinatorClient),
  // so its break starts a fresh outage window.
  absl::Duration healthy_after = absl::Seconds(15);
  std::function<absl::Time()> now = [] { return absl::Now(); };
  std::function<void(absl::Duration)> sleep = [](absl::Duration d) {
    absl::SleepFor(d);
  };
  // Told about each reconnect, for a line on stderr.
  std::function<void(const std::string&)> notice = [](const std::string&) {};
  // First seq to stream (resuming where an earlier reader stopped).
  int64_t from_seq = 1;
  // Asked for the job's state when a stream ends cleanly without a final
  // transition: started past the final event (from_seq > 1), the stream
  // holds nothing more, so the state must come from elsewhere. Unset: keep
  // reconnecting as before.
  std::function<absl::StatusOr<v1::JobState>()> job_state;
};

// True for stream endings worth reconnecting after (the coordinator went
// away or ended the stream early); false for answers that will not change.
bool IsRetryableStreamEnd(const absl::Status& status);

// Streams events from options.from_seq (1 by default), passes each new one to on_event exactly once
// (replayed duplicates are skipped), reconnects from the last seq + 1 when
// the stream breaks before the job is final, and returns the job's final
// state. Errors: the first non-retryable status, or UNAVAILABLE after
// max_outage without progress.
absl::StatusOr<v1::JobState> FollowJob(const std::string& job_id,
                                       const OpenStreamFn& open_stream,
                                       const EventCallback& on_event,
                                       const FollowOptions& options = {});

}  // namespace trainctl::client
