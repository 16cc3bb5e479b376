#include "worker/support/tensorboard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "trainctl/tensorboard/event.pb.h"

namespace trainctl::train {
namespace {

// CRC-32C's polynomial 0x1EDC6F41, bit-reversed (the CRC runs LSB first).
constexpr uint32_t kCastagnoliReversed = 0x82F63B78u;
// TFRecord's mask offset.
constexpr uint32_t kMaskDelta = 0xA282EAD8u;
constexpr char kFileVersion[] = "brain.Event:2";
// Names tried after the plain one is taken, before giving up.
constexpr int kMaxNameSuffix = 100;

std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc >> 1) ^ ((crc & 1) ? kCastagnoliReversed : 0);
    }
    table[i] = crc;
  }
  return table;
}

void AppendLittleEndian(uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) {
    out->push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  }
}

absl::Status ErrnoError(absl::string_view what, const std::string& path,
                        int error) {
  std::string message =
      absl::StrCat(what, " ", path, ": ", std::strerror(error));
  if (error == EACCES || error == EPERM) {
    return absl::PermissionDeniedError(message);
  }
  if (error == ENOSPC) return absl::ResourceExhaustedError(message);
  if (error == ENOENT) return absl::NotFoundError(message);
  return absl::UnavailableError(message);
}

}  // namespace

uint32_t Crc32c(absl::string_view data) {
  static const std::array<uint32_t, 256> table = MakeCrcTable();
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : data) {
    crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8);
  }
  return crc ^ 0xFFFFFFFFu;
}

uint32_t MaskCrc32c(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

std::string FrameRecord(absl::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  AppendLittleEndian(data.size(), 8, &out);
  AppendLittleEndian(MaskCrc32c(Crc32c(out)), 4, &out);
  out.append(data.data(), data.size());
  AppendLittleEndian(MaskCrc32c(Crc32c(data)), 4, &out);
  return out;
}

std::string EventFileName(int64_t unix_seconds, const std::string& host) {
  return absl::StrCat("events.out.tfevents.", unix_seconds, ".", host);
}

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') {
    return "localhost";
  }
  return name;
}

absl::StatusOr<std::unique_ptr<TensorBoardWriter>> TensorBoardWriter::Create(
    const std::string& dir, int64_t unix_seconds, const std::string& host) {
  // Like checkpoints: the worker's user and its group, nobody else.
  if (absl::Status made = MakeDirs(dir, 0750); !made.ok()) return made;
  const std::string base =
      absl::StrCat(dir, "/", EventFileName(unix_seconds, host));
  std::string path = base;
  int fd = -1;
  for (int suffix = 0; suffix <= kMaxNameSuffix; ++suffix) {
    path = suffix == 0 ? base : absl::StrCat(base, ".", suffix);
    // O_EXCL: never append to another run's (or an earlier generation's) file.
    fd = ::open(path.c_str(),
                O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0640);
    if (fd >= 0 || errno != EEXIST) break;
  }
  if (fd < 0) return ErrnoError("cannot create", path, errno);
  std::unique_ptr<TensorBoardWriter> writer(new TensorBoardWriter(fd, path));
  tensorboard::Event event;
  event.set_wall_time(static_cast<double>(unix_seconds));
  event.set_file_version(kFileVersion);
  if (absl::Status s = writer->Append(event.SerializeAsString()); !s.ok()) {
    return s;
  }
  return writer;
}

TensorBoardWriter::~TensorBoardWriter() { ::close(fd_); }

absl::Status TensorBoardWriter::WriteScalars(
    int64_t step, double wall_time_seconds,
    const std::map<std::string, double>& values) {
  tensorboard::Event event;
  event.set_wall_time(wall_time_seconds);
  event.set_step(step);
  tensorboard::Summary* summary = event.mutable_summary();
  for (const auto& [tag, value] : values) {
    tensorboard::Summary::Value* v = summary->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  return Append(event.SerializeAsString());
}

absl::Status TensorBoardWriter::Append(const std::string& event_bytes) {
  const std::string record = FrameRecord(event_bytes);
  const off_t before = ::lseek(fd_, 0, SEEK_END);
  const char* data = record.data();
  size_t left = record.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      // Drop a partial record: a reader would stop at it for good, and every
      // later record would be out of frame.
      if (before >= 0) (void)::ftruncate(fd_, before);
      return ErrnoError("cannot write", path_, error);
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace trainctl::train
