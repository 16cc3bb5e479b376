#include "worker/train/data/token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "common/data_probe.h"

namespace trainctl::train {
namespace {

constexpr int64_t kMaxId = std::numeric_limits<int32_t>::max();
// Tokens per read while scanning for the largest id.
constexpr int64_t kScanChunk = int64_t{1} << 20;

}  // namespace

absl::StatusOr<std::shared_ptr<TokenFileDataset>> TokenFileDataset::Open(
    Options options) {
  struct stat st;
  absl::StatusOr<int> fd = OpenRegularFile(options.field, options.path, &st);
  if (!fd.ok()) return fd.status();
  auto fail = [&](const std::string& why) {
    ::close(*fd);
    return absl::InvalidArgumentError(
        absl::StrCat(options.field, ": ", options.path, ": ", why));
  };
  const int64_t size = st.st_size - options.offset;
  if (size % options.width != 0) {
    return fail(absl::StrCat(size, " bytes is not a multiple of ",
                             options.width, " (token_dtype uint",
                             options.width * 8, ")"));
  }
  const int64_t tokens = size / options.width;
  const int64_t seq_len = options.seq_len;
  if (seq_len < 1 || tokens < seq_len + 1) {
    return fail(absl::StrCat(tokens, options.width == 1 ? " bytes" : " tokens",
                             " is too few for one window of seq_len ", seq_len,
                             " + 1"));
  }
  int64_t windows = (tokens - 1) / seq_len;
  if (options.windows > 0) windows = std::min(windows, options.windows);
  // Windows are read in a shuffled order: read-ahead would only fetch pages
  // no batch asked for.
  ::posix_fadvise(*fd, 0, 0, POSIX_FADV_RANDOM);
  return std::shared_ptr<TokenFileDataset>(
      new TokenFileDataset(std::move(options), *fd, windows));
}

TokenFileDataset::TokenFileDataset(Options options, int fd, int64_t windows)
    : options_(std::move(options)), fd_(fd), windows_(windows) {}

TokenFileDataset::~TokenFileDataset() { ::close(fd_); }

void TokenFileDataset::ReadTokens(int64_t first, int64_t count,
                                  std::vector<unsigned char>* bytes,
                                  int64_t* out) const {
  const int width = options_.width;
  bytes->resize(static_cast<size_t>(count * width));
  size_t done = 0;
  while (done < bytes->size()) {
    const ssize_t n = ::pread(fd_, bytes->data() + done, bytes->size() - done,
                              static_cast<off_t>(options_.offset +
                                                 first * width + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw std::runtime_error(absl::StrCat(
          options_.field, ": ", options_.path, ": cannot read tokens from ",
          "byte offset ", first * width, ": ",
          n == 0 ? "the file is shorter than when it was opened"
                 : std::strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  const int64_t limit = vocab_limit_ > 0 ? vocab_limit_ : kMaxId + 1;
  const unsigned char* p = bytes->data();
  for (int64_t i = 0; i < count; ++i, p += width) {
    uint32_t id = p[0];
    if (width >= 2) id |= uint32_t{p[1]} << 8;
    if (width == 4) id |= (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
    if (id >= limit) {
      // Its position only: the id is bytes of the file (security review C1).
      throw std::runtime_error(absl::StrCat(
          options_.field, ": ", options_.path, ": token ", first + i,
          " (byte offset ", (first + i) * width, ") has an id ",
          vocab_limit_ > 0
              ? absl::StrCat("of at least model.vocab_size ", vocab_limit_)
              : std::string("over the supported maximum 2^31-1")));
    }
    out[i] = id;
  }
}

Batch TokenFileDataset::Gather(const std::vector<int64_t>& indices) const {
  const int64_t rows = static_cast<int64_t>(indices.size());
  const int64_t seq_len = options_.seq_len;
  torch::Tensor windows = torch::empty({rows, seq_len + 1}, torch::kInt64);
  int64_t* out = windows.data_ptr<int64_t>();
  std::vector<unsigned char> bytes;
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t i = indices[row];
    if (i < 0 || i >= windows_) {
      throw std::out_of_range(absl::StrCat("window ", i, " of ", windows_));
    }
    ReadTokens(i * seq_len, seq_len + 1, &bytes, out + row * (seq_len + 1));
  }
  return {windows.narrow(1, 0, seq_len).contiguous(),
          windows.narrow(1, 1, seq_len).contiguous()};
}

absl::StatusOr<int64_t> TokenFileDataset::MaxId() const {
  const int64_t tokens = windows_ * options_.seq_len + 1;
  std::vector<unsigned char> bytes;
  std::vector<int64_t> ids;
  int64_t max_id = 0;
  try {
    for (int64_t first = 0; first < tokens; first += kScanChunk) {
      const int64_t count = std::min(kScanChunk, tokens - first);
      ids.resize(static_cast<size_t>(count));
      ReadTokens(first, count, &bytes, ids.data());
      max_id = std::max(max_id, *std::max_element(ids.begin(), ids.end()));
    }
  } catch (const std::runtime_error& e) {
    return absl::InvalidArgumentError(e.what());
  }
  return max_id;
}

}  // namespace trainctl::train
