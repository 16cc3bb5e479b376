// profile: {dir, start_step, steps} through the real loop: one Chrome trace
// per rank, holding the traced steps and torch's operators, and nothing
// changed in the training itself.

#include <gtest/gtest.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "common/atomic_file.h"
#include "common/spec.h"
#include "tests/integration/rank_threads.h"

namespace trainctl::train {
namespace {

class StepProfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/step_profile_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    std::ofstream csv(dir_ + "/train.csv");
    for (int i = 0; i < 256; ++i) {
      csv << (i % 7) * 0.1 << ',' << (i % 5) * 0.2 << ',' << (i % 2) << '\n';
    }
  }
  void TearDown() override { EXPECT_TRUE(RemoveTree(dir_).ok()) << dir_; }

  v1::JobSpec Spec(const std::string& profile) {
    absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(
        "seed: 3\nmodel: {type: mlp, hidden: [16]}\n"
        "data: {format: csv, train_path: " + dir_ + "/train.csv}\n"
        "training: {batch_size: 32, max_steps: 8}\n" + profile);
    EXPECT_TRUE(spec.ok()) << spec.status();
    return spec.ok() ? *spec : v1::JobSpec();
  }

  std::vector<TrainResult> Run(const v1::JobSpec& spec) {
    return TrainRanksAsThreads(spec, [](int, RankContext& ctx) { ctx.job_id = "job-7"; });
  }

  // How many entries `dir` holds (POSIX: this test links torch, and
  // common/atomic_file.h says why that rules out std::filesystem).
  static int Entries(const std::string& dir) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return -1;
    int n = 0;
    while (const dirent* e = ::readdir(d)) {
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") ++n;
    }
    ::closedir(d);
    return n;
  }

  std::string dir_;
};

TEST_F(StepProfileTest, WritesOneChromeTraceOfTheStepsAsked) {
  std::vector<TrainResult> traced =
      Run(Spec("profile: {dir: " + dir_ + "/traces, start_step: 2, steps: 3}\n"));
  ASSERT_EQ(traced.size(), 1u);
  EXPECT_EQ(traced[0].steps, 8);
  const std::string path = dir_ + "/traces/job-7/rank-0-steps-2-4.json";
  ASSERT_EQ(::access(path.c_str(), F_OK), 0) << "no " << path;
  EXPECT_EQ(Entries(dir_ + "/traces/job-7"), 1);  // no partial file left beside it
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  google::protobuf::Struct trace;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(text.str(), &trace).ok())
      << "not JSON";
  ASSERT_TRUE(trace.fields().count("traceEvents"));
  std::set<std::string> names;
  for (const auto& event : trace.fields().at("traceEvents").list_value().values()) {
    const auto& fields = event.struct_value().fields();
    if (fields.count("name")) names.insert(fields.at("name").string_value());
  }
  for (const char* step : {"trainctl step 2", "trainctl step 3", "trainctl step 4"}) {
    EXPECT_TRUE(names.count(step)) << step;
  }
  EXPECT_FALSE(names.count("trainctl step 1"));
  EXPECT_FALSE(names.count("trainctl step 5"));
  EXPECT_TRUE(names.count("aten::addmm") || names.count("aten::linear"))
      << "no linear layer among " << names.size() << " event names";

  // Tracing changes nothing in the training.
  std::vector<TrainResult> plain = Run(Spec(""));
  ASSERT_EQ(plain.size(), 1u);
  for (size_t i = 0; i < plain[0].parameters.size(); ++i) {
    EXPECT_TRUE(torch::equal(plain[0].parameters[i], traced[0].parameters[i]));
  }
}

TEST_F(StepProfileTest, AJobEndingBeforeTheLastStepWritesWhatRan) {
  Run(Spec("profile: {dir: " + dir_ + "/traces, start_step: 6, steps: 5}\n"));
  EXPECT_EQ(::access((dir_ + "/traces/job-7/rank-0-steps-6-7.json").c_str(), F_OK), 0);
}

TEST_F(StepProfileTest, AnUnwritableFolderCostsTheTraceNotTheJob) {
  std::ofstream(dir_ + "/file") << "x";
  std::vector<TrainResult> r =
      Run(Spec("profile: {dir: " + dir_ + "/file/traces, start_step: 1, steps: 1}\n"));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].steps, 8);
}

}  // namespace
}  // namespace trainctl::train
