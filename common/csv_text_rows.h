#pragma once

// The rows of a CSV file with a text column (data.format csv with
// data.text_column): each row's text and label, for the ranks, the data
// probe and `trainctl tokenizer train`. Errors are INVALID_ARGUMENT
// "FIELD: FILE:LINE: ..." and never quote a cell.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl {

struct CsvTextRows {
  std::vector<std::string> texts;
  std::vector<std::string> labels;  // surrounding spaces trimmed; empty without labels
  std::vector<int64_t> lines;       // each row's first line in the file
};

// Parses `file_text` (the CSV file `path`, named by spec field `field`) as
// data's header, delimiter, text_column and label_column (default: the
// last column) say, at most `limit` rows when > 0. With `labels` false,
// only the text column is read (a file of one column will do).
absl::StatusOr<CsvTextRows> ParseCsvTextRows(absl::string_view file_text,
                                             const v1::DataSpec& data, const std::string& field,
                                             const std::string& path, int64_t limit = 0,
                                             bool labels = true);

}  // namespace trainctl
