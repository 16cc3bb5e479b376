// LoadDatasets: idx, csv, the eval_fraction split and limits.

#include <set>
#include <string>
#include <vector>

#include "tests/unit/data_test_util.h"

namespace trainctl::train::data_testing {
namespace {

using ::testing::HasSubstr;

// --- idx ---

void CheckIdx(const Datasets& ds) {
  ASSERT_EQ(ds.train->size(), 3);
  EXPECT_EQ(ds.info.input_shape, (std::vector<int64_t>{1, 2, 2}));
  EXPECT_FALSE(ds.info.integer_inputs);
  Batch b = ds.train->Gather({2, 0});
  EXPECT_EQ(b.inputs.sizes(), (std::vector<int64_t>{2, 1, 2, 2}));
  EXPECT_EQ(b.inputs.dtype(), torch::kFloat32);
  EXPECT_FLOAT_EQ(b.inputs[0][0][1][1].item<float>(), 255.0f / 255.0f);
  EXPECT_FLOAT_EQ(b.inputs[1][0][0][1].item<float>(), 51.0f / 255.0f);
  EXPECT_TRUE(torch::equal(b.targets, I64({4, 1})));
}

TEST_F(DataTest, IdxRawWithEval) {
  const std::vector<uint8_t> px = {0, 51, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255};
  v1::JobSpec spec = Spec("idx");
  auto* d = spec.mutable_data();
  d->set_train_images(WriteIdx("ti", {3, 2, 2}, px, false));
  d->set_train_labels(WriteIdx("tl", {3}, {1, 0, 4}, false));
  d->set_eval_images(WriteIdx("ei", {1, 2, 2}, {1, 2, 3, 4}, false));
  d->set_eval_labels(WriteIdx("el", {1}, {9}, false));
  auto ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  CheckIdx(*ds);
  ASSERT_NE(ds->eval, nullptr);
  EXPECT_EQ(ds->eval->size(), 1);
  EXPECT_EQ(ds->info.num_classes, 10);  // max over train and eval
}

TEST_F(DataTest, IdxGzipWithLimit) {
  std::vector<uint8_t> px = {0, 51, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255};
  px.resize(20, 7);  // a fifth sample the limit drops
  v1::JobSpec spec = Spec("idx");
  auto* d = spec.mutable_data();
  d->set_train_images(WriteIdx("ti.gz", {5, 2, 2}, px, true));
  d->set_train_labels(WriteIdx("tl.gz", {5}, {1, 0, 4, 8, 9}, true));
  d->set_train_limit(3);
  auto ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  CheckIdx(*ds);
  EXPECT_EQ(ds->eval, nullptr);
  EXPECT_EQ(ds->info.num_classes, 5);
}

TEST_F(DataTest, IdxTruncatedIsAnError) {
  v1::JobSpec spec = Spec("idx");
  auto* d = spec.mutable_data();
  d->set_train_images(WriteIdx("ti", {3, 2, 2}, {1, 2, 3}, false));
  d->set_train_labels(WriteIdx("tl", {3}, {1, 0, 4}, false));
  auto ds = LoadDatasets(spec);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(ds.status().message()),
      HasSubstr("data.train_images: " + d->train_images() + ": truncated"));
}

// --- csv ---

TEST_F(DataTest, CsvHeaderLabelByName) {
  v1::JobSpec spec = Spec("csv");
  spec.mutable_data()->set_train_path(
      Write("a.csv", "f1,\"label\",f2\r\n1.5,2,3\r\n\r\n-4,0,5e1\r\n"));
  spec.mutable_data()->set_header(true);
  spec.mutable_data()->set_label_column("label");
  auto ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->train->size(), 2);
  EXPECT_EQ(ds->info.input_shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(ds->info.num_classes, 3);
  Batch b = ds->train->Gather({0, 1});
  EXPECT_TRUE(
      torch::equal(b.inputs, torch::tensor({{1.5f, 3.0f}, {-4.0f, 50.0f}})));
  EXPECT_TRUE(torch::equal(b.targets, I64({2, 0})));
}

TEST_F(DataTest, CsvLabelByIndexAndDefaultLast) {
  v1::JobSpec spec = Spec("csv");
  spec.mutable_data()->set_train_path(Write("a.csv", "1;2;3\n0;5;6\n"));
  spec.mutable_data()->set_delimiter(";");
  spec.mutable_data()->set_label_column("0");
  auto ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  Batch b = ds->train->Gather({0, 1});
  EXPECT_TRUE(
      torch::equal(b.inputs, torch::tensor({{2.0f, 3.0f}, {5.0f, 6.0f}})));
  EXPECT_TRUE(torch::equal(b.targets, I64({1, 0})));

  spec.mutable_data()->set_label_column("");
  ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  b = ds->train->Gather({1});
  EXPECT_TRUE(torch::equal(b.inputs, torch::tensor({{0.0f, 5.0f}})));
  EXPECT_TRUE(torch::equal(b.targets, I64({6})));
  EXPECT_EQ(ds->info.num_classes, 7);

  spec.mutable_data()->set_label_column("price");  // a name without a header
  EXPECT_THAT(std::string(LoadDatasets(spec).status().message()),
              HasSubstr("data.label_column: 'price' is a column name, which "
                        "needs data.header: true"));
}

TEST_F(DataTest, CsvRegressionTargets) {
  v1::JobSpec spec = Spec("csv");
  spec.set_task("regression");
  spec.mutable_data()->set_train_path(Write("r.csv", "x,y\n1,0.25\n2,-3.5\n"));
  spec.mutable_data()->set_header(true);
  auto ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->info.target_width, 1);
  EXPECT_EQ(ds->info.num_classes, 0);
  Batch b = ds->train->Gather({0, 1});
  EXPECT_EQ(b.targets.dtype(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(b.targets, torch::tensor({0.25f, -3.5f})));
}

TEST_F(DataTest, CsvErrorsNameFileLineAndColumn) {
  v1::JobSpec spec = Spec("csv");
  const std::string bad = Write("bad.csv", "1,2,3\n4,zz,1\n");
  spec.mutable_data()->set_train_path(bad);
  // Line and column only: the cell is the file's (security review C1).
  EXPECT_EQ(LoadDatasets(spec).status().message(),
            "data.train_path: line 2, column 1 of " + bad + " is not a number");

  const std::string label = Write("label.csv", "1,2,3\n4,5,-1\n");
  spec.mutable_data()->set_train_path(label);
  EXPECT_THAT(std::string(LoadDatasets(spec).status().message()),
              HasSubstr("line 2, column 2 of " + label +
                        " is not a non-negative integer class id"));

  const std::string ragged = Write("ragged.csv", "1,2,3\n4,5\n");
  spec.mutable_data()->set_train_path(ragged);
  EXPECT_EQ(LoadDatasets(spec).status().message(),
            "data.train_path: " + ragged +
                ":2: has 2 columns, expected 3 (as on line 1)");

  spec.mutable_data()->set_train_path(dir_ + "/missing.csv");
  EXPECT_EQ(LoadDatasets(spec).status().message(),
            "data.train_path: " + dir_ +
                "/missing.csv: cannot open: No such file or directory");

  spec.mutable_data()->set_train_path(Write("empty.csv", "a,b\n"));
  spec.mutable_data()->set_header(true);
  EXPECT_THAT(std::string(LoadDatasets(spec).status().message()),
              HasSubstr("empty.csv: no data rows"));
}

// --- eval_fraction and limits ---

TEST_F(DataTest, EvalFractionSplitIsDeterministicAndDisjoint) {
  std::string csv;
  for (int i = 0; i < 20; ++i)
    csv += std::to_string(i) + "," + std::to_string(i % 3) + "\n";
  v1::JobSpec spec = Spec("csv");
  spec.mutable_data()->set_train_path(Write("s.csv", csv));
  spec.mutable_data()->set_eval_fraction(0.25);
  auto rows = [](const Dataset& d) {
    torch::Tensor x = d.Gather(Iota(d.size())).inputs.flatten();
    return std::vector<float>(x.data_ptr<float>(),
                              x.data_ptr<float>() + x.numel());
  };
  auto a = LoadDatasets(spec);
  auto b = LoadDatasets(spec);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->train->size(), 15);
  ASSERT_EQ(a->eval->size(), 5);
  EXPECT_EQ(rows(*a->train), rows(*b->train));
  EXPECT_EQ(rows(*a->eval), rows(*b->eval));
  std::set<float> all;
  for (float v : rows(*a->train)) all.insert(v);
  for (float v : rows(*a->eval)) all.insert(v);
  EXPECT_EQ(all.size(), 20u);  // disjoint and covering every row
  EXPECT_EQ(a->info.num_classes, 3);

  spec.set_seed(4);
  auto c = LoadDatasets(spec);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(rows(*a->eval), rows(*c->eval));

  spec.mutable_data()->set_train_limit(8);  // before the split
  spec.mutable_data()->set_eval_limit(1);   // after it
  auto l = LoadDatasets(spec);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->train->size(), 6);
  EXPECT_EQ(l->eval->size(), 1);
  for (float v : rows(*l->train)) EXPECT_LT(v, 8);

  spec.mutable_data()->set_train_limit(1);
  EXPECT_THAT(std::string(LoadDatasets(spec).status().message()),
              HasSubstr("data.eval_fraction: 0.25 of 1 training samples"));
}

TEST_F(DataTest, TokenWindowsSplitAndEvalLimit) {
  v1::JobSpec spec = Spec("tokens");
  spec.mutable_data()->set_seq_len(2);
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 21; ++i) ids.push_back(i);
  spec.mutable_data()->set_train_path(Write("t.bin", LittleEndian(ids, 2)));
  spec.mutable_data()->set_eval_path(Write("e.bin", LittleEndian(ids, 2)));
  spec.mutable_data()->set_eval_limit(3);
  auto ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->train->size(), 10);
  EXPECT_EQ(ds->eval->size(), 3);
  EXPECT_EQ(ds->info.vocab_size, 21);  // max over train and eval
  spec.mutable_data()->clear_eval_path();
  spec.mutable_data()->set_eval_fraction(0.5);
  ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->train->size(), 5);
  EXPECT_EQ(ds->eval->size(), 3);
  Batch b = ds->eval->Gather({0});
  EXPECT_EQ(b.targets[0][0].item<int64_t>(),
            b.inputs[0][0].item<int64_t>() + 1);
}

}  // namespace
}  // namespace trainctl::train::data_testing
