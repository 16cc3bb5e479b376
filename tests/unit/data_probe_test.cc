// The data probe behind a dry run's sample counts (security review H2),
// run on a worker by the agent's handler: it refuses what is not a regular
// file without opening it, bounds what it reads, checks every file a
// format needs, counts as the ranks do, and never quotes a file (C1).

#include "common/data_probe.h"
#include "common/data_shape_probe.h"
#include "common/tokenizer_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/unit/temp_dir_test.h"
#include "tests/unit/leak_check.h"
#include "tests/unit/tar_test_util.h"
#include "tests/unit/npy_test_util.h"
#include "worker/agent/data_probe_handler.h"

namespace trainctl {
namespace {

using leak_check::FileBytesIn;
using leak_check::kSecret;
using ::testing::HasSubstr;

class DataProbeTest : public trainctl::testing::TempDirTest {
 protected:
  // An IDX header for `count` samples (images: 2x2 each) and its payload.
  std::string WriteIdx(const std::string& name, bool images, uint32_t count,
                       bool gzip) {
    std::string bytes = {0, 0, 8, static_cast<char>(images ? 3 : 1)};
    std::vector<uint32_t> dims = {count};
    if (images) dims.insert(dims.end(), {2, 2});
    for (uint32_t d : dims) {
      for (int s = 24; s >= 0; s -= 8) bytes.push_back(char((d >> s) & 0xff));
    }
    bytes.append(count * (images ? 4 : 1), '\1');
    return Write(name, bytes, gzip);
  }

  static v1::DataSpec Data(const std::string& format) {
    v1::DataSpec d;
    d.set_format(format);
    d.set_delimiter(",");
    d.set_token_dtype("uint16");
    d.set_seq_len(4);
    d.mutable_audio()->set_path_column("path");
    d.mutable_audio()->set_label_column("label");
    return d;
  }

};

std::string ErrorOf(const v1::DataSpec& data, const DataProbeLimits& limits = {}) {
  absl::StatusOr<DataSampleCounts> counts = ProbeDataSamples(data, limits);
  EXPECT_FALSE(counts.ok());
  return counts.ok() ? "" : std::string(counts.status().message());
}

// --- refusals ---

TEST_F(DataProbeTest, DevZeroIsRefusedWithoutBeingRead) {
  // Before: std::getline grew one string until the OOM killer came.
  v1::DataSpec d = Data("csv");
  d.set_train_path("/dev/zero");
  absl::StatusOr<DataSampleCounts> counts = ProbeDataSamples(d);
  ASSERT_FALSE(counts.ok());
  EXPECT_EQ(counts.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(counts.status().message(),
            "data.train_path: /dev/zero is a character device; data files "
            "must be regular files");
  for (const char* format : {"tokens", "text", "tensors"}) {
    d.set_format(format);
    EXPECT_THAT(ErrorOf(d), HasSubstr("is a character device")) << format;
  }
  d = Data("idx");
  d.set_train_images("/dev/zero");
  d.set_train_labels(WriteIdx("l", false, 3, false));
  EXPECT_THAT(ErrorOf(d),
              HasSubstr("data.train_images: /dev/zero is a character device"));
}

TEST_F(DataProbeTest, FifosAndDirectoriesAreRefused) {
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  v1::DataSpec d = Data("csv");
  d.set_train_path(fifo);  // opening it for reading would block
  EXPECT_EQ(ErrorOf(d),
            "data.train_path: " + fifo + " is a FIFO; data files must be "
            "regular files");
  // A directory is a set of shards; a FIFO in it is not one of them.
  d.set_train_path(dir_);
  EXPECT_EQ(ErrorOf(d), "data.train_path: " + dir_ + ": names no regular file");
  d = Data("idx");
  d.set_train_images(WriteIdx("i", true, 3, false));
  d.set_train_labels(fifo);
  EXPECT_THAT(ErrorOf(d), HasSubstr("data.train_labels: " + fifo + " is a FIFO"));
}

TEST_F(DataProbeTest, EveryFileTheFormatNeedsIsChecked) {
  // Before: only the labels were read, so missing images went unnoticed.
  v1::DataSpec d = Data("idx");
  d.set_train_images(dir_ + "/missing-images");
  d.set_train_labels(WriteIdx("labels", false, 3, false));
  EXPECT_EQ(ErrorOf(d), "data.train_images: " + dir_ +
                            "/missing-images: cannot open: No such file or "
                            "directory");
  d.set_train_images(WriteIdx("images", true, 3, false));
  d.set_eval_images(WriteIdx("eval-images", true, 2, false));
  d.set_eval_labels(dir_ + "/missing-eval-labels");
  EXPECT_THAT(ErrorOf(d), HasSubstr("data.eval_labels: " + dir_ +
                                    "/missing-eval-labels: cannot open"));
  // Images and labels that disagree, as the ranks would find.
  d.clear_eval_images();
  d.clear_eval_labels();
  d.set_train_labels(WriteIdx("labels4", false, 4, false));
  EXPECT_EQ(ErrorOf(d), "data.train_labels: " + dir_ + "/labels4 has 4 labels "
                            "but " + dir_ + "/images has 3 images");
  // Swapped: each file's magic is checked.
  d.set_train_labels(d.train_images());
  EXPECT_THAT(ErrorOf(d), HasSubstr("data.train_labels: " + d.train_images() +
                                    ": not an IDX label file"));

  v1::DataSpec csv = Data("csv");
  csv.set_train_path(Write("t.csv", "1,2\n"));
  csv.set_eval_path(dir_ + "/missing.csv");
  EXPECT_THAT(ErrorOf(csv), HasSubstr("data.eval_path: " + dir_ + "/missing.csv"));
  v1::DataSpec tensors = Data("tensors");
  tensors.set_train_path(dir_ + "/missing.pt");
  EXPECT_THAT(ErrorOf(tensors), HasSubstr("data.train_path: " + dir_ +
                                          "/missing.pt: cannot open"));
  tensors.set_train_path(Write("present.pt", "x"));
  EXPECT_EQ(ProbeDataSamples(tensors).status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST_F(DataProbeTest, ReadsAreBoundedInBytesAndTime) {
  v1::DataSpec d = Data("csv");
  d.set_train_path(Write("big.csv", std::string(4096, '1') + "\n"));
  DataProbeLimits limits;
  limits.max_bytes_read = 1000;
  absl::StatusOr<DataSampleCounts> counts = ProbeDataSamples(d, limits);
  EXPECT_EQ(counts.status().code(), absl::StatusCode::kResourceExhausted);
  // With a train_limit only the rows it needs are read.
  std::string rows;
  for (int i = 0; i < 500; ++i) rows += "1,2\n";
  d.set_train_path(Write("rows.csv", rows));  // 2000 bytes
  d.set_train_limit(10);
  counts = ProbeDataSamples(d, limits);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->train_samples, 10);

  limits.deadline = absl::InfinitePast();
  EXPECT_EQ(ProbeDataSamples(d, limits).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

// --- counts ---

TEST_F(DataProbeTest, CountsAsTheRanks) {
  v1::DataSpec idx = Data("idx");
  idx.set_train_images(WriteIdx("ti.gz", true, 5, true));
  idx.set_train_labels(WriteIdx("tl.gz", false, 5, true));
  absl::StatusOr<DataSampleCounts> counts = ProbeDataSamples(idx);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->train_samples, 5);
  EXPECT_EQ(counts->eval_samples, 0);
  idx.set_train_limit(3);
  idx.set_eval_images(WriteIdx("ei", true, 2, false));
  idx.set_eval_labels(WriteIdx("el", false, 2, false));
  counts = ProbeDataSamples(idx);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->train_samples, 3);
  EXPECT_EQ(counts->eval_samples, 2);

  // csv: blank lines skipped, the header dropped, no final newline needed;
  // a symlink (as in data directories) is followed.
  v1::DataSpec csv = Data("csv");
  const std::string target = Write("a.csv", "x,y\r\n1,2\r\n\r\n  \n3,4\n5,6");
  ASSERT_EQ(symlink(target.c_str(), (dir_ + "/link.csv").c_str()), 0);
  csv.set_train_path(dir_ + "/link.csv");
  csv.set_header(true);
  counts = ProbeDataSamples(csv);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->train_samples, 3);
  // eval_fraction: llround(3 x 0.34) = 1 for eval, 2 left.
  csv.set_eval_fraction(0.34);
  counts = ProbeDataSamples(csv);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->train_samples, 2);
  EXPECT_EQ(counts->eval_samples, 1);
  csv.set_eval_fraction(0.1);  // rounds to 0 for eval: the ranks refuse it
  EXPECT_THAT(ErrorOf(csv), HasSubstr("data.eval_fraction: 0.1 of 3"));
  csv.set_eval_fraction(0);
  csv.set_train_path(Write("header-only.csv", "x,y\n"));
  EXPECT_THAT(ErrorOf(csv), HasSubstr("header-only.csv: no data rows"));

  // tokens: (tokens - 1) / seq_len windows; text: one token per byte.
  v1::DataSpec tokens = Data("tokens");
  tokens.set_train_path(Write("t16.bin", std::string(2 * 13, '\1')));
  counts = ProbeDataSamples(tokens);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->train_samples, 3);  // (13 - 1) / 4
  tokens.set_token_dtype("uint32");
  tokens.set_train_path(Write("t32.bin", std::string(4 * 9, '\1')));
  counts = ProbeDataSamples(tokens);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->train_samples, 2);  // (9 - 1) / 4
  tokens.set_train_path(Write("odd.bin", std::string(7, '\1')));
  EXPECT_THAT(ErrorOf(tokens), HasSubstr("7 bytes is not a multiple of 4"));
  v1::DataSpec text = Data("text");
  text.set_train_path(Write("t.txt", "hello world!"));
  text.set_eval_path(Write("e.txt", "abcdef"));
  counts = ProbeDataSamples(text);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->train_samples, 2);  // (12 - 1) / 4
  EXPECT_EQ(counts->eval_samples, 1);   // (6 - 1) / 4
}

TEST_F(DataProbeTest, NpyRowsAreCountedFromTheHeader) {
  using trainctl::testing::Elements;
  using trainctl::testing::Npy;
  v1::DataSpec d = Data("npy");
  d.set_train_path(Write("x.npy", Npy("<f4", "(5, 2)", Elements<float>(std::vector<float>(10)))));
  d.set_train_labels(Write("y.npy", Npy("<i8", "(5,)", Elements<int64_t>({0, 1, 0, 1, 1}))));
  absl::StatusOr<DataSampleCounts> counts = ProbeDataSamples(d);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->train_samples, 5);
  d.set_train_labels(Write("y3.npy", Npy("<i8", "(3,)", Elements<int64_t>({0, 1, 0}))));
  EXPECT_THAT(ErrorOf(d), HasSubstr("y3.npy: has 3 rows but data.train_path has 5"));
  // No labels: a 1-D token array in seq_len windows.
  d.set_train_labels("");
  d.set_seq_len(4);
  d.set_train_path(Write("t.npy", Npy("<u2", "(13,)", Elements<uint16_t>(std::vector<uint16_t>(13)))));
  counts = ProbeDataSamples(d);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->train_samples, 3);  // (13 - 1) / 4
  d.set_train_path(Write("cut.npy", Npy("<u2", "(13,)", Elements<uint16_t>(std::vector<uint16_t>(12)))));
  EXPECT_THAT(ErrorOf(d), HasSubstr("holds 24 bytes of elements but its header announces 26"));
}

// Each named input (data.train_inputs) needs a row per input row, in as
// many files as train_path names: a dry run says so before any rank starts.
TEST_F(DataProbeTest, NamedNpyInputsAreCheckedAgainstTheInputs) {
  using trainctl::testing::Elements;
  using trainctl::testing::Npy;
  v1::DataSpec d = Data("npy");
  d.set_train_path(Write("ids.npy", Npy("<i8", "(4, 3)", Elements<int64_t>(std::vector<int64_t>(12)))));
  d.set_train_labels(Write("y.npy", Npy("<i8", "(4,)", Elements<int64_t>({0, 1, 0, 1}))));
  d.set_input_name("input_ids");
  v1::NamedPath* mask = d.add_train_inputs();
  mask->set_name("attention_mask");
  mask->set_path(Write("mask.npy", Npy("|u1", "(4, 3)", Elements<uint8_t>(std::vector<uint8_t>(12, 1)))));
  absl::StatusOr<DataSampleCounts> counts = ProbeDataSamples(d);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->train_samples, 4);

  mask->set_path(Write("short.npy", Npy("|u1", "(3, 3)", Elements<uint8_t>(std::vector<uint8_t>(9, 1)))));
  EXPECT_THAT(ErrorOf(d), HasSubstr("data.train_inputs.attention_mask: " + dir_ +
                                    "/short.npy: has 3 rows but data.train_path has 4"));
  mask->set_path(dir_ + "/*.npz");
  EXPECT_THAT(ErrorOf(d), HasSubstr("data.train_inputs.attention_mask: " + dir_ +
                                    "/*.npz: names no regular file"));
}

TEST_F(DataProbeTest, ShardedPathsAreCountedAcrossTheirFiles) {
  std::filesystem::create_directories(dir_ + "/shards");
  Write("shards/a.bin", std::string(2 * 13, '\1'));  // 3 windows of 4
  Write("shards/b.bin", std::string(2 * 9, '\1'));   // 2
  v1::DataSpec tokens = Data("tokens");
  tokens.set_train_path(dir_ + "/shards");
  absl::StatusOr<DataSampleCounts> counts = ProbeDataSamples(tokens);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->train_samples, 5);
  tokens.set_train_path(dir_ + "/shards/*.bin");
  tokens.set_train_limit(4);
  counts = ProbeDataSamples(tokens);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->train_samples, 4);
  tokens.set_train_path(dir_ + "/shards/*.txt");
  EXPECT_THAT(ErrorOf(tokens), HasSubstr("*.txt: names no regular file"));
}

TEST_F(DataProbeTest, WebDatasetSamplesAreCountedFromTheTarHeaders) {
  using trainctl::testing::Tar;
  // The probe reads headers and labels only: the images are not decoded.
  v1::DataSpec d = Data("webdataset");
  d.set_train_path(Write("a.tar", Tar({{"x/1.png", "not decoded"}, {"x/1.cls", "0"},
                                       {"x/2.jpg", "not decoded"}, {"x/2.cls", "1"},
                                       {"x/2.txt", "a caption"}})));
  absl::StatusOr<DataSampleCounts> counts = ProbeDataSamples(d);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->train_samples, 2);
  d.set_train_path(Write("b.tar", Tar({{"x/1.png", "not decoded"}})));
  EXPECT_THAT(ErrorOf(d), HasSubstr("b.tar: sample 0 has an image but no .cls label"));
}

TEST_F(DataProbeTest, AudioManifestRowsAreCountedAsTheRanksReadThem) {
  // The sound files are the ranks' to open: the probe reads the manifest.
  v1::DataSpec d = Data("audio");
  d.set_train_path(Write("train.csv", "label,path\n1,a.wav\n0,\"b, c.wav\"\n\n2,/d.flac\n"));
  d.set_eval_path(Write("eval.csv", "path,label\na.wav,1\nb.wav,0\n"));
  d.set_eval_limit(1);
  absl::StatusOr<DataSampleCounts> counts = ProbeDataSamples(d);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->train_samples, 3);
  EXPECT_EQ(counts->eval_samples, 1);
  d.set_train_path(Write("bad.csv", "path,label\na.wav,1\nb.wav\n"));
  EXPECT_THAT(ErrorOf(d), HasSubstr("data.train_path: " + dir_ +
                                    "/bad.csv: line 3: has 1 fields but the header row has 2"));
}

TEST_F(DataProbeTest, AudioClassesAreCountedOverEveryManifest) {
  v1::DataSpec d = Data("audio");
  ASSERT_EQ(::mkdir((dir_ + "/m").c_str(), 0755), 0);
  Write("m/a.csv", "path,label\nx.wav,yes\ny.wav,no\n");
  Write("m/b.csv", "path,label\nz.wav,stop\nw.wav,yes\n");
  d.set_train_path(dir_ + "/m");
  EXPECT_EQ(ProbeSampleShape(d, {}).num_classes, 3);
  d.set_train_path(Write("ids.csv", "path,label\nx.wav,4\ny.wav,1\n"));
  EXPECT_EQ(ProbeSampleShape(d, {}).num_classes, 5);
}

// C1 holds for the probe too: its errors never quote a file.
TEST_F(DataProbeTest, ErrorsNeverQuoteTheFile) {
  const std::string secret = std::string(kSecret) + "-tail";
  const std::string path = Write("secret", secret);
  for (const char* format : {"idx", "csv", "tokens", "text", "audio"}) {
    v1::DataSpec d = Data(format);
    d.set_seq_len(1000);
    d.set_header(true);
    d.set_train_images(path);
    d.set_train_labels(path);
    d.set_train_path(path);
    const std::string message = ErrorOf(d);
    EXPECT_EQ(FileBytesIn(message, secret, dir_), "") << message;
  }
}

// --- the agent's handler ---

TEST_F(DataProbeTest, TheHandlerAnswersWithCountsOrABoundedError) {
  v1::ProbeDataRequest request;
  request.set_request_id("dry-7");
  *request.mutable_data() = Data("text");
  request.mutable_data()->set_train_path(Write("t.txt", "hello world!"));
  v1::ProbeDataResult result = agent::HandleProbeData(request);
  EXPECT_EQ(result.request_id(), "dry-7");
  EXPECT_EQ(result.error(), "");
  EXPECT_EQ(result.train_samples(), 2);

  request.mutable_data()->set_train_path("/dev/zero");
  result = agent::HandleProbeData(request);
  EXPECT_EQ(result.request_id(), "dry-7");
  EXPECT_EQ(result.error(),
            "data.train_path: /dev/zero is a character device; data files "
            "must be regular files");

  // A long non-ASCII path: cut to the cap on a code-point boundary, so the
  // coordinator can parse the message (a proto3 string must be UTF-8).
  std::string long_path = "/";
  for (int i = 0; i < 1500; ++i) long_path += "\xc3\xa9";  // é
  request.mutable_data()->set_train_path(long_path);
  result = agent::HandleProbeData(request);
  EXPECT_LE(result.error().size(), agent::kMaxProbeErrorBytes);
  EXPECT_THAT(result.error(), HasSubstr("data.train_path: /\xc3\xa9"));
  v1::AgentMessage up;
  *up.mutable_probe_data_result() = result;
  v1::AgentMessage parsed;
  EXPECT_TRUE(parsed.ParseFromString(up.SerializeAsString()));
  EXPECT_EQ(parsed.probe_data_result().error(), result.error());
}



// --- text: CSV text columns and text under a tokenizer ---

TEST_F(DataProbeTest, CsvTextRowsAreRecordsNotLinesAndTheirClassesAreCounted) {
  v1::DataSpec csv = Data("csv");
  csv.set_header(true);
  csv.set_text_column("text");
  csv.set_seq_len(16);
  csv.set_train_path(Write("t.csv", "text,label\n\"two\nlines\",pos\none,neg\n\"a,\nb\nc\",mid\n"));
  absl::StatusOr<DataSampleCounts> counts = ProbeDataSamples(csv);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->train_samples, 3);
  const PlanData shape = ProbeSampleShape(csv, {});
  EXPECT_EQ(shape.num_classes, 3);
  // A malformed record is refused as the ranks refuse it, unquoted.
  csv.set_train_path(Write("bad.csv", "text,label\nok,1\n\"secret,1\n"));
  counts = ProbeDataSamples(csv);
  ASSERT_FALSE(counts.ok());
  EXPECT_EQ(counts.status().message(),
            "data.train_path: " + dir_ + "/bad.csv:3: a quoted field is not closed");
}

TEST_F(DataProbeTest, TextUnderATokenizerIsCountedInItsTokens) {
  setenv("TRAINCTL_TOKENIZER", TRAINCTL_BIN_DIR "/trainctl-tokenizer", 1);
  std::string corpus;
  for (int i = 0; i < 200; ++i) corpus += "the cat sat on the mat\n";
  TokenizerTraining t;
  t.inputs = {Write("corpus.txt", corpus)};
  t.output = dir_ + "/m.model";
  t.vocab_size = 15;
  const absl::StatusOr<TokenizerInfo> trained = TrainTokenizer(t);
  ASSERT_TRUE(trained.ok()) << trained.status();
  absl::StatusOr<std::vector<std::vector<int32_t>>> line =
      EncodeTexts(t.output, "m", {"the cat sat on the mat"});
  ASSERT_TRUE(line.ok());
  const int64_t tokens = 200 * (static_cast<int64_t>((*line)[0].size()) + 1);  // + </s>
  v1::DataSpec text = Data("text");
  text.set_train_path(t.inputs[0]);
  text.set_tokenizer(t.output);
  text.set_seq_len(10);
  absl::StatusOr<DataSampleCounts> counts = ProbeDataSamples(text);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->train_samples, (tokens - 1) / 10);
  EXPECT_EQ(ProbeSampleShape(text, {}).vocab_size, 15);
  // Over the read limit the ranks count it; a model that does not load is
  // named, its bytes not quoted.
  DataProbeLimits small;
  small.max_bytes_read = 100;
  EXPECT_EQ(ProbeDataSamples(text, small).status().code(), absl::StatusCode::kResourceExhausted);
  text.set_tokenizer(Write("secret.model", "secret-bytes"));
  counts = ProbeDataSamples(text);
  ASSERT_FALSE(counts.ok());
  EXPECT_EQ(counts.status().message(),
            "data.tokenizer: " + dir_ + "/secret.model: is not a SentencePiece model");
}

}  // namespace
}  // namespace trainctl
