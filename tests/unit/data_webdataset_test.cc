// LoadDatasets: format webdataset, tar shards of images with .cls labels.

#include <cstdlib>
#include <string>
#include <vector>

#include "common/atomic_file.h"
#include "tests/unit/data_test_util.h"
#include "tests/unit/image_test_util.h"
#include "tests/unit/tar_test_util.h"
#include "tests/unit/leak_check.h"
#include "worker/train/data/image_transforms.h"

namespace trainctl::train::data_testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using trainctl::testing::EncodeJpeg;
using trainctl::testing::EncodePng;
using trainctl::testing::Tar;

// A 4x3 image whose pixel (y, x, c) is 10*y + 3*x + 50*c + base.
std::vector<uint8_t> Pixels(int channels, int base) {
  std::vector<uint8_t> p;
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 3; ++x)
      for (int c = 0; c < channels; ++c) p.push_back(static_cast<uint8_t>(10 * y + 3 * x + 50 * c + base));
  return p;
}

class WebDatasetTest : public DataTest {
 protected:
  v1::JobSpec WdsSpec(const std::string& path) {
    v1::JobSpec spec = Spec("webdataset");
    spec.mutable_data()->set_train_path(path);
    return spec;
  }
  std::string Error(const std::string& path) {
    return std::string(LoadDatasets(WdsSpec(path)).status().message());
  }
};

TEST_F(WebDatasetTest, PngSamplesDecodeExactlyWithTheirLabels) {
  const std::string tar = Write("shard-0.tar", Tar({
      {"a/000.png", EncodePng(Pixels(3, 0), 4, 3, 3)},
      {"a/000.cls", "2\n"},
      {"a/000.json", "{\"ignored\": true}"},
      {"a/001.cls", "0"},  // a label first, its image after: one sample
      {"a/001.png", EncodePng(Pixels(3, 7), 4, 3, 3)},
  }));
  auto ds = LoadDatasets(WdsSpec(tar));
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->train->size(), 2);
  EXPECT_EQ(ds->info.input_shape, (std::vector<int64_t>{3, 4, 3}));
  EXPECT_EQ(ds->info.num_classes, 3);
  Batch b = ds->train->Gather({1, 0});
  EXPECT_TRUE(torch::equal(b.targets, I64({0, 2})));
  // Sample 1, channel 1, row 2, column 1: 10*2 + 3*1 + 50 + 7 = 80.
  EXPECT_FLOAT_EQ(b.inputs[0][1][2][1].item<float>(), 80.0f / 255);
  EXPECT_FLOAT_EQ(b.inputs[1][0][3][2].item<float>(), 36.0f / 255);
}

TEST_F(WebDatasetTest, JpegGrayscaleAndShardsInADirectory) {
  ASSERT_TRUE(MakeDirs(dir_ + "/shards").ok());
  for (int s = 0; s < 2; ++s) {
    std::vector<std::pair<std::string, std::string>> files;
    for (int k = 0; k < 3; ++k) {
      const std::string key = "s" + std::to_string(s) + "-" + std::to_string(k);
      files.push_back({key + ".jpg", EncodeJpeg(std::vector<uint8_t>(64, 40 * k + 20), 8, 8, 1)});
      files.push_back({key + ".cls", std::to_string(k)});
    }
    Write("shards/" + std::to_string(s) + ".tar", Tar(files));
  }
  auto ds = LoadDatasets(WdsSpec(dir_ + "/shards"));
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->train->size(), 6);
  EXPECT_EQ(ds->info.input_shape, (std::vector<int64_t>{1, 8, 8}));
  Batch b = ds->train->Gather({5, 3});
  EXPECT_TRUE(torch::equal(b.targets, I64({2, 0})));
  // Flat images survive JPEG within a level or two.
  EXPECT_NEAR(b.inputs[0].mean().item<float>(), 100.0f / 255, 2.0f / 255);
  EXPECT_NEAR(b.inputs[1].mean().item<float>(), 20.0f / 255, 2.0f / 255);
}

TEST_F(WebDatasetTest, RefusalsNameTheSampleNeverTheMembersOrBytes) {
  const std::string secret = std::string(leak_check::kSecret);
  EXPECT_EQ(Error(Write("plain.tar", secret + std::string(600, 'x'))),
            "data.train_path: " + dir_ + "/plain.tar: not a tar file");
  EXPECT_THAT(Error(Write("nolabel.tar", Tar({{secret + ".png", EncodePng(Pixels(1, 0), 4, 3, 1)}}))),
              AllOf(HasSubstr("sample 0 has an image but no .cls label"), Not(HasSubstr(secret))));
  EXPECT_THAT(Error(Write("badlabel.tar", Tar({{"k.png", EncodePng(Pixels(1, 0), 4, 3, 1)},
                                               {"k.cls", secret}}))),
              AllOf(HasSubstr("sample 0 has a .cls label that is not an integer"),
                    Not(HasSubstr(secret))));
  // WebDataset's grouping: a sample's members are consecutive.
  EXPECT_THAT(Error(Write("split.tar", Tar({{"a.png", EncodePng(Pixels(1, 0), 4, 3, 1)},
                                            {"b.png", EncodePng(Pixels(1, 0), 4, 3, 1)},
                                            {"b.cls", "1"}, {"a.cls", "0"}}))),
              HasSubstr("sample 0 has an image but no .cls label (a sample's "
                        "members must be consecutive)"));
  const std::string whole = Tar({{"k.png", EncodePng(Pixels(1, 0), 4, 3, 1)}, {"k.cls", "1"}});
  EXPECT_THAT(Error(Write("cut.tar", whole.substr(0, 600))), HasSubstr("ends inside a member"));
  EXPECT_THAT(Error(Write("empty.tar", Tar({{"readme.txt", "hello"}}))),
              HasSubstr("holds no samples"));
  EXPECT_THAT(Error(Write("notimage.tar", Tar({{"k.png", secret}, {"k.cls", "1"}}))),
              AllOf(HasSubstr("sample 0: not a decodable PNG image"), Not(HasSubstr(secret))));
  // A later image of another size fails the batch that decodes it.
  auto ds = LoadDatasets(WdsSpec(Write("sizes.tar", Tar({
      {"a.png", EncodePng(Pixels(1, 0), 4, 3, 1)}, {"a.cls", "0"},
      {"b.png", EncodePng(std::vector<uint8_t>(25, 1), 5, 5, 1)}, {"b.cls", "1"}}))));
  ASSERT_TRUE(ds.ok()) << ds.status();
  try {
    ds->train->Gather({0, 1});
    ADD_FAILURE() << "an image of another size was stacked";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(std::string(e.what()),
                HasSubstr("sample 1 is 5x5 but sample 0 is 4x3 (images of several "
                          "sizes need data.transforms.resize)"));
  }
}

TEST_F(WebDatasetTest, ResizeTakesImagesOfEverySizeAndGrayJoinsAColourSet) {
  const std::string tar = Write("mixed.tar", Tar({
      {"a.png", EncodePng(Pixels(3, 0), 4, 3, 3)}, {"a.cls", "0"},
      {"b.png", EncodePng(std::vector<uint8_t>(8 * 10, 200), 8, 10, 1)}, {"b.cls", "1"},
      {"c.png", EncodePng(Pixels(3, 9), 4, 3, 3)}, {"c.cls", "1"}}));
  v1::JobSpec spec = WdsSpec(tar);
  spec.mutable_data()->mutable_transforms()->add_resize(6);
  spec.mutable_data()->mutable_transforms()->add_resize(5);
  auto ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->info.input_shape, (std::vector<int64_t>{3, 6, 5}));
  const Batch b = ds->train->Gather({0, 1, 2});
  ASSERT_EQ(b.inputs.sizes(), (std::vector<int64_t>{3, 3, 6, 5}));
  // The gray 8x10 image: one value, in all three channels, at any size.
  EXPECT_TRUE(torch::allclose(b.inputs[1], torch::full({3, 6, 5}, 200.0f / 255), 1e-5, 1e-6));
  // A colour 4x3 image: bilinear, as torch resizes the decoded pixels.
  std::vector<uint8_t> hwc = Pixels(3, 0);
  const torch::Tensor chw = torch::tensor(std::vector<float>(hwc.begin(), hwc.end()))
                                .view({1, 4, 3, 3}).permute({0, 3, 1, 2}) / 255;
  EXPECT_TRUE(torch::allclose(b.inputs[0], ResizeImages(chw, 6, 5)[0], 1e-5, 1e-6));
  // An RGB image in a set that starts grayscale is refused, by position.
  spec.mutable_data()->set_train_path(Write("graythen.tar", Tar({
      {"a.png", EncodePng(std::vector<uint8_t>(12, 1), 4, 3, 1)}, {"a.cls", "0"},
      {"b.png", EncodePng(Pixels(3, 0), 4, 3, 3)}, {"b.cls", "1"}})));
  ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  try {
    ds->train->Gather({1});
    ADD_FAILURE() << "an RGB image joined a grayscale set";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("sample 1 is RGB but sample 0 is grayscale"));
  }
}

TEST_F(WebDatasetTest, ShardsWrittenByPythonsTarfileAreRead) {
  // Python's tarfile (what WebDataset's writer uses) in its default PAX
  // format, with a key too long for a ustar name; PNGs from zlib alone.
  const std::string script = Write("w.py", R"(import sys, tarfile, io, zlib, struct
def png(gray, h, w):
    raw = b"".join(b"\0" + bytes(gray[y * w:(y + 1) * w]) for y in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as tar:
    for k in range(3):
        key = "very/" + "long-directory-name/" * 8 + "sample%03d" % k
        for ext, data in (("png", png([k * 10 + i for i in range(6)], 2, 3)), ("cls", str(k).encode())):
            info = tarfile.TarInfo(key + "." + ext)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
)");
  const std::string tar = dir_ + "/py.tar";
  if (!RunPython(script, tar)) GTEST_SKIP() << "no python3";
  auto ds = LoadDatasets(WdsSpec(tar));
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->train->size(), 3);
  EXPECT_EQ(ds->info.input_shape, (std::vector<int64_t>{1, 2, 3}));
  Batch b = ds->train->Gather({2});
  EXPECT_EQ(b.targets[0].item<int64_t>(), 2);
  EXPECT_FLOAT_EQ(b.inputs[0][0][1][2].item<float>(), 25.0f / 255);
}

}  // namespace
}  // namespace trainctl::train::data_testing
