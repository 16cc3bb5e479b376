// Bad input never hurts (issue #7): while a job trains, the coordinator's
// gRPC port gets random bytes, half-open connections that never finish a
// handshake, watchers that leave mid-stream, a worker that reports metrics
// for a job it does not run and a registration under a name already taken.
// The job must end SUCCEEDED, nothing forged may reach its history, and the
// coordinator's file descriptors and memory must come back to bounds.

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <thread>

#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

#include "common/pki.h"
#include "local_cluster.h"
#include "trainctl/v1/workers.grpc.pb.h"

namespace trainctl::testing {
namespace {

using ::testing::HasSubstr;
using std::chrono::seconds;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int OpenFds(pid_t pid) {
  int n = 0;
  DIR* dir = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (dir == nullptr) return -1;
  while (readdir(dir) != nullptr) ++n;
  closedir(dir);
  return n - 2;
}

int64_t RssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

int Dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// True once the peer closed `fd` (read returns 0 or an error), bounded.
bool ClosedByPeer(int fd, seconds within) {
  timeval tv{static_cast<time_t>(within.count()), 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[256];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n == 0) return true;
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

TEST(HostileClientsTest, GarbageAndHalfOpenConnectionsWhileAJobTrains) {
  LocalCluster cluster(/*workers=*/2, /*slots=*/1, /*cpus=*/1);
  const int port = std::stoi(cluster.address().substr(cluster.address().rfind(':') + 1));
  const pid_t coordinator = cluster.coordinator_pid();
  const v1::Job job = cluster.Submit(SmallJobSpec(2, 9600, 2));
  // Wait until it trains, so the attack overlaps real work.
  cluster.WaitForJob(job.id(),
                     [](const v1::Job& j) { return j.latest_train().step() > 0; },
                     seconds(120));
  const int fds_before = OpenFds(coordinator);
  const int64_t rss_before = RssKiB(coordinator);
  ASSERT_GT(fds_before, 0);

  // 1. Random bytes, from a few bytes to 64 KiB, then close.
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    int fd = Dial(port);
    ASSERT_GE(fd, 0);
    std::string junk(1 + rng() % 65536, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    if (i % 3 == 0) junk.replace(0, 3, "\x16\x03\x01");  // a TLS record header
    (void)!write(fd, junk.data(), junk.size());
    close(fd);
  }
  // 2. Half-open: connect, send the start of a handshake, then nothing.
  std::vector<int> idle;
  for (int i = 0; i < 100; ++i) {
    int fd = Dial(port);
    ASSERT_GE(fd, 0);
    if (i % 2 == 0) (void)!write(fd, "\x16\x03\x01\x02\x00", 5);
    idle.push_back(fd);
  }
  // 3. Watchers that leave mid-stream.
  auto jobs = v1::Jobs::NewStub(grpc::CreateChannel(
      cluster.address(), cluster.Credentials(cluster.admin_token())));
  for (int i = 0; i < 40; ++i) {
    grpc::ClientContext ctx;
    v1::WatchJobRequest req;
    req.set_job_id(job.id());
    auto reader = jobs->WatchJob(&ctx, req);
    v1::JobEvent event;
    EXPECT_TRUE(reader->Read(&event));
    ctx.TryCancel();
    reader->Finish();
  }
  // 4. A worker that joins properly, then reports metrics of a job it does
  // not run; 5. a registration under the name of a connected worker.
  const std::string key = *pki::NewPrivateKey();
  grpc::SslCredentialsOptions server_only;
  server_only.pem_root_certs = Slurp(cluster.ca_cert_path());
  v1::JoinRequest join;
  join.set_join_token(cluster.join_token());
  join.set_name("rogue");
  join.set_csr_pem(*pki::NewCertificateRequest(key, "rogue"));
  join.set_slots(1);
  v1::JoinResponse joined;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
    auto stub = v1::Workers::NewStub(grpc::CreateChannel(
        cluster.address(), grpc::SslCredentials(server_only)));
    ASSERT_TRUE(stub->Join(&ctx, join, &joined).ok());
  }
  auto as_worker = [&](const std::string& cert, const std::string& cert_key) {
    grpc::SslCredentialsOptions tls = server_only;
    tls.pem_cert_chain = cert;
    tls.pem_private_key = cert_key;
    return v1::Workers::NewStub(
        grpc::CreateChannel(cluster.address(), grpc::SslCredentials(tls)));
  };
  {
    auto rogue = as_worker(joined.cert_pem(), key);
    grpc::ClientContext ctx;
    auto stream = rogue->Connect(&ctx);
    v1::AgentMessage hello;
    hello.mutable_register_()->set_name("rogue");
    hello.mutable_register_()->set_slots(1);
    ASSERT_TRUE(stream->Write(hello));
    v1::CoordinatorMessage reply;
    ASSERT_TRUE(stream->Read(&reply));
    ASSERT_TRUE(reply.has_registered());
    for (int i = 1; i <= 5; ++i) {
      v1::AgentMessage forged;
      v1::RankMetrics* m = forged.mutable_metrics();
      m->set_job_id(job.id());
      m->set_generation(1);
      m->set_seq(1'000'000 + i);
      m->mutable_point()->set_kind("train");
      m->mutable_point()->set_rank(0);
      m->mutable_point()->set_step(999'999);
      (*m->mutable_point()->mutable_values())["loss"] = -12345;
      ASSERT_TRUE(stream->Write(forged));
    }
    // Half-close and let the server end the stream: it handles every
    // message before it sees the end (cancelling here would race them).
    stream->WritesDone();
    while (stream->Read(&reply)) {}
    EXPECT_TRUE(stream->Finish().ok());
  }
  {
    auto impostor = as_worker(Slurp(cluster.dir() + "/w1-state/worker.crt"),
                              Slurp(cluster.dir() + "/w1-state/worker.key"));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
    auto stream = impostor->Connect(&ctx);
    v1::AgentMessage hello;
    hello.mutable_register_()->set_name("w1");
    hello.mutable_register_()->set_slots(1);
    stream->Write(hello);
    stream->WritesDone();
    v1::CoordinatorMessage reply;
    while (stream->Read(&reply)) {}
    grpc::Status s = stream->Finish();
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(s.error_message(), HasSubstr("already connected"));
  }

  // The server closes the half-open connections by itself (handshake
  // timeout), and the job trains on.
  for (int fd : idle) {
    EXPECT_TRUE(ClosedByPeer(fd, seconds(60)));
    close(fd);
  }
  const v1::Job done = cluster.WaitForJob(
      job.id(),
      [](const v1::Job& j) {
        return j.state() == v1::JOB_STATE_SUCCEEDED ||
               j.state() == v1::JOB_STATE_FAILED ||
               j.state() == v1::JOB_STATE_CANCELLED;
      },
      seconds(600));
  EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
  EXPECT_EQ(done.generation(), 1) << "the attack must not cost a restart";
  for (const v1::JobEvent& e : cluster.Events(job.id())) {
    if (e.has_metric()) {
      EXPECT_NE(e.metric().step(), 999'999) << "a forged metric got in";
    }
  }
  EXPECT_THAT(Slurp(cluster.dir() + "/coordinator.log"),
              HasSubstr("worker rogue: worker rogue does not run rank 0"));

  // File descriptors come back (bounded wait), memory stays bounded.
  int fds_after = OpenFds(coordinator);
  for (int i = 0; i < 100 && fds_after > fds_before + 8; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    fds_after = OpenFds(coordinator);
  }
  EXPECT_LE(fds_after, fds_before + 8);
  const int64_t rss_after = RssKiB(coordinator);
  EXPECT_LT(rss_after - rss_before, 64 * 1024)
      << "RSS " << rss_before << " KiB -> " << rss_after << " KiB";
  std::cout << "coordinator fds " << fds_before << " -> " << fds_after
            << ", RSS " << rss_before << " KiB -> " << rss_after << " KiB\n";
}

}  // namespace
}  // namespace trainctl::testing
