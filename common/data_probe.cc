#include "common/data_probe.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/audio_manifest.h"
#include "common/data_probe_text.h"
#include "common/data_shards.h"
#include "common/npy_header.h"
#include "common/status_macros.h"
#include "common/tokenizer_client.h"
#include "common/webdataset_index.h"

namespace trainctl {
namespace {

constexpr uint32_t kIdxLabelsMagic = 0x00000801;
constexpr uint32_t kIdxImagesMagic = 0x00000803;
constexpr int64_t kMaxIdxDimension = int64_t{1} << 31;  // as the ranks
constexpr size_t kReadChunk = 1 << 16;

class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

absl::Status CheckDeadline(const DataProbeLimits& limits,
                           const std::string& field) {
  if (absl::Now() > limits.deadline) {
    return absl::DeadlineExceededError(absl::StrCat(
        field, ": the data probe ran out of time; the ranks count the "
               "samples when the job starts"));
  }
  return absl::OkStatus();
}

absl::Status NeedsPath(const std::string& field, const std::string& path,
                       const std::string& format) {
  if (path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": is required for format ", format));
  }
  return absl::OkStatus();
}

// The IDX header's first dimension (the sample count) of `path`, gzip or
// raw, after checking its magic. Reads at most 8 decoded bytes.
absl::StatusOr<int64_t> IdxSampleCount(const std::string& field,
                                       const std::string& path,
                                       uint32_t magic) {
  ASSIGN_OR_RETURN(const int fd, OpenRegularFile(field, path));
  ScopedFd owned(fd);
  const int gz_fd = ::dup(fd);
  gzFile file = gz_fd < 0 ? nullptr : gzdopen(gz_fd, "rb");
  if (file == nullptr) {
    if (gz_fd >= 0) ::close(gz_fd);
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", path, ": cannot read: ", strerror(errno)));
  }
  unsigned char header[8];
  const int n = gzread(file, header, sizeof(header));
  gzclose(file);
  if (n != static_cast<int>(sizeof(header))) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", path, ": too short for an IDX header (", n < 0 ? 0 : n,
        " of 8 bytes)"));
  }
  const uint32_t got = (uint32_t{header[0]} << 24) |
                       (uint32_t{header[1]} << 16) |
                       (uint32_t{header[2]} << 8) | header[3];
  // Only whether it matched: the bytes themselves stay unsaid.
  if (got != magic) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", path, ": not an IDX ",
        magic == kIdxImagesMagic ? "image" : "label",
        " file (its first 4 bytes are not the magic 0x",
        absl::Hex(magic, absl::kZeroPad8), ")"));
  }
  const int64_t count = (int64_t{header[4]} << 24) | (int64_t{header[5]} << 16) |
                        (int64_t{header[6]} << 8) | header[7];
  if (count == 0 || count > kMaxIdxDimension) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", path, ": implausible IDX dimension"));
  }
  return count;
}

// Samples of an IDX image/label pair; both files are checked.
absl::StatusOr<int64_t> IdxPairCount(const std::string& prefix,
                                     const std::string& images,
                                     const std::string& labels, int64_t limit,
                                     const DataProbeLimits& limits) {
  const std::string images_field = absl::StrCat(prefix, "_images");
  const std::string labels_field = absl::StrCat(prefix, "_labels");
  RETURN_IF_ERROR(NeedsPath(images_field, images, "idx"));
  RETURN_IF_ERROR(NeedsPath(labels_field, labels, "idx"));
  RETURN_IF_ERROR(CheckDeadline(limits, images_field));
  ASSIGN_OR_RETURN(int64_t n_images,
                   IdxSampleCount(images_field, images, kIdxImagesMagic));
  RETURN_IF_ERROR(CheckDeadline(limits, labels_field));
  ASSIGN_OR_RETURN(int64_t n_labels,
                   IdxSampleCount(labels_field, labels, kIdxLabelsMagic));
  if (limit > 0) {
    n_images = std::min(n_images, limit);
    n_labels = std::min(n_labels, limit);
  }
  if (n_images != n_labels) {
    return absl::InvalidArgumentError(
        absl::StrCat(labels_field, ": ", labels, " has ", n_labels,
                     " labels but ", images, " has ", n_images, " images"));
  }
  return n_images;
}

// Non-blank lines, as the csv reader counts them, read in bounded chunks
// and stopping once `limit` data rows (0 = all) are seen.
absl::StatusOr<int64_t> CsvRowCount(const std::string& field,
                                    const std::string& path, bool header,
                                    int64_t limit,
                                    const DataProbeLimits& limits) {
  struct stat st;
  ASSIGN_OR_RETURN(const int fd, OpenRegularFile(field, path, &st));
  ScopedFd owned(fd);
  auto too_large = [&]() {
    return absl::ResourceExhaustedError(absl::StrCat(
        field, ": ", path, " is over the data probe's limit of ",
        limits.max_bytes_read, " bytes; the ranks count its rows when the "
        "job starts"));
  };
  if (limit <= 0 && st.st_size > limits.max_bytes_read) return too_large();
  const int64_t wanted = limit > 0 ? limit + (header ? 1 : 0) : 0;
  std::vector<char> chunk(kReadChunk);
  int64_t lines = 0;
  int64_t bytes_read = 0;
  bool line_has_text = false;
  for (;;) {
    RETURN_IF_ERROR(CheckDeadline(limits, field));
    const ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": ", path, ": cannot read: ", strerror(errno)));
    }
    if (n == 0) break;
    bytes_read += n;
    for (ssize_t i = 0; i < n; ++i) {
      const char c = chunk[static_cast<size_t>(i)];
      if (c == '\n') {
        if (line_has_text) ++lines;
        line_has_text = false;
        if (wanted > 0 && lines >= wanted) return limit;
      } else if (!absl::ascii_isspace(static_cast<unsigned char>(c))) {
        line_has_text = true;
      }
    }
    // A file may grow while it is read: the limit is on bytes read.
    if (bytes_read > limits.max_bytes_read) return too_large();
  }
  if (line_has_text) ++lines;
  const int64_t rows = header && lines > 0 ? lines - 1 : lines;
  if (rows == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", path, ": no data rows"));
  }
  return limit > 0 ? std::min(rows, limit) : rows;
}

// Next-token windows of a tokens or text file, from its size (text under
// data.tokenizer: data_probe_text.h).
absl::StatusOr<int64_t> WindowCount(const std::string& field,
                                    const std::string& path,
                                    const v1::DataSpec& data, int64_t limit,
                                    const DataProbeLimits& limits) {
  if (data.format() == "text" && !data.tokenizer().empty()) {
    return TokenizedTextWindowCount(field, path, data, limit, limits);
  }
  struct stat st;
  ASSIGN_OR_RETURN(const int fd, OpenRegularFile(field, path, &st));
  ScopedFd owned(fd);
  const bool text = data.format() == "text";
  const bool wide = data.token_dtype() == "uint32";
  const int64_t width = text ? 1 : (wide ? 4 : 2);
  const int64_t size = static_cast<int64_t>(st.st_size);
  if (size % width != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", path, ": ", size, " bytes is not a multiple of ", width,
        " (token_dtype ", wide ? "uint32" : "uint16", ")"));
  }
  const int64_t seq_len = std::max(1, data.seq_len());
  const int64_t tokens = size / width;
  if (tokens < seq_len + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", path, ": ", tokens, text ? " bytes" : " tokens",
        " is too few for one window of seq_len ", seq_len, " + 1"));
  }
  const int64_t windows = (tokens - 1) / seq_len;
  return limit > 0 ? std::min(windows, limit) : windows;
}

// An array that must hold a row for each row of the inputs: the labels,
// or a named input (data.train_inputs).
struct ArrayBeside {
  std::string field, path;
};

// OK when the .npy at `beside` has `rows` rows.
absl::Status CheckRowsBeside(const ArrayBeside& beside, int64_t rows,
                             const std::string& field) {
  struct stat st;
  ASSIGN_OR_RETURN(const int fd, OpenRegularFile(beside.field, beside.path, &st));
  ScopedFd owned(fd);
  ASSIGN_OR_RETURN(const NpyHeader header,
                   ReadNpyHeader(fd, st.st_size, beside.field, beside.path));
  if (header.shape.empty() || header.rows() != rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        beside.field, ": ", beside.path, ": has ",
        header.shape.empty() ? 0 : header.rows(), " rows but ", field, " has ", rows));
  }
  return absl::OkStatus();
}

// Rows of an .npy inputs array checked against its labels array and its
// named inputs' arrays, or, with no labels (task language_model),
// next-token windows of a 1-D array.
absl::StatusOr<int64_t> NpyCount(const std::string& field,
                                 const std::string& path,
                                 const std::string& labels_field,
                                 const std::string& labels_path,
                                 const std::vector<ArrayBeside>& named,
                                 const v1::DataSpec& data, int64_t limit) {
  struct stat st;
  ASSIGN_OR_RETURN(const int fd, OpenRegularFile(field, path, &st));
  ScopedFd owned(fd);
  ASSIGN_OR_RETURN(const NpyHeader inputs,
                   ReadNpyHeader(fd, st.st_size, field, path));
  if (inputs.shape.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", path, ": holds a single value, not rows"));
  }
  int64_t samples = inputs.rows();
  if (labels_path.empty()) {
    const int64_t seq_len = std::max(1, data.seq_len());
    if (inputs.shape.size() != 1 || inputs.rows() < seq_len + 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": ", path, ": a token array must be 1-D with at least one "
          "window of seq_len ", seq_len, " + 1 ids"));
    }
    samples = (inputs.rows() - 1) / seq_len;
  } else {
    RETURN_IF_ERROR(CheckRowsBeside({labels_field, labels_path}, inputs.rows(), field));
  }
  for (const ArrayBeside& input : named) {
    RETURN_IF_ERROR(CheckRowsBeside(input, inputs.rows(), field));
  }
  if (samples < 1) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", path, ": has no rows"));
  }
  return limit > 0 ? std::min(samples, limit) : samples;
}

// format audio: the manifest's rows, each checked as the ranks check it;
// the sound files themselves are opened by the ranks.
absl::StatusOr<int64_t> AudioManifestCount(const std::string& field,
                                           const std::string& path,
                                           const v1::AudioSpec& audio, int64_t limit,
                                           const DataProbeLimits& limits) {
  ASSIGN_OR_RETURN(const std::string text, ReadWithinLimit(field, path, limits));
  ASSIGN_OR_RETURN(const std::vector<AudioManifestRow> rows,
                   ParseAudioManifest(text, audio, field, path, limit));
  return static_cast<int64_t>(rows.size());
}

// One set's samples (train or eval), limit applied.
absl::StatusOr<int64_t> CountSet(const v1::DataSpec& data, bool eval,
                                 const DataProbeLimits& limits) {
  const std::string& format = data.format();
  const int64_t limit = eval ? data.eval_limit() : data.train_limit();
  if (format == "idx") {
    return eval ? IdxPairCount("data.eval", data.eval_images(),
                               data.eval_labels(), limit, limits)
                : IdxPairCount("data.train", data.train_images(),
                               data.train_labels(), limit, limits);
  }
  const std::string field = eval ? "data.eval_path" : "data.train_path";
  const std::string& path = eval ? data.eval_path() : data.train_path();
  const std::string labels_field = eval ? "data.eval_labels" : "data.train_labels";
  const std::string& labels = eval ? data.eval_labels() : data.train_labels();
  RETURN_IF_ERROR(NeedsPath(field, path, format));
  if (format != "csv" && format != "tokens" && format != "text" &&
      format != "npy" && format != "tensors" && format != "webdataset" &&
      format != "audio") {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.format: unknown format '", format,
        "' (expected idx, csv, tokens, text, tensors, npy, webdataset or audio)"));
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> shards,
                   ResolveShards(field, path));
  std::vector<std::string> label_shards;
  if (format == "npy" && !labels.empty()) {
    ASSIGN_OR_RETURN(label_shards, ResolveShards(labels_field, labels));
    if (label_shards.size() != shards.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          labels_field, ": ", labels, ": names ", label_shards.size(),
          " files but ", field, " names ", shards.size()));
    }
  }
  // Named inputs' files, paired with the shards as the labels are.
  std::vector<std::vector<std::string>> input_shards;
  std::vector<std::string> input_fields;
  if (format == "npy") {
    for (const v1::NamedPath& input : eval ? data.eval_inputs() : data.train_inputs()) {
      input_fields.push_back(absl::StrCat(eval ? "data.eval_inputs." : "data.train_inputs.",
                                          input.name()));
      ASSIGN_OR_RETURN(input_shards.emplace_back(),
                       ResolveShards(input_fields.back(), input.path()));
      if (input_shards.back().size() != shards.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            input_fields.back(), ": ", input.path(), ": names ",
            input_shards.back().size(), " files but ", field, " names ", shards.size()));
      }
    }
  }
  // The shards' samples in order; `limit` takes the first of them all.
  int64_t total = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    RETURN_IF_ERROR(CheckDeadline(limits, field));
    const std::string& shard = shards[i];
    const int64_t left = limit > 0 ? limit - total : 0;
    int64_t count = 0;
    if (format == "csv" && !data.text_column().empty()) {
      ASSIGN_OR_RETURN(count, CsvTextRowCount(field, shard, data, left, limits));
    } else if (format == "csv") {
      ASSIGN_OR_RETURN(count, CsvRowCount(field, shard, data.header(), left, limits));
    } else if (format == "tokens" || format == "text") {
      ASSIGN_OR_RETURN(count, WindowCount(field, shard, data, left, limits));
    } else if (format == "audio") {
      ASSIGN_OR_RETURN(count, AudioManifestCount(field, shard, data.audio(), left, limits));
    } else if (format == "webdataset") {
      struct stat st;
      ASSIGN_OR_RETURN(const int fd, OpenRegularFile(field, shard, &st));
      ScopedFd owned(fd);
      ASSIGN_OR_RETURN(const std::vector<WebDatasetSample> samples,
                       IndexWebDatasetTar(fd, st.st_size, field, shard,
                                          limits.deadline));
      count = static_cast<int64_t>(samples.size());
    } else if (format == "npy") {
      std::vector<ArrayBeside> named;
      for (size_t k = 0; k < input_shards.size(); ++k) {
        named.push_back({input_fields[k], input_shards[k][i]});
      }
      ASSIGN_OR_RETURN(count, NpyCount(field, shard, labels_field,
                                       label_shards.empty() ? "" : label_shards[i],
                                       named, data, left));
    } else {
      // tensors: readable and regular is all that can be told without torch.
      ASSIGN_OR_RETURN(const int fd, OpenRegularFile(field, shard));
      ScopedFd owned(fd);
      continue;
    }
    total += count;
    if (limit > 0 && total >= limit) return limit;
  }
  if (format == "tensors") {
    return absl::UnimplementedError(
        absl::StrCat("data.format tensors: counting samples needs torch; the "
                     "ranks count them when the job starts"));
  }
  return total;
}

}  // namespace

bool ReadFullyAt(int fd, int64_t offset, size_t size, std::string* out) {
  out->assign(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, out->data() + done, size - done,
                              static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

absl::StatusOr<int> OpenRegularFile(const std::string& field,
                                    const std::string& path,
                                    struct stat* stat_out) {
  // Refused before open: opening a FIFO blocks and opening a device can act
  // (a watchdog, a tape). Symlinks are followed: data directories use them.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", path, ": cannot open: ", strerror(errno)));
  }
  auto not_regular = [&](mode_t mode) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", path, " is ", FileKind(mode),
                     "; data files must be regular files"));
  };
  if (!S_ISREG(st.st_mode)) return not_regular(st.st_mode);
  // O_NONBLOCK: should it have been swapped for a FIFO meanwhile, open
  // returns at once and fstat refuses it.
  const int fd =
      ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", path, ": cannot open: ", strerror(errno)));
  }
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return not_regular(st.st_mode);
  }
  // Plain blocking reads from here on.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  if (stat_out != nullptr) *stat_out = st;
  return fd;
}

absl::StatusOr<DataSampleCounts> ProbeDataSamples(
    const v1::DataSpec& data, const DataProbeLimits& limits) {
  DataSampleCounts counts;
  if (!data.tokenizer().empty()) {
    // A model that does not load fails here, not at every rank's start.
    RETURN_IF_ERROR(ReadTokenizerInfo(data.tokenizer(), "data.tokenizer", limits.deadline).status());
  }
  ASSIGN_OR_RETURN(const int64_t train, CountSet(data, /*eval=*/false, limits));
  const bool has_eval_set = data.format() == "idx" ? !data.eval_images().empty()
                                                   : !data.eval_path().empty();
  if (has_eval_set) {
    ASSIGN_OR_RETURN(counts.eval_samples, CountSet(data, /*eval=*/true, limits));
    counts.train_samples = train;
    return counts;
  }
  counts.train_samples = train;
  if (data.eval_fraction() > 0) {
    // The ranks' split (dataset.cc SplitOffEval), with its error.
    const int64_t n_eval =
        std::llround(static_cast<double>(train) * data.eval_fraction());
    if (n_eval < 1 || n_eval >= train) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data.eval_fraction: ", data.eval_fraction(), " of ", train,
          " training samples leaves ", n_eval, " for eval and ",
          train - n_eval, " for training; both need at least one"));
    }
    counts.train_samples = train - n_eval;
    counts.eval_samples =
        data.eval_limit() > 0 ? std::min(data.eval_limit(), n_eval) : n_eval;
  }
  return counts;
}

}  // namespace trainctl
