#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainctl {

// Files that are either wholly there or not there at all, for checkpoints.

// Writes `bytes` so that `path` holds either its old content or all of the
// new one, never a part: a temporary name in the same directory
// (".<name>.tmp-<pid>"), fsync, rename over `path`, fsync of the directory.
// `halfway` (tests' fault hook) runs after half of the bytes are written.
// Errors name the path and the failing call; the temporary file is removed.
absl::Status WriteFileAtomically(const std::string& path,
                                 std::string_view bytes,
                                 const std::function<void()>& halfway = {});

struct AtomicWriteOptions {
  unsigned mode = 0644;  // set on the temporary file before any byte
  // Running as root over an existing file: give the new file the old one's
  // owner (a root admin editing a service user's file must not lock the
  // service out of it).
  bool keep_owner = false;
  std::function<void()> halfway;
};
// The same, with the new file's mode (and owner) set before it has content;
// the temporary file is created exclusively and never through a symlink.
absl::Status WriteFileAtomically(const std::string& path,
                                 std::string_view bytes,
                                 const AtomicWriteOptions& options);

// Receives a file's content piece by piece; an error stops the writer.
using ByteSink = std::function<absl::Status(const void* data, size_t size)>;
// The same guarantees for content produced piece by piece, written as it
// comes, never held whole: `produce` hands every piece to the sink it gets
// and returns its own error, or the sink's. `halfway` runs after the
// first piece. On any error nothing is renamed and the temporary is removed.
absl::Status WriteFileAtomicallyStreamed(
    const std::string& path,
    const std::function<absl::Status(const ByteSink& sink)>& produce,
    const AtomicWriteOptions& options);

// The whole file. NOT_FOUND when absent; other failures name the path.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// mkdir -p; directories it creates get `mode` (0755 by default); OK when it
// exists already as a directory.
absl::Status MakeDirs(const std::string& dir, unsigned mode = 0755);

// rm -rf: `path` and, for a directory, everything under it, without
// following symlinks. OK when it does not exist; otherwise the first failure,
// naming the entry. (Here rather than std::filesystem::remove_all: the torch
// 2.x wheel exports a libstdc++ of its own whose copy of that function can
// take the calls of a program linked against it; docs/gpu.md.)
absl::Status RemoveTree(const std::string& path);

// Removes temporary files that writers which died mid-write left in `dir`;
// returns how many were removed.
int RemoveStaleTemporaries(const std::string& dir);

// True when `path` is `dir` itself or lies inside it, after resolving "." and
// ".." lexically (no symlinks followed); both must be absolute.
bool IsInsideDir(const std::string& path, const std::string& dir);

}  // namespace trainctl
