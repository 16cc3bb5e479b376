#include "common/csv_records.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace trainctl {
namespace {

// Parses the record starting at `*pos` of `text` into `fields`, leaving
// `*pos` after its line end. With `multiline`, a quoted field may hold line
// breaks (counted into `*breaks`); without, a record ends with `text`.
absl::Status ParseRecord(absl::string_view text, size_t* pos, char delimiter, bool multiline,
                         std::vector<std::string>* fields, int64_t* breaks) {
  fields->assign(1, std::string());
  size_t i = *pos;
  bool field_start = true;
  auto at_record_end = [&](size_t at) {
    return at >= text.size() || (multiline && text[at] == '\n') ||
           (multiline && text[at] == '\r' && at + 1 < text.size() && text[at + 1] == '\n');
  };
  while (!at_record_end(i)) {
    const char c = text[i];
    if (c == delimiter) {
      fields->emplace_back();
      field_start = true;
      ++i;
      continue;
    }
    if (c == '"' && field_start) {
      // "" is a quote; the field ends at a lone quote, which must be
      // followed by the delimiter or the end of the record.
      ++i;
      for (;;) {
        if (i >= text.size()) return absl::InvalidArgumentError("a quoted field is not closed");
        if (text[i] == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            fields->back().push_back('"');
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        if (text[i] == '\n') ++*breaks;
        fields->back().push_back(text[i++]);
      }
      if (!at_record_end(i) && text[i] != delimiter) {
        return absl::InvalidArgumentError("text follows a quoted field's closing quote");
      }
      field_start = false;
      continue;
    }
    if (c == '"') {
      return absl::InvalidArgumentError("a quote inside an unquoted field (quote the field)");
    }
    fields->back().push_back(c);
    field_start = false;
    ++i;
  }
  if (i < text.size() && text[i] == '\r') ++i;
  if (i < text.size() && text[i] == '\n') ++i;
  *pos = i;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> SplitCsvRecord(absl::string_view line,
                                                        char delimiter) {
  std::vector<std::string> fields;
  size_t pos = 0;
  int64_t breaks = 0;
  if (absl::Status parsed = ParseRecord(line, &pos, delimiter, false, &fields, &breaks);
      !parsed.ok()) {
    return parsed;
  }
  return fields;
}

absl::StatusOr<size_t> ResolveCsvColumn(const std::string& wanted, const std::string& field,
                                        const std::vector<std::string>& header, size_t columns,
                                        size_t otherwise, const std::string& path) {
  if (wanted.empty()) return otherwise;
  for (size_t c = 0; c < header.size(); ++c) {
    if (absl::StripAsciiWhitespace(header[c]) == wanted) return c;
  }
  size_t index = 0;
  if (absl::SimpleAtoi(wanted, &index)) {
    if (index < columns) return index;
    return absl::InvalidArgumentError(absl::StrCat(field, ": index ", index,
                                                   " is out of range: ", path, " has ",
                                                   columns, " columns (0-based)"));
  }
  return absl::InvalidArgumentError(
      header.empty()
          ? absl::StrCat(field, ": '", wanted, "' is a column name, which needs a header row")
          : absl::StrCat(field, ": no column named '", wanted, "' in the header of ", path,
                         " (the header has ", columns, " columns)"));
}

CsvRecordReader::CsvRecordReader(absl::string_view text, char delimiter)
    : text_(text), delimiter_(delimiter) {
  if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
}

absl::StatusOr<bool> CsvRecordReader::Next(std::vector<std::string>* fields) {
  for (;;) {
    if (pos_ >= text_.size()) return false;
    // A blank line (spaces at most) is no record.
    size_t end = text_.find('\n', pos_);
    if (end == absl::string_view::npos) end = text_.size();
    if (absl::StripAsciiWhitespace(text_.substr(pos_, end - pos_)).empty()) {
      pos_ = end + 1;
      ++next_line_;
      continue;
    }
    record_line_ = next_line_;
    int64_t breaks = 0;
    if (absl::Status parsed = ParseRecord(text_, &pos_, delimiter_, true, fields, &breaks);
        !parsed.ok()) {
      return parsed;
    }
    next_line_ += 1 + breaks;
    return true;
  }
}

}  // namespace trainctl
