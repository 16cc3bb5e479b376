#include "worker/support/decoded_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace trainctl::train {
namespace {

using Outcome = DecodedFileCache::Outcome;

// Whatever the test machine's disk has free, copies are made: only the
// free-space test below depends on it, through a reserve no disk has.
constexpr int64_t kNoReserve = 0;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteGzip(const std::string& path, const std::string& content) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, content.data(), static_cast<unsigned>(content.size())),
            static_cast<int>(content.size()));
  gzclose(f);
}

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  return names;
}

std::string Pattern(int seed, size_t size) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 31 + seed) % 251);
  return s;
}

class DecodedCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/decoded_cache_test.XXXXXX";
    root_ = mkdtemp(tmpl);
    cache_dir_ = root_ + "/state/data-cache";
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + root_ + "'";
    ASSERT_EQ(system(cmd.c_str()), 0);
  }
  // Resolves `source` and expects it read in place with nothing cached.
  DecodedFileCache::Resolved ExpectReadInPlace(const std::string& source,
                                               Outcome outcome,
                                               int64_t limit = 64 << 20) {
    DecodedFileCache cache(cache_dir_, limit, kNoReserve);
    DecodedFileCache::Resolved resolved = cache.Resolve(source);
    EXPECT_EQ(resolved.outcome, outcome) << resolved.note;
    EXPECT_EQ(resolved.path, source);
    EXPECT_TRUE(Entries(cache_dir_).empty());
    return resolved;
  }
  void MakeCacheDir(mode_t mode) {
    ASSERT_EQ(mkdir(cache_dir_.substr(0, cache_dir_.rfind('/')).c_str(), 0700), 0);
    ASSERT_EQ(mkdir(cache_dir_.c_str(), 0700), 0);
    ASSERT_EQ(chmod(cache_dir_.c_str(), mode), 0);
  }
  std::string root_, cache_dir_;
};

TEST_F(DecodedCacheTest, StoresOnFirstUseThenHits) {
  const std::string source = root_ + "/train-images-idx3-ubyte.gz";
  const std::string content = Pattern(1, 3 << 20);
  WriteGzip(source, content);
  DecodedFileCache cache(cache_dir_, 64 << 20, kNoReserve);

  const auto first = cache.Resolve(source);
  EXPECT_EQ(first.outcome, Outcome::kStored) << first.note;
  EXPECT_NE(first.path, source);
  EXPECT_EQ(first.path.rfind(cache_dir_ + "/", 0), 0u) << first.path;
  EXPECT_NE(first.path.find("train-images-idx3-ubyte"), std::string::npos);
  EXPECT_EQ(ReadAll(first.path), content);
  struct stat st;
  ASSERT_EQ(stat(cache_dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  const auto second = cache.Resolve(source);
  EXPECT_EQ(second.outcome, Outcome::kHit);
  EXPECT_EQ(second.path, first.path);
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(cache.stored(), 1);
  EXPECT_EQ(Entries(cache_dir_).size(), 1u) << "no temporary file left";
}

TEST_F(DecodedCacheTest, ChangedSourceIsAMissNeverStaleData) {
  const std::string source = root_ + "/labels.gz";
  WriteGzip(source, "version one");
  DecodedFileCache cache(cache_dir_, 64 << 20, kNoReserve);
  const auto old_copy = cache.Resolve(source);
  ASSERT_EQ(old_copy.outcome, Outcome::kStored);
  // Replaced in place by a newer file of the same name.
  WriteGzip(source + ".new", "version two, longer");
  ASSERT_EQ(rename((source + ".new").c_str(), source.c_str()), 0);
  const auto new_copy = cache.Resolve(source);
  EXPECT_EQ(new_copy.outcome, Outcome::kStored);
  EXPECT_NE(new_copy.path, old_copy.path);
  EXPECT_EQ(ReadAll(new_copy.path), "version two, longer");
}

TEST_F(DecodedCacheTest, SameSizeRewriteInPlaceIsAMiss) {
  const std::string source = root_ + "/same-size.gz";
  WriteGzip(source, "AAAA");
  DecodedFileCache cache(cache_dir_, 64 << 20, kNoReserve);
  const auto old_copy = cache.Resolve(source);
  ASSERT_EQ(old_copy.outcome, Outcome::kStored);
  // Same inode, same compressed size, then the old mtime put back (as
  // cp -p or rsync -t would): only the contents and ctime differ.
  struct stat before;
  ASSERT_EQ(stat(source.c_str(), &before), 0);
  std::string bytes = ReadAll(old_copy.path);
  WriteGzip(root_ + "/other.gz", "BBBB");
  const std::string other = ReadAll(root_ + "/other.gz");
  ASSERT_EQ(other.size(), static_cast<size_t>(before.st_size));
  {
    std::ofstream out(source, std::ios::binary | std::ios::in | std::ios::out);
    out << other;
  }
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, source.c_str(), times, 0), 0);
  const auto new_copy = cache.Resolve(source);
  EXPECT_EQ(new_copy.outcome, Outcome::kStored);
  EXPECT_EQ(ReadAll(new_copy.path), "BBBB");
  EXPECT_EQ(bytes, "AAAA");
}

TEST_F(DecodedCacheTest, TruncatedGzipIsNotCached) {
  const std::string source = root_ + "/growing.gz";
  WriteGzip(source, Pattern(5, 1 << 20));
  const std::string whole = ReadAll(source);
  std::ofstream(source, std::ios::binary | std::ios::trunc)
      << whole.substr(0, whole.size() / 2);  // still being written
  ExpectReadInPlace(source, Outcome::kBypassed);
}

TEST_F(DecodedCacheTest, EvictionNeverTouchesFilesItDidNotWrite) {
  MakeCacheDir(0700);
  const std::string precious = cache_dir_ + "/my-dataset.bin";
  std::ofstream(precious) << Pattern(6, 4 << 20);
  // Already over the limit.
  DecodedFileCache cache(cache_dir_, 1 << 20, kNoReserve);
  const std::string source = root_ + "/small.gz";
  WriteGzip(source, "small");
  EXPECT_EQ(cache.Resolve(source).outcome, Outcome::kStored);
  EXPECT_EQ(access(precious.c_str(), F_OK), 0) << "evicted a user's file";
}

TEST_F(DecodedCacheTest, DirectoryOthersCanWriteIsNotUsed) {
  MakeCacheDir(0777);
  const std::string source = root_ + "/x.gz";
  WriteGzip(source, "x");
  const auto resolved = ExpectReadInPlace(source, Outcome::kBypassed);
  EXPECT_NE(resolved.note.find("writable by no one else"), std::string::npos)
      << resolved.note;
}

TEST_F(DecodedCacheTest, PlainFilesAreReadInPlace) {
  const std::string source = root_ + "/plain.idx";
  std::ofstream(source) << "not compressed";
  ExpectReadInPlace(source, Outcome::kNotCompressed);
}

TEST_F(DecodedCacheTest, CorruptGzipFallsBackToTheSourceAndLeavesNothing) {
  const std::string source = root_ + "/broken.gz";
  WriteGzip(source, Pattern(2, 1 << 20));
  // Keep the header, damage the deflate stream.
  std::string bytes = ReadAll(source);
  for (size_t i = 20; i < bytes.size() - 8; i += 7) bytes[i] ^= 0x5a;
  std::ofstream(source, std::ios::binary | std::ios::trunc) << bytes;
  const auto resolved = ExpectReadInPlace(source, Outcome::kBypassed);
  EXPECT_NE(resolved.note.find("broken.gz"), std::string::npos) << resolved.note;
}

TEST_F(DecodedCacheTest, UnusableDirectoryFallsBackToTheSource) {
  const std::string source = root_ + "/a.gz";
  WriteGzip(source, "abc");
  // A file where the directory should be: fails for root too.
  std::ofstream(root_ + "/locked") << "a file";
  DecodedFileCache cache(root_ + "/locked/cache", 64 << 20, kNoReserve);
  const auto resolved = cache.Resolve(source);
  EXPECT_EQ(resolved.outcome, Outcome::kBypassed);
  EXPECT_EQ(resolved.path, source);
  EXPECT_NE(resolved.note.find("locked/cache"), std::string::npos) << resolved.note;
}

TEST_F(DecodedCacheTest, FileLargerThanTheLimitIsNotCached) {
  const std::string source = root_ + "/big.gz";
  WriteGzip(source, Pattern(3, 3 << 20));
  const auto resolved = ExpectReadInPlace(source, Outcome::kBypassed, 2 << 20);
  EXPECT_NE(resolved.note.find("2 MiB"), std::string::npos) << resolved.note;
}

TEST_F(DecodedCacheTest, CopyThatWouldFillTheDiskIsNotMade) {
  const std::string source = root_ + "/needs-room.gz";
  WriteGzip(source, Pattern(7, 1 << 20));
  DecodedFileCache cache(cache_dir_, 64 << 20, int64_t{1} << 60);
  const auto resolved = cache.Resolve(source);
  EXPECT_EQ(resolved.outcome, Outcome::kBypassed);
  EXPECT_EQ(resolved.path, source);
  EXPECT_NE(resolved.note.find("MiB free in " + cache_dir_), std::string::npos)
      << resolved.note;
  EXPECT_TRUE(Entries(cache_dir_).empty());
}

TEST_F(DecodedCacheTest, LeastRecentlyUsedCopiesGoFirstOverTheLimit) {
  // Room for two 2 MiB copies.
  DecodedFileCache cache(cache_dir_, 5 << 20, kNoReserve);
  std::vector<std::string> sources, copies;
  for (int i = 0; i < 3; ++i) {
    sources.push_back(root_ + "/f" + std::to_string(i) + ".gz");
    WriteGzip(sources.back(), Pattern(i, 2 << 20));
  }
  copies.push_back(cache.Resolve(sources[0]).path);
  copies.push_back(cache.Resolve(sources[1]).path);
  // Use f0 again, with a later time than f1's, so f1 is the oldest.
  struct timespec later[2] = {{0, UTIME_NOW}, {0, 0}};
  later[1].tv_sec = time(nullptr) + 10;
  ASSERT_EQ(cache.Resolve(sources[0]).outcome, Outcome::kHit);
  ASSERT_EQ(utimensat(AT_FDCWD, copies[0].c_str(), later, 0), 0);
  copies.push_back(cache.Resolve(sources[2]).path);
  EXPECT_EQ(access(copies[0].c_str(), F_OK), 0) << "recently used copy evicted";
  EXPECT_NE(access(copies[1].c_str(), F_OK), 0) << "oldest copy kept";
  EXPECT_EQ(access(copies[2].c_str(), F_OK), 0) << "new copy evicted";
}

TEST_F(DecodedCacheTest, ConcurrentMissesAllGetTheWholeFile) {
  const std::string source = root_ + "/shared.gz";
  const std::string content = Pattern(4, 4 << 20);
  WriteGzip(source, content);
  std::vector<std::string> paths(4);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.emplace_back([&, r] {
      // One per rank process.
      DecodedFileCache cache(cache_dir_, 64 << 20, kNoReserve);
      paths[r] = cache.Resolve(source).path;
    });
  }
  for (auto& t : ranks) t.join();
  for (const auto& path : paths) {
    EXPECT_NE(path, source);
    EXPECT_EQ(ReadAll(path), content);
  }
  EXPECT_EQ(Entries(cache_dir_).size(), 1u);
}

TEST_F(DecodedCacheTest, EnvironmentConfiguresItAndZeroTurnsItOff) {
  setenv("TRAINCTL_DATA_CACHE_DIR", cache_dir_.c_str(), 1);
  setenv("TRAINCTL_DATA_CACHE_MB", "16", 1);
  auto cache = DecodedFileCache::FromEnvironment();
  ASSERT_NE(cache, nullptr);
  EXPECT_EQ(cache->dir(), cache_dir_);
  setenv("TRAINCTL_DATA_CACHE_MB", "0", 1);
  EXPECT_EQ(DecodedFileCache::FromEnvironment(), nullptr);
  setenv("TRAINCTL_DATA_CACHE_MB", "lots", 1);
  EXPECT_EQ(DecodedFileCache::FromEnvironment(), nullptr);
  unsetenv("TRAINCTL_DATA_CACHE_DIR");
  unsetenv("TRAINCTL_DATA_CACHE_MB");
  EXPECT_EQ(DecodedFileCache::FromEnvironment(), nullptr);
}

}  // namespace
}  // namespace trainctl::train
