#include "common/audio_manifest.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/class_labels.h"

namespace trainctl {
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
  std::vector<std::string> labels;
  for (const AudioManifestRow& row : rows) labels.push_back(row.label);
  return ClassNamesOf(labels, field);
}

absl::StatusOr<std::vector<int64_t>> AudioClassIds(const std::vector<AudioManifestRow>& rows,
                                                   const std::vector<std::string>& class_names,
                                                   const std::string& field,
                                                   const std::string& file) {
  std::vector<std::string> labels;
  std::vector<int64_t> lines;
  for (const AudioManifestRow& row : rows) {
    labels.push_back(row.label);
    lines.push_back(row.line);
  }
  return ClassIdsOf(labels, lines, class_names, field, file);
}

std::string ResolveManifestPath(const std::string& manifest, const std::string& path) {
  if (!path.empty() && path.front() == '/') return path;
  const size_t slash = manifest.rfind('/');
  return slash == std::string::npos ? path : manifest.substr(0, slash + 1) + path;
}

}  // namespace trainctl
