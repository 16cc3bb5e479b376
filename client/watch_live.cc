#include "client/watch_live.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/time/clock.h"
#include "client/live_terminal.h"
#include "client/live_view.h"
#include "client/watch.h"

namespace trainctl::client {
namespace {

// How often the view is refreshed from a GetJob snapshot when no event
// comes (start-up progress, per-rank phases and the ETA move without one).
constexpr absl::Duration kSnapshotEvery = absl::Seconds(1);
// Log lines only change the last line of the view: redraw for them at most
// this often, so a chatty job does not flood the terminal.
constexpr absl::Duration kLogRedrawEvery = absl::Milliseconds(200);

class LiveWatch {
 public:
  LiveWatch(Env& env, std::string job_id, int width)
      : env_(env), job_id_(std::move(job_id)), block_(env.out) {
    options_.width = width - 1;  // never write the last column: no auto-wrap
    model_.job.set_id(job_id_);    // until the first snapshot names the rest
  }

  int Run() {
    std::thread poller([this] { PollSnapshots(); });
    FollowOptions follow;
    follow.notice = [this](const std::string& message) {
      std::lock_guard<std::mutex> lock(mu_);
      block_.PrintAbove({"trainctl: " + message});
    };
    absl::StatusOr<v1::JobState> final_state = FollowJob(
        job_id_,
        [this](int64_t from_seq, const EventCallback& on_event) {
          return env_.client->WatchJob(job_id_, from_seq, on_event);
        },
        [this](const v1::JobEvent& event) { OnEvent(event); }, follow);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    poller.join();
    // A last snapshot, so the final view shows the ranks' exits.
    absl::StatusOr<v1::Job> job = env_.client->GetJob(job_id_);
    std::lock_guard<std::mutex> lock(mu_);
    if (job.ok()) ApplyJobSnapshot(model_, *job);
    RedrawLocked();
    block_.Finish();
    if (!final_state.ok()) return Fail(env_, final_state.status());
    return ExitCodeForState(*final_state);
  }

 private:
  void OnEvent(const v1::JobEvent& event) {
    std::lock_guard<std::mutex> lock(mu_);
    env_.ctx.now_unix_ms = absl::ToUnixMillis(absl::Now());
    const bool was_running = model_.state == v1::JOB_STATE_RUNNING;
    std::vector<std::string> above = ApplyEvent(model_, event, env_.ctx);
    // A new generation has new ranks: ask for them now, not in a second.
    if (!was_running && model_.state == v1::JOB_STATE_RUNNING) {
      snapshot_due_ = true;
      wake_.notify_all();
    }
    if (above.empty() && event.has_log() &&
        absl::Now() - last_draw_ < kLogRedrawEvery) {
      return;
    }
    RedrawLocked(above);
  }

  void PollSnapshots() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      absl::StatusOr<v1::Job> job = env_.client->GetJob(job_id_);
      lock.lock();
      if (stop_) break;
      if (job.ok()) {
        ApplyJobSnapshot(model_, *job);
        RedrawLocked();
      }
      snapshot_due_ = false;
      wake_.wait_for(lock, absl::ToChronoMilliseconds(kSnapshotEvery),
                     [this] { return stop_ || snapshot_due_; });
    }
  }

  // Prints `above` (state changes) and the view below them.
  void RedrawLocked(const std::vector<std::string>& above = {}) {
    options_.now_unix_ms = absl::ToUnixMillis(absl::Now());
    block_.Draw(RenderLiveView(model_, options_), above);
    last_draw_ = absl::Now();
  }

  Env& env_;
  const std::string job_id_;
  std::mutex mu_;
  std::condition_variable wake_;
  LiveModel model_;             // GUARDED_BY(mu_)
  LiveBlock block_;             // GUARDED_BY(mu_)
  LiveViewOptions options_;     // GUARDED_BY(mu_)
  absl::Time last_draw_ = absl::InfinitePast();  // GUARDED_BY(mu_)
  bool stop_ = false;           // GUARDED_BY(mu_)
  bool snapshot_due_ = false;   // GUARDED_BY(mu_)
};

}  // namespace

int WatchLive(Env& env, const std::string& job_id, int width) {
  return LiveWatch(env, job_id, width).Run();
}

}  // namespace trainctl::client
