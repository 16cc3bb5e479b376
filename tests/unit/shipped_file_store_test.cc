// Files shipped from the submitter's machine: the spec's shipped_files
// section, the coordinator's FileStore (content, owners, limits, sweep) and
// the CLI's upload step against a fake coordinator.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>
#include <utime.h>

#include <filesystem>
#include <thread>
#include <sstream>

#include "client/ship_files.h"
#include "client/spec_edit.h"
#include "common/file_digest.h"
#include "common/shipped_files.h"
#include "common/spec.h"
#include "coordinator/file_store.h"
#include "temp_dir_test.h"

namespace trainctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kBase =
    "model: {type: torchscript, path: model.pt}\n"
    "data: {format: csv, train_path: /data/train.csv}\n";

std::string Sha(const std::string& bytes) {
  Sha256Digest d;
  d.Update(bytes);
  return d.Hex();
}

std::string WithShipped(const std::string& entries) {
  return kBase + "shipped_files: [" + entries + "]\n";
}

std::string Entry(const std::string& field, const std::string& path,
                  const std::string& sha, int64_t size = 3) {
  return "{field: " + field + ", path: " + path + ", sha256: " + sha +
         ", size: " + std::to_string(size) + "}";
}

TEST(ShippedFilesSpecTest, AListedRelativePathParses) {
  const std::string sha = Sha("abc");
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(WithShipped(Entry("model.path", "model.pt", sha)));
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->shipped_files_size(), 1);
  EXPECT_EQ(spec->shipped_files(0).field(), "model.path");
  EXPECT_EQ(spec->shipped_files(0).sha256(), sha);
  EXPECT_EQ(spec->shipped_files(0).size(), 3);
  EXPECT_TRUE(UnshippedRelativePaths(*spec).empty());
}

TEST(ShippedFilesSpecTest, EntriesThatDoNotMatchTheSpecAreRefused) {
  const std::string sha = Sha("abc");
  struct Case {
    std::string entries, error;
  };
  for (const Case& c : std::vector<Case>{
           {Entry("model.type", "model.pt", sha),
            "shipped_files[0].field: 'model.type' is not a file field"},
           {Entry("model.path", "other.pt", sha),
            "shipped_files[0].path: 'other.pt' is not the value of model.path ('model.pt')"},
           {Entry("data.train_path", "/data/train.csv", sha),
            "shipped_files[0].path: must be the field's relative path"},
           {Entry("model.path", "model.pt", "ABC"),
            "shipped_files[0].sha256: must be 64 lowercase hex digits"},
           {Entry("model.path", "model.pt", sha) + ", " + Entry("model.path", "model.pt", sha),
            "shipped_files[1].field: model.path is listed twice"},
           {"{field: model.path, path: model.pt, sha256: " + sha + ", mode: 1}",
            "shipped_files[0].mode"},
       }) {
    absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(WithShipped(c.entries));
    ASSERT_FALSE(spec.ok()) << c.entries;
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr(c.error)) << c.entries;
  }
}

TEST(ShippedFilesSpecTest, AnUnlistedRelativePathIsNamed) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(kBase);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::vector<std::string> problems = UnshippedRelativePaths(*spec);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("model.path: 'model.pt' is a relative path"));
  EXPECT_THAT(problems[0], HasSubstr("submit with trainctl"));
}

class FileStoreTest : public testing::TempDirTest {
 protected:
  // Put() fed from `bytes` in pieces of 2.
  absl::StatusOr<bool> Put(coordinator::FileStore& store, const std::string& owner,
                           const std::string& sha, int64_t size,
                           const std::string& bytes) {
    return store.Put(owner, sha, size, [&](const ByteSink& sink) -> absl::Status {
      for (size_t i = 0; i < bytes.size(); i += 2) {
        const std::string piece = bytes.substr(i, 2);
        if (absl::Status s = sink(piece.data(), piece.size()); !s.ok()) return s;
      }
      return absl::OkStatus();
    });
  }
  v1::JobSpec SpecShipping(const std::string& sha, int64_t size) {
    absl::StatusOr<v1::JobSpec> spec =
        ParseJobSpec(WithShipped(Entry("model.path", "model.pt", sha, size)));
    EXPECT_TRUE(spec.ok()) << spec.status();
    return *spec;
  }
  std::vector<std::string> Listing() {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir_ + "/files")) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }
};

TEST_F(FileStoreTest, ContentIsKeptByDigestForItsUploader) {
  coordinator::FileStore store(dir_ + "/files", 1 << 20);
  const std::string bytes = "hello world";
  const std::string sha = Sha(bytes);
  absl::StatusOr<bool> first = Put(store, "ada", sha, bytes.size(), bytes);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(*first);
  std::string read;
  ASSERT_TRUE(store.Read(sha, 4, [&](absl::string_view piece) {
    read.append(piece.data(), piece.size());
    return true;
  }).ok());
  EXPECT_EQ(read, bytes);
  // Again by its uploader: answered without reading a byte.
  absl::StatusOr<bool> again = store.Put("ada", sha, bytes.size(), [](const ByteSink&) {
    ADD_FAILURE() << "the content was read again";
    return absl::OkStatus();
  });
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(*again);
  EXPECT_TRUE(store.CheckJobFiles("ada", SpecShipping(sha, bytes.size())).ok());
}

TEST_F(FileStoreTest, KnowingTheDigestIsNotEnough) {
  coordinator::FileStore store(dir_ + "/files", 1 << 20);
  const std::string bytes = "secret weights";
  const std::string sha = Sha(bytes);
  ASSERT_TRUE(Put(store, "ada", sha, bytes.size(), bytes).ok());
  absl::Status other = store.CheckJobFiles("bob", SpecShipping(sha, bytes.size()));
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(other.message()),
              HasSubstr("model.path: 'model.pt' names a file bob did not upload"));
  // bob proves he has the content by sending it: then it is his too, and
  // a wrong content proves nothing.
  EXPECT_FALSE(Put(store, "bob", sha, bytes.size(), "secret weighty").ok());
  EXPECT_EQ(store.CheckJobFiles("bob", SpecShipping(sha, bytes.size())).code(),
            absl::StatusCode::kPermissionDenied);
  absl::StatusOr<bool> bobs = Put(store, "bob", sha, bytes.size(), bytes);
  ASSERT_TRUE(bobs.ok()) << bobs.status();
  EXPECT_FALSE(*bobs);
  EXPECT_TRUE(store.CheckJobFiles("bob", SpecShipping(sha, bytes.size())).ok());
}

// A script submitting several jobs at once uploads one model several times.
TEST_F(FileStoreTest, UploadsOfOneContentAtOnceAllSucceed) {
  coordinator::FileStore store(dir_ + "/files", 1 << 20);
  const std::string bytes(100000, 'w');
  const std::string sha = Sha(bytes);
  std::vector<std::thread> uploads;
  std::vector<absl::Status> results(6);
  for (size_t i = 0; i < results.size(); ++i) {
    uploads.emplace_back([&, i] {
      results[i] = Put(store, i % 2 ? "ada" : "bob", sha, bytes.size(), bytes).status();
    });
  }
  for (std::thread& t : uploads) t.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(store.CheckJobFiles("ada", SpecShipping(sha, bytes.size())).ok());
  EXPECT_TRUE(store.CheckJobFiles("bob", SpecShipping(sha, bytes.size())).ok());
  EXPECT_EQ(Listing(), (std::vector<std::string>{sha, sha + ".owners"}));
}

TEST_F(FileStoreTest, AWrongUploadLeavesNothing) {
  coordinator::FileStore store(dir_ + "/files", 16);
  const std::string bytes = "twelve bytes";
  const std::string sha = Sha(bytes);
  struct Case {
    std::string sha;
    int64_t size;
    std::string content, error;
  };
  for (const Case& c : std::vector<Case>{
           {sha, 12, "twelve bytez", "sha256 is not the one announced"},
           {sha, 12, "twelve", "ended after 6 of the 12 bytes"},
           {sha, 12, "twelve bytes and more", "longer than the 12 bytes announced"},
           {sha, 17, std::string(17, 'x'), "a file of 17 bytes is over this coordinator's limit of 1 MiB"},
           {"nothex", 12, bytes, "sha256: must be 64 lowercase hex digits"},
       }) {
    absl::StatusOr<bool> put = Put(store, "ada", c.sha, c.size, c.content);
    ASSERT_FALSE(put.ok()) << c.content;
    EXPECT_EQ(put.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(put.status().message()), HasSubstr(c.error));
    EXPECT_THAT(std::string(put.status().message()), Not(HasSubstr(c.content)))
        << "an error never quotes the upload";
  }
  EXPECT_TRUE(Listing().empty());
  EXPECT_EQ(store.CheckJobFiles("ada", SpecShipping(sha, 12)).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(FileStoreTest, SizeInTheSpecMustBeTheFiles) {
  coordinator::FileStore store(dir_ + "/files", 1 << 20);
  const std::string sha = Sha("abc");
  ASSERT_TRUE(Put(store, "", sha, 3, "abc").ok());
  EXPECT_TRUE(store.CheckJobFiles("", SpecShipping(sha, 3)).ok());
  absl::Status wrong = store.CheckJobFiles("", SpecShipping(sha, 4));
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong.message()), HasSubstr("says 4 bytes, the uploaded file has 3"));
}

TEST_F(FileStoreTest, TheSweepKeepsNamedAndRecentFiles) {
  coordinator::FileStore store(dir_ + "/files", 1 << 20);
  const std::string named = Sha("named"), old = Sha("old"), recent = Sha("recent");
  ASSERT_TRUE(Put(store, "ada", named, 5, "named").ok());
  ASSERT_TRUE(Put(store, "ada", old, 3, "old").ok());
  ASSERT_TRUE(Put(store, "ada", recent, 6, "recent").ok());
  // Two hours ago for the first two.
  const time_t then = time(nullptr) - 7200;
  struct utimbuf times {then, then};
  for (const std::string& sha : {named, old}) {
    ASSERT_EQ(utime((dir_ + "/files/" + sha).c_str(), &times), 0);
  }
  EXPECT_EQ(store.Sweep({named}, std::chrono::hours(1)), 1);
  const std::vector<std::string> left = Listing();
  EXPECT_EQ(std::count(left.begin(), left.end(), old), 0);
  EXPECT_EQ(std::count(left.begin(), left.end(), old + ".owners"), 0);
  EXPECT_EQ(std::count(left.begin(), left.end(), named), 1);
  EXPECT_EQ(std::count(left.begin(), left.end(), recent), 1);
}

class ShipLocalFilesTest : public testing::TempDirTest {
 protected:
  // A fake coordinator: records what was sent.
  client::FileUploader Uploader() {
    return [this](const std::string& path, const std::string& sha, int64_t size)
               -> absl::StatusOr<v1::PutFileResponse> {
      sent_.push_back(path);
      v1::PutFileResponse r;
      r.set_sha256(sha);
      r.set_size(size);
      return r;
    };
  }
  std::vector<std::string> sent_;
  std::ostringstream progress_;
};

TEST_F(ShipLocalFilesTest, RelativePathsAreUploadedAndListed) {
  Write("model.pt", "weights");
  std::filesystem::create_directory(dir_ + "/d");
  Write("d/train.csv", "1,2\n");
  const std::string text =
      "# my job\nmodel: {type: torchscript, path: model.pt}\n"
      "data: {format: csv, train_path: d/train.csv, eval_path: /srv/eval.csv}\n";
  absl::StatusOr<std::string> shipped =
      client::ShipLocalFiles(text, dir_, Uploader(), progress_);
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  EXPECT_EQ(sent_, (std::vector<std::string>{dir_ + "/model.pt", dir_ + "/d/train.csv"}));
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(*shipped);
  ASSERT_TRUE(spec.ok()) << spec.status() << "\n" << *shipped;
  ASSERT_EQ(spec->shipped_files_size(), 2);
  EXPECT_EQ(spec->shipped_files(0).field(), "model.path");
  EXPECT_EQ(spec->shipped_files(0).sha256(), Sha("weights"));
  EXPECT_EQ(spec->shipped_files(0).size(), 7);
  EXPECT_EQ(spec->shipped_files(1).field(), "data.train_path");
  EXPECT_EQ(spec->shipped_files(1).path(), "d/train.csv");
  EXPECT_EQ(spec->data().eval_path(), "/srv/eval.csv");  // on the workers
  EXPECT_TRUE(UnshippedRelativePaths(*spec).empty());
  EXPECT_THAT(progress_.str(), HasSubstr("uploaded model.pt (7 B, sha256 "));
  // Sent again (status -o json's spec): the same files, the same text.
  absl::StatusOr<std::string> again = client::ShipLocalFiles(*shipped, dir_, Uploader(), progress_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *shipped);
}

// A list in the spec never hides what is on disk now: a changed file is
// sent again, a --set to another file replaces its entry, and an entry
// whose file is not on this machine is kept for the coordinator to judge.
TEST_F(ShipLocalFilesTest, AListedFileIsCheckedAgainstTheDisk) {
  Write("model.pt", "weights");
  const std::string text =
      "model: {type: torchscript, path: model.pt}\ndata: {train_images: /a, train_labels: /b}\n";
  absl::StatusOr<std::string> first = client::ShipLocalFiles(text, dir_, Uploader(), progress_);
  ASSERT_TRUE(first.ok());
  Write("model.pt", "weights, trained more");
  absl::StatusOr<std::string> changed = client::ShipLocalFiles(*first, dir_, Uploader(), progress_);
  ASSERT_TRUE(changed.ok()) << changed.status();
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(*changed);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->shipped_files_size(), 1);
  EXPECT_EQ(spec->shipped_files(0).sha256(), Sha("weights, trained more"));
  // --set model.path=other.pt on a spec that lists model.pt.
  Write("other.pt", "other");
  client::SpecEdits edits;
  edits.sets = {"model.path=other.pt"};
  absl::StatusOr<std::string> edited = client::ApplySpecEdits(*changed, edits);
  ASSERT_TRUE(edited.ok());
  absl::StatusOr<std::string> moved = client::ShipLocalFiles(*edited, dir_, Uploader(), progress_);
  ASSERT_TRUE(moved.ok()) << moved.status();
  spec = ParseJobSpec(*moved);
  ASSERT_TRUE(spec.ok()) << spec.status() << "\n" << *moved;
  EXPECT_EQ(spec->shipped_files(0).path(), "other.pt");
  EXPECT_EQ(spec->shipped_files(0).sha256(), Sha("other"));
  // Elsewhere, without the file: the listed entry stands.
  sent_.clear();
  absl::StatusOr<std::string> elsewhere =
      client::ShipLocalFiles(*moved, dir_ + "/nowhere", Uploader(), progress_);
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status();
  EXPECT_EQ(*elsewhere, *moved);
  EXPECT_TRUE(sent_.empty());
}

TEST_F(ShipLocalFilesTest, PathsWithYamlSyntaxSurviveTheRewrite) {
  for (const std::string& name :
       {std::string("my model.pt"), std::string("a: b #c.pt"), std::string("{x}, [y].pt"),
        std::string("\"quoted\".pt"), std::string("é.pt")}) {
    Write(name, "weights");
    YAML::Emitter quoted;
    quoted << YAML::DoubleQuoted << name;
    const std::string text = std::string("model: {type: torchscript, path: ") + quoted.c_str() +
                             "}\ndata: {train_images: /a, train_labels: /b}\n";
    absl::StatusOr<std::string> shipped = client::ShipLocalFiles(text, dir_, Uploader(), progress_);
    ASSERT_TRUE(shipped.ok()) << name << ": " << shipped.status();
    absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(*shipped);
    ASSERT_TRUE(spec.ok()) << name << ": " << spec.status() << "\n" << *shipped;
    EXPECT_EQ(spec->model().path(), name);
    ASSERT_EQ(spec->shipped_files_size(), 1);
    EXPECT_EQ(spec->shipped_files(0).path(), name);
  }
}

TEST_F(ShipLocalFilesTest, WhatCannotBeShippedIsNamed) {
  std::filesystem::create_directory(dir_ + "/shards");
  struct Case {
    std::string data, error;
  };
  for (const Case& c : std::vector<Case>{
           {"{format: csv, train_path: missing.csv}",
            "data.train_path: missing.csv: No such file or directory"},
           {"{format: csv, train_path: shards}",
            "data.train_path: shards: is not a regular file"},
           {"{format: csv, train_path: 'shards/*.csv'}",
            "data.train_path: shards/*.csv: No such file or directory"},
       }) {
    absl::StatusOr<std::string> shipped = client::ShipLocalFiles(
        "model: mlp\ndata: " + c.data + "\n", dir_, Uploader(), progress_);
    ASSERT_FALSE(shipped.ok()) << c.data;
    EXPECT_EQ(shipped.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(shipped.status().message()), HasSubstr(c.error));
  }
  EXPECT_TRUE(sent_.empty());
}

TEST_F(ShipLocalFilesTest, AnInvalidSpecIsLeftToTheCoordinator) {
  const std::string text = "model: resnet\ndata: {train_images: a, train_labels: b}\n";
  absl::StatusOr<std::string> shipped = client::ShipLocalFiles(text, dir_, Uploader(), progress_);
  ASSERT_TRUE(shipped.ok());
  EXPECT_EQ(*shipped, text);
  EXPECT_TRUE(sent_.empty());
}

TEST_F(ShipLocalFilesTest, AFailedUploadNamesTheField) {
  Write("model.pt", "weights");
  absl::StatusOr<std::string> shipped = client::ShipLocalFiles(
      "model: {type: torchscript, path: model.pt}\ndata: {train_images: /a, train_labels: /b}\n",
      dir_,
      [](const std::string&, const std::string&, int64_t) -> absl::StatusOr<v1::PutFileResponse> {
        return absl::InvalidArgumentError("a file of 7 bytes is over this coordinator's limit");
      },
      progress_);
  ASSERT_FALSE(shipped.ok());
  EXPECT_THAT(std::string(shipped.status().message()),
              HasSubstr("model.path: model.pt: upload failed: a file of 7 bytes is over"));
}

}  // namespace
}  // namespace trainctl
