#include "tests/unit/agent_fakes.h"

#include <cstring>

namespace trainctl::agent::testing {
namespace {

class FakeStream final : public CoordinatorStream {
 public:
  explicit FakeStream(std::shared_ptr<FakeSession> session)
      : session_(std::move(session)) {}
  bool Write(const v1::AgentMessage& message) override {
    return session_->AgentWrite(message);
  }
  bool Read(v1::CoordinatorMessage* message) override {
    return session_->AgentRead(message);
  }
  void Cancel() override { session_->Drop(absl::CancelledError("cancelled")); }
  absl::Status Finish() override { return session_->AgentFinish(); }

 private:
  std::shared_ptr<FakeSession> session_;
};

class FakeConnection final : public CoordinatorConnection {
 public:
  explicit FakeConnection(FakeCoordinator* coordinator)
      : coordinator_(coordinator) {}
  bool WaitForConnected(std::chrono::milliseconds timeout) override {
    return coordinator_->AgentWaitForConnected(timeout);
  }
  std::unique_ptr<CoordinatorStream> Connect() override {
    return coordinator_->AgentConnect();
  }

 private:
  FakeCoordinator* coordinator_;
};

class FakeRankHandle final : public RankHandle {
 public:
  explicit FakeRankHandle(std::shared_ptr<FakeRank> rank)
      : rank_(std::move(rank)) {}
  ~FakeRankHandle() override {
    if (exit_thread_.joinable()) exit_thread_.join();
  }
  absl::Status Activate(const std::string& stdin_bytes,
                        Callbacks callbacks) override {
    return rank_->Activate(stdin_bytes, std::move(callbacks));
  }
  void Terminate(int64_t /*grace_ms*/) override {
    if (rank_->exited() || rank_->terminated()) return;
    rank_->Terminate();
    exit_thread_ = std::thread([rank = rank_] { rank->Exit(-15); });
  }
  // Asked only: the test plays the rank's answer (a report, an exit).
  void CheckpointAndStop(int64_t grace_ms, int64_t /*kill_grace_ms*/) override {
    if (!rank_->exited()) rank_->CheckpointAndStop(grace_ms);
  }
  bool Rebind(Callbacks callbacks) override { return rank_->Rebind(std::move(callbacks)); }
  void RequestRegroup(int generation) override {
    if (!rank_->exited()) rank_->RequestRegroup(generation);
  }
  void AbandonGroup(int generation) override {
    if (!rank_->exited()) rank_->AbandonGroup(generation);
  }
  bool exited() const override { return rank_->exited(); }
  pid_t pid() const override { return rank_->pid(); }

 private:
  std::shared_ptr<FakeRank> rank_;
  std::thread exit_thread_;
};

}  // namespace

void FakeSession::Send(v1::CoordinatorMessage message) {
  std::lock_guard<std::mutex> lock(mu_);
  to_agent_.push_back(std::move(message));
  cv_.notify_all();
}

void FakeSession::Drop(absl::Status why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ended_) ended_ = std::move(why);
  to_agent_.clear();
  cv_.notify_all();
}

std::optional<v1::AgentMessage> FakeSession::Next() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, kWait, [&] { return !from_agent_.empty(); })) {
    return std::nullopt;
  }
  v1::AgentMessage message = std::move(from_agent_.front());
  from_agent_.pop_front();
  return message;
}

std::optional<v1::AgentMessage> FakeSession::NextNotHeartbeat() {
  for (;;) {
    std::optional<v1::AgentMessage> message = Next();
    if (!message || !message->has_heartbeat()) return message;
  }
}

bool FakeSession::ended() {
  std::lock_guard<std::mutex> lock(mu_);
  return ended_.has_value();
}

bool FakeSession::AgentWrite(const v1::AgentMessage& message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ended_) return false;
  from_agent_.push_back(message);
  cv_.notify_all();
  return true;
}

bool FakeSession::AwaitDrained(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, wait, [&] { return to_agent_.empty(); });
}

bool FakeSession::AgentRead(v1::CoordinatorMessage* message) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return ended_ || !to_agent_.empty(); });
  if (ended_) return false;
  *message = std::move(to_agent_.front());
  to_agent_.pop_front();
  cv_.notify_all();
  return true;
}

absl::Status FakeSession::AgentFinish() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return ended_.has_value(); });
  return *ended_;
}

void FakeCoordinator::SetReachable(bool reachable) {
  std::lock_guard<std::mutex> lock(mu_);
  reachable_ = reachable;
  cv_.notify_all();
}

std::shared_ptr<FakeSession> FakeCoordinator::Accept() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, kWait, [&] { return !pending_.empty(); })) {
    return nullptr;
  }
  std::shared_ptr<FakeSession> session = std::move(pending_.front());
  pending_.pop_front();
  return session;
}

std::shared_ptr<FakeSession> FakeCoordinator::AcceptAndRegister(
    v1::RegisterRequest* hello, std::vector<v1::RankCursor> cursors,
    int64_t heartbeat_interval_ms) {
  std::shared_ptr<FakeSession> session = Accept();
  if (session == nullptr) return nullptr;
  std::optional<v1::AgentMessage> first = session->Next();
  if (!first || !first->has_register_()) return nullptr;
  if (hello != nullptr) *hello = first->register_();
  v1::CoordinatorMessage answer;
  answer.mutable_registered()->set_worker_name(first->register_().name());
  answer.mutable_registered()->set_heartbeat_interval_ms(heartbeat_interval_ms);
  for (v1::RankCursor& cursor : cursors) {
    *answer.mutable_registered()->add_cursors() = std::move(cursor);
  }
  session->Send(std::move(answer));
  return session;
}

bool FakeCoordinator::AwaitWaits(int n) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, kWait, [&] { return waits_ >= n; });
}

int FakeCoordinator::streams_opened() {
  std::lock_guard<std::mutex> lock(mu_);
  return opened_;
}

std::unique_ptr<CoordinatorConnection> FakeCoordinator::Connection() {
  return std::make_unique<FakeConnection>(this);
}

bool FakeCoordinator::AgentWaitForConnected(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  ++waits_;
  cv_.notify_all();
  return cv_.wait_for(lock, timeout, [&] { return reachable_; });
}

std::unique_ptr<CoordinatorStream> FakeCoordinator::AgentConnect() {
  auto session = std::make_shared<FakeSession>();
  std::lock_guard<std::mutex> lock(mu_);
  ++opened_;
  pending_.push_back(session);
  cv_.notify_all();
  return std::make_unique<FakeStream>(std::move(session));
}

v1::RankLaunch FakeRank::launch() const {
  v1::RankLaunch launch;
  const std::string& frame = command_.stdin_bytes;
  if (frame.size() >= 4) launch.ParseFromString(frame.substr(4));
  return launch;
}

void FakeRank::Line(const std::string& stream, const std::string& text) {
  RankHandle::Callbacks callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    callbacks = callbacks_;
  }
  callbacks.on_line(stream, text);
}

void FakeRank::Report(const v1::RankReport& report) {
  RankHandle::Callbacks callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    callbacks = callbacks_;
  }
  callbacks.on_report(report);
}

void FakeRank::Metric(int64_t step, double loss) {
  v1::RankReport report;
  report.mutable_metric()->set_step(step);
  (*report.mutable_metric()->mutable_values())["loss"] = loss;
  Report(report);
}

void FakeRank::Exit(int code, const std::string& last_error) {
  RankHandle::Callbacks callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (exit_delivered_) return;
    exited_ = true;  // as RankProcess: exited, then on_exit
    exit_delivered_ = true;
    callbacks = callbacks_;
  }
  callbacks.on_exit(code, last_error);
}

void FakeRank::Vanish() {
  std::lock_guard<std::mutex> lock(mu_);
  exited_ = true;
}

bool FakeRank::terminated() {
  std::lock_guard<std::mutex> lock(mu_);
  return terminated_;
}

bool FakeRank::exited() {
  std::lock_guard<std::mutex> lock(mu_);
  return exited_;
}

bool FakeRank::Rebind(RankHandle::Callbacks callbacks) {
  std::lock_guard<std::mutex> lock(mu_);
  if (exit_delivered_) return false;
  callbacks_ = std::move(callbacks);
  return true;
}

absl::Status FakeRank::Activate(const std::string& stdin_bytes,
                                RankHandle::Callbacks callbacks) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!command_.standby || exited_) {
    return absl::FailedPreconditionError("not a waiting standby");
  }
  command_.standby = false;
  command_.stdin_bytes = stdin_bytes;
  callbacks_ = std::move(callbacks);
  return absl::OkStatus();
}

void FakeRank::Terminate() {
  std::lock_guard<std::mutex> lock(mu_);
  terminated_ = true;
}

void FakeRank::CheckpointAndStop(int64_t grace_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  stop_grace_ms_ = grace_ms;
}

void FakeRank::RequestRegroup(int generation) {
  std::lock_guard<std::mutex> lock(mu_);
  ++regroup_requests_;
  regroup_generation_ = generation;
}

void FakeRank::AbandonGroup(int generation) {
  std::lock_guard<std::mutex> lock(mu_);
  abandoned_generation_ = generation;
}

int FakeRank::abandoned_generation() {
  std::lock_guard<std::mutex> lock(mu_);
  return abandoned_generation_;
}

int FakeRank::regroup_generation() {
  std::lock_guard<std::mutex> lock(mu_);
  return regroup_generation_;
}

int FakeRank::regroup_requests() {
  std::lock_guard<std::mutex> lock(mu_);
  return regroup_requests_;
}

int64_t FakeRank::stop_grace_ms() {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_grace_ms_;
}

RankStarter FakeRanks::Starter() {
  return [this](const RankCommand& command, RankHandle::Callbacks callbacks)
             -> absl::StatusOr<std::unique_ptr<RankHandle>> {
    std::unique_lock<std::mutex> lock(mu_);
    if (command.standby && hold_standbys_) {
      ++standbys_held_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !hold_standbys_; });
      --standbys_held_;
    }
    auto rank =
        std::make_shared<FakeRank>(command, std::move(callbacks), next_pid_++);
    started_.push_back(rank);
    cv_.notify_all();
    return std::unique_ptr<RankHandle>(
        std::make_unique<FakeRankHandle>(std::move(rank)));
  };
}

std::shared_ptr<FakeRank> FakeRanks::Started(size_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, kWait, [&] { return started_.size() > n; })) {
    return nullptr;
  }
  return started_[n];
}

void FakeRanks::HoldStandbyStarts(bool hold) {
  std::lock_guard<std::mutex> lock(mu_);
  hold_standbys_ = hold;
  cv_.notify_all();
}

bool FakeRanks::AwaitHeldStandby() {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, kWait, [&] { return standbys_held_ > 0; });
}

size_t FakeRanks::count() {
  std::lock_guard<std::mutex> lock(mu_);
  return started_.size();
}

}  // namespace trainctl::agent::testing
