// LoadDatasets: format npy, arrays written by NumPy's np.save.

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tests/unit/data_test_util.h"
#include "tests/unit/npy_test_util.h"

namespace trainctl::train::data_testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using trainctl::testing::Elements;
using trainctl::testing::Npy;
using trainctl::testing::NpyWithHeader;

class NpyTest : public DataTest {
 protected:
  v1::JobSpec NpySpec(const std::string& inputs, const std::string& labels,
                      const std::string& task = "classification") {
    v1::JobSpec spec = Spec("npy");
    spec.set_task(task);
    spec.mutable_data()->set_train_path(inputs);
    spec.mutable_data()->set_train_labels(labels);
    return spec;
  }
  std::string Error(const v1::JobSpec& spec) {
    return std::string(LoadDatasets(spec).status().message());
  }
};

TEST_F(NpyTest, FeaturesAndClassIds) {
  std::vector<float> x(4 * 2 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f * static_cast<float>(i);
  const v1::JobSpec spec = NpySpec(
      Write("x.npy", Npy("<f4", "(4, 2, 3)", Elements(x))),
      Write("y.npy", Npy("|u1", "(4,)", Elements<uint8_t>({2, 0, 1, 2}))));
  auto ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->train->size(), 4);
  EXPECT_EQ(ds->info.input_shape, (std::vector<int64_t>{2, 3}));
  EXPECT_FALSE(ds->info.integer_inputs);
  EXPECT_EQ(ds->info.num_classes, 3);
  Batch b = ds->train->Gather({3, 1});
  ASSERT_EQ(b.inputs.sizes(), (std::vector<int64_t>{2, 2, 3}));
  EXPECT_EQ(b.inputs.dtype(), torch::kFloat32);
  EXPECT_FLOAT_EQ(b.inputs[0][0][0].item<float>(), 9.0f);   // x[18]
  EXPECT_FLOAT_EQ(b.inputs[1][1][2].item<float>(), 5.5f);   // x[11]
  EXPECT_TRUE(torch::equal(b.targets, I64({2, 0})));
}

TEST_F(NpyTest, TokenStreamForALanguageModel) {
  std::vector<uint16_t> ids;
  for (int i = 0; i < 21; ++i) ids.push_back(static_cast<uint16_t>(1000 + i));
  v1::JobSpec spec = NpySpec(Write("t.npy", Npy("<u2", "(21,)", Elements(ids))),
                             "", "language_model");
  spec.mutable_data()->set_seq_len(5);
  auto ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->train->size(), 4);
  EXPECT_EQ(ds->info.vocab_size, 1021);
  Batch b = ds->train->Gather({2});
  EXPECT_TRUE(torch::equal(b.inputs[0], I64({1010, 1011, 1012, 1013, 1014})));
  EXPECT_TRUE(torch::equal(b.targets[0], I64({1011, 1012, 1013, 1014, 1015})));
}

TEST_F(NpyTest, RegressionTargetsKeepTheirWidth) {
  const v1::JobSpec spec = NpySpec(
      Write("x.npy", Npy("<f8", "(3,)", Elements<double>({1.5, 2.5, 3.5}))),
      Write("y.npy", Npy("<f8", "(3, 2)",
                         Elements<double>({0.25, 1, 2, 3, 4, 5.75}))),
      "regression");
  auto ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->info.input_shape, (std::vector<int64_t>{1}));
  EXPECT_EQ(ds->info.target_width, 2);
  Batch b = ds->train->Gather({2, 0});
  EXPECT_TRUE(torch::equal(b.inputs, torch::tensor({{3.5f}, {1.5f}})));
  EXPECT_TRUE(torch::equal(b.targets, torch::tensor({{4.0f, 5.75f}, {0.25f, 1.0f}})));
}

TEST_F(NpyTest, RefusalsNameTheFieldAndNeverQuoteTheFile) {
  const std::string labels = Write("y.npy", Npy("<i8", "(2,)", Elements<int64_t>({0, 1})));
  const std::string two = Elements<float>({1, 2});
  struct Case {
    std::string file, says;
  } cases[] = {
      {"secret-text, not an array", "not a .npy file"},
      {Npy("<f4", "(2,)", two, /*fortran=*/true), "Fortran-order arrays are not supported"},
      {Npy(">f4", "(2,)", two), "its dtype is not supported"},
      {Npy("<c8", "(1,)", Elements<float>({1, 2})), "its dtype is not supported"},
      {Npy("<f4", "(3,)", two), "holds 8 bytes of elements but its header announces 12"},
      {Npy("<f4", "(2, 9223372036854775807)", two), "its shape is too large"},
      {Npy("<f4", "()", Elements<float>({1})), "holds a single value, not rows"},
      {Npy("<f4", "(4,)", Elements<float>({1, 2, 3, 4})), "data.train_labels: " + labels + ": has 2 rows but data.train_path has 4"},
  };
  for (const Case& c : cases) {
    const std::string path = Write("x.npy", c.file);
    const std::string message = Error(NpySpec(path, labels));
    EXPECT_THAT(message, HasSubstr(c.says)) << c.says;
    if (c.says.rfind("data.", 0) != 0) {
      EXPECT_THAT(message, HasSubstr("data.train_path: " + path + ": "));
    }
    EXPECT_THAT(message, Not(HasSubstr("secret"))) << message;
  }
  // A structured dtype's header, with its field names, is not echoed.
  const std::string structured = Write(
      "s.npy", NpyWithHeader("{'descr': [('secret', '<f4')], "
                             "'fortran_order': False, 'shape': (1,), }",
                             Elements<float>({1})));
  EXPECT_THAT(Error(NpySpec(structured, labels)),
              AllOf(HasSubstr("structured arrays are not supported"),
                    Not(HasSubstr("secret"))));
}

TEST_F(NpyTest, NegativeClassIdNamesItsRowNotItsValue) {
  const std::string labels = Write("y.npy", Npy("<i4", "(3,)", Elements<int32_t>({1, -77, 0})));
  const std::string x = Write("x.npy", Npy("<f4", "(3,)", Elements<float>({1, 2, 3})));
  const std::string message = Error(NpySpec(x, labels));
  EXPECT_EQ(message, "data.train_labels: " + labels +
                         ": row 1 has a class id below 0 or over 2^31-1");
}

TEST_F(NpyTest, ArraysWrittenByNumpyReadBackExactly) {
  const std::string script = Write("w.py", R"(import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(5)
np.save(d + "/x.npy", rng.standard_normal((50, 7)).astype(np.float32))
np.save(d + "/x64.npy", rng.standard_normal((50, 7)))
np.save(d + "/y.npy", rng.integers(0, 10, 50))
np.save(d + "/tok.npy", rng.integers(0, 60000, 1001).astype(np.uint16))
big = np.zeros((3, 2), np.float32)
np.save(d + "/v2.npy", big)
# The same values as text, to compare with.
np.savetxt(d + "/x.txt", np.load(d + "/x.npy").reshape(-1), fmt="%.9g")
np.savetxt(d + "/x64.txt", np.load(d + "/x64.npy").astype(np.float32).reshape(-1), fmt="%.9g")
np.savetxt(d + "/y.txt", np.load(d + "/y.npy"), fmt="%d")
np.savetxt(d + "/tok.txt", np.load(d + "/tok.npy"), fmt="%d")
)");
  if (!RunPython(script, dir_)) {
    GTEST_SKIP() << "no python3 with NumPy (install python3-numpy)";
  }
  auto read_text = [&](const std::string& name) {
    std::ifstream in(dir_ + "/" + name);
    std::vector<double> values;
    double v;
    while (in >> v) values.push_back(v);
    return values;
  };
  for (const char* inputs : {"x", "x64"}) {
    auto ds = LoadDatasets(NpySpec(dir_ + "/" + inputs + ".npy", dir_ + "/y.npy"));
    ASSERT_TRUE(ds.ok()) << ds.status();
    ASSERT_EQ(ds->train->size(), 50);
    Batch b = ds->train->Gather(Iota(50));
    const std::vector<double> x = read_text(std::string(inputs) + ".txt");
    const std::vector<double> y = read_text("y.txt");
    ASSERT_EQ(x.size(), 350u);
    const torch::Tensor flat = b.inputs.reshape({-1});
    for (int64_t i = 0; i < 350; ++i) {
      ASSERT_EQ(flat[i].item<float>(), static_cast<float>(x[i])) << inputs << " " << i;
    }
    for (int64_t i = 0; i < 50; ++i) {
      ASSERT_EQ(b.targets[i].item<int64_t>(), static_cast<int64_t>(y[i]));
    }
  }
  v1::JobSpec lm = NpySpec(dir_ + "/tok.npy", "", "language_model");
  lm.mutable_data()->set_seq_len(100);
  auto ds = LoadDatasets(lm);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->train->size(), 10);
  const std::vector<double> tokens = read_text("tok.txt");
  Batch b = ds->train->Gather({9});
  for (int64_t k = 0; k < 100; ++k) {
    ASSERT_EQ(b.targets[0][k].item<int64_t>(), static_cast<int64_t>(tokens[900 + k + 1]));
  }
}

}  // namespace
}  // namespace trainctl::train::data_testing
