// trainctl export, as a user runs it: jobs train on a real cluster, their
// checkpoints are exported, and Python (the torch that matches this build's
// LibTorch, with the `safetensors` package from PyPI) loads each file the
// documented way and scores the job's evaluation set. The accuracy and loss
// must be the job's own, as recorded with the checkpoint.

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "local_cluster.h"

namespace trainctl::testing {
namespace {

using ::testing::HasSubstr;
using std::chrono::seconds;

const std::string kData = "/usr/share/datasets/fashion-mnist/";
constexpr int kEvalSamples = 1000;

std::string DataSection(const std::string& extra = "") {
  return "data:\n  train_images: " + kData + "train-images-idx3-ubyte.gz\n"
         "  train_labels: " + kData + "train-labels-idx1-ubyte.gz\n"
         "  eval_images: " + kData + "t10k-images-idx3-ubyte.gz\n"
         "  eval_labels: " + kData + "t10k-labels-idx1-ubyte.gz\n"
         "  train_limit: 2048\n  eval_limit: " + std::to_string(kEvalSamples) + "\n" +
         extra;
}

struct PythonScore {
  bool skipped = false;
  std::string output;
  google::protobuf::Struct json;
};

class ExportTest : public SharedClusterTest {
 protected:
  // Submits, follows to the end, and returns the job's id.
  std::string Train(const std::string& name, const std::string& body) {
    const std::string spec = cluster_->WriteFile(
        name + ".yaml", "name: " + name + "\nranks: 2\nseed: 3\n" + body +
                            "optimizer: {type: adamw, lr: 0.003}\n"
                            "training: {epochs: 1, batch_size: 64}\n"
                            "checkpoint: {dir: " + cluster_->dir() + "/checkpoints}\n");
    CliResult submit = cluster_->Cli({"submit", spec, "--follow"});
    EXPECT_EQ(submit.exit_code, 0) << submit.output;
    return JobIdFrom(submit.output);
  }

  // The newest checkpoint's evaluation, as `trainctl checkpoints` lists it.
  std::map<std::string, double> RecordedEval(const std::string& id) {
    CliResult listed = cluster_->Cli({"checkpoints", id, "--output", "json"});
    EXPECT_EQ(listed.exit_code, 0) << listed.output;
    v1::ListCheckpointsResponse response;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(listed.output, &response).ok())
        << listed.output;
    if (response.checkpoints().empty()) return {};
    const auto& metrics = response.checkpoints().rbegin()->metrics();
    return {metrics.begin(), metrics.end()};
  }

  // `data`: the eval set's arguments of export_check.py; Fashion-MNIST's
  // test set by default.
  PythonScore ScoreInPython(const std::string& kind, const std::string& file,
                            std::string data = "") {
    if (data.empty()) {
      data = kData + "t10k-images-idx3-ubyte.gz " + kData + "t10k-labels-idx1-ubyte.gz " +
             std::to_string(kEvalSamples);
    }
    const std::string log = cluster_->dir() + "/python-" + kind + ".log";
    const std::string command =
        "TRAINCTL_BUILD_DIR=" TRAINCTL_BIN_DIR "/.. TRAINCTL_TORCH_PYTHON=" TRAINCTL_TORCH_PYTHON
        " bash " TRAINCTL_SOURCE_DIR "/tests/integration/export_check.sh " + kind + " " +
        file + " " + data + " > " + log + " 2>&1";
    const int status = std::system(command.c_str());
    PythonScore score;
    std::ifstream in(log);
    std::string line;
    while (std::getline(in, line)) {
      score.output += line + "\n";
      if (!line.empty() && line[0] == '{') {
        EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(line, &score.json).ok())
            << line;
      }
    }
    score.skipped = WIFEXITED(status) && WEXITSTATUS(status) == 77;
    EXPECT_TRUE(score.skipped || status == 0) << score.output;
    return score;
  }

  double Field(const google::protobuf::Struct& s, const std::string& key) {
    auto it = s.fields().find(key);
    return it == s.fields().end() ? -1 : it->second.number_value();
  }

  // Python's score on the eval set is the job's: the same accuracy up to
  // one sample (its batches differ from the ranks' shards, so a logit may
  // round differently at a tie), the same mean loss to float precision.
  void ExpectSameScore(const PythonScore& score, const std::map<std::string, double>& job) {
    ASSERT_TRUE(job.count("eval_accuracy") && job.count("eval_loss"));
    std::cout << "python: accuracy " << Field(score.json, "accuracy") << " loss "
              << Field(score.json, "loss") << "; job: eval_accuracy "
              << job.at("eval_accuracy") << " eval_loss " << job.at("eval_loss") << std::endl;
    EXPECT_EQ(Field(score.json, "samples"), kEvalSamples) << score.output;
    EXPECT_NEAR(Field(score.json, "accuracy"), job.at("eval_accuracy"),
                1.0 / kEvalSamples + 1e-9) << score.output;
    EXPECT_NEAR(Field(score.json, "loss"), job.at("eval_loss"), 1e-4) << score.output;
    EXPECT_GT(job.at("eval_accuracy"), 0.4) << "it trained: chance is 0.1";
    EXPECT_FALSE(score.json.fields().at("loaded_in_training_mode").bool_value());
  }
};

TEST_F(ExportTest, BuiltInModelsLoadInPythonAndScoreAsTheJobDid) {
  struct Case {
    std::string name, body;
  };
  for (const Case& c : std::vector<Case>{
           {"export-mlp", "model: {type: mlp, hidden: [64]}\n" + DataSection()},
           // torchvision-style augmentation, normalised by statistics the
           // ranks computed: the file must carry them for Python's inputs.
           {"export-cnn", "model: {type: cnn, channels: [8, 16], hidden: [32]}\n" +
                              DataSection("  transforms:\n    random_crop: {padding: 2}\n"
                                          "    horizontal_flip: true\n"
                                          "    normalize: {from_data: true}\n")}}) {
    SCOPED_TRACE(c.name);
    const std::string id = Train(c.name, c.body);
    ASSERT_FALSE(id.empty());
    const std::string file = cluster_->dir() + "/" + c.name + ".safetensors";
    CliResult exported = cluster_->Cli({"export", id, "-o", file});
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
    EXPECT_THAT(exported.output, HasSubstr("Wrote " + file + " (safetensors"));
    EXPECT_THAT(exported.output, HasSubstr("eval_accuracy"));

    // The same export for scripts: one JSON object.
    CliResult json = cluster_->Cli({"export", id, "-o", file, "--output", "json"});
    ASSERT_EQ(json.exit_code, 0) << json.output;
    google::protobuf::Struct answer;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.output, &answer).ok())
        << json.output;
    EXPECT_EQ(answer.fields().at("path").string_value(), file);
    EXPECT_EQ(answer.fields().at("format").string_value(), "safetensors");
    EXPECT_EQ(answer.fields().at("job_id").string_value(), id);
    EXPECT_EQ(answer.fields().at("step").number_value(), 32);
    EXPECT_EQ(answer.fields().at("bytes").number_value(), std::filesystem::file_size(file));

    PythonScore score = ScoreInPython("safetensors", file);
    if (score.skipped) GTEST_SKIP() << score.output;
    const std::map<std::string, double> job = RecordedEval(id);
    ExpectSameScore(score, job);
    // The file's own trainctl.eval is that checkpoint's evaluation.
    const auto& recorded = score.json.fields().at("recorded").struct_value();
    EXPECT_DOUBLE_EQ(Field(recorded, "eval_accuracy"), job.at("eval_accuracy"));
  }
}

// The transformer blocks (attention, pre-norm, GELU) as Python computes
// them: a character GPT's next-byte loss and token accuracy.
TEST_F(ExportTest, AGptLoadsInPythonAndPredictsTheSameTokens) {
  const std::string fortunes = "/usr/share/games/fortunes/";
  const std::string id = Train(
      "export-gpt", "model: {type: gpt, d_model: 32, n_layers: 2, n_heads: 4, max_seq_len: 32}\n"
                    "data: {format: text, train_path: " + fortunes + "cookie, eval_path: " +
                        fortunes + "fortunes, seq_len: 32, train_limit: 1024, eval_limit: 128}\n");
  ASSERT_FALSE(id.empty());
  const std::string file = cluster_->dir() + "/gpt.safetensors";
  CliResult exported = cluster_->Cli({"export", id, "-o", file});
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_THAT(exported.output, HasSubstr("eval_loss"));

  PythonScore score = ScoreInPython("text", file, fortunes + "fortunes 32 128");
  if (score.skipped) GTEST_SKIP() << score.output;
  const std::map<std::string, double> job = RecordedEval(id);
  ASSERT_TRUE(job.count("eval_token_accuracy") && job.count("eval_loss"));
  std::cout << "python: token accuracy " << Field(score.json, "accuracy") << " loss "
            << Field(score.json, "loss") << "; job: " << job.at("eval_token_accuracy")
            << " " << job.at("eval_loss") << std::endl;
  EXPECT_EQ(Field(score.json, "samples"), 128) << score.output;
  EXPECT_NEAR(Field(score.json, "accuracy"), job.at("eval_token_accuracy"),
              2.0 / (128 * 32) + 1e-9) << score.output;
  EXPECT_NEAR(Field(score.json, "loss"), job.at("eval_loss"), 1e-4) << score.output;
  EXPECT_LT(job.at("eval_loss"), std::log(256.0) - 1) << "it trained: uniform is ln 256";
}

// Fortunes about computers (0) and science (1) as CSV text, quoted across
// lines; bytes outside printable ASCII become '?', so Python's csv module
// reads the same texts. Every sixth fortune is held out.
void WriteFortuneCsvs(const std::string& train, const std::string& eval) {
  std::ofstream out[2] = {std::ofstream(train), std::ofstream(eval)};
  for (std::ofstream& o : out) o << "text,label\n";
  int label = 0;
  for (const char* topic : {"computers", "science"}) {
    std::ifstream in(std::string("/usr/share/games/fortunes/") + topic);
    std::string fortune, line;
    int i = 0;
    auto flush = [&] {
      if (fortune.empty()) return;
      std::string quoted = "\"";
      for (char c : fortune) {
        quoted += c == '"' ? "\"\"" : (c == '\n' || (c >= 32 && c < 127)) ? std::string(1, c) : "?";
      }
      out[i++ % 6 == 5] << quoted << "\"," << label << "\n";
      fortune.clear();
    };
    while (std::getline(in, line)) {
      if (line == "%") {
        flush();
      } else {
        fortune += (fortune.empty() ? "" : "\n") + line;
      }
    }
    flush();
    ++label;
  }
}

// A classifier on CSV text: Python's text_inputs pads and masks as the
// ranks did, and the model attends to and pools over the text only.
TEST_F(ExportTest, ACsvTextClassifierScoresInPythonWithItsPaddingMasked) {
  const std::string train = cluster_->dir() + "/fortunes-train.csv";
  const std::string eval = cluster_->dir() + "/fortunes-eval.csv";
  WriteFortuneCsvs(train, eval);
  const std::string id = Train(
      "export-text", "model: {type: transformer_classifier, d_model: 32, n_layers: 1, "
                     "n_heads: 4, max_seq_len: 96}\n"
                     "data: {format: csv, header: true, text_column: text, label_column: label, "
                     "seq_len: 96, train_path: " + train + ", eval_path: " + eval + "}\n");
  ASSERT_FALSE(id.empty());
  const std::string file = cluster_->dir() + "/text.safetensors";
  CliResult exported = cluster_->Cli({"export", id, "-o", file});
  ASSERT_EQ(exported.exit_code, 0) << exported.output;

  PythonScore score = ScoreInPython("csv_text", file, eval + " 0 0");
  if (score.skipped) GTEST_SKIP() << score.output;
  const std::map<std::string, double> job = RecordedEval(id);
  ASSERT_TRUE(job.count("eval_accuracy") && job.count("eval_loss"));
  const double n = Field(score.json, "samples");
  std::cout << "python: accuracy " << Field(score.json, "accuracy") << " loss "
            << Field(score.json, "loss") << " over " << n << " texts; job: "
            << job.at("eval_accuracy") << " " << job.at("eval_loss") << std::endl;
  EXPECT_GT(n, 200) << score.output;
  EXPECT_NEAR(Field(score.json, "accuracy"), job.at("eval_accuracy"), 1.0 / n + 1e-9)
      << score.output;
  EXPECT_NEAR(Field(score.json, "loss"), job.at("eval_loss"), 1e-4) << score.output;
  const auto& text = score.json.fields().at("text").struct_value();
  EXPECT_EQ(Field(text, "seq_len"), 96);
  EXPECT_EQ(text.fields().at("text_column").string_value(), "text");
  // Some texts are shorter than seq_len: without the mask Python differs.
  EXPECT_GT(Field(score.json, "padded"), 0) << score.output;
}

TEST_F(ExportTest, ATorchScriptJobsModuleComesBackWithItsTrainedWeights) {
  const std::string original = cluster_->dir() + "/convnet.pt";
  const std::string make = "/usr/bin/python3 " TRAINCTL_SOURCE_DIR
                           "/examples/export_torchscript.py " + original + " > " +
                           cluster_->dir() + "/make-module.log 2>&1";
  ASSERT_EQ(std::system(make.c_str()), 0) << "examples/export_torchscript.py failed";
  const std::string id =
      Train("export-ts", "model: {type: torchscript, path: " + original + "}\n" + DataSection());
  ASSERT_FALSE(id.empty());
  const std::string file = cluster_->dir() + "/tuned.pt";
  CliResult exported = cluster_->Cli({"export", id, "-o", file});
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_THAT(exported.output, HasSubstr("torch.jit.load"));

  PythonScore score = ScoreInPython("torchscript", file);
  if (score.skipped) GTEST_SKIP() << score.output;
  ExpectSameScore(score, RecordedEval(id));
  // The module the job started from is untouched: it scores at chance.
  PythonScore untrained = ScoreInPython("torchscript", original);
  EXPECT_LT(Field(untrained.json, "accuracy"), 0.3) << untrained.output;
}

TEST_F(ExportTest, MistakesAreNamedAndWriteNothing) {
  const std::string id = Train("export-errors", "model: {type: mlp, hidden: [16]}\n" +
                                                    DataSection());
  ASSERT_FALSE(id.empty());
  const std::string out = cluster_->dir() + "/never.safetensors";
  CliResult r = cluster_->Cli({"export", id + ":999", "-o", out});
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_THAT(r.output, HasSubstr("has no checkpoint at step 999 (it has steps 32)"));
  r = cluster_->Cli({"export", id + ":x", "-o", out});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("is not JOB or JOB:STEP"));
  r = cluster_->Cli({"export", id, "-o", cluster_->dir() + "/model.bin"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("name it .safetensors or .pt"));
  r = cluster_->Cli({"export", id, "-o", cluster_->dir() + "/model.pt"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("the built-in mlp, not a TorchScript module"));
  r = cluster_->Cli({"export", "job-404", "-o", out});
  EXPECT_EQ(r.exit_code, 4) << r.output;
  // Another node's checkpoint, not on a shared filesystem: gone from here.
  std::filesystem::remove_all(cluster_->dir() + "/checkpoints/" + id);
  r = cluster_->Cli({"export", id, "-o", out});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("which is not readable here"));
  EXPECT_THAT(r.output, HasSubstr("run trainctl export where checkpoint.dir is visible"));
  EXPECT_NE(::access(out.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace trainctl::testing
