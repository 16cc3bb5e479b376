// format csv: numeric columns, one of them the label.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "common/vocabulary.h"
#include "worker/train/data/in_memory.h"
#include "worker/train/data/readers.h"

namespace trainctl::train {
namespace {

// Header names may be quoted by spreadsheet exports; numeric cells may not.
std::string HeaderName(absl::string_view cell) {
  cell = absl::StripAsciiWhitespace(cell);
  if (cell.size() >= 2 && cell.front() == '"' && cell.back() == '"') {
    cell = cell.substr(1, cell.size() - 2);
  }
  return std::string(cell);
}

absl::StatusOr<int64_t> ResolveLabelColumn(
    const std::string& wanted, const std::vector<std::string>& names,
    int64_t ncols, bool header, const std::string& path) {
  if (wanted.empty()) return ncols - 1;
  if (header) {
    auto it = std::find(names.begin(), names.end(), wanted);
    if (it != names.end()) return it - names.begin();
  }
  int64_t index = 0;
  if (absl::SimpleAtoi(wanted, &index)) {
    if (index >= 0 && index < ncols) return index;
    return absl::InvalidArgumentError(absl::StrCat(
        "data.label_column: index ", index, " is out of range: ", path, " has ",
        ncols, " columns (0-based)"));
  }
  if (header) {
    // The name is the spec's; the header's own names are the file's bytes
    // and never go into a message (security review C1).
    return absl::InvalidArgumentError(absl::StrCat(
        "data.label_column: no column named '", wanted, "' in the header of ",
        path, " (the header has ", ncols, " columns)"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("data.label_column: '", wanted,
                   "' is a column name, which needs data.header: true"));
}

}  // namespace

absl::StatusOr<LoadedSet> ReadCsv(const ReadRequest& req,
                                  const v1::DataSpec& data) {
  const bool regression = req.task == Task::kRegression;
  if (req.task == Task::kLanguageModel) {
    return absl::InvalidArgumentError(
        "data.format: csv gives one target per row; task language_model "
        "needs tokens, text or tensors");
  }
  ASSIGN_OR_RETURN(std::string text, ReadWholeFile(req.path, req.field));
  const char delim = data.delimiter().empty() ? ',' : data.delimiter()[0];
  // Errors give line and column numbers, never a cell: a data file may be
  // any file the worker can read (security review C1).
  auto bad = [&](int64_t line, const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat(req.field, ": ", req.path, ":", line, ": ", why));
  };
  auto bad_cell = [&](int64_t line, int64_t c, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        req.field, ": line ", line, ", column ", c, " of ", req.path, " ",
        why));
  };

  int64_t ncols = -1;
  int64_t label_col = -1;
  int64_t first_line = 0;  // the line that fixed ncols, for ragged-row errors
  std::vector<std::string> names;
  std::vector<float> features;
  std::vector<int64_t> class_ids;
  std::vector<float> values;
  int64_t rows = 0;
  int64_t max_class = -1;

  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < text.size() && (req.limit <= 0 || rows < req.limit)) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    absl::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (absl::StripAsciiWhitespace(line).empty()) continue;  // e.g. trailing
    std::vector<absl::string_view> cells = absl::StrSplit(line, delim);
    if (ncols < 0) {
      ncols = static_cast<int64_t>(cells.size());
      first_line = line_no;
      if (ncols < 2) {
        return bad(line_no,
                   absl::StrCat("found 1 column with data.delimiter '",
                                std::string(1, delim),
                                "'; need at least one feature and a label"));
      }
      if (data.header()) {
        for (absl::string_view c : cells) names.push_back(HeaderName(c));
      }
      ASSIGN_OR_RETURN(label_col,
                       ResolveLabelColumn(data.label_column(), names, ncols,
                                          data.header(), req.path));
      if (data.header()) continue;
    }
    if (static_cast<int64_t>(cells.size()) != ncols) {
      return bad(line_no,
                 absl::StrCat("has ", cells.size(), " columns, expected ",
                              ncols, " (as on line ", first_line, ")"));
    }
    for (int64_t c = 0; c < ncols; ++c) {
      const absl::string_view cell = absl::StripAsciiWhitespace(cells[c]);
      double v = 0;
      const bool number = absl::SimpleAtod(cell, &v) && std::isfinite(v);
      if (c == label_col && !regression) {
        // Class ids: integers, though "3.0" (pandas output) is accepted.
        if (!number || v < 0 || v != std::floor(v) || v > 2147483647.0) {
          return bad_cell(line_no, c,
                          "is not a non-negative integer class id (the "
                          "label column, task classification)");
        }
        class_ids.push_back(static_cast<int64_t>(v));
        max_class = std::max(max_class, class_ids.back());
        continue;
      }
      if (!number) {
        return bad_cell(line_no, c, "is not a number");
      }
      (c == label_col ? values : features).push_back(static_cast<float>(v));
    }
    ++rows;
  }
  if (rows == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(req.field, ": ", req.path, ": no data rows"));
  }

  const int64_t width = ncols - 1;
  torch::Tensor x =
      torch::from_blob(features.data(), {rows, width}, torch::kFloat32).clone();
  LoadedSet out;
  out.info.input_shape = {width};
  torch::Tensor y;
  if (regression) {
    y = torch::from_blob(values.data(), {rows}, torch::kFloat32).clone();
    out.info.target_width = 1;
  } else {
    y = torch::from_blob(class_ids.data(), {rows}, torch::kInt64).clone();
    out.info.num_classes = max_class + 1;
  }
  out.data = std::make_shared<TensorDataset>(std::move(x), std::move(y));
  return out;
}

}  // namespace trainctl::train
