#include "coordinator/agent_stream.h"

#include <deque>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/utf8_sanitize.h"

namespace trainctl::coordinator {
namespace {

using Reactor = grpc::ServerBidiReactor<v1::AgentMessage, v1::CoordinatorMessage>;

// Messages waiting for an agent that reads nothing: past this many it is
// disconnected (it reconnects and registers afresh) rather than let the
// queue grow without bound.
constexpr size_t kMaxQueuedMessages = 10'000;

class AgentStream;

// The AgentLink the JobManager holds. It may outlive the stream (a lost
// worker's link is still in an outbox), so it reaches the stream only
// until Detach.
class CallbackLink final : public AgentLink {
 public:
  CallbackLink(AgentStream* stream, const auth::Authenticator& auth)
      : stream_(stream), auth_(auth) {}
  bool Send(const v1::CoordinatorMessage& message) override;
  void Disconnect() override;
  void Detach() {
    std::lock_guard<std::mutex> lock(mu_);
    stream_ = nullptr;
  }

 private:
  std::mutex mu_;
  AgentStream* stream_;  // GUARDED_BY(mu_)
  const auth::Authenticator& auth_;
};

class AgentStream final : public Reactor {
 public:
  AgentStream(grpc::CallbackServerContext* ctx, JobManager& jobs,
              const auth::Authenticator& auth,
              auth::WorkerEnrollment& enrollment)
      : ctx_(ctx), jobs_(jobs), auth_(auth), enrollment_(enrollment) {
    // Before reading anything: a peer without a worker certificate gets
    // nothing but the refusal.
    absl::StatusOr<std::string> identity = auth_.WorkerIdentity(*ctx);
    if (!identity.ok()) {
      TLOG_WARNING << "refused a worker stream from " << ctx->peer() << ": "
                   << identity.status().message();
      End(ToGrpcStatus(identity.status()));
      return;
    }
    identity_ = *identity;
    StartRead(&in_);
  }

  // Queues `message` down to the agent; false once the stream is ending.
  // The write starts under mu_, so End cannot finish the call in between.
  bool Write(const v1::CoordinatorMessage& message) {
    std::lock_guard<std::mutex> lock(mu_);
    if (ending_) return false;
    if (writing_) {
      if (queue_.size() >= kMaxQueuedMessages) {
        TLOG_WARNING << "worker " << name_ << " reads nothing ("
                     << queue_.size() << " messages waiting): disconnecting it";
        ctx_->TryCancel();
        return false;
      }
      queue_.push_back(message);
      return true;
    }
    writing_ = true;
    out_ = message;
    StartWrite(&out_);
    return true;
  }

  void Cancel() { ctx_->TryCancel(); }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (ok && !queue_.empty()) {
      out_ = std::move(queue_.front());
      queue_.pop_front();
      StartWrite(&out_);
      return;
    }
    // A failed write means a broken stream: the read side notices and ends it.
    queue_.clear();
    writing_ = false;
    if (ending_) FinishLocked();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the agent left, or the call was cancelled
      End(grpc::Status::OK);
      return;
    }
    if (link_ == nullptr) {
      if (!Register()) return;
    } else {
      Dispatch();
    }
    StartRead(&in_);
  }

  void OnDone() override {
    if (link_ != nullptr) link_->Detach();
    delete this;
  }

 private:
  // The first message: who the agent is, and its ranks after a reconnect.
  // False when the stream was ended instead.
  bool Register() {
    if (!in_.has_register_()) {
      End(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                       "the first message on the stream must be register"));
      return false;
    }
    const v1::RegisterRequest& reg = in_.register_();
    const std::string& name = reg.name();
    if (!identity_.empty() && identity_ != name) {
      // Not yet checked: shown escaped, and cut, in the log and the answer.
      const std::string shown =
          EscapeControlCharacters(SanitizeUtf8(name, kMaxWorkerStringBytes));
      TLOG_WARNING << "refused worker " << shown << " from " << ctx_->peer()
                   << ": its certificate is for " << identity_;
      End(grpc::Status(
          grpc::StatusCode::PERMISSION_DENIED,
          absl::StrCat("register.name '", shown, "' is not the name in the "
                       "worker's certificate ('", identity_, "'); start it with "
                       "--name ", identity_, " or join again under the new name")));
      return false;
    }
    if (!identity_.empty()) {
      // The slots were fixed when the node joined: a stolen or rogue
      // certificate cannot claim more and draw every later job to itself.
      absl::StatusOr<int> enrolled = enrollment_.EnrolledSlots(name);
      if (enrolled.ok() && *enrolled > 0 && reg.slots() > *enrolled) {
        TLOG_WARNING << "refused worker " << name << " from " << ctx_->peer()
                     << ": it claims " << reg.slots() << " slots, joined with "
                     << *enrolled;
        End(grpc::Status(
            grpc::StatusCode::PERMISSION_DENIED,
            absl::StrCat("register.slots ", reg.slots(), " is more than the ",
                         *enrolled, " slots worker '", name,
                         "' joined with; to give it more, join it again with "
                         "its join token and the new --slots")));
        return false;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      name_ = name;
    }
    auto link = std::make_shared<CallbackLink>(this, auth_);
    absl::Status registered = jobs_.RegisterWorker(reg, link);
    if (!registered.ok()) {
      TLOG_WARNING << "rejected worker registration from " << ctx_->peer()
                   << ": " << registered.message();
      link->Detach();
      End(ToGrpcStatus(registered));
      return false;
    }
    link_ = std::move(link);
    return true;
  }

  void Dispatch() {
    jobs_.Heartbeat(name_);
    absl::Status handled;
    switch (in_.msg_case()) {
      case v1::AgentMessage::kHeartbeat:
        jobs_.OnProgress(name_, in_.heartbeat());
        break;
      case v1::AgentMessage::kCheckpoint:
        handled = jobs_.OnRankCheckpoint(name_, in_.checkpoint());
        break;
      case v1::AgentMessage::kRankStatus:
        handled = jobs_.OnRankStatus(name_, in_.rank_status());
        break;
      case v1::AgentMessage::kMetrics:
        handled = jobs_.OnRankMetrics(name_, in_.metrics());
        break;
      case v1::AgentMessage::kLog:
        handled = jobs_.OnRankLog(name_, in_.log());
        break;
      case v1::AgentMessage::kProbeDataResult:
        jobs_.OnProbeDataResult(name_, in_.probe_data_result());
        break;
      default:
        handled = absl::InvalidArgumentError(
            "unexpected message on an established agent stream");
    }
    // A bad message is the agent's problem, not a reason to drop the node.
    if (!handled.ok()) {
      TLOG_WARNING << "worker " << name_ << ": " << handled.message();
    }
  }

  // No more messages either way; a registered worker's ranks are lost
  // (JobManager::WorkerDisconnected). Finishes once the write in flight is
  // done. Runs in a reaction or the constructor, so OnDone (which deletes
  // this) cannot run before it returns.
  void End(grpc::Status status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (ending_) return;
      ending_ = true;
      status_ = std::move(status);
      queue_.clear();
    }
    if (link_ != nullptr) {
      link_->Detach();
      jobs_.WorkerDisconnected(name_, link_.get());
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!writing_) FinishLocked();
  }

  void FinishLocked() {
    if (finished_) return;
    finished_ = true;
    Finish(status_);
  }

  grpc::CallbackServerContext* const ctx_;
  JobManager& jobs_;
  const auth::Authenticator& auth_;
  auth::WorkerEnrollment& enrollment_;
  std::string identity_;  // the certificate's name; "" when insecure
  // Set once registered; used by reactions only (one at a time per side).
  std::shared_ptr<CallbackLink> link_;
  v1::AgentMessage in_;

  std::mutex mu_;
  std::string name_;        // GUARDED_BY(mu_) for Write's log line
  bool writing_ = false;    // GUARDED_BY(mu_)
  bool ending_ = false;     // GUARDED_BY(mu_)
  bool finished_ = false;   // GUARDED_BY(mu_)
  grpc::Status status_;     // GUARDED_BY(mu_)
  v1::CoordinatorMessage out_;                 // the write in flight
  std::deque<v1::CoordinatorMessage> queue_;  // GUARDED_BY(mu_)
};

bool CallbackLink::Send(const v1::CoordinatorMessage& message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stream_ == nullptr) return false;
  if (message.has_assign()) {
    // Each generation's ranks get the key to their own rendezvous keys.
    v1::CoordinatorMessage keyed = message;
    for (v1::RankAssignment& a : *keyed.mutable_assign()->mutable_ranks()) {
      a.set_rendezvous_key(auth_.RendezvousKey(a.job_id(), a.generation()));
    }
    return stream_->Write(keyed);
  }
  return stream_->Write(message);
}

void CallbackLink::Disconnect() {
  std::lock_guard<std::mutex> lock(mu_);
  if (stream_ != nullptr) stream_->Cancel();
}

}  // namespace

grpc::ServerBidiReactor<v1::AgentMessage, v1::CoordinatorMessage>*
NewAgentStream(grpc::CallbackServerContext* ctx, JobManager& jobs,
               const auth::Authenticator& auth,
               auth::WorkerEnrollment& enrollment) {
  return new AgentStream(ctx, jobs, auth, enrollment);
}

}  // namespace trainctl::coordinator
