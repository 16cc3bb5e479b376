#include "worker/support/shard_manifest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "common/data_probe.h"
#include "common/status_macros.h"

namespace trainctl::train {
namespace {

constexpr size_t kReadChunk = size_t{4} << 20;

absl::StatusOr<uint32_t> Crc32(int fd, const std::string& field,
                               const std::string& path) {
  std::vector<unsigned char> buffer(kReadChunk);
  uLong crc = crc32_z(0L, Z_NULL, 0);
  off_t offset = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buffer.data(), buffer.size(), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": ", path, ": cannot read: ", std::strerror(errno)));
    }
    if (n == 0) break;
    crc = crc32_z(crc, buffer.data(), static_cast<size_t>(n));
    offset += n;
  }
  return static_cast<uint32_t>(crc);
}

// The cached checksum of this version of the file, or computes and keeps it.
absl::StatusOr<uint32_t> CachedCrc32(int fd, const struct stat& st,
                                     const std::string& field,
                                     const std::string& path,
                                     const DecodedFileCache* cache) {
  std::string entry;
  if (cache != nullptr && cache->UnusableDirReason().empty()) {
    absl::StatusOr<std::string> key = DecodedFileCache::VersionKey(fd, st);
    const std::string dir = cache->dir() + "/checksums";
    if (key.ok() && MakeDirs(dir, 0700).ok()) entry = dir + "/" + *key;
  }
  if (!entry.empty()) {
    std::ifstream in(entry);
    uint32_t kept = 0;
    std::string text;
    if (in >> text && absl::SimpleAtoi(text, &kept)) return kept;
  }
  ASSIGN_OR_RETURN(const uint32_t crc, Crc32(fd, field, path));
  // A lost write only means computing it again next time.
  if (!entry.empty()) WriteFileAtomically(entry, absl::StrCat(crc, "\n")).IgnoreError();
  return crc;
}

struct Line {
  std::string field, path, size, crc;
};

std::vector<Line> Parse(const std::string& manifest) {
  std::vector<Line> lines;
  for (absl::string_view text : absl::StrSplit(manifest, '\n', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(text, '\t');
    parts.resize(4);
    lines.push_back({parts[0], parts[1], parts[2], parts[3]});
  }
  return lines;
}

}  // namespace

absl::StatusOr<std::string> ShardManifest(const std::string& field,
                                          const std::vector<std::string>& shards,
                                          const DecodedFileCache* cache) {
  std::string manifest;
  for (const std::string& shard : shards) {
    struct stat st;
    ASSIGN_OR_RETURN(const int fd, OpenRegularFile(field, shard, &st));
    absl::StatusOr<uint32_t> crc = CachedCrc32(fd, st, field, shard, cache);
    ::close(fd);
    if (!crc.ok()) return crc.status();
    absl::StrAppend(&manifest, field, "\t", shard, "\t", st.st_size, "\t", *crc,
                    "\n");
  }
  return manifest;
}

std::string ManifestDifference(const std::string& theirs, int their_rank,
                               const std::string& mine, int rank) {
  if (theirs == mine) return "";
  const std::vector<Line> theirs_lines = Parse(theirs), own = Parse(mine);
  for (size_t i = 0; i < theirs_lines.size() || i < own.size(); ++i) {
    if (i >= own.size()) {
      return absl::StrCat(theirs_lines[i].field, ": shard ", theirs_lines[i].path,
                          " is seen by rank ", their_rank, " but not by rank ", rank);
    }
    if (i >= theirs_lines.size()) {
      return absl::StrCat(own[i].field, ": shard ", own[i].path, " is seen by rank ",
                          rank, " but not by rank ", their_rank);
    }
    const Line& a = theirs_lines[i];
    const Line& b = own[i];
    if (a.field != b.field || a.path != b.path) {
      return absl::StrCat(b.field, ": rank ", rank, " sees shard ", b.path,
                          " where rank ", their_rank, " sees ", a.path,
                          " (the nodes list different files)");
    }
    if (a.size != b.size) {
      return absl::StrCat(b.field, ": shard ", b.path, " is ", b.size,
                          " bytes on rank ", rank, " but ", a.size, " on rank ",
                          their_rank, " (the nodes hold different files)");
    }
    if (a.crc != b.crc) {
      return absl::StrCat(b.field, ": shard ", b.path, " has the same size on rank ",
                          rank, " and rank ", their_rank, " but different contents (the nodes "
                          "hold different files)");
    }
  }
  return absl::StrCat("the data's shards differ between rank ", rank, " and rank ", their_rank);
}

}  // namespace trainctl::train
