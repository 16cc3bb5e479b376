// The TensorBoard event-file writer: CRC-32C against published test vectors,
// TFRecord framing byte for byte against records TensorBoard's own writers
// produce, and a write/read round trip through the test reader, which
// checks every CRC.

#include <sys/stat.h>

#include "worker/support/tensorboard_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/escaping.h"
#include "common/atomic_file.h"
#include "tests/unit/tensorboard_reader.h"
#include "trainctl/tensorboard/event.pb.h"

namespace trainctl::train {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(Crc32cTest, MatchesPublishedVectors) {
  EXPECT_EQ(Crc32c(""), 0u);
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);  // the usual check value
  // RFC 3720 (iSCSI), appendix B.4.
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(Crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(descending), 0x113FDB5Cu);
}

std::string Hex(const std::string& bytes) {
  return absl::BytesToHexString(bytes);
}

// The bytes TensorBoard's writers put in a file for these two events: the
// file_version record and a scalar "v/1" = 1.5 at step 1, both at wall time
// 256.5. Equal bytes mean equal framing, masking and field numbers.
TEST(FrameRecordTest, EqualsTheBytesTensorBoardWrites) {
  tensorboard::Event version;
  version.set_wall_time(256.5);
  version.set_file_version("brain.Event:2");
  EXPECT_EQ(Hex(FrameRecord(version.SerializeAsString())),
            "1800000000000000a37f4b22"
            "090000000000087040"
            "1a0d627261696e2e4576656e743a32"
            "bc98212b");

  tensorboard::Event scalar;
  scalar.set_wall_time(256.5);
  scalar.set_step(1);
  auto* value = scalar.mutable_summary()->add_value();
  value->set_tag("v/1");
  value->set_simple_value(1.5f);
  EXPECT_EQ(Hex(FrameRecord(scalar.SerializeAsString())),
            "19000000000000008bf10828"
            "0900000000000870401001"
            "2a0c0a0a0a03762f31150000c03f"
            "2cecc087");
}

class TensorBoardWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tensorboard_writer_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  std::string dir_;
};

TEST_F(TensorBoardWriterTest, RoundTripsScalarsThroughTheReader) {
  const std::string run = dir_ + "/runs/job-7";  // created, parents included
  auto writer = TensorBoardWriter::Create(run, 1700000000, "node-a");
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->path(), run + "/events.out.tfevents.1700000000.node-a");
  // Not readable by other local accounts (the run's metrics are the user's).
  struct stat st;
  ASSERT_EQ(::stat((*writer)->path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0007, 0u);
  ASSERT_EQ(::stat(run.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0007, 0u);
  ASSERT_TRUE((*writer)
                  ->WriteScalars(10, 1700000001.25,
                                 {{"train/loss", 2.5}, {"train/lr", 1e-3}})
                  .ok());
  ASSERT_TRUE(
      (*writer)->WriteScalars(20, 1700000002.5, {{"train/loss", 1.75}}).ok());
  ASSERT_TRUE((*writer)
                  ->WriteScalars(20, 1700000003, {{"eval/eval_loss", 1.0 / 3}})
                  .ok());

  // Readable while the writer is still open: nothing waits in a buffer.
  absl::StatusOr<testing::TensorBoardEventFile> file =
      testing::ReadTensorBoardEventFile((*writer)->path());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->file_version, "brain.Event:2");
  EXPECT_EQ(file->events, 4);
  ASSERT_EQ(file->scalars.size(), 4u);
  EXPECT_EQ(file->scalars[0].tag, "train/loss");
  EXPECT_EQ(file->scalars[0].step, 10);
  EXPECT_EQ(file->scalars[0].value, 2.5f);
  EXPECT_EQ(file->scalars[0].wall_time, 1700000001.25);
  EXPECT_EQ(file->scalars[1].tag, "train/lr");
  EXPECT_EQ(file->scalars[1].value, 1e-3f);
  EXPECT_EQ(file->scalars[2].step, 20);
  EXPECT_EQ(file->scalars[2].value, 1.75f);
  EXPECT_EQ(file->scalars[3].tag, "eval/eval_loss");
  EXPECT_EQ(file->scalars[3].value, static_cast<float>(1.0 / 3));
}

TEST_F(TensorBoardWriterTest, ARestartInTheSameSecondGetsANewFile) {
  auto first = TensorBoardWriter::Create(dir_, 42, "h");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE((*first)->WriteScalars(1, 42, {{"a", 1}}).ok());
  auto second = TensorBoardWriter::Create(dir_, 42, "h");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->path(), dir_ + "/events.out.tfevents.42.h.1");
  ASSERT_TRUE((*second)->WriteScalars(1, 43, {{"a", 2}}).ok());
  // The first file is untouched by the second writer.
  auto one = testing::ReadTensorBoardEventFile((*first)->path());
  auto two = testing::ReadTensorBoardEventFile((*second)->path());
  ASSERT_TRUE(one.ok() && two.ok());
  ASSERT_EQ(one->scalars.size(), 1u);
  EXPECT_EQ(one->scalars[0].value, 1.0f);
  ASSERT_EQ(two->scalars.size(), 1u);
  EXPECT_EQ(two->scalars[0].value, 2.0f);
}

TEST_F(TensorBoardWriterTest, ADirectoryThatCannotBeMadeIsAnErrorNamingIt) {
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/plain-file", "x").ok());
  auto writer = TensorBoardWriter::Create(dir_ + "/plain-file/job", 1, "h");
  ASSERT_FALSE(writer.ok());
  EXPECT_THAT(std::string(writer.status().message()),
              HasSubstr(dir_ + "/plain-file"));
}

// The reader is what the other tests trust; it must notice damage.
TEST_F(TensorBoardWriterTest, TheReaderRejectsBadCrcsAndTruncation) {
  std::string path;
  {
    auto writer = TensorBoardWriter::Create(dir_, 5, "h");
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->WriteScalars(1, 5, {{"loss", 0.5}}).ok());
    path = (*writer)->path();
  }
  absl::StatusOr<std::string> good = ReadWholeFile(path);
  ASSERT_TRUE(good.ok());
  ASSERT_TRUE(testing::ReadTensorBoardEventFile(path).ok());
  const size_t second = 12 + 24 + 4;  // where the scalar record starts
  auto damaged = [&](size_t at, int size_delta) {
    std::string bytes = *good;
    if (size_delta < 0) {
      bytes.resize(bytes.size() + size_delta);
    } else {
      bytes[at] = static_cast<char>(bytes[at] ^ 0x01);
    }
    const std::string copy = dir_ + "/damaged";
    std::ofstream(copy, std::ios::binary | std::ios::trunc) << bytes;
    absl::StatusOr<testing::TensorBoardEventFile> read =
        testing::ReadTensorBoardEventFile(copy);
    return read.ok() ? std::string("ok") : std::string(read.status().message());
  };
  EXPECT_THAT(damaged(second, 0), HasSubstr("record 1 at byte 40: length CRC"));
  EXPECT_THAT(damaged(second + 8, 0), HasSubstr("length CRC"));
  EXPECT_THAT(damaged(second + 14, 0),
              HasSubstr("record 1 at byte 40: data CRC"));
  EXPECT_THAT(damaged(good->size() - 1, 0), HasSubstr("data CRC"));
  EXPECT_THAT(damaged(0, -3), HasSubstr("truncated data"));
  EXPECT_THAT(damaged(0, 0), StartsWith(dir_ + "/damaged: record 0"));
}

}  // namespace
}  // namespace trainctl::train
