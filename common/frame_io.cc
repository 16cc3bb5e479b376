#include "common/frame_io.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace trainctl {
namespace {

absl::Status WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::UnavailableError(
          absl::StrCat("write to report pipe failed: ", strerror(errno)));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Returns bytes read: fewer than size only at end of stream.
absl::StatusOr<size_t> ReadAll(int fd, char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = read(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::UnavailableError(
          absl::StrCat("read from report pipe failed: ", strerror(errno)));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

}  // namespace

std::string EncodeFrame(const google::protobuf::MessageLite& message) {
  std::string body = message.SerializeAsString();
  const uint32_t size = static_cast<uint32_t>(body.size());
  const char header[4] = {static_cast<char>(size & 0xff),
                          static_cast<char>((size >> 8) & 0xff),
                          static_cast<char>((size >> 16) & 0xff),
                          static_cast<char>((size >> 24) & 0xff)};
  std::string frame(header, 4);
  frame += body;
  return frame;
}

absl::Status WriteFrame(int fd, const google::protobuf::MessageLite& message) {
  const std::string frame = EncodeFrame(message);
  return WriteAll(fd, frame.data(), frame.size());
}

absl::Status ReadFrame(int fd, google::protobuf::MessageLite* message) {
  unsigned char header[4];
  absl::StatusOr<size_t> got =
      ReadAll(fd, reinterpret_cast<char*>(header), sizeof(header));
  if (!got.ok()) return got.status();
  if (*got == 0) return absl::OutOfRangeError("end of report stream");
  if (*got < 4) return absl::DataLossError("truncated frame header");
  const uint32_t size = header[0] | (header[1] << 8) | (header[2] << 16) |
                        (static_cast<uint32_t>(header[3]) << 24);
  if (size > kMaxFrameBytes) {
    return absl::DataLossError(
        absl::StrCat("frame of ", size, " bytes is over the limit"));
  }
  std::string body(size, '\0');
  got = ReadAll(fd, body.data(), size);
  if (!got.ok()) return got.status();
  if (*got < size) return absl::DataLossError("truncated frame body");
  if (!message->ParseFromString(body)) {
    return absl::DataLossError("frame does not parse");
  }
  return absl::OkStatus();
}

}  // namespace trainctl
