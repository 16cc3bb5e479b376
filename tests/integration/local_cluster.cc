#include "local_cluster.h"

#include <algorithm>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

extern char** environ;

namespace trainctl::testing {

LocalCluster* SharedClusterTest::cluster_ = nullptr;

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Process::Process(const std::vector<std::string>& argv,
                 const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) !=
      0) {
    pid_ = -1;
    ADD_FAILURE() << "cannot start " << argv[0];
  }
  posix_spawn_file_actions_destroy(&actions);
}

Process::~Process() {
  if (Running()) {
    Signal(SIGKILL);
    Wait(std::chrono::seconds(10));
  }
}

void Process::Signal(int sig) {
  if (pid_ > 0 && !reaped_) kill(pid_, sig);
}

bool Process::Running() {
  if (pid_ <= 0 || reaped_) return false;
  if (waitpid(pid_, &status_, WNOHANG) == pid_) {
    reaped_ = true;
    return false;
  }
  return true;
}

int Process::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (Running()) {
    if (std::chrono::steady_clock::now() > deadline) return -1000;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (pid_ <= 0) return -1001;
  return WIFEXITED(status_) ? WEXITSTATUS(status_) : -WTERMSIG(status_);
}

LocalCluster::LocalCluster(int workers, int slots, int cpus,
                           ClusterOptions options)
    : options_(std::move(options)) {
  const std::string bin = TRAINCTL_BIN_DIR;
  // Never the user's default state dir: every cluster starts empty.
  if (options_.state_dir.empty()) options_.state_dir = dir_ + "/state";
  if (options_.insecure) options_.coordinator_flags.push_back("--insecure");
  if (!StartCoordinator("127.0.0.1:0")) return;
  for (int i = 1; i <= workers; ++i) {
    StartWorker("w" + std::to_string(i), slots, cpus);
  }
  if (!WaitForWorkers(workers, std::chrono::seconds(30))) {
    ADD_FAILURE() << "workers did not register";
  }
}

Process& LocalCluster::StartWorker(const std::string& name, int slots,
                                   int cpus,
                                   const std::vector<std::string>& extra,
                                   bool with_credentials,
                                   const std::vector<std::string>& launcher) {
  std::vector<std::string> argv{
      std::string(TRAINCTL_BIN_DIR) + "/trainctl-worker", "--coordinator",
      address_, "--name", name, "--slots", std::to_string(slots), "--cpus",
      std::to_string(cpus), "--kill-grace-ms", "3000",
      // Never the user's own worker state (its certificate).
      "--state-dir", dir_ + "/" + name + "-state"};
  if (options_.insecure) {
    argv.push_back("--insecure");
  } else if (with_credentials) {
    argv.insert(argv.end(),
                {"--ca-cert", ca_cert_path_, "--join-token", join_token_});
  }
  // CPU slots unless a test gives GPUs: the same jobs on a GPU node too.
  if (std::find(extra.begin(), extra.end(), "--gpus") == extra.end()) {
    argv.insert(argv.end(), {"--gpus", "none"});
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.begin(), launcher.begin(), launcher.end());
  workers_.push_back(std::make_unique<Process>(argv, dir_ + "/" + name + ".log"));
  return *workers_.back();
}

std::shared_ptr<grpc::ChannelCredentials> LocalCluster::Credentials(
    const std::string& token) const {
  if (options_.insecure) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = ReadFile(ca_cert_path_);
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::SslCredentials(tls);
  if (token.empty()) return credentials;
  return grpc::CompositeChannelCredentials(
      credentials, grpc::AccessTokenCredentials(token));
}

std::vector<std::string> LocalCluster::CliFlags(const std::string& token) const {
  if (options_.insecure) return {"--coordinator", address_, "--insecure"};
  return {"--coordinator", address_, "--ca-cert", ca_cert_path_, "--token",
          token};
}

bool LocalCluster::StartCoordinator(const std::string& listen) {
  const std::string bin = TRAINCTL_BIN_DIR;
  const std::string port_file = dir_ + "/port";
  unlink(port_file.c_str());
  ++coordinator_starts_;
  const std::string log =
      dir_ + (coordinator_starts_ == 1
                  ? std::string("/coordinator.log")
                  : "/coordinator-" + std::to_string(coordinator_starts_) +
                        ".log");
  std::vector<std::string> argv{bin + "/trainctl-coordinator", "--listen",
                                listen, "--port-file", port_file,
                                "--state-dir", options_.state_dir};
  argv.insert(argv.end(), options_.coordinator_flags.begin(),
              options_.coordinator_flags.end());
  coordinator_ = std::make_unique<Process>(argv, log);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string port;
  while (std::chrono::steady_clock::now() < deadline) {
    port = ReadFile(port_file);
    if (!port.empty()) break;
    if (!coordinator_->Running()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (port.empty()) {
    ADD_FAILURE() << "coordinator did not write its port: " << ReadFile(log);
    return false;
  }
  address_ = "127.0.0.1:" + port.substr(0, port.find('\n'));
  if (!options_.insecure) {
    // Made by the coordinator's first start (before it wrote its port).
    ca_cert_path_ = options_.state_dir + "/tls/ca.crt";
    auto trimmed = [](std::string text) {
      while (!text.empty() && text.back() == '\n') text.pop_back();
      return text;
    };
    admin_token_ = trimmed(ReadFile(options_.state_dir + "/auth/admin.token"));
    join_token_ = trimmed(ReadFile(options_.state_dir + "/auth/join.token"));
    if (admin_token_.empty() || join_token_.empty()) {
      ADD_FAILURE() << "the coordinator made no tokens in " << options_.state_dir;
    }
  }
  // A fresh channel: the old one may be in reconnect backoff.
  stub_ = v1::Jobs::NewStub(
      grpc::CreateChannel(address_, Credentials(admin_token_)));
  return true;
}

void LocalCluster::KillCoordinator() {
  if (!coordinator_) return;
  coordinator_->Signal(SIGKILL);
  coordinator_->Wait(std::chrono::seconds(10));
}

void LocalCluster::StopCoordinator() {
  if (!coordinator_) return;
  coordinator_->Signal(SIGTERM);
  coordinator_->Wait(std::chrono::seconds(15));
}

void LocalCluster::KillWorker(int index) {
  if (index < 0 || index >= static_cast<int>(workers_.size())) {
    ADD_FAILURE() << "no worker " << index;
    return;
  }
  workers_[index]->Signal(SIGKILL);
  workers_[index]->Wait(std::chrono::seconds(10));
}

bool LocalCluster::RestartCoordinator() {
  const std::string port = address_.substr(address_.rfind(':') + 1);
  return StartCoordinator("127.0.0.1:" + port);
}

v1::Job LocalCluster::Submit(const std::string& spec) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::SubmitJobRequest req;
  req.set_spec_text(spec);
  v1::SubmitJobResponse resp;
  grpc::Status s = stub_->SubmitJob(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return resp.job();
}

LocalCluster::~LocalCluster() {
  for (auto& w : workers_) w->Signal(SIGTERM);
  for (auto& w : workers_) w->Wait(std::chrono::seconds(15));
  if (coordinator_) {
    coordinator_->Signal(SIGTERM);
    coordinator_->Wait(std::chrono::seconds(15));
  }
  // A suite's shared cluster ends in TearDownTestSuite, outside any test,
  // where HasFailure() is always false: then any failed test counts.
  if (::testing::Test::HasFailure() ||
      ::testing::UnitTest::GetInstance()->failed_test_count() > 0) {
    for (const char* f : {"coordinator.log", "coordinator-2.log",
                          "coordinator-3.log", "w1.log", "w2.log", "w3.log"}) {
      const std::string text = ReadFile(dir_ + "/" + f);
      if (!text.empty()) std::cerr << "---- " << f << " ----\n" << text;
    }
  }
}

std::vector<std::string> LocalCluster::CliArgv(
    const std::vector<std::string>& args, const std::string& coordinator,
    const std::string& token) const {
  std::vector<std::string> argv{std::string(TRAINCTL_BIN_DIR) + "/trainctl"};
  for (const std::string& flag : CliFlags(token.empty() ? admin_token_ : token)) {
    argv.push_back(flag);
  }
  if (!coordinator.empty()) argv[2] = coordinator;  // after "--coordinator"
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

CliResult LocalCluster::Cli(const std::vector<std::string>& args,
                            std::chrono::seconds timeout) {
  return CliAs(admin_token_, args, timeout);
}

CliResult LocalCluster::CliAs(const std::string& token,
                              const std::vector<std::string>& args,
                              std::chrono::seconds timeout) {
  const std::vector<std::string> argv = CliArgv(args, "", token);
  static int counter = 0;
  const std::string log = dir_ + "/cli-" + std::to_string(++counter) + ".out";
  Process cli(argv, log);
  CliResult result;
  result.exit_code = cli.Wait(timeout);
  result.output = ReadFile(log);
  return result;
}

std::unique_ptr<Process> LocalCluster::CliInBackground(
    const std::vector<std::string>& args, const std::string& log_path) {
  return std::make_unique<Process>(CliArgv(args), log_path);
}

std::string LocalCluster::WriteFile(const std::string& name,
                                    const std::string& text) {
  const std::string path = dir_ + "/" + name;
  std::ofstream(path) << text;
  return path;
}

v1::Job LocalCluster::GetJob(const std::string& id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetJobRequest req;
  req.set_job_id(id);
  v1::Job job;
  grpc::Status s = stub_->GetJob(&ctx, req, &job);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return job;
}

v1::Job LocalCluster::WaitForJob(
    const std::string& id, const std::function<bool(const v1::Job&)>& done,
    std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  v1::Job job = GetJob(id);
  while (!done(job) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    job = GetJob(id);
  }
  return job;
}

std::vector<v1::JobEvent> LocalCluster::Events(const std::string& id) {
  grpc::Status status;
  std::vector<v1::JobEvent> events =
      ReadEvents(id, std::chrono::seconds(30), &status);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return events;
}

std::vector<v1::JobEvent> LocalCluster::EventsSoFar(
    const std::string& id, std::chrono::milliseconds wait) {
  grpc::Status status;  // DEADLINE_EXCEEDED is the expected end here
  return ReadEvents(id, wait, &status);
}

std::vector<v1::JobEvent> LocalCluster::ReadEvents(
    const std::string& id, std::chrono::milliseconds wait,
    grpc::Status* status, bool follow) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + wait);
  v1::WatchJobRequest req;
  req.set_job_id(id);
  if (!follow) req.set_follow(false);
  auto reader = stub_->WatchJob(&ctx, req);
  std::vector<v1::JobEvent> events;
  v1::JobEvent event;
  while (reader->Read(&event)) events.push_back(event);
  *status = reader->Finish();
  return events;
}

std::string LocalCluster::AddUser(const std::string& name) {
  const std::string out = dir_ + "/add-user-" + name;
  Process add({std::string(TRAINCTL_BIN_DIR) + "/trainctl-coordinator",
               "add-user", name, "--state-dir", options_.state_dir},
              out);
  EXPECT_EQ(add.Wait(std::chrono::seconds(30)), 0) << ReadFile(out);
  const std::string text = ReadFile(out);
  const size_t at = text.find("tcu_");
  return at == std::string::npos ? "" : text.substr(at, 4 + 64);
}

bool LocalCluster::WaitForWorkers(int count, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ListWorkersResponse resp;
    if (stub_->ListWorkers(&ctx, {}, &resp).ok() &&
        resp.workers_size() >= count) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

std::vector<pid_t> FindProcesses(const std::vector<std::string>& parts) {
  std::vector<pid_t> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* entry = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(atoi(entry->d_name));
    if (pid <= 0) continue;
    std::string cmdline = ReadFile("/proc/" + std::string(entry->d_name) +
                                   "/cmdline");
    for (char& c : cmdline) {
      if (c == '\0') c = ' ';
    }
    // A zombie has an empty command line and is not running anything.
    bool all = !cmdline.empty();
    for (const auto& p : parts) all = all && cmdline.find(p) != std::string::npos;
    if (all) found.push_back(pid);
  }
  closedir(proc);
  return found;
}

std::string JobIdFrom(const std::string& output) {
  const size_t at = output.find("job-");
  if (at == std::string::npos) return "";
  size_t end = at + 4;
  while (end < output.size() &&
         isdigit(static_cast<unsigned char>(output[end]))) {
    ++end;
  }
  return output.substr(at, end - at);
}

std::string FashionMnistData(int64_t train_limit) {
  const std::string data = "/usr/share/datasets/fashion-mnist/";
  return "data:\n"
         "  train_images: " + data + "train-images-idx3-ubyte.gz\n"
         "  train_labels: " + data + "train-labels-idx1-ubyte.gz\n"
         "  eval_images: " + data + "t10k-images-idx3-ubyte.gz\n"
         "  eval_labels: " + data + "t10k-labels-idx1-ubyte.gz\n"
         "  train_limit: " + std::to_string(train_limit) + "\n"
         "  eval_limit: 1000\n";
}

std::string SmallJobSpec(int ranks, int64_t train_limit, int epochs,
                         const std::string& extra) {
  return "name: small\nranks: " + std::to_string(ranks) +
         "\nseed: 3\nmodel: mlp\n" + FashionMnistData(train_limit) +
         "optimizer: {type: adamw, lr: 0.002}\n"
         "scheduler: {type: linear, warmup_steps: 10}\n"
         "training: {epochs: " + std::to_string(epochs) +
         ", batch_size: 64, log_every_steps: 8}\n" + extra;
}

}  // namespace trainctl::testing
