#include "common/audio_manifest.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace trainctl {
namespace {

// The largest class id a model may have (model.num_classes' bound).
constexpr int64_t kMaxClassId = (int64_t{1} << 24) - 1;
// Classes by name: more than any classifier head a spec makes sense of.
constexpr size_t kMaxClassNames = size_t{1} << 16;

bool ClassId(absl::string_view label, int64_t* id) {
  return absl::SimpleAtoi(label, id) && *id >= 0 && *id <= kMaxClassId;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> SplitCsvRecord(absl::string_view line,
                                                        char delimiter) {
  std::vector<std::string> fields(1);
  size_t i = 0;
  bool field_start = true;
  while (i < line.size()) {
    const char c = line[i];
    if (c == delimiter) {
      fields.emplace_back();
      field_start = true;
      ++i;
      continue;
    }
    if (c == '"' && field_start) {
      // A quoted field: "" is a quote; it ends at a lone quote, which must
      // be followed by the delimiter or the end of the record.
      ++i;
      for (;;) {
        if (i >= line.size()) return absl::InvalidArgumentError("a quoted field is not closed");
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            fields.back().push_back('"');
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        fields.back().push_back(line[i++]);
      }
      if (i < line.size() && line[i] != delimiter) {
        return absl::InvalidArgumentError("text follows a quoted field's closing quote");
      }
      field_start = false;
      continue;
    }
    if (c == '"') {
      return absl::InvalidArgumentError("a quote inside an unquoted field (quote the field)");
    }
    fields.back().push_back(c);
    field_start = false;
    ++i;
  }
  return fields;
}

absl::StatusOr<std::vector<AudioManifestRow>> ParseAudioManifest(
    absl::string_view text, const v1::AudioSpec& audio, const std::string& field,
    const std::string& file, int64_t limit) {
  const std::string where = absl::StrCat(field, ": ", file);
  constexpr absl::string_view kByteOrderMark = "\xEF\xBB\xBF";
  if (text.substr(0, kByteOrderMark.size()) == kByteOrderMark) {
    text.remove_prefix(kByteOrderMark.size());
  }
  std::vector<AudioManifestRow> rows;
  int path_at = -1, label_at = -1;
  size_t columns = 0;
  int64_t line_number = 0;
  while (!text.empty() && (limit <= 0 || static_cast<int64_t>(rows.size()) < limit)) {
    const size_t end = std::min(text.find('\n'), text.size());
    absl::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const std::string at = absl::StrCat(where, ": line ", line_number, ": ");
    absl::StatusOr<std::vector<std::string>> fields = SplitCsvRecord(line);
    if (!fields.ok()) return absl::InvalidArgumentError(at + std::string(fields.status().message()));
    if (columns == 0) {
      // The header: column names are matched with surrounding spaces trimmed.
      for (size_t c = 0; c < fields->size(); ++c) {
        const absl::string_view name = absl::StripAsciiWhitespace((*fields)[c]);
        if (name == audio.path_column() && path_at < 0) path_at = static_cast<int>(c);
        if (name == audio.label_column() && label_at < 0) label_at = static_cast<int>(c);
      }
      if (path_at < 0 || label_at < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            at, "the header row names no column ",
            path_at < 0 ? audio.path_column() : audio.label_column(),
            path_at < 0 ? " (data.audio.path_column)" : " (data.audio.label_column)"));
      }
      columns = fields->size();
      continue;
    }
    if (fields->size() != columns) {
      return absl::InvalidArgumentError(absl::StrCat(
          at, "has ", fields->size(), " fields but the header row has ", columns));
    }
    AudioManifestRow row;
    row.line = line_number;
    row.path = (*fields)[static_cast<size_t>(path_at)];
    if (row.path.empty()) return absl::InvalidArgumentError(at + "the path is empty");
    row.label = std::string(absl::StripAsciiWhitespace((*fields)[static_cast<size_t>(label_at)]));
    if (row.label.empty()) return absl::InvalidArgumentError(at + "the label is empty");
    rows.push_back(std::move(row));
  }
  if (columns == 0) return absl::InvalidArgumentError(where + ": has no header row");
  if (rows.empty()) return absl::InvalidArgumentError(where + ": lists no sound files");
  return rows;
}

absl::StatusOr<std::vector<std::string>> AudioClassNames(
    const std::vector<AudioManifestRow>& rows, const std::string& field) {
  int64_t id = 0;
  const bool by_id = std::all_of(rows.begin(), rows.end(), [&](const AudioManifestRow& row) {
    return ClassId(row.label, &id);
  });
  if (by_id) return std::vector<std::string>();
  std::set<std::string> names;
  for (const AudioManifestRow& row : rows) {
    names.insert(row.label);
    if (names.size() > kMaxClassNames) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": its labels name more than ", kMaxClassNames, " classes"));
    }
  }
  return std::vector<std::string>(names.begin(), names.end());
}

absl::StatusOr<std::vector<int64_t>> AudioClassIds(const std::vector<AudioManifestRow>& rows,
                                                   const std::vector<std::string>& class_names,
                                                   const std::string& field,
                                                   const std::string& file) {
  std::vector<int64_t> ids;
  ids.reserve(rows.size());
  for (const AudioManifestRow& row : rows) {
    int64_t id = 0;
    if (class_names.empty()) {
      if (!ClassId(row.label, &id)) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ": ", file, ": line ", row.line, ": the label is not a class id (an integer "
            "in [0, ", kMaxClassId, "]), as every label of the training set is"));
      }
    } else {
      const auto at = std::lower_bound(class_names.begin(), class_names.end(), row.label);
      if (at == class_names.end() || *at != row.label) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ": ", file, ": line ", row.line,
            ": the label names no class of the training set"));
      }
      id = at - class_names.begin();
    }
    ids.push_back(id);
  }
  return ids;
}

std::string ResolveManifestPath(const std::string& manifest, const std::string& path) {
  if (!path.empty() && path.front() == '/') return path;
  const size_t slash = manifest.rfind('/');
  return slash == std::string::npos ? path : manifest.substr(0, slash + 1) + path;
}

}  // namespace trainctl
