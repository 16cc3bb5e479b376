// Files shipped with a job (issue #18): a TorchScript model and CSV data
// named by relative paths beside the spec are uploaded by `trainctl submit`
// and fetched by the ranks from the coordinator, on a TLS cluster whose
// workers cannot see the submitter's directory. A job names only its
// owner's uploads, and every refusal names the field.

#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/file_digest.h"
#include "local_cluster.h"
#include "trainctl/v1/rendezvous.grpc.pb.h"

namespace trainctl::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class ShippedFilesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.coordinator_flags = {"--max-file-mb", "2"};
    cluster_ = new LocalCluster(/*workers=*/2, /*slots=*/1, /*cpus=*/1, options);
    ada_ = cluster_->AddUser("ada");
    bob_ = cluster_->AddUser("bob");
    // The submitter's directory: no worker runs there.
    client_dir_ = cluster_->dir() + "/laptop";
    std::filesystem::create_directories(client_dir_ + "/data");
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  static std::string Write(const std::string& name, const std::string& text) {
    const std::string path = client_dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  // A convnet for Fashion-MNIST, exported by the shipped example script.
  static std::string ExportModel() {
    const std::string model = client_dir_ + "/convnet.pt";
    if (!std::filesystem::exists(model)) {
      const std::string cmd = "/usr/bin/python3 " + std::string(TRAINCTL_SOURCE_DIR) +
                              "/examples/export_torchscript.py " + model + " > " +
                              client_dir_ + "/export.log 2>&1";
      EXPECT_EQ(std::system(cmd.c_str()), 0)
          << "examples/export_torchscript.py failed (needs Debian's python3-torch)";
    }
    return model;
  }

  static std::string ModelSpec() {
    return Write("convnet.yaml",
                 "name: shipped-model\nranks: 2\nseed: 2\n"
                 "model: {type: torchscript, path: convnet.pt}\n"
                 + FashionMnistData(4096) +
                 "optimizer: {type: adamw, lr: 0.003}\n"
                 "training: {epochs: 1, batch_size: 64, log_every_steps: 16}\n");
  }

  static LocalCluster* cluster_;
  static std::string ada_, bob_, client_dir_;
};

LocalCluster* ShippedFilesTest::cluster_ = nullptr;
std::string ShippedFilesTest::ada_, ShippedFilesTest::bob_, ShippedFilesTest::client_dir_;

TEST_F(ShippedFilesTest, ATorchScriptModelBesideTheSpecTrains) {
  const std::string model = ExportModel();
  const std::string spec = ModelSpec();
  CliResult submit = cluster_->CliAs(ada_, {"submit", spec, "--follow"}, std::chrono::seconds(300));
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  EXPECT_THAT(submit.output, HasSubstr("uploaded convnet.pt ("));
  v1::Job job = cluster_->GetJob(JobIdFrom(submit.output));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.reason();
  EXPECT_GT(job.latest_eval().values().at("eval_accuracy"), 0.6);
  // The job keeps what the user wrote and what it stands for.
  EXPECT_EQ(job.spec().model().path(), "convnet.pt");
  ASSERT_EQ(job.spec().shipped_files_size(), 1);
  EXPECT_EQ(job.spec().shipped_files(0).field(), "model.path");
  EXPECT_EQ(job.spec().shipped_files(0).sha256(), *Sha256OfFile(model));
  EXPECT_EQ(job.spec().shipped_files(0).size(),
            static_cast<int64_t>(std::filesystem::file_size(model)));
  // Sent again, the content is not: the coordinator has ada's copy.
  CliResult again = cluster_->CliAs(ada_, {"submit", "--dry-run", spec});
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_THAT(again.output, HasSubstr("already uploaded convnet.pt"));
}

TEST_F(ShippedFilesTest, CsvDataBesideTheSpecTrains) {
  // Two features; the class is which side of x0 + x1 = 0 a point lies.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  std::string csv;
  for (int i = 0; i < 1200; ++i) {
    const double x0 = u(rng), x1 = u(rng);
    csv += std::to_string(x0) + "," + std::to_string(x1) + "," +
           (x0 + x1 > 0 ? "1" : "0") + "\n";
  }
  Write("data/points.csv", csv);
  const std::string spec = Write(
      "points.yaml",
      "name: shipped-data\nranks: 2\nseed: 3\nmodel: {type: mlp, hidden: [16]}\n"
      "data: {format: csv, train_path: data/points.csv, eval_fraction: 0.2}\n"
      "optimizer: {type: adamw, lr: 0.01}\n"
      "training: {epochs: 8, batch_size: 32, log_every_steps: 10}\n");
  CliResult dry = cluster_->CliAs(ada_, {"submit", "--dry-run", spec});
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_THAT(dry.output, HasSubstr("the ranks count their samples when they start"));
  CliResult submit = cluster_->CliAs(ada_, {"submit", spec, "--follow"}, std::chrono::seconds(300));
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  v1::Job job = cluster_->GetJob(JobIdFrom(submit.output));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.reason();
  EXPECT_GT(job.latest_eval().values().at("eval_accuracy"), 0.9);
  EXPECT_EQ(job.spec().data().train_path(), "data/points.csv");
}

TEST_F(ShippedFilesTest, AJobNamesOnlyItsOwnersUploads) {
  const std::string model = ExportModel();
  ASSERT_EQ(cluster_->CliAs(ada_, {"submit", "--dry-run", ModelSpec()}).exit_code, 0);
  // bob learned the digest of ada's model, not its bytes: his directory
  // has no convnet.pt, and he names the digest.
  std::filesystem::create_directories(client_dir_ + "/bob");
  const std::string stolen =
      "model: {type: torchscript, path: convnet.pt}\n"
      "data: {train_images: /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz,"
      " train_labels: /usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz}\n"
      "shipped_files: [{field: model.path, path: convnet.pt, sha256: " +
      *Sha256OfFile(model) + ", size: " + std::to_string(std::filesystem::file_size(model)) +
      "}]\n";
  CliResult bob = cluster_->CliAs(bob_, {"submit", "--dry-run", Write("bob/stolen.yaml", stolen)});
  EXPECT_NE(bob.exit_code, 0);
  EXPECT_THAT(bob.output, HasSubstr("model.path: 'convnet.pt' names a file bob did not upload"));
  EXPECT_THAT(bob.output, Not(HasSubstr("uploaded")));
  // With the bytes beside his spec, the upload is his proof of having them.
  CliResult owner = cluster_->CliAs(bob_, {"submit", "--dry-run", Write("stolen.yaml", stolen)});
  EXPECT_EQ(owner.exit_code, 0) << owner.output;
  EXPECT_THAT(owner.output, HasSubstr("uploaded convnet.pt"));
}

TEST_F(ShippedFilesTest, WhatCannotBeShippedIsRefusedByName) {
  Write("big.pt", std::string(3 << 20, 'x'));
  const std::string data =
      "data: {train_images: /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz,"
      " train_labels: /usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz}\n";
  CliResult big = cluster_->CliAs(
      ada_, {"submit", Write("big.yaml", "model: {type: torchscript, path: big.pt}\n" + data)});
  EXPECT_EQ(big.exit_code, 2) << big.output;
  EXPECT_THAT(big.output, HasSubstr("model.path: big.pt: upload failed: a file of 3145728 "
                                    "bytes is over this coordinator's limit of 2 MiB"));
  CliResult missing = cluster_->CliAs(
      ada_, {"submit", Write("missing.yaml", "model: {type: torchscript, path: gone.pt}\n" + data)});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("model.path: gone.pt: No such file or directory"));
  // Past the CLI (another client, or the HTTP of a script): a relative path
  // nobody uploaded would be looked for in the worker's directory.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::SubmitJobRequest request;
  request.set_spec_text("model: mlp\ndata: {format: csv, train_path: points.csv}\n");
  v1::SubmitJobResponse response;
  grpc::Status refused = cluster_->jobs().SubmitJob(&ctx, request, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("data.train_path: 'points.csv' is a relative path"));
}

TEST_F(ShippedFilesTest, OnlyTheJobsRanksFetchItsFiles) {
  const std::string model = ExportModel();
  const std::string spec = ModelSpec();
  CliResult submit = cluster_->CliAs(ada_, {"submit", spec, "--set", "training.epochs=1"});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = JobIdFrom(submit.output);
  // ada's token is not a rank's key; a made-up key is not either.
  auto channel = grpc::CreateChannel(cluster_->address(), cluster_->Credentials(ada_));
  std::unique_ptr<v1::Rendezvous::Stub> stub = v1::Rendezvous::NewStub(channel);
  for (const std::string& key : {std::string(), std::string("guessed")}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!key.empty()) ctx.AddMetadata("x-trainctl-rendezvous-key", key);
    v1::FetchFileRequest request;
    request.mutable_scope()->set_job_id(id);
    request.set_sha256(*Sha256OfFile(model));
    auto reader = stub->FetchFile(&ctx, request);
    v1::FileChunk chunk;
    EXPECT_FALSE(reader->Read(&chunk)) << "a byte reached a caller without the key";
    EXPECT_NE(reader->Finish().error_code(), grpc::StatusCode::OK);
  }
  ASSERT_EQ(cluster_->Cli({"cancel", id}).exit_code, 0);
}

}  // namespace
}  // namespace trainctl::testing
