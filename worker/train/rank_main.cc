#include "worker/train/rank_main.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <grpcpp/create_channel.h>
#include <grpcpp/support/channel_arguments.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <thread>
#include <iostream>
#include <iterator>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/frame_io.h"
#include "common/pki.h"
#include "common/rank_exit.h"
#include "trainctl/v1/rank.pb.h"
#include "worker/train/collective_group.h"
#include "worker/train/collective_wait.h"
#include "worker/train/device.h"
#include "worker/support/heap_reuse.h"
#include "worker/support/shipped_file_fetch.h"
#include "worker/train/rendezvous_store.h"
#include "worker/train/trainer.h"

namespace trainctl::train {
namespace {

// Set by SIGUSR1, on whichever thread takes it: the agent asks the rank to
// checkpoint and stop (its job was preempted). The training loop reads it
// once a step. Lock-free, so safe in a signal handler and across threads.
std::atomic<bool> stop_requested{false};
// SIGUSR2 from the agent, queued with the generation the rank is to join
// (RankHandle::RequestRegroup): an elastic job grows in place, so leave
// the group at the end of the step. The highest asked for; a request the
// rank has already answered (its generation is as high) is spent.
std::atomic<int> regroup_requested_generation{0};
// SIGUSR2 queued with minus a generation (RankHandle::AbandonGroup): the
// coordinator recovered that generation in place without this rank's
// help, so a peer is gone that its collectives may never notice (cut off,
// no TCP reset). The highest; it applies while the rank is in it.
std::atomic<int> abandoned_generation{0};
// The generation whose group the rank is in (or forming).
std::atomic<int> current_generation{0};
static_assert(std::atomic<int>::is_always_lock_free);
static_assert(std::atomic<bool>::is_always_lock_free);

// File descriptor the agent reads RankReport frames from.
constexpr int kReportFd = 3;
// How often the progress reporter tells the agent what the loop is doing.
constexpr auto kProgressInterval = std::chrono::milliseconds(1000);

struct RankArgs {
  std::string coordinator;
  std::string job_id;
  int generation = 0;
  int rank = 0;
  int world_size = 1;
  std::string collective_host = "127.0.0.1";
  int threads = 1;
  int64_t rendezvous_timeout_ms = 300'000;
  // Collectives give up after this; the coordinator's hang detection
  // (fault_tolerance.hang_timeout_s) names the stuck rank before that.
  int64_t collective_timeout_ms = 120'000;
};

// Sends RankReport frames to the agent; callable from any thread.
class Reporter {
 public:
  void Send(const v1::RankReport& report) {
    std::lock_guard<std::mutex> lock(mu_);
    absl::Status s = WriteFrame(kReportFd, report);
    if (!s.ok()) std::cerr << "report not delivered: " << s.message() << "\n";
  }

 private:
  std::mutex mu_;
};

// Reports the loop's progress every interval from its own thread, so a rank
// blocked in a collective still tells where it is.
class ProgressReporter {
 public:
  ProgressReporter(Reporter& out, const RankArgs& args,
                   const LoopPosition& progress)
      : thread_([this, &out, args, &progress] {
          std::unique_lock<std::mutex> lock(mu_);
          while (!cv_.wait_for(lock, kProgressInterval, [this] { return stop_; })) {
            const LoopPosition::Snapshot now = progress.Read();
            v1::RankReport report;
            auto* p = report.mutable_progress();
            p->set_job_id(args.job_id);
            p->set_generation(args.generation);
            p->set_rank(args.rank);
            p->set_step(now.step);
            p->set_collective_seq(now.collectives);
            p->set_phase(RankPhaseName(now.phase));
            out.Send(report);
          }
        }) {}
  ~ProgressReporter() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
};

// The rank's channel to the coordinator, for rendezvous and shipped files.
// TLS verified against the cluster CA the agent passed on; the rank has no
// certificate of its own, its generation's key admits it.
std::shared_ptr<grpc::Channel> CoordinatorChannel(const RankArgs& args,
                                                  const v1::RankLaunch& launch) {
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::InsecureChannelCredentials();
  if (!launch.ca_pem().empty()) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = launch.ca_pem();
    credentials = grpc::SslCredentials(tls);
  }
  // Rendezvous values are at most 1 MiB (the coordinator's limit), and so
  // are the pieces of a shipped file.
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(4 << 20);
  // A rendezvous call repeats across a coordinator restart: reconnect
  // within a second of it being back, as the agent does.
  channel_args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  channel_args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 800);
  return grpc::CreateCustomChannel(args.coordinator, credentials, channel_args);
}

GroupPtr JoinGroup(
    const RankArgs& args, const std::string& rendezvous_key,
    const std::shared_ptr<grpc::Channel>& channel, const torch::Device& device) {
  auto store = c10::make_intrusive<RendezvousStore>(
      v1::Rendezvous::NewStub(channel), args.job_id, args.generation,
      rendezvous_key,
      std::chrono::milliseconds(args.rendezvous_timeout_ms));
  GroupOptions options;
  options.host = args.collective_host;
  options.timeout = std::chrono::milliseconds(args.collective_timeout_ms);
#ifdef TRAINCTL_WITH_CUDA
  if (device.is_cuda()) {
    return MakeNcclGroup(store, args.rank, args.world_size, options);
  }
#endif
  (void)device;
  return MakeGlooGroup(store, args.rank, args.world_size, options);
}

// Reads the agent's RankLaunch frame from stdin. A standby rank blocks here
// until it is handed a job; end of input means the agent no longer needs it.
absl::StatusOr<v1::RankLaunch> ReadLaunch() {
  v1::RankLaunch launch;
  absl::Status s = ReadFrame(0, &launch);
  if (!s.ok()) return s;
  return launch;
}

int RunRank(const v1::RankLaunch& launch) {
  if (launch.job_id().empty() || launch.coordinator().empty() ||
      launch.world_size() < 1 || launch.rank() < 0 ||
      launch.rank() >= launch.world_size()) {
    std::cerr << "rank: bad launch: job '" << launch.job_id() << "', rank "
              << launch.rank() << " of " << launch.world_size()
              << ", coordinator '" << launch.coordinator() << "'" << std::endl;
    return 2;
  }
  RankArgs args;
  args.coordinator = launch.coordinator();
  args.job_id = launch.job_id();
  args.generation = launch.generation();
  args.rank = launch.rank();
  args.world_size = launch.world_size();
  if (!launch.collective_host().empty()) {
    args.collective_host = launch.collective_host();
  }
  v1::JobSpec spec = launch.spec();  // shipped files' fields change below
  args.threads = std::max(1, launch.threads());
  at::set_num_threads(args.threads);
  const v1::FaultToleranceSpec& ft = spec.fault_tolerance();
  const double hang_s = ft.hang_timeout_s();
  if (hang_s > 0) {
    // A backstop behind the coordinator's hang detection, so longer than
    // any phase's bound: peers wait in a collective through rank 0's
    // checkpoint, a slower rank's evaluation, a first step.
    const double phases_s = std::max(
        {ft.eval_timeout_s(), ft.checkpoint_timeout_s(), ft.first_step_timeout_s()});
    args.collective_timeout_ms = static_cast<int64_t>(
        1000 * std::max({2 * hang_s, hang_s + 30, phases_s + 30}));
  }

  RankContext ctx;
  ctx.job_id = args.job_id;
  ctx.cluster = launch.ca_pem().empty() ? launch.coordinator()
                                        : pki::Sha256Hex(launch.ca_pem()).substr(0, 16);
  ctx.generation = args.generation;
  ctx.rank = args.rank;
  ctx.world_size = args.world_size;
  ctx.resume_path = launch.resume().path();
  ctx.joins_in_place = launch.joins_in_place();
  ctx.faults = FaultHooks::FromEnvironment().ForJob(args.job_id);
  ctx.stop_requested = [] { return stop_requested.load(); };
  Reporter reporter;
  ctx.report = [&](const v1::MetricPoint& point) {
    v1::RankReport report;
    *report.mutable_metric() = point;
    reporter.Send(report);
  };
  ctx.on_checkpoint = [&](const v1::Checkpoint& checkpoint) {
    v1::RankReport report;
    *report.mutable_checkpoint() = checkpoint;
    reporter.Send(report);
  };
  LoopPosition progress;
  ctx.progress = &progress;
  ProgressReporter progress_reporter(reporter, args, progress);
  // Files shipped from the submitter's machine first: the model and data
  // below are read from the node's copies.
  const std::shared_ptr<grpc::Channel> channel = CoordinatorChannel(args, launch);
  if (!spec.shipped_files().empty()) {
    ShippedFileSource source;
    source.stub = v1::Rendezvous::NewStub(channel);
    source.scope.set_job_id(args.job_id);
    source.scope.set_generation(args.generation);
    source.rendezvous_key = launch.rendezvous_key();
    // The node's cache; without one (an agent that sets none), a private
    // directory of this rank.
    const char* cache = getenv("TRAINCTL_DATA_CACHE_DIR");
    if (cache != nullptr && *cache != '\0') {
      source.cache_dir = absl::StrCat(cache, "/shipped");
    } else {
      std::string private_dir = "/tmp/trainctl-shipped-XXXXXX";
      if (mkdtemp(private_dir.data()) != nullptr) source.cache_dir = private_dir;
    }
    if (absl::Status fetched = FetchShippedFiles(&spec, source); !fetched.ok()) {
      std::cerr << fetched.message() << std::endl;
      return RankExitCode(fetched);
    }
  }
  // Read the data while the process group forms: both take a while.
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  const auto start = Clock::now();
  double load_ms = 0;
  // The worker's decoded copies of gzip inputs (its --data-cache-dir).
  const std::unique_ptr<DecodedFileCache> cache = DecodedFileCache::FromEnvironment();
  auto data = std::async(std::launch::async, [&] {
    auto loaded = LoadDatasets(spec, cache.get());
    load_ms = since(start);
    return loaded;
  });
  // The timings travel with the data (the loop keeps a copy of ctx, made
  // before they are known) into the plan metric.
  ctx.load_data = [&] {
    auto loaded = data.get();
    if (!loaded.ok()) return loaded;
    loaded->plan_facts["data_load_ms"] = load_ms;
    // Token data: the vocabulary the model is built for (a tokenizer's pieces).
    if (loaded->info.vocab_size > 0) loaded->plan_facts["vocab_size"] = loaded->info.vocab_size;
    if (!loaded->manifest.empty()) loaded->plan_facts["data_manifest_ms"] = loaded->manifest_ms;
    if (cache) {
      loaded->plan_facts["data_cache_hits"] = cache->hits();
      loaded->plan_facts["data_cache_stored"] = cache->stored();
    }
    return loaded;
  };
  // The slot's GPU, or none; CUDA reads this when it starts, at first use,
  // and a standby rank was forked before its slot was known.
  setenv("CUDA_VISIBLE_DEVICES", launch.cuda_visible_devices().c_str(), 1);
  absl::StatusOr<torch::Device> device =
      ResolveDevice(spec.training().device(), launch.local_rank());
  if (!device.ok()) {
    std::cerr << device.status().message() << std::endl;
    data.wait();
    return RankExitCode(device.status());
  }
  ctx.device = *device;
  try {
    BindDevice(ctx.device);
    if (ctx.faults.Fires("slow_join", args.rank, args.generation, 0)) {
      std::this_thread::sleep_for(std::chrono::seconds(8));
    }
    if (args.world_size > 1) {
      ctx.group = JoinGroup(args, launch.rendezvous_key(), channel, ctx.device);
    }
    ctx.startup["join_ms"] = since(start);
  } catch (const std::exception& e) {
    std::cerr << "rank " << args.rank << ": could not join the process group: "
              << e.what() << std::endl;
    data.wait();
    return 1;
  }
  std::cout << "rank " << args.rank << "/" << args.world_size << " on "
            << ctx.device << " with " << args.threads << " threads" << std::endl;
  // NCCL cannot yet be torn down and formed again inside the process.
  std::string rendezvous_key = launch.rendezvous_key();
  if (spec.fault_tolerance().in_place() && !ctx.device.is_cuda()) {
    // Only here: reading the vote costs a wait for the device each step.
    ctx.regroup_requested_generation = [] { return regroup_requested_generation.load(); };
    current_generation.store(args.generation);
    SetAbandonCheck([]() -> std::string {
      const int generation = current_generation.load();
      if (abandoned_generation.load() < generation) return "";
      return absl::StrCat("the coordinator recovered generation ", generation,
                          " in place without this rank's group (a lost peer it cannot "
                          "reach)");
    });
    ctx.regroup = [&]() -> absl::StatusOr<RankContext::NextGeneration> {
      if (abandoned_generation.load() >= args.generation && ctx.group) {
        // Its threads may still wait on the lost peer: closing it would
        // wait for them.
        KeepAbandonedGroup(std::move(ctx.group));
      }
      // The last hold on the failed group: its sockets close, so peers
      // still blocked in it fail too instead of waiting for the timeout.
      ctx.group.reset();
      const auto wait = std::chrono::milliseconds(args.collective_timeout_ms);
      absl::StatusOr<v1::AwaitRegroupResponse> place =
          AwaitRegroup(*v1::Rendezvous::NewStub(channel), args.job_id, args.generation,
                       args.rank, rendezvous_key, wait);
      if (!place.ok()) return place.status();
      args.generation = place->generation();
      current_generation.store(args.generation);
      args.rank = place->rank();
      args.world_size = place->world_size();
      rendezvous_key = place->rendezvous_key();
      RankContext::NextGeneration next;
      next.generation = args.generation;
      next.rank = args.rank;
      next.world_size = args.world_size;
      try {
        if (args.world_size > 1) {
          next.group = JoinGroup(args, rendezvous_key, channel, ctx.device);
        }
      } catch (const std::exception& e) {
        return absl::UnavailableError(absl::StrCat(
            "could not join generation ", args.generation, "'s group: ", e.what()));
      }
      ctx.group = next.group;  // shut down at the end, as the first one
      return next;
    };
  }
  absl::StatusOr<TrainResult> result = Train(spec, ctx);
  if (!result.ok()) {
    // Exit at once, before closing the group or running any destructor:
    // our peers fail as soon as our sockets close (gloo aborts), and the
    // coordinator must hear this rank's exit, the cause, first, and as it
    // is; a slow teardown let a peer's crash arrive first and restart a
    // job that a configuration error had already doomed.
    std::cerr << result.status().message() << std::endl;
    std::cout.flush();
    std::_Exit(RankExitCode(result.status()));
  }
  if (result->stopped) {
    // The coordinator reads why from the exit code; people from this line.
    std::cerr << "rank " << args.rank << ": asked to checkpoint and stop; ";
    if (!result->stop_checkpoint_error.empty()) {
      std::cerr << "stopped at step " << result->steps << " but its checkpoint "
                << "failed (" << result->stop_checkpoint_error << "); the job "
                << "resumes from its previous checkpoint";
    } else {
      std::cerr << (args.rank == 0 ? "checkpointed" : "stopped") << " at step "
                << result->steps;
    }
    std::cerr << std::endl;
  }
  if (ctx.group) {
    try {
      ShutdownGroup(*ctx.group);
    } catch (const std::exception& e) {
      std::cerr << "rank " << args.rank << ": closing the process group: "
                << e.what() << std::endl;
    }
  }
  if (result->stopped) return kRankExitStopped;
  std::cout << "rank " << args.rank << " finished " << result->steps
            << " steps; final loss " << result->final_train_loss;
  for (const auto& [name, value] : result->eval) {
    std::cout << ", " << name << " " << value;
  }
  std::cout << std::endl;
  return 0;
}

}  // namespace

int RankMain(int argc, char** argv) {
  // First: SIGUSR1's and SIGUSR2's default actions end the process, and an
  // agent may send them at any time from now on (a preempted job, an
  // elastic job growing in place).
  struct sigaction on_stop {};
  on_stop.sa_handler = [](int) { stop_requested.store(true); };
  sigemptyset(&on_stop.sa_mask);
  on_stop.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &on_stop, nullptr);
  struct sigaction on_regroup {};
  on_regroup.sa_sigaction = [](int, siginfo_t* info, void*) {
    if (info == nullptr || info->si_code != SI_QUEUE) return;  // no generation
    const int value = info->si_value.sival_int;
    std::atomic<int>& highest = value < 0 ? abandoned_generation : regroup_requested_generation;
    const int wanted = value < 0 ? -value : value;
    int seen = highest.load();
    while (wanted > seen && !highest.compare_exchange_weak(seen, wanted)) {
    }
  };
  sigemptyset(&on_regroup.sa_mask);
  on_regroup.sa_flags = SA_RESTART | SA_SIGINFO;
  sigaction(SIGUSR2, &on_regroup, nullptr);
  bool standby = false;
  CLI::App app{"one rank of a trainctl job; started by trainctl-worker, which "
               "sends the assignment on stdin"};
  app.add_flag("--standby", standby,
               "wait, with the libraries loaded, for an assignment");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  at::set_num_interop_threads(1);
  if (!KeepFreedHeapForReuse()) {
    std::cerr << "rank: could not set malloc to keep freed memory; steps may "
                 "be slower (page faults)" << std::endl;
  }
  if (standby) {
    // Map the first step's working set now, while there is time.
    int64_t heap_mb = 0;
    const char* mb = getenv("TRAINCTL_STANDBY_HEAP_MB");
    if (mb != nullptr && absl::SimpleAtoi(mb, &heap_mb) && heap_mb > 0) {
      PrefaultHeap(heap_mb << 20, [] {  // until the assignment arrives
        pollfd in{STDIN_FILENO, POLLIN, 0};
        return ::poll(&in, 1, 0) != 0;
      });
    }
  }
  absl::StatusOr<v1::RankLaunch> launch = ReadLaunch();
  if (!launch.ok()) {
    if (standby && launch.status().code() == absl::StatusCode::kOutOfRange) {
      return 0;  // released unused
    }
    std::cerr << "rank: could not read the assignment on stdin: "
              << launch.status().message() << std::endl;
    return 2;
  }
  return RunRank(*launch);
}

}  // namespace trainctl::train
