#pragma once

// CSV records as RFC 4180 writes them: fields split at the delimiter, a
// field in double quotes may hold the delimiter, "" for a quote and (in a
// whole file) line breaks. Used by audio manifests and CSV text columns.
// Errors say what is wrong and never quote the text: it is a user's data.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace trainctl {

// One CSV record's fields. Fails (INVALID_ARGUMENT, saying why but quoting
// nothing) on a quote inside an unquoted field, text after a closing quote,
// or an unclosed quote: a record never spans lines.
absl::StatusOr<std::vector<std::string>> SplitCsvRecord(absl::string_view line,
                                                        char delimiter = ',');

// The column `wanted` names (spec field `field`): a header name when
// `header` (the first record) is given, else a 0-based index below
// `columns`; `otherwise` when `wanted` is empty. INVALID_ARGUMENT naming
// the field and `path`, never quoting the header's names (a file's bytes).
absl::StatusOr<size_t> ResolveCsvColumn(const std::string& wanted, const std::string& field,
                                        const std::vector<std::string>& header, size_t columns,
                                        size_t otherwise, const std::string& path);

// The records of a whole CSV text in order. A quoted field may span lines;
// a UTF-8 byte order mark, CRLF line ends and blank lines are accepted.
class CsvRecordReader {
 public:
  CsvRecordReader(absl::string_view text, char delimiter);
  // The next record into `fields`; false at the end of the text. Fails as
  // SplitCsvRecord does (an unclosed quote at the end of the text).
  absl::StatusOr<bool> Next(std::vector<std::string>* fields);
  // The 1-based line the last record began on, for errors.
  int64_t line() const { return record_line_; }

 private:
  absl::string_view text_;
  char delimiter_;
  size_t pos_ = 0;
  int64_t next_line_ = 1;
  int64_t record_line_ = 0;
};

}  // namespace trainctl
