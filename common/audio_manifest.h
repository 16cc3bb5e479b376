#pragma once

// An audio manifest (data.format audio): a CSV file with a header row, one
// row per sound file, naming the file (data.audio.path_column) and its class
// (data.audio.label_column): an integer id, or a name; other columns are
// ignored. Fields may be quoted as RFC 4180 quotes them ("a, b" and
// "say ""hi""").

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "common/csv_records.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl {

struct AudioManifestRow {
  std::string path;   // as the manifest gives it; see ResolveManifestPath
  std::string label;  // as given, surrounding spaces trimmed; not empty
  int64_t line = 0;   // 1-based line of the file, for errors
};

// The rows of a manifest's `text` (at most `limit` when > 0). Errors are
// INVALID_ARGUMENT "FIELD: FILE: line N: ..." and never quote the file's
// contents (a job may point at a file it should not read out).
absl::StatusOr<std::vector<AudioManifestRow>> ParseAudioManifest(
    absl::string_view text, const v1::AudioSpec& audio, const std::string& field,
    const std::string& file, int64_t limit = 0);

// A training set's classes (every manifest of it, in order): none when
// every label is a class id (an integer in [0, 2^24)), so ids are the
// labels; otherwise the distinct labels in byte order, id i being name i.
// INVALID_ARGUMENT naming `field` past 65536 names.
absl::StatusOr<std::vector<std::string>> AudioClassNames(
    const std::vector<AudioManifestRow>& rows, const std::string& field);

// Each row's class id under `class_names` (AudioClassNames of the training
// set). INVALID_ARGUMENT "FIELD: FILE: line N: ..." for a label that is no
// id (classes by id) or names no class of the training set, unquoted.
absl::StatusOr<std::vector<int64_t>> AudioClassIds(const std::vector<AudioManifestRow>& rows,
                                                   const std::vector<std::string>& class_names,
                                                   const std::string& field,
                                                   const std::string& file);

// A row's path as a reader opens it: absolute as given, relative to the
// manifest's directory otherwise.
std::string ResolveManifestPath(const std::string& manifest, const std::string& path);

}  // namespace trainctl
