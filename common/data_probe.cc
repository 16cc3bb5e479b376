#include "common/data_probe.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace trainctl {
namespace {

absl::Status Unreadable(const std::string& field, const std::string& path) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", path, ": cannot open: ", strerror(errno)));
}

absl::StatusOr<int64_t> IdxCount(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return Unreadable("data.train_labels", path);
  unsigned char header[8];
  const int n = gzread(f, header, sizeof(header));
  gzclose(f);
  if (n != 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.train_labels: ", path, ": too short for IDX"));
  }
  return (int64_t{header[4]} << 24) | (int64_t{header[5]} << 16) |
         (int64_t{header[6]} << 8) | header[7];
}

absl::StatusOr<int64_t> FileBytes(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return Unreadable("data.train_path", path);
  return static_cast<int64_t>(st.st_size);
}

absl::StatusOr<int64_t> CsvRows(const std::string& path, bool header) {
  std::ifstream in(path);
  if (!in) return Unreadable("data.train_path", path);
  int64_t rows = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) ++rows;
  }
  return header && rows > 0 ? rows - 1 : rows;
}

}  // namespace

absl::StatusOr<int64_t> CountTrainSamples(const v1::DataSpec& data) {
  absl::StatusOr<int64_t> n;
  const std::string& format = data.format();
  if (format == "idx") {
    n = IdxCount(data.train_labels());
  } else if (format == "csv") {
    n = CsvRows(data.train_path(), data.header());
  } else if (format == "tokens" || format == "text") {
    absl::StatusOr<int64_t> bytes = FileBytes(data.train_path());
    if (!bytes.ok()) return bytes.status();
    const int64_t width =
        format == "text" ? 1 : (data.token_dtype() == "uint32" ? 4 : 2);
    const int64_t tokens = *bytes / width;
    n = tokens > 0 ? (tokens - 1) / data.seq_len() : 0;
  } else {
    return absl::UnimplementedError(
        absl::StrCat("data.format ", format,
                     ": counting samples needs torch; the ranks compute the "
                     "total steps when the job starts"));
  }
  if (!n.ok()) return n.status();
  int64_t count = *n;
  if (data.train_limit() > 0) count = std::min(count, data.train_limit());
  if (data.eval_fraction() > 0) {
    count -= static_cast<int64_t>(std::llround(count * data.eval_fraction()));
  }
  return count;
}

absl::StatusOr<int64_t> TotalSteps(const v1::JobSpec& spec) {
  absl::StatusOr<int64_t> samples = CountTrainSamples(spec.data());
  if (!samples.ok()) return samples.status();
  const auto& t = spec.training();
  const int64_t per_step =
      t.batch_size() * std::max<int64_t>(1, t.grad_accum_steps());
  int64_t total = (*samples / per_step) * t.epochs();
  if (t.max_steps() > 0) total = std::min(total, t.max_steps());
  return total;
}

}  // namespace trainctl
