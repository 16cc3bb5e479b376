#include "worker/support/mlflow_sender.h"

#include "absl/strings/str_cat.h"
#include "common/clock.h"

namespace trainctl {

MlflowSender::MlflowSender(std::unique_ptr<HttpClient> http, std::unique_ptr<MlflowRun> run,
                           Warn warn, size_t max_queued)
    : http_(std::move(http)),
      run_(std::move(run)),
      warn_(std::move(warn)),
      max_queued_(max_queued),
      thread_([this] { SendLoop(); }) {}

MlflowSender::~MlflowSender() {
  if (!closed_) {
    (void)Close("FAILED", {}, RealClock().NowUnixMs());
  }
}

void MlflowSender::Log(int64_t step, int64_t time_unix_ms,
                       std::map<std::string, double> values) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;
  if (queue_.size() >= max_queued_) {
    queue_.pop_front();
    if (dropped_++ == 0 && warn_) {
      warn_(absl::StrCat("tracking.mlflow: the server is behind by ", max_queued_,
                         " reports; dropping the oldest"));
    }
  }
  queue_.push_back({step, time_unix_ms, std::move(values)});
  changed_.notify_all();
}

void MlflowSender::Failed(const absl::Status& status) {
  if (first_error_.ok()) first_error_ = status;
  if (failures_++ % 100 == 0 && warn_) {
    warn_(absl::StrCat("tracking.mlflow: ", status.message(), " (training goes on)"));
  }
}

void MlflowSender::SendLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, everything sent
    Report report = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    absl::StatusOr<int> sent = run_->LogMetrics(report.step, report.time_unix_ms, report.values);
    lock.lock();
    if (!sent.ok()) Failed(sent.status());
    changed_.notify_all();
  }
}

absl::Status MlflowSender::Close(
    const std::string& end_status,
    const std::vector<std::pair<std::string, std::string>>& artifacts, int64_t end_unix_ms) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return absl::FailedPreconditionError("tracking.mlflow: closed twice");
    closed_ = true;
    stopping_ = true;
    changed_.notify_all();
  }
  thread_.join();
  absl::Status status;
  for (const auto& [path, bytes] : artifacts) {
    absl::Status stored = run_->LogArtifact(path, bytes);
    if (!stored.ok() && status.ok()) status = stored;
  }
  if (!end_status.empty()) {
    absl::Status ended = run_->End(end_status, end_unix_ms);
    if (status.ok()) status = ended;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (status.ok() && !first_error_.ok()) status = first_error_;
  if (dropped_ > 0 && status.ok()) {
    status = absl::ResourceExhaustedError(absl::StrCat(
        "tracking.mlflow: ", dropped_, " reports were dropped (the server fell behind)"));
  }
  return status;
}

}  // namespace trainctl
