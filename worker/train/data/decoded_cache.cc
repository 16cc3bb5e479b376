#include "worker/train/data/decoded_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "common/atomic_file.h"

namespace trainctl::train {
namespace {

constexpr char kTempPrefix[] = ".tmp-";
// A temporary copy this old belongs to a writer that died.
constexpr time_t kStaleTempSeconds = 3600;
constexpr size_t kCopyBuffer = 1 << 20;

bool IsGzip(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  unsigned char magic[2] = {0, 0};
  const bool gzip = ::read(fd, magic, 2) == 2 && magic[0] == 0x1f &&
                    magic[1] == 0x8b;
  ::close(fd);
  return gzip;
}

uint64_t Fnv1a64(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

// "<hash of identity>-<name without .gz>": readable in `ls`, unique per
// version of the source.
absl::StatusOr<std::string> CopyName(const std::string& path) {
  char real[PATH_MAX];
  if (::realpath(path.c_str(), real) == nullptr) {
    return absl::NotFoundError(strerror(errno));
  }
  struct stat st;
  if (::stat(real, &st) != 0) return absl::NotFoundError(strerror(errno));
  const std::string identity = absl::StrCat(
      real, "\n", st.st_size, "\n", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec,
      "\n", st.st_ino, "\n", st.st_dev);
  std::string base = real;
  base = base.substr(base.rfind('/') + 1);
  if (absl::EndsWith(base, ".gz")) base.resize(base.size() - 3);
  return absl::StrFormat("%016x-%s", Fnv1a64(identity), base);
}

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

DecodedFileCache::DecodedFileCache(std::string dir, int64_t limit_bytes)
    : dir_(std::move(dir)), limit_bytes_(limit_bytes) {}

std::unique_ptr<DecodedFileCache> DecodedFileCache::FromEnvironment() {
  const char* dir = getenv("TRAINCTL_DATA_CACHE_DIR");
  if (dir == nullptr || dir[0] == '\0') return nullptr;
  int64_t mb = 8192;
  const char* limit = getenv("TRAINCTL_DATA_CACHE_MB");
  if (limit != nullptr && !absl::SimpleAtoi(limit, &mb)) return nullptr;
  if (mb <= 0) return nullptr;
  return std::make_unique<DecodedFileCache>(dir, mb << 20);
}

DecodedFileCache::Resolved DecodedFileCache::Resolve(
    const std::string& path) const {
  if (!IsGzip(path)) return {path, Outcome::kNotCompressed, ""};
  absl::StatusOr<std::string> name = CopyName(path);
  if (!name.ok()) return {path, Outcome::kBypassed, std::string(name.status().message())};
  const std::string target = absl::StrCat(dir_, "/", *name);
  struct stat st;
  if (::lstat(target.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    ::utimensat(AT_FDCWD, target.c_str(), nullptr, 0);  // recently used
    ++hits_;
    return {target, Outcome::kHit, ""};
  }
  const size_t slash = dir_.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    if (absl::Status made = MakeDirs(dir_.substr(0, slash)); !made.ok()) {
      return {path, Outcome::kBypassed,
              absl::StrCat("cannot create ", dir_, ": ", made.message())};
    }
  }
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    return {path, Outcome::kBypassed,
            absl::StrCat("cannot create ", dir_, ": ", strerror(errno))};
  }
  return Store(path, target);
}

DecodedFileCache::Resolved DecodedFileCache::Store(
    const std::string& source, const std::string& target) const {
  static std::atomic<int> counter{0};
  const std::string temp =
      absl::StrCat(dir_, "/", kTempPrefix, getpid(), "-", counter++, "-",
                   target.substr(target.rfind('/') + 1));
  const int fd = ::open(temp.c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return {source, Outcome::kBypassed,
            absl::StrCat("cannot create ", temp, ": ", strerror(errno))};
  }
  auto give_up = [&](const std::string& why) {
    ::close(fd);
    ::unlink(temp.c_str());
    return Resolved{source, Outcome::kBypassed, why};
  };
  gzFile in = gzopen(source.c_str(), "rb");
  if (in == nullptr) return give_up(absl::StrCat("cannot open ", source));
  gzbuffer(in, kCopyBuffer);
  std::vector<char> buffer(kCopyBuffer);
  int64_t total = 0;
  for (;;) {
    const int n = gzread(in, buffer.data(), static_cast<unsigned>(buffer.size()));
    if (n < 0) {
      int code = 0;
      const std::string why = gzerror(in, &code);
      gzclose(in);
      return give_up(absl::StrCat(source, ": ", why));
    }
    if (n == 0) break;
    total += n;
    if (total > limit_bytes_) {
      gzclose(in);
      return give_up(absl::StrCat(source, " decodes to more than the cache's ",
                                  limit_bytes_ >> 20, " MiB"));
    }
    if (!WriteAll(fd, buffer.data(), static_cast<size_t>(n))) {
      const std::string why = strerror(errno);
      gzclose(in);
      return give_up(absl::StrCat("cannot write ", temp, ": ", why));
    }
  }
  gzclose(in);
  if (::fsync(fd) != 0) return give_up(absl::StrCat("fsync ", temp, ": ", strerror(errno)));
  ::close(fd);
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    const std::string why = strerror(errno);
    ::unlink(temp.c_str());
    return {source, Outcome::kBypassed, absl::StrCat("rename to ", target, ": ", why)};
  }
  Evict(target);
  ++stored_;
  return {target, Outcome::kStored, ""};
}

void DecodedFileCache::Evict(const std::string& keep) const {
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return;
  // (last used, size, path), oldest first once sorted.
  std::vector<std::tuple<struct timespec, int64_t, std::string>> copies;
  int64_t total = 0;
  const time_t now = time(nullptr);
  while (const dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = absl::StrCat(dir_, "/", name);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (absl::StartsWith(name, kTempPrefix)) {
      if (now - st.st_mtime > kStaleTempSeconds) ::unlink(path.c_str());
      continue;
    }
    total += st.st_size;
    copies.emplace_back(st.st_mtim, st.st_size, path);
  }
  ::closedir(d);
  std::sort(copies.begin(), copies.end(), [](const auto& a, const auto& b) {
    const auto& ta = std::get<0>(a);
    const auto& tb = std::get<0>(b);
    return std::tie(ta.tv_sec, ta.tv_nsec) < std::tie(tb.tv_sec, tb.tv_nsec);
  });
  for (const auto& [used, size, path] : copies) {
    if (total <= limit_bytes_) break;
    if (path == keep) continue;
    if (::unlink(path.c_str()) == 0) total -= size;
  }
}

}  // namespace trainctl::train
