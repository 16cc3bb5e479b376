// LoadDatasets: token windows (tokens, text) and torch.save tensors.

#include <torch/serialize.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/unit/data_test_util.h"
#include "worker/train/data/token_file.h"

namespace trainctl::train::data_testing {
namespace {

using ::testing::HasSubstr;

// --- tokens and text ---

class TokenTest : public DataTest,
                  public ::testing::WithParamInterface<const char*> {};

TEST_P(TokenTest, Windows) {
  const std::string dtype = GetParam();
  const bool wide = dtype == "uint32";
  const uint32_t base = wide ? 70000 : 300;
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 14; ++i) ids.push_back(base + i * 7 % 11);
  v1::JobSpec spec = Spec("tokens");
  spec.mutable_data()->set_token_dtype(dtype);
  spec.mutable_data()->set_seq_len(4);
  spec.mutable_data()->set_train_path(
      Write("t.bin", LittleEndian(ids, wide ? 4 : 2)));
  auto ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->train->size(), 3);  // (14 - 1) / 4
  EXPECT_TRUE(ds->info.integer_inputs);
  EXPECT_EQ(ds->info.input_shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(ds->info.vocab_size, base + 10 + 1);
  auto window = [&](int start) {
    return I64({ids[start], ids[start + 1], ids[start + 2], ids[start + 3]});
  };
  Batch b = ds->train->Gather({0, 2});
  EXPECT_EQ(b.inputs.dtype(), torch::kInt64);
  EXPECT_TRUE(torch::equal(b.inputs[0], window(0)));
  EXPECT_TRUE(torch::equal(b.targets[0], window(1)));
  EXPECT_TRUE(torch::equal(b.inputs[1], window(8)));
  EXPECT_TRUE(torch::equal(b.targets[1], window(9)));

  spec.mutable_data()->set_train_limit(2);
  ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->train->size(), 2);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, TokenTest,
                         ::testing::Values("uint16", "uint32"));

TEST_F(DataTest, TokenFileErrors) {
  v1::JobSpec spec = Spec("tokens");
  const std::string odd = Write("odd.bin", std::string(7, '\1'));
  spec.mutable_data()->set_train_path(odd);
  EXPECT_EQ(LoadDatasets(spec).status().message(),
            "data.train_path: " + odd +
                ": 7 bytes is not a multiple of 2 (token_dtype uint16)");
  const std::string few = Write("few.bin", std::string(20, '\1'));
  spec.mutable_data()->set_train_path(few);
  EXPECT_EQ(LoadDatasets(spec).status().message(),
            "data.train_path: " + few +
                ": 10 tokens is too few for one window of seq_len 128 + 1");
}

TEST_F(DataTest, TokenFileChecksADeclaredVocabularyAsItReads) {
  // With model.vocab_size declared, a large file is not scanned at start;
  // an id past the vocabulary then fails the batch that reads it, naming
  // the token's position, never its value.
  std::vector<uint32_t> ids(41, 3);
  ids[25] = 1234;
  TokenFileDataset::Options options;
  options.path = Write("ids.bin", LittleEndian(ids, 2));
  options.field = "data.train_path";
  options.seq_len = 8;
  auto data = TokenFileDataset::Open(options);
  ASSERT_TRUE(data.ok()) << data.status();
  (*data)->CheckIdsBelow(100);
  ASSERT_EQ((*data)->size(), 5);
  EXPECT_TRUE(torch::equal((*data)->Gather({0, 1, 4}).inputs,
                           torch::full({3, 8}, 3, torch::kInt64)));
  try {
    (*data)->Gather({1, 3});  // window 3 holds tokens 24..32
    ADD_FAILURE() << "an id over the vocabulary was read";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "data.train_path: " + options.path +
                  ": token 25 (byte offset 50) has an id of at least "
                  "model.vocab_size 100");
  }
}

TEST_F(DataTest, TokenFileThatShrinksFailsTheBatchNamingTheFile) {
  const std::string path = Write("t.bin", LittleEndian(std::vector<uint32_t>(65, 1), 2));
  TokenFileDataset::Options options;
  options.path = path;
  options.field = "data.train_path";
  options.seq_len = 16;
  auto data = TokenFileDataset::Open(options);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ((*data)->size(), 4);
  ASSERT_EQ(truncate(path.c_str(), 40), 0);  // 20 tokens left
  EXPECT_NO_THROW((*data)->Gather({0}));
  EXPECT_THROW((*data)->Gather({2}), std::runtime_error);
  EXPECT_THROW((*data)->Gather({4}), std::out_of_range);
}

TEST_F(DataTest, TokenFilesAreNotLoadedIntoMemory) {
  // 8 MiB of tokens: the loaded set holds the descriptor, not the bytes, so
  // replacing the file's contents in place shows in the next batch.
  std::vector<uint32_t> ids(4 << 20, 7);
  const std::string path = Write("big.bin", LittleEndian(ids, 2));
  v1::JobSpec spec = Spec("tokens");
  spec.mutable_data()->set_seq_len(1024);
  spec.mutable_data()->set_train_path(path);
  auto ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->info.vocab_size, 8);
  ASSERT_EQ(ds->train->size(), 4095);
  {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(2 * 1024 * 9);
    f.write("\x05\0", 2);
  }
  EXPECT_EQ(ds->train->Gather({9}).inputs[0][0].item<int64_t>(), 5);
}

TEST_F(DataTest, TextIsByteWindows) {
  v1::JobSpec spec = Spec("text");
  spec.mutable_data()->set_seq_len(5);
  spec.mutable_data()->set_train_path(Write("t.txt", "hello world!\xc3\xa9"));
  spec.mutable_data()->set_eval_path(Write("e.txt", "abcdef"));
  auto ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->info.vocab_size, 256);
  ASSERT_EQ(ds->train->size(), 2);  // (14 - 1) / 5
  ASSERT_EQ(ds->eval->size(), 1);
  Batch b = ds->train->Gather({0, 1});
  EXPECT_TRUE(torch::equal(b.inputs[0], I64({'h', 'e', 'l', 'l', 'o'})));
  EXPECT_TRUE(torch::equal(b.targets[0], I64({'e', 'l', 'l', 'o', ' '})));
  EXPECT_TRUE(torch::equal(b.inputs[1], I64({' ', 'w', 'o', 'r', 'l'})));
  EXPECT_TRUE(torch::equal(b.targets[1], I64({'w', 'o', 'r', 'l', 'd'})));
  b = ds->eval->Gather({0});
  EXPECT_TRUE(torch::equal(b.targets[0], I64({'b', 'c', 'd', 'e', 'f'})));
}

// --- tensors ---

std::string SaveDict(const c10::Dict<std::string, torch::Tensor>& dict) {
  const std::vector<char> bytes = torch::pickle_save(dict);
  return std::string(bytes.begin(), bytes.end());
}

TEST_F(DataTest, TensorsFromCppAndMissingKey) {
  c10::Dict<std::string, torch::Tensor> dict;
  dict.insert("x", torch::arange(12, torch::kFloat64).reshape({4, 3}));
  dict.insert("y", I64({0, 2, 1, 2}));
  v1::JobSpec spec = Spec("tensors");
  spec.mutable_data()->set_train_path(Write("d.pt", SaveDict(dict)));
  spec.mutable_data()->set_train_limit(3);
  auto ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->train->size(), 3);
  EXPECT_EQ(ds->info.input_shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(ds->info.num_classes, 3);
  Batch b = ds->train->Gather({1});
  EXPECT_EQ(b.inputs.dtype(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(b.inputs, torch::tensor({{3.0f, 4.0f, 5.0f}})));

  c10::Dict<std::string, torch::Tensor> no_y;
  no_y.insert("x", torch::zeros({2, 2}));
  const std::string path = Write("noy.pt", SaveDict(no_y));
  spec.mutable_data()->set_train_path(path);
  EXPECT_EQ(LoadDatasets(spec).status().message(),
            "data.train_path: " + path +
                ": missing key 'y' (expected a dict {\"x\": X, \"y\": Y})");

  spec.mutable_data()->set_train_path(Write("junk.pt", "not a pickle"));
  EXPECT_THAT(std::string(LoadDatasets(spec).status().message()),
              HasSubstr("junk.pt: not readable as a torch.save file"));
}

TEST_F(DataTest, TensorsWrittenByPython) {
  const std::string script = Write("w.py", R"(import sys, torch
torch.save({"x": torch.arange(12, dtype=torch.float64).reshape(4, 3),
            "y": torch.tensor([0.5, 1.5, 2.5, 3.5])}, sys.argv[1])
torch.save({"x": torch.tensor([[1, 2, 3], [4, 5, 6]]),
            "y": torch.tensor([[2, 3, 4], [5, 6, 9]])}, sys.argv[2])
)");
  if (!RunPython(script, dir_ + "/r.pt " + dir_ + "/lm.pt")) {
    GTEST_SKIP() << "no python3 that can import torch (install python3-torch)";
  }

  v1::JobSpec spec = Spec("tensors");
  spec.set_task("regression");
  spec.mutable_data()->set_train_path(dir_ + "/r.pt");
  auto ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->train->size(), 4);
  Batch b = ds->train->Gather({3});
  EXPECT_TRUE(torch::equal(b.inputs, torch::tensor({{9.0f, 10.0f, 11.0f}})));
  EXPECT_TRUE(torch::equal(b.targets, torch::tensor({3.5f})));
  EXPECT_EQ(ds->info.target_width, 1);

  spec.set_task("language_model");
  spec.mutable_data()->set_train_path(dir_ + "/lm.pt");
  ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_TRUE(ds->info.integer_inputs);
  EXPECT_EQ(ds->info.vocab_size, 10);
  b = ds->train->Gather({1, 0});
  EXPECT_TRUE(torch::equal(b.inputs[0], I64({4, 5, 6})));
  EXPECT_TRUE(torch::equal(b.targets[1], I64({2, 3, 4})));
}

}  // namespace
}  // namespace trainctl::train::data_testing
