// LoadDatasets over sharded paths (a directory or a glob), and the shard
// manifest every rank checks against rank 0's.

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/data_shards.h"
#include "tests/unit/data_test_util.h"
#include "tests/unit/npy_test_util.h"
#include "worker/support/shard_manifest.h"

namespace trainctl::train::data_testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using trainctl::testing::Elements;
using trainctl::testing::Npy;

class ShardTest : public DataTest {
 protected:
  // Shard k holds tokens 1000k, 1000k+1, ...: every window says where it
  // came from.
  void WriteTokenShards(const std::string& dir, const std::vector<int>& sizes) {
    std::filesystem::create_directories(dir_ + "/" + dir);
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<uint32_t> ids;
      for (int i = 0; i < sizes[k]; ++i) ids.push_back(1000 * k + i);
      Write(dir + "/part-" + std::to_string(k) + ".bin", LittleEndian(ids, 2));
    }
  }
  v1::JobSpec TokenSpec(const std::string& path) {
    v1::JobSpec spec = Spec("tokens");
    spec.mutable_data()->set_seq_len(4);
    spec.mutable_data()->set_train_path(path);
    return spec;
  }
};

TEST_F(ShardTest, ADirectoryOfShardsIsOneSetInPathOrder) {
  // 13, 9 and 21 tokens: 3, 2 and 5 windows of 4 (+1).
  WriteTokenShards("tokens", {13, 9, 21});
  Write("tokens/.partial-upload", "ignored: hidden");
  auto ds = LoadDatasets(TokenSpec(dir_ + "/tokens"));
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->train->size(), 10);
  EXPECT_EQ(ds->info.vocab_size, 2021);
  // Rows in an order that crosses shards, back in the asked order.
  Batch b = ds->train->Gather({9, 0, 4, 3, 2});
  const std::vector<int64_t> first = {2016, 0, 1004, 1000, 8};
  for (size_t r = 0; r < first.size(); ++r) {
    EXPECT_EQ(b.inputs[r][0].item<int64_t>(), first[r]) << r;
    EXPECT_EQ(b.targets[r][3].item<int64_t>(), first[r] + 4) << r;
  }
  // Three manifest lines, one per shard, in order.
  EXPECT_EQ(std::count(ds->manifest.begin(), ds->manifest.end(), '\n'), 3);
  EXPECT_THAT(ds->manifest, HasSubstr("data.train_path\t" + dir_ + "/tokens/part-0.bin\t26\t"));
  EXPECT_THAT(ds->manifest, Not(HasSubstr(".partial-upload")));

  // A glob names the same shards; a limit takes the first shards' windows.
  v1::JobSpec glob = TokenSpec(dir_ + "/tokens/part-*.bin");
  glob.mutable_data()->set_train_limit(4);
  ds = LoadDatasets(glob);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->train->size(), 4);
  EXPECT_EQ(ds->train->Gather({3}).inputs[0][0].item<int64_t>(), 1000);
  EXPECT_EQ(std::count(ds->manifest.begin(), ds->manifest.end(), '\n'), 2);
}

TEST_F(ShardTest, AnEvalSetMayBeShardedToo) {
  WriteTokenShards("train", {13, 9});
  WriteTokenShards("eval", {9, 9, 5});  // 2 + 2 + 1 windows
  v1::JobSpec spec = TokenSpec(dir_ + "/train");
  spec.mutable_data()->set_eval_path(dir_ + "/eval/*.bin");
  auto ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->eval->size(), 5);
  EXPECT_EQ(ds->eval->Gather({4}).inputs[0][0].item<int64_t>(), 2000);
  EXPECT_EQ(std::count(ds->manifest.begin(), ds->manifest.end(), '\n'), 5);
  EXPECT_THAT(ds->manifest, HasSubstr("data.eval_path\t" + dir_ + "/eval/part-2.bin\t10\t"));
}

TEST_F(ShardTest, UnshardedPathsHaveNoManifest) {
  WriteTokenShards("one", {13});
  auto ds = LoadDatasets(TokenSpec(dir_ + "/one/part-0.bin"));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->manifest, "");
  // A file whose name looks like a pattern is that file.
  std::filesystem::rename(dir_ + "/one/part-0.bin", dir_ + "/one/part[0].bin");
  ds = LoadDatasets(TokenSpec(dir_ + "/one/part[0].bin"));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->train->size(), 3);
  EXPECT_EQ(ds->manifest, "");
}

TEST_F(ShardTest, PathsThatNameNothingAreRefusedNamingThem) {
  std::filesystem::create_directories(dir_ + "/empty");
  EXPECT_EQ(LoadDatasets(TokenSpec(dir_ + "/empty")).status().message(),
            "data.train_path: " + dir_ + "/empty: names no regular file");
  EXPECT_EQ(LoadDatasets(TokenSpec(dir_ + "/none-*.bin")).status().message(),
            "data.train_path: " + dir_ + "/none-*.bin: names no regular file");
  // One directory is listed, never a tree.
  EXPECT_EQ(LoadDatasets(TokenSpec(dir_ + "/*/part-*.bin")).status().message(),
            "data.train_path: " + dir_ + "/*/part-*.bin: only the file name may "
            "hold * ? or [ (e.g. tokens/*.bin)");
}

TEST_F(ShardTest, NpyShardsPairInputsWithLabelsInOrder) {
  std::filesystem::create_directories(dir_ + "/x");
  std::filesystem::create_directories(dir_ + "/y");
  Write("x/a.npy", Npy("<f4", "(2, 1)", Elements<float>({1, 2})));
  Write("x/b.npy", Npy("<f4", "(3, 1)", Elements<float>({3, 4, 5})));
  Write("y/a.npy", Npy("<i8", "(2,)", Elements<int64_t>({0, 1})));
  Write("y/b.npy", Npy("<i8", "(3,)", Elements<int64_t>({2, 3, 4})));
  v1::JobSpec spec = Spec("npy");
  spec.mutable_data()->set_train_path(dir_ + "/x");
  spec.mutable_data()->set_train_labels(dir_ + "/y/*.npy");
  auto ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->train->size(), 5);
  EXPECT_EQ(ds->info.num_classes, 5);
  Batch b = ds->train->Gather({4, 1, 2});
  EXPECT_TRUE(torch::equal(b.inputs, torch::tensor({{5.0f}, {2.0f}, {3.0f}})));
  EXPECT_TRUE(torch::equal(b.targets, I64({4, 1, 2})));
  EXPECT_EQ(std::count(ds->manifest.begin(), ds->manifest.end(), '\n'), 4);

  Write("y/c.npy", Npy("<i8", "(1,)", Elements<int64_t>({0})));
  EXPECT_EQ(LoadDatasets(spec).status().message(),
            "data.train_labels: " + dir_ + "/y/*.npy: names 3 files but "
            "data.train_path names 2");
  std::filesystem::remove(dir_ + "/y/c.npy");
  Write("x/b.npy", Npy("<f4", "(3, 2)", Elements<float>({3, 4, 5, 6, 7, 8})));
  EXPECT_THAT(std::string(LoadDatasets(spec).status().message()),
              HasSubstr("data.train_path: shard " + dir_ +
                        "/x/b.npy holds samples of features [2]"));
}

TEST_F(ShardTest, ChecksumsAreComputedOncePerVersionOfAFile) {
  WriteTokenShards("tokens", {13, 9});
  const DecodedFileCache cache(dir_ + "/cache", 64 << 20, 0);
  const std::vector<std::string> shards = {dir_ + "/tokens/part-0.bin",
                                           dir_ + "/tokens/part-1.bin"};
  auto first = ShardManifest("data.train_path", shards, &cache);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string kept = dir_ + "/cache/checksums";
  ASSERT_EQ(std::distance(std::filesystem::directory_iterator(kept),
                          std::filesystem::directory_iterator()), 2);
  // A planted wrong checksum is what a later start reads: proof that the
  // files are not read again.
  for (const auto& entry : std::filesystem::directory_iterator(kept)) {
    std::ofstream(entry.path()) << "12345\n";
  }
  auto second = ShardManifest("data.train_path", shards, &cache);
  ASSERT_TRUE(second.ok());
  EXPECT_THAT(*second, HasSubstr("\t26\t12345\n"));
  // A replaced file is a new version (a new inode, whatever the clock's
  // granularity): computed again. Same bytes give the same checksum.
  auto replace = [&](const std::string& name, const std::vector<uint32_t>& ids) {
    const std::string path = Write(name + ".new", LittleEndian(ids, 2));
    ASSERT_EQ(::rename(path.c_str(), (dir_ + "/" + name).c_str()), 0);
  };
  replace("tokens/part-0.bin", std::vector<uint32_t>(13, 9));
  std::vector<uint32_t> same;
  for (uint32_t i = 0; i < 9; ++i) same.push_back(1000 + i);
  replace("tokens/part-1.bin", same);
  auto third = ShardManifest("data.train_path", shards, &cache);
  ASSERT_TRUE(third.ok());
  EXPECT_THAT(*third, Not(HasSubstr("12345")));
  EXPECT_EQ(third->substr(third->find('\n') + 1), first->substr(first->find('\n') + 1));
  EXPECT_NE(*third, *first);
}

TEST(ManifestDifferenceTest, NamesTheFirstShardThatDiffersNeverItsChecksum) {
  const std::string zero =
      "data.train_path\t/d/a.bin\t100\t11111\n"
      "data.train_path\t/d/b.bin\t200\t22222\n";
  EXPECT_EQ(ManifestDifference(zero, 0, zero, 1), "");
  EXPECT_EQ(ManifestDifference(zero, 0,
                               "data.train_path\t/d/a.bin\t100\t11111\n"
                               "data.train_path\t/d/b.bin\t200\t99999\n", 2),
            "data.train_path: shard /d/b.bin has the same size on rank 2 and "
            "rank 0 but different contents (the nodes hold different files)");
  EXPECT_EQ(ManifestDifference(zero, 0,
                               "data.train_path\t/d/a.bin\t104\t11111\n"
                               "data.train_path\t/d/b.bin\t200\t22222\n", 1),
            "data.train_path: shard /d/a.bin is 104 bytes on rank 1 but 100 on "
            "rank 0 (the nodes hold different files)");
  EXPECT_EQ(ManifestDifference(zero, 0, "data.train_path\t/d/a.bin\t100\t11111\n", 3),
            "data.train_path: shard /d/b.bin is seen by rank 0 but not by rank 3");
  EXPECT_EQ(ManifestDifference(zero, 0,
                               "data.train_path\t/d/a.bin\t100\t11111\n"
                               "data.train_path\t/d/c.bin\t200\t22222\n", 1),
            "data.train_path: rank 1 sees shard /d/c.bin where rank 0 sees "
            "/d/b.bin (the nodes list different files)");
  EXPECT_EQ(ManifestDifference("", 0, zero, 1),
            "data.train_path: shard /d/a.bin is seen by rank 1 but not by rank 0");
  // A replacement compares with the survivor that sends the state, named.
  EXPECT_EQ(ManifestDifference(zero, 2,
                               "data.train_path\t/d/a.bin\t104\t11111\n"
                               "data.train_path\t/d/b.bin\t200\t22222\n", 0),
            "data.train_path: shard /d/a.bin is 104 bytes on rank 0 but 100 on "
            "rank 2 (the nodes hold different files)");
}

}  // namespace
}  // namespace trainctl::train::data_testing
