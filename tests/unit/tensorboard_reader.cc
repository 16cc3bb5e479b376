#include "tests/unit/tensorboard_reader.h"

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "trainctl/tensorboard/event.pb.h"
#include "worker/support/tensorboard_writer.h"

namespace trainctl::testing {
namespace {

uint64_t LittleEndian(const std::string& bytes, size_t at, int size) {
  uint64_t value = 0;
  for (int i = size - 1; i >= 0; --i) {
    value = (value << 8) | static_cast<unsigned char>(bytes[at + i]);
  }
  return value;
}

}  // namespace

absl::StatusOr<TensorBoardEventFile> ReadTensorBoardEventFile(
    const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) return bytes.status();
  TensorBoardEventFile file;
  size_t at = 0;
  while (at < bytes->size()) {
    auto fail = [&](absl::string_view what) {
      return absl::DataLossError(absl::StrCat(path, ": record ", file.events,
                                              " at byte ", at, ": ", what));
    };
    if (bytes->size() - at < 12) return fail("truncated header");
    const uint64_t length = LittleEndian(*bytes, at, 8);
    const uint32_t length_crc =
        static_cast<uint32_t>(LittleEndian(*bytes, at + 8, 4));
    if (length_crc != train::MaskCrc32c(train::Crc32c(bytes->substr(at, 8)))) {
      return fail("length CRC does not match");
    }
    if (bytes->size() - at - 12 < length + 4) return fail("truncated data");
    const std::string data = bytes->substr(at + 12, length);
    const uint32_t data_crc =
        static_cast<uint32_t>(LittleEndian(*bytes, at + 12 + length, 4));
    if (data_crc != train::MaskCrc32c(train::Crc32c(data))) {
      return fail("data CRC does not match");
    }
    tensorboard::Event event;
    if (!event.ParseFromString(data)) return fail("not an Event");
    if (file.events == 0) {
      if (event.what_case() != tensorboard::Event::kFileVersion) {
        return fail("the first record has no file_version");
      }
      file.file_version = event.file_version();
    }
    for (const auto& v : event.summary().value()) {
      file.scalars.push_back(
          {v.tag(), event.step(), v.simple_value(), event.wall_time()});
    }
    ++file.events;
    at += 12 + length + 4;
  }
  return file;
}

}  // namespace trainctl::testing
