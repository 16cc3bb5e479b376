#include "client/watch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/format.h"

namespace trainctl::client {

bool IsRetryableStreamEnd(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:  // ended early, e.g. graceful shutdown
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kInternal:  // e.g. RST_STREAM from a dying server
    case absl::StatusCode::kUnknown:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<v1::JobState> FollowJob(const std::string& job_id,
                                       const OpenStreamFn& open_stream,
                                       const EventCallback& on_event,
                                       const FollowOptions& options) {
  int64_t last_seq = std::max<int64_t>(options.from_seq, 1) - 1;
  // Only events decide the state, so a replay always reaches the end.
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  absl::Duration backoff = options.initial_backoff;
  absl::Time outage_start = absl::InfinitePast();
  bool in_outage = false;

  while (true) {
    bool progressed = false;
    const absl::Time attempt_start = options.now();
    absl::Status status =
        open_stream(last_seq + 1, [&](const v1::JobEvent& event) {
          if (event.seq() != 0 && event.seq() <= last_seq) return;
          if (event.seq() != 0) last_seq = event.seq();
          if (event.has_transition()) state = event.transition().to();
          progressed = true;
          on_event(event);
        });
    // The server ends the stream after the final event; the job's state,
    // not the stream status, decides whether we are done.
    if (IsFinalState(state)) return state;
    if (!IsRetryableStreamEnd(status)) return status;
    // A clean end means the server delivered everything after last_seq and
    // closed the stream because the job is final; when the final event lay
    // before from_seq we never saw it, so ask.
    if (status.ok() && options.job_state) {
      absl::StatusOr<v1::JobState> current = options.job_state();
      if (current.ok() && IsFinalState(*current)) return *current;
    }

    const bool healthy =
        progressed || options.now() - attempt_start >= options.healthy_after;
    if (healthy || !in_outage) {
      in_outage = true;
      outage_start = options.now();
      backoff = options.initial_backoff;
    }
    const absl::Duration down = options.now() - outage_start;
    if (down >= options.max_outage) {
      return absl::UnavailableError(absl::StrCat(
          "lost the event stream of job ", job_id, " and could not resume it ",
          "within ", FormatDurationShort(options.max_outage),
          " (last event seq ", last_seq, ", job last seen ", StateName(state),
          "; last error: ",
          status.ok() ? "stream ended early" : status.ToString(), ")"));
    }
    options.notice(absl::StrCat("event stream of job ", job_id, " broke (",
                                status.ok() ? "ended early" : status.ToString(),
                                "); resuming from seq ", last_seq + 1, " in ",
                                absl::FormatDuration(backoff)));
    options.sleep(std::min(backoff, options.max_outage - down));
    backoff = std::min(backoff * 2, options.max_backoff);
  }
}

}  // namespace trainctl::client
