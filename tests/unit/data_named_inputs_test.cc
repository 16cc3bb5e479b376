// LoadDatasets: named inputs, as a Hugging Face tokenizer gives them
// (input_ids, attention_mask, ...): a tensors file whose x is a dict, and
// npy arrays named by data.train_inputs.

#include <sys/stat.h>
#include <torch/serialize.h>

#include <string>
#include <vector>

#include "tests/unit/data_test_util.h"
#include "tests/unit/npy_test_util.h"

namespace trainctl::train::data_testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using Inputs = std::vector<std::pair<std::string, torch::Tensor>>;

std::string Save(const Inputs& inputs, const torch::Tensor& y) {
  c10::Dict<std::string, torch::Tensor> x;
  for (const auto& [name, values] : inputs) x.insert(name, values);
  c10::impl::GenericDict file(c10::StringType::get(), c10::AnyType::get());
  file.insert("x", x);
  file.insert("y", y);
  const std::vector<char> bytes = torch::pickle_save(file);
  return std::string(bytes.begin(), bytes.end());
}

// Five samples of 4 tokens, right-padded with 0; ids and type ids differ
// per row so a gathered row shows where it came from.
struct Tokenized {
  torch::Tensor ids = I64({11, 12, 13, 0, 21, 22, 0, 0, 31, 32, 33, 34, 41, 0, 0, 0,
                           51, 52, 53, 0})
                          .reshape({5, 4});
  torch::Tensor mask = ids.ne(0).to(torch::kInt64);
  torch::Tensor types = torch::arange(20, torch::kInt64).reshape({5, 4});
  torch::Tensor labels = I64({0, 1, 1, 0, 2});
};

class NamedInputsTest : public DataTest {
 protected:
  v1::JobSpec SpecFor(const std::string& path) {
    v1::JobSpec spec = Spec("tensors");
    spec.mutable_data()->set_train_path(path);
    return spec;
  }
  // The error loading `inputs` gives, as text.
  std::string Refusal(const Inputs& inputs, const torch::Tensor& y) {
    const std::string path = Write("bad.pt", Save(inputs, y));
    absl::StatusOr<Datasets> ds = LoadDatasets(SpecFor(path));
    EXPECT_FALSE(ds.ok());
    return ds.ok() ? "" : std::string(ds.status().message());
  }
  Tokenized t_;
};

TEST_F(NamedInputsTest, InputIdsComeFirstAndEveryInputIsGatheredByRow) {
  // The mask first in the file: input_ids is still Batch::inputs.
  const std::string path = Write(
      "tok.pt", Save({{"attention_mask", t_.mask}, {"input_ids", t_.ids},
                      {"token_type_ids", t_.types}},
                     t_.labels));
  v1::JobSpec spec = SpecFor(path);
  spec.mutable_data()->set_train_limit(4);
  absl::StatusOr<Datasets> ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->info.input_names,
            (std::vector<std::string>{"input_ids", "attention_mask", "token_type_ids"}));
  EXPECT_TRUE(ds->info.integer_inputs);
  EXPECT_EQ(ds->info.input_shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(ds->info.vocab_size, 42);  // the first 4 rows' largest id + 1
  EXPECT_EQ(ds->train->size(), 4);

  Batch b = ds->train->Gather({2, 0});
  EXPECT_TRUE(torch::equal(b.inputs, I64({31, 32, 33, 34, 11, 12, 13, 0}).reshape({2, 4})));
  EXPECT_TRUE(torch::equal(b.targets, I64({1, 0})));
  ASSERT_EQ(b.more_inputs.size(), 2u);
  EXPECT_EQ(b.more_inputs[0].first, "attention_mask");
  EXPECT_TRUE(torch::equal(b.more_inputs[0].second,
                           I64({1, 1, 1, 1, 1, 1, 1, 0}).reshape({2, 4})));
  EXPECT_EQ(b.more_inputs[1].first, "token_type_ids");
  EXPECT_TRUE(torch::equal(b.more_inputs[1].second,
                           I64({8, 9, 10, 11, 0, 1, 2, 3}).reshape({2, 4})));
}

TEST_F(NamedInputsTest, ShardsAndEvalSplitKeepTheNamedInputs) {
  ASSERT_EQ(::mkdir((dir_ + "/shards").c_str(), 0755), 0);
  using torch::indexing::Slice;
  Write("shards/part-0.pt",
        Save({{"input_ids", t_.ids.index({Slice(0, 2)})},
              {"attention_mask", t_.mask.index({Slice(0, 2)})}},
             t_.labels.index({Slice(0, 2)})));
  Write("shards/part-1.pt",
        Save({{"input_ids", t_.ids.index({Slice(2, 5)})},
              {"attention_mask", t_.mask.index({Slice(2, 5)})}},
             t_.labels.index({Slice(2, 5)})));
  absl::StatusOr<Datasets> ds = LoadDatasets(SpecFor(dir_ + "/shards"));
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->train->size(), 5);
  Batch b = ds->train->Gather({3, 1, 4});  // shard 1, shard 0, shard 1
  EXPECT_TRUE(torch::equal(b.inputs.select(1, 0), I64({41, 21, 51})));
  ASSERT_EQ(b.more_inputs.size(), 1u);
  EXPECT_TRUE(torch::equal(b.more_inputs[0].second, t_.mask.index_select(0, I64({3, 1, 4}))));

  v1::JobSpec split = SpecFor(dir_ + "/shards");
  split.mutable_data()->set_eval_fraction(0.4);
  ds = LoadDatasets(split);
  ASSERT_TRUE(ds.ok()) << ds.status();
  Batch e = ds->eval->Gather({0, 1});
  ASSERT_EQ(e.more_inputs.size(), 1u);
  // Each row's mask is the mask of its ids (0 exactly where the id is 0).
  EXPECT_TRUE(torch::equal(e.more_inputs[0].second, e.inputs.ne(0).to(torch::kInt64)));
}

TEST_F(NamedInputsTest, TrainAndEvalMustNameTheSameInputs) {
  const std::string train =
      Write("train.pt", Save({{"input_ids", t_.ids}, {"attention_mask", t_.mask}}, t_.labels));
  const std::string eval = Write("eval.pt", Save({{"input_ids", t_.ids}}, t_.labels));
  v1::JobSpec spec = SpecFor(train);
  spec.mutable_data()->set_eval_path(eval);
  absl::StatusOr<Datasets> ds = LoadDatasets(spec);
  ASSERT_FALSE(ds.ok());
  EXPECT_THAT(std::string(ds.status().message()),
              HasSubstr("data.eval_path: the eval set's inputs are named "
                        "differently from the training set's (0 against 2"));
}

TEST_F(NamedInputsTest, BadInputsAreRefusedWithoutQuotingTheFile) {
  EXPECT_THAT(Refusal({{"input_ids", t_.ids}, {"attention_mask", t_.mask * 2}}, t_.labels),
              HasSubstr(": x['attention_mask'] must hold integers 0 (padding) and 1"));
  torch::Tensor empty_row = t_.mask.clone();
  empty_row[3].zero_();
  EXPECT_THAT(Refusal({{"input_ids", t_.ids}, {"attention_mask", empty_row}}, t_.labels),
              HasSubstr(": x['attention_mask']: sample 3 has no token (all padding)"));
  EXPECT_THAT(Refusal({{"input_ids", t_.ids}, {"token_type_ids", t_.types.narrow(0, 0, 4)}},
                      t_.labels),
              HasSubstr(": x's input 2 of 2 has shape [4, 4]; every input needs "
                        "the same N first (5)"));
  // A key that is no identifier could be anything the file holds.
  const std::string secret = "hunter2 is the password";
  const std::string refused = Refusal({{"input_ids", t_.ids}, {secret, t_.mask}}, t_.labels);
  EXPECT_THAT(refused, HasSubstr(": x's input 2 of 2 is not named by a Python identifier"));
  EXPECT_THAT(refused, Not(HasSubstr("hunter2")));
  EXPECT_THAT(Refusal({{"input_ids", t_.ids}, {"attention_mask", t_.mask}},
                      t_.labels.narrow(0, 0, 3)),
              HasSubstr(": y has shape [3] but x['input_ids'] has [5, 4]"));
}

TEST_F(NamedInputsTest, ImageTransformsRefuseNamedInputs) {
  const std::string path = Write(
      "img.pt", Save({{"pixel_values", torch::rand({5, 1, 4, 4})}, {"input_ids", t_.ids}},
                     t_.labels));
  v1::JobSpec spec = SpecFor(path);
  spec.mutable_data()->mutable_transforms()->set_horizontal_flip(true);
  absl::StatusOr<Datasets> ds = LoadDatasets(spec);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(),
            "data.transforms: apply to single image inputs; the data has 2 named inputs");
}

// --- npy: data.train_inputs ---

using trainctl::testing::Elements;
using trainctl::testing::Npy;

class NpyNamedInputsTest : public NamedInputsTest {
 protected:
  // Writes `t` (int64 [5, 4] or [5]) as NAME.npy of dtype <i8.
  std::string WriteNpy(const std::string& name, const torch::Tensor& t) {
    std::vector<int64_t> values(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
    const std::string shape =
        t.dim() == 1 ? "(" + std::to_string(t.size(0)) + ",)"
                     : "(" + std::to_string(t.size(0)) + ", " + std::to_string(t.size(1)) + ")";
    return Write(name, Npy("<i8", shape, Elements(values)));
  }
  v1::JobSpec NpySpec(const Inputs& more) {
    v1::JobSpec spec = Spec("npy");
    spec.mutable_data()->set_train_path(WriteNpy("ids.npy", t_.ids));
    spec.mutable_data()->set_train_labels(WriteNpy("y.npy", t_.labels));
    spec.mutable_data()->set_input_name("input_ids");
    for (const auto& [name, values] : more) {
      v1::NamedPath* input = spec.mutable_data()->add_train_inputs();
      input->set_name(name);
      input->set_path(WriteNpy(name + ".npy", values));
    }
    return spec;
  }
};

TEST_F(NpyNamedInputsTest, EachNamedArrayIsReadByRowBesideTheInputs) {
  absl::StatusOr<Datasets> ds =
      LoadDatasets(NpySpec({{"token_type_ids", t_.types}, {"attention_mask", t_.mask}}));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->info.input_names,
            (std::vector<std::string>{"input_ids", "token_type_ids", "attention_mask"}));
  EXPECT_TRUE(ds->info.integer_inputs);
  Batch b = ds->train->Gather({4, 1});
  EXPECT_TRUE(torch::equal(b.inputs, t_.ids.index_select(0, I64({4, 1}))));
  ASSERT_EQ(b.more_inputs.size(), 2u);
  EXPECT_EQ(b.more_inputs[0].first, "token_type_ids");
  EXPECT_TRUE(torch::equal(b.more_inputs[0].second, t_.types.index_select(0, I64({4, 1}))));
  EXPECT_EQ(b.more_inputs[1].first, "attention_mask");
  EXPECT_TRUE(torch::equal(b.more_inputs[1].second, t_.mask.index_select(0, I64({4, 1}))));
}

TEST_F(NpyNamedInputsTest, ShardsOfEachInputArePairedInOrder) {
  ASSERT_EQ(::mkdir((dir_ + "/ids").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((dir_ + "/y").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((dir_ + "/mask").c_str(), 0755), 0);
  using torch::indexing::Slice;
  for (int part = 0; part < 2; ++part) {
    const auto rows = part == 0 ? Slice(0, 2) : Slice(2, 5);
    const std::string n = std::to_string(part);
    WriteNpy("ids/" + n + ".npy", t_.ids.index({rows}).contiguous());
    WriteNpy("y/" + n + ".npy", t_.labels.index({rows}).contiguous());
    WriteNpy("mask/" + n + ".npy", t_.mask.index({rows}).contiguous());
  }
  v1::JobSpec spec = Spec("npy");
  spec.mutable_data()->set_train_path(dir_ + "/ids");
  spec.mutable_data()->set_train_labels(dir_ + "/y");
  spec.mutable_data()->set_input_name("input_ids");
  v1::NamedPath* mask = spec.mutable_data()->add_train_inputs();
  mask->set_name("attention_mask");
  mask->set_path(dir_ + "/mask");
  absl::StatusOr<Datasets> ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  Batch b = ds->train->Gather({3, 0, 4});
  ASSERT_EQ(b.more_inputs.size(), 1u);
  EXPECT_TRUE(torch::equal(b.more_inputs[0].second, t_.mask.index_select(0, I64({3, 0, 4}))));
  // The ranks compare every shard of every input (shard_manifest.h).
  EXPECT_THAT(ds->manifest, HasSubstr("mask/1.npy"));

  WriteNpy("mask/2.npy", t_.mask);
  EXPECT_THAT(std::string(LoadDatasets(spec).status().message()),
              HasSubstr("data.train_inputs.attention_mask: " + dir_ +
                        "/mask: names 3 files but data.train_path names 2"));
}

TEST_F(NpyNamedInputsTest, RowsAndMasksAreChecked) {
  v1::JobSpec short_mask = NpySpec({{"attention_mask", t_.mask.narrow(0, 0, 4).contiguous()}});
  EXPECT_THAT(std::string(LoadDatasets(short_mask).status().message()),
              HasSubstr("data.train_inputs.attention_mask: " + dir_ +
                        "/attention_mask.npy: has 4 rows but data.train_path has 5"));

  torch::Tensor bad = t_.mask.clone();
  bad[2].zero_();
  absl::StatusOr<Datasets> ds = LoadDatasets(NpySpec({{"attention_mask", bad}}));
  ASSERT_TRUE(ds.ok()) << ds.status();  // rows are read per batch
  ds->train->Gather({0, 1});
  try {
    ds->train->Gather({2});
    ADD_FAILURE() << "an all-padding row was read";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("attention_mask.npy: row 2 has no token (all padding)"));
  }
}

}  // namespace
}  // namespace trainctl::train::data_testing
