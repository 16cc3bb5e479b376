#include "bench/control_plane/sim_agent.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <random>

#include "absl/strings/str_cat.h"

namespace trainctl::bench {

int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

// The real agent's reconnect: at once, capped under a second.
constexpr int64_t kReconnectUs = 200'000;
constexpr int64_t kReportIntervalUs = 1'000'000;
// Messages waiting behind a slow stream; past this they are dropped (the
// benchmark's own rule: a real agent keeps reports for a resend).
constexpr size_t kMaxQueued = 20'000;

std::mutex shutdown_mu;
std::condition_variable shutdown_cv;

}  // namespace

// One Connect call. Owns itself: deleted once gRPC is done with it. At most
// one write is in flight (the callback API's rule); later ones queue.
class SimAgent::Stream
    : public grpc::ClientBidiReactor<v1::AgentMessage, v1::CoordinatorMessage> {
 public:
  Stream(SimAgent* agent, v1::AgentMessage registration) : agent_(agent) {
    // Waits for the channel to connect, as the real agent does.
    context_.set_wait_for_ready(true);
    agent->stub_->async()->Connect(&context_, this);
    Send(std::move(registration));
    StartRead(&in_);
    AddHold();  // writes come later, from the ticks
    StartCall();
  }

  // False once the stream has failed. The write starts under mu_ so that a
  // failing read (which ends the hold) cannot finish the call in between.
  bool Send(v1::AgentMessage message) {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) return false;
    if (writing_) {
      if (queue_.size() >= kMaxQueued) return false;
      queue_.push_back(std::move(message));
      return true;
    }
    writing_ = true;
    out_ = std::move(message);
    StartWrite(&out_);
    return true;
  }

  void Cancel() { context_.TryCancel(); }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ok || queue_.empty()) {
      if (!ok) broken_ = true, queue_.clear();
      writing_ = false;
      return;
    }
    out_ = std::move(queue_.front());
    queue_.pop_front();
    StartWrite(&out_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        broken_ = true;
        queue_.clear();
      }
      RemoveHold();
      return;
    }
    agent_->OnMessage(in_);
    StartRead(&in_);
  }

  void OnDone(const grpc::Status&) override {
    agent_->OnStreamDone(this);
    delete this;
  }

 private:
  SimAgent* const agent_;
  grpc::ClientContext context_;
  v1::CoordinatorMessage in_;
  std::mutex mu_;
  bool broken_ = false;   // GUARDED_BY(mu_)
  bool writing_ = false;  // GUARDED_BY(mu_)
  v1::AgentMessage out_;  // the write in flight
  std::deque<v1::AgentMessage> queue_;  // GUARDED_BY(mu_)
};

namespace {

std::atomic<int64_t> g_late_ticks{0};

// The first time after `now_us` on the grid `origin_us` + k x `interval_us`.
int64_t FirstOnGridAfter(int64_t origin_us, int64_t interval_us, int64_t now_us) {
  if (origin_us > now_us) return origin_us;
  return origin_us + ((now_us - origin_us) / interval_us + 1) * interval_us;
}

// What follows `due_us` on its grid. A late tick skips what it missed rather
// than starting a new grid at `now`: that put every agent on one phase after
// the ticker's first stall, and the whole cluster's heartbeats and reports
// then came as one burst a second (docs/performance.md, 2026-12-05).
int64_t NextOnGrid(int64_t due_us, int64_t interval_us, int64_t now_us) {
  if (due_us + interval_us <= now_us) ++g_late_ticks;
  return FirstOnGridAfter(due_us, interval_us, now_us);
}

}  // namespace

int64_t LateTicks() { return g_late_ticks.load(); }

int64_t SimAgent::JobLengthUs(const std::string& job_id) const {
  // Between half and one and a half times job_seconds, the same for every
  // rank of the job (and so on every agent): jobs submitted together do not
  // all end in the same second, as in a real cluster.
  const uint64_t h = std::hash<std::string>{}(job_id) * 0x9E3779B97F4A7C15ull;
  const double spread = 0.5 + static_cast<double>(h >> 11) / 9007199254740992.0;
  return static_cast<int64_t>(spread * options_.job_seconds * 1e6);
}

SimAgent::SimAgent(SimAgentOptions options,
                   std::shared_ptr<grpc::Channel> channel,
                   const SimEvents* events)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      stub_(v1::Workers::NewStub(channel_)),
      events_(events) {}

SimAgent::~SimAgent() { Shutdown(); }

void SimAgent::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shut_down_ = true;
    if (stream_ != nullptr) stream_->Cancel();
  }
  std::unique_lock<std::mutex> lock(shutdown_mu);
  shutdown_cv.wait(lock, [this] {
    std::lock_guard<std::mutex> agent_lock(mu_);
    return open_streams_ == 0;
  });
}

int SimAgent::running_ranks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(ranks_.size());
}

v1::AgentMessage SimAgent::Registration() const {
  v1::AgentMessage message;
  v1::RegisterRequest* r = message.mutable_register_();
  r->set_name(options_.name);
  r->set_slots(options_.slots);
  r->set_collective_host("127.0.0.1");
  r->add_devices("cpu");
  r->set_version("control-plane-bench");
  for (const Rank& rank : ranks_) {
    v1::RankStatus* s = r->add_ranks();
    s->set_job_id(rank.job_id);
    s->set_generation(rank.generation);
    s->set_rank(rank.rank);
    s->set_running(true);
    s->set_pid(100'000 + rank.rank);
  }
  return message;
}

bool SimAgent::SendLocked(const v1::AgentMessage& message) {
  return stream_ != nullptr && stream_->Send(message);
}

void SimAgent::OnMessage(const v1::CoordinatorMessage& message) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = SteadyMicros();
  switch (message.msg_case()) {
    case v1::CoordinatorMessage::kRegistered: {
      const int64_t ms = message.registered().heartbeat_interval_ms();
      if (ms > 0) heartbeat_interval_us_ = ms * 1000;
      for (const v1::RankCursor& c : message.registered().cursors()) {
        for (Rank& rank : ranks_) {
          if (rank.job_id == c.job_id() && rank.generation == c.generation() &&
              rank.rank == c.rank() && rank.seq < c.last_seq()) {
            rank.seq = c.last_seq();
          }
        }
      }
      registered_at_us_ = now;
      break;
    }
    case v1::CoordinatorMessage::kAssign:
      for (const v1::RankAssignment& a : message.assign().ranks()) {
        ranks_.push_back({a.job_id(), a.generation(), a.rank(), a.world_size(),
                          0, 0, now + JobLengthUs(a.job_id())});
        v1::AgentMessage started;
        v1::RankStatus* s = started.mutable_rank_status();
        s->set_job_id(a.job_id());
        s->set_generation(a.generation());
        s->set_rank(a.rank());
        s->set_running(true);
        s->set_pid(100'000 + a.rank());
        SendLocked(started);
      }
      break;
    case v1::CoordinatorMessage::kCancel:
      for (auto it = ranks_.begin(); it != ranks_.end();) {
        if (it->job_id != message.cancel().job_id() ||
            it->generation != message.cancel().generation()) {
          ++it;
          continue;
        }
        v1::AgentMessage ended;
        v1::RankStatus* s = ended.mutable_rank_status();
        s->set_job_id(it->job_id);
        s->set_generation(it->generation);
        s->set_rank(it->rank);
        s->set_exit_code(-15);
        SendLocked(ended);
        if (events_->rank_exited) events_->rank_exited(it->job_id, it->world_size);
        it = ranks_.erase(it);
      }
      break;
    default:
      break;  // checkpoint deletions and data probes: nothing to do
  }
}

void SimAgent::OnStreamDone(Stream* stream) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stream_ == stream) stream_ = nullptr;
    static thread_local std::minstd_rand jitter(std::random_device{}());
    reconnect_at_us_ = SteadyMicros() + kReconnectUs + jitter() % kReconnectUs;
    --open_streams_;
  }
  std::lock_guard<std::mutex> lock(shutdown_mu);
  shutdown_cv.notify_all();
}

void SimAgent::Tick(int64_t now_us, bool exits_allowed) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return;
  if (stream_ == nullptr) {
    if (now_us < reconnect_at_us_) return;
    ++open_streams_;
    stream_ = new Stream(this, Registration());
    next_heartbeat_us_ =
        FirstOnGridAfter(options_.phase_us, heartbeat_interval_us_, now_us);
    if (next_report_us_ == 0) {
      next_report_us_ = FirstOnGridAfter(options_.phase_us, kReportIntervalUs, now_us);
    }
    return;
  }
  if (now_us >= next_heartbeat_us_) {
    v1::AgentMessage beat;
    v1::Heartbeat* h = beat.mutable_heartbeat();
    h->set_time_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count());
    for (const Rank& rank : ranks_) {
      v1::RankHeartbeat* r = h->add_ranks();
      r->set_job_id(rank.job_id);
      r->set_generation(rank.generation);
      r->set_rank(rank.rank);
      r->set_step(rank.step);
      r->set_collective_seq(rank.step);
      r->set_phase("compute");
    }
    SendLocked(beat);
    next_heartbeat_us_ = NextOnGrid(next_heartbeat_us_, heartbeat_interval_us_, now_us);
  }
  if (now_us < next_report_us_) return;
  next_report_us_ = NextOnGrid(next_report_us_, kReportIntervalUs, now_us);
  const int64_t unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  for (auto it = ranks_.begin(); it != ranks_.end();) {
    Rank& rank = *it;
    ++rank.step;
    v1::AgentMessage metric;
    v1::RankMetrics* m = metric.mutable_metrics();
    m->set_job_id(rank.job_id);
    m->set_generation(rank.generation);
    m->set_seq(++rank.seq);
    v1::MetricPoint* p = m->mutable_point();
    p->set_step(rank.step);
    p->set_kind("train");
    p->set_rank(rank.rank);
    p->set_time_unix_ms(unix_ms);
    (*p->mutable_values())["loss"] = 1.0 / static_cast<double>(rank.step + 1);
    (*p->mutable_values())["bench_sent_us"] = static_cast<double>(now_us);
    SendLocked(metric);
    v1::AgentMessage log;
    v1::RankLog* l = log.mutable_log();
    l->set_job_id(rank.job_id);
    l->set_generation(rank.generation);
    l->set_seq(++rank.seq);
    l->mutable_line()->set_rank(rank.rank);
    l->mutable_line()->set_stream("stdout");
    l->mutable_line()->set_time_unix_ms(unix_ms);
    l->mutable_line()->set_text(
        absl::StrCat("step ", rank.step, " loss 0.5 bench_sent_us=", now_us));
    SendLocked(log);
    if (!exits_allowed || now_us < rank.ends_at_us) {
      ++it;
      continue;
    }
    v1::AgentMessage ended;
    v1::RankStatus* s = ended.mutable_rank_status();
    s->set_job_id(rank.job_id);
    s->set_generation(rank.generation);
    s->set_rank(rank.rank);
    s->set_exit_code(0);
    SendLocked(ended);
    if (events_->rank_exited) events_->rank_exited(rank.job_id, rank.world_size);
    it = ranks_.erase(it);
  }
}

}  // namespace trainctl::bench
