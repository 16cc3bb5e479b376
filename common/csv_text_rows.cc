#include "common/csv_text_rows.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/csv_records.h"
#include "common/status_macros.h"

namespace trainctl {

absl::StatusOr<CsvTextRows> ParseCsvTextRows(absl::string_view file_text,
                                             const v1::DataSpec& data, const std::string& field,
                                             const std::string& path, int64_t limit,
                                             bool labels) {
  CsvRecordReader reader(file_text, data.delimiter().empty() ? ',' : data.delimiter()[0]);
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", path, ":", reader.line(), ": ", why));
  };
  CsvTextRows rows;
  std::vector<std::string> fields, header;
  size_t columns = 0, text_at = 0, label_at = 0;
  while (limit <= 0 || static_cast<int64_t>(rows.texts.size()) < limit) {
    absl::StatusOr<bool> more = reader.Next(&fields);
    if (!more.ok()) return bad(more.status().message());
    if (!*more) break;
    if (columns == 0) {
      columns = fields.size();
      if (labels && columns < 2) return bad("has 1 column; a text column and a label column are needed");
      if (data.header()) header = fields;
      ASSIGN_OR_RETURN(text_at, ResolveCsvColumn(data.text_column(), "data.text_column", header,
                                                 columns, 0, path));
      if (labels) {
        ASSIGN_OR_RETURN(label_at, ResolveCsvColumn(data.label_column(), "data.label_column",
                                                    header, columns, columns - 1, path));
        if (text_at == label_at) {
          return absl::InvalidArgumentError(absl::StrCat(
              "data.text_column: is the label column too (column ", text_at, " of ", path,
              "); set data.label_column"));
        }
      }
      if (data.header()) continue;
    }
    if (fields.size() != columns) {
      return bad(absl::StrCat("has ", fields.size(), " columns, expected ", columns));
    }
    if (labels) {
      std::string label(absl::StripAsciiWhitespace(fields[label_at]));
      if (label.empty()) return bad(absl::StrCat("column ", label_at, " (the label) is empty"));
      rows.labels.push_back(std::move(label));
    }
    rows.texts.push_back(std::move(fields[text_at]));
    rows.lines.push_back(reader.line());
  }
  if (rows.texts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", path, ": no data rows"));
  }
  return rows;
}

}  // namespace trainctl
