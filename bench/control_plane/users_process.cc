#include "bench/control_plane/users_process.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench/control_plane/coordinator_process.h"
#include "bench/control_plane/sim_users.h"

extern char** environ;

namespace trainctl::bench {
namespace {

std::shared_ptr<grpc::Channel> UserChannel(const UsersConfig& c,
                                           const std::string& ca,
                                           const std::string& token) {
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = ca;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection each
  return grpc::CreateCustomChannel(
      c.address,
      grpc::CompositeChannelCredentials(grpc::SslCredentials(tls),
                                        grpc::AccessTokenCredentials(token)),
      args);
}

absl::Status ReadUsersConfig(const std::string& path, UsersConfig* c) {
  std::ifstream in(path);
  std::string key, value;
  while (in >> key >> value) {
    if (key == "address") c->address = value;
    if (key == "ca") c->ca_pem_file = value;
    if (key == "submitter") c->submitter_token = value;
    if (key == "watcher") c->watcher_tokens.push_back(value);
    if (key == "jobs") (void)absl::SimpleAtoi(value, &c->jobs);
    if (key == "ranks") (void)absl::SimpleAtoi(value, &c->ranks_per_job);
    if (key == "watchers") (void)absl::SimpleAtoi(value, &c->watchers);
  }
  if (c->address.empty() || c->submitter_token.empty() ||
      c->watcher_tokens.size() * 50 < static_cast<size_t>(c->watchers)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": incomplete"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteUsersConfig(const UsersConfig& c, const std::string& path) {
  std::ostringstream out;
  out << "address " << c.address << "\nca " << c.ca_pem_file << "\nsubmitter "
      << c.submitter_token << "\njobs " << c.jobs << "\nranks "
      << c.ranks_per_job << "\nwatchers " << c.watchers << "\n";
  for (const std::string& t : c.watcher_tokens) out << "watcher " << t << "\n";
  std::ofstream file(path);
  file << out.str();
  file.close();
  if (!file || chmod(path.c_str(), 0600) != 0) {
    return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

int RunUsersProcess(const std::string& config_path) {
  UsersConfig c;
  if (absl::Status s = ReadUsersConfig(config_path, &c); !s.ok()) {
    fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 2;
  }
  std::ifstream ca_file(c.ca_pem_file);
  std::stringstream ca;
  ca << ca_file.rdbuf();
  JobSubmitter submitter(UserChannel(c, ca.str(), c.submitter_token), c.jobs,
                         c.ranks_per_job);
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < c.watchers; ++i) {
    channels.push_back(UserChannel(c, ca.str(), c.watcher_tokens[i / 50]));
  }
  Watchers watchers(channels, &submitter);
  bool watching = false;
  submitter.Start();
  char line[512];
  while (fgets(line, sizeof line, stdin) != nullptr) {
    std::vector<std::string> words =
        absl::StrSplit(absl::StripAsciiWhitespace(line), ' ', absl::SkipEmpty());
    if (words.empty()) continue;
    const bool on = words.size() > 1 && words[1] == "1";
    if (words[0] == "done" && words.size() > 1) {
      submitter.JobDone(words[1]);
    } else if (words[0] == "record") {
      if (on) {
        submitter.latency().Clear();
        watchers.delivery().Clear();
      }
      submitter.Record(on);
      watchers.Record(on);
    } else if (words[0] == "pause") {
      submitter.Pause(on);
    } else if (words[0] == "watch") {
      if (on && !watching) watchers.Start();
      if (!on && watching) watchers.Stop();
      watching = on;
    } else if (words[0] == "report") {
      printf("submit_p50 %f\nsubmit_p99 %f\nsubmit_count %zu\nsubmitted %lld\n"
             "refused %lld\ndeliver_p50 %f\ndeliver_p99 %f\ntimed %zu\n"
             "events %lld\nfailed %lld\ncpu_s %f\nend\n",
             submitter.latency().Percentile(50),
             submitter.latency().Percentile(99), submitter.latency().count(),
             static_cast<long long>(submitter.submitted()),
             static_cast<long long>(submitter.refused()),
             watchers.delivery().Percentile(50),
             watchers.delivery().Percentile(99), watchers.delivery().count(),
             static_cast<long long>(watchers.events()),
             static_cast<long long>(watchers.failed_watches()),
             SampleSelf().cpu_seconds);
      fflush(stdout);
    } else if (words[0] == "stop") {
      break;
    }
  }
  watchers.Stop();
  submitter.Stop();
  return 0;
}

UsersProcess::~UsersProcess() { Stop(); }

absl::Status UsersProcess::Start(const std::string& config_path) {
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) {
    return absl::InternalError("pipe failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, down[0], 0);
  posix_spawn_file_actions_adddup2(&actions, up[1], 1);
  posix_spawn_file_actions_addclose(&actions, down[1]);
  posix_spawn_file_actions_addclose(&actions, up[0]);
  std::string self = "/proc/self/exe";
  std::vector<std::string> argv{self, "--users-process", config_path};
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const int spawned =
      posix_spawn(&pid_, self.c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(down[0]);
  close(up[1]);
  if (spawned != 0) {
    pid_ = -1;
    return absl::InternalError("cannot start the users process");
  }
  to_ = fdopen(down[1], "w");
  from_ = fdopen(up[0], "r");
  return absl::OkStatus();
}

void UsersProcess::Send(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (to_ == nullptr) return;
  fprintf(to_, "%s\n", line.c_str());
  fflush(to_);
}

std::map<std::string, double> UsersProcess::Report() {
  Send("report");
  std::map<std::string, double> values;
  char line[256];
  while (from_ != nullptr && fgets(line, sizeof line, from_) != nullptr) {
    std::vector<std::string> kv =
        absl::StrSplit(absl::StripAsciiWhitespace(line), ' ');
    if (kv[0] == "end") break;
    double v = 0;
    if (kv.size() == 2 && absl::SimpleAtod(kv[1], &v)) values[kv[0]] = v;
  }
  return values;
}

void UsersProcess::Stop() {
  if (pid_ <= 0) return;
  Send("stop");
  {
    std::lock_guard<std::mutex> lock(mu_);
    fclose(to_);
    to_ = nullptr;
  }
  waitpid(pid_, nullptr, 0);
  fclose(from_);
  from_ = nullptr;
  pid_ = -1;
}

}  // namespace trainctl::bench
