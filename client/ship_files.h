#pragma once

// `trainctl submit`'s upload of the files a spec names by relative paths
// (common/shipped_files.h): each is read beside the spec, uploaded by
// content (Jobs.PutFile), and listed in the spec's shipped_files, so the
// ranks fetch it from the coordinator and no shared filesystem is needed.

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "trainctl/v1/jobs.pb.h"

namespace trainctl::client {

// Sends one file (path on this machine) announced with its digest and size.
using FileUploader = std::function<absl::StatusOr<v1::PutFileResponse>(
    const std::string& path, const std::string& sha256, int64_t size)>;

// The spec text with shipped_files listing every relative file path it
// names, each uploaded through `upload` first; relative paths resolve
// against `base_dir` (the spec file's directory). The text comes back
// unchanged when it names no relative path, or when it is not a valid spec
// (the coordinator then lists its problems). INVALID_ARGUMENT naming the
// field and path when a file is missing, not a regular file (a directory
// or glob must be an absolute path on the workers) or its upload fails.
// `progress` gets a line per file sent.
absl::StatusOr<std::string> ShipLocalFiles(const std::string& spec_text,
                                           const std::string& base_dir,
                                           const FileUploader& upload,
                                           std::ostream& progress);

}  // namespace trainctl::client
