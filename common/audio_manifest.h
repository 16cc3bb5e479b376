#pragma once

// An audio manifest (data.format audio): a CSV file with a header row, one
// row per sound file, naming the file (data.audio.path_column) and its class
// id (data.audio.label_column); other columns are ignored. Fields may be
// quoted as RFC 4180 quotes them ("a, b" and "say ""hi""").

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl {

struct AudioManifestRow {
  std::string path;  // as the manifest gives it; see ResolveManifestPath
  int64_t label = 0;
  int64_t line = 0;  // 1-based line of the file, for errors
};

// One CSV record's fields. Fails (INVALID_ARGUMENT, saying why but quoting
// nothing) on a quote inside an unquoted field, text after a closing quote,
// or an unclosed quote: a record never spans lines.
absl::StatusOr<std::vector<std::string>> SplitCsvRecord(absl::string_view line,
                                                        char delimiter = ',');

// The rows of a manifest's `text` (at most `limit` when > 0). Errors are
// INVALID_ARGUMENT "FIELD: FILE: line N: ..." and never quote the file's
// contents (a job may point at a file it should not read out).
absl::StatusOr<std::vector<AudioManifestRow>> ParseAudioManifest(
    absl::string_view text, const v1::AudioSpec& audio, const std::string& field,
    const std::string& file, int64_t limit = 0);

// A row's path as a reader opens it: absolute as given, relative to the
// manifest's directory otherwise.
std::string ResolveManifestPath(const std::string& manifest, const std::string& path);

}  // namespace trainctl
