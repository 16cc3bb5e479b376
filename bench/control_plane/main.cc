// bench_control_plane: one real coordinator (mTLS, SQLite) against N
// simulated agents and M watchers while jobs are submitted, run and end;
// then a kill -9 of the coordinator and the time until every agent is back.
// Prints the coordinator's CPU, memory and threads next to the simulator's
// own CPU (they share the machine), SubmitJob and event delivery latency,
// and each figure against its target (issue #16). docs/performance.md has
// the numbers and how to rerun them.

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/control_plane/coordinator_process.h"
#include "bench/control_plane/machine_trace.h"
#include "bench/control_plane/sim_agent.h"
#include "bench/control_plane/users_process.h"
#include "common/pki.h"
#include "trainctl/v1/jobs.grpc.pb.h"
#include "trainctl/v1/workers.grpc.pb.h"

namespace tb = trainctl::bench;
namespace v1 = trainctl::v1;

namespace {

struct Options {
  std::string bin_dir = "build/bin";
  std::string workdir = "/tmp";  // a fresh directory is made inside
  int agents = 1000, slots = 8, watchers = 100, jobs = 200, ranks_per_job = 8;
  int job_seconds = 30, window_seconds = 60, join_threads = 2;
  bool restart = true;
  bool burst = false;  // every agent on one phase
  int trace_seconds = 0;  // of the machine's busy cores, from the window's start
};

// One connection per caller, as separate machines would have.
grpc::ChannelArguments OwnConnection() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 800);
  return args;
}

std::shared_ptr<grpc::Channel> UserChannel(const std::string& address,
                                           const std::string& ca,
                                           const std::string& token) {
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = ca;
  return grpc::CreateCustomChannel(
      address,
      grpc::CompositeChannelCredentials(grpc::SslCredentials(tls),
                                        grpc::AccessTokenCredentials(token)),
      OwnConnection());
}

struct AgentIdentity {
  std::string key_pem, cert_pem;
};

// Trades the join token for a certificate per agent, as `trainctl-worker`
// does on its first start.
bool JoinAll(const Options& o, const std::string& address,
             const std::string& ca, const std::string& join_token,
             std::vector<AgentIdentity>* identities) {
  identities->resize(o.agents);
  std::atomic<int> next{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < o.join_threads; ++t) {
    threads.emplace_back([&] {
      grpc::SslCredentialsOptions tls;
      tls.pem_root_certs = ca;
      auto stub = v1::Workers::NewStub(grpc::CreateChannel(address, grpc::SslCredentials(tls)));
      for (int i = next++; i < o.agents; i = next++) {
        const std::string name = absl::StrCat("sim-", i);
        absl::StatusOr<std::string> key = trainctl::pki::NewPrivateKey();
        absl::StatusOr<std::string> csr =
            key.ok() ? trainctl::pki::NewCertificateRequest(*key, name) : key;
        if (!csr.ok()) {
          ++failed;
          continue;
        }
        v1::JoinRequest req;
        req.set_join_token(join_token);
        req.set_name(name);
        req.set_csr_pem(*csr);
        req.set_slots(o.slots);
        v1::JoinResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        grpc::Status s = stub->Join(&ctx, req, &resp);
        if (!s.ok()) {
          fprintf(stderr, "join %s: %s\n", name.c_str(), s.error_message().c_str());
          ++failed;
          continue;
        }
        (*identities)[i] = {*key, resp.cert_pem()};
      }
    });
  }
  for (auto& t : threads) t.join();
  return failed == 0;
}

// Waits until `done` or `seconds` pass; false on the timeout.
template <typename Done>
bool WaitFor(int seconds, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

std::vector<v1::Job> ListJobs(v1::Jobs::Stub& stub, v1::JobState state) {
  v1::ListJobsRequest req;
  if (state != v1::JOB_STATE_UNSPECIFIED) req.add_states(state);
  v1::ListJobsResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  grpc::Status s = stub.ListJobs(&ctx, req, &resp);
  if (!s.ok()) fprintf(stderr, "ListJobs: %s\n", s.error_message().c_str());
  return {resp.jobs().begin(), resp.jobs().end()};
}

const char* Verdict(bool met) { return met ? "met" : "NOT MET"; }

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--users-process") {
    return tb::RunUsersProcess(argv[2]);
  }
  Options o;
  CLI::App app{"bench_control_plane: one coordinator against N simulated "
               "agents and M watchers (see docs/performance.md)"};
  app.add_option("--bin", o.bin_dir, "directory with trainctl-coordinator");
  app.add_option("--workdir", o.workdir,
                 "where the run's own scratch directory is made (and "
                 "removed at the end)");
  app.add_option("--agents", o.agents, "simulated agents (N)");
  app.add_option("--slots", o.slots, "slots per agent");
  app.add_option("--watchers", o.watchers, "watch streams (M)");
  app.add_option("--jobs", o.jobs, "jobs kept in the cluster at once");
  app.add_option("--ranks-per-job", o.ranks_per_job, "ranks of each job");
  app.add_option("--job-seconds", o.job_seconds, "how long each job runs");
  app.add_option("--window-seconds", o.window_seconds, "measured steady state");
  app.add_option("--join-threads", o.join_threads, "parallel joins at setup");
  app.add_flag("!--no-restart", o.restart, "skip the kill -9 phase");
  app.add_flag("--burst", o.burst,
               "every agent heartbeats and reports at the same moment of "
               "each second (a stress case; by default their phases are "
               "spread)");
  app.add_option("--trace-seconds", o.trace_seconds,
                 "print how busy the machine was every 20 ms over the "
                 "window's first seconds");
  CLI11_PARSE(app, argc, argv);

  // 2 connections per agent and watcher, on both ends.
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  setrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_cur < static_cast<rlim_t>(2 * (o.agents + o.watchers) + 256)) {
    fprintf(stderr, "open-file limit %ld is too low for %d agents\n",
            static_cast<long>(files.rlim_cur), o.agents);
    return 2;
  }

  std::string scratch = o.workdir + "/control-plane-XXXXXX";
  if (mkdtemp(scratch.data()) == nullptr) {
    fprintf(stderr, "cannot make a directory in %s\n", o.workdir.c_str());
    return 1;
  }
  o.workdir = scratch;
  // Removed however main returns (the coordinator is stopped first: it is
  // declared after this).
  struct RemoveAtExit {
    std::string path;
    ~RemoveAtExit() { std::filesystem::remove_all(path); }
  } remove_scratch{scratch};
  tb::CoordinatorProcess coordinator(o.bin_dir + "/trainctl-coordinator",
                                     o.workdir + "/state", {});
  std::filesystem::create_directories(o.workdir + "/state");
  std::vector<std::string> user_names;
  for (int i = 0; i * 50 < std::max(1, o.watchers); ++i) {
    user_names.push_back(absl::StrCat("watcher-", i));  // 64 watches per user
  }
  user_names.push_back("submitter");
  std::vector<std::string> tokens;
  if (absl::Status s = coordinator.Init(user_names, &tokens); !s.ok()) {
    fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  if (absl::Status s = coordinator.Start(); !s.ok()) {
    fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  const std::string address = coordinator.address();
  const std::string ca = coordinator.ReadStateFile("tls/ca.crt");
  printf("control plane: %d agents x %d slots, %d watchers, %d jobs of %d "
         "ranks (%d s each), %d s measured, %s, coordinator at %s\n",
         o.agents, o.slots, o.watchers, o.jobs, o.ranks_per_job, o.job_seconds,
         o.window_seconds,
         o.burst ? "every agent at one phase (--burst)" : "agents' phases spread",
         address.c_str());
  fflush(stdout);

  int64_t t0 = tb::SteadyMicros();
  std::vector<AgentIdentity> identities;
  if (!JoinAll(o, address, ca, coordinator.ReadStateFile("auth/join.token"),
               &identities)) {
    fprintf(stderr, "some agents could not join\n");
    return 1;
  }
  printf("setup: %d agents joined in %.1f s\n", o.agents,
         (tb::SteadyMicros() - t0) / 1e6);

  tb::UsersConfig users_config;
  users_config.address = address;
  users_config.ca_pem_file = o.workdir + "/state/tls/ca.crt";
  users_config.submitter_token = tokens.back();
  users_config.watcher_tokens.assign(tokens.begin(), tokens.end() - 1);
  users_config.jobs = o.jobs;
  users_config.ranks_per_job = o.ranks_per_job;
  users_config.watchers = o.watchers;
  const std::string users_file = o.workdir + "/users.conf";
  if (absl::Status s = tb::WriteUsersConfig(users_config, users_file); !s.ok()) {
    fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  tb::UsersProcess users;
  // A job is done once all its ranks have exited: the users process then
  // submits the next one.
  std::mutex exits_mu;
  std::map<std::string, int> exits;
  tb::SimEvents events;
  events.rank_exited = [&](const std::string& job, int world) {
    std::lock_guard<std::mutex> lock(exits_mu);
    if (++exits[job] < world) return;
    exits.erase(job);
    users.Send("done " + job);
  };

  std::vector<std::unique_ptr<tb::SimAgent>> agents;
  // Independent phases, as nodes that started at different times have (the
  // same ones every run).
  std::mt19937 phases(1);
  std::uniform_int_distribution<int64_t> spread(0, 999'999);
  for (int i = 0; i < o.agents; ++i) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = ca;
    tls.pem_private_key = identities[i].key_pem;
    tls.pem_cert_chain = identities[i].cert_pem;
    tb::SimAgentOptions agent;
    agent.name = absl::StrCat("sim-", i);
    agent.slots = o.slots;
    agent.job_seconds = o.job_seconds;
    agent.phase_us = o.burst ? 0 : spread(phases);
    agents.push_back(std::make_unique<tb::SimAgent>(
        agent,
        grpc::CreateCustomChannel(address, grpc::SslCredentials(tls), OwnConnection()),
        &events));
  }
  std::atomic<bool> ticking{true}, exits_allowed{true};
  std::thread ticker([&] {
    while (ticking) {
      const int64_t now = tb::SteadyMicros();
      for (auto& a : agents) a->Tick(now, exits_allowed);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  auto all_registered_after = [&](int64_t since_us) {
    for (auto& a : agents) {
      if (a->registered_at_us() <= since_us) return false;
    }
    return true;
  };
  t0 = tb::SteadyMicros();
  if (!WaitFor(120, [&] { return all_registered_after(0); })) {
    fprintf(stderr, "not every agent registered within 120 s\n");
    return 1;
  }
  printf("setup: %d agents registered in %.1f s\n", o.agents,
         (tb::SteadyMicros() - t0) / 1e6);

  // Fill the cluster, then watch it.
  t0 = tb::SteadyMicros();
  if (absl::Status s = users.Start(users_file); !s.ok()) {
    fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  auto admin = v1::Jobs::NewStub(UserChannel(address, ca, tokens.back()));
  auto running_ranks = [&] {
    int n = 0;
    for (auto& a : agents) n += a->running_ranks();
    return n;
  };
  if (!WaitFor(120, [&] { return running_ranks() >= o.jobs * o.ranks_per_job; })) {
    fprintf(stderr, "only %d of %d ranks started within 120 s\n",
            running_ranks(), o.jobs * o.ranks_per_job);
    return 1;
  }
  const double fill_s = (tb::SteadyMicros() - t0) / 1e6;
  std::map<std::string, double> fill = users.Report();
  printf("setup: %d jobs submitted and all %d ranks running in %.1f s "
         "(SubmitJob p99 %.1f ms during the fill)\n",
         o.jobs, o.jobs * o.ranks_per_job, fill_s, fill["submit_p99"]);
  users.Send("watch 1");
  std::this_thread::sleep_for(std::chrono::seconds(3));  // watches open

  // The measured window.
  const tb::ProcessSample c0 = tb::SampleProcess(coordinator.pid());
  const tb::ProcessSample s0 = tb::SampleSelf();
  const tb::ProcessSample u0 = tb::SampleProcess(users.pid());
  users.Send("record 1");
  const int64_t late0 = tb::LateTicks();
  std::string busy_trace;
  std::thread tracer([&] {
    if (o.trace_seconds > 0) busy_trace = tb::TraceMachineBusy(20, o.trace_seconds * 50);
  });
  t0 = tb::SteadyMicros();
  int64_t max_rss = 0, max_threads = 0;
  while (tb::SteadyMicros() - t0 < int64_t{o.window_seconds} * 1'000'000) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const tb::ProcessSample c = tb::SampleProcess(coordinator.pid());
    max_rss = std::max(max_rss, c.rss_kib);
    max_threads = std::max<int64_t>(max_threads, c.threads);
  }
  users.Send("record 0");
  tracer.join();
  const double wall = (tb::SteadyMicros() - t0) / 1e6;
  const tb::ProcessSample c1 = tb::SampleProcess(coordinator.pid());
  const tb::ProcessSample s1 = tb::SampleSelf();
  const tb::ProcessSample u1 = tb::SampleProcess(users.pid());
  std::map<std::string, double> r = users.Report();
  const double coordinator_cores = (c1.cpu_seconds - c0.cpu_seconds) / wall;
  const double agent_cores = (s1.cpu_seconds - s0.cpu_seconds) / wall;
  const double user_cores = (u1.cpu_seconds - u0.cpu_seconds) / wall;
  const double submit_p99 = r["submit_p99"];
  const double deliver_p99 = r["deliver_p99"];
  const double reports_per_s = 2.0 * o.jobs * o.ranks_per_job;

  printf("\nsteady state over %.0f s (%.0f rank reports/s, %d heartbeats/s "
         "expected)\n", wall, reports_per_s, o.agents);
  printf("  coordinator  %.2f cores   RSS %lld MiB (max %lld)   threads %lld\n",
         coordinator_cores, static_cast<long long>(c1.rss_kib / 1024),
         static_cast<long long>(max_rss / 1024),
         static_cast<long long>(max_threads));
  printf("  simulator    %.2f cores for the agents, %.2f for submitter and "
         "watchers (same machine); %lld sends late by a second or more\n",
         agent_cores, user_cores,
         static_cast<long long>(tb::LateTicks() - late0));
  printf("  SubmitJob    p50 %.1f ms  p99 %.1f ms  (%.0f timed, %.0f refused)\n",
         r["submit_p50"], submit_p99, r["submit_count"], r["refused"]);
  printf("  delivery     p50 %.1f ms  p99 %.1f ms  (%.0f reports timed, %.0f "
         "events seen, %.0f watches failed)\n",
         r["deliver_p50"], deliver_p99, r["timed"], r["events"], r["failed"]);
  if (!busy_trace.empty()) {
    printf("  the machine's busy cores every 20 ms, a line a second "
           "(0 idle .. 9 all busy):\n%s", busy_trace.c_str());
  }
  fflush(stdout);

  double reattach_s = -1;
  int restarted = -1, checked = 0;
  if (o.restart) {
    users.Send("watch 0");
    users.Send("pause 1");
    exits_allowed = false;  // no job may end while the restart is measured
    std::this_thread::sleep_for(std::chrono::seconds(2));
    std::map<std::string, int> generation;
    for (const v1::Job& job : ListJobs(*admin, v1::JOB_STATE_RUNNING)) {
      generation[job.id()] = job.generation();
    }
    const int64_t killed = tb::SteadyMicros();
    const int port = coordinator.port();
    coordinator.Kill();
    if (absl::Status s = coordinator.Start(port); !s.ok()) {
      fprintf(stderr, "restart: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    const double up_s = (tb::SteadyMicros() - killed) / 1e6;
    if (WaitFor(120, [&] { return all_registered_after(killed); })) {
      int64_t last = 0;
      for (auto& a : agents) last = std::max(last, a->registered_at_us());
      reattach_s = (last - killed) / 1e6;
    }
    // Past the re-attach grace (2 x lease + 5 s): a job whose ranks were not
    // re-adopted would have been restarted by now.
    std::this_thread::sleep_for(std::chrono::seconds(30));
    admin = v1::Jobs::NewStub(UserChannel(address, ca, tokens.back()));
    restarted = 0;
    std::map<std::string, v1::Job> after;
    for (const v1::Job& job : ListJobs(*admin, v1::JOB_STATE_UNSPECIFIED)) {
      after[job.id()] = job;
    }
    for (const auto& [id, gen] : generation) {
      ++checked;
      auto it = after.find(id);
      if (it == after.end() || it->second.generation() != gen ||
          it->second.state() != v1::JOB_STATE_RUNNING) {
        ++restarted;
      }
    }
    printf("\nrestart: kill -9, coordinator serving again after %.1f s; "
           "all %d agents re-registered %.1f s after the kill; %d of %d "
           "running jobs restarted or lost\n",
           up_s, o.agents, reattach_s, restarted, checked);
    exits_allowed = true;
  }

  printf("\ntargets (N=1000, M=100, 200 jobs; this run: N=%d, M=%d, %d jobs)\n",
         o.agents, o.watchers, o.jobs);
  printf("  coordinator CPU <= 1 core       %.2f   %s\n", coordinator_cores,
         Verdict(coordinator_cores <= 1.0));
  printf("  coordinator RSS <= 1024 MiB     %lld   %s\n",
         static_cast<long long>(max_rss / 1024), Verdict(max_rss <= 1024 * 1024));
  printf("  p99 SubmitJob <= 50 ms          %.1f   %s\n", submit_p99,
         Verdict(r["submit_count"] > 0 && submit_p99 <= 50));
  printf("  p99 delivery <= 250 ms          %.1f   %s\n", deliver_p99,
         Verdict(deliver_p99 > 0 && deliver_p99 <= 250));
  if (o.restart) {
    printf("  re-attached <= 15 s, 0 restarts %.1f s, %d   %s\n", reattach_s,
           restarted, Verdict(reattach_s >= 0 && reattach_s <= 15 && restarted == 0));
  }
  fflush(stdout);

  users.Stop();
  ticking = false;
  ticker.join();
  for (auto& a : agents) a->Shutdown();
  coordinator.Stop();
  return 0;
}
