// Identity and access on a real cluster (issue #7): every RPC refuses
// callers without credentials, people only touch their own jobs (admins
// every job), workers need a certificate from the cluster CA named after
// them, and rendezvous keys are only for their job generation's ranks.

#include <sys/stat.h>

#include <fstream>
#include <thread>

#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include "common/pki.h"
#include "local_cluster.h"
#include "trainctl/v1/rendezvous.grpc.pb.h"
#include "trainctl/v1/workers.grpc.pb.h"

namespace trainctl::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using std::chrono::seconds;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void Deadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + seconds(10));
}

class AuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new LocalCluster(/*workers=*/2, /*slots=*/1, /*cpus=*/1);
    alice_ = AddUser("alice");
    bob_ = AddUser("bob");
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  static std::string AddUser(const std::string& name) {
    return cluster_->AddUser(name);
  }

  static std::unique_ptr<v1::Jobs::Stub> JobsAs(const std::string& token) {
    return v1::Jobs::NewStub(grpc::CreateChannel(
        cluster_->address(), cluster_->Credentials(token)));
  }

  static v1::Job SubmitAs(const std::string& token, const std::string& spec) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::SubmitJobRequest req;
    req.set_spec_text(spec);
    v1::SubmitJobResponse resp;
    grpc::Status s = JobsAs(token)->SubmitJob(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.job();
  }

  // The status of each Jobs RPC for `token` on `job_id`.
  static std::map<std::string, grpc::Status> EveryJobsRpc(
      const std::string& token, const std::string& job_id) {
    auto stub = JobsAs(token);
    std::map<std::string, grpc::Status> out;
    {
      grpc::ClientContext ctx;
      Deadline(&ctx);
      v1::SubmitJobRequest req;
      req.set_spec_text(SmallJobSpec(1, 64, 1));
      req.set_dry_run(true);
      v1::SubmitJobResponse resp;
      out["SubmitJob"] = stub->SubmitJob(&ctx, req, &resp);
    }
    {
      grpc::ClientContext ctx;
      Deadline(&ctx);
      v1::GetJobRequest req;
      req.set_job_id(job_id);
      v1::Job resp;
      out["GetJob"] = stub->GetJob(&ctx, req, &resp);
    }
    {
      grpc::ClientContext ctx;
      Deadline(&ctx);
      v1::ListJobsResponse resp;
      out["ListJobs"] = stub->ListJobs(&ctx, {}, &resp);
    }
    {
      grpc::ClientContext ctx;
      Deadline(&ctx);
      v1::CancelJobRequest req;
      req.set_job_id(job_id);
      v1::Job resp;
      out["CancelJob"] = stub->CancelJob(&ctx, req, &resp);
    }
    {
      grpc::ClientContext ctx;
      Deadline(&ctx);
      v1::WatchJobRequest req;
      req.set_job_id(job_id);
      auto reader = stub->WatchJob(&ctx, req);
      v1::JobEvent event;
      while (reader->Read(&event)) ctx.TryCancel();  // only the status matters
      out["WatchJob"] = reader->Finish();
    }
    {
      grpc::ClientContext ctx;
      Deadline(&ctx);
      v1::ListWorkersResponse resp;
      out["ListWorkers"] = stub->ListWorkers(&ctx, {}, &resp);
    }
    {
      grpc::ClientContext ctx;
      Deadline(&ctx);
      v1::ListCheckpointsRequest req;
      req.set_job_id(job_id);
      v1::ListCheckpointsResponse resp;
      out["ListCheckpoints"] = stub->ListCheckpoints(&ctx, req, &resp);
    }
    return out;
  }

  static LocalCluster* cluster_;
  static std::string alice_, bob_;
};

LocalCluster* AuthTest::cluster_ = nullptr;
std::string AuthTest::alice_;
std::string AuthTest::bob_;

TEST_F(AuthTest, EveryJobsRpcRefusesMissingAndWrongTokens) {
  ASSERT_FALSE(alice_.empty());
  const v1::Job queued = SubmitAs(alice_, SmallJobSpec(4, 640, 1));
  for (const std::string& token : {std::string(), std::string("tcu_0000")}) {
    const auto statuses = EveryJobsRpc(token, queued.id());
    EXPECT_EQ(statuses.size(), 7u);
    for (const auto& [rpc, status] : statuses) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << rpc << " with token '" << token << "': " << status.error_message();
    }
  }
  // A join token is for workers only.
  const auto with_join = EveryJobsRpc(cluster_->join_token(), queued.id());
  for (const auto& [rpc, status] : with_join) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << rpc;
  }
  // The queue is FIFO: leave nothing queued ahead of the other tests' jobs.
  EXPECT_EQ(cluster_->Cli({"cancel", queued.id()}).exit_code, 0);
}

TEST_F(AuthTest, PeopleTouchOnlyTheirOwnJobsAndAdminsEveryJob) {
  // Needs 4 ranks on 2 slots: stays queued until cancelled.
  const v1::Job job = SubmitAs(alice_, SmallJobSpec(4, 640, 1));
  EXPECT_EQ(job.owner(), "alice");

  const auto as_bob = EveryJobsRpc(bob_, job.id());
  for (const char* rpc : {"GetJob", "CancelJob", "WatchJob", "ListCheckpoints"}) {
    EXPECT_EQ(as_bob.at(rpc).error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << rpc << ": " << as_bob.at(rpc).error_message();
    EXPECT_THAT(as_bob.at(rpc).error_message(), HasSubstr("belongs to alice"));
  }
  EXPECT_TRUE(as_bob.at("SubmitJob").ok());
  EXPECT_TRUE(as_bob.at("ListWorkers").ok());
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::ListJobsResponse bobs;
    ASSERT_TRUE(JobsAs(bob_)->ListJobs(&ctx, {}, &bobs).ok());
    for (const v1::Job& j : bobs.jobs()) EXPECT_EQ(j.owner(), "bob") << j.id();
  }
  // Bob cannot resume from alice's checkpoints either.
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::SubmitJobRequest req;
    req.set_spec_text(SmallJobSpec(1, 64, 1));
    req.set_resume_from(job.id());
    v1::SubmitJobResponse resp;
    EXPECT_EQ(JobsAs(bob_)->SubmitJob(&ctx, req, &resp).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  // The CLI says whose job it is and exits 5.
  std::vector<std::string> cancel = {std::string(TRAINCTL_BIN_DIR) + "/trainctl"};
  for (const std::string& flag : cluster_->CliFlags(bob_)) cancel.push_back(flag);
  cancel.insert(cancel.end(), {"cancel", job.id()});
  Process denied(cancel, cluster_->dir() + "/bob-cancel.out");
  EXPECT_EQ(denied.Wait(seconds(60)), 5);
  EXPECT_THAT(Slurp(cluster_->dir() + "/bob-cancel.out"),
              HasSubstr("belongs to alice"));

  // Alice sees it; the admin sees it and cancels it.
  const auto as_alice = EveryJobsRpc(alice_, "job-0-does-not-exist");
  EXPECT_EQ(as_alice.at("GetJob").error_code(), grpc::StatusCode::NOT_FOUND);
  CliResult cancelled = cluster_->Cli({"cancel", job.id()});  // admin token
  EXPECT_EQ(cancelled.exit_code, 0) << cancelled.output;
  EXPECT_EQ(cluster_->GetJob(job.id()).state(), v1::JOB_STATE_CANCELLED);
}

TEST_F(AuthTest, LoginSavesTheTokenPrivatelyAndLaterCommandsUseIt) {
  const std::string home = cluster_->dir() + "/home-alice";
  const std::string bin = std::string(TRAINCTL_BIN_DIR) + "/trainctl";
  const std::vector<std::string> env = {"/usr/bin/env", "HOME=" + home,
                                        "XDG_CONFIG_HOME=", "XDG_STATE_HOME=",
                                        "TRAINCTL_TOKEN=", "TRAINCTL_CA_CERT=",
                                        "TRAINCTL_COORDINATOR=", bin};
  std::vector<std::string> login = env;
  login.insert(login.end(), {"--coordinator", cluster_->address(), "--ca-cert",
                             cluster_->ca_cert_path(), "--token", alice_,
                             "login"});
  Process p(login, home + ".login.out");
  ASSERT_EQ(p.Wait(seconds(60)), 0) << Slurp(home + ".login.out");
  const std::string config = home + "/.config/trainctl/config.yaml";
  struct stat st;
  ASSERT_EQ(stat(config.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_THAT(Slurp(config), HasSubstr(alice_));

  const v1::Job mine = SubmitAs(alice_, SmallJobSpec(4, 640, 1));
  std::vector<std::string> list = env;
  list.insert(list.end(), {"list", "--output", "json"});
  Process l(list, home + ".list.out");
  ASSERT_EQ(l.Wait(seconds(60)), 0) << Slurp(home + ".list.out");
  EXPECT_THAT(Slurp(home + ".list.out"), HasSubstr(mine.id()));

  // A wrong token is refused by login and nothing is saved.
  const std::string other_home = cluster_->dir() + "/home-mallory";
  std::vector<std::string> bad = {"/usr/bin/env", "HOME=" + other_home,
                                  "XDG_CONFIG_HOME=", bin, "--coordinator",
                                  cluster_->address(), "--ca-cert",
                                  cluster_->ca_cert_path(), "--token",
                                  "tcu_forged", "login"};
  Process b(bad, other_home + ".out");
  EXPECT_EQ(b.Wait(seconds(60)), 5) << Slurp(other_home + ".out");
  EXPECT_THAT(Slurp(other_home + ".out"), HasSubstr("refused this token (unknown or "
                                                    "revoked); nothing was saved"));
  EXPECT_THAT(Slurp(other_home + ".out"), Not(HasSubstr("run `trainctl login`")));
  EXPECT_NE(stat((other_home + "/.config/trainctl/config.yaml").c_str(), &st), 0);
  cluster_->Cli({"cancel", mine.id()});
}

TEST_F(AuthTest, WorkersNeedACertificateFromTheClusterNamedAfterThem) {
  const std::string ca = cluster_->ca_cert_path();
  const std::string blank_token = cluster_->dir() + "/blank.token";
  std::ofstream(blank_token) << " \n";
  struct Case {
    std::string name;
    std::vector<std::string> flags;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"x1", {}, "--ca-cert: required"},
      {"x2", {"--ca-cert", ca}, "--join-token"},
      {"x3", {"--ca-cert", ca, "--join-token", "tcjoin_forged"},
       "not a valid join token"},
      // A user token is not a join token.
      {"x4", {"--ca-cert", ca, "--join-token", alice_}, "not a valid join token"},
      // w1's certificate under another name.
      {"x5",
       {"--ca-cert", ca, "--cert", cluster_->dir() + "/w1-state/worker.crt",
        "--key", cluster_->dir() + "/w1-state/worker.key"},
       "the certificate is for 'w1'"},
      // --join-token-file: a missing or blank file, or both ways at once.
      {"x8",
       {"--ca-cert", ca, "--join-token-file", cluster_->dir() + "/no.token"},
       "--join-token-file " + cluster_->dir() + "/no.token: cannot open"},
      {"x9", {"--ca-cert", ca, "--join-token-file", blank_token},
       "--join-token-file " + blank_token + ": the file is empty"},
      {"x10",
       {"--ca-cert", ca, "--join-token", "tcjoin_x", "--join-token-file",
        blank_token},
       "--join-token-file and --join-token"},
  };
  // A join token past its --expires-in says so (the rest of the cases say
  // "not a valid join token"): made with add-user, then aged in the file.
  std::vector<Case> all = cases;
  {
    const std::string out = cluster_->dir() + "/add-expiring";
    Process add({std::string(TRAINCTL_BIN_DIR) + "/trainctl-coordinator",
                 "add-user", "slurm-7", "--join", "--expires-in", "2h",
                 "--state-dir", cluster_->state_dir()},
                out);
    ASSERT_EQ(add.Wait(seconds(30)), 0) << Slurp(out);
    EXPECT_THAT(Slurp(out), HasSubstr("it expires in 2h"));
    const std::string text = Slurp(out);
    const std::string token = text.substr(text.find("tcjoin_"), 7 + 64);
    const std::string tokens_file = cluster_->state_dir() + "/auth/tokens";
    std::string tokens = Slurp(tokens_file);
    const size_t line = tokens.find("join slurm-7 ");
    ASSERT_NE(line, std::string::npos);
    const size_t at = tokens.find(" expires=", line);
    ASSERT_NE(at, std::string::npos) << tokens;
    tokens.replace(at, tokens.find('\n', at) - at, " expires=1000000000");
    std::ofstream(tokens_file + ".new") << tokens;
    ASSERT_EQ(std::rename((tokens_file + ".new").c_str(), tokens_file.c_str()),
              0);
    all.push_back({"x11", {"--ca-cert", ca, "--join-token", token},
                   "the token of 'slurm-7' expired at 2001-09-09"});
  }
  for (const Case& c : all) {
    Process& worker = cluster_->StartWorker(c.name, 1, 1, c.flags,
                                            /*with_credentials=*/false);
    EXPECT_EQ(worker.Wait(seconds(60)), 1) << c.name;
    EXPECT_THAT(Slurp(cluster_->dir() + "/" + c.name + ".log"), HasSubstr(c.says))
        << c.name;
  }

  // The coordinator itself checks the name too: w1's certificate on a stream
  // that registers as x6.
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = Slurp(ca);
  tls.pem_cert_chain = Slurp(cluster_->dir() + "/w1-state/worker.crt");
  tls.pem_private_key = Slurp(cluster_->dir() + "/w1-state/worker.key");
  auto workers = v1::Workers::NewStub(
      grpc::CreateChannel(cluster_->address(), grpc::SslCredentials(tls)));
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    auto stream = workers->Connect(&ctx);
    v1::AgentMessage hello;
    hello.mutable_register_()->set_name("x6");
    hello.mutable_register_()->set_slots(1);
    stream->Write(hello);
    stream->WritesDone();
    v1::CoordinatorMessage reply;
    while (stream->Read(&reply)) {}
    grpc::Status s = stream->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_THAT(s.error_message(), HasSubstr("'w1'"));
  }
  // Without any certificate.
  {
    grpc::SslCredentialsOptions server_only;
    server_only.pem_root_certs = Slurp(ca);
    auto anonymous = v1::Workers::NewStub(grpc::CreateChannel(
        cluster_->address(), grpc::SslCredentials(server_only)));
    grpc::ClientContext ctx;
    Deadline(&ctx);
    auto stream = anonymous->Connect(&ctx);
    v1::AgentMessage hello;
    hello.mutable_register_()->set_name("x7");
    stream->Write(hello);
    stream->WritesDone();
    v1::CoordinatorMessage reply;
    while (stream->Read(&reply)) {}
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  // The join token cannot buy a certificate for a name already certified
  // for another key (w1's), until an admin forgets that name.
  auto join_as_w1 = [&]() {
    const std::string key = *pki::NewPrivateKey();
    grpc::SslCredentialsOptions server_only;
    server_only.pem_root_certs = Slurp(ca);
    auto stub = v1::Workers::NewStub(grpc::CreateChannel(
        cluster_->address(), grpc::SslCredentials(server_only)));
    v1::JoinRequest join;
    join.set_join_token(cluster_->join_token());
    join.set_name("w1");
    join.set_csr_pem(*pki::NewCertificateRequest(key, "w1"));
    join.set_slots(1);
    v1::JoinResponse joined;
    grpc::ClientContext ctx;
    Deadline(&ctx);
    return stub->Join(&ctx, join, &joined);
  };
  grpc::Status stolen = join_as_w1();
  EXPECT_EQ(stolen.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(stolen.error_message(), HasSubstr("forget-worker w1"));
  Process forget({std::string(TRAINCTL_BIN_DIR) + "/trainctl-coordinator",
                  "forget-worker", "w1", "--state-dir", cluster_->state_dir()},
                 cluster_->dir() + "/forget.out");
  EXPECT_EQ(forget.Wait(seconds(30)), 0) << Slurp(cluster_->dir() + "/forget.out");
  EXPECT_TRUE(join_as_w1().ok());

  // None of them registered; the two real workers still serve.
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::ListWorkersResponse list;
  ASSERT_TRUE(cluster_->jobs().ListWorkers(&ctx, {}, &list).ok());
  ASSERT_EQ(list.workers_size(), 2);
  for (const auto& w : list.workers()) EXPECT_THAT(w.name(), Not(HasSubstr("x")));
}

TEST_F(AuthTest, RendezvousKeysAreOnlyForTheirGenerationsRanks) {
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = Slurp(cluster_->ca_cert_path());
  auto rendezvous = v1::Rendezvous::NewStub(
      grpc::CreateChannel(cluster_->address(), grpc::SslCredentials(tls)));
  // Every method without a key, and Set with a key guessed from nothing.
  auto scope = [](v1::Scope* s) {
    s->set_job_id("job-1");
    s->set_generation(1);
  };
  std::vector<std::pair<std::string, grpc::Status>> results;
  auto call = [&](const std::string& name, auto method, auto request,
                  auto response) {
    scope(request.mutable_scope());
    grpc::ClientContext ctx;
    Deadline(&ctx);
    results.emplace_back(name, ((*rendezvous).*method)(&ctx, request, &response));
  };
  call("Set", &v1::Rendezvous::Stub::Set, v1::SetRequest(), v1::SetResponse());
  call("Get", &v1::Rendezvous::Stub::Get, v1::GetRequest(), v1::GetResponse());
  call("Add", &v1::Rendezvous::Stub::Add, v1::AddRequest(), v1::AddResponse());
  call("CompareSet", &v1::Rendezvous::Stub::CompareSet, v1::CompareSetRequest(),
       v1::CompareSetResponse());
  call("Check", &v1::Rendezvous::Stub::Check, v1::CheckRequest(),
       v1::CheckResponse());
  call("Wait", &v1::Rendezvous::Stub::Wait, v1::WaitRequest(), v1::WaitResponse());
  call("Delete", &v1::Rendezvous::Stub::Delete, v1::DeleteRequest(),
       v1::DeleteResponse());
  call("NumKeys", &v1::Rendezvous::Stub::NumKeys, v1::NumKeysRequest(),
       v1::NumKeysResponse());
  ASSERT_EQ(results.size(), 8u);
  for (const auto& [name, status] : results) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << name;
    EXPECT_THAT(status.error_message(), HasSubstr("job-1 generation 1"));
  }
}

TEST_F(AuthTest, AJobTrainsAcrossWorkersOverTls) {
  const v1::Job job = SubmitAs(alice_, SmallJobSpec(2, 640, 1));
  const v1::Job done = cluster_->WaitForJob(
      job.id(),
      [](const v1::Job& j) {
        return j.state() == v1::JOB_STATE_SUCCEEDED ||
               j.state() == v1::JOB_STATE_FAILED ||
               j.state() == v1::JOB_STATE_CANCELLED;
      },
      seconds(300));
  EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
  EXPECT_EQ(done.owner(), "alice");
  ASSERT_EQ(done.latest_eval().values().count("eval_accuracy"), 1u);
  EXPECT_GT(done.latest_eval().values().at("eval_accuracy"), 0.5);
}

TEST(InsecureClusterTest, PlaintextOnlyWithTheFlagAndItWarns) {
  ClusterOptions options;
  options.insecure = true;
  LocalCluster cluster(/*workers=*/1, /*slots=*/1, /*cpus=*/1, options);
  CliResult plain = cluster.Cli({"list"});
  EXPECT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_THAT(Slurp(cluster.dir() + "/coordinator.log"),
              HasSubstr("--insecure: plaintext gRPC and HTTP and NO authentication"));
  // A client that expects TLS does not talk to it.
  const std::string ca = cluster.WriteFile(
      "other-ca.crt", *pki::SelfSignedCa(*pki::NewPrivateKey(), "other", 1));
  Process tls_client({std::string(TRAINCTL_BIN_DIR) + "/trainctl",
                      "--coordinator", cluster.address(), "--ca-cert", ca,
                      "--token", "x", "list"},
                     cluster.dir() + "/tls-client.out");
  EXPECT_EQ(tls_client.Wait(seconds(60)), 3) << Slurp(cluster.dir() + "/tls-client.out");
}

}  // namespace
}  // namespace trainctl::testing
