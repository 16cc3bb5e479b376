#include "common/data_probe_text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/csv_text_rows.h"
#include "common/status_macros.h"
#include "common/tokenizer_client.h"

namespace trainctl {
namespace {

struct CloseFd {
  int fd;
  ~CloseFd() { ::close(fd); }
};

absl::Status OverLimit(const std::string& field, const std::string& path,
                       const DataProbeLimits& limits, const char* what_the_ranks_do) {
  return absl::ResourceExhaustedError(absl::StrCat(field, ": ", path,
                                                   " is over the data probe's limit of ",
                                                   limits.max_bytes_read, " bytes; the ranks ",
                                                   what_the_ranks_do, " when the job starts"));
}

}  // namespace

absl::StatusOr<std::string> ReadWithinLimit(const std::string& field, const std::string& path,
                                            const DataProbeLimits& limits) {
  struct stat st;
  ASSIGN_OR_RETURN(const int fd, OpenRegularFile(field, path, &st));
  CloseFd owned{fd};
  if (st.st_size > limits.max_bytes_read) return OverLimit(field, path, limits, "count its rows");
  std::string text;
  if (!ReadFullyAt(fd, 0, static_cast<size_t>(st.st_size), &text)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", path, ": cannot read it"));
  }
  return text;
}

absl::StatusOr<int64_t> CsvTextRowCount(const std::string& field, const std::string& path,
                                        const v1::DataSpec& data, int64_t limit,
                                        const DataProbeLimits& limits) {
  ASSIGN_OR_RETURN(const std::string text, ReadWithinLimit(field, path, limits));
  ASSIGN_OR_RETURN(const CsvTextRows rows, ParseCsvTextRows(text, data, field, path, limit));
  return static_cast<int64_t>(rows.texts.size());
}

absl::StatusOr<int64_t> TokenizedTextWindowCount(const std::string& field,
                                                 const std::string& path,
                                                 const v1::DataSpec& data, int64_t limit,
                                                 const DataProbeLimits& limits) {
  struct stat st;
  {
    ASSIGN_OR_RETURN(const int fd, OpenRegularFile(field, path, &st));
    CloseFd owned{fd};
  }
  if (st.st_size > limits.max_bytes_read) {
    return OverLimit(field, path, limits, "tokenize and count it");
  }
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null < 0) return absl::InternalError(absl::StrCat("/dev/null: ", strerror(errno)));
  CloseFd owned{null};
  ASSIGN_OR_RETURN(const int64_t tokens, EncodeTextLines(data.tokenizer(), "data.tokenizer", path,
                                                         field, null, limits.deadline));
  const int64_t seq_len = std::max(1, data.seq_len());
  if (tokens < seq_len + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", path, ": ", tokens, " tokens (data.tokenizer's) is too few for one "
        "window of seq_len ", seq_len, " + 1"));
  }
  const int64_t windows = (tokens - 1) / seq_len;
  return limit > 0 ? std::min(windows, limit) : windows;
}

}  // namespace trainctl
