#pragma once

// Security review C1: an error message never carries bytes of a data file.
// FileBytesIn finds them in the forms a reader could print: raw runs of 4+
// bytes, or a 4-byte group as a hex or decimal number (an IDX magic, a
// token id). Shared by data_error_leak_test and data_probe_test.

#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace trainctl::leak_check {

// A marker no message, path or number could hold by chance.
inline constexpr char kSecret[] = "S3CR3T-m4rk3r-Qz9";

// What of `file` shows in `message` ("" if nothing). `dir` (the test's
// temp directory, random characters) is cut out of the message first.
inline std::string FileBytesIn(std::string message, const std::string& file,
                               const std::string& dir) {
  if (!dir.empty()) message = absl::StrReplaceAll(message, {{dir, "<dir>"}});
  if (message.find(kSecret) != std::string::npos) return kSecret;
  for (size_t i = 0; i + 4 <= file.size(); ++i) {
    const std::string run = file.substr(i, 4);
    if (message.find(run) != std::string::npos) {
      return absl::StrCat("the 4 bytes at offset ", i);
    }
    const auto b = [&](size_t k) {
      return static_cast<uint32_t>(static_cast<unsigned char>(file[i + k]));
    };
    const uint32_t big = b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3);
    const uint32_t little = b(3) << 24 | b(2) << 16 | b(1) << 8 | b(0);
    // Short numbers (a count, a line) are fair; these are 6+ digits.
    for (const std::string& number :
         {absl::StrCat(absl::Hex(big)), absl::StrCat(absl::Hex(little)),
          absl::StrCat(big), absl::StrCat(little), absl::StrCat(big + 1ull),
          absl::StrCat(little + 1ull)}) {
      if (number.size() >= 6 && message.find(number) != std::string::npos) {
        return absl::StrCat("the 4 bytes at offset ", i, " as ", number);
      }
    }
  }
  return "";
}

inline void PutLe(std::string* out, uint32_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(char((value >> (8 * i)) & 0xff));
}

// A zip archive (stored, no compression) of one entry named `name`: how a
// torch.save or torch.jit.save file starts, but with a name the readers
// would quote.
inline std::string StoredZip(const std::string& name,
                             const std::string& content) {
  const uint32_t crc = crc32(0, reinterpret_cast<const Bytef*>(content.data()),
                             static_cast<uInt>(content.size()));
  const uint32_t size = static_cast<uint32_t>(content.size());
  std::string zip;
  PutLe(&zip, 0x04034b50, 4);  // local file header
  PutLe(&zip, 20, 2);          // version needed
  PutLe(&zip, 0, 2);           // flags
  PutLe(&zip, 0, 2);           // stored
  PutLe(&zip, 0, 4);           // time, date
  PutLe(&zip, crc, 4);
  PutLe(&zip, size, 4);
  PutLe(&zip, size, 4);
  PutLe(&zip, static_cast<uint32_t>(name.size()), 2);
  PutLe(&zip, 0, 2);  // extra
  zip += name;
  zip += content;
  const uint32_t directory_offset = static_cast<uint32_t>(zip.size());
  PutLe(&zip, 0x02014b50, 4);  // central directory header
  PutLe(&zip, 20, 2);          // made by
  PutLe(&zip, 20, 2);          // needed
  PutLe(&zip, 0, 2);
  PutLe(&zip, 0, 2);
  PutLe(&zip, 0, 4);
  PutLe(&zip, crc, 4);
  PutLe(&zip, size, 4);
  PutLe(&zip, size, 4);
  PutLe(&zip, static_cast<uint32_t>(name.size()), 2);
  PutLe(&zip, 0, 2);  // extra
  PutLe(&zip, 0, 2);  // comment
  PutLe(&zip, 0, 2);  // disk
  PutLe(&zip, 0, 2);  // internal attributes
  PutLe(&zip, 0, 4);  // external attributes
  PutLe(&zip, 0, 4);  // local header offset
  zip += name;
  const uint32_t directory_size =
      static_cast<uint32_t>(zip.size()) - directory_offset;
  PutLe(&zip, 0x06054b50, 4);  // end of central directory
  PutLe(&zip, 0, 2);
  PutLe(&zip, 0, 2);
  PutLe(&zip, 1, 2);
  PutLe(&zip, 1, 2);
  PutLe(&zip, directory_size, 4);
  PutLe(&zip, directory_offset, 4);
  PutLe(&zip, 0, 2);
  return zip;
}

}  // namespace trainctl::leak_check
