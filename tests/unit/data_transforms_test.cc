// data.transforms: random crop after zero padding, horizontal flip and
// normalisation, checked against a torch reference, and their draws.

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/data_test_util.h"
#include "worker/train/batch_prefetcher.h"
#include "worker/train/data/image_transforms.h"
#include "worker/train/data/in_memory.h"

namespace trainctl::train::data_testing {
namespace {

using ::testing::HasSubstr;
namespace F = torch::nn::functional;

DataInfo Images(int64_t c, int64_t h, int64_t w) {
  DataInfo info;
  info.input_shape = {c, h, w};
  return info;
}

std::shared_ptr<const ImageTransforms> Make(const v1::ImageTransformsSpec& spec,
                                            const DataInfo& info, uint64_t seed = 5) {
  auto t = ImageTransforms::Create(spec, info, seed);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : nullptr;
}

v1::ImageTransformsSpec CropFlip(int padding, std::vector<int> size = {}) {
  v1::ImageTransformsSpec spec;
  spec.mutable_random_crop()->set_padding(padding);
  for (int s : size) spec.mutable_random_crop()->add_size(s);
  spec.set_horizontal_flip(true);
  return spec;
}

// What torchvision computes for one sample: pad with zeros, crop at the
// draw, mirror, normalise.
torch::Tensor Reference(const torch::Tensor& image, const ImageTransforms::Draw& d,
                        int64_t pad, int64_t h, int64_t w) {
  torch::Tensor x = F::pad(image, F::PadFuncOptions({pad, pad, pad, pad}));
  x = x.narrow(1, d.top, h).narrow(2, d.left, w);
  return d.flip ? x.flip({2}) : x;
}

TEST(ImageTransformsTest, NoneAskedForIsNoTransform) {
  auto t = ImageTransforms::Create(v1::ImageTransformsSpec(), Images(1, 4, 4), 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, nullptr);
}

TEST(ImageTransformsTest, NormalisesEachChannelByItsMeanAndStd) {
  v1::ImageTransformsSpec spec;
  for (double m : {0.5, 0.25, 0.0}) spec.mutable_normalize()->add_mean(m);
  for (double s : {0.5, 0.25, 2.0}) spec.mutable_normalize()->add_std(s);
  auto t = Make(spec, Images(3, 2, 2));
  const torch::Tensor x = torch::rand({4, 3, 2, 2});
  const torch::Tensor mean = torch::tensor({0.5f, 0.25f, 0.0f}).view({1, 3, 1, 1});
  const torch::Tensor std = torch::tensor({0.5f, 0.25f, 2.0f}).view({1, 3, 1, 1});
  const torch::Tensor want = (x - mean) / std;
  EXPECT_TRUE(torch::allclose(t->Eval(x), want, 1e-6, 1e-6));
  // No crop or flip asked for: training normalises the same way.
  EXPECT_TRUE(torch::allclose(t->Train(x, {0, 1, 2, 3}, 0), want, 1e-6, 1e-6));
  // One mean and std serve every channel.
  v1::ImageTransformsSpec one;
  one.mutable_normalize()->add_mean(0.5);
  one.mutable_normalize()->add_std(0.5);
  EXPECT_TRUE(torch::allclose(Make(one, Images(3, 2, 2))->Eval(x), (x - 0.5) / 0.5,
                              1e-6, 1e-6));
}

TEST(ImageTransformsTest, TrainingCropsThePaddedImageAtItsDrawAndMirrors) {
  auto t = Make(CropFlip(2, {5, 4}), Images(2, 6, 7));
  EXPECT_EQ(t->output_shape(), (std::vector<int64_t>{2, 5, 4}));
  const torch::Tensor x = torch::rand({16, 2, 6, 7}) + 0.1;  // no true zeros
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 16; ++i) ids.push_back(1000 + 7 * i);
  const torch::Tensor out = t->Train(x, ids, 3);
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{16, 2, 5, 4}));
  for (int64_t r = 0; r < 16; ++r) {
    const ImageTransforms::Draw d = t->DrawFor(ids[r], 3);
    EXPECT_TRUE(torch::equal(out[r], Reference(x[r], d, 2, 5, 4))) << "row " << r;
  }
}

TEST(ImageTransformsTest, ResizeComesFirstAsTorchvisionsResizeOnTensors) {
  v1::ImageTransformsSpec spec = CropFlip(1, {4, 5});
  spec.add_resize(6);
  spec.add_resize(7);
  auto t = Make(spec, Images(3, 12, 9));
  EXPECT_EQ(t->output_shape(), (std::vector<int64_t>{3, 4, 5}));
  const torch::Tensor x = torch::rand({5, 3, 12, 9}) + 0.1;
  const torch::Tensor resized = F::interpolate(
      x, F::InterpolateFuncOptions().size(std::vector<int64_t>{6, 7})
             .mode(torch::kBilinear).align_corners(false).antialias(true));
  const torch::Tensor out = t->Train(x, {0, 1, 2, 3, 4}, 0);
  for (int64_t r = 0; r < 5; ++r) {
    EXPECT_TRUE(torch::allclose(out[r], Reference(resized[r], t->DrawFor(r, 0), 1, 4, 5),
                                1e-6, 1e-6)) << r;
  }
  // The crop is checked against the resized size, not the file's.
  spec.mutable_random_crop()->set_size(0, 9);
  EXPECT_THAT(ImageTransforms::Create(spec, Images(3, 12, 9), 0).status().message(),
              HasSubstr("padded images (8x9: 6x7 with padding 1)"));
}

TEST(ImageTransformsTest, DrawsDependOnSampleAndEpochOnlyAndCoverEveryOffset) {
  auto t = Make(CropFlip(2), Images(1, 8, 8));  // crop 8x8 of 12x12: offsets 0..4
  const torch::Tensor x = torch::rand({3, 1, 8, 8});
  // The same sample in another batch, at another row, is transformed the same.
  const torch::Tensor a = t->Train(x, {10, 11, 12}, 0);
  const torch::Tensor b = t->Train(x.index_select(0, torch::tensor({2, 0})), {12, 10}, 0);
  EXPECT_TRUE(torch::equal(a[0], b[1]));
  EXPECT_TRUE(torch::equal(a[2], b[0]));
  std::set<std::pair<int64_t, int64_t>> offsets;
  int flips = 0, changed_by_epoch = 0;
  constexpr int kSamples = 4000;
  for (int64_t i = 0; i < kSamples; ++i) {
    const ImageTransforms::Draw d = t->DrawFor(i, 0);
    ASSERT_GE(d.top, 0);
    ASSERT_LE(d.top, 4);
    ASSERT_GE(d.left, 0);
    ASSERT_LE(d.left, 4);
    offsets.insert({d.top, d.left});
    flips += d.flip;
    const ImageTransforms::Draw next = t->DrawFor(i, 1);
    changed_by_epoch += next.top != d.top || next.left != d.left || next.flip != d.flip;
    const ImageTransforms::Draw again = t->DrawFor(i, 0);
    ASSERT_EQ(again.top, d.top);
    ASSERT_EQ(again.flip, d.flip);
  }
  EXPECT_EQ(offsets.size(), 25u);
  EXPECT_NEAR(flips / double(kSamples), 0.5, 0.03);
  // 50 equally likely outcomes: another epoch repeats one about 2% of the time.
  EXPECT_GT(changed_by_epoch, kSamples * 9 / 10);
  // Another seed, other draws.
  auto other = Make(CropFlip(2), Images(1, 8, 8), /*seed=*/6);
  int same = 0;
  for (int64_t i = 0; i < 100; ++i) {
    const auto d = t->DrawFor(i, 0), e = other->DrawFor(i, 0);
    same += d.top == e.top && d.left == e.left && d.flip == e.flip;
  }
  EXPECT_LT(same, 20);
}

TEST(ImageTransformsTest, EvaluationTakesTheCentreCropAsTorchvisionDoes) {
  // 7 - 4 = 3 rows to drop: round(1.5) = 2 (half to even) rows above.
  // 6 - 4 = 2 columns: 1 on each side. Nothing is mirrored.
  auto t = Make(CropFlip(0, {4, 4}), Images(1, 7, 6));
  const torch::Tensor x = torch::rand({2, 1, 7, 6});
  EXPECT_TRUE(torch::equal(t->Eval(x), x.narrow(2, 2, 4).narrow(3, 1, 4)));
  // A crop larger than the image (allowed with padding) pads it with zeros,
  // the odd row at the end: 6 rows of 3 are 1 zero row above, 2 below.
  auto big = Make(CropFlip(2, {6, 3}), Images(1, 3, 3));
  const torch::Tensor y = torch::rand({1, 1, 3, 3});
  const torch::Tensor want =
      F::pad(y, F::PadFuncOptions({0, 0, 1, 2}));  // left, right, top, bottom
  EXPECT_TRUE(torch::equal(big->Eval(y), want));
}

TEST(ImageTransformsTest, RefusesWhatDoesNotFitTheData) {
  v1::ImageTransformsSpec mean;
  for (double m : {0.1, 0.2}) mean.mutable_normalize()->add_mean(m);
  for (double s : {1.0, 1.0}) mean.mutable_normalize()->add_std(s);
  auto status = ImageTransforms::Create(mean, Images(3, 4, 4), 0).status();
  EXPECT_THAT(status.message(), HasSubstr("data.transforms.normalize.mean"));
  EXPECT_THAT(status.message(), HasSubstr("3 channels"));
  status = ImageTransforms::Create(CropFlip(1, {7, 4}), Images(1, 4, 4), 0).status();
  EXPECT_THAT(status.message(), HasSubstr("data.transforms.random_crop.size"));
  EXPECT_THAT(status.message(), HasSubstr("6x6"));
  DataInfo features;
  features.input_shape = {784};
  status = ImageTransforms::Create(CropFlip(1), features, 0).status();
  EXPECT_THAT(status.message(), HasSubstr("data.transforms: apply to float images"));
  DataInfo tokens = Images(1, 4, 4);
  tokens.integer_inputs = true;
  EXPECT_FALSE(ImageTransforms::Create(CropFlip(1), tokens, 0).ok());
}

TEST(NormalizationFromDataTest, IsEachChannelsPixelMeanAndStd) {
  // Channel c of image i is uniform noise scaled and shifted per channel.
  const torch::Tensor x = torch::rand({300, 2, 5, 4}) *
                              torch::tensor({0.2f, 0.6f}).view({1, 2, 1, 1}) +
                          torch::tensor({0.1f, 0.3f}).view({1, 2, 1, 1});
  TensorDataset data(x, torch::zeros({300}, torch::kInt64));
  absl::StatusOr<v1::NormalizeSpec> norm =
      NormalizationFromData(data, Images(2, 5, 4), 1);
  ASSERT_TRUE(norm.ok()) << norm.status();
  ASSERT_EQ(norm->mean_size(), 2);
  // Fewer samples than kNormalizeSamples: all of them, as torch computes it.
  const torch::Tensor d = x.to(torch::kFloat64).transpose(0, 1).reshape({2, -1});
  for (int c = 0; c < 2; ++c) {
    EXPECT_NEAR(norm->mean(c), d[c].mean().item<double>(), 1e-9) << c;
    EXPECT_NEAR(norm->std(c), d[c].std(/*unbiased=*/false).item<double>(), 1e-9) << c;
  }
  // A constant channel cannot be normalised: said, naming the field.
  TensorDataset flat(torch::full({10, 1, 2, 2}, 0.5f), torch::zeros({10}, torch::kInt64));
  EXPECT_THAT(NormalizationFromData(flat, Images(1, 2, 2), 1).status().message(),
              HasSubstr("data.transforms.normalize.from_data: channel 0"));
  DataInfo features;
  features.input_shape = {20};
  EXPECT_THAT(NormalizationFromData(data, features, 1).status().message(),
              HasSubstr("data.transforms.normalize: apply to float images"));
}

TEST(NormalizationFromDataTest, ALargeSetIsSampledTheSameWayEveryTime) {
  const int64_t n = 3 * kNormalizeSamples;
  const torch::Tensor x = torch::rand({n, 1, 3, 3});
  TensorDataset data(x, torch::zeros({n}, torch::kInt64));
  auto a = NormalizationFromData(data, Images(1, 3, 3), 7);
  auto b = NormalizationFromData(data, Images(1, 3, 3), 7);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->mean(0), b->mean(0));  // every rank computes the same
  EXPECT_EQ(a->std(0), b->std(0));
  // A sample of the whole: close to it, and not the first rows only.
  EXPECT_NEAR(a->mean(0), x.mean().item<double>(), 0.01);
  const double head = x.narrow(0, 0, kNormalizeSamples).to(torch::kFloat64).mean().item<double>();
  EXPECT_NE(a->mean(0), head);
}

class TransformedDataTest : public DataTest {};

TEST_F(TransformedDataTest, LoadedSetsReportTheCropShapeAndEvalIsTransformed) {
  std::vector<uint8_t> pixels(6 * 5 * 4);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 7);
  v1::JobSpec spec = Spec("idx");
  spec.mutable_data()->set_train_images(WriteIdx("x", {6, 5, 4}, pixels, false));
  spec.mutable_data()->set_train_labels(
      WriteIdx("y", {6}, {0, 1, 2, 0, 1, 2}, false));
  spec.mutable_data()->set_eval_fraction(0.5);
  *spec.mutable_data()->mutable_transforms() = CropFlip(1, {3, 3});
  spec.mutable_data()->mutable_transforms()->mutable_normalize()->add_mean(0.5);
  spec.mutable_data()->mutable_transforms()->mutable_normalize()->add_std(0.25);
  auto ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_NE(ds->train_transforms, nullptr);
  EXPECT_EQ(ds->info.input_shape, (std::vector<int64_t>{1, 3, 3}));
  // Training rows come back raw (the prefetcher augments them)...
  EXPECT_EQ(ds->train->Gather({0}).inputs.sizes(), (std::vector<int64_t>{1, 1, 5, 4}));
  // ...evaluation rows centre-cropped and normalised.
  const Batch eval = ds->eval->Gather({0, 1, 2});
  ASSERT_EQ(eval.inputs.sizes(), (std::vector<int64_t>{3, 1, 3, 3}));
  EXPECT_LE(eval.inputs.max().item<float>(), (1.0f - 0.5f) / 0.25f + 1e-5f);
  EXPECT_GE(eval.inputs.min().item<float>(), (0.0f - 0.5f) / 0.25f - 1e-5f);
  // normalize.from_data: the statistics of the training rows, reported.
  spec.mutable_data()->mutable_transforms()->mutable_normalize()->Clear();
  spec.mutable_data()->mutable_transforms()->mutable_normalize()->set_from_data(true);
  ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  const torch::Tensor train = ds->train->Gather(Iota(ds->train->size())).inputs;
  ASSERT_TRUE(ds->plan_facts.count("normalize_mean_0"));
  EXPECT_NEAR(ds->plan_facts.at("normalize_mean_0"), train.mean().item<double>(), 1e-6);
  EXPECT_NEAR(ds->plan_facts.at("normalize_std_0"),
              train.to(torch::kFloat64).std(false).item<double>(), 1e-6);
  // A crop that does not fit names its field.
  spec.mutable_data()->mutable_transforms()->mutable_random_crop()->set_size(0, 9);
  EXPECT_THAT(LoadDatasets(spec).status().message(),
              HasSubstr("data.transforms.random_crop.size"));
}

TEST_F(TransformedDataTest, PrefetcherAugmentsEachBatchByItsSamplesAndEpoch) {
  const int64_t n = 8;
  auto data = std::make_shared<TensorDataset>(torch::rand({n, 1, 4, 4}) + 0.1,
                                              torch::zeros({n}, torch::kInt64));
  auto t = Make(CropFlip(1), Images(1, 4, 4));
  BatchPlan plan;
  plan.seed = 9;
  plan.steps_per_epoch = 2;
  plan.micro_batch = 4;
  plan.total_steps = 4;  // two epochs
  plan.keep_indices = true;
  BatchPrefetcher batches(*data, plan, torch::kCPU, 2, t.get());
  for (int64_t step = 0; step < 4; ++step) {
    absl::StatusOr<Batch> b = batches.Next();
    ASSERT_TRUE(b.ok()) << b.status();
    const torch::Tensor raw = data->Gather(b->indices).inputs;
    EXPECT_TRUE(torch::equal(b->inputs, t->Train(raw, b->indices, step / 2)))
        << "step " << step;
  }
  EXPECT_FALSE(batches.Next().ok());
}

}  // namespace
}  // namespace trainctl::train::data_testing
