#include "worker/agent/agent.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <set>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/frame_io.h"
#include "common/log.h"
#include "trainctl/v1/rank.pb.h"
#include "worker/agent/process_hardening.h"
#include "common/utf8_sanitize.h"
#include "worker/support/heap_reuse.h"

extern char** environ;

namespace trainctl::agent {
namespace {

// The GPUs the slots get: one each, in --gpus order, as many as there are
// slots.
std::vector<std::string> SlotGpus(const AgentOptions& options) {
  std::vector<std::string> gpus = options.gpus;
  if (static_cast<int>(gpus.size()) > options.slots) gpus.resize(options.slots);
  return gpus;
}

// How long one wait for the channel lasts before Stop() is looked at again.
constexpr auto kConnectWaitSlice = std::chrono::milliseconds(500);

// An exit's error text: its last stderr line is at most 16 KiB already.
constexpr size_t kMaxExitMessageBytes = 16 * 1024;

}  // namespace

Agent::Agent(AgentOptions options, AgentDeps deps)
    : options_(std::move(options)),
      coordinator_(std::move(deps.coordinator)),
      start_rank_(std::move(deps.start_rank)),
      clock_(*deps.clock),
      reports_(kKeptReportsPerRank, kKeptReportsBytes),
      free_gpus_(SlotGpus(options_)) {}

Agent::~Agent() { Stop(); }

void Agent::Run() {
  ReplenishStandby();
  int64_t backoff_ms = 100;
  while (!stopping_.load()) {
    if (!AwaitChannel()) break;  // stopping
    const bool registered = RunSession();
    if (stopping_.load()) break;
    if (registered) backoff_ms = 100;
    TLOG_WARNING << "lost the coordinator at " << options_.coordinator
                 << "; reconnecting in " << backoff_ms << " ms";
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(backoff_ms),
                 [this] { return stopping_.load(); });
    backoff_ms = std::min(backoff_ms * 2, options_.max_backoff_ms);
  }
}

bool Agent::AwaitChannel() {
  // A stream started while the channel is reconnecting fails at once, and
  // over TLS the failed call can abort the handshake under way (as for the
  // CLI's streams): so the session starts once the channel is connected.
  // The channel itself retries within a second (GrpcCoordinatorConnection).
  bool said = false;
  while (!stopping_.load()) {
    if (coordinator_->WaitForConnected(kConnectWaitSlice)) {
      return true;
    }
    if (!said) {
      TLOG_INFO << "waiting for the coordinator at " << options_.coordinator;
      said = true;
    }
  }
  return false;
}

void Agent::Stop() {
  if (stopping_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lock(probe_mu_);
  }
  probe_cv_.notify_all();
  if (probe_thread_.joinable()) probe_thread_.join();
  std::map<RankId, std::unique_ptr<RankHandle>> ranks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (open_stream_ != nullptr) open_stream_->Cancel();
    for (auto& [id, proc] : ranks_) proc->Terminate(options_.kill_grace_ms);
    ranks.swap(ranks_);
    standby_.clear();  // closing their stdin lets standbys exit
  }
  cv_.notify_all();
  // Destructors wait for each rank to exit (SIGKILL after the grace period).
  for (auto& [id, proc] : ranks) {
    while (!proc->exited()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

bool Agent::RunSession() {
  std::unique_ptr<CoordinatorStream> stream = coordinator_->Connect();
  {
    // From here Stop() can end the session, even before it registered.
    std::lock_guard<std::mutex> lock(mu_);
    open_stream_ = stream.get();
    if (stopping_.load()) stream->Cancel();
  }
  const bool registered = Converse(stream.get());
  std::lock_guard<std::mutex> lock(mu_);
  open_stream_ = nullptr;
  return registered;
}

bool Agent::Converse(CoordinatorStream* stream) {
  v1::AgentMessage hello;
  auto* reg = hello.mutable_register_();
  reg->set_name(options_.name);
  reg->set_slots(options_.slots);
  reg->set_collective_host(options_.collective_host);
  const std::vector<std::string> gpus = SlotGpus(options_);
  reg->set_gpu_slots(static_cast<int>(gpus.size()));
  reg->set_memory_bytes(options_.memory_bytes);
  reg->set_gpu_memory_bytes(options_.gpu_memory_bytes);
  reg->add_devices("cpu");
  for (const auto& gpu : gpus) reg->add_devices(absl::StrCat("cuda:", gpu));
  reg->set_version(TRAINCTL_VERSION);
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::set<RankId> exited;
    for (const v1::RankStatus& exit : recent_exits_) {
      exited.insert({exit.job_id(), exit.generation(), exit.rank()});
    }
    for (const auto& [id, proc] : ranks_) {
      // Listed even if it just exited, until its exit is among the recent
      // ones (listed below).
      if (exited.count(id)) continue;
      v1::RankStatus* s = reg->add_ranks();
      s->set_job_id(std::get<0>(id));
      s->set_generation(std::get<1>(id));
      s->set_rank(std::get<2>(id));
      s->set_running(true);
      s->set_pid(proc->pid());
    }
    for (const v1::RankStatus& exit : recent_exits_) *reg->add_ranks() = exit;
  }
  if (!stream->Write(hello)) {
    TLOG_WARNING << "cannot register with " << options_.coordinator << ": "
                 << stream->Finish().message();
    return false;
  }
  v1::CoordinatorMessage first;
  const bool answered = stream->Read(&first);
  if (!answered || !first.has_registered()) {
    if (answered) stream->Cancel();  // not the protocol: end it here
    const absl::Status status = stream->Finish();
    if (!stopping_.load()) {
      TLOG_WARNING << "registration with " << options_.coordinator
                   << " failed: " << status.message();
    }
    return false;
  }
  TLOG_INFO << "registered with " << options_.coordinator << " as "
            << options_.name << " (" << options_.slots << " slots)";
  if (options_.on_registration) options_.on_registration(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stream_ = stream;
    ResumeReportsLocked(first.registered());
    FlushBufferLocked();
  }
  std::atomic<bool> session_over{false};
  std::thread heartbeat([this, &session_over,
                         interval = first.registered().heartbeat_interval_ms()] {
    while (!session_over.load() && !stopping_.load()) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(interval), [&] {
          return session_over.load() || stopping_.load();
        });
      }
      if (session_over.load() || stopping_.load()) break;
      v1::AgentMessage beat;
      beat.mutable_heartbeat()->set_time_unix_ms(clock_.NowUnixMs());
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& [id, progress] : progress_) {
          *beat.mutable_heartbeat()->add_ranks() = progress;
        }
        reports_.ForgetDelivered();
      }
      Send(std::move(beat));
      ReapExited();
    }
  });

  v1::CoordinatorMessage message;
  while (stream->Read(&message)) {
    if (message.has_assign()) {
      for (v1::RankAssignment a : message.assign().ranks()) {
        *a.mutable_spec() = message.assign().spec();  // sent once per worker
        StartRank(a);
      }
    } else if (message.has_cancel()) {
      TLOG_INFO << (message.cancel().checkpoint_first()
                        ? "checkpoint and stop job "
                        : "cancel job ")
                << message.cancel().job_id() << ": "
                << message.cancel().reason();
      CancelJob(message.cancel());
    } else if (message.has_delete_checkpoints()) {
      DeleteCheckpoints(message.delete_checkpoints());
    } else if (message.has_probe_data()) {
      QueueDataProbe(message.probe_data());
    } else if (message.has_regroup()) {
      Regroup(message.regroup());
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::lock_guard<std::mutex> write_lock(write_mu_);
    stream_ = nullptr;
    reports_.SessionEnded();
  }
  if (options_.on_registration) options_.on_registration(false);
  session_over.store(true);
  cv_.notify_all();
  heartbeat.join();
  const absl::Status status = stream->Finish();
  if (!status.ok() && !stopping_.load()) {
    TLOG_WARNING << "stream ended: " << status.message();
  }
  return true;
}

int Agent::DefaultThreads() const {
  const int cpus = options_.cpus > 0
                       ? options_.cpus
                       : static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cpus / std::max(1, options_.slots));
}

int Agent::ThreadsPerRank(const v1::RankAssignment& a) const {
  if (a.spec().training().threads_per_rank() > 0) {
    return a.spec().training().threads_per_rank();
  }
  return DefaultThreads();
}

absl::StatusOr<std::unique_ptr<RankHandle>> Agent::SpawnRank(
    const std::string& stdin_bytes, int threads, bool standby,
    RankHandle::Callbacks callbacks) {
  RankCommand launch;
  launch.program = options_.rank_program;
  launch.args = {"rank"};
  if (standby) launch.args.push_back("--standby");
  // BLAS and OpenMP pools read these when the libraries load, so they are
  // fixed per process: sized like the intra-op pool, because oversubscribed
  // cores cost more than any other setting here.
  for (const char* var : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                          "MKL_NUM_THREADS"}) {
    launch.env[var] = absl::StrCat(threads);
  }
  // malloc tuned for training from exec on (worker/support/heap_reuse.h).
  const char* tunables = getenv("GLIBC_TUNABLES");
  launch.env["GLIBC_TUNABLES"] =
      train::RankMallocTunables(tunables != nullptr ? tunables : "");
  launch.env["TRAINCTL_STANDBY_HEAP_MB"] = absl::StrCat(options_.standby_heap_mb);
  // GPU numbers as --gpus auto counts them: in PCI order, like /dev/nvidiaN.
  launch.env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  // Always set, so that nothing inherited from our environment applies.
  launch.env["TRAINCTL_DATA_CACHE_DIR"] = options_.data_cache_dir;
  launch.env["TRAINCTL_DATA_CACHE_MB"] = absl::StrCat(options_.data_cache_mb);
  // How the agent authenticates is not the ranks' business (C1).
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    if (IsAgentSecretVariable(name)) launch.env_remove.push_back(name);
  }
  launch.stdin_bytes = stdin_bytes;
  launch.standby = standby;
  launch.run_as = options_.rank_user;
  return start_rank_(launch, std::move(callbacks));
}

void Agent::ReplenishStandby() {
  if (!options_.standby_ranks || stopping_.load()) return;
  std::lock_guard<std::mutex> starting(standby_start_mu_);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      const int free_slots = options_.slots - static_cast<int>(ranks_.size());
      if (static_cast<int>(standby_.size()) >= free_slots) return;
    }
    RankHandle::Callbacks idle;
    idle.on_line = [](const std::string& stream, const std::string& line) {
      TLOG_WARNING << "standby rank " << stream << ": " << line;
    };
    absl::StatusOr<std::unique_ptr<RankHandle>> proc =
        SpawnRank("", DefaultThreads(), /*standby=*/true, std::move(idle));
    if (!proc.ok()) {
      TLOG_WARNING << "cannot start a standby rank: " << proc.status().message();
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    standby_.push_back(*std::move(proc));
  }
}

void Agent::StartRank(const v1::RankAssignment& a) {
  const RankId id{a.job_id(), a.generation(), a.rank()};
  const int threads = ThreadsPerRank(a);
  v1::RankLaunch request;
  request.set_coordinator(options_.coordinator);
  request.set_job_id(a.job_id());
  request.set_generation(a.generation());
  request.set_rank(a.rank());
  request.set_world_size(a.world_size());
  request.set_local_rank(a.local_rank());
  request.set_collective_host(options_.collective_host);
  *request.mutable_spec() = a.spec();
  *request.mutable_resume() = a.resume();
  request.set_joins_in_place(a.joins_in_place());
  request.set_threads(threads);
  request.set_rendezvous_key(a.rendezvous_key());
  request.set_ca_pem(options_.ca_pem);
  if (a.gpu()) {
    std::optional<std::string> gpu;
    {
      std::lock_guard<std::mutex> lock(mu_);
      gpu = free_gpus_.Take();
      if (gpu) rank_gpus_[id] = *gpu;
    }
    if (!gpu) {
      // The coordinator counts this worker's GPU slots and never sends more
      // GPU ranks than there are; were the two ever to disagree, the job
      // restarts (exit 1) rather than failing for good.
      OnRankExit(id, 1, "this worker has no free GPU slot for the rank (its --gpus)");
      ForgetUnstarted(id);
      return;
    }
    request.set_cuda_visible_devices(*gpu);
  }
  const std::string stdin_bytes = EncodeFrame(request);

  RankHandle::Callbacks callbacks = CallbacksFor(id);
  // A standby started with the same thread count takes the assignment; one
  // being started now is waited for. Until the rank is among ranks_, no
  // standby is started for the slot it takes.
  std::unique_lock<std::mutex> starting(standby_start_mu_);
  std::unique_ptr<RankHandle> standby;
  if (threads == DefaultThreads()) {
    std::lock_guard<std::mutex> lock(mu_);
    while (!standby_.empty() && !standby) {
      standby = std::move(standby_.front());
      standby_.pop_front();
      if (standby->exited()) standby.reset();
    }
  }
  absl::StatusOr<std::unique_ptr<RankHandle>> proc;
  if (standby && standby->Activate(stdin_bytes, callbacks).ok()) {
    proc = std::move(standby);
  } else {
    proc = SpawnRank(stdin_bytes, threads, /*standby=*/false,
                     std::move(callbacks));
  }
  pid_t pid = 0;
  if (proc.ok()) {
    pid = (*proc)->pid();
    std::lock_guard<std::mutex> lock(mu_);
    ranks_[id] = std::move(*proc);
  }
  starting.unlock();
  if (!proc.ok()) {
    OnRankExit(id, 127, absl::StrCat("could not start the rank process: ",
                                     proc.status().message()));
    ForgetUnstarted(id);
    return;
  }
  TLOG_INFO << "started rank " << a.rank() << "/" << a.world_size()
            << " of job " << a.job_id() << " (pid " << pid << ", " << threads
            << " threads)";
  v1::AgentMessage started;
  auto* s = started.mutable_rank_status();
  s->set_job_id(a.job_id());
  s->set_generation(a.generation());
  s->set_rank(a.rank());
  s->set_running(true);
  s->set_pid(pid);
  Send(std::move(started));
}

void Agent::CancelJob(const v1::CancelRanks& cancel) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, proc] : ranks_) {
    if (std::get<0>(id) != cancel.job_id() ||
        std::get<1>(id) > cancel.generation()) {
      continue;
    }
    // Preemption: the ranks checkpoint and stop on their own within the
    // grace period; a plain cancel (or one after it) ends them now.
    if (cancel.checkpoint_first()) {
      proc->CheckpointAndStop(cancel.grace_ms(), options_.kill_grace_ms);
    } else {
      proc->Terminate(options_.kill_grace_ms);
    }
  }
}

void Agent::OnRankExit(const RankId& id, int exit_code,
                       const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    progress_.erase(id);
    auto gpu = rank_gpus_.find(id);
    if (gpu != rank_gpus_.end()) {
      free_gpus_.Give(std::move(gpu->second));
      rank_gpus_.erase(gpu);
    }
  }
  TLOG_INFO << "rank " << std::get<2>(id) << " of job " << std::get<0>(id)
            << " exited with code " << exit_code;
  v1::AgentMessage m;
  auto* s = m.mutable_rank_status();
  s->set_job_id(std::get<0>(id));
  s->set_generation(std::get<1>(id));
  s->set_rank(std::get<2>(id));
  s->set_running(false);
  s->set_exit_code(exit_code);
  // Valid UTF-8, or the message (replayed at every registration) would not
  // parse at the coordinator.
  if (exit_code != 0) s->set_message(SanitizeUtf8(error, kMaxExitMessageBytes));
  {
    std::lock_guard<std::mutex> lock(mu_);
    recent_exits_.push_back(*s);
    if (recent_exits_.size() > 256) recent_exits_.pop_front();
    exits_heard_.insert(id);
  }
  Send(std::move(m));
}

void Agent::ForgetUnstarted(const RankId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  exits_heard_.erase(id);  // no process to reap
}

void Agent::ReapExited() {
  std::vector<std::unique_ptr<RankHandle>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = ranks_.begin(); it != ranks_.end();) {
      // Not before its exit is recorded: a registration in between would
      // list the rank neither as running nor as exited.
      if (it->second->exited() && exits_heard_.erase(it->first) > 0) {
        done.push_back(std::move(it->second));
        it = ranks_.erase(it);
      } else {
        ++it;
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = standby_.begin(); it != standby_.end();) {
      if ((*it)->exited()) {
        done.push_back(std::move(*it));
        it = standby_.erase(it);
      } else {
        ++it;
      }
    }
  }
  done.clear();  // joins the finished processes' threads, outside the lock
  ReplenishStandby();
}

}  // namespace trainctl::agent
