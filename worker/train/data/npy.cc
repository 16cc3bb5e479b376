// format npy: arrays written by NumPy's np.save, read as batches need them.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/data_probe.h"
#include "common/npy_header.h"
#include "common/status_macros.h"
#include "common/vocabulary.h"
#include "worker/train/data/readers.h"
#include "worker/train/data/token_file.h"

namespace trainctl::train {
namespace {

// Rows per read while scanning labels or token ids for their largest value.
constexpr int64_t kScanRows = 1 << 16;

// One open .npy file whose rows are read with pread: nothing is loaded, and
// the page cache is shared by every rank on the node.
class NpyFile {
 public:
  static absl::StatusOr<std::shared_ptr<NpyFile>> Open(const std::string& field,
                                                       const std::string& path) {
    struct stat st;
    ASSIGN_OR_RETURN(const int fd, OpenRegularFile(field, path, &st));
    absl::StatusOr<NpyHeader> header = ReadNpyHeader(fd, st.st_size, field, path);
    if (!header.ok()) {
      ::close(fd);
      return header.status();
    }
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);  // rows come shuffled
    return std::shared_ptr<NpyFile>(new NpyFile(field, path, fd, *header));
  }
  ~NpyFile() { ::close(fd_); }

  const NpyHeader& header() const { return header_; }
  std::string Where() const { return absl::StrCat(field_, ": ", path_); }

  // Rows [first, first + count) converted to `Out`, into out (count *
  // row_elements() values). Throws std::runtime_error naming the file when
  // it shrank since it was opened.
  template <typename Out>
  void ReadRows(int64_t first, int64_t count, std::vector<unsigned char>* bytes,
                Out* out) const {
    const int64_t row_bytes = header_.row_bytes();
    bytes->resize(static_cast<size_t>(count * row_bytes));
    size_t done = 0;
    const off_t start = static_cast<off_t>(header_.data_offset + first * row_bytes);
    while (done < bytes->size()) {
      const ssize_t n = ::pread(fd_, bytes->data() + done, bytes->size() - done,
                                start + static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        throw std::runtime_error(absl::StrCat(
            Where(), ": cannot read row ", first, ": ",
            n == 0 ? "the file is shorter than when it was opened"
                   : std::strerror(errno)));
      }
      done += static_cast<size_t>(n);
    }
    Convert(bytes->data(), count * header_.row_elements(), out);
  }

 private:
  NpyFile(std::string field, std::string path, int fd, NpyHeader header)
      : field_(std::move(field)), path_(std::move(path)), fd_(fd),
        header_(std::move(header)) {}

  template <typename In, typename Out>
  static void Cast(const unsigned char* src, int64_t n, Out* out) {
    for (int64_t i = 0; i < n; ++i) {
      In value;
      std::memcpy(&value, src + i * sizeof(In), sizeof(In));
      out[i] = static_cast<Out>(value);
    }
  }
  template <typename Out>
  void Convert(const unsigned char* src, int64_t n, Out* out) const {
    switch (header_.kind * 16 + header_.item_bytes) {
      case 'f' * 16 + 4: return Cast<float>(src, n, out);
      case 'f' * 16 + 8: return Cast<double>(src, n, out);
      case 'i' * 16 + 1: return Cast<int8_t>(src, n, out);
      case 'i' * 16 + 2: return Cast<int16_t>(src, n, out);
      case 'i' * 16 + 4: return Cast<int32_t>(src, n, out);
      case 'i' * 16 + 8: return Cast<int64_t>(src, n, out);
      case 'u' * 16 + 1: case 'b' * 16 + 1: return Cast<uint8_t>(src, n, out);
      case 'u' * 16 + 2: return Cast<uint16_t>(src, n, out);
      case 'u' * 16 + 4: return Cast<uint32_t>(src, n, out);
      // Over 2^63 becomes negative, which the id and label checks refuse.
      case 'u' * 16 + 8: return Cast<int64_t>(src, n, out);
    }
  }

  std::string field_, path_;
  int fd_;
  NpyHeader header_;
};

bool IsInteger(const NpyHeader& h) { return h.kind != 'f'; }

// The largest value among the first `rows` rows, or INVALID_ARGUMENT naming
// the row of a negative one (a class id or token id must be >= 0).
absl::StatusOr<int64_t> MaxValue(const NpyFile& file, int64_t rows,
                                 const char* what) {
  std::vector<unsigned char> bytes;
  std::vector<int64_t> values;
  int64_t max_value = 0;
  const int64_t per_row = file.header().row_elements();
  try {
    for (int64_t first = 0; first < rows; first += kScanRows) {
      const int64_t count = std::min(kScanRows, rows - first);
      values.resize(static_cast<size_t>(count * per_row));
      file.ReadRows(first, count, &bytes, values.data());
      for (size_t i = 0; i < values.size(); ++i) {
        if (values[i] < 0 || values[i] > std::numeric_limits<int32_t>::max()) {
          // Its row only: the value is bytes of the file (security review C1).
          return absl::InvalidArgumentError(absl::StrCat(
              file.Where(), ": row ", first + static_cast<int64_t>(i) / per_row,
              " has a ", what, " below 0 or over 2^31-1"));
        }
        max_value = std::max(max_value, values[i]);
      }
    }
  } catch (const std::runtime_error& e) {
    return absl::InvalidArgumentError(e.what());
  }
  return max_value;
}

// The shape of `count` rows of `file`: [count, row shape...], a 1-D
// array's rows as [count, 1].
std::vector<int64_t> RowsShape(const NpyHeader& h, int64_t count) {
  std::vector<int64_t> shape = {count};
  shape.insert(shape.end(), h.shape.begin() + std::min<size_t>(1, h.shape.size()),
               h.shape.end());
  if (h.shape.size() == 1) shape.push_back(1);
  return shape;
}

// A named input's array beside the inputs: read per batch like them.
struct NamedNpy {
  std::string name;
  std::shared_ptr<NpyFile> file;
  bool padding_mask = false;  // attention_mask: 0 and 1, a 1 per row
};

// Row i is (inputs row i, labels row i, each named input's row i), all
// read per batch.
class NpyDataset : public Dataset {
 public:
  NpyDataset(std::shared_ptr<NpyFile> inputs, std::shared_ptr<NpyFile> labels,
             int64_t rows, bool class_ids, std::vector<NamedNpy> more = {})
      : inputs_(std::move(inputs)), labels_(std::move(labels)), rows_(rows),
        class_ids_(class_ids), more_(std::move(more)) {}
  int64_t size() const override { return rows_; }

  Batch Gather(const std::vector<int64_t>& indices) const override {
    const int64_t n = static_cast<int64_t>(indices.size());
    const NpyHeader& in = inputs_->header();
    const bool token_ids = IsInteger(in);
    torch::Tensor inputs =
        torch::empty(RowsShape(in, n), token_ids ? torch::kInt64 : torch::kFloat32);
    const NpyHeader& lb = labels_->header();
    const int64_t width = lb.row_elements();
    torch::Tensor targets =
        class_ids_ ? torch::empty({n}, torch::kInt64)
                   : (lb.shape.size() == 1 ? torch::empty({n}, torch::kFloat32)
                                           : torch::empty({n, width}, torch::kFloat32));
    std::vector<unsigned char> bytes;
    const int64_t per_row = in.row_elements();
    for (int64_t r = 0; r < n; ++r) {
      const int64_t i = indices[r];
      if (i < 0 || i >= rows_) {
        throw std::out_of_range(absl::StrCat("row ", i, " of ", rows_));
      }
      if (token_ids) {
        int64_t* out = inputs.data_ptr<int64_t>() + r * per_row;
        inputs_->ReadRows(i, 1, &bytes, out);
        for (int64_t k = 0; k < per_row; ++k) {
          if (out[k] < 0 || out[k] >= vocab_limit_) {
            throw std::runtime_error(absl::StrCat(
                inputs_->Where(), ": row ", i, " has a token id below 0 or ",
                "not below the vocabulary size ", vocab_limit_));
          }
        }
      } else {
        inputs_->ReadRows(i, 1, &bytes, inputs.data_ptr<float>() + r * per_row);
      }
      if (class_ids_) {
        int64_t* out = targets.data_ptr<int64_t>() + r;
        labels_->ReadRows(i, 1, &bytes, out);
        if (*out < 0 || *out >= num_classes_) {
          throw std::runtime_error(absl::StrCat(
              labels_->Where(), ": row ", i, " has a class id below 0 or ",
              "not below ", num_classes_));
        }
      } else {
        labels_->ReadRows(i, 1, &bytes, targets.data_ptr<float>() + r * width);
      }
    }
    Batch batch{inputs, targets};
    for (const NamedNpy& named : more_) {
      batch.more_inputs.emplace_back(named.name, ReadNamed(named, indices, &bytes));
    }
    return batch;
  }

  // `indices`' rows of a named input: int64 for integers and bools, float32
  // for floats. Throws naming the file and row of a padding mask row that
  // is not 0s and 1s with a 1.
  static torch::Tensor ReadNamed(const NamedNpy& named, const std::vector<int64_t>& indices,
                                 std::vector<unsigned char>* bytes) {
    const NpyHeader& h = named.file->header();
    const int64_t n = static_cast<int64_t>(indices.size());
    const int64_t per_row = h.row_elements();
    if (!IsInteger(h)) {
      torch::Tensor out = torch::empty(RowsShape(h, n), torch::kFloat32);
      for (int64_t r = 0; r < n; ++r) {
        named.file->ReadRows(indices[r], 1, bytes, out.data_ptr<float>() + r * per_row);
      }
      return out;
    }
    torch::Tensor out = torch::empty(RowsShape(h, n), torch::kInt64);
    for (int64_t r = 0; r < n; ++r) {
      int64_t* row = out.data_ptr<int64_t>() + r * per_row;
      named.file->ReadRows(indices[r], 1, bytes, row);
      if (!named.padding_mask) continue;
      bool any = false;
      for (int64_t k = 0; k < per_row; ++k) {
        if (row[k] != 0 && row[k] != 1) {
          throw std::runtime_error(absl::StrCat(
              named.file->Where(), ": row ", indices[r],
              " holds a value other than 0 (padding) and 1 (a token)"));
        }
        any = any || row[k] == 1;
      }
      if (!any) {
        throw std::runtime_error(absl::StrCat(named.file->Where(), ": row ", indices[r],
                                              " has no token (all padding)"));
      }
    }
    return out;
  }

  // Set while loading, before the set is shared.
  int64_t vocab_limit_ = std::numeric_limits<int32_t>::max();
  int64_t num_classes_ = std::numeric_limits<int32_t>::max();

 private:
  std::shared_ptr<NpyFile> inputs_, labels_;
  int64_t rows_;
  bool class_ids_;
  std::vector<NamedNpy> more_;
};

// task language_model: a 1-D array of token ids, cut into windows.
absl::StatusOr<LoadedSet> NpyTokens(const ReadRequest& req, const NpyFile& file,
                                    const v1::DataSpec& data) {
  const NpyHeader& h = file.header();
  if (h.shape.size() != 1 || !IsInteger(h) || h.kind == 'b' || h.item_bytes == 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.Where(), ": task language_model needs a 1-D array of token ids "
        "of dtype uint8, uint16, uint32 or int32 (this one is ", h.DtypeName(),
        " with ", h.shape.size(), " dimensions)"));
  }
  TokenFileDataset::Options options;
  options.path = req.path;
  options.field = req.field;
  options.width = h.item_bytes;
  options.seq_len = data.seq_len();
  options.windows = req.limit;
  options.offset = h.data_offset;
  return TokenWindowSet(req, std::move(options));
}

}  // namespace

absl::StatusOr<LoadedSet> ReadNpy(const ReadRequest& req,
                                  const v1::DataSpec& data) {
  ASSIGN_OR_RETURN(std::shared_ptr<NpyFile> inputs, NpyFile::Open(req.field, req.path));
  const NpyHeader& in = inputs->header();
  if (in.shape.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(inputs->Where(), ": holds a single value, not rows"));
  }
  if (req.task == Task::kLanguageModel) return NpyTokens(req, *inputs, data);
  if (req.labels_path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        req.labels_field, ": is required for format npy with task ", TaskName(req.task)));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<NpyFile> labels,
                   NpyFile::Open(req.labels_field, req.labels_path));
  const NpyHeader& lb = labels->header();
  if (lb.shape.empty() || lb.rows() != in.rows()) {
    return absl::InvalidArgumentError(absl::StrCat(
        labels->Where(), ": has ", lb.shape.empty() ? 0 : lb.rows(),
        " rows but ", req.field, " has ", in.rows()));
  }
  const bool class_ids = req.task != Task::kRegression;
  if (class_ids && (lb.shape.size() != 1 || !IsInteger(lb))) {
    return absl::InvalidArgumentError(absl::StrCat(
        labels->Where(), ": task ", TaskName(req.task), " needs a 1-D integer array of "
        "class ids (this one is ", lb.DtypeName(), " with ", lb.shape.size(),
        " dimensions)"));
  }
  if (!class_ids && lb.shape.size() > 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        labels->Where(), ": regression targets must be [N] or [N, k]"));
  }
  const int64_t rows = req.limit > 0 ? std::min(req.limit, in.rows()) : in.rows();
  if (rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat(inputs->Where(), ": has no rows"));
  }
  std::vector<NamedNpy> more;
  for (const ReadRequest::NamedFile& input : req.more_inputs) {
    ASSIGN_OR_RETURN(std::shared_ptr<NpyFile> file, NpyFile::Open(input.field, input.path));
    const NpyHeader& h = file->header();
    if (h.shape.empty() || h.rows() != in.rows()) {
      return absl::InvalidArgumentError(absl::StrCat(
          file->Where(), ": has ", h.shape.empty() ? 0 : h.rows(), " rows but ",
          req.field, " has ", in.rows()));
    }
    const bool mask = input.name == "attention_mask";
    if (mask && (!IsInteger(h) || h.shape.size() < 2)) {
      return absl::InvalidArgumentError(absl::StrCat(
          file->Where(), ": an attention_mask must be an integer or bool array "
          "[N, T] (this one is ", h.DtypeName(), " with ", h.shape.size(), " dimensions)"));
    }
    more.push_back({input.name, std::move(file), mask});
  }
  LoadedSet out;
  if (!more.empty()) {
    out.info.input_names.push_back(req.input_name);
    for (const NamedNpy& named : more) out.info.input_names.push_back(named.name);
  }
  auto dataset =
      std::make_shared<NpyDataset>(inputs, labels, rows, class_ids, std::move(more));
  out.info.input_shape.assign(in.shape.begin() + 1, in.shape.end());
  if (out.info.input_shape.empty()) out.info.input_shape = {1};
  out.info.integer_inputs = IsInteger(in);
  if (out.info.integer_inputs) {
    if (req.vocab_from_declaration) {
      dataset->vocab_limit_ = req.vocab_size;
      out.info.vocab_size = req.vocab_size;
    } else {
      ASSIGN_OR_RETURN(const int64_t max_id, MaxValue(*inputs, rows, "token id"));
      dataset->vocab_limit_ = max_id + 1;
      out.info.vocab_size = max_id + 1;
    }
  }
  if (class_ids) {
    ASSIGN_OR_RETURN(const int64_t max_class, MaxValue(*labels, rows, "class id"));
    dataset->num_classes_ = max_class + 1;
    out.info.num_classes = max_class + 1;
  } else {
    out.info.target_width = lb.shape.size() == 1 ? 1 : lb.shape[1];
  }
  out.data = std::move(dataset);
  return out;
}

}  // namespace trainctl::train
