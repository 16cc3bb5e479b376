#include "worker/support/decoded_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
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
constexpr int kHashDigits = 16;

struct Fd {
  explicit Fd(int fd) : fd(fd) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int fd;
};

bool IsGzip(int fd) {
  unsigned char magic[2] = {0, 0};
  return ::pread(fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

// The gzip trailer's size of the decoded data (modulo 4 GiB): an estimate
// to refuse early what cannot fit.
int64_t DecodedSizeHint(int fd, const struct stat& st) {
  unsigned char b[4];
  if (st.st_size < 18 || ::pread(fd, b, 4, st.st_size - 4) != 4) return 0;
  return int64_t{b[0]} | int64_t{b[1]} << 8 | int64_t{b[2]} << 16 |
         int64_t{b[3]} << 24;
}

uint64_t Fnv1a64(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

bool SameVersion(const struct stat& a, const struct stat& b) {
  return a.st_size == b.st_size && a.st_ino == b.st_ino &&
         a.st_dev == b.st_dev && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
         a.st_mtim.tv_nsec == b.st_mtim.tv_nsec &&
         a.st_ctim.tv_sec == b.st_ctim.tv_sec &&
         a.st_ctim.tv_nsec == b.st_ctim.tv_nsec;
}

// The real path of the file open at `fd`, read back from /proc, so a
// symlink switched meanwhile cannot pair one file's name with another's
// bytes.
absl::StatusOr<std::string> RealPath(int fd) {
  char real[PATH_MAX];
  const std::string link = absl::StrCat("/proc/self/fd/", fd);
  const ssize_t n = ::readlink(link.c_str(), real, sizeof(real) - 1);
  if (n <= 0) return absl::NotFoundError(absl::StrCat(link, ": ", strerror(errno)));
  return std::string(real, static_cast<size_t>(n));
}

// "<version key>-<name without .gz>": readable in `ls`.
absl::StatusOr<std::string> CopyName(int fd, const struct stat& st) {
  absl::StatusOr<std::string> path = RealPath(fd);
  if (!path.ok()) return path.status();
  absl::StatusOr<std::string> key = DecodedFileCache::VersionKey(fd, st);
  if (!key.ok()) return key.status();
  std::string base = path->substr(path->rfind('/') + 1);
  if (absl::EndsWith(base, ".gz")) base.resize(base.size() - 3);
  return absl::StrCat(*key, "-", base);
}

// Only files this class wrote are ever counted or deleted.
bool IsCopyName(const std::string& name) {
  if (name.size() <= kHashDigits || name[kHashDigits] != '-') return false;
  for (int i = 0; i < kHashDigits; ++i) {
    if (!isxdigit(static_cast<unsigned char>(name[i]))) return false;
  }
  return true;
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

absl::StatusOr<std::string> DecodedFileCache::VersionKey(int fd,
                                                        const struct stat& st) {
  absl::StatusOr<std::string> path = RealPath(fd);
  if (!path.ok()) return path.status();
  // ctime too: cp -p and rsync -t can set mtime, nobody sets ctime.
  const std::string identity = absl::StrCat(
      *path, "\n", st.st_size, "\n", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec,
      "\n", st.st_ctim.tv_sec, ".", st.st_ctim.tv_nsec, "\n", st.st_ino, "\n",
      st.st_dev);
  return absl::StrFormat("%016x", Fnv1a64(identity));
}

DecodedFileCache::DecodedFileCache(std::string dir, int64_t limit_bytes,
                                   int64_t free_space_reserve)
    : dir_(std::move(dir)),
      limit_bytes_(limit_bytes),
      free_space_reserve_(free_space_reserve) {}

std::unique_ptr<DecodedFileCache> DecodedFileCache::FromEnvironment() {
  const char* dir = getenv("TRAINCTL_DATA_CACHE_DIR");
  if (dir == nullptr || dir[0] == '\0') return nullptr;
  int64_t mb = 8192;
  const char* limit = getenv("TRAINCTL_DATA_CACHE_MB");
  if (limit != nullptr && !absl::SimpleAtoi(limit, &mb)) return nullptr;
  if (mb <= 0) return nullptr;
  mb = std::min<int64_t>(mb, int64_t{1} << 40);  // no overflow below
  return std::make_unique<DecodedFileCache>(dir, mb << 20);
}

std::string DecodedFileCache::UnusableDirReason() const {
  const size_t slash = dir_.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    if (absl::Status made = MakeDirs(dir_.substr(0, slash)); !made.ok()) {
      return absl::StrCat("cannot create ", dir_, ": ", made.message());
    }
  }
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::StrCat("cannot create ", dir_, ": ", strerror(errno));
  }
  struct stat st;
  if (::lstat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::StrCat(dir_, " is not a directory");
  }
  // Another user able to plant files here could feed ranks any data.
  if (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    return absl::StrCat(dir_, " must belong to uid ", ::geteuid(),
                        " and be writable by no one else");
  }
  return "";
}

DecodedFileCache::Resolved DecodedFileCache::Resolve(
    const std::string& path) const {
  // Not even opened unless regular: opening a FIFO blocks and opening a
  // device can act. The reader then refuses it, naming the field.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return {path, Outcome::kNotCompressed, ""};
  }
  // One descriptor for the checks, the name and the bytes.
  Fd source(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  // An unreadable source is the reader's error to report, naming the field.
  if (source.fd < 0 || ::fstat(source.fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      !IsGzip(source.fd)) {
    return {path, Outcome::kNotCompressed, ""};
  }
  absl::StatusOr<std::string> name = CopyName(source.fd, st);
  if (!name.ok()) return {path, Outcome::kBypassed, std::string(name.status().message())};
  const std::string target = absl::StrCat(dir_, "/", *name);
  if (std::string why = UnusableDirReason(); !why.empty()) {
    return {path, Outcome::kBypassed, why};
  }
  struct stat copy;
  if (::lstat(target.c_str(), &copy) == 0 && S_ISREG(copy.st_mode)) {
    ::utimensat(AT_FDCWD, target.c_str(), nullptr, 0);  // recently used
    ++hits_;
    return {target, Outcome::kHit, "", copy.st_ino};
  }
  const int64_t hint = DecodedSizeHint(source.fd, st);
  if (hint > limit_bytes_) {
    return {path, Outcome::kBypassed,
            absl::StrCat(path, " decodes to more than the cache's ",
                         limit_bytes_ >> 20, " MiB")};
  }
  struct statvfs fs;
  if (::statvfs(dir_.c_str(), &fs) == 0) {
    const int64_t free_bytes = static_cast<int64_t>(fs.f_bavail) * fs.f_frsize;
    if (free_bytes < hint + free_space_reserve_) {
      return {path, Outcome::kBypassed,
              absl::StrCat("only ", free_bytes >> 20, " MiB free in ", dir_)};
    }
  }
  return Store(source.fd, path, target);
}

DecodedFileCache::Resolved DecodedFileCache::Store(
    int source_fd, const std::string& source, const std::string& target) const {
  static std::atomic<int> counter{0};
  const std::string temp =
      absl::StrCat(dir_, "/", kTempPrefix, getpid(), "-", counter++, "-",
                   target.substr(target.rfind('/') + 1));
  Fd out(::open(temp.c_str(),
                O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (out.fd < 0) {
    return {source, Outcome::kBypassed,
            absl::StrCat("cannot create ", temp, ": ", strerror(errno))};
  }
  auto give_up = [&](const std::string& why) {
    ::unlink(temp.c_str());
    return Resolved{source, Outcome::kBypassed, why};
  };
  struct stat before;
  if (::fstat(source_fd, &before) != 0) return give_up(strerror(errno));
  const int in_fd = ::dup(source_fd);
  gzFile in = in_fd < 0 ? nullptr : gzdopen(in_fd, "rb");
  if (in == nullptr) {
    if (in_fd >= 0) ::close(in_fd);
    return give_up(absl::StrCat("cannot read ", source));
  }
  gzbuffer(in, kCopyBuffer);
  std::vector<char> buffer(kCopyBuffer);
  int64_t total = 0;
  std::string failure;
  for (;;) {
    const int n = gzread(in, buffer.data(), static_cast<unsigned>(buffer.size()));
    if (n <= 0) {
      int code = Z_OK;
      const char* message = gzerror(in, &code);
      // Z_BUF_ERROR at the end: the stream stops short (a file still being
      // written, or cut off), which gzread otherwise reports as the end.
      if (n < 0 || code == Z_BUF_ERROR) {
        failure = absl::StrCat(source, ": ", code == Z_BUF_ERROR
                                                 ? "truncated gzip stream"
                                                 : message);
      }
      break;
    }
    total += n;
    if (total > limit_bytes_) {
      failure = absl::StrCat(source, " decodes to more than the cache's ",
                             limit_bytes_ >> 20, " MiB");
      break;
    }
    if (!WriteAll(out.fd, buffer.data(), static_cast<size_t>(n))) {
      failure = absl::StrCat("cannot write ", temp, ": ", strerror(errno));
      break;
    }
  }
  gzclose(in);
  if (!failure.empty()) return give_up(failure);
  struct stat after;
  if (::fstat(source_fd, &after) != 0 || !SameVersion(before, after)) {
    return give_up(absl::StrCat(source, " changed while it was decoded"));
  }
  struct stat written;
  if (::fsync(out.fd) != 0 || ::fstat(out.fd, &written) != 0) {
    return give_up(absl::StrCat("fsync ", temp, ": ", strerror(errno)));
  }
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    return give_up(absl::StrCat("rename to ", target, ": ", strerror(errno)));
  }
  Evict(target);
  ++stored_;
  return {target, Outcome::kStored, "", written.st_ino};
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
    const bool temp = absl::StartsWith(name, kTempPrefix);
    if (!temp && !IsCopyName(name)) continue;
    const std::string path = absl::StrCat(dir_, "/", name);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (temp) {
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
