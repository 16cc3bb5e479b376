#include "worker/train/data/idx.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/data_probe.h"
#include "common/status_macros.h"

namespace trainctl::train {
namespace {

constexpr uint32_t kUbyteLabels = 0x00000801;
constexpr uint32_t kUbyteImages = 0x00000803;
constexpr int64_t kMaxSamples = int64_t{1} << 31;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// An IDX file: its dimensions and its payload (unsigned 8-bit only).
struct IdxFile {
  std::vector<int64_t> dims;
  torch::Tensor data;  // uint8, shaped by dims
};

// Reads `path` (named `shown` in errors) from `file`, which is either the
// path itself or its decoded copy in the cache.
absl::StatusOr<IdxFile> ReadIdxFrom(const std::string& file_path,
                                    const std::string& path, uint32_t magic,
                                    int64_t limit, const std::string& field) {
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", path, ": ", why));
  };
  // A regular file only: a FIFO would block, /dev/zero would never end.
  absl::StatusOr<int> fd = OpenRegularFile(field, file_path);
  if (!fd.ok()) return fd.status();
  // gzdopen reads plain files transparently too, and owns the descriptor.
  GzFile file(gzdopen(*fd, "rb"));
  if (!file) {
    ::close(*fd);
    return fail(absl::StrCat("cannot read: ", strerror(errno)));
  }
  // A large buffer makes inflating tens of megabytes several times faster.
  gzbuffer(file.get(), 1 << 20);
  auto read_u32 = [&](uint32_t* out) {
    unsigned char b[4];
    if (gzread(file.get(), b, 4) != 4) return false;
    *out = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) |
           (uint32_t{b[2]} << 8) | b[3];
    return true;
  };
  uint32_t got_magic = 0;
  if (!read_u32(&got_magic)) return fail("too short for an IDX header");
  // Whether it matched, not what was found: those are the file's first 4
  // bytes, and a data file may be any file the worker can read (C1).
  if (got_magic != magic) {
    return fail(absl::StrCat("not an IDX ",
                             magic == kUbyteImages ? "image" : "label",
                             " file (its first 4 bytes are not the magic 0x",
                             absl::Hex(magic, absl::kZeroPad8), ")"));
  }
  IdxFile idx;
  int64_t total = 1;
  for (uint32_t i = 0; i < (magic & 0xff); ++i) {
    uint32_t d = 0;
    if (!read_u32(&d)) return fail("truncated IDX header");
    if (d == 0 || d > kMaxSamples) return fail("implausible IDX dimension");
    idx.dims.push_back(d);
  }
  if (limit > 0 && limit < idx.dims[0]) idx.dims[0] = limit;
  for (int64_t d : idx.dims) total *= d;
  if (total > (int64_t{1} << 34)) return fail("IDX file too large");
  // Straight into the tensor: no second copy of tens of megabytes.
  idx.data = torch::empty(idx.dims, torch::kUInt8);
  uint8_t* out = idx.data.data_ptr<uint8_t>();
  int64_t done = 0;
  while (done < total) {
    const unsigned chunk =
        static_cast<unsigned>(std::min<int64_t>(total - done, 1 << 30));
    int n = gzread(file.get(), out + done, chunk);
    if (n <= 0) {
      return fail(absl::StrCat("truncated: expected ", total,
                               " payload bytes, got ", done));
    }
    done += n;
  }
  return idx;
}

absl::StatusOr<IdxFile> ReadIdx(const std::string& path, uint32_t magic,
                                int64_t limit, const std::string& field,
                                const DecodedFileCache* cache) {
  if (cache != nullptr) {
    const DecodedFileCache::Resolved copy = cache->Resolve(path);
    if (copy.outcome == DecodedFileCache::Outcome::kBypassed) {
      std::cerr << "data cache not used for " << path << ": " << copy.note
                << std::endl;
    } else if (copy.path != path) {
      absl::StatusOr<IdxFile> cached =
          ReadIdxFrom(copy.path, path, magic, limit, field);
      if (cached.ok()) return cached;
      // A damaged copy must not fail the job: drop it, read the source. (Not
      // if it is gone or replaced meanwhile: that is another rank's copy.)
      struct stat st;
      if (::stat(copy.path.c_str(), &st) == 0 && st.st_ino == copy.inode) {
        std::cerr << "data cache: dropping " << copy.path << " ("
                  << cached.status().message() << ")" << std::endl;
        ::unlink(copy.path.c_str());
      }
    }
  }
  return ReadIdxFrom(path, path, magic, limit, field);
}

}  // namespace

absl::StatusOr<IdxData> LoadIdx(const std::string& images_path,
                                const std::string& labels_path, int64_t limit,
                                const std::string& field,
                                const DecodedFileCache* cache) {
  ASSIGN_OR_RETURN(IdxFile images, ReadIdx(images_path, kUbyteImages, limit,
                                           absl::StrCat(field, "_images"), cache));
  ASSIGN_OR_RETURN(IdxFile labels, ReadIdx(labels_path, kUbyteLabels, limit,
                                           absl::StrCat(field, "_labels"), cache));
  if (images.dims[0] != labels.dims[0]) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, "_labels: ", labels_path, " has ", labels.dims[0],
        " labels but ", images_path, " has ", images.dims[0], " images"));
  }
  IdxData ds;
  // Pixels stay uint8; TensorDataset scales each batch (see kPixelScale).
  ds.inputs = std::move(images.data);
  ds.labels = labels.data.to(torch::kInt64);
  return ds;
}

}  // namespace trainctl::train
